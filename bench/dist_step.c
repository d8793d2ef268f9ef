/* dist_step.c: the distributed training step's figures (issue 15, item 7; bench/run_dist.sh
 * drives it, bench/RESULTS.md has the results). On the flagship MLP (examples/mlp_model.c,
 * 784-256-128-10, synthetic data), each rank times synchronous data-parallel steps
 * (tfc_dist_train_step) and counts the bytes StarPU-MPI sent (its STARPU_COMM_STATS counters,
 * starpu_mpi_comm_amounts_retrieve), against the analytic minimum of the placement: per step,
 * each rank sends its gradient of every variable it does not own to that variable's owner, and each owner
 * sends each of the N - 1 other ranks the new value of what it owns:
 *     bytes(r) = sum over v not owned by r of |v|  +  (N - 1) * sum over v owned by r of |v|
 * in one message per owner (other than r) holding some variable, plus N - 1 when r owns some
 * (the library packs an owner's variables into one message each way). Owners by size: each
 * rank sends about 2 (N - 1) P / N of the P parameter bytes; all on rank 0: rank 0 sends
 * (N - 1) P, the others P.
 *   dist_step params                          parameter bytes of the flagship MLP and the CNN
 *   mpirun -np N dist_step OWNERS STEPS BATCH  OWNERS: size or rank0; BATCH: the global batch
 * Each rank prints one line: rank, ranks, owners, batch, the median step in ms, the bytes it
 * sent per step (measured) and the analytic minimum, and the analytic message count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <starpu_mpi.h>
#include <tfc-starpu/tfc.h>
#include "../examples/cnn_model.h"
#include "../examples/mlp_model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long long var_bytes(tfc_tensor *v)
{
    if (!v) return 0;
    tfc_shape shape = tfc_tensor_shape(v);
    long long n = (long long)tfc_shape_numel(&shape);
    return n < 0 ? 0 : 4 * n; /* float32 */
}

/* "NAME TOTAL B: v1 v2 ..." (each variable's bytes, in the model's order). */
static long long print_params(const char *name, tfc_tensor *const *vars, int n)
{
    long long total = 0;
    for (int i = 0; i < n; i++) total += var_bytes(vars[i]);
    printf("params %s %lld B:", name, total);
    for (int i = 0; i < n; i++) if (vars[i]) printf(" %lld", var_bytes(vars[i]));
    printf("\n");
    return total;
}

static int params(void)
{
    tfc_graph *g;
    struct mlp_model m;
    struct cnn_model c;
    struct cnn_config cc = {0};
    tfc_graph_create(&g);
    mlp_model_build(g, TFC_INT32, &m);
    int ok = tfc_graph_status(g) == TFC_OK;
    if (ok) print_params("mlp", m.vars, MLP_N_VARS);
    tfc_graph_destroy(g);
    tfc_graph_create(&g);
    cnn_model_build(g, TFC_INT32, &cc, &c);
    ok = ok && tfc_graph_status(g) == TFC_OK;
    if (ok) print_params("cnn", c.vars, CNN_N_VARS);
    tfc_graph_destroy(g);
    if (!ok) return fprintf(stderr, "dist_step: the models do not build\n"), 1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* This rank's slice of a global batch: random images, labels 0..9. */
static void make_slice(int64_t rows, int rank, tfc_value **x, tfc_value **y)
{
    tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){rows, 784}), x);
    tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){rows}), y);
    float *xp = tfc_value_data(*x);
    int32_t *yp = tfc_value_data(*y);
    unsigned s = 1234u + 77u * (unsigned)rank;
    for (int64_t i = 0; i < rows * 784; i++) s = s * 1664525u + 1013904223u, xp[i] = (float)(s >> 8) / 16777216.0f;
    for (int64_t i = 0; i < rows; i++) yp[i] = (int32_t)((unsigned)i * 7u % 10u);
}

/* The analytic minimum of this rank's bytes and messages per step (see the top). */
static void analytic(const tfc_dist_train *t, tfc_tensor **vars, int me, int n,
                     long long *bytes, int *msgs)
{
    long long pack[64] = {0};
    for (int i = 0; i < MLP_N_VARS; i++) { /* a tiled variable: each row tile to its owner */
        int64_t rows = tfc_tensor_shape(vars[i]).rank ? tfc_tensor_shape(vars[i]).dims[0] : 1;
        for (int k = 0; k < tfc_dist_train_tiles(t, i); k++) {
            int64_t r0 = 0, r1 = rows;
            int o = tfc_dist_train_tile(t, i, k, &r0, &r1);
            if (o >= 0 && o < 64) pack[o] += (long long)var_bytes(vars[i]) / rows * (r1 - r0);
        }
    }
    *bytes = 0, *msgs = 0;
    for (int o = 0; o < n && o < 64; o++) {
        if (!pack[o]) continue;
        if (o == me) *bytes += (long long)(n - 1) * pack[o], *msgs += n - 1;
        else *bytes += pack[o], *msgs += 1;
    }
}

#define CHECK(call, what) do { if (call) { fprintf(stderr, "dist_step: %s: %s\n", what, tfc_errmsg()); return 1; } } while (0)

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "params")) return params();
    if (argc != 4) {
        fprintf(stderr, "usage: dist_step params | dist_step size|rank0 STEPS BATCH (under mpirun)\n");
        return 2;
    }
    int steps = atoi(argv[2]);
    int64_t batch = atoll(argv[3]);
    if (steps < 1 || steps > 10000 || batch < 1) return fprintf(stderr, "dist_step: bad STEPS or BATCH\n"), 2;
    setenv("STARPU_COMM_STATS", "1", 0); /* StarPU-MPI counts the bytes it sends */
    tfc_ctx *ctx;
    CHECK(tfc_ctx_create_dist(TFC_DIST_MPI, &ctx), "context");
    int me = tfc_dist_rank(ctx), n = tfc_dist_size(ctx);
    tfc_graph *g;
    tfc_graph_create(&g);
    struct mlp_model m;
    mlp_model_build(g, TFC_INT32, &m);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.001);
    tfc_dist_train *t;
    CHECK(tfc_dist_train_create(g, m.loss, MLP_N_VARS, m.vars, &opt, n,
                                strcmp(argv[1], "rank0") ? 0 : TFC_DIST_OWNERS_RANK0, &t), "trainer");
    tfc_session *s;
    CHECK(tfc_session_create(ctx, g, &s), "session");
    CHECK(tfc_session_init_variables(s), "init");
    tfc_value *slice[2];
    int64_t rows = batch * (me + 1) / n - batch * me / n;
    make_slice(rows, me, &slice[0], &slice[1]);
    tfc_tensor *feeds[2] = {m.images, m.labels};
    size_t before[64] = {0}, after[64] = {0};
    double *ms = calloc((size_t)steps, sizeof *ms);
    for (int k = -2; k < steps; k++) { /* two warm-up steps */
        if (k == 0) starpu_mpi_comm_amounts_retrieve(before);
        double t0 = now_s();
        if (tfc_dist_train_step(t, ctx, s, 2, feeds, slice, batch)) {
            fprintf(stderr, "dist_step: rank %d: step %d: %s\n", me, k, tfc_dist_train_errmsg(t));
            return 1;
        }
        if (k >= 0) ms[k] = 1e3 * (now_s() - t0);
    }
    starpu_mpi_comm_amounts_retrieve(after);
    long long sent = 0, want;
    int msgs;
    for (int r = 0; r < n && r < 64; r++) sent += (long long)(after[r] - before[r]);
    analytic(t, m.vars, me, n, &want, &msgs);
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    printf("rank %d ranks %d owners %s batch %lld step_ms %.3f sent_B %lld analytic_B %lld msgs %d\n",
           me, n, argv[1], (long long)batch, ms[steps / 2], sent / steps, want, msgs);
    fflush(stdout);
    free(ms);
    tfc_value_destroy(slice[0]);
    tfc_value_destroy(slice[1]);
    tfc_session_destroy(s);
    tfc_dist_train_destroy(t);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    return 0;
}
