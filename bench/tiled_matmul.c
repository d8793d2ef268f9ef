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

static tfc_session *session(tfc_ctx *ctx, tfc_graph *g, double min_flops, int tile)
{
    tfc_session *s;
    if (tfc_session_create(ctx, g, &s) || tfc_session_set_tiling(s, min_flops, tile)) {
        fprintf(stderr, "session: %s\n", tfc_errmsg());
        exit(1);
    }
    return s;
}

/* Pseudo-random A and B in [-1, 1) (one LCG, alternating), in StarPU memory for the bare
 * version; C for its result and R for cblas's. */
static void make_operands(int n, float **A, float **B, float **C, float **R)
{
    size_t nn = (size_t)n * (size_t)n;
    if (starpu_malloc((void **)A, nn * 4) || starpu_malloc((void **)B, nn * 4) ||
        starpu_malloc((void **)C, nn * 4) || !(*R = malloc(nn * 4))) {
        fprintf(stderr, "no memory\n");
        exit(1);
    }
    uint32_t seed = 1;
    for (size_t i = 0; i < nn; i++) {
        seed = seed * 1664525u + 1013904223u;
        (*A)[i] = ((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        seed = seed * 1664525u + 1013904223u;
        (*B)[i] = ((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

enum { T_TFC, T_BARE, T_CBLAS2, T_CBLAS1, T_WHOLE, T_N };

/* The five versions interleaved, the order rotating, reps times after a warm-up (perfmodels,
 * caches, PoCL/OpenBLAS threads); the load average once warm, and the median seconds of each
 * version into med. */
static void time_versions(tfc_session *tiled, tfc_session *whole, struct bench_matmul *mm,
                          struct bare *bare, const float *A, const float *B, float *R, int n,
                          int reps, double load[3], double med[T_N])
{
    double *t[T_N];
    for (int v = 0; v < T_N; v++) t[v] = calloc((size_t)reps, sizeof(double));
    for (int w = 0; w < 2; w++) {
        bench_matmul_run(tiled, mm);
        bare_run(bare);
    }
    bench_load_average(load);
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < T_N; k++) {
            switch ((k + r) % T_N) {
            case T_TFC: t[T_TFC][r] = bench_matmul_run(tiled, mm); break;
            case T_BARE: t[T_BARE][r] = bare_run(bare); break;
            case T_CBLAS2: t[T_CBLAS2][r] = bench_cblas_sgemm(A, B, R, n, n, n, 2); break;
            case T_CBLAS1: t[T_CBLAS1][r] = bench_cblas_sgemm(A, B, R, n, n, n, 1); break;
            default: t[T_WHOLE][r] = bench_matmul_run(whole, mm); break;
            }
        }
    for (int v = 0; v < T_N; v++) {
        med[v] = bench_median(t[v], reps);
        free(t[v]);
    }
}

/* Other tile edges than the chosen one: the measured rule behind TFC_TILE_SIZE=auto. */
static void sweep_edges(tfc_ctx *ctx, struct bench_matmul *mm, int n, int reps)
{
    static const int edges[] = {256, 384, 512, 768, 1024};
    printf("  tile edge sweep (tfc, median of %d):", reps);
    for (int e = 0; e < 5; e++) {
        if (edges[e] >= n) continue;
        tfc_session *s = session(ctx, mm->g, 1, edges[e]);
        bench_matmul_run(s, mm);
        double *t = calloc((size_t)reps, 8);
        for (int r = 0; r < reps; r++) t[r] = bench_matmul_run(s, mm);
        printf(" %d: %.2f ms;", edges[e], bench_median(t, reps) * 1e3);
        free(t);
        tfc_session_destroy(s);
    }
    printf("\n");
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
    float *A, *B, *C, *R;
    make_operands(n, &A, &B, &C, &R);
    struct bench_matmul mm;
    bench_matmul_create(&mm, A, B, n, n, n);

    /* the tiled session with the library's own choice (environment or defaults) */
    tfc_session *tiled;
    if (tfc_session_create(ctx, mm.g, &tiled)) {
        fprintf(stderr, "session: %s\n", tfc_errmsg());
        return 1;
    }
    tfc_session *whole = session(ctx, mm.g, 0, 0);
    double err;
    int tiles = bench_matmul_check(tiled, &mm, A, B, R, n, n, n, &err);
    int grid = (int)lround(sqrt(tiles));
    if (grid * grid != tiles) {
        fprintf(stderr, "unexpected tile count %d (not a square grid)\n", tiles);
        return 1;
    }
    int tile = (n + grid - 1) / grid;
    struct bare bare;
    bare_setup(&bare, A, B, C, n, grid);
    double load0[3], med[T_N];
    time_versions(tiled, whole, &mm, &bare, A, B, R, n, reps, load0, med);
    double m_tfc = med[T_TFC], m_bare = med[T_BARE], m_c2 = med[T_CBLAS2], m_c1 = med[T_CBLAS1];
    double m_whole = med[T_WHOLE], gf = 2.0 * n * (double)n * n * 1e-9;
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
    sweep_edges(ctx, &mm, n, reps);
    printf("tiled_matmul n=%d workers=%u cpu_workers=%u tile=%d tfc_ms=%.3f bare_ms=%.3f "
           "cblas2_ms=%.3f cblas1_ms=%.3f untiled_ms=%.3f vs_cblas2=%.3f vs_bare=%.3f "
           "load1=%.2f\n",
           n, starpu_worker_get_count(), starpu_cpu_worker_get_count(), tile, m_tfc * 1e3,
           m_bare * 1e3, m_c2 * 1e3, m_c1 * 1e3, m_whole * 1e3, m_c2 / m_tfc, m_bare / m_tfc,
           load0[0]);
    tfc_session_destroy(tiled);
    tfc_session_destroy(whole);
    bench_matmul_destroy(&mm);
    starpu_free(A);
    starpu_free(B);
    starpu_free(C);
    free(R);
    tfc_ctx_destroy(ctx);
    return 0;
}
