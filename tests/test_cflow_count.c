/* test_cflow_count.c: count-known while loops (issue 13, item 6; sched/cflow_count.c). A loop
 * counting a loop variable to a loop-invariant bound by a loop-invariant step runs its
 * computed number of iterations without reading its predicate back: each comparison (either
 * operand order, under logical_not) and each step sign, for int32, int64, float32 and float64
 * counters, bound and step constant or fed, with maximum_iterations, gives the same results as
 * with the analysis off (TFC_WHILE_COUNT=0), and the session's stats say which way it ran. The
 * cases it must refuse (a step of the wrong sign, a fractional float, a bound never reached, a
 * counter that would wrap) fall back to the predicate with the same results, as do loops that
 * are not counters; nested, growing and differentiated loops keep their results. With
 * TFC_WHILE_SPECULATE=1 a loop that is not a counter runs one iteration ahead with the same
 * results, and the discarded iteration's kernel error is not reported. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "cflow_cases.h"
#include "../sched/cflow_count.h"

enum pred_form {
    P_LESS,        /* less(i, n):  i < n */
    P_LESS_SWAP,   /* less(n, i):  i > n */
    P_GREATER,     /* greater(i, n): i > n */
    P_NOT_GREATER, /* logical_not(greater(i, n)): i <= n */
    P_NOT_LESS,    /* logical_not(less(i, n)): i >= n */
    P_NOT_EQUAL,   /* not_equal(n, i) */
    P_EQUAL,       /* equal(i, n) */
};

struct spec {
    const char *what;
    enum tfc_dtype dt;
    enum pred_form pred;
    double i0, n, c;
    int sub;                 /* the body computes i - c (else c + i) */
    int bound_fed, step_fed; /* fed placeholders (captures), else constants built inside */
    int64_t max_iter;
    int known;               /* expected: the count is computed */
};

struct built {
    const struct spec *sp;
    tfc_tensor *n, *c;       /* the fed bound and step */
};

static tfc_status spec_cond(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct built *b = arg;
    const struct spec *sp = b->sp;
    tfc_tensor *n = sp->bound_fed ? b->n : tfc_scalar(g, sp->dt, sp->n), *i = v[0];
    switch (sp->pred) {
    case P_LESS: out[0] = tfc_less(g, i, n); break;
    case P_LESS_SWAP: out[0] = tfc_less(g, n, i); break;
    case P_GREATER: out[0] = tfc_greater(g, i, n); break;
    case P_NOT_GREATER: out[0] = tfc_logical_not(g, tfc_greater(g, i, n)); break;
    case P_NOT_LESS: out[0] = tfc_logical_not(g, tfc_less(g, i, n)); break;
    case P_NOT_EQUAL: out[0] = tfc_not_equal(g, n, i); break;
    case P_EQUAL: out[0] = tfc_equal(g, i, n); break;
    }
    return TFC_OK;
}

/* i steps; acc sums i as float64, so a wrong count or order shows in it too. */
static tfc_status spec_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct built *b = arg;
    const struct spec *sp = b->sp;
    tfc_tensor *c = sp->step_fed ? b->c : tfc_scalar(g, sp->dt, sp->c);
    out[0] = sp->sub ? tfc_sub(g, v[0], c) : tfc_add(g, c, v[0]);
    out[1] = tfc_add(g, v[1], tfc_cast(g, v[0], TFC_FLOAT64));
    return TFC_OK;
}

/* The loop simulated on the host: its iterations, final counter and sum. */
static int64_t simulate(const struct spec *sp, double *i_out, double *acc_out)
{
    double i = sp->i0, acc = 0, c = sp->sub ? -sp->c : sp->c;
    int64_t k = 0;
    for (; !sp->max_iter || k < sp->max_iter; k++) {
        int go = sp->pred == P_LESS ? i < sp->n
                 : sp->pred == P_LESS_SWAP || sp->pred == P_GREATER ? i > sp->n
                 : sp->pred == P_NOT_GREATER ? i <= sp->n
                 : sp->pred == P_NOT_LESS ? i >= sp->n
                 : sp->pred == P_NOT_EQUAL ? i != sp->n : i == sp->n;
        if (!go) break;
        acc += i;
        i = sp->dt == TFC_FLOAT32 ? (double)(float)(i + c) : i + c;
    }
    *i_out = i;
    *acc_out = acc;
    return k;
}

static double as_double(const tfc_value *v)
{
    const void *p = tfc_value_cdata(v);
    switch (tfc_value_dtype(v)) {
    case TFC_INT32: return *(const int32_t *)p;
    case TFC_INT64: return (double)*(const int64_t *)p;
    case TFC_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

/* One run of the loop: its two outputs, and the stats' growth in iterations and in loops run
 * count-known. */
static void run_once(tfc_session *s, const struct spec *sp, tfc_tensor *const *ph,
                     tfc_tensor *const *r, double out[2], uint64_t *iters, uint64_t *known)
{
    tfc_session_stats a, b;
    tfc_session_get_stats(s, &a);
    tfc_value *fv[3] = {scalar_value(sp->dt, sp->i0), scalar_value(sp->dt, sp->n),
                        scalar_value(sp->dt, sp->c)}, *o[2] = {NULL, NULL};
    tfc_tensor *ft[3] = {ph[0], ph[1], ph[2]};
    tfc_value *feeds[3] = {fv[0], NULL, NULL};
    int nf = 1;
    if (sp->bound_fed) ft[nf] = ph[1], feeds[nf++] = fv[1];
    if (sp->step_fed) ft[nf] = ph[2], feeds[nf++] = fv[2];
    tfc_status st = tfc_session_run(s, nf, ft, feeds, 2, r, o, 0, NULL);
    if (st) fprintf(stderr, "%s: %s\n", sp->what, tfc_session_errmsg(s));
    CU_ASSERT_FATAL(st == TFC_OK);
    out[0] = as_double(o[0]);
    out[1] = as_double(o[1]);
    tfc_session_get_stats(s, &b);
    *iters = b.loop_iterations - a.loop_iterations;
    *known = b.loops_count_known - a.loops_count_known;
    for (int k = 0; k < 3; k++) tfc_value_destroy(fv[k]);
    tfc_value_destroy(o[0]);
    tfc_value_destroy(o[1]);
}

/* The loop of sp built and run with the analysis on and off: same results, both equal to the
 * host's, and count-known exactly when sp says. */
static void check_spec(const struct spec *sp)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *ph[3] = {tfc_placeholder(g, "i0", sp->dt, tfc_shape_of(0, NULL)),
                         tfc_placeholder(g, "n", sp->dt, tfc_shape_of(0, NULL)),
                         tfc_placeholder(g, "c", sp->dt, tfc_shape_of(0, NULL))};
    struct built b = {sp, ph[1], ph[2]};
    tfc_tensor *init[2] = {ph[0], tfc_scalar(g, TFC_FLOAT64, 0)}, *r[2];
    tfc_while_opts opts = {sp->max_iter, NULL};
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", spec_cond, spec_body, &b, 2, init, &opts, r),
                          TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    double on[2], off[2], i_host, acc_host;
    uint64_t it_on, it_off, known_on, known_off;
    int64_t it_host = simulate(sp, &i_host, &acc_host);
    run_once(s, sp, ph, r, on, &it_on, &known_on);
    CU_ASSERT_FATAL(setenv("TFC_WHILE_COUNT", "0", 1) == 0);
    run_once(s, sp, ph, r, off, &it_off, &known_off);
    unsetenv("TFC_WHILE_COUNT");
    if (on[0] != i_host || on[1] != acc_host || it_on != (uint64_t)it_host ||
        known_on != (uint64_t)sp->known)
        fprintf(stderr, "%s: i %g (host %g), sum %g (host %g), iterations %llu (host %lld), "
                "count-known %llu (expected %d)\n", sp->what, on[0], i_host, on[1], acc_host,
                (unsigned long long)it_on, (long long)it_host, (unsigned long long)known_on,
                sp->known);
    CU_ASSERT_EQUAL(on[0], off[0]);
    CU_ASSERT_EQUAL(on[1], off[1]);
    CU_ASSERT_EQUAL(on[0], i_host);
    CU_ASSERT_EQUAL(on[1], acc_host);
    CU_ASSERT_EQUAL(it_on, (uint64_t)it_host);
    CU_ASSERT_EQUAL(it_off, (uint64_t)it_host);
    CU_ASSERT_EQUAL(known_on, (uint64_t)sp->known);
    CU_ASSERT_EQUAL(known_off, 0);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* Every comparison, both step signs, each dtype, constants and feeds, maximum_iterations. */
static void test_counter_loops_known(void)
{
    static const struct spec specs[] = {
        {"i32 i < n, +1", TFC_INT32, P_LESS, 0, 10, 1, 0, 1, 0, 0, 1},
        {"i32 i < n, +3 (not a multiple)", TFC_INT32, P_LESS, -4, 10, 3, 0, 0, 1, 0, 1},
        {"i32 i < n, never runs", TFC_INT32, P_LESS, 10, 10, 1, 0, 1, 1, 0, 1},
        {"i32 i < n, never runs, step of the wrong sign", TFC_INT32, P_LESS, 12, 10, -1, 0, 1,
         1, 0, 1},
        {"i64 n < i, -2", TFC_INT64, P_LESS_SWAP, 10, -3, 2, 1, 1, 0, 0, 1},
        {"i64 i > n, -3 by sub, fed", TFC_INT64, P_GREATER, 40, 1, 3, 1, 1, 1, 0, 1},
        {"f32 i <= n, +2", TFC_FLOAT32, P_NOT_GREATER, 1, 9, 2, 0, 0, 0, 0, 1},
        {"f32 i <= n, +2, n off the grid", TFC_FLOAT32, P_NOT_GREATER, 1, 10, 2, 0, 1, 1, 0,
         1},
        {"f64 i >= n, -1", TFC_FLOAT64, P_NOT_LESS, 7, -2, 1, 1, 1, 0, 0, 1},
        {"f64 i >= n, -5, fed step", TFC_FLOAT64, P_NOT_LESS, 7, -20, -5, 0, 0, 1, 0, 1},
        {"i32 n != i, +3", TFC_INT32, P_NOT_EQUAL, 0, 12, 3, 0, 1, 0, 0, 1},
        {"i64 n != i, -4", TFC_INT64, P_NOT_EQUAL, 8, -8, 4, 1, 0, 1, 0, 1},
        {"i32 i == n, once", TFC_INT32, P_EQUAL, 5, 5, 1, 0, 1, 0, 0, 1},
        {"i32 i == n, never", TFC_INT32, P_EQUAL, 4, 5, 1, 0, 1, 0, 0, 1},
        {"i32 i < n, at most 4", TFC_INT32, P_LESS, 0, 10, 1, 0, 1, 0, 4, 1},
        {"f32 i > n, at most 3", TFC_FLOAT32, P_GREATER, 10, 0, 1, 1, 1, 1, 3, 1},
        {"i32 i < n, a long one", TFC_INT32, P_LESS, 0, 1000, 1, 0, 1, 0, 0, 1},
    };
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) check_spec(&specs[k]);
}

/* The values that make the count uncomputable: the loop tests its predicate, same results. */
static void test_counter_loops_fall_back(void)
{
    static const struct spec specs[] = {
        {"i32 i < n, step of the wrong sign", TFC_INT32, P_LESS, 0, 5, -1, 0, 1, 0, 7, 0},
        {"i32 i < n, step zero", TFC_INT32, P_LESS, 0, 5, 0, 0, 1, 1, 6, 0},
        {"i64 i > n, step of the wrong sign", TFC_INT64, P_GREATER, 0, -5, -1, 1, 1, 1, 3, 0},
        {"f32 i < n, fractional step", TFC_FLOAT32, P_LESS, 0, 3, 0.5, 0, 1, 0, 0, 0},
        {"f64 i < n, fractional start", TFC_FLOAT64, P_LESS, 0.25, 3, 1, 0, 1, 1, 0, 0},
        {"f32 i <= n, fractional bound fed", TFC_FLOAT32, P_NOT_GREATER, 0, 2.5, 1, 0, 1, 0, 0,
         0},
        {"i32 i != n, never reached", TFC_INT32, P_NOT_EQUAL, 0, 5, 2, 0, 1, 0, 10, 0},
    };
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) check_spec(&specs[k]);
}

/* The count itself, where a run cannot show it: wrapping and inexact counters. */
static void test_trip_count_limits(void)
{
    struct tfc_cf_counter k = {0, TFC_REL_LT, TFC_INT32, {NULL, -1}, {NULL, -1}, 0};
    int64_t count = -1;
    int32_t i0 = 0, n = INT32_MAX, c = 1 << 30;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &i0, &n, &c, 0, &count), 0); /* would wrap */
    c = 1;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &i0, &n, &c, 0, &count), 1);
    CU_ASSERT_EQUAL(count, INT32_MAX);
    c = 1 << 30;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &i0, &n, &c, 1, &count), 1); /* stops before */
    CU_ASSERT_EQUAL(count, 1);
    k.dtype = TFC_INT64;
    int64_t j0 = INT64_MIN, m = INT64_MAX, d = INT64_MAX;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &j0, &m, &d, 0, &count), 0); /* MIN, -1, MAX-1, wrap */
    m = INT64_MAX - (INT64_C(1) << 62);
    d = INT64_C(1) << 62;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &j0, &m, &d, 0, &count), 1); /* ends at 2^62 */
    CU_ASSERT_EQUAL(count, 3);
    m = INT64_MAX;
    d = 1;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &j0, &m, &d, 0, &count), 0); /* beyond int64 */
    k.dtype = TFC_FLOAT32;
    float f0 = 0, fn = 33554432.0f /* 2^25 */, fc = 1;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &f0, &fn, &fc, 0, &count), 0); /* inexact */
    fn = 16777216.0f; /* 2^24: every counter value exact */
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &f0, &fn, &fc, 0, &count), 1);
    CU_ASSERT_EQUAL(count, 16777216);
    k.dtype = TFC_FLOAT64;
    double nan = strtod("nan", NULL), x0 = 0, xc = 1;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &x0, &nan, &xc, 0, &count), 0);
    k.rel = TFC_REL_EQ;
    xc = 0;
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &x0, &x0, &xc, 0, &count), 0); /* i == i forever */
    CU_ASSERT_EQUAL(tfc_cf_trip_count(&k, &x0, &x0, &xc, 5, &count), 0);
}

/* ---- loops that are not counters, or not only ------------------------------------------ */

static tfc_status sum_below(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[1], tfc_scalar(g, TFC_FLOAT32, 100));
    return TFC_OK;
}

static tfc_status i_below_j(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], v[2]); /* the bound is a loop variable: not invariant */
    return TFC_OK;
}

static tfc_status grow3(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    out[1] = tfc_mul(g, v[1], tfc_scalar(g, TFC_FLOAT32, 2));
    out[2] = tfc_add(g, v[2], tfc_scalar(g, TFC_INT32, 0));
    return TFC_OK;
}

/* A predicate on a float accumulator, and one whose bound changes: not counters. */
static void test_not_counters(void)
{
    for (int form = 0; form < 2; form++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *init[3] = {tfc_scalar(g, TFC_INT32, 0), tfc_scalar(g, TFC_FLOAT32, 1),
                               tfc_scalar(g, TFC_INT32, 5)}, *r[3];
        CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", form ? i_below_j : sum_below, grow3, NULL,
                                             3, init, NULL, r), TFC_OK);
        tfc_session *s = NULL;
        CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
        tfc_value *o[2] = {NULL, NULL};
        CU_ASSERT_FATAL(tfc_session_run(s, 0, NULL, NULL, 2, r, o, 0, NULL) == TFC_OK);
        int expect = form ? 5 : 7; /* 1 doubled 7 times passes 100 */
        CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(o[0]), expect);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(o[1]), (float)(1 << expect));
        tfc_session_stats st;
        tfc_session_get_stats(s, &st);
        CU_ASSERT_EQUAL(st.loop_iterations, (uint64_t)expect);
        CU_ASSERT_EQUAL(st.loops_count_known, 0);
        tfc_value_destroy(o[0]);
        tfc_value_destroy(o[1]);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
    }
}

static tfc_status lt_arg(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], (tfc_tensor *)arg);
    return TFC_OK;
}

static tfc_status grow_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    tfc_tensor *parts[2] = {v[1], tfc_reshape(g, tfc_cast(g, v[0], TFC_FLOAT32),
                                              tfc_shape_of(1, (int64_t[]){1}))};
    out[1] = tfc_concat(g, 2, parts, 0);
    return TFC_OK;
}

/* A counter loop whose other loop variable grows (a new plan key every iteration: no fast
 * path) and, around it, a counter loop whose body holds that loop (not one segment). */
static tfc_status outer_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    int64_t one = 1, any = -1;
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0),
                           tfc_fill(g, tfc_shape_of(1, &one), TFC_FLOAT32, 0)}, *r[2];
    tfc_shape inv[2] = {tfc_shape_of(0, NULL), tfc_shape_of(1, &any)};
    tfc_while_opts opts = {0, inv};
    (void)arg;
    tfc_status st = tfc_while_loop(g, "inner", lt_arg, grow_body, v[0], 2, init, &opts, r);
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    out[1] = tfc_add(g, v[1], tfc_reduce_sum(g, r[1], 0, NULL, 0));
    return st;
}

static void test_nested_and_growing(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), tfc_scalar(g, TFC_FLOAT32, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "outer", lt_arg, outer_body, n, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    for (int off = 0; off < 2; off++) {
        if (off) CU_ASSERT_FATAL(setenv("TFC_WHILE_COUNT", "0", 1) == 0);
        tfc_session_stats a, b;
        tfc_session_get_stats(s, &a);
        tfc_value *nv = scalar_value(TFC_INT32, 6), *o[2] = {NULL, NULL};
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &n, &nv, 2, r, o, 0, NULL) == TFC_OK);
        tfc_session_get_stats(s, &b);
        /* outer iteration k runs the inner loop k times, summing 0 + ... + k-1 */
        float sum = 0;
        for (int k = 0; k < 6; k++) sum += (float)(k * (k - 1) / 2);
        CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(o[0]), 6);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(o[1]), sum);
        CU_ASSERT_EQUAL(b.loop_iterations - a.loop_iterations, 6 + 15);
        CU_ASSERT_EQUAL(b.loops_count_known - a.loops_count_known, off ? 0 : 1 + 6);
        tfc_value_destroy(o[0]);
        tfc_value_destroy(o[1]);
        tfc_value_destroy(nv);
    }
    unsetenv("TFC_WHILE_COUNT");
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static tfc_status lt_fixed(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], tfc_scalar(g, TFC_INT32, 4));
    return TFC_OK;
}

static tfc_status mul_x(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    out[1] = tfc_mul(g, v[1], (tfc_tensor *)arg);
    return TFC_OK;
}

/* The gradient through a count-known loop: y = x^4 by a loop, dy/dx = 4 x^3, the forward loop
 * count-known, the backward loop its reverse (same count), the same bits either way. */
static void test_gradient_count_known(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(0, NULL));
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), tfc_scalar(g, TFC_FLOAT64, 1)}, *r[2];
    tfc_tensor *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "pow", lt_fixed, mul_x, x, 2, init, NULL, r), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &r[1], NULL, 1, &x, &dx), TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    double got[2][2];
    for (int off = 0; off < 2; off++) {
        if (off) CU_ASSERT_FATAL(setenv("TFC_WHILE_COUNT", "0", 1) == 0);
        tfc_session_stats a, b;
        tfc_session_get_stats(s, &a);
        tfc_value *xv = scalar_value(TFC_FLOAT64, 1.5), *o[2] = {NULL, NULL};
        tfc_tensor *f[2] = {r[1], dx};
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &xv, 2, f, o, 0, NULL) == TFC_OK);
        tfc_session_get_stats(s, &b);
        got[off][0] = *(const double *)tfc_value_cdata(o[0]);
        got[off][1] = *(const double *)tfc_value_cdata(o[1]);
        CU_ASSERT_EQUAL(b.loop_iterations - a.loop_iterations, 8); /* four each way */
        CU_ASSERT_EQUAL(b.loops_count_known - a.loops_count_known, off ? 0 : 1);
        tfc_value_destroy(o[0]);
        tfc_value_destroy(o[1]);
        tfc_value_destroy(xv);
    }
    unsetenv("TFC_WHILE_COUNT");
    CU_ASSERT_EQUAL(got[0][0], 1.5 * 1.5 * 1.5 * 1.5);
    CU_ASSERT_EQUAL(got[0][1], 4 * 1.5 * 1.5 * 1.5);
    CU_ASSERT_EQUAL(got[0][0], got[1][0]);
    CU_ASSERT_EQUAL(got[0][1], got[1][1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A profiled count-known run's report has every body task, and no predicate task. */
static void test_profiled_count_known(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(0, NULL));
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), tfc_scalar(g, TFC_FLOAT64, 1)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "pow", lt_fixed, mul_x, x, 2, init, NULL, r), TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    tfc_session_set_profiling(s, 1);
    tfc_value *xv = scalar_value(TFC_FLOAT64, 2), *o = NULL;
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &r[1], &o, 0, NULL) == TFC_OK);
    CU_ASSERT_EQUAL(*(const double *)tfc_value_cdata(o), 16);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loops_count_known, 1);
    CU_ASSERT_EQUAL(st.loop_iterations, 4);
    tfc_run_summary sm;
    CU_ASSERT_EQUAL_FATAL(tfc_session_last_summary(s, &sm), TFC_OK);
    CU_ASSERT_EQUAL(count_prefix(&sm, "pow/cond/"), 0);
    int body = count_prefix(&sm, "pow/body/");
    CU_ASSERT(body >= 4 && body % 4 == 0);
    for (int i = 0; i < sm.n_tasks; i++) CU_ASSERT(sm.tasks[i].worker >= 0);
    tfc_value_destroy(o);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- speculative iterations (TFC_WHILE_SPECULATE) --------------------------------------- */

static tfc_status s_below(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[1], tfc_scalar(g, TFC_INT32, *(const int *)arg));
    return TFC_OK;
}

/* s += 10 / (4 - i): 2, 3, 5, 10, then a division by zero at i = 4. */
static tfc_status s_div(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    out[1] = tfc_add(g, v[1], tfc_div(g, tfc_scalar(g, TFC_INT32, 10),
                                      tfc_sub(g, tfc_scalar(g, TFC_INT32, 4), v[0])));
    return TFC_OK;
}

/* One run of the loop ending when s reaches limit, speculative or not: its status, outputs,
 * and the growth of the session's iterations and tasks. */
static tfc_status run_div_loop(int limit, int speculate, int64_t max_iter, int32_t out[2],
                               uint64_t *iters, uint64_t *tasks, char *err, size_t err_len)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), tfc_scalar(g, TFC_INT32, 0)}, *r[2];
    tfc_while_opts opts = {max_iter, NULL};
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", s_below, s_div, &limit, 2, init, &opts, r),
                          TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(setenv("TFC_WHILE_SPECULATE", speculate ? "1" : "0", 1) == 0);
    tfc_value *o[2] = {NULL, NULL};
    tfc_status st = tfc_session_run(s, 0, NULL, NULL, 2, r, o, 0, NULL);
    unsetenv("TFC_WHILE_SPECULATE");
    snprintf(err, err_len, "%s", st ? tfc_session_errmsg(s) : "");
    for (int k = 0; !st && k < 2; k++) out[k] = *(const int32_t *)tfc_value_cdata(o[k]);
    tfc_session_stats sts;
    tfc_session_get_stats(s, &sts);
    *iters = sts.loop_iterations;
    *tasks = sts.tasks;
    CU_ASSERT_EQUAL(sts.loops_count_known, 0);
    tfc_value_destroy(o[0]);
    tfc_value_destroy(o[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    return st;
}

/* A loop whose predicate is not a counter, run one iteration ahead: the same results and
 * iterations as tested one at a time, more tasks (the discarded iteration's), and the
 * discarded iteration's division by zero is never reported; a real one still is. */
static void test_speculative_iterations(void)
{
    char err[512];
    int32_t a[2] = {-1, -1}, b[2] = {-2, -2};
    uint64_t ia, ib, ta, tb;
    CU_ASSERT_EQUAL(run_div_loop(20, 0, 0, a, &ia, &ta, err, sizeof err), TFC_OK);
    CU_ASSERT_EQUAL(run_div_loop(20, 1, 0, b, &ib, &tb, err, sizeof err), TFC_OK);
    if (*err) fprintf(stderr, "speculative: %s\n", err);
    CU_ASSERT(a[0] == 4 && a[1] == 20);
    CU_ASSERT(b[0] == a[0] && b[1] == a[1]);
    CU_ASSERT(ia == 4 && ib == 4);
    CU_ASSERT(tb > ta); /* the speculative body and predicate were submitted */
    /* maximum_iterations stops it before the division by zero either way */
    CU_ASSERT_EQUAL(run_div_loop(100, 1, 3, b, &ib, &tb, err, sizeof err), TFC_OK);
    CU_ASSERT(b[0] == 3 && b[1] == 10 && ib == 3);
    /* s < 21 runs the body at i = 4: the division by zero is real */
    CU_ASSERT_EQUAL(run_div_loop(21, 1, 0, b, &ib, &tb, err, sizeof err), TFC_ERR_OUT_OF_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "division by zero"));
    CU_ASSERT_EQUAL(run_div_loop(21, 0, 0, a, &ia, &ta, err, sizeof err), TFC_ERR_OUT_OF_RANGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "division by zero"));
}

static tfc_status acc_step(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, tfc_mul(g, v[0], tfc_scalar(g, TFC_FLOAT64, 1.5)),
                     tfc_scalar(g, TFC_FLOAT64, 0.25));
    return TFC_OK;
}

static tfc_status acc_below(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], (tfc_tensor *)arg);
    return TFC_OK;
}

/* A longer speculative loop (x = 1.5 x + 0.25 until it passes a fed bound, its pool of
 * instances recycled on the way) and its gradient: the same bits as tested one at a time. */
static void test_speculative_long_and_gradient(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(0, NULL));
    tfc_tensor *lim = tfc_placeholder(g, "lim", TFC_FLOAT64, tfc_shape_of(0, NULL));
    tfc_tensor *r, *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "grow", acc_below, acc_step, lim, 1, &x, NULL, &r),
                          TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &r, NULL, 1, &x, &dx), TFC_OK);
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    double got[2][2];
    uint64_t iters[2];
    for (int spec = 0; spec < 2; spec++) {
        CU_ASSERT_FATAL(setenv("TFC_WHILE_SPECULATE", spec ? "1" : "0", 1) == 0);
        tfc_session_stats a, b;
        tfc_session_get_stats(s, &a);
        tfc_value *fv[2] = {scalar_value(TFC_FLOAT64, 1), scalar_value(TFC_FLOAT64, 1e30)};
        tfc_tensor *ft[2] = {x, lim}, *f[2] = {r, dx};
        tfc_value *o[2] = {NULL, NULL};
        CU_ASSERT_FATAL(tfc_session_run(s, 2, ft, fv, 2, f, o, 0, NULL) == TFC_OK);
        tfc_session_get_stats(s, &b);
        iters[spec] = b.loop_iterations - a.loop_iterations;
        for (int k = 0; k < 2; k++) {
            got[spec][k] = *(const double *)tfc_value_cdata(o[k]);
            tfc_value_destroy(o[k]);
            tfc_value_destroy(fv[k]);
        }
    }
    unsetenv("TFC_WHILE_SPECULATE");
    int n = 0; /* the host's count: forward iterations, and dx = 1.5^n */
    for (double v = 1; v < 1e30; v = v * 1.5 + 0.25) n++;
    CU_ASSERT_EQUAL(iters[0], (uint64_t)(2 * n));
    CU_ASSERT_EQUAL(iters[1], iters[0]);
    CU_ASSERT_EQUAL(got[0][0], got[1][0]);
    CU_ASSERT_EQUAL(got[0][1], got[1][1]);
    CU_ASSERT_DOUBLE_EQUAL(got[0][1], pow(1.5, n), 1e-9 * pow(1.5, n));
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("cflow_count", test_ctx_open, test_ctx_close);
    TEST_ADD(test_counter_loops_known);
    TEST_ADD(test_counter_loops_fall_back);
    TEST_ADD(test_trip_count_limits);
    TEST_ADD(test_not_counters);
    TEST_ADD(test_nested_and_growing);
    TEST_ADD(test_gradient_count_known);
    TEST_ADD(test_profiled_count_known);
    TEST_ADD(test_speculative_iterations);
    TEST_ADD(test_speculative_long_and_gradient);
    return test_main();
}
