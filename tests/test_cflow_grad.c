/* test_cflow_grad.c: gradients through cond and while_loop (issue 13, item 3), against central
 * finite differences in float64 and against the same computation unrolled into a static graph
 * (bit for bit: the program runs on one CPU worker): cond both ways, a recurrent loop with a
 * captured weight, a variable and a sequence sliced by the loop counter, maximum_iterations,
 * an LSTM-style cell, a loop that runs no iteration, nested loops, cond inside a loop and a
 * loop inside cond, second derivatives through cond and through while_loop (pure and mixed;
 * also a loop in a loop, a cond inside a loop and a loop inside cond; against finite
 * differences and the unrolled graph's), training with tfc_minimize (also after a round trip
 * through a model store), stacks kept only when a run reaches the gradient, and the errors
 * that remain (a body that updates a variable, third order, too many values to carry).
 *
 * TFC_TEST_WHERE=opencl pins every op task that has an OpenCL kernel for its kind and dtypes to
 * StarPU's OpenCL worker (PoCL in CI; exits 77 without one), in the loops' and branches'
 * segments as in the static graphs: each op runs on the same device in the loop and in its
 * unrolled twin, so the comparisons stay bit for bit. TFC_TEST_WHERE=alternate pins every
 * other such task of a plan to the CPU instead: the loop's segments and the unrolled graph are
 * separate plans, so one op may run on PoCL in one and on the CPU in the other, and PoCL's
 * float32 tanh, exp and sums round differently from the CPU's (a few ulp per op); there the
 * twins must agree within ALT_RTOL relative: measured, they differ by up to about 1e-7
 * relative (a few ulp of float32) in the gradients of T_STEPS steps and in 6 training steps'
 * losses; ALT_RTOL leaves a margin of 100, and a wrong gradient is far above it. */
#include <starpu.h>
#include <unistd.h>
#include "testutil.h"
#include "../sched/testing.h"

#define ALT_RTOL 1e-5

static int g_where; /* TFC_TEST_WHERE: 0 CPU only, 1 opencl, 2 alternate */

/* The loop's floats equal its twin's: bit for bit, or under alternate within ALT_RTOL of the
 * larger of scale and the twin's magnitude (scale: the terms a result sums, where they cancel). */
static int same_floats_at(const void *loop, const void *twin, size_t n, double scale,
                          const char *what)
{
    const float *a = loop, *b = twin;
    for (size_t i = 0; i < n; i++) {
        int same = g_where == 2 ? fabs((double)a[i] - b[i]) <= ALT_RTOL * fmax(scale, fabs(b[i]))
                                : memcmp(&a[i], &b[i], sizeof(float)) == 0;
        if (!same) {
            fprintf(stderr, "%s: element %zu is %.9g, its twin's %.9g (%s)\n", what, i, a[i],
                    b[i], g_where == 2 ? "beyond ALT_RTOL" : "not bit for bit");
            return 0;
        }
    }
    return 1;
}

static int same_floats(const void *loop, const void *twin, size_t n, const char *what)
{
    return same_floats_at(loop, twin, n, 1, what);
}

#define T_STEPS 4

static tfc_tensor *i32(tfc_graph *g, double x) { return tfc_scalar(g, TFC_INT32, x); }

static tfc_session *session_of(tfc_graph *g)
{
    tfc_session *s = NULL;
    if (tfc_graph_status(g)) fprintf(stderr, "graph: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    if (g_where) tfc_session_set_where(s, STARPU_OPENCL);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    return s;
}

static tfc_value *scalar_value(enum tfc_dtype dt, double x)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_scalar(dt, x, &v) == TFC_OK);
    return v;
}

/* ---- finite differences ---------------------------------------------------------------- */

/* One float64 input of a check: a placeholder fed from data, or a variable written from it. */
struct input {
    tfc_tensor *t;
    int is_var;
    int rank;
    int64_t dims[3];
    double data[48];
};

static int64_t numel(const struct input *in)
{
    int64_t n = 1;
    for (int d = 0; d < in->rank; d++) n *= in->dims[d];
    return n;
}

static tfc_value *value_of(const struct input *in)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(in->rank, in->dims), in->data,
                                        &v) == TFC_OK);
    return v;
}

/* Runs s fetching n_fetch tensors, with the inputs' data (plus one extra feed when ef). */
static void run_with(tfc_session *s, struct input *in, int n_in, tfc_tensor *ef, tfc_value *efv,
                     int n_fetch, tfc_tensor **fetch, tfc_value **out)
{
    tfc_tensor *ft[8];
    tfc_value *fv[8];
    int nf = 0;
    for (int i = 0; i < n_in; i++) {
        tfc_value *v = value_of(&in[i]);
        if (in[i].is_var) {
            CU_ASSERT_FATAL(tfc_session_write_variable(s, in[i].t, v) == TFC_OK);
            tfc_value_destroy(v);
        } else {
            ft[nf] = in[i].t;
            fv[nf++] = v;
        }
    }
    if (ef) {
        ft[nf] = ef;
        fv[nf++] = efv;
    }
    tfc_status st = tfc_session_run(s, nf, ft, fv, n_fetch, fetch, out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    CU_ASSERT_FATAL(st == TFC_OK);
    for (int i = 0; i < nf - (ef != NULL); i++) tfc_value_destroy(fv[i]);
}

/* The gradients of the scalar loss with respect to every input, built by tfc_gradients, against
 * central differences of the loss (float64, step 1e-6). */
static void check_fd(tfc_graph *g, tfc_tensor *loss, struct input *in, int n_in, tfc_tensor *ef,
                     tfc_value *efv)
{
    tfc_tensor *xs[8], *dx[8], *fetch[9];
    for (int i = 0; i < n_in; i++) xs[i] = in[i].t;
    if (tfc_gradients(g, 1, &loss, NULL, n_in, xs, dx))
        fprintf(stderr, "gradients: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *out[9];
    fetch[0] = loss;
    for (int i = 0; i < n_in; i++) fetch[1 + i] = dx[i];
    run_with(s, in, n_in, ef, efv, 1 + n_in, fetch, out);
    const double h = 1e-6;
    int bad = 0;
    for (int i = 0; i < n_in; i++) {
        const double *d = tfc_value_cdata(out[1 + i]);
        /* on the OpenCL worker every run costs more: there, up to 8 elements spread over
         * each input (every element on the CPU) */
        int64_t n = numel(&in[i]), stride = g_where && n > 8 ? (n + 7) / 8 : 1;
        for (int64_t e = 0; e < n; e += stride) {
            double keep = in[i].data[e], lp, lm;
            tfc_value *lv;
            in[i].data[e] = keep + h;
            run_with(s, in, n_in, ef, efv, 1, &loss, &lv);
            lp = *(const double *)tfc_value_cdata(lv);
            tfc_value_destroy(lv);
            in[i].data[e] = keep - h;
            run_with(s, in, n_in, ef, efv, 1, &loss, &lv);
            lm = *(const double *)tfc_value_cdata(lv);
            tfc_value_destroy(lv);
            in[i].data[e] = keep;
            double fd = (lp - lm) / (2 * h);
            if (fabs(fd - d[e]) > 1e-6 * fmax(1, fabs(fd))) {
                if (bad++ < 5)
                    fprintf(stderr, "input %d ('%s') element %lld: gradient %.12g, finite "
                            "difference %.12g\n", i, tfc_tensor_name(in[i].t), (long long)e,
                            d[e], fd);
            }
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int i = 0; i < 1 + n_in; i++) tfc_value_destroy(out[i]);
    tfc_session_destroy(s);
}

static void fill_input(struct input *in, tfc_tensor *t, int is_var, int rank, const int64_t *dims,
                       double seed)
{
    in->t = t;
    in->is_var = is_var;
    in->rank = rank;
    for (int d = 0; d < rank; d++) in->dims[d] = dims[d];
    for (int64_t e = 0; e < numel(in); e++) in->data[e] = 0.8 * sin(seed + 1.7 * (double)e) + 0.1;
}

/* ---- the computations: one step of each, used by loops and by their unrolled twins -------- */

struct rnn {                 /* h' = tanh(h W + x_i + b); the sequence xseq is captured */
    tfc_tensor *w, *b, *xseq;
    int64_t n;               /* the loop's bound */
};

static tfc_tensor *rnn_step(tfc_graph *g, const struct rnn *a, tfc_tensor *h, tfc_tensor *i)
{
    tfc_tensor *x = tfc_gather(g, a->xseq, i);
    return tfc_tanh(g, tfc_add(g, tfc_add(g, tfc_matmul(g, h, a->w, 0, 0), x), a->b));
}

static tfc_status rnn_cond(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], i32(g, (double)((struct rnn *)arg)->n));
    return TFC_OK;
}

static tfc_status rnn_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = rnn_step(g, arg, v[1], v[0]);
    return TFC_OK;
}

/* The loss sum(h_T^2) of the recurrent loop (loop 1) or of its unrolled graph (loop 0) over
 * steps steps. */
static tfc_tensor *rnn_loss(tfc_graph *g, struct rnn *a, tfc_tensor *h0, int loop, int steps,
                            const tfc_while_opts *opts)
{
    tfc_tensor *h = h0;
    if (loop) {
        tfc_tensor *init[2] = {i32(g, 0), h0}, *r[2];
        if (tfc_while_loop(g, NULL, rnn_cond, rnn_body, a, 2, init, opts, r)) return NULL;
        h = r[1];
    } else {
        for (int i = 0; i < steps; i++) h = rnn_step(g, a, h, i32(g, i));
    }
    return tfc_reduce_sum(g, tfc_mul(g, h, h), 0, NULL, 0);
}

/* ---- cond -------------------------------------------------------------------------------- */

struct two { tfc_tensor *x, *c; };

static tfc_status then_fn(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    struct two *a = arg;
    out[0] = tfc_mul(g, tfc_mul(g, a->x, a->x), a->c);
    return TFC_OK;
}

static tfc_status else_fn(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    struct two *a = arg;
    out[0] = tfc_add(g, tfc_sin(g, a->x), a->c);
    return TFC_OK;
}

static void test_cond_fd(void)
{
    for (int taken = 0; taken < 2; taken++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        int64_t d3 = 3;
        struct input in[2];
        struct two a = {tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(1, &d3)),
                        tfc_placeholder(g, "k", TFC_FLOAT64, tfc_shape_of(1, &d3))};
        tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL)), *y;
        fill_input(&in[0], a.x, 0, 1, &d3, 0.3);
        fill_input(&in[1], a.c, 0, 1, &d3, 1.1);
        CU_ASSERT_EQUAL_FATAL(tfc_cond(g, "c", p, then_fn, else_fn, &a, 1, &y), TFC_OK);
        tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0);
        tfc_value *pv = scalar_value(TFC_BOOL, taken);
        check_fd(g, loss, in, 2, p, pv);
        tfc_value_destroy(pv);
        tfc_graph_destroy(g);
    }
}

/* The cond's gradients equal those of the branch built as a plain graph, bit for bit. */
static void test_cond_static_twin(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d5 = 5;
    struct two a = {tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d5)),
                    tfc_placeholder(g, "k", TFC_FLOAT32, tfc_shape_of(1, &d5))};
    tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL)), *y, *tw[2];
    CU_ASSERT_EQUAL_FATAL(tfc_cond(g, "c", p, then_fn, else_fn, &a, 1, &y), TFC_OK);
    then_fn(g, &a, NULL, &tw[0]);
    else_fn(g, &a, NULL, &tw[1]);
    tfc_tensor *xs[2] = {a.x, a.c}, *d[6];
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &loss, NULL, 2, xs, d), TFC_OK);
    for (int k = 0; k < 2; k++) {
        tfc_tensor *l = tfc_reduce_sum(g, tfc_mul(g, tw[k], tw[k]), 0, NULL, 0);
        CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &l, NULL, 2, xs, d + 2 + 2 * k), TFC_OK);
    }
    tfc_session *s = session_of(g);
    float xv[5], cv[5];
    for (int i = 0; i < 5; i++) {
        xv[i] = (float)sin(i * 0.9) * 1.3f;
        cv[i] = (float)cos(i * 0.4) + 0.2f;
    }
    tfc_value *fv[3] = {test_f32(1, &d5, xv), test_f32(1, &d5, cv), NULL}, *out[6];
    tfc_tensor *ft[3] = {a.x, a.c, p};
    for (int taken = 0; taken < 2; taken++) {
        fv[2] = scalar_value(TFC_BOOL, taken);
        CU_ASSERT_FATAL(tfc_session_run(s, 3, ft, fv, 6, d, out, 0, NULL) == TFC_OK);
        int twin = taken ? 2 : 4;
        for (int k = 0; k < 2; k++)
            CU_ASSERT(same_floats(tfc_value_cdata(out[k]), tfc_value_cdata(out[twin + k]), 5,
                                  "cond gradient vs the static branch's"));
        for (int k = 0; k < 6; k++) tfc_value_destroy(out[k]);
        tfc_value_destroy(fv[2]);
    }
    tfc_value_destroy(fv[0]);
    tfc_value_destroy(fv[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* Gradients of gradients through a cond (its gradient is a cond of ordinary gradient ops):
 * then: y = x*x*k, so d(sum y)/dx = 2xk and d(sum 2xk)/dx = 2k; else: y = sin(x) + k, so
 * the second derivative is -sin(x). */
static void test_cond_second_order(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d3 = 3;
    struct two a = {tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(1, &d3)),
                    tfc_placeholder(g, "k", TFC_FLOAT64, tfc_shape_of(1, &d3))};
    tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL)), *y, *d1, *d2;
    CU_ASSERT_EQUAL_FATAL(tfc_cond(g, "c", p, then_fn, else_fn, &a, 1, &y), TFC_OK);
    tfc_tensor *loss = tfc_reduce_sum(g, y, 0, NULL, 0);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &loss, NULL, 1, &a.x, &d1), TFC_OK);
    tfc_tensor *s1 = tfc_reduce_sum(g, d1, 0, NULL, 0);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &s1, NULL, 1, &a.x, &d2), TFC_OK);
    tfc_session *s = session_of(g);
    double xv[3] = {0.3, -1.2, 2.0}, kv[3] = {1.5, 0.25, -3};
    tfc_value *fv[3], *out;
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &d3), xv, &fv[0]) == 0);
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &d3), kv, &fv[1]) == 0);
    tfc_tensor *ft[3] = {a.x, a.c, p};
    for (int taken = 0; taken < 2; taken++) {
        fv[2] = scalar_value(TFC_BOOL, taken);
        CU_ASSERT_FATAL(tfc_session_run(s, 3, ft, fv, 1, &d2, &out, 0, NULL) == TFC_OK);
        const double *r = tfc_value_cdata(out);
        for (int i = 0; i < 3; i++)
            CU_ASSERT_DOUBLE_EQUAL(r[i], taken ? 2 * kv[i] : -sin(xv[i]), 1e-12);
        tfc_value_destroy(out);
        tfc_value_destroy(fv[2]);
    }
    tfc_value_destroy(fv[0]);
    tfc_value_destroy(fv[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- while_loop: finite differences ------------------------------------------------------ */

/* h0 [2,3] fed, W [3,3] and the sequence [4,2,3] captured placeholders, b [3] a variable. */
static void build_rnn_inputs(tfc_graph *g, struct rnn *a, tfc_tensor **h0, struct input *in)
{
    int64_t hd[2] = {2, 3}, wd[2] = {3, 3}, sd[3] = {T_STEPS, 2, 3}, bd = 3;
    *h0 = tfc_placeholder(g, "h0", TFC_FLOAT64, tfc_shape_of(2, hd));
    a->w = tfc_placeholder(g, "w", TFC_FLOAT64, tfc_shape_of(2, wd));
    a->xseq = tfc_placeholder(g, "xseq", TFC_FLOAT64, tfc_shape_of(3, sd));
    a->b = tfc_variable(g, "b", TFC_FLOAT64, tfc_shape_of(1, &bd), tfc_init_uniform(-1, 1, 3));
    fill_input(&in[0], *h0, 0, 2, hd, 0.2);
    fill_input(&in[1], a->w, 0, 2, wd, 2.0);
    fill_input(&in[2], a->xseq, 0, 3, sd, 0.7);
    fill_input(&in[3], a->b, 1, 1, &bd, 1.9);
}

static void test_while_fd(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    struct rnn a = {.n = T_STEPS};
    struct input in[4];
    tfc_tensor *h0;
    build_rnn_inputs(g, &a, &h0, in);
    tfc_tensor *loss = rnn_loss(g, &a, h0, 1, 0, NULL);
    check_fd(g, loss, in, 4, NULL, NULL);
    tfc_graph_destroy(g);
}

/* maximum_iterations stops the loop (and its gradient) after 2 of the 4 steps its test allows. */
static void test_while_max_iter_fd(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    struct rnn a = {.n = T_STEPS};
    struct input in[4];
    tfc_tensor *h0;
    build_rnn_inputs(g, &a, &h0, in);
    tfc_while_opts opts = {.maximum_iterations = 2};
    tfc_tensor *loss = rnn_loss(g, &a, h0, 1, 0, &opts);
    check_fd(g, loss, in, 4, NULL, NULL);
    tfc_graph_destroy(g);
}

/* An LSTM cell as the recurrent layers build it: gates from one matmul of concat(x_i, h) with
 * a captured weight, sliced apart; sigmoid, tanh and mul; two float loop variables (h, c) and a
 * variable bias; the loop runs to a bound fed at run time. */
struct lstm {
    tfc_tensor *w, *b, *xseq, *n;
};

static tfc_tensor *gate(tfc_graph *g, tfc_tensor *z, int k)
{
    int64_t begin[2] = {0, 2 * k}, size[2] = {-1, 2};
    return tfc_slice(g, z, begin, size);
}

static tfc_status lstm_cond(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], ((struct lstm *)arg)->n);
    return TFC_OK;
}

static tfc_status lstm_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct lstm *a = arg;
    tfc_tensor *xh[2] = {tfc_gather(g, a->xseq, v[0]), v[1]};
    tfc_tensor *z = tfc_add(g, tfc_matmul(g, tfc_concat(g, 2, xh, 1), a->w, 0, 0), a->b);
    tfc_tensor *i = tfc_sigmoid(g, gate(g, z, 0)), *f = tfc_sigmoid(g, gate(g, z, 1));
    tfc_tensor *o = tfc_sigmoid(g, gate(g, z, 2)), *c = tfc_tanh(g, gate(g, z, 3));
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[2] = tfc_add(g, tfc_mul(g, f, v[2]), tfc_mul(g, i, c));
    out[1] = tfc_mul(g, o, tfc_tanh(g, out[2]));
    return TFC_OK;
}

/* second: the loss is s = sum(dL/dW^2) + sum(dL/db^2) + sum(dL/dc0 * h0) instead of L, so
 * its gradients are second derivatives through the loop (its two float loop variables). */
static void check_lstm(int steps, int second)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t hd[2] = {2, 2}, wd[2] = {5, 8}, sd[3] = {3, 2, 3}, bd = 8;
    struct input in[5];
    struct lstm a = {tfc_placeholder(g, "w", TFC_FLOAT64, tfc_shape_of(2, wd)),
                     tfc_variable(g, "b", TFC_FLOAT64, tfc_shape_of(1, &bd),
                                  tfc_init_uniform(-1, 1, 4)),
                     tfc_placeholder(g, "xseq", TFC_FLOAT64, tfc_shape_of(3, sd)),
                     tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL))};
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT64, tfc_shape_of(2, hd));
    tfc_tensor *c0 = tfc_placeholder(g, "c0", TFC_FLOAT64, tfc_shape_of(2, hd));
    fill_input(&in[0], h0, 0, 2, hd, 0.1);
    fill_input(&in[1], c0, 0, 2, hd, 0.9);
    fill_input(&in[2], a.w, 0, 2, wd, 1.4);
    fill_input(&in[3], a.xseq, 0, 3, sd, 2.2);
    fill_input(&in[4], a.b, 1, 1, &bd, 0.6);
    tfc_tensor *init[3] = {i32(g, 0), h0, c0}, *r[3];
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "lstm", lstm_cond, lstm_body, &a, 3, init, NULL, r),
                          TFC_OK);
    tfc_tensor *loss = tfc_add(g, tfc_reduce_sum(g, tfc_mul(g, r[1], r[1]), 0, NULL, 0),
                               tfc_reduce_sum(g, tfc_sin(g, r[2]), 0, NULL, 0));
    if (second) {
        tfc_tensor *xs[3] = {a.w, a.b, c0}, *d[3];
        CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &loss, NULL, 3, xs, d), TFC_OK);
        loss = tfc_add_n(g, 3, (tfc_tensor *[]){
                                   tfc_reduce_sum(g, tfc_mul(g, d[0], d[0]), 0, NULL, 0),
                                   tfc_reduce_sum(g, tfc_mul(g, d[1], d[1]), 0, NULL, 0),
                                   tfc_reduce_sum(g, tfc_mul(g, d[2], h0), 0, NULL, 0)});
    }
    tfc_value *nv = scalar_value(TFC_INT32, steps);
    check_fd(g, loss, in, 5, a.n, nv);
    tfc_value_destroy(nv);
    tfc_graph_destroy(g);
}

static void test_lstm_fd(void)
{
    check_lstm(3, 0);
}

/* A loop that runs no iteration passes the gradients of its outputs to its inputs (and the
 * captures and variables get zeros). */
static void test_no_iteration_fd(void)
{
    check_lstm(0, 0);
}

/* ---- while_loop: the unrolled twin, bit for bit ------------------------------------------ */

/* Loop and unrolled graph in one graph over the same inputs (float32); steps the unrolled
 * length, opts the loop's options. */
static void check_unrolled(int steps, const tfc_while_opts *opts)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t hd[2] = {2, 3}, wd[2] = {3, 3}, sd[3] = {T_STEPS, 2, 3}, bd = 3;
    struct rnn a = {.n = T_STEPS};
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(2, hd));
    a.w = tfc_placeholder(g, "w", TFC_FLOAT32, tfc_shape_of(2, wd));
    a.xseq = tfc_placeholder(g, "xseq", TFC_FLOAT32, tfc_shape_of(3, sd));
    a.b = tfc_variable(g, "b", TFC_FLOAT32, tfc_shape_of(1, &bd), tfc_init_uniform(-1, 1, 3));
    tfc_tensor *xs[4] = {h0, a.w, a.xseq, a.b}, *d[8], *l[2];
    l[0] = rnn_loss(g, &a, h0, 1, 0, opts);
    l[1] = rnn_loss(g, &a, h0, 0, steps, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &l[0], NULL, 4, xs, d), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &l[1], NULL, 4, xs, d + 4), TFC_OK);
    tfc_session *s = session_of(g);
    float hv[6], wv[9], sv[T_STEPS * 6];
    for (int i = 0; i < 6; i++) hv[i] = (float)sin(i * 1.3);
    for (int i = 0; i < 9; i++) wv[i] = (float)cos(i * 0.77) * 0.6f;
    for (int i = 0; i < T_STEPS * 6; i++) sv[i] = (float)sin(i * 0.31 + 0.5);
    tfc_value *fv[3] = {test_f32(2, hd, hv), test_f32(2, wd, wv), test_f32(3, sd, sv)}, *out[10];
    tfc_tensor *fetch[10] = {l[0], l[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]};
    CU_ASSERT_FATAL(tfc_session_run(s, 3, xs, fv, 10, fetch, out, 0, NULL) == TFC_OK);
    CU_ASSERT(same_floats(tfc_value_cdata(out[0]), tfc_value_cdata(out[1]), 1,
                          "loss vs the unrolled graph's"));
    const size_t sizes[4] = {6, 9, T_STEPS * 6, 3};
    for (int k = 0; k < 4; k++) {
        char what[64];
        snprintf(what, sizeof what, "gradient %d vs the unrolled graph's", k);
        CU_ASSERT(same_floats(tfc_value_cdata(out[2 + k]), tfc_value_cdata(out[6 + k]),
                              sizes[k], what));
    }
    const float *db = tfc_value_cdata(out[5]);
    CU_ASSERT(db[0] != 0 && db[1] != 0 && db[2] != 0);
    for (int k = 0; k < 10; k++) tfc_value_destroy(out[k]);
    for (int k = 0; k < 3; k++) tfc_value_destroy(fv[k]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_while_unrolled(void)
{
    check_unrolled(T_STEPS, NULL);
}

static void test_while_max_iter_unrolled(void)
{
    tfc_while_opts opts = {.maximum_iterations = 3};
    check_unrolled(3, &opts);
}

/* A run that does not reach the gradient keeps no stack (the loop recycles its handles as it
 * goes); a run that does keeps one entry per iteration. */
static void test_stack_only_when_needed(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    struct rnn a = {.n = T_STEPS};
    struct input in[4];
    tfc_tensor *h0, *dw;
    build_rnn_inputs(g, &a, &h0, in);
    tfc_tensor *loss = rnn_loss(g, &a, h0, 1, 0, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &loss, NULL, 1, &a.w, &dw), TFC_OK);
    tfc_session *s = session_of(g);
    tfc_value *out[2];
    tfc_session_stats st;
    run_with(s, in, 4, NULL, NULL, 1, &loss, out);
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loop_iterations_kept, 0);
    CU_ASSERT_EQUAL(st.loop_iterations, T_STEPS);
    tfc_value_destroy(out[0]);
    tfc_tensor *both[2] = {loss, dw};
    run_with(s, in, 4, NULL, NULL, 2, both, out);
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.loop_iterations_kept, T_STEPS);
    CU_ASSERT_EQUAL(st.loop_iterations, 3 * T_STEPS); /* forward twice, backward once */
    tfc_value_destroy(out[0]);
    tfc_value_destroy(out[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- training ---------------------------------------------------------------------------- */

/* The training tests' inputs: returns the placeholder h0 [2,3]; into a, the variables w [3,3]
 * and b [3] (uniform, seeds 5 and 6) and the placeholder xseq [T_STEPS,2,3]. */
static tfc_tensor *training_inputs(tfc_graph *g, struct rnn *a)
{
    int64_t hd[2] = {2, 3}, wd[2] = {3, 3}, sd[3] = {T_STEPS, 2, 3}, bd = 3;
    *a = (struct rnn){.n = T_STEPS};
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(2, hd));
    a->w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(2, wd), tfc_init_uniform(-1, 1, 5));
    a->b = tfc_variable(g, "b", TFC_FLOAT32, tfc_shape_of(1, &bd), tfc_init_uniform(-1, 1, 6));
    a->xseq = tfc_placeholder(g, "xseq", TFC_FLOAT32, tfc_shape_of(3, sd));
    return h0;
}

/* n training steps of a new session on g, the same feeds each (h0, xseq): each loss into
 * losses. */
static void train_steps(tfc_graph *g, tfc_tensor *h0, tfc_tensor *xseq, tfc_tensor *loss,
                        tfc_tensor *step, int n, float *losses)
{
    int64_t hd[2] = {2, 3}, sd[3] = {T_STEPS, 2, 3};
    tfc_session *s = session_of(g);
    float hv[6], sv[T_STEPS * 6];
    for (int i = 0; i < 6; i++) hv[i] = (float)sin(i * 1.3);
    for (int i = 0; i < T_STEPS * 6; i++) sv[i] = (float)sin(i * 0.31 + 0.5);
    tfc_value *fv[2] = {test_f32(2, hd, hv), test_f32(3, sd, sv)}, *lv;
    tfc_tensor *ft[2] = {h0, xseq};
    for (int it = 0; it < n; it++) {
        tfc_status st = tfc_session_run(s, 2, ft, fv, 1, &loss, &lv, 1, &step);
        if (st) fprintf(stderr, "train: %s\n", tfc_session_errmsg(s));
        CU_ASSERT_FATAL(st == TFC_OK);
        losses[it] = *(const float *)tfc_value_cdata(lv);
        tfc_value_destroy(lv);
    }
    tfc_value_destroy(fv[0]);
    tfc_value_destroy(fv[1]);
    tfc_session_destroy(s);
}

/* tfc_minimize on the loop's loss (without a variable list) and on the unrolled graph's (two
 * graphs, same initial values): the losses fall and agree bit for bit, step after step. */
static void test_minimize_trains(void)
{
    float loss_of[2][6];
    for (int loop = 0; loop < 2; loop++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        struct rnn a;
        tfc_tensor *h0 = training_inputs(g, &a);
        tfc_tensor *loss = rnn_loss(g, &a, h0, loop, T_STEPS, NULL), *vars[2] = {a.w, a.b};
        tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_SGD, 0.05);
        /* the loop's graph finds w and b itself (read only inside the body); the unrolled
         * graph gets them listed: the same variables in the same order */
        tfc_tensor *step = tfc_minimize(g, loss, loop ? 0 : 2, loop ? NULL : vars, &opt, NULL);
        CU_ASSERT_FATAL(step != NULL);
        train_steps(g, h0, a.xseq, loss, step, 6, loss_of[loop]);
        tfc_graph_destroy(g);
    }
    CU_ASSERT(loss_of[1][5] < 0.8 * loss_of[1][0]);
    CU_ASSERT(same_floats(loss_of[0], loss_of[1], 6, "unrolled graph's losses vs the loop's"));
}

/* A training graph whose loss is a loop, saved to a model store and loaded back: the loaded
 * graph (its gradient loop included) trains exactly as the original, step by step. */
static void test_stored_training(void)
{
    float loss_of[2][4];
    char path[] = "/tmp/tfc-cgrad-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    unlink(path);
    for (int loaded = 0; loaded < 2; loaded++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        struct rnn a;
        tfc_tensor *h0 = training_inputs(g, &a);
        tfc_tensor *loss = tfc_identity(g, rnn_loss(g, &a, h0, 1, T_STEPS, NULL));
        tfc_tensor *vars[2] = {a.w, a.b};
        tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_MOMENTUM, 0.05);
        tfc_tensor *step = tfc_minimize(g, loss, 2, vars, &opt, NULL);
        CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
        char loss_name[256], step_name[256];
        snprintf(loss_name, sizeof loss_name, "%s", tfc_tensor_name(loss));
        snprintf(step_name, sizeof step_name, "%s", tfc_tensor_name(step));
        if (loaded) { /* the same graph, through the store */
            tfc_store *st = NULL;
            tfc_graph *k = NULL;
            CU_ASSERT_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st) == TFC_OK);
            if (tfc_store_save_graph(st, g)) fprintf(stderr, "save: %s\n", tfc_store_errmsg(st));
            if (tfc_store_load_graph(st, &k)) fprintf(stderr, "load: %s\n", tfc_store_errmsg(st));
            CU_ASSERT_PTR_NOT_NULL_FATAL(k);
            tfc_store_close(st);
            unlink(path);
            tfc_graph_destroy(g);
            g = k;
            h0 = tfc_graph_find(g, "h0");
            a.xseq = tfc_graph_find(g, "xseq");
            loss = tfc_graph_find(g, loss_name);
            step = tfc_graph_find(g, step_name);
            CU_ASSERT_FATAL(h0 && a.xseq && loss && step);
        }
        train_steps(g, h0, a.xseq, loss, step, 4, loss_of[loaded]);
        tfc_graph_destroy(g);
    }
    CU_ASSERT(loss_of[1][3] < loss_of[1][0]);
    CU_ASSERT(same_floats(loss_of[1], loss_of[0], 4, "loaded graph's losses vs the original's"));
}

/* ---- nesting ------------------------------------------------------------------------------ */

struct nest { tfc_tensor *w; };

static tfc_status lt2(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], i32(g, 2));
    return TFC_OK;
}

static tfc_status inner_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_tanh(g, tfc_mul(g, v[1], ((struct nest *)arg)->w));
    return TFC_OK;
}

static tfc_status outer_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    tfc_tensor *init[2] = {i32(g, 0), tfc_sin(g, v[1])}, *r[2];
    if (tfc_while_loop(g, "inner", lt2, inner_body, arg, 2, init, NULL, r)) return TFC_ERR_SHAPE;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_add(g, r[1], v[1]);
    return TFC_OK;
}

/* the cond reads its own loop variable through a capture of the body's placeholder */
struct cond_in_loop { tfc_tensor *w, *h, *i; };

static tfc_status cil_then(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    struct cond_in_loop *a = arg;
    out[0] = tfc_mul(g, a->h, a->w);
    return TFC_OK;
}

static tfc_status cil_else(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    struct cond_in_loop *a = arg;
    out[0] = tfc_sin(g, tfc_add(g, a->h, a->w));
    return TFC_OK;
}

static tfc_status cil_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct cond_in_loop a = {((struct nest *)arg)->w, v[1], v[0]};
    tfc_tensor *y;
    if (tfc_cond(g, "branch", tfc_less(g, v[0], i32(g, 1)), cil_then, cil_else, &a, 1, &y))
        return TFC_ERR_SHAPE;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = y;
    return TFC_OK;
}

static tfc_status lil_then(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    struct cond_in_loop *a = arg;
    struct nest n = {a->w};
    tfc_tensor *init[2] = {i32(g, 0), a->h}, *r[2];
    if (tfc_while_loop(g, "loop", lt2, inner_body, &n, 2, init, NULL, r)) return TFC_ERR_SHAPE;
    out[0] = r[1];
    return TFC_OK;
}

static tfc_status lil_else(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)in;
    struct cond_in_loop *a = arg;
    out[0] = tfc_mul(g, a->h, a->h);
    return TFC_OK;
}

/* kind 0: nested loops; 1: cond inside a loop; 2: a loop inside cond (both branches). */
/* kind 0: a loop in a loop; 1: a cond in a loop; 2: a loop in a cond on the placeholder *p */
static tfc_tensor *nested_y(tfc_graph *g, int kind, struct nest *a, tfc_tensor *h0,
                            tfc_tensor **p)
{
    tfc_tensor *init[2] = {i32(g, 0), h0}, *r[2] = {NULL, NULL}, *y = NULL;
    if (kind < 2) {
        tfc_while_loop(g, "outer", lt2, kind == 0 ? outer_body : cil_body, a, 2, init, NULL, r);
        return r[1];
    }
    struct cond_in_loop c = {a->w, h0, NULL}; /* read by the branches while tfc_cond builds */
    *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL));
    tfc_cond(g, "c", *p, lil_then, lil_else, &c, 1, &y);
    return y;
}

static void check_nested(int kind, int taken)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d3 = 3;
    struct input in[2];
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT64, tfc_shape_of(1, &d3));
    struct nest a = {tfc_placeholder(g, "w", TFC_FLOAT64, tfc_shape_of(1, &d3))};
    fill_input(&in[0], h0, 0, 1, &d3, 0.4);
    fill_input(&in[1], a.w, 0, 1, &d3, 2.5);
    tfc_tensor *p = NULL, *y = nested_y(g, kind, &a, h0, &p);
    tfc_value *pv = kind == 2 ? scalar_value(TFC_BOOL, taken) : NULL;
    if (tfc_graph_status(g)) fprintf(stderr, "graph: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    check_fd(g, tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0), in, 2, p, pv);
    tfc_value_destroy(pv);
    tfc_graph_destroy(g);
}

static void test_nested_loops_fd(void)
{
    check_nested(0, 0);
}

static void test_cond_inside_loop_fd(void)
{
    check_nested(1, 0);
}

static void test_loop_inside_cond_fd(void)
{
    check_nested(2, 1);
    check_nested(2, 0);
}

/* ---- second order: gradients of gradients through while_loop ----------------------------- */

struct poly { tfc_tensor *x; int n; };

static tfc_status poly_cond(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], i32(g, ((struct poly *)arg)->n));
    return TFC_OK;
}

/* y' = y * x + sin(y), x captured */
static tfc_tensor *poly_step(tfc_graph *g, tfc_tensor *x, tfc_tensor *y)
{
    return tfc_add(g, tfc_mul(g, y, x), tfc_sin(g, y));
}

static tfc_status poly_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = poly_step(g, ((struct poly *)arg)->x, v[1]);
    return TFC_OK;
}

/* s = sum(k * dL/dx) + sum(dL/dy0 * dL/dy0) for L = sum(y_n^2), y_n from the loop (loop 1)
 * or its unrolled twin (loop 0): its gradients with respect to x and y0 are second
 * derivatives through the loop, pure (d/dx of dL/dx) and mixed (d/dy0 of dL/dx, d/dx of
 * dL/dy0). */
static tfc_tensor *poly_first_order_opts(tfc_graph *g, tfc_tensor *x, tfc_tensor *y0,
                                         tfc_tensor *k, int loop, int n,
                                         const tfc_while_opts *opts)
{
    struct poly a = {x, n};
    tfc_tensor *y = y0, *d[2], *xs[2] = {x, y0};
    if (loop) {
        tfc_tensor *init[2] = {i32(g, 0), y0}, *r[2];
        if (tfc_while_loop(g, "poly", poly_cond, poly_body, &a, 2, init, opts, r)) return NULL;
        y = r[1];
    } else {
        for (int i = 0; i < n; i++) y = poly_step(g, x, y);
    }
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0);
    if (tfc_gradients(g, 1, &loss, NULL, 2, xs, d)) return NULL;
    return tfc_add(g, tfc_reduce_sum(g, tfc_mul(g, k, d[0]), 0, NULL, 0),
                   tfc_reduce_sum(g, tfc_mul(g, d[1], d[1]), 0, NULL, 0));
}

static tfc_tensor *poly_first_order(tfc_graph *g, tfc_tensor *x, tfc_tensor *y0, tfc_tensor *k,
                                    int loop, int n)
{
    return poly_first_order_opts(g, x, y0, k, loop, n, NULL);
}

/* The second derivatives against central differences of the first-order gradient (float64),
 * for 0, 1 and 3 iterations, and 2 of 3 under maximum_iterations. */
static void test_second_order_fd(void)
{
    const int counts[4] = {0, 1, 3, 3};
    tfc_while_opts two = {.maximum_iterations = 2};
    for (int c = 0; c < 4; c++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        int64_t d3 = 3;
        struct input in[3];
        tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(1, &d3));
        tfc_tensor *y0 = tfc_placeholder(g, "y0", TFC_FLOAT64, tfc_shape_of(1, &d3));
        tfc_tensor *k = tfc_placeholder(g, "k", TFC_FLOAT64, tfc_shape_of(1, &d3));
        fill_input(&in[0], x, 0, 1, &d3, 0.3);
        fill_input(&in[1], y0, 0, 1, &d3, 1.1);
        fill_input(&in[2], k, 0, 1, &d3, 2.0);
        tfc_tensor *s = poly_first_order_opts(g, x, y0, k, 1, counts[c], c == 3 ? &two : NULL);
        if (tfc_graph_status(g)) fprintf(stderr, "graph: %s\n", tfc_graph_errmsg(g));
        CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
        check_fd(g, s, in, 3, NULL, NULL);
        tfc_graph_destroy(g);
    }
}

/* The same second derivatives from the loop and from its unrolled twin, in one graph over the
 * same inputs (float32, one worker): bit for bit. */
static void test_second_order_unrolled(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d3 = 3;
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, &d3));
    tfc_tensor *y0 = tfc_placeholder(g, "y0", TFC_FLOAT32, tfc_shape_of(1, &d3));
    tfc_tensor *k = tfc_placeholder(g, "k", TFC_FLOAT32, tfc_shape_of(1, &d3));
    tfc_tensor *xs[3] = {x, y0, k}, *d[6], *s[2];
    for (int loop = 0; loop < 2; loop++) {
        s[loop] = poly_first_order(g, x, y0, k, loop, T_STEPS);
        CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &s[loop], NULL, 2, xs, d + 2 * loop), TFC_OK);
    }
    tfc_session *ss = session_of(g);
    float xv[3] = {0.9f, -0.4f, 0.6f}, yv[3] = {0.5f, 1.2f, -0.7f}, kv[3] = {1.5f, -2, 0.25f};
    tfc_value *fv[3] = {test_f32(1, &d3, xv), test_f32(1, &d3, yv), test_f32(1, &d3, kv)};
    tfc_value *out[6];
    tfc_tensor *fetch[6] = {s[1], s[0], d[2], d[0], d[3], d[1]};
    CU_ASSERT_FATAL(tfc_session_run(ss, 3, xs, fv, 6, fetch, out, 0, NULL) == TFC_OK);
    CU_ASSERT(same_floats(tfc_value_cdata(out[0]), tfc_value_cdata(out[1]), 1,
                          "first-order value vs the unrolled graph's"));
    /* under alternate: d/dx sums terms as large as d/dy0's elements, which cancel to less */
    const float *dx = tfc_value_cdata(out[2]), *dy = tfc_value_cdata(out[5]);
    double scale = 1;
    for (int i = 0; i < 3; i++) scale = fmax(scale, fmax(fabs(dx[i]), fabs(dy[i])));
    CU_ASSERT(same_floats_at(dx, tfc_value_cdata(out[3]), 3, scale,
                             "d/dx vs the unrolled graph's"));
    CU_ASSERT(same_floats_at(tfc_value_cdata(out[4]), dy, 3, scale,
                             "d/dy0 vs the unrolled graph's"));
    CU_ASSERT(dx[0] != 0 && dx[1] != 0 && dx[2] != 0);
    for (int i = 0; i < 6; i++) tfc_value_destroy(out[i]);
    for (int i = 0; i < 3; i++) tfc_value_destroy(fv[i]);
    tfc_session_destroy(ss);
    tfc_graph_destroy(g);
}

/* ---- what is refused ---------------------------------------------------------------------- */

static tfc_status assign_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct nest *a = arg;
    tfc_tensor *up = tfc_assign_add(g, a->w, v[1]);
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = tfc_mul(g, v[1], up);
    return TFC_OK;
}

struct many { tfc_tensor *v[65]; };

static tfc_status add_all(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct many *a = arg;
    out[0] = tfc_add(g, v[0], i32(g, 1));
    out[1] = v[1];
    for (int i = 0; i < 65; i++) out[1] = tfc_add(g, out[1], a->v[i]);
    return TFC_OK;
}

/* The first-order gradients of sum(y^2) with respect to w and h0, for y from nested_y (kind
 * 0..2) or (kind 3) from one loop of inner_body; *s (NULL on failure) a scalar of both whose
 * gradients are second derivatives through the loops. */
static tfc_tensor *nested_first_order(tfc_graph *g, int kind, struct nest *a, tfc_tensor *h0,
                                      tfc_tensor **p)
{
    tfc_tensor *y, *init[2] = {i32(g, 0), h0}, *r[2], *d[2], *xs[2] = {a->w, h0};
    if (kind < 3) {
        y = nested_y(g, kind, a, h0, p);
    } else {
        tfc_while_loop(g, "lp", lt2, inner_body, a, 2, init, NULL, r);
        y = r[1];
    }
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0);
    if (tfc_gradients(g, 1, &loss, NULL, 2, xs, d)) return NULL;
    return tfc_add(g, tfc_reduce_sum(g, tfc_mul(g, d[0], d[0]), 0, NULL, 0),
                   tfc_reduce_sum(g, tfc_mul(g, d[1], h0), 0, NULL, 0));
}

/* A graph with second derivatives through a loop, saved in a model store and loaded: the
 * loaded graph gives the same bits (its gradient loops of gradient loops rebuilt from their
 * markers), and a run of it keeps the stacks of the loop, of its gradient loop and of that
 * one's gradient loop (3 per iteration) and runs 4 loops. */
static void test_second_order_stored(void)
{
    char path[] = "/tmp/tfc-cgrad2-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    unlink(path);
    double res[2][6];
    for (int loaded = 0; loaded < 2; loaded++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        int64_t d3 = 3;
        tfc_tensor *xs[3] = {tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(1, &d3)),
                             tfc_placeholder(g, "y0", TFC_FLOAT64, tfc_shape_of(1, &d3)),
                             tfc_placeholder(g, "k", TFC_FLOAT64, tfc_shape_of(1, &d3))}, *d[2];
        tfc_tensor *s = poly_first_order(g, xs[0], xs[1], xs[2], 1, T_STEPS);
        CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &s, NULL, 2, xs, d), TFC_OK);
        char names[2][256];
        for (int i = 0; i < 2; i++) snprintf(names[i], sizeof names[i], "%s", tfc_tensor_name(d[i]));
        if (loaded) {
            tfc_store *st = NULL;
            tfc_graph *k = NULL;
            CU_ASSERT_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st) == TFC_OK);
            if (tfc_store_save_graph(st, g)) fprintf(stderr, "save: %s\n", tfc_store_errmsg(st));
            if (tfc_store_load_graph(st, &k)) fprintf(stderr, "load: %s\n", tfc_store_errmsg(st));
            CU_ASSERT_PTR_NOT_NULL_FATAL(k);
            tfc_store_close(st);
            unlink(path);
            tfc_graph_destroy(g);
            g = k;
            const char *in_names[3] = {"x", "y0", "k"};
            for (int i = 0; i < 3; i++) xs[i] = tfc_graph_find(g, in_names[i]);
            for (int i = 0; i < 2; i++) d[i] = tfc_graph_find(g, names[i]);
            CU_ASSERT_FATAL(xs[0] && xs[1] && xs[2] && d[0] && d[1]);
        }
        tfc_session *ss = session_of(g);
        double xv[3] = {0.9, -0.4, 0.6}, yv[3] = {0.5, 1.2, -0.7}, kv[3] = {1.5, -2, 0.25};
        tfc_value *fv[3], *out[2];
        CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &d3), xv, &fv[0]) == 0);
        CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &d3), yv, &fv[1]) == 0);
        CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &d3), kv, &fv[2]) == 0);
        tfc_status st = tfc_session_run(ss, 3, xs, fv, 2, d, out, 0, NULL);
        if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(ss));
        CU_ASSERT_FATAL(st == TFC_OK);
        tfc_session_stats stats;
        tfc_session_get_stats(ss, &stats);
        CU_ASSERT_EQUAL(stats.loop_iterations, 4 * T_STEPS);
        CU_ASSERT_EQUAL(stats.loop_iterations_kept, 3 * T_STEPS);
        for (int i = 0; i < 2; i++) {
            memcpy(res[loaded] + 3 * i, tfc_value_cdata(out[i]), 3 * sizeof(double));
            tfc_value_destroy(out[i]);
        }
        for (int i = 0; i < 3; i++) tfc_value_destroy(fv[i]);
        tfc_session_destroy(ss);
        tfc_graph_destroy(g);
    }
    CU_ASSERT(memcmp(res[0], res[1], sizeof res[0]) == 0);
    CU_ASSERT(res[0][0] != 0 && res[0][3] != 0);
}

/* For the recurrent loop (loop 1) or its unrolled twin (loop 0): s = sum(dL/dW * dL/dW) +
 * sum(dL/db * dL/db), b a variable read inside the body; its gradients are second derivatives
 * through tanh, matmul and the sliced sequence. */
static tfc_tensor *rnn_first_order(tfc_graph *g, struct rnn *a, tfc_tensor *h0, int loop)
{
    tfc_tensor *xs[2] = {a->w, a->b}, *d[2];
    tfc_tensor *l = rnn_loss(g, a, h0, loop, T_STEPS, NULL);
    if (!l || tfc_gradients(g, 1, &l, NULL, 2, xs, d)) return NULL;
    return tfc_add(g, tfc_reduce_sum(g, tfc_mul(g, d[0], d[0]), 0, NULL, 0),
                   tfc_reduce_sum(g, tfc_mul(g, d[1], d[1]), 0, NULL, 0));
}

/* The LSTM-style loop's second derivatives (two float loop variables, sigmoid, tanh, slices,
 * a variable read inside), for 3 iterations and none, against central differences. */
static void test_second_order_lstm_fd(void)
{
    check_lstm(3, 1);
    check_lstm(0, 1);
}

/* Its second derivatives against central differences of the first-order gradients. */
static void test_second_order_rnn_fd(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    struct rnn a = {.n = T_STEPS};
    struct input in[4];
    tfc_tensor *h0;
    build_rnn_inputs(g, &a, &h0, in);
    tfc_tensor *s = rnn_first_order(g, &a, h0, 1);
    if (tfc_graph_status(g)) fprintf(stderr, "graph: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    check_fd(g, s, in, 4, NULL, NULL);
    tfc_graph_destroy(g);
}

/* ... and against the unrolled graph's (float32, one worker): not bit for bit, as tanh's
 * gradient reads tanh's output, which the unrolled graph differentiates once for all its
 * readers and the loop once in the body and once in the gradient body it recomputes (sums
 * associated differently): within 1e-5 of each result's largest element (measured: 1e-6). */
static void test_second_order_rnn_unrolled(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t hd[2] = {2, 3}, wd[2] = {3, 3}, sd[3] = {T_STEPS, 2, 3}, bd = 3;
    struct rnn a = {.n = T_STEPS};
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(2, hd));
    a.w = tfc_placeholder(g, "w", TFC_FLOAT32, tfc_shape_of(2, wd));
    a.xseq = tfc_placeholder(g, "xseq", TFC_FLOAT32, tfc_shape_of(3, sd));
    a.b = tfc_placeholder(g, "b", TFC_FLOAT32, tfc_shape_of(1, &bd));
    tfc_tensor *xs[4] = {h0, a.w, a.xseq, a.b}, *d[8];
    for (int loop = 0; loop < 2; loop++) {
        tfc_tensor *s = rnn_first_order(g, &a, h0, loop);
        CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &s, NULL, 4, xs, d + 4 * (1 - loop)), TFC_OK);
    }
    tfc_session *ss = session_of(g);
    float hv[6], wv[9], sv[T_STEPS * 6], bv[3] = {0.1f, -0.2f, 0.3f};
    for (int i = 0; i < 6; i++) hv[i] = (float)sin(i * 1.3);
    for (int i = 0; i < 9; i++) wv[i] = (float)cos(i * 0.77) * 0.6f;
    for (int i = 0; i < T_STEPS * 6; i++) sv[i] = (float)sin(i * 0.31 + 0.5);
    tfc_value *fv[4] = {test_f32(2, hd, hv), test_f32(2, wd, wv), test_f32(3, sd, sv),
                        test_f32(1, &bd, bv)}, *out[8];
    CU_ASSERT_FATAL(tfc_session_run(ss, 4, xs, fv, 8, d, out, 0, NULL) == TFC_OK);
    const size_t sizes[4] = {6, 9, T_STEPS * 6, 3};
    for (int k = 0; k < 4; k++) {
        const float *lp = tfc_value_cdata(out[k]), *tw = tfc_value_cdata(out[4 + k]);
        double scale = 0;
        for (size_t i = 0; i < sizes[k]; i++) scale = fmax(scale, fabs(tw[i]));
        CU_ASSERT(scale > 0);
        for (size_t i = 0; i < sizes[k]; i++)
            if (fabs((double)lp[i] - tw[i]) > 1e-5 * scale) {
                fprintf(stderr, "second derivative %d element %zu: %.9g, unrolled %.9g\n", k, i,
                        lp[i], tw[i]);
                CU_FAIL("loop's second derivative vs the unrolled graph's");
            }
    }
    for (int k = 0; k < 8; k++) tfc_value_destroy(out[k]);
    for (int k = 0; k < 4; k++) tfc_value_destroy(fv[k]);
    tfc_session_destroy(ss);
    tfc_graph_destroy(g);
}

/* Second derivatives (pure and mixed) through a loop in a loop, a cond inside a loop, a loop
 * inside a cond (both ways) and a loop of tanh, against central differences of the
 * first-order gradients (float64). */
static void test_second_order_nested_fd(void)
{
    const int kinds[5] = {0, 1, 2, 2, 3}, taken[5] = {0, 0, 1, 0, 0};
    for (int c = 0; c < 5; c++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        int64_t d3 = 3;
        struct input in[2];
        tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT64, tfc_shape_of(1, &d3)), *p = NULL;
        struct nest a = {tfc_placeholder(g, "w", TFC_FLOAT64, tfc_shape_of(1, &d3))};
        fill_input(&in[0], h0, 0, 1, &d3, 0.4);
        fill_input(&in[1], a.w, 0, 1, &d3, 2.5);
        tfc_tensor *s = nested_first_order(g, kinds[c], &a, h0, &p);
        tfc_value *pv = p ? scalar_value(TFC_BOOL, taken[c]) : NULL;
        if (tfc_graph_status(g)) fprintf(stderr, "graph: %s\n", tfc_graph_errmsg(g));
        CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
        check_fd(g, s, in, 2, p, pv);
        tfc_value_destroy(pv);
        tfc_graph_destroy(g);
    }
}

static void test_refused(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d3 = 3;
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(1, &d3));
    struct nest a = {tfc_variable(g, "v", TFC_FLOAT32, tfc_shape_of(1, &d3), tfc_init_zeros())};
    tfc_tensor *init[2] = {i32(g, 0), h0}, *r[2], *d = NULL, *dd = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "upd", lt2, assign_body, &a, 2, init, NULL, r), TFC_OK);
    CU_ASSERT_NOT_EQUAL(tfc_gradients(g, 1, &r[1], NULL, 1, &h0, &d), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "updates a variable inside it"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "gradient of 'upd'"));
    tfc_graph_destroy(g);

    tfc_graph_create(&g); /* second order through the loop, but not third */
    h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(1, &d3));
    a.w = tfc_placeholder(g, "w", TFC_FLOAT32, tfc_shape_of(1, &d3));
    init[0] = i32(g, 0);
    init[1] = h0;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "lp", lt2, inner_body, &a, 2, init, NULL, r), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &r[1], NULL, 1, &a.w, &d), TFC_OK);
    tfc_tensor *sum = tfc_reduce_sum(g, d, 0, NULL, 0), *ddd = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &sum, NULL, 1, &a.w, &dd), TFC_OK);
    sum = tfc_reduce_sum(g, dd, 0, NULL, 0);
    CU_ASSERT_NOT_EQUAL(tfc_gradients(g, 1, &sum, NULL, 1, &a.w, &ddd), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "itself a gradient loop"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "beyond the second order"));
    tfc_graph_destroy(g);

    tfc_graph_create(&g); /* two gradient loops of one loop, differentiated in one pass */
    h0 = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(1, &d3));
    a.w = tfc_placeholder(g, "w", TFC_FLOAT32, tfc_shape_of(1, &d3));
    init[0] = i32(g, 0);
    init[1] = h0;
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "lp", lt2, inner_body, &a, 2, init, NULL, r), TFC_OK);
    tfc_tensor *d2 = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &r[1], NULL, 1, &a.w, &d), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &r[1], NULL, 1, &a.w, &d2), TFC_OK);
    sum = tfc_add(g, tfc_reduce_sum(g, d, 0, NULL, 0), tfc_reduce_sum(g, d2, 0, NULL, 0));
    CU_ASSERT_NOT_EQUAL(tfc_gradients(g, 1, &sum, NULL, 1, &a.w, &dd), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "are both gradient loops of while 'lp'"));
    tfc_graph_destroy(g);

    tfc_graph_create(&g); /* a body reading more of the xs than a node has inputs */
    struct many m;
    for (int i = 0; i < 65; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "v%d", i);
        m.v[i] = tfc_variable(g, nm, TFC_FLOAT32, tfc_shape_of(1, &d3), tfc_init_zeros());
    }
    init[0] = i32(g, 0);
    init[1] = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(1, &d3));
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "wide", lt2, add_all, &m, 2, init, NULL, r), TFC_OK);
    tfc_tensor *dv[66], *xs[66];
    for (int i = 0; i < 65; i++) xs[i] = m.v[i];
    xs[65] = init[1];
    CU_ASSERT_EQUAL(tfc_gradients(g, 1, &r[1], NULL, 1, &xs[65], dv), TFC_OK); /* h0 only */
    /* 31 of them: with h, 32 carried gradients, the most a reverse loop carries */
    CU_ASSERT_EQUAL(tfc_gradients(g, 1, &r[1], NULL, 31, xs + 2, dv), TFC_OK);
    CU_ASSERT_NOT_EQUAL(tfc_gradients(g, 1, &r[1], NULL, 32, xs + 2, dv), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "33 gradients to carry"));
    tfc_graph_destroy(g);
    tfc_graph_create(&g); /* the same, with every variable among the xs */
    for (int i = 0; i < 65; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "v%d", i);
        xs[i] = m.v[i] = tfc_variable(g, nm, TFC_FLOAT32, tfc_shape_of(1, &d3), tfc_init_zeros());
    }
    init[0] = i32(g, 0);
    init[1] = tfc_placeholder(g, "h0", TFC_FLOAT32, tfc_shape_of(1, &d3));
    CU_ASSERT_EQUAL_FATAL(tfc_while_loop(g, "wide", lt2, add_all, &m, 2, init, NULL, r), TFC_OK);
    CU_ASSERT_NOT_EQUAL(tfc_gradients(g, 1, &r[1], NULL, 65, xs, dv), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "the regions of 'wide' read more than 64 "
                                                       "of the xs"));
    tfc_graph_destroy(g);
}

/* The context, with an OpenCL worker under TFC_TEST_WHERE (else the program is skipped). */
static int ctx_open(void)
{
    if (test_ctx_open()) return 1;
    tfc_ctx_info info;
    if (g_where && (tfc_ctx_info_get(test_ctx, &info) || info.n_opencl_workers == 0)) {
        fprintf(stderr, "TFC_TEST_WHERE=%s but StarPU has no OpenCL worker: skipped\n",
                g_where == 2 ? "alternate" : "opencl");
        test_ctx_close();
        exit(77);
    }
    return 0;
}

int main(void)
{
    const char *where = getenv("TFC_TEST_WHERE");
    g_where = !where || !*where ? 0 : !strcmp(where, "opencl") ? 1
            : !strcmp(where, "alternate") ? 2 : -1;
    if (g_where < 0) {
        fprintf(stderr, "TFC_TEST_WHERE=%s: only 'opencl' and 'alternate' are known\n", where);
        return 1;
    }
    tfc_testing_set_where_alternate(g_where == 2);
    /* one CPU worker (and the OpenCL one under TFC_TEST_WHERE): the unrolled comparisons are
     * bit for bit */
    setenv("STARPU_NCPU", "1", 1);
    if (!g_where) setenv("STARPU_NOPENCL", "0", 1);
    setenv("STARPU_NCUDA", "0", 1);
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("cflow_grad", ctx_open, test_ctx_close);
    TEST_ADD(test_cond_fd);
    TEST_ADD(test_cond_static_twin);
    TEST_ADD(test_cond_second_order);
    TEST_ADD(test_second_order_fd);
    TEST_ADD(test_second_order_unrolled);
    TEST_ADD(test_second_order_nested_fd);
    TEST_ADD(test_second_order_stored);
    TEST_ADD(test_second_order_rnn_fd);
    TEST_ADD(test_second_order_lstm_fd);
    TEST_ADD(test_second_order_rnn_unrolled);
    TEST_ADD(test_while_fd);
    TEST_ADD(test_while_max_iter_fd);
    TEST_ADD(test_lstm_fd);
    TEST_ADD(test_no_iteration_fd);
    TEST_ADD(test_while_unrolled);
    TEST_ADD(test_while_max_iter_unrolled);
    TEST_ADD(test_stack_only_when_needed);
    TEST_ADD(test_minimize_trains);
    TEST_ADD(test_stored_training);
    TEST_ADD(test_nested_loops_fd);
    TEST_ADD(test_cond_inside_loop_fd);
    TEST_ADD(test_loop_inside_cond_fd);
    TEST_ADD(test_refused);
    return test_main();
}
