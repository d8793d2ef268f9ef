/* tiled_matmul.c: one N x N x N float32 matmul node (default 2048) run through a tfc session
 * with tiling (sched/tiling.c), against (a) one cblas_sgemm call on 2 OpenBLAS threads, (b) a
 * hand-written StarPU tiled sgemm (starpu_task_insert over starpu_matrix_filter_block /
 * vertical_block partitions, the same tiles, the same scheduler, one-thread BLAS per task), and
 * for reference (c) the node untiled (one task) and one cblas_sgemm on one thread; interleaved
 * repeats, medians. Then the tfc node at other tile edges (the measured rule behind
 * TFC_TILE_SIZE=auto). The tfc runs target the node without fetching it (no 16 MB copy-out;
 * the bare StarPU version copies nothing either). The cblas calls run with StarPU's workers
 * paused (starpu_pause). Usage: tiled_matmul [N] [repeats]
 * The last line is machine-readable ("tiled_matmul key=value ..."). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <starpu.h>
#include "../src/tfc.h"
#define BENCH_CBLAS
#include "benchutil.h"

/* ---- the hand-written StarPU tiled sgemm -------------------------------------------------- */

/* C tile = A row block @ B column block; matrix interfaces: nx = columns (contiguous), ny =
 * rows, ld = row stride (row-major, as our kernels see them). */
static void bare_sgemm(void *buffers[], void *arg)
{
    (void)arg;
    const float *A = (const float *)STARPU_MATRIX_GET_PTR(buffers[0]);
    const float *B = (const float *)STARPU_MATRIX_GET_PTR(buffers[1]);
    float *C = (float *)STARPU_MATRIX_GET_PTR(buffers[2]);
    int m = (int)STARPU_MATRIX_GET_NY(buffers[2]), n = (int)STARPU_MATRIX_GET_NX(buffers[2]);
    int k = (int)STARPU_MATRIX_GET_NX(buffers[0]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A,
                (int)STARPU_MATRIX_GET_LD(buffers[0]), B, (int)STARPU_MATRIX_GET_LD(buffers[1]),
                0.0f, C, (int)STARPU_MATRIX_GET_LD(buffers[2]));
}

static struct starpu_perfmodel bare_model = {.type = STARPU_HISTORY_BASED,
                                             .symbol = "bench_tiled_sgemm"};
static struct starpu_codelet bare_cl = {
    .cpu_funcs = {bare_sgemm}, .nbuffers = 3, .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &bare_model, .name = "bare_sgemm"};

struct bare {
    starpu_data_handle_t a, b, c;
    int g;
};

static void bare_setup(struct bare *x, float *A, float *B, float *C, int n, int g)
{
    x->g = g;
    starpu_matrix_data_register(&x->a, STARPU_MAIN_RAM, (uintptr_t)A, n, n, n, sizeof(float));
    starpu_matrix_data_register(&x->b, STARPU_MAIN_RAM, (uintptr_t)B, n, n, n, sizeof(float));
    starpu_matrix_data_register(&x->c, STARPU_MAIN_RAM, (uintptr_t)C, n, n, n, sizeof(float));
    struct starpu_data_filter rows = {.filter_func = starpu_matrix_filter_vertical_block,
                                      .nchildren = (unsigned)g};
    struct starpu_data_filter cols = {.filter_func = starpu_matrix_filter_block,
                                      .nchildren = (unsigned)g};
    starpu_data_partition(x->a, &rows);        /* A: row blocks */
    starpu_data_partition(x->b, &cols);        /* B: column blocks */
    starpu_data_map_filters(x->c, 2, &rows, &cols); /* C: row block i, then column block j */
}

static double bare_run(struct bare *x)
{
    double t0 = bench_now();
    for (int i = 0; i < x->g; i++)
        for (int j = 0; j < x->g; j++)
            starpu_task_insert(&bare_cl, STARPU_R, starpu_data_get_sub_data(x->a, 1, i),
                               STARPU_R, starpu_data_get_sub_data(x->b, 1, j), STARPU_W,
                               starpu_data_get_sub_data(x->c, 2, i, j), 0);
    starpu_task_wait_for_all();
    return bench_now() - t0;
}

static void bare_teardown(struct bare *x)
{
    starpu_data_unpartition(x->a, STARPU_MAIN_RAM);
    starpu_data_unpartition(x->b, STARPU_MAIN_RAM);
    starpu_data_unpartition(x->c, STARPU_MAIN_RAM);
    starpu_data_unregister(x->a);
    starpu_data_unregister(x->b);
    starpu_data_unregister(x->c);
}

/* ---- tfc ---------------------------------------------------------------------------------- */

static double node_run(tfc_session *s, tfc_tensor **ft, tfc_value **fv, tfc_tensor *c)
{
    double t0 = bench_now();
    if (tfc_session_run(s, 2, ft, fv, 0, NULL, NULL, 1, &c)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    return bench_now() - t0;
}

static tfc_session *session(tfc_ctx *ctx, tfc_graph *g, double min_flops, int tile)
{
    tfc_session *s;
    if (tfc_session_create(ctx, g, &s) || tfc_session_set_tiling(s, min_flops, tile)) {
        fprintf(stderr, "session: %s\n", tfc_errmsg());
        exit(1);
    }
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2048, reps = argc > 2 ? atoi(argv[2]) : 9;
    if (n < 2 || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: tiled_matmul [N >= 2] [repeats 1..1000]\n");
        return 2;
    }
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "%s\n", tfc_errmsg());
        return 1;
    }
    size_t nn = (size_t)n * (size_t)n;
    float *A, *B, *C, *R;
    if (starpu_malloc((void **)&A, nn * 4) || starpu_malloc((void **)&B, nn * 4) ||
        starpu_malloc((void **)&C, nn * 4) || !(R = malloc(nn * 4))) {
        fprintf(stderr, "no memory\n");
        return 1;
    }
    uint32_t seed = 1;
    for (size_t i = 0; i < nn; i++) {
        seed = seed * 1664525u + 1013904223u;
        A[i] = ((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        seed = seed * 1664525u + 1013904223u;
        B[i] = ((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t dims[2] = {n, n};
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, tfc_shape_of(2, dims));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, tfc_shape_of(2, dims));
    tfc_tensor *c = tfc_matmul(g, a, b, 0, 0);
    tfc_value *av, *bv;
    if (tfc_graph_status(g) || tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, dims), A, &av) ||
        tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, dims), B, &bv)) {
        fprintf(stderr, "setup: %s\n", tfc_errmsg());
        return 1;
    }
    tfc_tensor *ft[2] = {a, b};
    tfc_value *fv[2] = {av, bv};

    /* the tiled session with the library's own choice (environment or defaults) */
    tfc_session *tiled;
    if (tfc_session_create(ctx, g, &tiled)) {
        fprintf(stderr, "session: %s\n", tfc_errmsg());
        return 1;
    }
    tfc_session *whole = session(ctx, g, 0, 0);
    tfc_session_stats st0, st1;
    tfc_session_get_stats(tiled, &st0);
    tfc_value *out = NULL;
    if (tfc_session_run(tiled, 2, ft, fv, 1, &c, &out, 0, NULL)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(tiled));
        return 1;
    }
    tfc_session_get_stats(tiled, &st1);
    int tiles = (int)(st1.tasks - st0.tasks), grid = (int)lround(sqrt(tiles));
    if (grid * grid != tiles) {
        fprintf(stderr, "unexpected tile count %d (not a square grid)\n", tiles);
        return 1;
    }
    int tile = (n + grid - 1) / grid;
    /* check the result against one cblas call */
    bench_cblas_sgemm(A, B, R, n, n, n, 2);
    double err = 0;
    const float *O = tfc_value_cdata(out);
    for (size_t i = 0; i < nn; i++) err = fmax(err, fabs(O[i] - R[i]) / (1 + fabs(R[i])));
    tfc_value_destroy(out);
    struct bare bare;
    bare_setup(&bare, A, B, C, n, grid);

    double *t_tfc = calloc((size_t)reps, sizeof(double)), *t_bare = calloc((size_t)reps, 8);
    double *t_c2 = calloc((size_t)reps, 8), *t_c1 = calloc((size_t)reps, 8);
    double *t_whole = calloc((size_t)reps, 8);
    for (int w = 0; w < 2; w++) { /* warm-up (perfmodels, caches, PoCL/OpenBLAS threads) */
        node_run(tiled, ft, fv, c);
        bare_run(&bare);
    }
    double load0[3] = {0, 0, 0};
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf %lf %lf", &load0[0], &load0[1], &load0[2]) != 3) load0[0] = -1;
        fclose(la);
    }
    for (int r = 0; r < reps; r++) { /* interleaved, the order rotating */
        for (int k = 0; k < 5; k++) {
            switch ((k + r) % 5) {
            case 0: t_tfc[r] = node_run(tiled, ft, fv, c); break;
            case 1: t_bare[r] = bare_run(&bare); break;
            case 2: t_c2[r] = bench_cblas_sgemm(A, B, R, n, n, n, 2); break;
            case 3: t_c1[r] = bench_cblas_sgemm(A, B, R, n, n, n, 1); break;
            default: t_whole[r] = node_run(whole, ft, fv, c); break;
            }
        }
    }
    double m_tfc = bench_median(t_tfc, reps), m_bare = bench_median(t_bare, reps);
    double m_c2 = bench_median(t_c2, reps), m_c1 = bench_median(t_c1, reps), m_whole = bench_median(t_whole, reps);
    double gf = 2.0 * n * (double)n * n * 1e-9;
    printf("matmul %dx%dx%d float32, %u StarPU workers (%u CPU), STARPU_SCHED=%s, tiles %d x %d "
           "of %d, %d repeats, load average %.2f %.2f %.2f, max rel error %.2g\n",
           n, n, n, starpu_worker_get_count(), starpu_cpu_worker_get_count(),
           getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : "(default)", grid, grid, tile,
           reps, load0[0], load0[1], load0[2], err);
    printf("  tfc tiled node        %8.2f ms  %6.1f GFLOP/s\n", m_tfc * 1e3, gf / m_tfc);
    printf("  bare StarPU tiled     %8.2f ms  %6.1f GFLOP/s\n", m_bare * 1e3, gf / m_bare);
    printf("  cblas_sgemm 2 threads %8.2f ms  %6.1f GFLOP/s\n", m_c2 * 1e3, gf / m_c2);
    printf("  cblas_sgemm 1 thread  %8.2f ms  %6.1f GFLOP/s\n", m_c1 * 1e3, gf / m_c1);
    printf("  tfc untiled node      %8.2f ms  %6.1f GFLOP/s\n", m_whole * 1e3, gf / m_whole);
    printf("  tfc reaches %.3f of 2-thread cblas, %.3f of bare StarPU tiled (speed ratios)\n",
           m_c2 / m_tfc, m_bare / m_tfc);
    bare_teardown(&bare);

    /* other tile edges: the measured rule behind TFC_TILE_SIZE=auto */
    static const int edges[] = {256, 384, 512, 768, 1024};
    printf("  tile edge sweep (tfc, median of %d):", reps);
    for (int e = 0; e < 5; e++) {
        if (edges[e] >= n) continue;
        tfc_session *s = session(ctx, g, 1, edges[e]);
        node_run(s, ft, fv, c);
        double *t = calloc((size_t)reps, 8);
        for (int r = 0; r < reps; r++) t[r] = node_run(s, ft, fv, c);
        printf(" %d: %.2f ms;", edges[e], bench_median(t, reps) * 1e3);
        free(t);
        tfc_session_destroy(s);
    }
    printf("\n");
    printf("tiled_matmul n=%d workers=%u cpu_workers=%u tile=%d tfc_ms=%.3f bare_ms=%.3f "
           "cblas2_ms=%.3f cblas1_ms=%.3f untiled_ms=%.3f vs_cblas2=%.3f vs_bare=%.3f "
           "load1=%.2f\n",
           n, starpu_worker_get_count(), starpu_cpu_worker_get_count(), tile, m_tfc * 1e3,
           m_bare * 1e3, m_c2 * 1e3, m_c1 * 1e3, m_whole * 1e3, m_c2 / m_tfc, m_bare / m_tfc,
           load0[0]);
    tfc_session_destroy(tiled);
    tfc_session_destroy(whole);
    tfc_value_destroy(av);
    tfc_value_destroy(bv);
    tfc_graph_destroy(g);
    starpu_free(A);
    starpu_free(B);
    starpu_free(C);
    free(R);
    free(t_tfc), free(t_bare), free(t_c2), free(t_c1), free(t_whole);
    tfc_ctx_destroy(ctx);
    return 0;
}
