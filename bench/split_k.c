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

enum { T_SPLIT, T_WHOLE, T_CBLAS2, T_CBLAS1, T_N };

/* The four versions interleaved, the order rotating, reps times after a warm-up; the load
 * average once warm, and the median seconds of each version into med. */
static void time_versions(tfc_session *split, tfc_session *whole, struct bench_matmul *mm,
                          const float *A, const float *B, float *R, int m, int k, int n,
                          int reps, double load[3], double med[T_N])
{
    double *t[T_N];
    for (int v = 0; v < T_N; v++) t[v] = calloc((size_t)reps, sizeof(double));
    for (int w = 0; w < 2; w++) bench_matmul_run(split, mm), bench_matmul_run(whole, mm);
    bench_load_average(load);
    for (int r = 0; r < reps; r++)
        for (int q = 0; q < T_N; q++)
            switch ((q + r) % T_N) {
            case T_SPLIT: t[T_SPLIT][r] = bench_matmul_run(split, mm); break;
            case T_WHOLE: t[T_WHOLE][r] = bench_matmul_run(whole, mm); break;
            case T_CBLAS2: t[T_CBLAS2][r] = bench_cblas_sgemm(A, B, R, m, k, n, 2); break;
            default: t[T_CBLAS1][r] = bench_cblas_sgemm(A, B, R, m, k, n, 1); break;
            }
    for (int v = 0; v < T_N; v++) {
        med[v] = bench_median(t[v], reps);
        free(t[v]);
    }
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
    struct bench_matmul mm;
    bench_matmul_create(&mm, A, B, m, k, n);
    tfc_session *split, *whole;
    if (tfc_session_create(ctx, mm.g, &split) || tfc_session_create(ctx, mm.g, &whole) ||
        tfc_session_set_tiling(whole, 0, 0)) {
        fprintf(stderr, "session: %s\n", tfc_errmsg());
        return 1;
    }
    /* the split session keeps the library's own choice (environment or defaults) */
    double err, load[3], med[T_N];
    int tasks = bench_matmul_check(split, &mm, A, B, R, m, k, n, &err);
    time_versions(split, whole, &mm, A, B, R, m, k, n, reps, load, med);
    double ms = med[T_SPLIT], mw = med[T_WHOLE], m2 = med[T_CBLAS2], m1 = med[T_CBLAS1];
    double gf = 2.0 * m * (double)k * n * 1e-9;
    printf("matmul %dx%dx%d float32, %u StarPU workers (%u CPU), STARPU_SCHED=%s, %d tasks "
           "(chunks of k and their sum), %d repeats, load average %.2f, max rel error %.2g\n",
           m, k, n, starpu_worker_get_count(), starpu_cpu_worker_get_count(),
           getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : "(default)", tasks, reps, load[0],
           err);
    printf("  tfc node, split along k %8.2f ms  %6.1f GFLOP/s\n", ms * 1e3, gf / ms);
    printf("  tfc node, one task      %8.2f ms  %6.1f GFLOP/s\n", mw * 1e3, gf / mw);
    printf("  cblas_sgemm 2 threads   %8.2f ms  %6.1f GFLOP/s\n", m2 * 1e3, gf / m2);
    printf("  cblas_sgemm 1 thread    %8.2f ms  %6.1f GFLOP/s\n", m1 * 1e3, gf / m1);
    printf("split_k m=%d k=%d n=%d workers=%u tasks=%d split_ms=%.3f whole_ms=%.3f "
           "cblas2_ms=%.3f cblas1_ms=%.3f vs_whole=%.3f vs_cblas2=%.3f load1=%.2f\n",
           m, k, n, starpu_worker_get_count(), tasks, ms * 1e3, mw * 1e3, m2 * 1e3, m1 * 1e3,
           mw / ms, m2 / ms, load[0]);
    tfc_session_destroy(split);
    tfc_session_destroy(whole);
    bench_matmul_destroy(&mm);
    free(A), free(B), free(R);
    tfc_ctx_destroy(ctx);
    return 0;
}
