/* test_tiling.c: large matmuls split into tile tasks (sched/tiling.c). A tiled matmul (sizes
 * that are not multiples of the tile, float32 and float64, every transpose) equals a float64
 * reference and the untiled result; the task counts and records show the split; operands of
 * every slot kind (fed, variable, intermediate, the same tensor twice) and chains of tiled
 * nodes work across cached runs; a training step with tiling equals the untiled one; bad
 * TFC_TILE_MIN / TFC_TILE_SIZE values and API arguments are errors. The fused element-wise
 * step after a tiled matmul (bias add, relu, ...; one op too) is tiled with it, and so is a
 * reduction of a tiled tensor (one partial task per tile and one over the partials): results,
 * task counts, fetched intermediates. With an OpenCL worker (STARPU_OPENCL_ON_CPUS=1), and
 * again with a CUDA worker, the tiles also run pinned to it, with the consumers on that worker
 * too and then on the CPU; the fused, matmul and reduce kernels read strided (ld > width)
 * operands on those devices. One handle partitioned into blocks of rows and then into a wider
 * grid, round after round, keeps its values (StarPU's partition codelet sized once). */
#include <math.h>
#include <starpu.h>
#include <string.h>
#include "testutil.h"
#include "../sched/plan.h"
#include "../sched/testing.h"
#include "../codelets/fused.h"
#include "../codelets/kernel.h"

static int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* Deterministic inputs in [-1, 1), never all zero. */
static void fill(double *x, int64_t n, unsigned seed)
{
    uint32_t s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((s >> 8) & 0xffff) / 32768.0 - 1.0;
    }
}

static tfc_value *value_of(enum tfc_dtype dt, int64_t r, int64_t c, const double *x)
{
    tfc_value *v = NULL;
    int64_t dims[2] = {r, c};
    float *f = malloc(sizeof(float) * (size_t)(r * c));
    CU_ASSERT_FATAL(f != NULL);
    for (int64_t i = 0; i < r * c; i++) f[i] = (float)x[i];
    CU_ASSERT_FATAL(tfc_value_from_data(dt, tfc_shape_of(2, dims), dt == TFC_FLOAT32 ? (void *)f
                                                                                   : (void *)x,
                                        &v) == TFC_OK);
    free(f);
    return v;
}

static double at(const tfc_value *v, int64_t i)
{
    return tfc_value_dtype(v) == TFC_FLOAT32 ? ((const float *)tfc_value_cdata(v))[i]
                                             : ((const double *)tfc_value_cdata(v))[i];
}

/* op(A) op(B), row-major, in float64. */
static void ref_mm(const double *A, const double *B, double *C, int64_t m, int64_t k, int64_t n,
                   int ta, int tb)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
            C[i * n + j] = s;
        }
}

/* Max |got - want| / (1 + |want|) over n elements. */
static double max_err(const tfc_value *got, const double *want, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(at(got, i) - want[i]) / (1 + fabs(want[i]));
        if (!(d <= e)) e = d; /* NaN counts */
    }
    return e;
}

static double tol_of(enum tfc_dtype dt)
{
    return dt == TFC_FLOAT32 ? 1e-4 : 1e-12;
}

/* Runs fetch with feeds on a session with the given tiling; returns the fetched value and
 * the number of records named `node` (tasks of that node). */
static tfc_value *run_tiled(tfc_graph *g, double min_flops, int tile, int n_feeds,
                            tfc_tensor *const *ft, tfc_value *const *fv, tfc_tensor *fetch,
                            const char *node, int *n_node_tasks, uint64_t *tasks)
{
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_tiling(s, min_flops, tile) == TFC_OK);
    CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
    tfc_value *out = NULL;
    tfc_status st = tfc_session_run(s, n_feeds, ft, fv, 1, &fetch, &out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    CU_ASSERT_FATAL(st == TFC_OK);
    const tfc_task_record *r = NULL;
    int n = tfc_session_last_records(s, &r), c = 0;
    for (int i = 0; i < n; i++) c += r[i].node && strcmp(r[i].node, node) == 0;
    *n_node_tasks = c;
    tfc_session_stats stats;
    tfc_session_get_stats(s, &stats);
    *tasks = stats.tasks;
    tfc_session_destroy(s);
    return out;
}

/* ---- one matmul node ---------------------------------------------------------------------- */

/* The workers automatic tiling cuts for in this StarPU (the GPUs when there are any). */
static int sharing_workers(void)
{
    return tfc_tile_sharing_workers((int)starpu_worker_get_count(),
                                    (int)starpu_cuda_worker_get_count());
}

/* c = op(a) op(b), C [m, n] over k, with A and B (row-major as stored: [m, k] or [k, m] when
 * ta, [k, n] or [n, k] when tb) as its feeds, in dtype dt. */
struct mm_graph {
    tfc_graph *g;
    tfc_tensor *ft[2], *c;
    tfc_value *fv[2];
};

static void mm_graph_make(struct mm_graph *mg, enum tfc_dtype dt, int64_t m, int64_t k,
                          int64_t n, int ta, int tb, const double *A, const double *B)
{
    CU_ASSERT_FATAL(tfc_graph_create(&mg->g) == TFC_OK);
    int64_t sa[2] = {ta ? k : m, ta ? m : k}, sb[2] = {tb ? n : k, tb ? k : n};
    mg->ft[0] = tfc_placeholder(mg->g, "a", dt, tfc_shape_of(2, sa));
    mg->ft[1] = tfc_placeholder(mg->g, "b", dt, tfc_shape_of(2, sb));
    mg->c = tfc_matmul(mg->g, mg->ft[0], mg->ft[1], ta, tb);
    CU_ASSERT_FATAL(tfc_graph_status(mg->g) == TFC_OK);
    mg->fv[0] = value_of(dt, sa[0], sa[1], A);
    mg->fv[1] = value_of(dt, sb[0], sb[1], B);
}

static void mm_graph_free(struct mm_graph *mg)
{
    tfc_value_destroy(mg->fv[0]), tfc_value_destroy(mg->fv[1]);
    tfc_graph_destroy(mg->g);
}

static void test_matmul_tiles(void)
{
    const int64_t mkn[][3] = {{37, 29, 41}, {64, 17, 5}, {9, 50, 70}};
    const int tile = 8;
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
        for (int q = 0; q < 3; q++)
            for (int t = 0; t < 4; t++) {
                int ta = t & 1, tb = t >> 1;
                int64_t m = mkn[q][0], k = mkn[q][1], n = mkn[q][2];
                double *A = malloc(sizeof(double) * (size_t)(m * k));
                double *B = malloc(sizeof(double) * (size_t)(k * n));
                double *C = malloc(sizeof(double) * (size_t)(m * n));
                CU_ASSERT_FATAL(A && B && C);
                fill(A, m * k, 1 + q), fill(B, k * n, 7 + q);
                ref_mm(A, B, C, m, k, n, ta, tb);
                struct mm_graph mg;
                mm_graph_make(&mg, dt, m, k, n, ta, tb, A, B);
                const char *cname = tfc_tensor_name(mg.c);
                int n_whole, n_tiles;
                uint64_t tasks_whole, tasks_tiled;
                tfc_value *whole = run_tiled(mg.g, 0, 0, 2, mg.ft, mg.fv, mg.c, cname, &n_whole,
                                             &tasks_whole);
                tfc_value *tiled = run_tiled(mg.g, 1, tile, 2, mg.ft, mg.fv, mg.c, cname,
                                             &n_tiles, &tasks_tiled);
                int64_t want = cdiv(m, tile) * cdiv(n, tile);
                CU_ASSERT_EQUAL(n_whole, 1);
                CU_ASSERT_EQUAL(tasks_whole, 1);
                CU_ASSERT_EQUAL(n_tiles, want);
                CU_ASSERT_EQUAL(tasks_tiled, (uint64_t)want);
                double e1 = max_err(whole, C, m * n), e2 = max_err(tiled, C, m * n);
                if (!(e2 <= tol_of(dt)) || !(e1 <= tol_of(dt)))
                    fprintf(stderr, "%s m=%lld k=%lld n=%lld ta=%d tb=%d: error %g (whole %g)\n",
                            di ? "f64" : "f32", (long long)m, (long long)k, (long long)n, ta, tb,
                            e2, e1);
                CU_ASSERT(e1 <= tol_of(dt));
                CU_ASSERT(e2 <= tol_of(dt));
                double d = 0;
                for (int64_t i = 0; i < m * n; i++) d = fmax(d, fabs(at(whole, i) - at(tiled, i)));
                CU_ASSERT(d <= tol_of(dt));
                tfc_value_destroy(whole), tfc_value_destroy(tiled);
                mm_graph_free(&mg);
                free(A), free(B), free(C);
            }
    }
}

/* ---- a long inner dimension: split-K ----------------------------------------------------- */

/* A matmul whose output is one tile but whose inner dimension is long (X^T dY of a large
 * batch) is split along k: one task per chunk of k writing partial products, one reduce task
 * adding them. Every transpose, float32 and float64, k not a multiple of the chunk: equal to a
 * float64 reference and to the untiled result. Then the automatic rule: with TFC_TILE_SIZE
 * auto, an 8 x 4096 x 8 product above the threshold splits into 2 chunks per worker. */
static void test_split_k(void)
{
    const int64_t m = 5, k = 300, n = 7;
    const int chunk = 64, kc = (300 + 63) / 64;
    double A[5 * 300], B[300 * 7], C[5 * 7];
    for (int di = 0; di < 2; di++)
        for (int tr = 0; tr < 4; tr++) {
            enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
            int ta = tr & 1, tb = tr >> 1;
            fill(A, m * k, 61 + tr), fill(B, k * n, 65 + tr);
            ref_mm(A, B, C, m, k, n, ta, tb);
            struct mm_graph mg;
            mm_graph_make(&mg, dt, m, k, n, ta, tb, A, B);
            const char *cname = tfc_tensor_name(mg.c);
            int nw, nt;
            uint64_t tw, tt;
            tfc_value *whole = run_tiled(mg.g, 0, 0, 2, mg.ft, mg.fv, mg.c, cname, &nw, &tw);
            tfc_value *split = run_tiled(mg.g, 1, chunk, 2, mg.ft, mg.fv, mg.c, cname, &nt, &tt);
            CU_ASSERT_EQUAL(nw, 1);
            CU_ASSERT_EQUAL(nt, kc + 1); /* the chunks and the sum */
            CU_ASSERT_EQUAL(tt, (uint64_t)kc + 1);
            double e1 = max_err(whole, C, m * n), e2 = max_err(split, C, m * n);
            if (!(e2 <= tol_of(dt)) || nt != kc + 1)
                fprintf(stderr, "split-K %s ta %d tb %d: %d tasks, error %g (whole %g)\n",
                        di ? "f64" : "f32", ta, tb, nt, e2, e1);
            CU_ASSERT(e1 <= tol_of(dt));
            CU_ASSERT(e2 <= tol_of(dt));
            tfc_value_destroy(whole), tfc_value_destroy(split);
            mm_graph_free(&mg);
        }
    /* auto: 8 x 4096 x 8 above a threshold of 1 flop, one output tile: 2 chunks per worker
     * (at least 256 long); with one worker, no split */
    const int64_t M = 8, K = 4096, N = 8;
    double *X = malloc(sizeof(double) * (size_t)(M * K));
    double *Y = malloc(sizeof(double) * (size_t)(K * N));
    double Z[64];
    CU_ASSERT_FATAL(X && Y);
    fill(X, M * K, 71), fill(Y, K * N, 72);
    ref_mm(X, Y, Z, M, K, N, 0, 0);
    struct mm_graph mg;
    mm_graph_make(&mg, TFC_FLOAT32, M, K, N, 0, 0, X, Y);
    int nz;
    uint64_t tz;
    tfc_value *out = run_tiled(mg.g, 1, 0, 2, mg.ft, mg.fv, mg.c, tfc_tensor_name(mg.c), &nz, &tz);
    int w = sharing_workers();
    int64_t c = cdiv(K, 2 * w) < 256 ? 256 : cdiv(K, 2 * w), want = w < 2 ? 1 : cdiv(K, c) + 1;
    CU_ASSERT_EQUAL(nz, want);
    CU_ASSERT(max_err(out, Z, M * N) <= 1e-4);
    tfc_value_destroy(out);
    mm_graph_free(&mg);
    free(X), free(Y);
}

/* ---- the element-wise step after a tiled matmul ------------------------------------------- */

/* Runs the fetches with feeds on a session with tiling (edge tile, or off when tile is 0),
 * twice (the second from the plan cache); returns the tasks of one run and the records named
 * node. */
static void run_fetches(tfc_graph *g, int tile, int n_feeds, tfc_tensor *const *ft,
                        tfc_value *const *fv, int n_fetch, tfc_tensor *const *fetch,
                        tfc_value **out, const char *node, int *n_node_tasks, uint64_t *tasks)
{
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_tiling(s, tile ? 1 : 0, tile) == TFC_OK);
    CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
    /* the untiled plan's steps as tasks of their own (pinned, they would be one chain task) */
    CU_ASSERT(tfc_session_set_passes(s, TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS) == TFC_OK);
    for (int rep = 0; rep < 2; rep++) {
        tfc_session_stats before, after;
        tfc_session_get_stats(s, &before);
        for (int j = 0; rep && j < n_fetch; j++) tfc_value_destroy(out[j]);
        tfc_status st = tfc_session_run(s, n_feeds, ft, fv, n_fetch, fetch, out, 0, NULL);
        if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        CU_ASSERT_FATAL(st == TFC_OK);
        tfc_session_get_stats(s, &after);
        *tasks = after.tasks - before.tasks;
    }
    const tfc_task_record *r = NULL;
    int n = tfc_session_last_records(s, &r), c = 0;
    for (int i = 0; i < n; i++) c += r[i].node && strcmp(r[i].node, node) == 0;
    *n_node_tasks = c;
    tfc_session_destroy(s);
}

/* c = a @ w, then a fused element-wise step over c: (0) relu(bias_add(c, b[n])), fetched;
 * (1) relu(c + b[1, n]) with c fetched too; (2) relu(c + b[n]) * 0.5 - d[m, n] with c, the
 * inner sum (a second output of the fused step) and the result fetched; (3) relu(c + e[m, 1])
 * (a column broadcast: row block i of e goes with tile row i). Sizes that are not multiples
 * of the tile, float32 and float64: equal to a float64 reference and to the untiled run; the
 * element-wise step is one task per tile of c. */
static void test_elementwise_tiles(void)
{
    const int64_t mkn[][3] = {{37, 29, 41}, {9, 50, 70}};
    const int tile = 8;
    for (int di = 0; di < 2; di++)
        for (int q = 0; q < 2; q++)
            for (int v = 0; v < 4; v++) {
                enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
                int64_t m = mkn[q][0], k = mkn[q][1], n = mkn[q][2];
                double *A = malloc(sizeof(double) * (size_t)(m * k));
                double *W = malloc(sizeof(double) * (size_t)(k * n));
                double *D = malloc(sizeof(double) * (size_t)(m * n));
                double *Bv = malloc(sizeof(double) * (size_t)(m > n ? m : n));
                double *want[3];
                for (int j = 0; j < 3; j++) want[j] = malloc(sizeof(double) * (size_t)(m * n));
                CU_ASSERT_FATAL(A && W && D && Bv && want[0] && want[1] && want[2]);
                fill(A, m * k, 21 + q), fill(W, k * n, 23 + q), fill(D, m * n, 25 + q);
                fill(Bv, m > n ? m : n, 27 + q);
                double *C = want[0];
                ref_mm(A, W, C, m, k, n, 0, 0);
                for (int64_t i = 0; i < m * n; i++) {
                    double z = C[i] + (v == 3 ? Bv[i / n] : Bv[i % n]), r = z > 0 ? z : 0;
                    want[1][i] = z;
                    want[2][i] = v == 2 ? r * 0.5 - D[i] : r;
                }
                tfc_graph *g = NULL;
                CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
                tfc_tensor *a = tfc_placeholder(g, "a", dt, tfc_shape_of(2, (int64_t[]){m, k}));
                tfc_tensor *w = tfc_placeholder(g, "w", dt, tfc_shape_of(2, (int64_t[]){k, n}));
                int64_t bshape[2] = {v == 1 ? 1 : v == 3 ? m : n, v == 3 ? 1 : n};
                int brank = v == 1 || v == 3 ? 2 : 1;
                tfc_tensor *b = tfc_placeholder(g, "b", dt, tfc_shape_of(brank, bshape));
                tfc_tensor *d = tfc_placeholder(g, "d", dt, tfc_shape_of(2, (int64_t[]){m, n}));
                tfc_tensor *c = tfc_matmul(g, a, w, 0, 0);
                tfc_tensor *z = v == 0 ? tfc_bias_add(g, c, b) : tfc_add(g, c, b);
                tfc_tensor *r = tfc_relu(g, z);
                if (v == 2) r = tfc_sub(g, tfc_mul(g, r, tfc_scalar(g, dt, 0.5)), d);
                CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
                tfc_tensor *ft[4] = {a, w, b, d};
                tfc_value *fv[4] = {value_of(dt, m, k, A), value_of(dt, k, n, W), NULL,
                                    value_of(dt, m, n, D)};
                CU_ASSERT_FATAL(tfc_value_create(dt, tfc_shape_of(brank, bshape), &fv[2]) ==
                                TFC_OK);
                for (int64_t i = 0; i < tfc_value_numel(fv[2]); i++) {
                    if (dt == TFC_FLOAT32)
                        ((float *)tfc_value_data(fv[2]))[i] = (float)Bv[i];
                    else
                        ((double *)tfc_value_data(fv[2]))[i] = Bv[i];
                }
                int n_fetch = v == 2 ? 3 : v == 1 ? 2 : 1;
                tfc_tensor *fetch[3] = {r, c, z};
                int widx[3] = {2, 0, 1}; /* fetch j -> want */
                tfc_value *whole[3] = {NULL}, *tiled[3] = {NULL};
                int nw, nt;
                uint64_t tw, tt;
                const char *rname = tfc_tensor_name(r);
                run_fetches(g, 0, 4, ft, fv, n_fetch, fetch, whole, rname, &nw, &tw);
                run_fetches(g, tile, 4, ft, fv, n_fetch, fetch, tiled, rname, &nt, &tt);
                int64_t tiles = cdiv(m, tile) * cdiv(n, tile);
                /* untiled: the matmul and the fused step */
                CU_ASSERT_EQUAL(tw, 2);
                CU_ASSERT_EQUAL(nw, 1);
                /* one matmul task and one element-wise task per tile */
                CU_ASSERT_EQUAL(tt, (uint64_t)(2 * tiles));
                CU_ASSERT_EQUAL(nt, tiles);
                if (tt != (uint64_t)(2 * tiles))
                    fprintf(stderr, "v=%d m=%lld n=%lld: %llu tasks, %d element-wise\n", v,
                            (long long)m, (long long)n, (unsigned long long)tt, nt);
                for (int j = 0; j < n_fetch; j++) {
                    double e1 = max_err(whole[j], want[widx[j]], m * n);
                    double e2 = max_err(tiled[j], want[widx[j]], m * n);
                    if (!(e1 <= tol_of(dt)) || !(e2 <= tol_of(dt)))
                        fprintf(stderr, "%s v=%d m=%lld n=%lld fetch %d: error %g (whole %g)\n",
                                di ? "f64" : "f32", v, (long long)m, (long long)n, j, e2, e1);
                    CU_ASSERT(e1 <= tol_of(dt));
                    CU_ASSERT(e2 <= tol_of(dt));
                    double dd = 0;
                    for (int64_t i = 0; i < m * n; i++)
                        dd = fmax(dd, fabs(at(whole[j], i) - at(tiled[j], i)));
                    CU_ASSERT(dd <= tol_of(dt));
                    tfc_value_destroy(whole[j]), tfc_value_destroy(tiled[j]);
                }
                for (int j = 0; j < 4; j++) tfc_value_destroy(fv[j]);
                tfc_graph_destroy(g);
                free(A), free(W), free(D), free(Bv);
                for (int j = 0; j < 3; j++) free(want[j]);
            }
}

/* ---- reductions of a tiled tensor ----------------------------------------------------------- */

/* c = a @ w [m, n], then a reduction of c (or of relu(c + b), a fused step tiled with the
 * matmul) over its rows, its columns or both: sum, mean, max, min, with and without keepdims;
 * case 9 also fetches relu(c) (one op, fused and tiled), so c's tiles feed two steps. Tiled,
 * the reduction is one task per tile of c plus one over the partial results; results equal a
 * float64 reference and the untiled run. */
static void test_reduce_tiles(void)
{
    const int64_t mkn[][3] = {{23, 19, 31}, {37, 29, 41}};
    const int tile = 8, n_cases = 10;
    for (int di = 0; di < 2; di++)
        for (int q = 0; q < 2; q++)
            for (int cs = 0; cs < n_cases; cs++) {
                enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
                int64_t m = mkn[q][0], k = mkn[q][1], n = mkn[q][2];
                double *A = malloc(sizeof(double) * (size_t)(m * k));
                double *W = malloc(sizeof(double) * (size_t)(k * n));
                double *C = malloc(sizeof(double) * (size_t)(m * n));
                double *R = malloc(sizeof(double) * (size_t)(m * n));
                double *want = malloc(sizeof(double) * (size_t)(m + n));
                double Bv[64];
                CU_ASSERT_FATAL(A && W && C && R && want);
                fill(A, m * k, 51 + q), fill(W, k * n, 53 + q), fill(Bv, n, 55 + q);
                ref_mm(A, W, C, m, k, n, 0, 0);
                /* what is reduced: c, or relu(c + b) for case 8 */
                for (int64_t i = 0; i < m * n; i++) {
                    double z = C[i] + Bv[i % n];
                    R[i] = cs == 8 ? (z > 0 ? z : 0) : C[i];
                }
                /* axes: 1 rows (axis 0), 2 columns (axis 1), 3 both; kind: 0 sum 1 mean 2 max
                 * 3 min */
                static const int axes_of[] = {1, 2, 3, 1, 2, 3, 1, 2, 1, 1};
                static const int kind_of[] = {0, 0, 0, 1, 1, 1, 2, 3, 0, 0};
                int axes = axes_of[cs], kind = kind_of[cs], keep = cs & 1;
                int64_t n_out = axes == 1 ? n : axes == 2 ? m : 1;
                for (int64_t o = 0; o < n_out; o++) {
                    double acc = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : 0;
                    int64_t cnt = 0;
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++) {
                            if ((axes == 1 && j != o) || (axes == 2 && i != o)) continue;
                            double v = R[i * n + j];
                            acc = kind == 2 ? fmax(acc, v) : kind == 3 ? fmin(acc, v) : acc + v;
                            cnt++;
                        }
                    want[o] = kind == 1 ? acc / (double)cnt : acc;
                }
                tfc_graph *g = NULL;
                CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
                tfc_tensor *a = tfc_placeholder(g, "a", dt, tfc_shape_of(2, (int64_t[]){m, k}));
                tfc_tensor *w = tfc_placeholder(g, "w", dt, tfc_shape_of(2, (int64_t[]){k, n}));
                tfc_tensor *b = tfc_placeholder(g, "b", dt, tfc_shape_of(1, (int64_t[]){n}));
                tfc_tensor *c = tfc_matmul(g, a, w, 0, 0);
                tfc_tensor *x = cs == 8 ? tfc_relu(g, tfc_bias_add(g, c, b)) : c;
                tfc_tensor *extra = cs == 9 ? tfc_relu(g, c) : NULL;
                int64_t ax[2] = {axes == 2 ? 1 : 0, 1};
                int n_ax = axes == 3 ? 0 : 1;
                tfc_tensor *r = kind == 0   ? tfc_reduce_sum(g, x, n_ax, ax, keep)
                                : kind == 1 ? tfc_reduce_mean(g, x, n_ax, ax, keep)
                                : kind == 2 ? tfc_reduce_max(g, x, n_ax, ax, keep)
                                            : tfc_reduce_min(g, x, n_ax, ax, keep);
                CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
                tfc_tensor *ft[3] = {a, w, b};
                tfc_value *fv[3] = {value_of(dt, m, k, A), value_of(dt, k, n, W), NULL};
                CU_ASSERT_FATAL(tfc_value_create(dt, tfc_shape_of(1, (int64_t[]){n}), &fv[2]) ==
                                TFC_OK);
                for (int64_t i = 0; i < n; i++) {
                    if (dt == TFC_FLOAT32) ((float *)tfc_value_data(fv[2]))[i] = (float)Bv[i];
                    else ((double *)tfc_value_data(fv[2]))[i] = Bv[i];
                }
                tfc_tensor *fetch[2] = {r, extra};
                int n_fetch = extra ? 2 : 1;
                tfc_value *whole[2] = {NULL}, *tiled[2] = {NULL};
                int nw, nt;
                uint64_t tw, tt;
                const char *rname = tfc_tensor_name(r);
                run_fetches(g, 0, 3, ft, fv, n_fetch, fetch, whole, rname, &nw, &tw);
                run_fetches(g, tile, 3, ft, fv, n_fetch, fetch, tiled, rname, &nt, &tt);
                int64_t tiles = cdiv(m, tile) * cdiv(n, tile);
                int ew = cs == 8 || cs == 9; /* a fused step between or beside */
                CU_ASSERT_EQUAL(nw, 1);
                CU_ASSERT_EQUAL(tw, (uint64_t)(2 + ew));
                CU_ASSERT_EQUAL(nt, tiles + 1);
                CU_ASSERT_EQUAL(tt, (uint64_t)((2 + ew) * tiles + 1));
                if (nt != tiles + 1 || tt != (uint64_t)((2 + ew) * tiles + 1))
                    fprintf(stderr, "case %d m=%lld n=%lld: %llu tasks, %d of the reduction\n",
                            cs, (long long)m, (long long)n, (unsigned long long)tt, nt);
                CU_ASSERT_EQUAL(tfc_value_numel(tiled[0]), n_out);
                double e1 = max_err(whole[0], want, n_out), e2 = max_err(tiled[0], want, n_out);
                if (!(e1 <= tol_of(dt)) || !(e2 <= tol_of(dt)))
                    fprintf(stderr, "%s case %d m=%lld n=%lld: error %g (whole %g)\n",
                            di ? "f64" : "f32", cs, (long long)m, (long long)n, e2, e1);
                CU_ASSERT(e1 <= tol_of(dt));
                CU_ASSERT(e2 <= tol_of(dt));
                if (extra) {
                    for (int64_t i = 0; i < m * n; i++) R[i] = C[i] > 0 ? C[i] : 0;
                    CU_ASSERT(max_err(tiled[1], R, m * n) <= tol_of(dt));
                }
                for (int j = 0; j < n_fetch; j++)
                    tfc_value_destroy(whole[j]), tfc_value_destroy(tiled[j]);
                for (int j = 0; j < 3; j++) tfc_value_destroy(fv[j]);
                tfc_graph_destroy(g);
                free(A), free(W), free(C), free(R), free(want);
            }
}

/* ---- operands of every kind, chains, cached runs -------------------------------------------- */

/* y = relu(x) (an intermediate) @ W (a variable) -> z = y @ y^T (the same tensor twice, an
 * intermediate input of a tiled node) + 1 (tiled with z's matmul), fetched; then both runs
 * again from the cache. */
static void test_chain(void)
{
    const int64_t m = 45, k = 30, n = 27;
    double X[45 * 30], W[30 * 27], Y[45 * 27], Z[45 * 45];
    fill(X, m * k, 3), fill(W, k * n, 4);
    double RX[45 * 30];
    for (int i = 0; i < m * k; i++) RX[i] = X[i] > 0 ? X[i] : 0;
    ref_mm(RX, W, Y, m, k, n, 0, 0);
    ref_mm(Y, Y, Z, m, n, m, 0, 1);
    for (int i = 0; i < m * m; i++) Z[i] += 1;
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(2, (int64_t[]){m, k}));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT64, tfc_shape_of(2, (int64_t[]){k, n}),
                                 tfc_init_zeros());
    tfc_tensor *y = tfc_matmul(g, tfc_relu(g, x), w, 0, 0);
    tfc_tensor *z = tfc_add(g, tfc_matmul(g, y, y, 0, 1), tfc_scalar(g, TFC_FLOAT64, 1.0));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_tiling(s, 1, 10) == TFC_OK);
    tfc_value *wv = value_of(TFC_FLOAT64, k, n, W), *xv = value_of(TFC_FLOAT64, m, k, X);
    CU_ASSERT_FATAL(tfc_session_write_variable(s, w, wv) == TFC_OK);
    for (int rep = 0; rep < 3; rep++) {
        tfc_value *out[2] = {NULL, NULL};
        tfc_tensor *fetch[2] = {z, y};
        tfc_session_stats before, after;
        tfc_session_get_stats(s, &before);
        tfc_status st = tfc_session_run(s, 1, &x, &xv, 2, fetch, out, 0, NULL);
        if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        CU_ASSERT_FATAL(st == TFC_OK);
        tfc_session_get_stats(s, &after);
        /* relu 1, y: 5x3 tiles, z: 5x5 tiles, the add (one op, fused) with z's tiles: 25 */
        CU_ASSERT_EQUAL(after.tasks - before.tasks, 1 + 15 + 25 + 25);
        CU_ASSERT(max_err(out[0], Z, m * m) <= 1e-12);
        CU_ASSERT(max_err(out[1], Y, m * n) <= 1e-12);
        tfc_value_destroy(out[0]), tfc_value_destroy(out[1]);
    }
    /* the variable read by tiles is still a plain handle: it can be read and rewritten */
    tfc_value *back = NULL;
    CU_ASSERT_FATAL(tfc_session_read_variable(s, w, &back) == TFC_OK);
    CU_ASSERT(max_err(back, W, k * n) == 0);
    tfc_value_destroy(back);
    tfc_session_destroy(s);
    tfc_value_destroy(wv), tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* ---- training ------------------------------------------------------------------------------ */

/* Two SGD steps of a 2-layer MLP (every forward and gradient matmul tiled with edge 8, the
 * gradient ones transposed) equal the untiled steps: loss and weights. */
static void train_steps(int tiled, double *loss, tfc_value **w1_out, tfc_value **w2_out,
                        uint64_t *tasks)
{
    const int64_t batch = 40, nin = 33, hid = 26, ncls = 10;
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){batch, nin}));
    tfc_tensor *lbl = tfc_placeholder(g, "y", TFC_INT64, tfc_shape_of(1, (int64_t[]){batch}));
    tfc_tensor *w1 = tfc_variable(g, "w1", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){nin, hid}),
                                  tfc_init_glorot_uniform(1));
    tfc_tensor *w2 = tfc_variable(g, "w2", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){hid, ncls}),
                                  tfc_init_glorot_uniform(2));
    tfc_tensor *h = tfc_relu(g, tfc_matmul(g, x, w1, 0, 0));
    tfc_tensor *logits = tfc_matmul(g, h, w2, 0, 0);
    tfc_tensor *loss_t = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, lbl), 0,
                                         NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_SGD, 0.5);
    tfc_tensor *step = tfc_minimize(g, loss_t, 2, (tfc_tensor *[]){w1, w2}, &opt, NULL);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_tiling(s, tiled ? 1 : 0, 8) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    double X[40 * 33];
    fill(X, batch * nin, 9);
    int64_t Y[40];
    for (int i = 0; i < batch; i++) Y[i] = (i * 7) % ncls;
    tfc_value *xv = value_of(TFC_FLOAT32, batch, nin, X), *yv = NULL;
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_INT64, tfc_shape_of(1, (int64_t[]){batch}), Y, &yv) ==
                    TFC_OK);
    tfc_session_stats before, after;
    tfc_session_get_stats(s, &before);
    for (int it = 0; it < 2; it++) {
        tfc_value *lv = NULL;
        tfc_status st = tfc_session_run(s, 2, (tfc_tensor *[]){x, lbl}, (tfc_value *[]){xv, yv}, 1,
                                        &loss_t, &lv, 1, &step);
        if (st) fprintf(stderr, "train run: %s\n", tfc_session_errmsg(s));
        CU_ASSERT_FATAL(st == TFC_OK);
        loss[it] = at(lv, 0);
        tfc_value_destroy(lv);
    }
    tfc_session_get_stats(s, &after);
    *tasks = after.tasks - before.tasks;
    CU_ASSERT_FATAL(tfc_session_read_variable(s, w1, w1_out) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_read_variable(s, w2, w2_out) == TFC_OK);
    tfc_value_destroy(xv), tfc_value_destroy(yv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_training(void)
{
    double l0[2], l1[2];
    tfc_value *a1, *a2, *b1, *b2;
    uint64_t t0, t1;
    train_steps(0, l0, &a1, &a2, &t0);
    train_steps(1, l1, &b1, &b2, &t1);
    /* per step, x@w1 alone is 5x4 tiles (x is fed: its gradient is not built) */
    CU_ASSERT(t1 >= t0 + 2 * 19);
    CU_ASSERT(fabs(l0[0] - l1[0]) <= 1e-5 * (1 + fabs(l0[0])));
    CU_ASSERT(fabs(l0[1] - l1[1]) <= 1e-5 * (1 + fabs(l0[1])));
    CU_ASSERT(l0[1] < l0[0]); /* it trains */
    double d = 0;
    for (int64_t i = 0; i < tfc_value_numel(a1); i++) d = fmax(d, fabs(at(a1, i) - at(b1, i)));
    for (int64_t i = 0; i < tfc_value_numel(a2); i++) d = fmax(d, fabs(at(a2, i) - at(b2, i)));
    CU_ASSERT(d <= 1e-5);
    tfc_value_destroy(a1), tfc_value_destroy(a2), tfc_value_destroy(b1), tfc_value_destroy(b2);
}

/* ---- convolutions and pooling over the batch ----------------------------------------------- */

/* A value of dtype dt and shape [dims] filled from seed. */
static tfc_value *nd_value(enum tfc_dtype dt, int rank, const int64_t *dims, unsigned seed)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    double *x = malloc(sizeof(double) * (size_t)n);
    CU_ASSERT_FATAL(x != NULL);
    fill(x, n, seed);
    tfc_value *v = value_of(dt, 1, n, x); /* then reshaped: same buffer layout */
    free(x);
    tfc_value *r = NULL;
    CU_ASSERT_FATAL(tfc_value_from_data(dt, tfc_shape_of(rank, dims), tfc_value_cdata(v), &r) ==
                    TFC_OK);
    tfc_value_destroy(v);
    return r;
}

/* Whether got equals want bit for bit (exact = 1; tasks on one kind of device: the kernels
 * compute each image alone), else within tol relative to the largest |want|. */
static int same_values(const tfc_value *got, const tfc_value *want, int exact, double tol)
{
    size_t n = tfc_value_nbytes(want);
    if (tfc_value_nbytes(got) != n) return 0;
    if (exact) return memcmp(tfc_value_cdata(got), tfc_value_cdata(want), n) == 0;
    int64_t cnt = (int64_t)(n / (tfc_value_dtype(want) == TFC_FLOAT32 ? 4 : 8));
    double big = 0, e = 0;
    for (int64_t i = 0; i < cnt; i++) big = fmax(big, fabs(at(want, i)));
    for (int64_t i = 0; i < cnt; i++) {
        double d = fabs(at(got, i) - at(want, i));
        if (!(d <= e)) e = d;
    }
    return e <= tol * (1 + big);
}

/* A 2-D convolution over a batch of 8 (x [8, 4, 9, 7], w [6, 2, 3, 3], stride 2x1, pads,
 * dilation 1x2, 2 groups) and its adjoints, max and average pooling, and a conv_transpose of
 * dy by w (the backprop-input kernel again, its own attributes), each run whole and split
 * over the batch: blocks of 3 images (TFC_TILE_SIZE 3: 3 tasks, the last of 2 images; the
 * filter gradient one more task summing the 3 partials), then the automatic rule (tiling on
 * from 1 flop: TILES_PER_WORKER = 4 blocks per worker, the filter gradient too). The
 * convolution, its input gradient, the pools and conv_transpose equal the whole results bit
 * for bit on CPU workers (the kernels compute each image alone); the filter gradient sums the
 * images in another order: equal within float summation error. */
static void test_conv_batch(void)
{
    const int64_t xd[4] = {8, 4, 9, 7}, wd[4] = {6, 2, 3, 3};
    tfc_conv_params cp = {.strides = {2, 1}, .pads_begin = {1, 0}, .pads_end = {0, 2},
                          .dilations = {1, 2}, .groups = 2};
    tfc_pool_params pp = {.n_spatial = 2, .kernel = {3, 2}, .strides = {2, 2}, .ceil_mode = 1};
    /* dy [8, 6, 4, 5] by w as [C_in 6, C_out/groups 2, 3, 3]: [8, 4, 10, 8] */
    tfc_conv_transpose_params tp = {.strides = {2, 1}, .pads_begin = {0, 1}, .dilations = {1, 2},
                                    .output_padding = {1, 0}, .groups = 2};
    int workers = sharing_workers();
    int exact =
        starpu_worker_get_count_by_type(STARPU_CPU_WORKER) == (int)starpu_worker_get_count();
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
        tfc_graph *g = NULL;
        CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
        tfc_tensor *x = tfc_placeholder(g, "x", dt, tfc_shape_of(4, xd));
        tfc_tensor *w = tfc_placeholder(g, "w", dt, tfc_shape_of(4, wd));
        tfc_tensor *y = tfc_conv(g, x, w, &cp);
        CU_ASSERT_FATAL(y != NULL);
        tfc_shape ys = tfc_tensor_shape(y);
        tfc_tensor *dy = tfc_placeholder(g, "dy", dt, ys);
        tfc_tensor *outs[6] = {y, tfc_conv_backprop_input(g, dy, w, x, &cp),
                               tfc_conv_backprop_filter(g, x, dy, w, &cp),
                               tfc_max_pool(g, x, &pp, NULL), tfc_avg_pool(g, x, &pp),
                               tfc_conv_transpose(g, dy, w, &tp)};
        CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
        tfc_tensor *ft[3] = {x, w, dy};
        tfc_value *fv[3] = {nd_value(dt, 4, xd, 3), nd_value(dt, 4, wd, 4),
                            nd_value(dt, 4, ys.dims, 5)};
        for (int k = 0; k < 6; k++) {
            const char *name = tfc_tensor_name(outs[k]);
            int filter = k == 2, n_whole, n_tiles;
            uint64_t t_whole, t_tiled;
            tfc_value *whole = run_tiled(g, 0, 0, 3, ft, fv, outs[k], name, &n_whole, &t_whole);
            CU_ASSERT_EQUAL(n_whole, 1);
            for (int mode = 0; mode < 2; mode++) { /* blocks of 3; automatic */
                int blk = mode ? (int)cdiv(8, 4 * workers) : 3;
                int want = mode && workers < 2 ? 1 : (int)cdiv(8, blk) + (filter && blk < 8);
                tfc_value *tiled = run_tiled(g, 1, mode ? 0 : 3, 3, ft, fv, outs[k], name,
                                             &n_tiles, &t_tiled);
                CU_ASSERT_EQUAL(n_tiles, want);
                int ok = same_values(tiled, whole, exact && !filter, tol_of(dt));
                if (n_tiles != want || !ok)
                    fprintf(stderr, "%s %s, %s: %d tasks (want %d), %s\n", di ? "f64" : "f32",
                            name, mode ? "auto" : "blocks of 3", n_tiles, want,
                            ok ? "same values" : "values differ");
                CU_ASSERT(ok);
                tfc_value_destroy(tiled);
            }
            tfc_value_destroy(whole);
        }
        for (int i = 0; i < 3; i++) tfc_value_destroy(fv[i]);
        tfc_graph_destroy(g);
    }
}

/* With the default threshold (2 * 512^3 flops) the CNN's first layer splits over its batch of
 * 128 on two or more workers: its convolution and filter gradient (0.16 GFLOP each, below the
 * matmul threshold; the batch split starts at a 32nd of it) and its 2x2 max pool (16 MB of
 * operands, counted as work), and the second layer's max pool with indices ([128, 64, 14, 14]:
 * 12.8 MB). One worker keeps them whole. The blocks equal the whole results bit for bit (the
 * filter gradient within float summation error). */
static void test_conv_batch_default(void)
{
    const int64_t xd[4] = {128, 1, 28, 28}, wd[4] = {32, 1, 5, 5}, yd[4] = {128, 32, 28, 28};
    const int64_t hd[4] = {128, 64, 14, 14};
    const double tile_min = 2.0 * 512 * 512 * 512;
    tfc_conv_params cp = {.pads_begin = {2, 2}, .pads_end = {2, 2}};
    tfc_pool_params pp = {.n_spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
    int workers = sharing_workers();
    int exact =
        starpu_worker_get_count_by_type(STARPU_CPU_WORKER) == (int)starpu_worker_get_count();
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, xd));
    tfc_tensor *w = tfc_placeholder(g, "w", TFC_FLOAT32, tfc_shape_of(4, wd));
    tfc_tensor *dy = tfc_placeholder(g, "dy", TFC_FLOAT32, tfc_shape_of(4, yd));
    tfc_tensor *h = tfc_placeholder(g, "h", TFC_FLOAT32, tfc_shape_of(4, hd)), *idx = NULL;
    tfc_tensor *outs[4] = {tfc_conv(g, x, w, &cp), tfc_conv_backprop_filter(g, x, dy, w, &cp),
                           tfc_max_pool(g, dy, &pp, NULL), tfc_max_pool(g, h, &pp, &idx)};
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_tensor *ft[4] = {x, w, dy, h};
    tfc_value *fv[4] = {nd_value(TFC_FLOAT32, 4, xd, 6), nd_value(TFC_FLOAT32, 4, wd, 7),
                        nd_value(TFC_FLOAT32, 4, yd, 8), nd_value(TFC_FLOAT32, 4, hd, 9)};
    for (int k = 0; k < 4; k++) {
        const char *name = tfc_tensor_name(outs[k]);
        int filter = k == 1, n_whole, n_tiles;
        uint64_t t_whole, t_tiled;
        tfc_value *whole = run_tiled(g, 0, 0, 4, ft, fv, outs[k], name, &n_whole, &t_whole);
        tfc_value *tiled = run_tiled(g, tile_min, 0, 4, ft, fv, outs[k], name, &n_tiles, &t_tiled);
        int want = workers < 2 ? 1 : 4 * workers + filter;
        int ok = same_values(tiled, whole, exact && !filter, tol_of(TFC_FLOAT32));
        if (n_tiles != want || !ok)
            fprintf(stderr, "%s at the default threshold: %d tasks (want %d), %s\n", name,
                    n_tiles, want, ok ? "same values" : "values differ");
        CU_ASSERT_EQUAL(n_tiles, want);
        CU_ASSERT(ok);
        tfc_value_destroy(tiled), tfc_value_destroy(whole);
    }
    for (int i = 0; i < 4; i++) tfc_value_destroy(fv[i]);
    tfc_graph_destroy(g);
}

/* The element-wise steps after a batch split follow its blocks of images: relu(conv(x, w) + b)
 * with b [1, 6, 1, 1] (a fused chain), a max pool of it (reading the relu's blocks in place),
 * and p * p after the pool (one op, made a fused step because its input is split). Blocks of
 * 3 images (3 tasks per node) and the automatic rule; every result equals the whole one bit
 * for bit on CPU workers (each image is computed alone). With CPU workers only (an inference
 * plan), each block's steps run as one chain task (sched/chain_blocks.c) named after the last
 * node: the run's only tasks. */
static void test_batch_elementwise(void)
{
    const int64_t xd[4] = {8, 4, 9, 7}, wd[4] = {6, 4, 3, 3}, bd[4] = {1, 6, 1, 1};
    tfc_conv_params cp = {.pads_begin = {1, 1}, .pads_end = {1, 1}};
    tfc_pool_params pp = {.n_spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
    int workers = sharing_workers();
    int exact =
        starpu_worker_get_count_by_type(STARPU_CPU_WORKER) == (int)starpu_worker_get_count();
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, xd));
    tfc_tensor *w = tfc_placeholder(g, "w", TFC_FLOAT32, tfc_shape_of(4, wd));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, tfc_shape_of(4, bd));
    tfc_tensor *y = tfc_relu(g, tfc_add(g, tfc_conv(g, x, w, &cp), b));
    tfc_tensor *pool = tfc_max_pool(g, y, &pp, NULL);
    tfc_tensor *z = tfc_mul(g, pool, pool);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_tensor *ft[3] = {x, w, b};
    tfc_value *fv[3] = {nd_value(TFC_FLOAT32, 4, xd, 21), nd_value(TFC_FLOAT32, 4, wd, 22),
                        nd_value(TFC_FLOAT32, 4, bd, 23)};
    tfc_tensor *outs[3] = {y, pool, z};
    for (int k = 0; k < 3; k++) {
        /* fetching the pool, its blocks run before the bias + ReLU's (sched/pool_first.c): the
         * last tasks, and the chains, are the ReLU's */
        const char *name = tfc_tensor_name(k == 1 ? y : outs[k]);
        int n_whole, n_tiles;
        uint64_t t_whole, t_tiled;
        tfc_value *whole = run_tiled(g, 0, 0, 3, ft, fv, outs[k], name, &n_whole, &t_whole);
        CU_ASSERT_EQUAL(n_whole, 1);
        for (int mode = 0; mode < 2; mode++) { /* blocks of 3; automatic */
            int want = mode ? (workers < 2 ? 1 : (int)cdiv(8, cdiv(8, 4 * workers))) : 3;
            tfc_value *tiled = run_tiled(g, 1, mode ? 0 : 3, 3, ft, fv, outs[k], name, &n_tiles,
                                         &t_tiled);
            int ok = same_values(tiled, whole, exact, tol_of(TFC_FLOAT32));
            if (n_tiles != want || !ok)
                fprintf(stderr, "%s after a batch split, %s: %d tasks (want %d), %s\n", name,
                        mode ? "auto" : "blocks of 3", n_tiles, want,
                        ok ? "same values" : "values differ");
            CU_ASSERT_EQUAL(n_tiles, want);
            CU_ASSERT(ok);
            if (exact && want > 1) CU_ASSERT_EQUAL(t_tiled, (uint64_t)want); /* chains only */
            tfc_value_destroy(tiled);
        }
        tfc_value_destroy(whole);
    }
    for (int i = 0; i < 3; i++) tfc_value_destroy(fv[i]);
    tfc_graph_destroy(g);
}

/* ---- optimizer updates over the variable's rows --------------------------------------------- */

/* Three steps of opt on w [37, ...] (loss = sum(w * w * x), x fed) with tiling at tile_min
 * (0: off) and tile (rows per task, 0: auto); the tasks they ran and w after them. */
static void update_steps(const tfc_optimizer *opt, enum tfc_dtype dt, int rank,
                         const int64_t *dims, double tile_min, int tile, uint64_t *tasks,
                         tfc_value **w_out)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *w = tfc_variable(g, "w", dt, tfc_shape_of(rank, dims), tfc_init_glorot_uniform(3));
    tfc_tensor *x = tfc_placeholder(g, "x", dt, tfc_shape_of(rank, dims));
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, tfc_mul(g, w, w), x), 0, NULL, 0);
    tfc_tensor *step = tfc_minimize(g, loss, 1, &w, opt, NULL);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_tiling(s, tile_min, tile) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    tfc_value *xv = nd_value(dt, rank, dims, 11);
    tfc_session_stats before, after;
    tfc_session_get_stats(s, &before);
    for (int it = 0; it < 3; it++) {
        tfc_status st = tfc_session_run(s, 1, &x, &xv, 0, NULL, NULL, 1, &step);
        if (st) fprintf(stderr, "update run: %s\n", tfc_session_errmsg(s));
        CU_ASSERT_FATAL(st == TFC_OK);
    }
    tfc_session_get_stats(s, &after);
    *tasks = after.tasks - before.tasks;
    CU_ASSERT_FATAL(tfc_session_read_variable(s, w, w_out) == TFC_OK);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A large optimizer update splits over its variable's first dimension (37 rows: blocks of 8,
 * the last of 5; then the automatic rule, TILES_PER_WORKER blocks per worker), the variable,
 * its slots and the gradient in blocks: float32 Adam (its typed fast path) on [37, 5], and
 * float64 centered RMSprop with momentum (three slots) on [37, 2, 3]. Each element is updated
 * alone, so after three steps the variable equals the untiled one bit for bit on CPU workers;
 * each step runs the blocks' extra tasks. */
static void test_update_rows(void)
{
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 0.05);
    tfc_optimizer rms = tfc_optimizer_default(TFC_OPT_RMSPROP, 0.01);
    rms.momentum = 0.5;
    rms.centered = 1;
    const tfc_optimizer *opts[2] = {&adam, &rms};
    const int64_t dims[2][3] = {{37, 5}, {37, 2, 3}};
    int workers = sharing_workers();
    int exact =
        starpu_worker_get_count_by_type(STARPU_CPU_WORKER) == (int)starpu_worker_get_count();
    for (int k = 0; k < 2; k++) {
        enum tfc_dtype dt = k ? TFC_FLOAT64 : TFC_FLOAT32;
        uint64_t t_whole, t_tiled;
        tfc_value *whole = NULL, *tiled = NULL;
        update_steps(opts[k], dt, 2 + k, dims[k], 0, 0, &t_whole, &whole);
        for (int mode = 0; mode < 2; mode++) { /* blocks of 8 rows; automatic */
            int blk = mode ? (int)cdiv(37, 4 * workers) : 8;
            int extra = mode && workers < 2 ? 0 : (int)cdiv(37, blk) - 1;
            update_steps(opts[k], dt, 2 + k, dims[k], 1, mode ? 0 : 8, &t_tiled, &tiled);
            int ok = same_values(tiled, whole, exact, tol_of(dt));
            if (t_tiled != t_whole + 3 * (uint64_t)extra || !ok)
                fprintf(stderr, "%s update, %s: %llu tasks (whole %llu, want %d more a step), %s\n",
                        k ? "rmsprop f64" : "adam f32", mode ? "auto" : "blocks of 8",
                        (unsigned long long)t_tiled, (unsigned long long)t_whole, extra,
                        ok ? "same values" : "values differ");
            CU_ASSERT_EQUAL(t_tiled, t_whole + 3 * (uint64_t)extra);
            CU_ASSERT(ok);
            tfc_value_destroy(tiled);
        }
        tfc_value_destroy(whole);
    }
}

/* ---- one handle, partitions of different widths -------------------------------------------- */

static void vector_add_one(void *buffers[], void *arg)
{
    (void)arg;
    float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    for (uint32_t i = 0; i < STARPU_VECTOR_GET_NX(buffers[0]); i++) x[i] += 1;
}

static void matrix_add_one(void *buffers[], void *arg)
{
    (void)arg;
    float *x = (float *)STARPU_MATRIX_GET_PTR(buffers[0]);
    uint32_t nx = STARPU_MATRIX_GET_NX(buffers[0]), ld = STARPU_MATRIX_GET_LD(buffers[0]);
    for (uint32_t j = 0; j < STARPU_MATRIX_GET_NY(buffers[0]); j++)
        for (uint32_t i = 0; i < nx; i++) x[j * ld + i] += 1;
}

static struct starpu_codelet vector_add_cl = {
    .cpu_funcs = {vector_add_one}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "test_add_v"};
static struct starpu_codelet matrix_add_cl = {
    .cpu_funcs = {matrix_add_one}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "test_add_m"};

/* Adds one to every element through partition q of h: a task per tile between the partition
 * and its end, as a run does. */
static void add_through_tiles(const struct plan *p, int q, starpu_data_handle_t h)
{
    const struct plan_part *pt = &p->parts[q];
    starpu_data_handle_t *tiles = tfc_tiling_plan(p, q, h);
    CU_ASSERT_FATAL(tiles != NULL);
    tfc_tiling_submit(p, q, h, tiles);
    struct starpu_codelet *cl = pt->tc == pt->cols ? &vector_add_cl : &matrix_add_cl;
    for (int i = 0; i < pt->nr * pt->nc; i++)
        CU_ASSERT_EQUAL(starpu_task_insert(cl, STARPU_RW, tiles[i], 0), 0);
    tfc_tiling_unpartition(p, q, h, tiles);
}

/* One handle partitioned into 2 blocks of rows, then into a grid of 6 tiles, as a run does
 * when a slot's consumers tile it differently (test_grad's gradients under TFC_TILE_SIZE=1),
 * then into 12 tiles by another plan, as when a variable's training and evaluation plans tile
 * it differently. StarPU 1.3.10 reallocates a handle's partition codelet when a plan is wider
 * than any before, under a worker starting the handle's earlier partition task (sched/
 * tiling.c, tfc_tiling_plan: CI aborted in test_grad under ASan): the first plan sizes it for
 * the slot's widest partition, a wider plan later waits for the handle's tasks first, and the
 * handle's user data records the width. Each round's values pass through a task on the whole,
 * the blocks and both grids. */
static void test_partition_widths(void)
{
    struct plan_part parts[3] = {
        {.slot = 0, .rows = 8, .cols = 6, .tr = 4, .tc = 6, .nr = 2, .nc = 1},
        {.slot = 0, .rows = 8, .cols = 6, .tr = 4, .tc = 2, .nr = 2, .nc = 3},
        {.slot = 0, .rows = 8, .cols = 6, .tr = 2, .tc = 2, .nr = 4, .nc = 3},
    };
    struct plan p = {.n_parts = 2, .parts = parts}, wider = {.n_parts = 1, .parts = parts + 2};
    float buf[48];
    int wrong = 0;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 48; i++) buf[i] = (float)i;
        starpu_data_handle_t h;
        starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)buf, 48, sizeof(float));
        CU_ASSERT_EQUAL(starpu_task_insert(&vector_add_cl, STARPU_RW, h, 0), 0);
        add_through_tiles(&p, 0, h);
        CU_ASSERT_EQUAL((uintptr_t)starpu_data_get_user_data(h), 6);
        add_through_tiles(&p, 1, h);
        CU_ASSERT_EQUAL((uintptr_t)starpu_data_get_user_data(h), 6);
        add_through_tiles(&wider, 0, h);
        CU_ASSERT_EQUAL((uintptr_t)starpu_data_get_user_data(h), 12);
        add_through_tiles(&p, 0, h);
        CU_ASSERT_EQUAL((uintptr_t)starpu_data_get_user_data(h), 12);
        starpu_data_unregister(h);
        for (int i = 0; i < 48; i++) wrong += buf[i] != (float)(i + 5);
    }
    CU_ASSERT_EQUAL(wrong, 0);
}

/* ---- defaults and errors ------------------------------------------------------------------- */

/* With CUDA workers, automatic tiling shares among them only: one GPU keeps steps whole
 * however many CPU workers there are. */
static void test_sharing_workers(void)
{
    CU_ASSERT_EQUAL(tfc_tile_sharing_workers(5, 1), 1);
    CU_ASSERT_EQUAL(tfc_tile_sharing_workers(6, 2), 2);
    CU_ASSERT_EQUAL(tfc_tile_sharing_workers(3, 0), 3);
    CU_ASSERT_EQUAL(tfc_tile_sharing_workers(1, 0), 1);
}

/* With the defaults, a small matmul stays one task and a 512^3 one (at the threshold) is
 * split when there are several workers; tiling off keeps it whole. */
static void test_defaults(void)
{
    unsetenv("TFC_TILE_MIN");
    unsetenv("TFC_TILE_SIZE");
    const int64_t big = 512, small = 64;
    for (int q = 0; q < 3; q++) {
        int64_t d = q == 0 ? small : big;
        tfc_graph *g = NULL;
        CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
        tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){d, d}));
        tfc_tensor *c = tfc_matmul(g, a, a, 0, 0);
        double *A = malloc(sizeof(double) * (size_t)(d * d));
        CU_ASSERT_FATAL(A != NULL);
        fill(A, d * d, 5);
        tfc_value *av = value_of(TFC_FLOAT32, d, d, A);
        if (q == 2) setenv("TFC_TILE_MIN", "off", 1);
        tfc_session *s = NULL;
        CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
        unsetenv("TFC_TILE_MIN");
        tfc_value *out = NULL;
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &a, &av, 1, &c, &out, 0, NULL) == TFC_OK);
        tfc_session_stats st;
        tfc_session_get_stats(s, &st);
        if (q == 1 && sharing_workers() > 1) {
            CU_ASSERT(st.tasks >= 4);
        } else {
            CU_ASSERT_EQUAL(st.tasks, 1);
        }
        if (q == 1) { /* spot-check a few elements against float64 */
            for (int64_t i = 0; i < d * d; i += 4099) {
                int64_t r = i / d, cc = i % d;
                double s2 = 0;
                for (int64_t p = 0; p < d; p++) s2 += A[r * d + p] * A[p * d + cc];
                CU_ASSERT(fabs(at(out, i) - s2) <= 1e-3 * (1 + fabs(s2)));
            }
        }
        tfc_value_destroy(out), tfc_value_destroy(av);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
        free(A);
    }
}

static void test_bad_values(void)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    const char *bad[][2] = {{"TFC_TILE_MIN", "abc"}, {"TFC_TILE_MIN", "-5"},
                            {"TFC_TILE_MIN", "1e9"}, {"TFC_TILE_MIN", ""},
                            {"TFC_TILE_SIZE", "0"},  {"TFC_TILE_SIZE", "-3"},
                            {"TFC_TILE_SIZE", "12x"}, {"TFC_TILE_SIZE", "70000"},
                            {"TFC_TILE_SIZE", "AUTO"}};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        setenv(bad[i][0], bad[i][1], 1);
        tfc_session *s = NULL;
        tfc_status st = tfc_session_create(test_ctx, g, &s);
        CU_ASSERT_EQUAL(st, TFC_ERR_INVALID_ARGUMENT);
        CU_ASSERT(s == NULL);
        CU_ASSERT(strstr(tfc_errmsg(), bad[i][0]) != NULL);
        tfc_session_destroy(s);
        unsetenv(bad[i][0]);
    }
    const char *good[][2] = {{"TFC_TILE_MIN", "off"}, {"TFC_TILE_MIN", "0"},
                             {"TFC_TILE_MIN", "1000"}, {"TFC_TILE_SIZE", "auto"},
                             {"TFC_TILE_SIZE", "256"}};
    for (int i = 0; i < (int)(sizeof good / sizeof good[0]); i++) {
        setenv(good[i][0], good[i][1], 1);
        tfc_session *s = NULL;
        CU_ASSERT_EQUAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        tfc_session_destroy(s);
        unsetenv(good[i][0]);
    }
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_set_tiling(s, -1, 0), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_set_tiling(s, NAN, 0), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_set_tiling(s, 1, -1), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_set_tiling(s, 1, 65537), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_session_errmsg(s), "tile_size") != NULL);
    CU_ASSERT_EQUAL(tfc_session_set_tiling(NULL, 1, 1), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_set_tiling(s, 0, 0), TFC_OK);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- an accelerator worker (OpenCL, CUDA): tiles pinned to it, and alternating with the CPU - */

/* The device the next three tests pin to: the OpenCL worker (PoCL here) or a CUDA worker. */
struct device {
    const char *hint;                    /* tfc_graph_push_device's name */
    uint32_t where;                      /* tfc_session_set_where's mask */
    enum starpu_worker_archtype type;
};
static const struct device dev_opencl = {"opencl", STARPU_OPENCL, STARPU_OPENCL_WORKER};
static const struct device dev_cuda = {"cuda", STARPU_CUDA, STARPU_CUDA_WORKER};

static int have_worker(const struct device *dv)
{
    if (starpu_worker_get_count_by_type(dv->type) > 0) return 1;
    fprintf(stderr, "(no %s worker: skipped%s) ", dv->hint,
            dv->type == STARPU_OPENCL_WORKER ? "; set STARPU_OPENCL_ON_CPUS=1" : "");
    return 0;
}

static void tiles_on_device(const struct device *dv)
{
    if (!have_worker(dv)) return;
    const int64_t m = 23, k = 19, n = 31, T = cdiv(23, 8) * cdiv(31, 8);
    double A[23 * 19], B[19 * 31], C[23 * 31], S[31];
    fill(A, m * k, 11), fill(B, k * n, 12);
    ref_mm(A, B, C, m, k, n, 0, 0);
    for (int64_t i = 0; i < m * n; i++) C[i] = C[i] > 0 ? C[i] : 0;
    for (int64_t j = 0; j < n; j++) {
        S[j] = 0;
        for (int64_t i = 0; i < m; i++) S[j] += C[i * n + j];
    }
    for (int mode = 0; mode < 2; mode++) { /* 0: all on the device; 1: relu on the CPU */
        tfc_graph *g = NULL; /* hard hints (the session's where hook would turn fusion off) */
        CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
        tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){m, k}));
        tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){k, n}));
        CU_ASSERT_FATAL(tfc_graph_push_device(g, dv->hint, 1) == TFC_OK);
        tfc_tensor *mm = tfc_matmul(g, a, b, 0, 0);
        if (mode == 1) CU_ASSERT_FATAL(tfc_graph_push_device(g, "cpu", 1) == TFC_OK);
        tfc_tensor *c = tfc_relu(g, mm);
        if (mode == 1) CU_ASSERT_FATAL(tfc_graph_pop_device(g) == TFC_OK);
        tfc_tensor *sum = tfc_reduce_sum(g, c, 1, (int64_t[]){0}, 0);
        CU_ASSERT_FATAL(tfc_graph_pop_device(g) == TFC_OK);
        tfc_session *s = NULL;
        CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
        CU_ASSERT_FATAL(tfc_session_set_tiling(s, 1, 8) == TFC_OK);
        CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
        tfc_value *fv[2] = {value_of(TFC_FLOAT32, m, k, A), value_of(TFC_FLOAT32, k, n, B)};
        for (int rep = 0; rep < 2; rep++) {
            tfc_value *out[2] = {NULL, NULL};
            tfc_status st = tfc_session_run(s, 2, (tfc_tensor *[]){a, b}, fv, 2,
                                            (tfc_tensor *[]){c, sum}, out, 0, NULL);
            if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
            CU_ASSERT_FATAL(st == TFC_OK);
            CU_ASSERT(max_err(out[0], C, m * n) <= 1e-4);
            CU_ASSERT(max_err(out[1], S, n) <= 1e-4);
            const tfc_task_record *r = NULL;
            int nr = tfc_session_last_records(s, &r), mm = 0, relu = 0, red = 0;
            int mm_dev = 0, relu_dev = 0, red_dev = 0;
            for (int i = 0; i < nr; i++) {
                int on_dev = starpu_worker_get_type(r[i].worker) == dv->type;
                if (strcmp(r[i].node, tfc_tensor_name(c)) == 0)
                    relu++, relu_dev += on_dev;
                else if (strcmp(r[i].node, tfc_tensor_name(sum)) == 0)
                    red++, red_dev += on_dev;
                else
                    mm++, mm_dev += on_dev;
            }
            /* the matmul's tiles on the device; relu (one op, fused) and the reduction tiled
             * with it there, or whole on the CPU and the device after it */
            CU_ASSERT_EQUAL(mm, T);
            CU_ASSERT_EQUAL(mm_dev, T);
            CU_ASSERT_EQUAL(relu, mode == 0 ? T : 1);
            CU_ASSERT_EQUAL(relu_dev, mode == 0 ? T : 0);
            CU_ASSERT_EQUAL(red, mode == 0 ? T + 1 : 1);
            CU_ASSERT_EQUAL(red_dev, red);
            if (relu != (mode == 0 ? T : 1) || red != (mode == 0 ? T + 1 : 1))
                fprintf(stderr, "%s mode %d: %d relu tasks (%d on it), %d reduce (%d)\n",
                        dv->hint, mode, relu, relu_dev, red, red_dev);
            tfc_value_destroy(out[0]), tfc_value_destroy(out[1]);
        }
        tfc_value_destroy(fv[0]), tfc_value_destroy(fv[1]);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
    }
}

static void test_opencl(void) { tiles_on_device(&dev_opencl); }
static void test_cuda(void) { tiles_on_device(&dev_cuda); }

/* relu(matmul + bias) - d (one fused step; d = transpose(dt), produced whole) under a hard
 * device hint ("opencl", "cuda"), its result fetched and also read whole by a transpose: the
 * element-wise step is tiled with the matmul, every tile on that device's worker. In the
 * second run the tiled tensors are already allocated on the device (the transposes read or
 * wrote them whole there). With
 * the element-wise ops hinted to the CPU instead (a placement unlike the matmul's) the fused
 * step stays one task, on the CPU. */
static void elementwise_on_device(const struct device *dv)
{
    if (!have_worker(dv)) return;
    if (!starpu_cpu_worker_get_count()) {
        fprintf(stderr, "(no CPU worker: skipped) ");
        return;
    }
    const int64_t m = 23, k = 19, n = 31, T = cdiv(23, 8) * cdiv(31, 8);
    double A[23 * 19], B[19 * 31], C[23 * 31], bias[31], DT[31 * 23], CT[31 * 23];
    fill(A, m * k, 31), fill(B, k * n, 32), fill(bias, n, 33), fill(DT, n * m, 34);
    ref_mm(A, B, C, m, k, n, 0, 0);
    for (int64_t i = 0; i < m * n; i++) {
        double z = C[i] + bias[i % n];
        C[i] = (z > 0 ? z : 0) - DT[(i % n) * m + i / n];
    }
    for (int64_t i = 0; i < m * n; i++) CT[(i % n) * m + i / n] = C[i];
    const int64_t perm[2] = {1, 0};
    for (int di = 0; di < 2; di++)
        for (int mode = 0; mode < 2; mode++) { /* element-wise ops: 0 OpenCL, 1 CPU */
            enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
            tfc_graph *g = NULL;
            CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
            tfc_tensor *a = tfc_placeholder(g, "a", dt, tfc_shape_of(2, (int64_t[]){m, k}));
            tfc_tensor *b = tfc_placeholder(g, "b", dt, tfc_shape_of(2, (int64_t[]){k, n}));
            tfc_tensor *bt = tfc_placeholder(g, "bias", dt, tfc_shape_of(1, (int64_t[]){n}));
            tfc_tensor *dtt = tfc_placeholder(g, "dt", dt, tfc_shape_of(2, (int64_t[]){n, m}));
            CU_ASSERT_FATAL(tfc_graph_push_device(g, dv->hint, 1) == TFC_OK);
            tfc_tensor *c = tfc_matmul(g, a, b, 0, 0);
            tfc_tensor *d = tfc_transpose(g, dtt, perm);
            if (mode == 1) CU_ASSERT_FATAL(tfc_graph_push_device(g, "cpu", 1) == TFC_OK);
            tfc_tensor *r = tfc_sub(g, tfc_relu(g, tfc_bias_add(g, c, bt)), d);
            if (mode == 1) CU_ASSERT_FATAL(tfc_graph_pop_device(g) == TFC_OK);
            tfc_tensor *rt = tfc_transpose(g, r, perm);
            CU_ASSERT_FATAL(tfc_graph_pop_device(g) == TFC_OK);
            CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
            tfc_session *s = NULL;
            CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
            CU_ASSERT_FATAL(tfc_session_set_tiling(s, 1, 8) == TFC_OK);
            CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
            tfc_value *fv[4] = {value_of(dt, m, k, A), value_of(dt, k, n, B), NULL,
                                value_of(dt, n, m, DT)};
            CU_ASSERT_FATAL(tfc_value_create(dt, tfc_shape_of(1, (int64_t[]){n}), &fv[2]) ==
                            TFC_OK);
            for (int64_t i = 0; i < n; i++) {
                if (dt == TFC_FLOAT32)
                    ((float *)tfc_value_data(fv[2]))[i] = (float)bias[i];
                else
                    ((double *)tfc_value_data(fv[2]))[i] = bias[i];
            }
            for (int rep = 0; rep < 3; rep++) {
                tfc_value *out[2] = {NULL, NULL};
                tfc_status st = tfc_session_run(s, 4, (tfc_tensor *[]){a, b, bt, dtt}, fv, 2,
                                                (tfc_tensor *[]){r, rt}, out, 0, NULL);
                if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
                CU_ASSERT_FATAL(st == TFC_OK);
                double e = max_err(out[0], C, m * n), et = max_err(out[1], CT, m * n);
                if (!(e <= tol_of(dt)) || !(et <= tol_of(dt)))
                    fprintf(stderr, "%s %s mode %d run %d: error %g, transposed %g\n",
                            dv->hint, di ? "f64" : "f32", mode, rep, e, et);
                CU_ASSERT(e <= tol_of(dt));
                CU_ASSERT(et <= tol_of(dt));
                const tfc_task_record *rec = NULL;
                int nr = tfc_session_last_records(s, &rec), mm_ocl = 0, ew = 0, ew_ocl = 0;
                for (int i = 0; i < nr; i++) {
                    int on_ocl = starpu_worker_get_type(rec[i].worker) == dv->type;
                    if (strcmp(rec[i].op, "matmul") == 0) {
                        mm_ocl += on_ocl;
                    } else if (strcmp(rec[i].op, "transpose") != 0) {
                        ew++;
                        ew_ocl += on_ocl;
                    }
                }
                CU_ASSERT_EQUAL(mm_ocl, T);
                CU_ASSERT_EQUAL(nr, (mode == 0 ? 2 * T : T + 1) + 2);
                CU_ASSERT_EQUAL(ew, mode == 0 ? T : 1);
                CU_ASSERT_EQUAL(ew_ocl, mode == 0 ? T : 0);
                tfc_value_destroy(out[0]), tfc_value_destroy(out[1]);
            }
            for (int j = 0; j < 4; j++) tfc_value_destroy(fv[j]);
            tfc_session_destroy(s);
            tfc_graph_destroy(g);
        }
}

static void test_opencl_elementwise(void) { elementwise_on_device(&dev_opencl); }
static void test_cuda_elementwise(void) { elementwise_on_device(&dev_cuda); }

/* A matrix handle of ny x nx elements with row stride ld > nx, allocated on memory node
 * `node` and filled from x (row-major ny x nx) through the CPU's memory. */
struct ld_matrix {
    starpu_data_handle_t h;
    uintptr_t mem;
    size_t bytes;
    unsigned node;
};

static void ld_matrix_make(struct ld_matrix *mx, unsigned node, enum tfc_dtype dt, int64_t ny,
                           int64_t nx, int64_t ld, const double *x)
{
    size_t es = dt == TFC_FLOAT64 ? sizeof(double) : sizeof(float);
    mx->node = node;
    mx->bytes = (size_t)(ld * ny) * es;
    mx->mem = starpu_malloc_on_node(node, mx->bytes);
    CU_ASSERT_FATAL(mx->mem != 0);
    starpu_matrix_data_register(&mx->h, (int)node, mx->mem, (uint32_t)ld, (uint32_t)nx,
                                (uint32_t)ny, es);
    if (!x) return; /* an output */
    CU_ASSERT_FATAL(starpu_data_acquire_on_node(mx->h, STARPU_MAIN_RAM, STARPU_W) == 0);
    char *px = (char *)starpu_data_get_local_ptr(mx->h);
    int64_t lx = starpu_matrix_get_local_ld(mx->h);
    for (int64_t r = 0; r < ny; r++)
        for (int64_t c = 0; c < nx; c++) {
            if (dt == TFC_FLOAT64) ((double *)(void *)px)[r * lx + c] = x[r * nx + c];
            else ((float *)(void *)px)[r * lx + c] = (float)x[r * nx + c];
        }
    starpu_data_release_on_node(mx->h, STARPU_MAIN_RAM);
}

/* Max relative error of the handle's ny x nx elements against want. */
static double ld_matrix_err(struct ld_matrix *mx, enum tfc_dtype dt, int64_t ny, int64_t nx,
                            const double *want)
{
    CU_ASSERT_FATAL(starpu_data_acquire_on_node(mx->h, STARPU_MAIN_RAM, STARPU_R) == 0);
    const char *po = (const char *)starpu_data_get_local_ptr(mx->h);
    int64_t lo = starpu_matrix_get_local_ld(mx->h);
    double e = 0;
    for (int64_t r = 0; r < ny; r++)
        for (int64_t c = 0; c < nx; c++) {
            double got = dt == TFC_FLOAT64 ? ((const double *)(const void *)po)[r * lo + c]
                                           : ((const float *)(const void *)po)[r * lo + c];
            double d = fabs(got - want[r * nx + c]) / (1 + fabs(want[r * nx + c]));
            if (!(d <= e)) e = d;
        }
    starpu_data_release_on_node(mx->h, STARPU_MAIN_RAM);
    return e;
}

static void ld_matrix_free(struct ld_matrix *mx)
{
    starpu_data_unregister(mx->h);
    starpu_free_on_node(mx->node, mx->mem, mx->bytes);
}

/* Runs cl with args a (size bytes) on worker wid over n handles; the kernel's error, or 0. */
static int run_on_worker(struct starpu_codelet *cl, struct tfc_kargs *a, size_t size, int wid,
                         int n, const starpu_data_handle_t *h,
                         const enum starpu_data_access_mode *modes)
{
    struct tfc_kerr kerr;
    memset(&kerr, 0, sizeof kerr);
    a->err = &kerr;
    struct starpu_task *t = starpu_task_create();
    t->cl = cl;
    t->nbuffers = n;
    for (int i = 0; i < n; i++) t->handles[i] = h[i], t->modes[i] = modes[i];
    t->cl_arg = a;
    t->cl_arg_size = size;
    t->cl_arg_free = 0;
    t->execute_on_a_specific_worker = 1;
    t->workerid = (unsigned)wid;
    t->synchronous = 1;
    CU_ASSERT_FATAL(starpu_task_submit(t) == 0);
    if (kerr.set) fprintf(stderr, "kernel: %s\n", kerr.msg);
    a->err = NULL;
    return kerr.set;
}

/* The kernels' leading dimensions on an accelerator. StarPU 1.3 makes a child of an
 * asynchronous partition a view of its parent (ld > row length) only where the parent's home
 * buffer is, the CPU's memory here; on the OpenCL or CUDA device each tile gets its own packed
 * copy, so the tiled runs above reach the device kernels with packed tiles only. Here the
 * operands are registered on the device's memory node with ld > nx, and one task runs on the
 * device's worker: the fused kernel, out = relu(x + bias) (bias a whole vector), the matmul
 * kernel, C = op(A) op(B) under each transpose, and the reduce kernel over rows and columns. */
static void ld_on_device(const struct device *dv)
{
    int wid = -1;
    if (!have_worker(dv)) return;
    CU_ASSERT_FATAL(starpu_worker_get_ids_by_type(dv->type, &wid, 1) == 1);
    unsigned node = starpu_worker_get_memory_node((unsigned)wid);
    enum { NY = 5, NX = 7, LD = 11, K = 6 };
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
        size_t es = di ? sizeof(double) : sizeof(float);
        double X[NY * NX], Bv[NX], want[NY * NX];
        fill(X, NY * NX, 41 + di), fill(Bv, NX, 43 + di);
        union { float f[NX]; double d[NX]; } bias;
        for (int i = 0; i < NX; i++) {
            if (di) bias.d[i] = Bv[i];
            else bias.f[i] = (float)Bv[i];
        }
        struct ld_matrix mx, mo;
        ld_matrix_make(&mx, node, dt, NY, NX, LD, X);
        ld_matrix_make(&mo, node, dt, NY, NX, LD, NULL);
        starpu_data_handle_t hb;
        starpu_vector_data_register(&hb, STARPU_MAIN_RAM, (uintptr_t)&bias, NX, es);
        size_t size = sizeof(struct tfc_kargs) + 3 * sizeof(struct tfc_kdesc) +
                      sizeof(struct tfc_fused_prog);
        struct tfc_kargs *a = calloc(1, size);
        CU_ASSERT_FATAL(a != NULL);
        a->kind = TFC_K_FUSED;
        a->n_in = 2;
        a->n_out = 1;
        a->flops = NY * NX;
        a->bytes = 3.0 * (double)(LD * NY * es);
        a->d[0] = (struct tfc_kdesc){.dtype = dt, .rank = 2, .dims = {NY, NX}, .numel = NY * NX};
        a->d[1] = (struct tfc_kdesc){.dtype = dt, .rank = 1, .dims = {NX}, .numel = NX, .buf = 1};
        a->d[2] = a->d[0];
        a->d[2].buf = 2;
        struct tfc_fused_prog *pg = (struct tfc_fused_prog *)(void *)&a->d[3];
        pg->n_ops = 2;
        pg->ops[0] = (struct tfc_fused_op){TFC_K_ADD, 0, 1, 0};
        pg->ops[1] = (struct tfc_fused_op){TFC_K_RELU, 2, -1, 0};
        pg->out_reg[0] = 3;
        CU_ASSERT_EQUAL(run_on_worker(&tfc_cl_fused, a, size, wid, 3,
                                      (starpu_data_handle_t[]){mx.h, hb, mo.h},
                                      (enum starpu_data_access_mode[]){STARPU_R, STARPU_R,
                                                                       STARPU_W}), 0);
        for (int r = 0; r < NY; r++)
            for (int c = 0; c < NX; c++) {
                double z = X[r * NX + c] + Bv[c];
                want[r * NX + c] = z > 0 ? z : 0;
            }
        double e = ld_matrix_err(&mo, dt, NY, NX, want);
        if (!(e <= tol_of(dt)))
            fprintf(stderr, "%s fused ld %s: error %g\n", dv->hint, di ? "f64" : "f32", e);
        CU_ASSERT(e <= tol_of(dt));
        ld_matrix_free(&mx), ld_matrix_free(&mo), starpu_data_unregister(hb);
        free(a);

        /* C [NY, NX] = op(A) op(B), A [NY, K] (or [K, NY]), B [K, NX] (or [NX, K]) */
        for (int tr = 0; tr < 4; tr++) {
            int ta = tr & 1, tb = tr >> 1;
            double A[NY * K], B[K * NX];
            fill(A, NY * K, 45 + tr), fill(B, K * NX, 49 + tr);
            ref_mm(A, B, want, NY, K, NX, ta, tb);
            struct ld_matrix ma, mb, mc;
            ld_matrix_make(&ma, node, dt, ta ? K : NY, ta ? NY : K, LD + 2, A);
            ld_matrix_make(&mb, node, dt, tb ? NX : K, tb ? K : NX, LD + 4, B);
            ld_matrix_make(&mc, node, dt, NY, NX, LD, NULL);
            size = sizeof(struct tfc_kargs) + 3 * sizeof(struct tfc_kdesc);
            a = calloc(1, size);
            CU_ASSERT_FATAL(a != NULL);
            a->kind = TFC_K_MATMUL;
            a->n_in = 2;
            a->n_out = 1;
            a->flops = 2.0 * NY * NX * K;
            a->attrs[MATMUL_TRANSPOSE_A].i = ta, a->attrs[MATMUL_TRANSPOSE_B].i = tb;
            a->d[0] = (struct tfc_kdesc){.dtype = dt, .rank = 2,
                                         .dims = {ta ? K : NY, ta ? NY : K}, .numel = NY * K};
            a->d[1] = (struct tfc_kdesc){.dtype = dt, .rank = 2,
                                         .dims = {tb ? NX : K, tb ? K : NX}, .numel = K * NX,
                                         .buf = 1};
            a->d[2] = (struct tfc_kdesc){.dtype = dt, .rank = 2, .dims = {NY, NX},
                                         .numel = NY * NX, .buf = 2};
            CU_ASSERT_EQUAL(run_on_worker(&tfc_cl_matmul, a, size, wid, 3,
                                          (starpu_data_handle_t[]){ma.h, mb.h, mc.h},
                                          (enum starpu_data_access_mode[]){STARPU_R, STARPU_R,
                                                                           STARPU_W}), 0);
            e = ld_matrix_err(&mc, dt, NY, NX, want);
            if (!(e <= tol_of(dt)))
                fprintf(stderr, "%s matmul ld %s ta %d tb %d: error %g\n", dv->hint,
                        di ? "f64" : "f32", ta, tb, e);
            CU_ASSERT(e <= tol_of(dt));
            ld_matrix_free(&ma), ld_matrix_free(&mb), ld_matrix_free(&mc);
            free(a);
        }

        /* the reduce kernel: X [NY, NX] (ld LD) summed over its rows (axis 0) into [NX], then
         * its mean over its columns (axis 1) into [NY] */
        for (int ax = 0; ax < 2; ax++) {
            int64_t n_out = ax ? NY : NX;
            struct ld_matrix mr;
            ld_matrix_make(&mx, node, dt, NY, NX, LD, X);
            ld_matrix_make(&mr, node, dt, 1, n_out, n_out, NULL);
            size = sizeof(struct tfc_kargs) + 2 * sizeof(struct tfc_kdesc);
            a = calloc(1, size);
            CU_ASSERT_FATAL(a != NULL);
            a->kind = ax ? TFC_K_REDUCE_MEAN : TFC_K_REDUCE_SUM;
            a->n_in = 1;
            a->n_out = 1;
            a->flops = NY * NX;
            a->attrs[REDUCE_AXES].n = 1, a->attrs[REDUCE_AXES].v[0] = ax;
            a->d[0] = (struct tfc_kdesc){.dtype = dt, .rank = 2, .dims = {NY, NX},
                                         .numel = NY * NX};
            a->d[1] = (struct tfc_kdesc){.dtype = dt, .rank = 2, .dims = {1, n_out},
                                         .numel = n_out, .buf = 1};
            CU_ASSERT_EQUAL(run_on_worker(&tfc_cl_reduce, a, size, wid, 2,
                                          (starpu_data_handle_t[]){mx.h, mr.h},
                                          (enum starpu_data_access_mode[]){STARPU_R,
                                                                           STARPU_W}), 0);
            for (int64_t o = 0; o < n_out; o++) {
                double acc = 0;
                for (int64_t j = 0; j < (ax ? NX : NY); j++)
                    acc += ax ? X[o * NX + j] : X[j * NX + o];
                want[o] = ax ? acc / NX : acc;
            }
            e = ld_matrix_err(&mr, dt, 1, n_out, want);
            if (!(e <= tol_of(dt)))
                fprintf(stderr, "%s reduce ld %s axis %d: error %g\n", dv->hint,
                        di ? "f64" : "f32", ax, e);
            CU_ASSERT(e <= tol_of(dt));
            ld_matrix_free(&mx), ld_matrix_free(&mr);
            free(a);
        }
    }
}

static void test_opencl_ld(void) { ld_on_device(&dev_opencl); }
static void test_cuda_ld(void) { ld_on_device(&dev_cuda); }

/* ---- inference plans split over their batch rows: a chain per CPU worker ------------------- */

/* Runs fetch of g on xv (fed to x) twice (the second from the cached plan) with
 * TFC_ROW_SPLIT_MIN = min_rows (NULL: unset, the default); returns the output, the last run's
 * task count and how many of them each CPU worker ran. */
static tfc_value *rows_run(tfc_graph *g, tfc_tensor *x, tfc_value *xv, tfc_tensor *fetch,
                           const char *min_rows, int *n_tasks, int per_worker[STARPU_NMAXWORKERS])
{
    if (min_rows) setenv("TFC_ROW_SPLIT_MIN", min_rows, 1);
    else unsetenv("TFC_ROW_SPLIT_MIN");
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
    tfc_value *out = NULL;
    for (int r = 0; r < 2; r++) {
        tfc_value_destroy(out);
        out = NULL;
        tfc_status st = tfc_session_run(s, 1, &x, &xv, 1, &fetch, &out, 0, NULL);
        if (st) fprintf(stderr, "rows run: %s\n", tfc_session_errmsg(s));
        CU_ASSERT_FATAL(st == TFC_OK);
    }
    const tfc_task_record *rec = NULL;
    *n_tasks = tfc_session_last_records(s, &rec);
    memset(per_worker, 0, sizeof(int) * STARPU_NMAXWORKERS);
    for (int i = 0; i < *n_tasks; i++)
        if (rec[i].worker >= 0 && rec[i].worker < STARPU_NMAXWORKERS) per_worker[rec[i].worker]++;
    tfc_session_destroy(s);
    unsetenv("TFC_ROW_SPLIT_MIN");
    return out;
}

static tfc_tensor *const_of(tfc_graph *g, const char *name, int rank, const int64_t *dims,
                            unsigned seed)
{
    tfc_value *v = nd_value(TFC_FLOAT32, rank, dims, seed);
    tfc_tensor *t = tfc_constant(g, name, v);
    tfc_value_destroy(v);
    return t;
}

/* An MLP's inference (x [m, 64] -> matmul, bias add + relu fused -> matmul, bias add ->
 * softmax: 5 steps), weights constant. From TFC_ROW_SPLIT_MIN rows (here 64) on 2 or more
 * CPU workers and no device, the plan is one chain of m / workers rows per worker, each block's
 * 5 steps one chain task (codelets/chain.h; not pinned: any worker may run it), the unsplit
 * plan's values (each row
 * computed alone; within float32 rounding, as the GEMM's kernels may sum a block of rows in
 * another order) at m = 128 and at m = 101 (blocks of 51 and 50); unset, the default is 64.
 * Below the threshold (m = 32), with the split off (0 or off), or with a step that is not
 * row-wise (a sum over the batch after the softmax), the plan is not split: one chain task
 * of all its steps pinned to one worker (tfc_pin_chain, tfc_chain_pinned; with fewer than 2
 * CPU workers, a task per step). A step whose first operand is a scalar splits over its
 * second's rows. A bad TFC_ROW_SPLIT_MIN fails the run naming it. */
static void test_row_chains(void)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 64}));
    tfc_tensor *w1 = const_of(g, "w1", 2, (int64_t[]){64, 48}, 31);
    tfc_tensor *b1 = const_of(g, "b1", 1, (int64_t[]){48}, 32);
    tfc_tensor *w2 = const_of(g, "w2", 2, (int64_t[]){48, 10}, 33);
    tfc_tensor *b2 = const_of(g, "b2", 1, (int64_t[]){10}, 34);
    tfc_tensor *h = tfc_relu(g, tfc_add(g, tfc_matmul(g, x, w1, 0, 0), b1));
    tfc_tensor *p = tfc_softmax(g, tfc_add(g, tfc_matmul(g, h, w2, 0, 0), b2), -1);
    tfc_tensor *total = tfc_reduce_sum(g, p, 1, (int64_t[]){0}, 0); /* not row-wise */
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    int nw = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    int can = nw >= 2 && nw == (int)starpu_worker_get_count();
    const int64_t batches[3] = {128, 101, 32};
    for (int k = 0; k < 4; k++) {
        int64_t m = batches[k < 3 ? k : 0];
        tfc_tensor *fetch = k < 3 ? p : total;
        int steps = k < 3 ? 5 : 6, split = can && m >= 64 && k < 3;
        tfc_value *xv = nd_value(TFC_FLOAT32, 2, (int64_t[]){m, 64}, 40 + (unsigned)k);
        int n_whole, n_rows, n_dflt, w_whole[STARPU_NMAXWORKERS], w_rows[STARPU_NMAXWORKERS];
        tfc_value *whole = rows_run(g, x, xv, fetch, k & 1 ? "0" : "off", &n_whole, w_whole);
        tfc_value *rows = rows_run(g, x, xv, fetch, "64", &n_rows, w_rows);
        tfc_value *dflt = rows_run(g, x, xv, fetch, NULL, &n_dflt, w_rows); /* unset: 64 */
        /* the rows to the last bits only where the GEMM library's kernels do not depend on
         * the row count (OpenBLAS's and oneDNN's AVX2 kernels for 64 rows sum in another order
         * than for 128 on a Zen 3): within float32 rounding; the two split runs exactly, unless
         * an OpenCL worker (run-tiling.sh) may take a task in one run and not in the other */
        int ok = same_values(rows, whole, 0, 1e-6) && same_values(dflt, rows, can, 1e-6);
        int unsplit = can ? 1 : steps; /* one pinned chain task, else a task per step */
        int want = split ? nw : unsplit, placed = 1;
        for (int w = 0; w < nw && !split && can; w++)
            placed &= w_whole[w] == 0 || w_whole[w] == 1; /* on one worker */
        if (!ok || n_rows != want || n_whole != unsplit || n_dflt != want || !placed)
            fprintf(stderr, "rows m=%lld case %d: %d tasks (want %d), unsplit %d, default %d, "
                    "%s, %s\n", (long long)m, k, n_rows, want, n_whole, n_dflt,
                    ok ? "same values" : "values differ", placed ? "placed" : "misplaced");
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(n_rows, want);
        CU_ASSERT_EQUAL(n_whole, unsplit);
        CU_ASSERT_EQUAL(n_dflt, want);
        CU_ASSERT(placed);
        tfc_value_destroy(whole), tfc_value_destroy(rows), tfc_value_destroy(dflt);
        tfc_value_destroy(xv);
    }
    /* a step whose first operand is a scalar (0.5 * x: the batch is in its second) */
    tfc_graph *g2 = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g2) == TFC_OK);
    tfc_tensor *x2 = tfc_placeholder(g2, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 8}));
    tfc_tensor *half = tfc_mul(g2, tfc_scalar(g2, TFC_FLOAT32, 0.5), x2);
    CU_ASSERT_FATAL(tfc_graph_status(g2) == TFC_OK);
    tfc_value *x2v = nd_value(TFC_FLOAT32, 2, (int64_t[]){101, 8}, 46);
    int n_w, n_r, wk2[STARPU_NMAXWORKERS];
    tfc_value *hw = rows_run(g2, x2, x2v, half, "0", &n_w, wk2);
    tfc_value *hr = rows_run(g2, x2, x2v, half, "64", &n_r, wk2);
    CU_ASSERT(same_values(hr, hw, 1, 0));
    CU_ASSERT_EQUAL(n_w, 1);
    CU_ASSERT_EQUAL(n_r, can ? nw : 1);
    if (!same_values(hr, hw, 1, 0) || n_r != (can ? nw : 1))
        fprintf(stderr, "rows, scalar first: %d tasks, %s\n", n_r,
                same_values(hr, hw, 1, 0) ? "same bits" : "values differ");
    tfc_value_destroy(hw), tfc_value_destroy(hr), tfc_value_destroy(x2v);
    tfc_graph_destroy(g2);
    /* a lower threshold splits 32 rows; a bad value is an error naming the variable */
    tfc_value *xv = nd_value(TFC_FLOAT32, 2, (int64_t[]){32, 64}, 45);
    int n, wk[STARPU_NMAXWORKERS];
    tfc_value *out = rows_run(g, x, xv, p, "16", &n, wk);
    CU_ASSERT_EQUAL(n, can ? nw : 5);
    tfc_value_destroy(out);
    setenv("TFC_ROW_SPLIT_MIN", "-3", 1);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT(tfc_session_run(s, 1, &x, &xv, 1, &p, &out, 0, NULL) != TFC_OK);
    CU_ASSERT(strstr(tfc_session_errmsg(s), "TFC_ROW_SPLIT_MIN") != NULL);
    unsetenv("TFC_ROW_SPLIT_MIN");
    tfc_session_destroy(s);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* One session runs the row-split MLP of test_row_chains on three batches in turn (a, b, a):
 * its hidden layers live in the scratch memory of whichever worker runs a block's chain task,
 * so a run must read what this run wrote there, not the last one's. Each output is the unsplit plan's for the
 * same batch (within float32 rounding, as in test_row_chains). */
static void test_row_chains_runs(void)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 64}));
    tfc_tensor *h = tfc_relu(g, tfc_add(g, tfc_matmul(g, x, const_of(g, "w1", 2,
                                                                 (int64_t[]){64, 48}, 51), 0, 0),
                                         const_of(g, "b1", 1, (int64_t[]){48}, 52)));
    tfc_tensor *p = tfc_softmax(g, tfc_matmul(g, h, const_of(g, "w2", 2, (int64_t[]){48, 10}, 53),
                                              0, 0), -1);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_value *xs[3] = {nd_value(TFC_FLOAT32, 2, (int64_t[]){128, 64}, 54),
                        nd_value(TFC_FLOAT32, 2, (int64_t[]){128, 64}, 55), NULL};
    xs[2] = xs[0];
    tfc_session *whole = NULL, *rows = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &whole) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &rows) == TFC_OK);
    CU_ASSERT(tfc_session_set_profiling(rows, 1) == TFC_OK);
    CU_ASSERT(tfc_session_set_profiling(whole, 1) == TFC_OK);
    CU_ASSERT(tfc_session_set_passes(whole, TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS) ==
              TFC_OK); /* one task per step: their count */
    int nw = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    int can = nw >= 2 && nw == (int)starpu_worker_get_count();
    for (int r = 0; r < 3; r++) {
        tfc_value *want = NULL, *got = NULL;
        const tfc_task_record *rec = NULL;
        setenv("TFC_ROW_SPLIT_MIN", "off", 1); /* read as the session builds its plan */
        CU_ASSERT_FATAL(tfc_session_run(whole, 1, &x, &xs[r], 1, &p, &want, 0, NULL) == TFC_OK);
        int steps = tfc_session_last_records(whole, &rec); /* 4: matmul, bias + relu, ... */
        setenv("TFC_ROW_SPLIT_MIN", "64", 1);
        CU_ASSERT_FATAL(tfc_session_run(rows, 1, &x, &xs[r], 1, &p, &got, 0, NULL) == TFC_OK);
        int n = tfc_session_last_records(rows, &rec), ok = same_values(got, want, 0, 1e-6);
        if (!ok || n != (can ? nw : steps))
            fprintf(stderr, "rows run %d: %d tasks of %d steps, %s\n", r, n, steps,
                    ok ? "same" : "values differ");
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(steps, 4);
        CU_ASSERT_EQUAL(n, can ? nw : steps);
        tfc_value_destroy(want), tfc_value_destroy(got);
    }
    unsetenv("TFC_ROW_SPLIT_MIN");
    tfc_session_destroy(rows), tfc_session_destroy(whole);
    tfc_value_destroy(xs[0]), tfc_value_destroy(xs[1]);
    tfc_graph_destroy(g);
}

/* x [-1, 32] -> h = relu(x w1) [.., 24] -> p = softmax(h w2) [.., 6], the weights constants
 * drawn from seed and seed + 1. */
static tfc_graph *two_layer_graph(unsigned seed, tfc_tensor **x, tfc_tensor **h, tfc_tensor **p)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 32}));
    tfc_tensor *w1 = const_of(g, "w1", 2, (int64_t[]){32, 24}, seed);
    tfc_tensor *w2 = const_of(g, "w2", 2, (int64_t[]){24, 6}, seed + 1);
    *h = tfc_relu(g, tfc_matmul(g, *x, w1, 0, 0));
    *p = tfc_softmax(g, tfc_matmul(g, *h, w2, 0, 0), -1);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    return g;
}

/* A hidden layer fetched beside the output: it is a buffer of the chain task (written by one
 * step, read by the next within the task), not scratch; both fetches equal the unsplit plan's
 * within float32 rounding, and the split plan is still one chain task per block. */
static void test_row_chain_fetch(void)
{
    tfc_tensor *x, *h, *p;
    tfc_graph *g = two_layer_graph(71, &x, &h, &p);
    tfc_value *xv = nd_value(TFC_FLOAT32, 2, (int64_t[]){100, 32}, 73);
    tfc_tensor *fetches[2] = {h, p};
    tfc_value *out[2][2] = {{NULL, NULL}, {NULL, NULL}};
    int n[2] = {0, 0};
    for (int split = 0; split < 2; split++) {
        setenv("TFC_ROW_SPLIT_MIN", split ? "64" : "off", 1);
        tfc_session *s = NULL;
        CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
        CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &xv, 2, fetches, out[split], 0, NULL) == TFC_OK);
        const tfc_task_record *rec = NULL;
        n[split] = tfc_session_last_records(s, &rec);
        tfc_session_destroy(s);
    }
    unsetenv("TFC_ROW_SPLIT_MIN");
    int nw = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    int can = nw >= 2 && nw == (int)starpu_worker_get_count();
    CU_ASSERT(same_values(out[1][0], out[0][0], 0, 1e-6));
    CU_ASSERT(same_values(out[1][1], out[0][1], 0, 1e-6));
    CU_ASSERT_EQUAL(n[1], can ? nw : n[0]);
    for (int i = 0; i < 4; i++) tfc_value_destroy(out[i / 2][i % 2]);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* Runs of a row-split plan register the feed's row blocks and the fetched output's in place
 * (sched/tiling.c, mark_direct): the output's blocks are written into the value the run hands
 * back. Four asynchronous runs in flight together, each with its own feed, give the unsplit
 * plan's results for their feeds (no run's blocks on another's buffers); a run fetching the
 * output twice copies it out (only its feed in place), with the same values. */
static void test_row_tiles_in_place(void)
{
    enum { RUNS = 4 };
    tfc_tensor *x, *h, *p;
    tfc_graph *g = two_layer_graph(81, &x, &h, &p);
    tfc_value *xv[RUNS], *want[RUNS] = {NULL}, *got[RUNS] = {NULL}, *twice[2] = {NULL, NULL};
    for (int k = 0; k < RUNS; k++) xv[k] = nd_value(TFC_FLOAT32, 2, (int64_t[]){100, 32}, 83 + k);
    setenv("TFC_ROW_SPLIT_MIN", "off", 1);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    for (int k = 0; k < RUNS; k++)
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &xv[k], 1, &p, &want[k], 0, NULL) == TFC_OK);
    tfc_session_destroy(s);
    setenv("TFC_ROW_SPLIT_MIN", "64", 1);
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    unsigned long before = tfc_testing_tiles_in_place();
    tfc_run *runs[RUNS];
    for (int k = 0; k < RUNS; k++)
        CU_ASSERT_FATAL(tfc_session_run_async(s, 1, &x, &xv[k], 1, &p, 0, NULL, &runs[k]) ==
                        TFC_OK);
    for (int k = 0; k < RUNS; k++) CU_ASSERT_FATAL(tfc_run_wait(runs[k], &got[k]) == TFC_OK);
    unsigned long async_in_place = tfc_testing_tiles_in_place() - before;
    before = tfc_testing_tiles_in_place();
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &xv[0], 2, (tfc_tensor *[]){p, p}, twice, 0,
                                    NULL) == TFC_OK);
    unsigned long twice_in_place = tfc_testing_tiles_in_place() - before;
    tfc_session_destroy(s);
    unsetenv("TFC_ROW_SPLIT_MIN");
    int nw = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    int can = nw >= 2 && nw == (int)starpu_worker_get_count(); /* the row split applies */
    for (int k = 0; k < RUNS; k++) CU_ASSERT(same_values(got[k], want[k], 0, 1e-6));
    CU_ASSERT(same_values(twice[0], want[0], 0, 1e-6));
    CU_ASSERT(same_values(twice[1], want[0], 0, 1e-6));
    CU_ASSERT_EQUAL(async_in_place, can ? 2 * RUNS : 0); /* the feed's and the output's */
    CU_ASSERT_EQUAL(twice_in_place, can ? 1 : 0);
    for (int k = 0; k < RUNS; k++) {
        tfc_value_destroy(xv[k]);
        tfc_value_destroy(want[k]);
        tfc_value_destroy(got[k]);
    }
    tfc_value_destroy(twice[0]);
    tfc_value_destroy(twice[1]);
    tfc_graph_destroy(g);
}

/* The unsplit plan's output for feed v (a fresh session each time: nothing kept). */
static tfc_value *whole_output(tfc_graph *g, tfc_tensor *x, tfc_tensor *p, tfc_value *v)
{
    setenv("TFC_ROW_SPLIT_MIN", "off", 1);
    tfc_session *s = NULL;
    tfc_value *out = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &v, 1, &p, &out, 0, NULL) == TFC_OK);
    tfc_session_destroy(s);
    setenv("TFC_ROW_SPLIT_MIN", "64", 1);
    return out;
}

/* Runs on a StarPU whose only memory node is host RAM keep the handles they registered on the
 * caller's memory for the next run on the same addresses (sched/host_keep.c). Runs on one feed
 * buffer take its handle and its row tiles kept; the buffer rewritten in place between two runs
 * gives the new rows' results (no stale copy anywhere); an output the caller keeps is not
 * written by later runs (their tiles are on their own values); another buffer, then the first
 * again, are registered anew; outputs destroyed and allocated again are written right. Each
 * result equals the unsplit plan's. With a second memory node nothing is kept. */
static void test_row_tiles_kept(void)
{
    tfc_tensor *x, *h, *p;
    tfc_graph *g = two_layer_graph(91, &x, &h, &p);
    tfc_value *a = nd_value(TFC_FLOAT32, 2, (int64_t[]){100, 32}, 93);
    tfc_value *b = nd_value(TFC_FLOAT32, 2, (int64_t[]){100, 32}, 94);
    setenv("TFC_ROW_SPLIT_MIN", "64", 1);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    tfc_value *out[5] = {NULL}, *want_a = whole_output(g, x, p, a);
    unsigned long kept[5];
    for (int r = 0; r < 3; r++) { /* on a; a rewritten before the third */
        if (r == 2) {
            float *d = tfc_value_data(a);
            for (int64_t i = 0; i < tfc_value_numel(a); i++) d[i] = 0.5f - d[i];
            tfc_value_destroy(want_a);
            want_a = whole_output(g, x, p, a);
        }
        unsigned long before = tfc_testing_host_kept();
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &a, 1, &p, &out[r], 0, NULL) == TFC_OK);
        kept[r] = tfc_testing_host_kept() - before;
        CU_ASSERT(same_values(out[r], want_a, 0, 1e-6));
    }
    tfc_value *want_b = whole_output(g, x, p, b);
    unsigned long before = tfc_testing_host_kept();
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &b, 1, &p, &out[3], 0, NULL) == TFC_OK);
    kept[3] = tfc_testing_host_kept() - before;
    CU_ASSERT(same_values(out[3], want_b, 0, 1e-6));
    tfc_value_destroy(want_b);
    /* the first two outputs still hold a's first rows' results */
    tfc_value *a_first = nd_value(TFC_FLOAT32, 2, (int64_t[]){100, 32}, 93); /* a's first rows */
    tfc_value *want_old = whole_output(g, x, p, a_first);
    CU_ASSERT(same_values(out[0], want_old, 0, 1e-6));
    CU_ASSERT(same_values(out[1], want_old, 0, 1e-6));
    for (int r = 1; r < 4; r++) tfc_value_destroy(out[r]), out[r] = NULL;
    before = tfc_testing_host_kept();
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &a, 1, &p, &out[4], 0, NULL) == TFC_OK);
    kept[4] = tfc_testing_host_kept() - before;
    CU_ASSERT(same_values(out[4], want_a, 0, 1e-6));
    tfc_session_destroy(s);
    unsetenv("TFC_ROW_SPLIT_MIN");
    int nw = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    int can = nw >= 2 && nw == (int)starpu_worker_get_count(); /* the row split applies */
    unsigned long per_run = starpu_memory_nodes_get_count() != 1 ? 0 : can ? 2 : 1;
    CU_ASSERT_EQUAL(kept[0], 0);       /* a fresh instance */
    CU_ASSERT_EQUAL(kept[1], per_run); /* a's handle and its tiles; not out[0]'s tiles */
    CU_ASSERT_EQUAL(kept[2], per_run);
    CU_ASSERT_EQUAL(kept[3], 0);       /* b: registered anew */
    CU_ASSERT(kept[4] <= per_run / 2); /* a again: anew; only the output may land on a freed one */
    tfc_value_destroy(out[0]), tfc_value_destroy(out[4]);
    tfc_value_destroy(want_old), tfc_value_destroy(a_first), tfc_value_destroy(want_a);
    tfc_value_destroy(a), tfc_value_destroy(b);
    tfc_graph_destroy(g);
}

/* A kernel that fails inside a chain task (an integer division by zero in the third of a
 * block's steps: matmul, cast to int32, division by a fed row vector d) fails the run with the
 * message naming that step's node, as the unsplit plan does; the next run of the same session
 * (d without a zero) succeeds, equal to the unsplit plan's. */
static void test_row_chain_error(void)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 16}));
    tfc_tensor *d = tfc_placeholder(g, "d", TFC_INT32, tfc_shape_of(1, (int64_t[]){8}));
    tfc_tensor *w = const_of(g, "w", 2, (int64_t[]){16, 8}, 61);
    tfc_tensor *q = tfc_div(g, tfc_cast(g, tfc_matmul(g, x, w, 0, 0), TFC_INT32), d);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    const char *q_name = tfc_tensor_name(q);
    tfc_value *xv = nd_value(TFC_FLOAT32, 2, (int64_t[]){128, 16}, 62), *dv[2] = {NULL, NULL};
    int32_t divisors[2][8] = {{3, 1, 2, 0, 5, 1, 1, 2}, {3, 1, 2, 7, 5, 1, 1, 2}};
    for (int k = 0; k < 2; k++)
        CU_ASSERT_FATAL(tfc_value_from_data(TFC_INT32, tfc_shape_of(1, (int64_t[]){8}),
                                            divisors[k], &dv[k]) == TFC_OK);
    tfc_tensor *feeds[2] = {x, d};
    tfc_value *whole = NULL;
    setenv("TFC_ROW_SPLIT_MIN", "off", 1);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(s, 2, feeds, (tfc_value *[]){xv, dv[1]}, 1, &q, &whole, 0,
                                    NULL) == TFC_OK);
    tfc_session_destroy(s);
    setenv("TFC_ROW_SPLIT_MIN", "64", 1);
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT(tfc_session_set_profiling(s, 1) == TFC_OK);
    tfc_value *out = NULL;
    tfc_status st = tfc_session_run(s, 2, feeds, (tfc_value *[]){xv, dv[0]}, 1, &q, &out, 0, NULL);
    const char *msg = tfc_session_errmsg(s);
    CU_ASSERT(st != TFC_OK && out == NULL);
    CU_ASSERT(strstr(msg, "division by zero") != NULL && q_name && strstr(msg, q_name) != NULL);
    if (st == TFC_OK || !strstr(msg, "division by zero"))
        fprintf(stderr, "chain error: status %d, '%s'\n", (int)st, msg);
    tfc_value_destroy(out);
    out = NULL;
    CU_ASSERT(tfc_session_run(s, 2, feeds, (tfc_value *[]){xv, dv[1]}, 1, &q, &out, 0, NULL) ==
              TFC_OK);
    const tfc_task_record *rec = NULL;
    int nw = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    int can = nw >= 2 && nw == (int)starpu_worker_get_count();
    int n = tfc_session_last_records(s, &rec), chains = 0;
    for (int i = 0; i < n; i++) chains += !strcmp(rec[i].op, "chain");
    CU_ASSERT_EQUAL(chains, can ? nw : 0); /* one chain task per block */
    CU_ASSERT(!can || n == nw);
    CU_ASSERT(out && same_values(out, whole, 1, 0));
    unsetenv("TFC_ROW_SPLIT_MIN");
    tfc_session_destroy(s);
    tfc_value_destroy(out), tfc_value_destroy(whole), tfc_value_destroy(xv);
    tfc_value_destroy(dv[0]), tfc_value_destroy(dv[1]);
    tfc_graph_destroy(g);
}

int main(void)
{
    unsetenv("TFC_TILE_MIN");
    unsetenv("TFC_TILE_SIZE");
    unsetenv("TFC_ROW_SPLIT_MIN");
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("tiling", test_ctx_open, test_ctx_close);
    TEST_ADD(test_matmul_tiles);
    TEST_ADD(test_elementwise_tiles);
    TEST_ADD(test_reduce_tiles);
    TEST_ADD(test_split_k);
    TEST_ADD(test_chain);
    TEST_ADD(test_training);
    TEST_ADD(test_conv_batch);
    TEST_ADD(test_conv_batch_default);
    TEST_ADD(test_sharing_workers);
    TEST_ADD(test_update_rows);
    TEST_ADD(test_batch_elementwise);
    TEST_ADD(test_row_chains);
    TEST_ADD(test_row_chains_runs);
    TEST_ADD(test_row_chain_fetch);
    TEST_ADD(test_row_tiles_in_place);
    TEST_ADD(test_row_tiles_kept);
    TEST_ADD(test_row_chain_error);
    TEST_ADD(test_partition_widths);
    TEST_ADD(test_defaults);
    TEST_ADD(test_bad_values);
    TEST_ADD(test_opencl);
    TEST_ADD(test_opencl_elementwise);
    TEST_ADD(test_opencl_ld);
    TEST_ADD(test_cuda);
    TEST_ADD(test_cuda_elementwise);
    TEST_ADD(test_cuda_ld);
    return test_main();
}
