/* test_passes.c: the plan-time passes (sched/passes.c). Fusion turns a 6-op element-wise chain
 * (float32 and float64, with a broadcast input) and a tree of several inputs into one task
 * with the results of the unfused ops, keeps a fetched or otherwise used intermediate, splits
 * at placement hints and beyond 8 inputs, and runs on the OpenCL worker (PoCL) or a CUDA
 * worker (where one exists) under a hint;
 * CSE and constant folding lower the task counts without changing results (and CSE leaves a
 * variable read before and after an update alone); bad TFC_FUSION / TFC_CSE /
 * TFC_CONST_FOLD values and pass bits are errors. Task counts come from the session's stats. */
#include <math.h>
#include <string.h>
#include <starpu.h>
#include "testutil.h"
#include "../sched/testing.h"

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

/* Deterministic values in [lo, hi), never 0 for lo > 0. */
static tfc_value *rand_value(enum tfc_dtype dt, tfc_shape shape, double lo, double hi,
                             uint32_t seed)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_create(dt, shape, &v) == TFC_OK);
    int64_t n = tfc_shape_numel(&shape);
    uint32_t x = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        double u = lo + (hi - lo) * (double)(x >> 8) / (double)(1u << 24);
        if (u == 0) u = 0.125;
        if (dt == TFC_FLOAT32)
            ((float *)tfc_value_data(v))[i] = (float)u;
        else
            ((double *)tfc_value_data(v))[i] = u;
    }
    return v;
}

/* Runs the fetches with the given passes in a fresh session; returns the tasks submitted. */
static int run_with(tfc_graph *g, unsigned passes, int nf, tfc_tensor **ft, tfc_value **fv,
                    int nfetch, tfc_tensor **fetch, tfc_value **out)
{
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_set_passes(s, passes), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_get_passes(s), passes);
    tfc_session_stats a, b;
    tfc_session_get_stats(s, &a);
    tfc_status st = tfc_session_run(s, nf, ft, fv, nfetch, fetch, out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    tfc_session_get_stats(s, &b);
    tfc_session_destroy(s);
    return (int)(b.tasks - a.tasks);
}

/* Largest relative difference (against max(1, |y|)). */
static double max_diff(const tfc_value *x, const tfc_value *y)
{
    tfc_shape sx = tfc_value_shape(x), sy = tfc_value_shape(y);
    CU_ASSERT_FATAL(sx.rank == sy.rank);
    for (int d = 0; d < sx.rank; d++) CU_ASSERT_FATAL(sx.dims[d] == sy.dims[d]);
    double m = 0;
    for (int64_t i = 0; i < tfc_shape_numel(&sx); i++) {
        double a = tfc_value_get(x, i), b = tfc_value_get(y, i);
        double d = fabs(a - b) / fmax(1.0, fabs(b));
        if (!(d <= m)) m = d; /* NaN counts */
    }
    return m;
}

static void destroy_all(int n, tfc_value **v)
{
    for (int i = 0; i < n; i++) tfc_value_destroy(v[i]);
}

static const unsigned NO_FUSION = TFC_PASS_ALL & ~(unsigned)TFC_PASS_FUSION;

/* ---- fusion ------------------------------------------------------------------------------ */

/* y = sigmoid(exp(-(tanh(x + b) * x))): six element-wise ops, b broadcast over rows. With a
 * second fetch of the mul's output (kept as an output of the fused task) and a reduction of
 * the tanh's output built after the chain (so it reads it after the fused task). */
static void chain(enum tfc_dtype dt, double tol)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", dt, S2(-1, 33));
    tfc_tensor *b = tfc_placeholder(g, "b", dt, S1(33));
    tfc_tensor *t = tfc_tanh(g, tfc_add(g, x, b));
    tfc_tensor *m = tfc_mul(g, t, x);
    tfc_tensor *y = tfc_sigmoid(g, tfc_exp(g, tfc_neg(g, m)));
    tfc_tensor *r = tfc_reduce_sum(g, t, 1, (int64_t[]){1}, 0);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_value *fv[2] = {rand_value(dt, S2(70, 33), -2, 2, 1), rand_value(dt, S1(33), -1, 1, 2)};
    tfc_tensor *ft[2] = {x, b};
    tfc_value *on[3], *off[3];

    /* one fetch: the whole chain is one task */
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 2, ft, fv, 1, &y, on), 1);
    CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 2, ft, fv, 1, &y, off), 6);
    CU_ASSERT(max_diff(on[0], off[0]) <= tol);
    /* against a host reference */
    double worst = 0;
    for (int64_t i = 0; i < 70 * 33; i++) {
        double xv = tfc_value_get(fv[0], i), bv = tfc_value_get(fv[1], i % 33);
        double want = 1.0 / (1.0 + exp(-exp(-(tanh(xv + bv) * xv))));
        worst = fmax(worst, fabs(tfc_value_get(on[0], i) - want));
    }
    CU_ASSERT(worst <= 10 * tol);
    destroy_all(1, on);
    destroy_all(1, off);

    /* a fetched intermediate stays an output of the one task */
    tfc_tensor *fetch2[2] = {y, m};
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 2, ft, fv, 2, fetch2, on), 1);
    CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 2, ft, fv, 2, fetch2, off), 6);
    CU_ASSERT(max_diff(on[0], off[0]) <= tol);
    CU_ASSERT(max_diff(on[1], off[1]) <= tol);
    destroy_all(2, on);
    destroy_all(2, off);

    /* an intermediate read by a later non-element-wise op: kept; fused task + reduction */
    tfc_tensor *fetch3[3] = {y, r, m};
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 2, ft, fv, 3, fetch3, on), 2);
    CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 2, ft, fv, 3, fetch3, off), 7);
    for (int i = 0; i < 3; i++) CU_ASSERT(max_diff(on[i], off[i]) <= tol);
    destroy_all(3, on);
    destroy_all(3, off);
    destroy_all(2, fv);
    tfc_graph_destroy(g);
}

static void test_chain_f32(void) { chain(TFC_FLOAT32, 1e-6); }
static void test_chain_f64(void) { chain(TFC_FLOAT64, 1e-13); }

/* clip(leaky_relu(x) + elu(x), -0.5, 0.75) * hard_sigmoid(x): ops with float parameters,
 * which the fused program carries per op. */
static tfc_tensor *param_chain(tfc_graph *g, tfc_tensor *x)
{
    tfc_tensor *s = tfc_add(g, tfc_leaky_relu(g, x, 0.1), tfc_elu(g, x, 0.7));
    return tfc_mul(g, tfc_clip(g, s, -0.5, 0.75), tfc_hard_sigmoid(g, x, 0.25, 0.4));
}

static double param_chain_ref(double x)
{
    double s = (x > 0 ? x : 0.1 * x) + (x > 0 ? x : 0.7 * expm1(x));
    double c = s < -0.5 ? -0.5 : s > 0.75 ? 0.75 : s, h = 0.25 * x + 0.4;
    return c * (h < 0 ? 0 : h > 1 ? 1 : h);
}

static void test_chain_params(void)
{
    for (int f64 = 0; f64 < 2; f64++) {
        enum tfc_dtype dt = f64 ? TFC_FLOAT64 : TFC_FLOAT32;
        double tol = f64 ? 1e-13 : 1e-6;
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *x = tfc_placeholder(g, "x", dt, S2(20, 17));
        tfc_tensor *y = param_chain(g, x);
        CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
        tfc_value *fv = rand_value(dt, S2(20, 17), -4, 4, 5), *on, *off;
        CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 1, &x, &fv, 1, &y, &on), 1);
        CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 1, &x, &fv, 1, &y, &off), 6);
        CU_ASSERT(max_diff(on, off) <= tol);
        double worst = 0;
        for (int64_t i = 0; i < 20 * 17; i++)
            worst = fmax(worst, fabs(tfc_value_get(on, i) -
                                     param_chain_ref(tfc_value_get(fv, i))));
        CU_ASSERT(worst <= 10 * tol);
        destroy_all(1, &on);
        destroy_all(1, &off);
        destroy_all(1, &fv);
        tfc_graph_destroy(g);
    }
}

/* A tree over five inputs of different broadcast shapes, with add_n and a maximum:
 * (a*b + c) / (d + exp(e)) - max(a, e) + add_n(a, e, a). */
static void test_tree(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    enum tfc_dtype dt = TFC_FLOAT32;
    tfc_tensor *a = tfc_placeholder(g, "a", dt, S2(16, 40));
    tfc_tensor *b = tfc_placeholder(g, "b", dt, S1(40));
    tfc_tensor *c = tfc_placeholder(g, "c", dt, S2(16, 1));
    tfc_tensor *d = tfc_placeholder(g, "d", dt, S1(1));
    tfc_tensor *e = tfc_placeholder(g, "e", dt, S2(16, 40));
    tfc_tensor *num = tfc_add(g, tfc_mul(g, a, b), c);
    tfc_tensor *den = tfc_add(g, d, tfc_exp(g, e));
    tfc_tensor *y = tfc_add(g, tfc_sub(g, tfc_div(g, num, den), tfc_maximum(g, a, e)),
                            tfc_add_n(g, 3, (tfc_tensor *[]){a, e, a}));
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_tensor *ft[5] = {a, b, c, d, e};
    tfc_value *fv[5] = {rand_value(dt, S2(16, 40), -2, 2, 3), rand_value(dt, S1(40), -1, 1, 4),
                        rand_value(dt, S2(16, 1), -1, 1, 5), rand_value(dt, S1(1), 0.5, 1, 6),
                        rand_value(dt, S2(16, 40), -1, 1, 7)};
    tfc_value *on, *off;
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 5, ft, fv, 1, &y, &on), 1);
    CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 5, ft, fv, 1, &y, &off), 9);
    CU_ASSERT(max_diff(on, off) <= 1e-6);
    for (int64_t i = 0; i < 16 * 40; i += 7) {
        int64_t r = i / 40, k = i % 40;
        double av = tfc_value_get(fv[0], i), ev = tfc_value_get(fv[4], i);
        double want = (av * tfc_value_get(fv[1], k) + tfc_value_get(fv[2], r)) /
                          (tfc_value_get(fv[3], 0) + exp(ev)) -
                      fmax(av, ev) + (av + ev + av);
        CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(on, i), want, 1e-4);
    }
    tfc_value_destroy(on);
    tfc_value_destroy(off);
    destroy_all(5, fv);
    tfc_graph_destroy(g);
}

/* Ten inputs summed pairwise: more than 8 distinct inputs cannot be one task. */
static void test_too_many_inputs(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *in[10];
    tfc_value *fv[10];
    char name[8];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "i%d", i);
        in[i] = tfc_placeholder(g, name, TFC_FLOAT64, S1(100));
        fv[i] = rand_value(TFC_FLOAT64, S1(100), -1, 1, 10 + (uint32_t)i);
    }
    tfc_tensor *acc = in[0];
    for (int i = 1; i < 10; i++) acc = tfc_add(g, acc, tfc_square(g, in[i]));
    tfc_value *on, *off;
    int n_on = run_with(g, TFC_PASS_ALL, 10, in, fv, 1, &acc, &on);
    CU_ASSERT(n_on >= 2 && n_on <= 4);
    CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 10, in, fv, 1, &acc, &off), 18);
    CU_ASSERT(max_diff(on, off) <= 1e-13);
    tfc_value_destroy(on);
    tfc_value_destroy(off);
    destroy_all(10, fv);
    tfc_graph_destroy(g);
}

/* exp -> neg -> [cpu hint] square -> abs: the hinted node is not fused with the others. */
static void test_hints_split(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(500));
    tfc_tensor *h = tfc_neg(g, tfc_exp(g, x));
    CU_ASSERT_EQUAL(tfc_graph_push_device(g, "cpu", 1), TFC_OK);
    h = tfc_square(g, h);
    CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_OK);
    tfc_tensor *y = tfc_abs(g, h);
    tfc_value *xv = rand_value(TFC_FLOAT32, S1(500), -1, 1, 20), *on, *off;
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 1, &x, &xv, 1, &y, &on), 3);
    CU_ASSERT_EQUAL(run_with(g, NO_FUSION, 1, &x, &xv, 1, &y, &off), 4);
    CU_ASSERT(max_diff(on, off) <= 1e-6);
    tfc_value_destroy(on);
    tfc_value_destroy(off);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* The test hooks turn fusion off: with hop copies every op keeps its own task. */
static void test_hooks_disable(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(64));
    tfc_tensor *y = tfc_sigmoid(g, tfc_exp(g, tfc_neg(g, x)));
    tfc_value *xv = rand_value(TFC_FLOAT32, S1(64), -1, 1, 21), *out;
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_set_hop(s, 1, 0);
    tfc_session_stats a, b;
    tfc_session_get_stats(s, &a);
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &out, 0, NULL), TFC_OK);
    tfc_session_get_stats(s, &b);
    CU_ASSERT_EQUAL(b.tasks - a.tasks, 6); /* 3 ops, 3 copies */
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out, 5),
                           1 / (1 + exp(-exp(-tfc_value_get(xv, 5)))), 1e-6);
    tfc_value_destroy(out);
    tfc_session_destroy(s);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* The chain fused_on_device runs: an activation with a parameter among the ops; z = x + b. */
static tfc_tensor *device_chain(tfc_graph *g, tfc_tensor *x, tfc_tensor *b, tfc_tensor **z)
{
    *z = tfc_add(g, x, b);
    return tfc_mul(g, tfc_leaky_relu(g, *z, 0.2), tfc_tanh(g, tfc_maximum(g, *z, x)));
}

/* Under a hard device hint the fused task runs on that device's worker, float32 and float64,
 * with the results of the unfused ops on any worker; param_chain too. */
static void fused_on_device(const char *device, enum starpu_worker_archtype type)
{
    if (starpu_worker_get_count_by_type(type) == 0) {
        fprintf(stderr, "(no %s worker: skipped) ", device);
        return;
    }
    for (int f64 = 0; f64 < 2; f64++) {
        enum tfc_dtype dt = f64 ? TFC_FLOAT64 : TFC_FLOAT32;
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *x = tfc_placeholder(g, "x", dt, S2(9, 31));
        tfc_tensor *b = tfc_placeholder(g, "b", dt, S1(31));
        CU_ASSERT_EQUAL(tfc_graph_push_device(g, device, 1), TFC_OK);
        tfc_tensor *z, *y = device_chain(g, x, b, &z), *p = param_chain(g, x);
        CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_OK);
        tfc_tensor *ft[2] = {x, b}, *fetch[3] = {y, z, p};
        tfc_value *fv[2] = {rand_value(dt, S2(9, 31), -2, 2, 30), rand_value(dt, S1(31), -1, 1, 31)};
        tfc_value *on[3], *off[3];
        tfc_session *s;
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        tfc_session_set_profiling(s, 1);
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, ft, fv, 3, fetch, on, 0, NULL), TFC_OK);
        const tfc_task_record *r;
        CU_ASSERT_EQUAL_FATAL(tfc_session_last_records(s, &r), 2);
        for (int i = 0; i < 2; i++) {
            CU_ASSERT_STRING_EQUAL(r[i].op, "fused");
            CU_ASSERT_EQUAL(starpu_worker_get_type(r[i].worker), type);
        }
        tfc_session_destroy(s);
        /* against the unfused ops, without the hint */
        tfc_graph *g2;
        tfc_graph_create(&g2);
        tfc_tensor *x2 = tfc_placeholder(g2, "x", dt, S2(9, 31));
        tfc_tensor *b2 = tfc_placeholder(g2, "b", dt, S1(31));
        tfc_tensor *z2, *y2 = device_chain(g2, x2, b2, &z2), *p2 = param_chain(g2, x2);
        tfc_tensor *ft2[2] = {x2, b2}, *fetch2[3] = {y2, z2, p2};
        CU_ASSERT_EQUAL(run_with(g2, 0, 2, ft2, fv, 3, fetch2, off), 11);
        for (int i = 0; i < 3; i++) CU_ASSERT(max_diff(on[i], off[i]) <= (f64 ? 1e-12 : 1e-5));
        destroy_all(3, on);
        destroy_all(3, off);
        destroy_all(2, fv);
        tfc_graph_destroy(g2);
        tfc_graph_destroy(g);
    }
}

static void test_fused_opencl(void) { fused_on_device("opencl", STARPU_OPENCL_WORKER); }
static void test_fused_cuda(void) { fused_on_device("cuda", STARPU_CUDA_WORKER); }

/* ---- CSE and constant folding ------------------------------------------------------------- */

static void test_cse(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(8, 8));
    tfc_tensor *s1 = tfc_reduce_sum(g, tfc_exp(g, x), 1, (int64_t[]){1}, 1);
    tfc_tensor *s2 = tfc_reduce_sum(g, tfc_exp(g, x), 1, (int64_t[]){1}, 1); /* the same twice */
    tfc_tensor *s3 = tfc_reduce_sum(g, tfc_exp(g, x), 1, (int64_t[]){0}, 1); /* other attribute */
    tfc_tensor *fetch[3] = {tfc_add(g, s1, s2), s2, s3};
    tfc_value *xv = rand_value(TFC_FLOAT32, S2(8, 8), -1, 1, 40), *on[3], *off[3];
    /* fusion off: exp, reduce, reduce(axis 0), add with CSE; 3 + 2 + 1 without */
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CSE | TFC_PASS_CONST_FOLD, 1, &x, &xv, 3, fetch, on), 4);
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CONST_FOLD, 1, &x, &xv, 3, fetch, off), 7);
    for (int i = 0; i < 3; i++) CU_ASSERT(max_diff(on[i], off[i]) <= 1e-6);
    destroy_all(3, on);
    destroy_all(3, off);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* Two equal nodes without inputs (fills) first in the plan: CSE compares them before any
 * node with inputs filled its slot pool (empty until then: the sanitizer run's UBSan caught
 * memcmp(NULL, ..., 0) here). They are one value with CSE, two without. */
static void test_cse_no_inputs_first(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(4, 4));
    tfc_tensor *a = tfc_fill(g, S2(4, 4), TFC_FLOAT32, 2.0);
    tfc_tensor *b = tfc_fill(g, S2(4, 4), TFC_FLOAT32, 2.0);
    tfc_tensor *fetch[1] = {tfc_add(g, tfc_mul(g, a, b), x)};
    tfc_value *xv = rand_value(TFC_FLOAT32, S2(4, 4), -1, 1, 42), *on[1], *off[1];
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CSE, 1, &x, &xv, 1, fetch, on),
                    run_with(g, 0, 1, &x, &xv, 1, fetch, off) - 1);
    CU_ASSERT(max_diff(on[0], off[0]) == 0);
    destroy_all(1, on);
    destroy_all(1, off);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* Runs fetch with the given passes and profiling; returns the tasks of op `op`. */
static int op_tasks(tfc_graph *g, unsigned passes, tfc_tensor *x, tfc_value *xv, int nfetch,
                    tfc_tensor **fetch, tfc_value **out, const char *op)
{
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_set_passes(s, passes), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_set_profiling(s, 1), TFC_OK);
    tfc_status st = tfc_session_run(s, 1, &x, &xv, nfetch, fetch, out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    const tfc_task_record *r = NULL;
    int n = tfc_session_last_records(s, &r), c = 0;
    for (int i = 0; i < n; i++) c += r[i].op && strcmp(r[i].op, op) == 0;
    tfc_session_destroy(s);
    return c;
}

/* A max pool built without indices and its gradient, which recomputes the pool with them
 * (graph/grad_pool.c): with CSE the plan runs the pool once, the twin with indices standing
 * for both, and the values are the same bits (the kernel writes the same maxima). */
static void test_cse_pool_twin(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_shape xs = tfc_shape_of(4, (int64_t[]){2, 3, 6, 6});
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, xs);
    tfc_pool_params pp = {.n_spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
    tfc_tensor *y = tfc_max_pool(g, x, &pp, NULL);
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0), *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &loss, NULL, 1, &x, &dx), TFC_OK);
    tfc_tensor *fetch[2] = {y, dx};
    tfc_value *xv = rand_value(TFC_FLOAT32, xs, -1, 1, 41), *on[2], *off[2];
    CU_ASSERT_EQUAL(op_tasks(g, TFC_PASS_ALL, x, xv, 2, fetch, on, "max_pool"), 1);
    CU_ASSERT_EQUAL(op_tasks(g, TFC_PASS_ALL & ~(unsigned)TFC_PASS_CSE, x, xv, 2, fetch, off,
                             "max_pool"), 2);
    for (int i = 0; i < 2; i++) CU_ASSERT(max_diff(on[i], off[i]) == 0);
    destroy_all(2, on);
    destroy_all(2, off);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* The order of the first pool (max or average) and fused tasks of a profiled run with every
 * pass on: 1 when the pool ran first (sched/pool_first.c), 0 when the fused step did, -1 when
 * one is missing. */
static int pool_went_first(tfc_graph *g, tfc_tensor *x, tfc_value *xv, int nfetch,
                           tfc_tensor **fetch, tfc_value **out)
{
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_set_profiling(s, 1), TFC_OK);
    tfc_status st = tfc_session_run(s, 1, &x, &xv, nfetch, fetch, out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    const tfc_task_record *r = NULL;
    int n = tfc_session_last_records(s, &r), pool = -1, fused = -1;
    for (int i = n - 1; i >= 0; i--) {
        if (r[i].op && (!strcmp(r[i].op, "max_pool") || !strcmp(r[i].op, "avg_pool"))) pool = i;
        if (r[i].op && !strcmp(r[i].op, "fused")) fused = i;
    }
    tfc_session_destroy(s);
    return pool < 0 || fused < 0 ? -1 : pool < fused;
}

/* Max pool first: relu(x + b) and relu(x - b) with a bias per channel pooled 2x2 (and 3x3 with
 * padding and ceil mode) run the pool first, with the bits of the plan without passes; a
 * product by the bias, a bias that varies over the pooled dims, a fetched relu output and an
 * average pool keep their order (same values). */
static void test_pool_first(void)
{
    enum { SWAP, MUL, SPATIAL, FETCHED, AVG, NCASES };
    tfc_shape xs = tfc_shape_of(4, (int64_t[]){3, 4, 7, 6});
    tfc_pool_params p2 = {.n_spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
    tfc_pool_params p3 = {.n_spatial = 2, .kernel = {3, 3}, .strides = {2, 2},
                          .pads_begin = {1, 1}, .pads_end = {1, 1}, .ceil_mode = 1};
    for (int c = 0; c < NCASES; c++)
        for (int padded = 0; padded < 2; padded++) {
            tfc_graph *g;
            tfc_graph_create(&g);
            tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, xs);
            tfc_shape bs = c == SPATIAL ? tfc_shape_of(3, (int64_t[]){4, 7, 6})
                                        : tfc_shape_of(3, (int64_t[]){4, 1, 1});
            tfc_value *bv = rand_value(TFC_FLOAT32, bs, -0.5, 0.5, 60 + c);
            tfc_tensor *b = tfc_constant(g, "b", bv);
            tfc_tensor *pre = c == MUL ? tfc_mul(g, x, b) : padded ? tfc_sub(g, x, b)
                                                                   : tfc_add(g, x, b);
            tfc_tensor *h = tfc_relu(g, pre);
            const tfc_pool_params *pp = padded ? &p3 : &p2;
            tfc_tensor *y = c == AVG ? tfc_avg_pool(g, h, pp) : tfc_max_pool(g, h, pp, NULL);
            CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
            tfc_tensor *fetch[2] = {y, h};
            int nfetch = c == FETCHED ? 2 : 1;
            tfc_value *xv = rand_value(TFC_FLOAT32, xs, -1, 1, 70 + c), *on[2], *off[2];
            int first = pool_went_first(g, x, xv, nfetch, fetch, on);
            CU_ASSERT_EQUAL(first, c == SWAP ? 1 : 0);
            run_with(g, 0, 1, &x, &xv, nfetch, fetch, off);
            /* (an average may sum in another order on another device) */
            for (int i = 0; i < nfetch; i++)
                CU_ASSERT(max_diff(on[i], off[i]) <= (c == AVG ? 1e-6 : 0));
            destroy_all(nfetch, on);
            destroy_all(nfetch, off);
            tfc_value_destroy(xv);
            tfc_value_destroy(bv);
            tfc_graph_destroy(g);
        }
}

/* square(v) before and after v += 1 in the same run: not one value. */
static void test_cse_variable_update(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT64, S1(3), tfc_init_ones());
    tfc_tensor *before = tfc_square(g, v);
    tfc_tensor *bump = tfc_assign_add(g, v, tfc_fill(g, S1(3), TFC_FLOAT64, 1.0));
    tfc_tensor *after = tfc_square(g, v);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_get_passes(s), (unsigned)TFC_PASS_ALL);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s), TFC_OK);
    tfc_tensor *fetch[2] = {before, after};
    tfc_value *out[2];
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 2, fetch, out, 1, &bump), TFC_OK);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[0], 1), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[1], 1), 4.0, 1e-12);
    destroy_all(2, out);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_const_fold(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_value *cv = rand_value(TFC_FLOAT32, S1(50), 0.5, 2, 50);
    tfc_tensor *c = tfc_constant(g, "c", cv);
    tfc_tensor *k = tfc_add(g, tfc_mul(g, tfc_log(g, c), tfc_scalar(g, TFC_FLOAT32, 3.0)),
                            tfc_fill(g, S1(50), TFC_FLOAT32, 0.25)); /* constants only */
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(50));
    tfc_tensor *y = tfc_sqrt(g, tfc_add(g, x, k));
    tfc_value *xv = rand_value(TFC_FLOAT32, S1(50), 0.5, 1, 51), *on[2], *off[2];
    tfc_tensor *fetch[2] = {y, k};
    /* fusion off to count the ops: log, mul, fill, add folded; add, sqrt run */
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CSE | TFC_PASS_CONST_FOLD, 1, &x, &xv, 2, fetch, on), 2);
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CSE, 1, &x, &xv, 2, fetch, off), 6);
    for (int i = 0; i < 2; i++) CU_ASSERT(max_diff(on[i], off[i]) <= 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(on[1], 7), log(tfc_value_get(cv, 7)) * 3 + 0.25, 1e-5);
    destroy_all(2, on);
    destroy_all(2, off);
    /* fetching only the folded value runs no task; all passes on: still no task */
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 0, NULL, NULL, 1, &k, on), 0);
    CU_ASSERT_EQUAL(run_with(g, 0, 0, NULL, NULL, 1, &k, off), 4);
    CU_ASSERT(max_diff(on[0], off[0]) <= 1e-6);
    destroy_all(1, on);
    destroy_all(1, off);
    /* all passes: the folded k feeds one fused task (add, sqrt) */
    CU_ASSERT_EQUAL(run_with(g, TFC_PASS_ALL, 1, &x, &xv, 1, &y, on), 1);
    CU_ASSERT_EQUAL(run_with(g, 0, 1, &x, &xv, 1, &y, off), 6);
    CU_ASSERT(max_diff(on[0], off[0]) <= 1e-6);
    destroy_all(1, on);
    destroy_all(1, off);
    tfc_value_destroy(xv);
    tfc_value_destroy(cv);
    tfc_graph_destroy(g);
}

/* Folding under placement hints: a soft hint (a preference) folds as no hint does; a hard
 * hint keeps the hinted ops as tasks on that device. */
static void test_fold_hints(void)
{
    for (int hard = 0; hard < 2; hard++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        CU_ASSERT_EQUAL_FATAL(tfc_graph_push_device(g, "cpu", hard), TFC_OK);
        tfc_tensor *k = tfc_mul(g, tfc_fill(g, S1(20), TFC_FLOAT64, 2.0),
                                tfc_scalar(g, TFC_FLOAT64, 3.0)); /* constants only */
        tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, S1(20));
        tfc_tensor *y = tfc_add(g, x, k);
        CU_ASSERT_EQUAL_FATAL(tfc_graph_pop_device(g), TFC_OK);
        tfc_value *xv = rand_value(TFC_FLOAT64, S1(20), -1, 1, 52), *on[1], *off[1];
        /* fusion off: fill, mul folded, add runs (soft); fill, mul, add run (hard) */
        CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CSE | TFC_PASS_CONST_FOLD, 1, &x, &xv, 1, &y, on),
                        hard ? 3 : 1);
        CU_ASSERT_EQUAL(run_with(g, TFC_PASS_CSE, 1, &x, &xv, 1, &y, off), 3);
        CU_ASSERT(max_diff(on[0], off[0]) <= 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(on[0], 3), tfc_value_get(xv, 3) + 6.0, 1e-12);
        destroy_all(1, on);
        destroy_all(1, off);
        tfc_value_destroy(xv);
        tfc_graph_destroy(g);
    }
}

/* A folded value reused by repeated and concurrent-instance runs of the cached plan. */
static void test_fold_cached_runs(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *k = tfc_exp(g, tfc_scalar(g, TFC_FLOAT64, 1.0));
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, S1(4));
    tfc_tensor *y = tfc_mul(g, x, k);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    double xd[4] = {1, 2, 3, 4};
    tfc_value *xv = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_value_from_data(TFC_FLOAT64, S1(4), xd, &xv), TFC_OK);
    tfc_run *runs[3];
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL_FATAL(tfc_session_run_async(s, 1, &x, &xv, 1, &y, 0, NULL, &runs[i]),
                              TFC_OK);
    for (int i = 0; i < 3; i++) {
        tfc_value *out;
        CU_ASSERT_EQUAL_FATAL(tfc_run_wait(runs[i], &out), TFC_OK);
        CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out, 2), 3 * exp(1.0), 1e-12);
        tfc_value_destroy(out);
    }
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.lowerings, 1);
    CU_ASSERT_EQUAL(st.tasks, 3);
    tfc_session_destroy(s);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* ---- knobs -------------------------------------------------------------------------------- */

static void test_env_values(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(4));
    CU_ASSERT_PTR_NOT_NULL(tfc_exp(g, x));
    const char *names[3] = {"TFC_FUSION", "TFC_CSE", "TFC_CONST_FOLD"};
    const char *bad[4] = {"2", "yes", "", "on"};
    unsigned bit[3] = {TFC_PASS_FUSION, TFC_PASS_CSE, TFC_PASS_CONST_FOLD};
    tfc_session *s = NULL;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            setenv(names[i], bad[j], 1);
            CU_ASSERT_EQUAL(tfc_session_create(test_ctx, g, &s), TFC_ERR_INVALID_ARGUMENT);
            CU_ASSERT_PTR_NULL(s);
            CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), names[i]));
        }
        setenv(names[i], "0", 1);
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        CU_ASSERT_EQUAL(tfc_session_get_passes(s), TFC_PASS_ALL & ~bit[i]);
        tfc_session_destroy(s);
        setenv(names[i], "1", 1);
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        CU_ASSERT_EQUAL(tfc_session_get_passes(s), (unsigned)TFC_PASS_ALL);
        CU_ASSERT_EQUAL(tfc_session_set_passes(s, (unsigned)TFC_PASS_ALL + 1),
                        TFC_ERR_INVALID_ARGUMENT);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(s), "set_passes"));
        CU_ASSERT_EQUAL(tfc_session_get_passes(s), (unsigned)TFC_PASS_ALL);
        tfc_session_destroy(s);
        unsetenv(names[i]);
    }
    CU_ASSERT_EQUAL(tfc_session_set_passes(NULL, 0), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_destroy(g);
}

/* ---- one-row and one-column matmuls in tiles: the gemv path on strided views ------------- */

/* C = op(A) op(B) with A, B fed; its whole value with tiling off, or with tiles of edge 8
 * (the task count of the run then). */
static int run_mm(enum tfc_dtype dt, int64_t m, int64_t k, int64_t n, int ta, int tb,
                  tfc_value *av, tfc_value *bv, int tile, tfc_value **out)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *a = tfc_placeholder(g, "a", dt, ta ? S2(k, m) : S2(m, k));
    tfc_tensor *b = tfc_placeholder(g, "b", dt, tb ? S2(n, k) : S2(k, n));
    tfc_tensor *c = tfc_matmul(g, a, b, ta, tb), *ft[2] = {a, b};
    tfc_value *fv[2] = {av, bv};
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_set_tiling(s, tile ? 1 : 0, tile), TFC_OK);
    tfc_session_stats x, y;
    tfc_session_get_stats(s, &x);
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, ft, fv, 1, &c, out, 0, NULL), TFC_OK);
    tfc_session_get_stats(s, &y);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    return (int)(y.tasks - x.tasks);
}

/* [1, 8200] x [8200, 20] and [20, 8200] x [8200, 1], every transpose: tiles of edge 8 make
 * 3 tasks, two of whose operand tiles (8200 x 8, row stride 20 when strided) are large enough
 * for codelets/matmul.c's gemv; they must equal a float64 reference and the untiled run. */
static void test_matmul_gemv_tiles(void)
{
    const int64_t mkn[2][3] = {{1, 8200, 20}, {20, 8200, 1}};
    for (int di = 0; di < 2; di++)
        for (int q = 0; q < 2; q++)
            for (int t = 0; t < 4; t++) {
                enum tfc_dtype dt = di ? TFC_FLOAT64 : TFC_FLOAT32;
                int ta = t & 1, tb = t >> 1;
                int64_t m = mkn[q][0], k = mkn[q][1], n = mkn[q][2];
                tfc_value *av = rand_value(dt, ta ? S2(k, m) : S2(m, k), -1, 1, 3 + t);
                tfc_value *bv = rand_value(dt, tb ? S2(n, k) : S2(k, n), -1, 1, 9 + t);
                tfc_value *out[2], *ref;
                CU_ASSERT_FATAL(tfc_value_create(dt, S2(m, n), &ref) == TFC_OK);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double sum = 0;
                        for (int64_t p = 0; p < k; p++)
                            sum += tfc_value_get(av, ta ? p * m + i : i * k + p) *
                                   tfc_value_get(bv, tb ? j * k + p : p * n + j);
                        if (di)
                            ((double *)tfc_value_data(ref))[i * n + j] = sum;
                        else
                            ((float *)tfc_value_data(ref))[i * n + j] = (float)sum;
                    }
                run_mm(dt, m, k, n, ta, tb, av, bv, 0, &out[0]);
                CU_ASSERT_EQUAL(run_mm(dt, m, k, n, ta, tb, av, bv, 8, &out[1]), 3);
                double tol = di ? 1e-12 : 1e-4, e0 = max_diff(out[0], ref),
                       e1 = max_diff(out[1], ref);
                if (!(e0 <= tol && e1 <= tol))
                    fprintf(stderr, "%s [%lld,%lld,%lld] ta=%d tb=%d: error %g, tiled %g\n",
                            di ? "f64" : "f32", (long long)m, (long long)k, (long long)n, ta,
                            tb, e0, e1);
                CU_ASSERT(e0 <= tol);
                CU_ASSERT(e1 <= tol);
                tfc_value *all[5] = {av, bv, ref, out[0], out[1]};
                destroy_all(5, all);
            }
}

static int open_ctx(void)
{
    setenv("STARPU_OPENCL_ON_CPUS", "1", 0); /* PoCL's CPU device, unless the caller chose */
    unsetenv("TFC_FUSION");
    unsetenv("TFC_CSE");
    unsetenv("TFC_CONST_FOLD");
    return test_ctx_open();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    {
        TEST_SUITE("passes", open_ctx, test_ctx_close);
        TEST_ADD(test_chain_f32);
        TEST_ADD(test_chain_f64);
        TEST_ADD(test_chain_params);
        TEST_ADD(test_tree);
        TEST_ADD(test_too_many_inputs);
        TEST_ADD(test_hints_split);
        TEST_ADD(test_hooks_disable);
        TEST_ADD(test_fused_opencl);
        TEST_ADD(test_fused_cuda);
        TEST_ADD(test_cse);
        TEST_ADD(test_cse_variable_update);
        TEST_ADD(test_cse_pool_twin);
        TEST_ADD(test_pool_first);
        TEST_ADD(test_cse_no_inputs_first);
        TEST_ADD(test_const_fold);
        TEST_ADD(test_fold_cached_runs);
        TEST_ADD(test_fold_hints);
        TEST_ADD(test_env_values);
        TEST_ADD(test_matmul_gemv_tiles);
    }
    return test_main();
}
