/* test_control_flow.c: cond and while_loop (issue 13, items 1 and 2): both branches with the
 * predicate fed at run time, counting and summing loops, a loop variable that grows, maximum
 * iterations, captures and variable reads, nesting both ways, the same computation unrolled
 * into a static graph (bit for bit), the two-step form, every builder error by message, and a
 * gradient through a loop. */
#include <pthread.h>
#include <unistd.h>
#include "testutil.h"
#include "cflow_cases.h"
#include "../graph/serialize.h"

static tfc_tensor *i32(tfc_graph *g, double x) { return tfc_scalar(g, TFC_INT32, x); }
static tfc_tensor *f32(tfc_graph *g, double x) { return tfc_scalar(g, TFC_FLOAT32, x); }

/* Runs s with feeds and returns fetch 0's values (caller destroys); asserts success. */
static tfc_value *run1(tfc_session *s, int nf, tfc_tensor **ft, tfc_value **fv, tfc_tensor *y)
{
    tfc_value *out = NULL;
    tfc_status st = tfc_session_run(s, nf, ft, fv, 1, &y, &out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    CU_ASSERT_FATAL(st == TFC_OK);
    return out;
}

static tfc_session *session_of(tfc_graph *g)
{
    tfc_session *s = NULL;
    if (tfc_graph_status(g)) fprintf(stderr, "graph: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    return s;
}

/* ---- cond ------------------------------------------------------------------------------ */

struct cond_arg { tfc_tensor *x; };

static tfc_status twice(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    out[0] = tfc_mul(g, ((struct cond_arg *)arg)->x, f32(g, 2));
    return TFC_OK;
}

static tfc_status plus_one(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    out[0] = tfc_add(g, ((struct cond_arg *)arg)->x, f32(g, 1));
    return TFC_OK;
}

static void test_cond_both_ways(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d3 = 3;
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d3));
    tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL));
    struct cond_arg a = {x};
    tfc_tensor *y;
    CU_ASSERT_EQUAL_FATAL(tfc_cond(g, "c", p, twice, plus_one, &a, 1, &y), TFC_OK);
    tfc_session *s = session_of(g);
    float xs[3] = {1.5f, -2, 4};
    tfc_value *xv = test_f32(1, &d3, xs);
    for (int taken = 0; taken < 2; taken++) {
        tfc_value *pv = scalar_value(TFC_BOOL, taken);
        tfc_tensor *ft[2] = {x, p};
        tfc_value *fv[2] = {xv, pv}, *yv = run1(s, 2, ft, fv, y);
        const float *r = tfc_value_cdata(yv);
        for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(r[i], taken ? xs[i] * 2 : xs[i] + 1);
        tfc_value_destroy(yv);
        tfc_value_destroy(pv);
    }
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.cond_then, 1);
    CU_ASSERT_EQUAL(st.cond_else, 1);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- while: counting and summing ------------------------------------------------------- */

struct loop_arg { tfc_tensor *n; };

static tfc_status below_n(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], ((struct loop_arg *)arg)->n);
    return TFC_OK;
}

static tfc_status count_sum(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, v[1], tfc_cast(g, v[0], TFC_FLOAT32));
    return TFC_OK;
}

static void test_while_count_sum(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "loop", below_n, count_sum, &a, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    int counts[3] = {10, 0, 1};
    for (int k = 0; k < 3; k++) {
        tfc_value *nv = scalar_value(TFC_INT32, counts[k]), *out[2];
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &n, &nv, 2, r, out, 0, NULL) == TFC_OK);
        CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(out[0]), counts[k]);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(out[1]),
                        (float)(counts[k] * (counts[k] - 1) / 2));
        tfc_value_destroy(out[0]);
        tfc_value_destroy(out[1]);
        tfc_value_destroy(nv);
    }
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loop_iterations, 11);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- a loop variable that grows -------------------------------------------------------- */

static tfc_status lt3(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 3));
    return TFC_OK;
}

static tfc_status grow(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    tfc_tensor *parts[2] = {v[1], tfc_add(g, v[1], f32(g, 1))};
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_concat(g, 2, parts, 0);
    return TFC_OK;
}

static void test_while_shape_relaxed(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t one = 1, any = -1;
    float z = 0;
    tfc_value *zv = test_f32(1, &one, &z);
    tfc_tensor *init[2] = {i32(g, 0), tfc_constant(g, "v0", zv)}, *r[2];
    tfc_shape inv[2] = {tfc_shape_of(0, NULL), tfc_shape_of(1, &any)};
    tfc_while_opts o = {.shape_invariants = inv};
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "grow", lt3, grow, NULL, 2, init, &o, r), TFC_OK);
    CU_ASSERT_EQUAL(tfc_tensor_shape(r[1]).dims[0], -1);
    tfc_session *s = session_of(g);
    tfc_value *v = run1(s, 0, NULL, NULL, r[1]);
    CU_ASSERT_EQUAL_FATAL(tfc_value_shape(v).dims[0], 8);
    const float *p = tfc_value_cdata(v);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(p[i], (float)__builtin_popcount(i));
    tfc_value_destroy(v);
    tfc_value_destroy(zv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- maximum_iterations ---------------------------------------------------------------- */

static tfc_status lt100(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 100));
    return TFC_OK;
}

static tfc_status incr(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    return TFC_OK;
}

static void test_while_maximum_iterations(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *init = i32(g, 0), *r;
    tfc_while_opts o = {.maximum_iterations = 5};
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "capped", lt100, incr, NULL, 1, &init, &o, &r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *v = run1(s, 0, NULL, NULL, r);
    CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(v), 5);
    tfc_value_destroy(v);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- captures and a variable read ------------------------------------------------------ */

struct cap_arg { tfc_tensor *w, *c; };

static tfc_status axpy(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct cap_arg *a = arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, v[1], tfc_mul(g, a->w, a->c)); /* w: a variable; c: a fed placeholder */
    return TFC_OK;
}

static void test_while_capture_and_variable(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d2 = 2;
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(1, &d2), tfc_init_constant(1.5));
    tfc_tensor *c = tfc_placeholder(g, "c", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    float x0[2] = {1, -1};
    tfc_value *x0v = test_f32(1, &d2, x0);
    tfc_tensor *init[2] = {i32(g, 0), tfc_constant(g, "x0", x0v)}, *r[2];
    struct cap_arg ca = {w, c};
    struct loop_arg la = {n};
    /* the two-step form: the cond reads la.n, the body ca */
    tfc_cflow *cf = tfc_while_new(g, "axpy", 2, init, NULL);
    tfc_tensor *in[2], *pred;
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_enter(cf, 0, in), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(below_n(g, &la, in, &pred), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_leave(cf, 1, &pred), TFC_OK);
    tfc_tensor *outs[2];
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_enter(cf, 1, in), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(axpy(g, &ca, in, outs), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_leave(cf, 2, outs), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_finish(cf, r), TFC_OK);
    tfc_session *s = session_of(g);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    tfc_value *cv = scalar_value(TFC_FLOAT32, 2), *nv = scalar_value(TFC_INT32, 4);
    tfc_tensor *ft[2] = {c, n};
    tfc_value *fv[2] = {cv, nv}, *out = run1(s, 2, ft, fv, r[1]);
    const float *p = tfc_value_cdata(out);
    CU_ASSERT_EQUAL(p[0], 1 + 4 * 3.0f);
    CU_ASSERT_EQUAL(p[1], -1 + 4 * 3.0f);
    tfc_value_destroy(out);
    tfc_value_destroy(cv);
    tfc_value_destroy(nv);
    tfc_value_destroy(x0v);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- nesting --------------------------------------------------------------------------- */

static tfc_status lt4(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 4));
    return TFC_OK;
}

static tfc_status inner_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    tfc_tensor *outer_i = arg; /* a tensor of the outer body: captured by the inner loop */
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, v[1], tfc_add(g, tfc_cast(g, outer_i, TFC_FLOAT32), f32(g, 1)));
    return TFC_OK;
}

static tfc_status outer_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    tfc_tensor *init[2] = {i32(g, 0), v[1]}, *r[2];
    tfc_status st = tfc_while_loop(g, "inner", lt4, inner_body, v[0], 2, init, NULL, r);
    if (st) return st;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = r[1];
    return TFC_OK;
}

static void test_nested_loops(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "outer", lt3, outer_body, NULL, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *v = run1(s, 0, NULL, NULL, r[1]);
    CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(v), 4 * (1 + 2 + 3)); /* sum of 4 (i+1) */
    tfc_value_destroy(v);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loop_iterations, 3 + 3 * 4);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static tfc_status add10(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    out[0] = tfc_add(g, (tfc_tensor *)arg, f32(g, 10));
    return TFC_OK;
}

static tfc_status add1(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    out[0] = tfc_add(g, (tfc_tensor *)arg, f32(g, 1));
    return TFC_OK;
}

static tfc_status body_with_cond(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    tfc_tensor *r;
    tfc_status st = tfc_cond(g, "pick", tfc_less(g, v[0], i32(g, 2)), add10, add1, v[1], 1, &r);
    if (st) return st;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = r;
    return TFC_OK;
}

static void test_cond_inside_loop(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    tfc_cflow *cf = tfc_while_new(g, "l", 2, init, NULL);
    tfc_tensor *in[2], *o[2];
    tfc_cflow_enter(cf, 0, in);
    below_n(g, &a, in, o);
    tfc_cflow_leave(cf, 1, o);
    tfc_cflow_enter(cf, 1, in);
    body_with_cond(g, NULL, in, o);
    tfc_cflow_leave(cf, 2, o);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_finish(cf, r), TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *nv = scalar_value(TFC_INT32, 5), *v = run1(s, 1, &n, &nv, r[1]);
    CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(v), 10 + 10 + 1 + 1 + 1);
    tfc_value_destroy(v);
    tfc_value_destroy(nv);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.cond_then, 2);
    CU_ASSERT_EQUAL(st.cond_else, 3);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static tfc_status loop_branch(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    tfc_status st = tfc_while_loop(g, "sum", below_n, count_sum, arg, 2, init, NULL, r);
    out[0] = r[1];
    return st;
}

static tfc_status minus_one(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)arg; (void)in;
    out[0] = f32(g, -1);
    return TFC_OK;
}

static void test_loop_inside_cond(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *y;
    CU_ASSERT_EQUAL_FATAL(tfc_cond(g, "c", p, loop_branch, minus_one, &a, 1, &y), TFC_OK);
    tfc_session *s = session_of(g);
    for (int taken = 0; taken < 2; taken++) {
        tfc_value *nv = scalar_value(TFC_INT32, 6), *pv = scalar_value(TFC_BOOL, taken);
        tfc_tensor *ft[2] = {n, p};
        tfc_value *fv[2] = {nv, pv}, *v = run1(s, 2, ft, fv, y);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(v), taken ? 15.0f : -1.0f);
        tfc_value_destroy(v);
        tfc_value_destroy(nv);
        tfc_value_destroy(pv);
    }
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- the same computation unrolled ----------------------------------------------------- */

struct rnn_arg { tfc_tensor *w, *b; };

static tfc_tensor *rnn_step(tfc_graph *g, const struct rnn_arg *a, tfc_tensor *h)
{
    return tfc_tanh(g, tfc_add(g, tfc_matmul(g, h, a->w, 0, 0), a->b));
}

static tfc_status rnn_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = rnn_step(g, arg, v[1]);
    return TFC_OK;
}

static tfc_status lt6(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 6));
    return TFC_OK;
}

static void test_unrolled_bit_for_bit(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t hd[2] = {4, 8}, wd[2] = {8, 8}, bd = 8;
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(2, hd));
    struct rnn_arg a = {tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(2, wd),
                                     tfc_init_uniform(-0.5, 0.5, 7)),
                        tfc_variable(g, "b", TFC_FLOAT32, tfc_shape_of(1, &bd),
                                     tfc_init_uniform(-0.1, 0.1, 8))};
    tfc_tensor *init[2] = {i32(g, 0), h0}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "rnn", lt6, rnn_body, &a, 2, init, NULL, r), TFC_OK);
    tfc_tensor *h = h0;
    for (int i = 0; i < 6; i++) h = rnn_step(g, &a, h);
    tfc_session *s = session_of(g);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = (float)sin(i * 0.7) * 2;
    tfc_value *xv = test_f32(2, hd, x), *out[2];
    tfc_tensor *fetch[2] = {r[1], h};
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &h0, &xv, 2, fetch, out, 0, NULL) == TFC_OK);
    CU_ASSERT(test_same_f32(tfc_value_cdata(out[0]), tfc_value_cdata(out[1]), 32, 1e-5));
    CU_ASSERT(memcmp(tfc_value_cdata(out[0]), x, sizeof x) != 0);
    tfc_value_destroy(out[0]);
    tfc_value_destroy(out[1]);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- errors ---------------------------------------------------------------------------- */

/* The graph holds status st and its message contains each of the fragments. */
static void expect_error(tfc_graph *g, tfc_status st, const char *a, const char *b)
{
    const char *m = tfc_graph_errmsg(g);
    CU_ASSERT_EQUAL(tfc_graph_status(g), st);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, a));
    if (b) CU_ASSERT_PTR_NOT_NULL(strstr(m, b));
    if (!strstr(m, a) || (b && !strstr(m, b))) fprintf(stderr, "message: %s\n", m);
}

static tfc_status to_f64(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_cast(g, v[0], TFC_FLOAT64);
    return TFC_OK;
}

static tfc_status f_lt3(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], f32(g, 3));
    return TFC_OK;
}

static tfc_status doubled(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    tfc_tensor *parts[2] = {v[0], v[0]};
    out[0] = tfc_concat(g, 2, parts, 0);
    return TFC_OK;
}

static tfc_status vec_pred(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], v[0]);
    return TFC_OK;
}

static tfc_status float_pred(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = v[0];
    return TFC_OK;
}

static tfc_status fails(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)g; (void)arg; (void)v; (void)out;
    return TFC_ERR_NOT_FOUND;
}

static tfc_graph *fresh(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    return g;
}

static void test_build_errors(void)
{
    int64_t d2 = 2;
    tfc_tensor *r[2];
    /* a body output's dtype and shape must match its loop variable: both are named */
    tfc_graph *g = fresh();
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_while_loop(g, "w", f_lt3, to_f64, NULL, 1, &x, NULL, r);
    expect_error(g, TFC_ERR_DTYPE, "body output 0 ('w/body/cast", "loop variable 0 ('x') is float32");
    tfc_graph_destroy(g);
    g = fresh();
    x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d2));
    tfc_while_loop(g, "w", vec_pred, doubled, NULL, 1, &x, NULL, r);
    expect_error(g, TFC_ERR_SHAPE, "predicate 'w/cond/less' must be a scalar", "[2]");
    tfc_graph_destroy(g);
    g = fresh();
    x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d2));
    tfc_tensor *i = i32(g, 0), *iv[2] = {i, x};
    tfc_while_loop(g, "w", lt3, grow, NULL, 2, iv, NULL, r);
    expect_error(g, TFC_ERR_SHAPE, "body output 1 ('w/body/concat') has shape [4]",
                 "loop variable 1 ('x') keeps shape [2]");
    tfc_graph_destroy(g);
    g = fresh();
    x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_while_loop(g, "w", float_pred, incr, NULL, 1, &x, NULL, r);
    expect_error(g, TFC_ERR_DTYPE, "predicate 'w/cond/", "must be bool, int32 or int64, got float32");
    tfc_graph_destroy(g);
    /* counts, NULLs, a failing callback, a bad maximum_iterations, an invariant that refuses
     * the initial value */
    g = fresh();
    i = i32(g, 0);
    tfc_tensor *two[2] = {i, i};
    tfc_while_loop(g, "w", lt3, incr, NULL, 2, two, NULL, r);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "while 'w': body output 1 is NULL", NULL);
    tfc_graph_destroy(g);
    g = fresh(); /* the two-step form says the counts */
    i = i32(g, 0);
    two[0] = two[1] = i;
    tfc_cflow *cf = tfc_while_new(g, "w", 2, two, NULL);
    tfc_tensor *in[2], *o[2];
    tfc_cflow_enter(cf, 0, in);
    lt3(g, NULL, in, o);
    tfc_cflow_leave(cf, 1, o);
    tfc_cflow_enter(cf, 1, in);
    incr(g, NULL, in, o);
    tfc_cflow_leave(cf, 1, o);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "the body returns 1 tensors, 2 expected",
                 "(one per loop variable)");
    tfc_graph_destroy(g);
    g = fresh();
    tfc_while_loop(g, "w", lt3, incr, NULL, 0, NULL, NULL, r);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "0 loop variables is outside [1, 32]", NULL);
    tfc_graph_destroy(g);
    g = fresh();
    i = i32(g, 0);
    tfc_while_loop(g, "w", lt3, fails, NULL, 1, &i, NULL, r);
    expect_error(g, TFC_ERR_NOT_FOUND, "the body function failed", NULL);
    tfc_graph_destroy(g);
    g = fresh();
    i = i32(g, 0);
    tfc_while_loop(g, "w", NULL, incr, NULL, 1, &i, NULL, r);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "the cond function is NULL", NULL);
    tfc_graph_destroy(g);
    g = fresh();
    i = i32(g, 0);
    tfc_while_opts neg = {.maximum_iterations = -2};
    tfc_while_loop(g, "w", lt3, incr, NULL, 1, &i, &neg, r);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "maximum_iterations is -2", NULL);
    tfc_graph_destroy(g);
    g = fresh();
    x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d2));
    int64_t three = 3;
    tfc_shape inv = tfc_shape_of(1, &three);
    tfc_while_opts oi = {.shape_invariants = &inv};
    tfc_while_loop(g, "w", lt3, incr, NULL, 1, &x, &oi, r);
    expect_error(g, TFC_ERR_SHAPE, "loop variable 0 ('x') has shape [2]", "invariant [3]");
    tfc_graph_destroy(g);
}

static tfc_status keep_inner(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    *(tfc_tensor **)arg = tfc_add(g, v[0], i32(g, 1));
    out[0] = *(tfc_tensor **)arg;
    return TFC_OK;
}

static void test_region_and_cond_errors(void)
{
    int64_t d2 = 2;
    tfc_tensor *r[2], *inner = NULL;
    /* a body's tensor used outside the loop */
    tfc_graph *g = fresh();
    tfc_tensor *i = i32(g, 0);
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", lt3, keep_inner, &inner, 1, &i, NULL, r), TFC_OK);
    tfc_add(g, inner, i32(g, 1));
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "is inside a branch or body of 'w'", "w/body/add");
    tfc_graph_destroy(g);
    /* cond: branches that disagree, a predicate that is not a scalar */
    g = fresh();
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d2));
    tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL));
    struct cond_arg a = {x};
    tfc_cond(g, "c", p, twice, minus_one, &a, 1, r);
    expect_error(g, TFC_ERR_SHAPE, "output 0 is float32 [2] in then", "but float32 [] in else");
    tfc_graph_destroy(g);
    g = fresh();
    x = tfc_placeholder(g, "x", TFC_BOOL, tfc_shape_of(1, &d2));
    tfc_cond(g, "c", x, minus_one, minus_one, NULL, 1, r);
    expect_error(g, TFC_ERR_SHAPE, "cond 'c': predicate 'x' must be a scalar", NULL);
    tfc_graph_destroy(g);
    /* the two-step form used out of order */
    g = fresh();
    i = i32(g, 0);
    tfc_cflow *cf = tfc_while_new(g, "w", 1, &i, NULL);
    tfc_tensor *in[1];
    CU_ASSERT_EQUAL(tfc_cflow_enter(cf, 0, in), TFC_OK);
    tfc_cflow_enter(cf, 1, in);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "region cond is still entered", NULL);
    tfc_graph_destroy(g);
    g = fresh();
    i = i32(g, 0);
    cf = tfc_while_new(g, "w", 1, &i, NULL);
    tfc_cflow_finish(cf, r);
    expect_error(g, TFC_ERR_INVALID_ARGUMENT, "while 'w': its cond was not built", NULL);
    tfc_graph_destroy(g);
}

/* A fetch or a feed inside a body is refused at run time with the loop's name. */
static void test_fetch_inside_body(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *i = i32(g, 0), *r, *inner = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", lt3, keep_inner, &inner, 1, &i, NULL, &r), TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *v = NULL;
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 1, &inner, &v, 0, NULL),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(s), "fetch 'w/body/add' is inside"));
    tfc_value *iv = scalar_value(TFC_INT32, 1);
    tfc_tensor *var0 = tfc_graph_find(g, "w/body/var_0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(var0);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &var0, &iv, 1, &r, &v, 0, NULL),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(s), "feed 'w/body/var_0' is inside"));
    tfc_value_destroy(iv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- concurrent runs, a failing kernel, saving --------------------------------------------- */

struct conc { tfc_session *s; tfc_tensor *n, *r[2]; int count, bad; };

static void *run_loops(void *arg)
{
    struct conc *c = arg;
    for (int k = 0; k < 20; k++) {
        tfc_value *nv = NULL, *out[2] = {NULL, NULL};
        tfc_value_scalar(TFC_INT32, c->count, &nv);
        if (tfc_session_run(c->s, 1, &c->n, &nv, 2, c->r, out, 0, NULL) ||
            *(const int32_t *)tfc_value_cdata(out[0]) != c->count ||
            *(const float *)tfc_value_cdata(out[1]) != (float)(c->count * (c->count - 1) / 2))
            c->bad++;
        tfc_value_destroy(out[0]);
        tfc_value_destroy(out[1]);
        tfc_value_destroy(nv);
    }
    return NULL;
}

/* Two threads run loops of different lengths on one session at once: each waits for its own
 * predicates without the session lock, and both get their own results. */
static void test_concurrent_loops(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "loop", below_n, count_sum, &a, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    struct conc c[2] = {{s, n, {r[0], r[1]}, 7, 0}, {s, n, {r[0], r[1]}, 30, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, run_loops, &c[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(c[0].bad, 0);
    CU_ASSERT_EQUAL(c[1].bad, 0);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loop_iterations, 20 * (7 + 30));
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static tfc_status div_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, v[1], tfc_div(g, i32(g, 10), tfc_sub(g, i32(g, 3), v[0])));
    return TFC_OK;
}

static tfc_status lt5(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 5));
    return TFC_OK;
}

/* A kernel that fails in one iteration ends the run with its node's name; the session runs
 * on (the same loop with fewer iterations succeeds after). */
static void test_kernel_error_in_body(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *init[2] = {i32(g, 0), i32(g, 0)}, *r[2];
    tfc_tensor *i0 = tfc_placeholder(g, "i0", TFC_INT32, tfc_shape_of(0, NULL));
    init[0] = i0;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", lt5, div_body, NULL, 2, init, NULL, r), TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *iv = scalar_value(TFC_INT32, 0), *v = NULL;
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &i0, &iv, 1, &r[1], &v, 0, NULL), TFC_ERR_OUT_OF_RANGE);
    CU_ASSERT_PTR_NULL(v);
    const char *m = tfc_session_errmsg(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "node 'w/body/div"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "division by zero"));
    tfc_value_destroy(iv);
    iv = scalar_value(TFC_INT32, 4); /* one iteration: 10 / (3 - 4) = -10 */
    v = run1(s, 1, &i0, &iv, r[1]);
    CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(v), -10);
    tfc_value_destroy(v);
    tfc_value_destroy(iv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* The records of g imported into a new graph, as the store saves and loads them. */
static tfc_graph *reimport(tfc_graph *g)
{
    int n = tfc_graph_num_nodes(g);
    struct tfc_node_record *recs = calloc((size_t)n, sizeof *recs);
    tfc_graph *h = fresh();
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(tfc_graph_export_node(g, i, &recs[i]), TFC_OK);
    for (int i = 0; i < n; i++) tfc_graph_import_node(h, &recs[i]);
    for (int i = 0; i < n; i++) tfc_graph_import_ctrl(h, &recs[i]);
    tfc_graph_import_check(h);
    for (int i = 0; i < n; i++) tfc_node_record_clear(&recs[i]);
    free(recs);
    if (tfc_graph_status(h)) fprintf(stderr, "import: %s\n", tfc_graph_errmsg(h));
    CU_ASSERT_EQUAL(tfc_graph_status(h), TFC_OK);
    CU_ASSERT_EQUAL(tfc_graph_num_nodes(h), n);
    return h;
}

struct nest_arg { tfc_tensor *x, *i; };

static tfc_status nest_inner(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct nest_arg *a = arg; /* x: top level, captured through two regions; i: outer body */
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, v[1], tfc_mul(g, a->x, tfc_cast(g, tfc_add(g, a->i, i32(g, 1)),
                                                       TFC_FLOAT32)));
    return TFC_OK;
}

static tfc_status lt2(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 2));
    return TFC_OK;
}

static tfc_status nest_outer(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct nest_arg a = {((struct nest_arg *)arg)->x, v[0]};
    tfc_tensor *init[2] = {i32(g, 0), v[1]}, *r[2], *c;
    tfc_status st = tfc_while_loop(g, "inner", lt2, nest_inner, &a, 2, init, NULL, r);
    if (!st) st = tfc_cond(g, "pick", tfc_less(g, v[0], i32(g, 1)), add10, add1, r[1], 1, &c);
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = c;
    return st;
}

/* Runs the saved-and-loaded test graph h: n, x fed; fetches the outer loop's sum and the grown
 * vector. */
static void run_nested(tfc_graph *g, int count, tfc_value **out)
{
    tfc_tensor *n = tfc_graph_find(g, "n"), *x = tfc_graph_find(g, "x");
    tfc_tensor *f[2] = {tfc_graph_find(g, "outer:1"), tfc_graph_find(g, "grow:1")};
    CU_ASSERT_PTR_NOT_NULL_FATAL(f[0]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f[1]);
    tfc_session *s = session_of(g);
    int64_t d2 = 2;
    float xs[2] = {0.25f, -1.5f};
    tfc_value *fv[2] = {scalar_value(TFC_INT32, count), test_f32(1, &d2, xs)};
    tfc_tensor *ft[2] = {n, x};
    CU_ASSERT_FATAL(tfc_session_run(s, 2, ft, fv, 2, f, out, 0, NULL) == TFC_OK);
    tfc_value_destroy(fv[0]);
    tfc_value_destroy(fv[1]);
    tfc_session_destroy(s);
}

/* A graph with nested loops, a cond in a loop, captures through two regions, a relaxed shape
 * and maximum_iterations, exported record by record and imported into a new graph (what the
 * store does), and saved in a model store and loaded: each runs bit for bit as the original. */
static void test_save_and_load(void)
{
    tfc_graph *g = fresh();
    int64_t d2 = 2, one = 1, any = -1;
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d2));
    struct nest_arg a = {x, NULL};
    struct loop_arg la = {n};
    tfc_tensor *init[2] = {i32(g, 0), tfc_mul(g, x, f32(g, 0))}, *r[2];
    tfc_cflow *cf = tfc_while_new(g, "outer", 2, init, NULL);
    tfc_tensor *in[2], *o[2];
    tfc_cflow_enter(cf, 0, in);
    below_n(g, &la, in, o);
    tfc_cflow_leave(cf, 1, o);
    tfc_cflow_enter(cf, 1, in);
    nest_outer(g, &a, in, o);
    tfc_cflow_leave(cf, 2, o);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_finish(cf, r), TFC_OK);
    float z = 0;
    tfc_value *zv = test_f32(1, &one, &z);
    tfc_tensor *ginit[2] = {i32(g, 0), tfc_constant(g, "v0", zv)}, *gr[2];
    tfc_shape inv[2] = {tfc_shape_of(0, NULL), tfc_shape_of(1, &any)};
    tfc_while_opts go = {.maximum_iterations = 2, .shape_invariants = inv};
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "grow", lt3, grow, NULL, 2, ginit, &go, gr), TFC_OK);
    tfc_value_destroy(zv);

    tfc_graph *h = reimport(g);
    char path[] = "/tmp/tfc-cflow-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    unlink(path);
    tfc_store *st = NULL;
    tfc_graph *k = NULL;
    CU_ASSERT_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st) == TFC_OK);
    if (tfc_store_save_graph(st, g)) fprintf(stderr, "save: %s\n", tfc_store_errmsg(st));
    CU_ASSERT_FATAL(tfc_store_load_graph(st, &k) == TFC_OK);
    tfc_store_close(st);
    unlink(path);
    tfc_graph *graphs[3] = {g, h, k};
    /* records cut inside a region: the import says which node was left unfinished */
    tfc_tensor *leave = tfc_graph_find(g, "outer/body/leave"); /* the outer body's last record */
    CU_ASSERT_PTR_NOT_NULL_FATAL(leave);
    int cut = leave->node->id;
    tfc_graph *t = fresh();
    struct tfc_node_record rec;
    for (int i = 0; i < cut; i++) {
        CU_ASSERT_EQUAL(tfc_graph_export_node(g, i, &rec), TFC_OK);
        tfc_graph_import_node(t, &rec);
        tfc_node_record_clear(&rec);
    }
    CU_ASSERT_EQUAL(tfc_graph_status(t), TFC_OK);
    CU_ASSERT_EQUAL(tfc_graph_import_check(t), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(t), "while 'outer': the stored graph ends"));
    tfc_graph_destroy(t);
    for (int count = 0; count <= 3; count += 3) {
        tfc_value *ref[2], *got[2];
        run_nested(g, count, ref);
        CU_ASSERT_EQUAL(tfc_value_shape(ref[1]).dims[0], 4); /* two of its three iterations */
        for (int j = 1; j < 3; j++) {
            run_nested(graphs[j], count, got);
            for (int f = 0; f < 2; f++) {
                CU_ASSERT_EQUAL(tfc_value_nbytes(got[f]), tfc_value_nbytes(ref[f]));
                CU_ASSERT(!memcmp(tfc_value_cdata(got[f]), tfc_value_cdata(ref[f]),
                                  tfc_value_nbytes(ref[f])));
                tfc_value_destroy(got[f]);
            }
        }
        if (count == 3) { /* (i+1) x summed twice per outer iteration, +10 once, +1 twice */
            const float *p = tfc_value_cdata(ref[0]);
            CU_ASSERT_EQUAL(p[0], 2 * (1 + 2 + 3) * 0.25f + 10 + 1 + 1);
        }
        tfc_value_destroy(ref[0]);
        tfc_value_destroy(ref[1]);
    }
    tfc_graph_destroy(k);
    tfc_graph_destroy(h);
    tfc_graph_destroy(g);
}

/* Asynchronous runs: each is driven on its own thread; waiting in any order gives each its
 * own fetches, and a run never waited for is waited for by tfc_session_destroy. */
static void test_async_runs(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "loop", below_n, count_sum, &a, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    int counts[3] = {40, 3, 17};
    tfc_value *nv[3];
    tfc_run *runs[3];
    for (int k = 0; k < 3; k++) {
        nv[k] = scalar_value(TFC_INT32, counts[k]);
        CU_ASSERT_EQUAL_FATAL(tfc_session_run_async(s, 1, &n, &nv[k], 1, &r[0], 0, NULL, &runs[k]),
                              TFC_OK);
    }
    for (int k = 2; k >= 1; k--) {
        tfc_value *out = NULL;
        CU_ASSERT_EQUAL(tfc_run_wait(runs[k], &out), TFC_OK);
        CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(out), counts[k]);
        tfc_value_destroy(out);
    }
    tfc_session_destroy(s); /* waits for runs[0], with a warning on stderr */
    for (int k = 0; k < 3; k++) tfc_value_destroy(nv[k]);
    tfc_graph_destroy(g);
}

static tfc_status swap_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, v[3], f32(g, 1)); /* a' = c + 1 */
    out[2] = v[1];                        /* b' = a, c' = b: values of earlier iterations */
    out[3] = v[2];                        /* passed on for two more iterations */
    return TFC_OK;
}

/* Loop variables passed on unchanged keep the iteration that computed them alive: recycling an
 * iteration's instances must spare the handles a loop variable still lives in. */
static void test_loop_variable_passed_on(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg la = {n};
    tfc_tensor *init[4] = {i32(g, 0), f32(g, 0), f32(g, 0), f32(g, 0)}, *r[4];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "rotate", below_n, swap_body, &la, 4, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    for (int count = 0; count <= 10; count += 2) {
        float a = 0, b = 0, c = 0;
        for (int k = 0; k < count; k++) {
            float na = c + 1;
            c = b;
            b = a;
            a = na;
        }
        tfc_value *nv = scalar_value(TFC_INT32, count), *out[3];
        CU_ASSERT_FATAL(tfc_session_run(s, 1, &n, &nv, 3, &r[1], out, 0, NULL) == TFC_OK);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(out[0]), a);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(out[1]), b);
        CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(out[2]), c);
        for (int j = 0; j < 3; j++) tfc_value_destroy(out[j]);
        tfc_value_destroy(nv);
    }
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* Segment plans are cached: a loop plans its cond and body once, later iterations and later
 * runs only submit. */
static void test_segments_planned_once(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "loop", below_n, count_sum, &a, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    tfc_session_stats st0, st1, st2;
    tfc_value *nv = scalar_value(TFC_INT32, 50), *v = run1(s, 1, &n, &nv, r[1]);
    tfc_value_destroy(v);
    tfc_session_get_stats(s, &st0);
    CU_ASSERT(st0.lowerings <= 4); /* before the loop, its cond, its body, after it */
    v = run1(s, 1, &n, &nv, r[1]);
    tfc_value_destroy(v);
    tfc_session_get_stats(s, &st1);
    CU_ASSERT_EQUAL(st1.lowerings, st0.lowerings);
    CU_ASSERT_EQUAL(st1.loop_iterations, 100);
    tfc_value_destroy(nv);
    nv = scalar_value(TFC_INT32, 7); /* another trip count: the same plans */
    v = run1(s, 1, &n, &nv, r[1]);
    tfc_value_destroy(v);
    tfc_session_get_stats(s, &st2);
    CU_ASSERT_EQUAL(st2.lowerings, st0.lowerings);
    tfc_value_destroy(nv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static tfc_status bump(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_assign_add(g, (tfc_tensor *)arg, f32(g, 0.5)); /* the variable after it */
    return TFC_OK;
}

/* A body that updates a variable does so once per iteration, in order. */
static void test_variable_updated_in_body(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    tfc_tensor *acc = tfc_variable(g, "acc", TFC_FLOAT32, tfc_shape_of(0, NULL),
                                   tfc_init_constant(1));
    struct loop_arg la = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    tfc_cflow *cf = tfc_while_new(g, "upd", 2, init, NULL);
    tfc_tensor *in[2], *o[2];
    tfc_cflow_enter(cf, 0, in);
    below_n(g, &la, in, o);
    tfc_cflow_leave(cf, 1, o);
    tfc_cflow_enter(cf, 1, in);
    bump(g, acc, in, o);
    tfc_cflow_leave(cf, 2, o);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_finish(cf, r), TFC_OK);
    tfc_session *s = session_of(g);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    tfc_value *nv = scalar_value(TFC_INT32, 6), *v = run1(s, 1, &n, &nv, r[0]);
    CU_ASSERT_EQUAL(*(const int32_t *)tfc_value_cdata(v), 6);
    tfc_value_destroy(v);
    CU_ASSERT_FATAL(tfc_session_read_variable(s, acc, &v) == TFC_OK);
    CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(v), 1 + 6 * 0.5f);
    tfc_value_destroy(v);
    tfc_value_destroy(nv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A gradient through a loop is built (tests/test_cflow_grad.c checks them in depth): the
 * summing loop adds 0 + 1 + 2 to x, so its gradient is 1 after three iterations. */
static void test_gradient_through_loop(void)
{
    tfc_graph *g = fresh();
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *init[2] = {i32(g, 0), x}, *r[2], *dx = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "w", lt3, count_sum, NULL, 2, init, NULL, r), TFC_OK);
    tfc_tensor *y = tfc_mul(g, r[1], r[1]);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &y, NULL, 1, &x, &dx), TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *xv = scalar_value(TFC_FLOAT32, 0.5), *v = run1(s, 1, &x, &xv, dx);
    CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(v), 2 * (0.5f + 3));
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loop_iterations, 6); /* three forward, three backward */
    tfc_value_destroy(v);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static tfc_status pass_on3(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_mul(g, v[1], v[1]);
    out[2] = tfc_mul(g, v[2], v[2]);
    return TFC_OK;
}

/* A segment that fetches several folded constants (here two fills that a loop receives and,
 * running no iteration, returns) hands each its own handle: they once shared the first's. */
static void test_folded_constants_fetched(void)
{
    tfc_graph *g = fresh();
    int64_t d58[2] = {5, 8}, d3 = 3;
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[3] = {i32(g, 0), tfc_fill(g, tfc_shape_of(2, d58), TFC_FLOAT64, 1.5),
                           tfc_fill(g, tfc_shape_of(1, &d3), TFC_FLOAT64, -2)}, *r[3];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "keep", below_n, pass_on3, &a, 3, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *nv = scalar_value(TFC_INT32, 0), *out[2];
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &n, &nv, 2, r + 1, out, 0, NULL) == TFC_OK);
    const double *big = tfc_value_cdata(out[0]), *small = tfc_value_cdata(out[1]);
    for (int i = 0; i < 40; i++) CU_ASSERT_EQUAL(big[i], 1.5);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(small[i], -2);
    tfc_value_destroy(out[0]);
    tfc_value_destroy(out[1]);
    tfc_value_destroy(nv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* With profiling on, a control-flow run reports every task of every segment as one run: the
 * cond's compare once per test, the body's tasks once per iteration, each on a worker. The
 * loop is a counter: TFC_WHILE_COUNT=0 makes it test its predicate (tests/test_cflow_count.c
 * checks the report of a count-known loop, which has no compare task). */
static void test_profiled_run(void)
{
    CU_ASSERT_FATAL(setenv("TFC_WHILE_COUNT", "0", 1) == 0);
    tfc_graph *g = fresh();
    tfc_tensor *n = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL));
    struct loop_arg a = {n};
    tfc_tensor *init[2] = {i32(g, 0), f32(g, 0)}, *r[2];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "loop", below_n, count_sum, &a, 2, init, NULL, r),
                          TFC_OK);
    tfc_session *s = session_of(g);
    CU_ASSERT_EQUAL_FATAL(tfc_session_set_profiling(s, 1), TFC_OK);
    tfc_value *nv = scalar_value(TFC_INT32, 3), *v = run1(s, 1, &n, &nv, r[1]);
    CU_ASSERT_EQUAL(*(const float *)tfc_value_cdata(v), 3.0f);
    tfc_run_summary sm;
    CU_ASSERT_EQUAL_FATAL(tfc_session_last_summary(s, &sm), TFC_OK);
    CU_ASSERT_EQUAL(count_prefix(&sm, "loop/cond/"), 4);
    int body = count_prefix(&sm, "loop/body/");
    CU_ASSERT(body >= 3 && body % 3 == 0);
    CU_ASSERT_EQUAL(sm.n_tasks, 4 + body);
    for (int i = 0; i < sm.n_tasks; i++) {
        CU_ASSERT(sm.tasks[i].worker >= 0);
        CU_ASSERT(sm.tasks[i].end_us >= sm.tasks[i].start_us);
    }
    unsetenv("TFC_WHILE_COUNT");
    tfc_value_destroy(v);
    tfc_value_destroy(nv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("control_flow", test_ctx_open, test_ctx_close);
    TEST_ADD(test_cond_both_ways);
    TEST_ADD(test_while_count_sum);
    TEST_ADD(test_while_shape_relaxed);
    TEST_ADD(test_while_maximum_iterations);
    TEST_ADD(test_while_capture_and_variable);
    TEST_ADD(test_nested_loops);
    TEST_ADD(test_cond_inside_loop);
    TEST_ADD(test_loop_inside_cond);
    TEST_ADD(test_unrolled_bit_for_bit);
    TEST_ADD(test_build_errors);
    TEST_ADD(test_region_and_cond_errors);
    TEST_ADD(test_fetch_inside_body);
    TEST_ADD(test_loop_variable_passed_on);
    TEST_ADD(test_segments_planned_once);
    TEST_ADD(test_variable_updated_in_body);
    TEST_ADD(test_concurrent_loops);
    TEST_ADD(test_async_runs);
    TEST_ADD(test_kernel_error_in_body);
    TEST_ADD(test_save_and_load);
    TEST_ADD(test_gradient_through_loop);
    TEST_ADD(test_folded_constants_fetched);
    TEST_ADD(test_profiled_run);
    return test_main();
}
