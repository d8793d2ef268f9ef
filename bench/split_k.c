/* split_k.c: one M x K x N float32 matmul node with a short, narrow output and a long inner
 * dimension (default 256 x 16384 x 256, the shape of X^T dY over a large batch), run through a
 * tfc session whose tiling splits it along k (sched/tiling.c: one task per chunk of k, one
 * reduce task over the partial products), against the same node unsplit (one task), one
 * cblas_sgemm on 2 OpenBLAS threads and on 1 (StarPU's workers paused meanwhile); interleaved
 * repeats, medians. Usage: split_k [M K N] [repeats]
 * The last line is machine-readable ("split_k key=value ..."). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <starpu.h>
#include "../src/tfc.h"
#define BENCH_CBLAS
#include "benchutil.h"

static double node_run(tfc_session *s, tfc_tensor **ft, tfc_value **fv, tfc_tensor *c)
{
    double t0 = bench_now();
    if (tfc_session_run(s, 2, ft, fv, 0, NULL, NULL, 1, &c)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    int m = 256, k = 16384, n = 256, reps = 9;
    if (argc >= 4) m = atoi(argv[1]), k = atoi(argv[2]), n = atoi(argv[3]);
    if (argc == 5 || argc == 2) reps = atoi(argv[argc - 1]);
    if (m < 1 || k < 2 || n < 1 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: split_k [M K N] [repeats 1..1000]\n");
        return 2;
    }
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "%s\n", tfc_errmsg());
        return 1;
    }
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *R = malloc(nc * 4);
    if (!A || !B || !R) {
        fprintf(stderr, "no memory\n");
        return 1;
    }
    uint32_t seed = 1;
    for (size_t i = 0; i < na + nb; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = ((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        if (i < na) A[i] = v;
        else B[i - na] = v;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t da[2] = {m, k}, db[2] = {k, n};
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, tfc_shape_of(2, da));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, tfc_shape_of(2, db));
    tfc_tensor *c = tfc_matmul(g, a, b, 0, 0);
    tfc_value *av, *bv;
    if (tfc_graph_status(g) || tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, da), A, &av) ||
        tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, db), B, &bv)) {
        fprintf(stderr, "setup: %s\n", tfc_errmsg());
        return 1;
    }
    tfc_tensor *ft[2] = {a, b};
    tfc_value *fv[2] = {av, bv};
    tfc_session *split, *whole;
    if (tfc_session_create(ctx, g, &split) || tfc_session_create(ctx, g, &whole) ||
        tfc_session_set_tiling(whole, 0, 0)) {
        fprintf(stderr, "session: %s\n", tfc_errmsg());
        return 1;
    }
    /* the split session keeps the library's own choice (environment or defaults) */
    tfc_session_stats st0, st1;
    tfc_session_get_stats(split, &st0);
    tfc_value *out = NULL;
    if (tfc_session_run(split, 2, ft, fv, 1, &c, &out, 0, NULL)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(split));
        return 1;
    }
    tfc_session_get_stats(split, &st1);
    int tasks = (int)(st1.tasks - st0.tasks);
    bench_cblas_sgemm(A, B, R, m, k, n, 2);
    double err = 0;
    const float *O = tfc_value_cdata(out);
    for (size_t i = 0; i < nc; i++) err = fmax(err, fabs(O[i] - R[i]) / (1 + fabs(R[i])));
    tfc_value_destroy(out);

    double *t_split = calloc((size_t)reps, 8), *t_whole = calloc((size_t)reps, 8);
    double *t_c2 = calloc((size_t)reps, 8), *t_c1 = calloc((size_t)reps, 8);
    for (int w = 0; w < 2; w++) node_run(split, ft, fv, c), node_run(whole, ft, fv, c);
    double load = -1;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &load) != 1) load = -1;
        fclose(la);
    }
    for (int r = 0; r < reps; r++) /* interleaved, the order rotating */
        for (int q = 0; q < 4; q++)
            switch ((q + r) % 4) {
            case 0: t_split[r] = node_run(split, ft, fv, c); break;
            case 1: t_whole[r] = node_run(whole, ft, fv, c); break;
            case 2: t_c2[r] = bench_cblas_sgemm(A, B, R, m, k, n, 2); break;
            default: t_c1[r] = bench_cblas_sgemm(A, B, R, m, k, n, 1); break;
            }
    double ms = bench_median(t_split, reps), mw = bench_median(t_whole, reps);
    double m2 = bench_median(t_c2, reps), m1 = bench_median(t_c1, reps);
    double gf = 2.0 * m * (double)k * n * 1e-9;
    printf("matmul %dx%dx%d float32, %u StarPU workers (%u CPU), STARPU_SCHED=%s, %d tasks "
           "(chunks of k and their sum), %d repeats, load average %.2f, max rel error %.2g\n",
           m, k, n, starpu_worker_get_count(), starpu_cpu_worker_get_count(),
           getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : "(default)", tasks, reps, load,
           err);
    printf("  tfc node, split along k %8.2f ms  %6.1f GFLOP/s\n", ms * 1e3, gf / ms);
    printf("  tfc node, one task      %8.2f ms  %6.1f GFLOP/s\n", mw * 1e3, gf / mw);
    printf("  cblas_sgemm 2 threads   %8.2f ms  %6.1f GFLOP/s\n", m2 * 1e3, gf / m2);
    printf("  cblas_sgemm 1 thread    %8.2f ms  %6.1f GFLOP/s\n", m1 * 1e3, gf / m1);
    printf("split_k m=%d k=%d n=%d workers=%u tasks=%d split_ms=%.3f whole_ms=%.3f "
           "cblas2_ms=%.3f cblas1_ms=%.3f vs_whole=%.3f vs_cblas2=%.3f load1=%.2f\n",
           m, k, n, starpu_worker_get_count(), tasks, ms * 1e3, mw * 1e3, m2 * 1e3, m1 * 1e3,
           mw / ms, m2 / ms, load);
    free(t_split), free(t_whole), free(t_c2), free(t_c1);
    tfc_session_destroy(split);
    tfc_session_destroy(whole);
    tfc_value_destroy(av), tfc_value_destroy(bv);
    tfc_graph_destroy(g);
    free(A), free(B), free(R);
    tfc_ctx_destroy(ctx);
    return 0;
}
