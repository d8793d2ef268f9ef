/* test_grad.c: the gradient sweep and the semantics of tfc_gradients.
 *
 * Every op of the table with a gradient builder (descriptor .grad non-NULL) must have a case
 * here: the first suite fails listing any op with a gradient but no entry in grad_cases[], and
 * the last test fails for any such op whose gradient was not actually verified by a case.
 *
 * A case builds a small float64 graph over placeholders fed with deterministic random inputs
 * (kept in each op's smooth domain: positive for log/sqrt/rsqrt/pow bases, away from the kinks
 * of relu/abs/maximum/minimum, distinct values for reduce_max/min), the scalar objective
 * y = sum_k reduce_sum(out_k * W_k) with fixed random W_k of each used output's shape (every
 * output element matters), and checks:
 *   - dy/dx from tfc_gradients against central finite differences, each input element
 *     perturbed by +-eps and the forward graph re-run (tfc_session_run with feeds);
 *   - a Hessian-vector product built by differentiating the gradient again,
 *     d(sum_i dx_i . v_i)/dx (tfc_gradients with grad_ys = v), against central differences of
 *     the gradient along v: (g(x + eps v) - g(x - eps v)) / 2 eps. This checks that every
 *     gradient is itself differentiable (gradients of gradients).
 * Tolerance: |got - want| <= atol + rtol |want|: 1e-6 and 1e-6 with eps 1e-6 in float64. Cases
 * marked dynamic give their placeholders an unknown leading dimension (shapes known only at run
 * time). The sweep runs again in float32 (every float input and the objective float32; eps
 * 2^-9, tolerance 2e-3 and 2e-3): the builders must make nodes of the dtype they are given.
 *
 * Then the semantics: summed contributions of several consumers (also more than add_n takes at
 * once), zeros for an x that no y depends on, stop_gradient, grad_ys, several ys, integer
 * tensors (an error as xs or ys; no gradient through them), ops without gradient (flagged
 * NO_GRADIENT: flow stops silently; no builder: an error naming the op), registered and
 * per-node user gradients.
 *
 * Environment: TFC_TEST_WHERE=cuda pins every op task to the CUDA worker (exits 77 without one);
 * TFC_TEST_WHERE=opencl pins every op task that has an OpenCL kernel for its kind and dtypes
 * to the OpenCL worker (the rest run on the CPU; exits 77 without an OpenCL worker, e.g. PoCL
 * with STARPU_OPENCL_ON_CPUS=1).
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <starpu.h>
#include "../src/tfc.h"
#include "../graph/graph.h"
#include "../sched/testing.h"
#include "cflow_cases.h"
#include "host_tensor.h"

/* A condition that takes both branches: first element true, last false. */
static ht both_values(ht h)
{
    if (h.n >= 2) {
        h.d[0] = 1;
        h.d[h.n - 1] = 0;
    }
    return h;
}



#define GC_EPS 1e-6 /* float64 */
#define GC_RTOL 1e-6
#define GC_ATOL 1e-6
#define GC_EPS32 0x1.0p-9 /* float32: x +- eps stays exact */
#define GC_TOL32 2e-3

/* ---- which case covers which op's gradient ----------------------------------------------- */

static const struct {
    const char *op;
    const char *where;
} grad_cases[] = {
    {"neg", "test_unary"},
    {"abs", "test_unary"},
    {"square", "test_unary"},
    {"sqrt", "test_unary"},
    {"rsqrt", "test_unary"},
    {"exp", "test_unary"},
    {"log", "test_unary"},
    {"relu", "test_unary"},
    {"sigmoid", "test_unary"},
    {"tanh", "test_unary"},
    {"softplus", "test_unary"},
    {"identity", "test_unary"},
    {"erf", "test_unary"},
    {"gelu", "test_unary"},
    {"gelu_tanh", "test_unary"},
    {"elu", "test_unary"},
    {"selu", "test_unary"},
    {"leaky_relu", "test_unary"},
    {"silu", "test_unary"},
    {"hard_sigmoid", "test_unary"},
    {"softsign", "test_unary"},
    {"sin", "test_unary"},
    {"cos", "test_unary"},
    {"reciprocal", "test_unary"},
    {"log1p", "test_unary"},
    {"expm1", "test_unary"},
    {"floor", "test_unary"},
    {"ceil", "test_unary"},
    {"round", "test_unary"},
    {"sign", "test_unary"},
    {"clip", "test_unary"},
    {"cast", "test_cast"},
    {"add", "test_binary"},
    {"sub", "test_binary"},
    {"mul", "test_binary"},
    {"div", "test_binary"},
    {"maximum", "test_binary"},
    {"minimum", "test_binary"},
    {"pow", "test_binary"},
    {"select", "test_select"},
    {"bias_add", "test_bias_add"},
    {"add_n", "test_add_n"},
    {"matmul", "test_matmul"},
    {"batch_matmul", "test_batch_matmul"},
    {"softmax", "test_softmax"},
    {"log_softmax", "test_softmax"},
    {"softmax_cross_entropy", "test_xent"},
    {"sparse_softmax_cross_entropy", "test_xent"},
    {"reduce_sum", "test_reduce"},
    {"reduce_mean", "test_reduce"},
    {"reduce_max", "test_reduce"},
    {"reduce_min", "test_reduce"},
    {"reshape", "test_reshape"},
    {"transpose", "test_transpose"},
    {"concat", "test_concat"},
    {"split", "test_split"},
    {"slice", "test_slice"},
    {"gather", "test_gather"},
    {"reshape_like", "test_grad_ops"},
    {"broadcast_like", "test_grad_ops"},
    {"sum_to_like", "test_grad_ops"},
    {"relu_grad", "test_grad_ops"},
    {"slice_grad", "test_grad_ops"},
    {"scatter_add_rows", "test_grad_ops"},
    {"conv", "test_conv"},
    {"conv_backprop_input", "test_conv"},
    {"conv_backprop_filter", "test_conv"},
    {"conv_transpose", "test_conv_transpose"},
    {"max_pool", "test_pool"},
    {"avg_pool", "test_pool"},
    {"max_pool_grad", "test_pool"},
    {"max_pool_gather", "test_pool"},
    {"avg_pool_grad", "test_pool"},
    {"pad", "test_pad"},
    {"pad_grad", "test_pad"},
    {"dropout", "test_dropout"},
    {"dropout_grad", "test_dropout"},
    {"batch_norm", "test_norm"},
    {"batch_norm_grad", "test_norm"},
    {"layer_norm", "test_norm"},
    {"layer_norm_grad", "test_norm"},
};

/* ---- globals and reporting ------------------------------------------------------------- */

static tfc_ctx *g_ctx;
static int g_cuda, g_ocl;
static int g_cases, g_runs;
static unsigned char g_verified[512];
static double g_t0, g_worst; /* worst |got - want| / (atol + rtol |want|) seen */
static char g_worst_at[256];
/* the sweep's dtype and its step and tolerances */
static enum tfc_dtype g_dt = F64;
static double g_eps = GC_EPS, g_atol = GC_ATOL, g_rtol = GC_RTOL;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_at(int line, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nFAIL (test_grad.c:%d): %s\n", line, buf);
    CU_assertImplementation(CU_FALSE, (unsigned)line, buf, __FILE__, "", CU_FALSE);
}
#define REPORT(...) report_at(__LINE__, __VA_ARGS__)
#define PASS() CU_assertImplementation(CU_TRUE, __LINE__, "ok", __FILE__, "", CU_FALSE)

static void mark_verified(const char *op)
{
    for (int i = 0; i < tfc_op_table_size && i < (int)sizeof g_verified; i++)
        if (op && strcmp(tfc_op_table[i]->name, op) == 0) g_verified[i] = 1;
}

/* ---- deterministic random numbers (splitmix64) ----------------------------------------- */





/* ---- host tensors: every element held as a double ------------------------------------- */









/* Distinct values, at least 0.7 step apart, in random order (for reduce_max/min). */
static ht ht_distinct(tfc_shape sh, double lo, double step)
{
    ht h = ht_new(F64, sh);
    for (int64_t i = 0; i < h.n; i++) h.d[i] = lo + step * ((double)i + 0.3 * rng_unit());
    for (int64_t i = h.n - 1; i > 0; i--) {
        int64_t j = rng_int(0, i);
        double t = h.d[i];
        h.d[i] = h.d[j];
        h.d[j] = t;
    }
    return h;
}

/* Values on the grid 0.5 k + off: two tensors with offsets 0.2 apart never tie, whatever the
 * broadcasting (maximum/minimum stay away from their kink). */
static ht ht_grid(tfc_shape sh, double off)
{
    ht h = ht_new(F64, sh);
    for (int64_t i = 0; i < h.n; i++) h.d[i] = 0.5 * (double)rng_int(-4, 4) + off;
    return h;
}




static int same_shape(tfc_shape a, tfc_shape b)
{
    if (a.rank != b.rank) return 0;
    for (int d = 0; d < a.rank; d++)
        if (a.dims[d] != b.dims[d]) return 0;
    return 1;
}

/* Static shapes that may describe the same tensor: one rank, dims equal where both known. */
static int compatible(tfc_shape a, tfc_shape b)
{
    if (a.rank != b.rank) return 0;
    for (int d = 0; d < a.rank; d++)
        if (a.dims[d] >= 0 && b.dims[d] >= 0 && a.dims[d] != b.dims[d]) return 0;
    return 1;
}

static tfc_status open_session(tfc_graph *g, tfc_session **s)
{
    tfc_status st = tfc_session_create(g_ctx, g, s);
    if (st) return st;
    if (g_cuda) tfc_session_set_where(*s, STARPU_CUDA);
    if (g_ocl) tfc_session_set_where(*s, STARPU_OPENCL);
    return TFC_OK;
}

/* ---- comparing ------------------------------------------------------------------------- */

static int close_to(double got, double want, const char *where)
{
    double lim = g_atol + g_rtol * fabs(want), err = fabs(got - want);
    if (!(err <= lim)) return 0;
    if (err / lim > g_worst) {
        g_worst = err / lim;
        snprintf(g_worst_at, sizeof g_worst_at, "%s", where);
    }
    return 1;
}

/* Checks a fetched value (dtype, shape, elements) against want (tolerance GC_*, or exact). */
static int check_value(const char *label, const char *what, const tfc_value *v, const ht *w,
                       int exact)
{
    if (!v) {
        REPORT("%s / %s: no value fetched", label, what);
        return 0;
    }
    if (tfc_value_dtype(v) != w->dt) {
        REPORT("%s / %s: dtype %s, expected %s", label, what, DT(tfc_value_dtype(v)), DT(w->dt));
        return 0;
    }
    if (!same_shape(tfc_value_shape(v), w->sh)) {
        REPORT("%s / %s: shape %s, expected %s", label, what, SHP(tfc_value_shape(v)),
               SHP(w->sh));
        return 0;
    }
    int64_t bad = 0, first = -1;
    double fg = 0;
    for (int64_t i = 0; i < w->n; i++) {
        double g = tfc_value_get(v, i);
        int ok = exact ? g == w->d[i] : close_to(g, w->d[i], label);
        if (!ok) {
            if (first < 0) first = i, fg = g;
            bad++;
        }
    }
    if (bad) {
        REPORT("%s / %s: %lld of %lld elements differ; first at flat index %lld: expected "
               "%.17g, got %.17g",
               label, what, (long long)bad, (long long)w->n, (long long)first, w->d[first], fg);
        return 0;
    }
    PASS();
    return 1;
}

/* ---- one gradient case ----------------------------------------------------------------- */

#define GC_MAX 8

struct gc {
    tfc_graph *g;
    char label[192];
    const char *op;  /* the op whose gradient the case verifies */
    int dyn;         /* placeholders of rank >= 1 get an unknown leading dimension */
    double eps;
    int nin;
    tfc_tensor *in[GC_MAX];
    ht val[GC_MAX];
    int isx[GC_MAX]; /* differentiated (float) or fixed (indices, conditions, labels) */
    int nterm;
    tfc_tensor *term[GC_MAX];
    int first_order; /* no Hessian-vector check: the gradient of a while_loop's gradient loop
                      * is a clear error today (test_cflow_grad checks it) */
};

static void gc_begin(struct gc *c, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void gc_begin(struct gc *c, const char *op, const char *fmt, ...)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->eps = g_eps;
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(c->label, sizeof c->label, "%s%s: ", g_dt == F32 ? "[float32] " : "", op);
    vsnprintf(c->label + k, sizeof c->label - (size_t)k, fmt, ap);
    va_end(ap);
    if (tfc_graph_create(&c->g)) REPORT("%s: tfc_graph_create: %s", c->label, tfc_errmsg());
}

/* A placeholder fed with h (the case owns h from here on); float64 becomes the sweep's dtype. */
static tfc_tensor *gc_input(struct gc *c, ht h, int isx)
{
    if (h.dt == F64 && g_dt == F32) {
        h.dt = F32;
        for (int64_t i = 0; i < h.n; i++) h.d[i] = (double)(float)h.d[i];
    }
    if (!c->g || c->nin == GC_MAX) {
        if (c->g) REPORT("%s: too many inputs", c->label);
        ht_free(&h);
        return NULL;
    }
    char name[16];
    snprintf(name, sizeof name, "%s%d", isx ? "x" : "in", c->nin);
    tfc_shape ps = h.sh;
    if (c->dyn && ps.rank > 0) ps.dims[0] = -1;
    tfc_tensor *t = tfc_placeholder(c->g, name, h.dt, ps);
    c->in[c->nin] = t;
    c->val[c->nin] = h;
    c->isx[c->nin] = isx;
    c->nin++;
    return t;
}
#define gc_x(c, h) gc_input((c), (h), 1)
#define gc_fixed(c, h) gc_input((c), (h), 0)

/* t enters the objective. */
static void gc_use(struct gc *c, tfc_tensor *t)
{
    if (c->nterm == GC_MAX) {
        REPORT("%s: too many terms", c->label);
        return;
    }
    c->term[c->nterm++] = t;
}

/* One run with the given feeds, fetching n tensors (duplicates allowed: each is fetched once
 * and copied). */
static tfc_status gc_fetch(struct gc *c, tfc_session *s, int nfeed, tfc_tensor **ft,
                           tfc_value **fv, int n, tfc_tensor *const *fetch, tfc_value **out)
{
    tfc_tensor *uniq[4 * GC_MAX] = {0};
    tfc_value *got[4 * GC_MAX] = {0};
    int map[4 * GC_MAX], nu = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < nu && uniq[j] != fetch[i]) j++;
        if (j == nu) uniq[nu++] = fetch[i];
        map[i] = j;
    }
    g_runs++;
    tfc_status st = tfc_session_run(s, nfeed, ft, fv, nu, uniq, got, 0, NULL);
    if (st) {
        REPORT("%s: run failed (%s): %s", c->label, tfc_status_string(st), tfc_session_errmsg(s));
        for (int i = 0; i < n; i++) out[i] = NULL;
        return st;
    }
    int used[4 * GC_MAX] = {0};
    for (int i = 0; i < n; i++) {
        if (!used[map[i]]) {
            out[i] = got[map[i]];
            used[map[i]] = 1;
        } else { /* a copy for the duplicate */
            const tfc_value *v = got[map[i]];
            out[i] = NULL;
            tfc_value_from_data(tfc_value_dtype(v), tfc_value_shape(v), tfc_value_cdata(v),
                                &out[i]);
        }
    }
    return TFC_OK;
}

static void gc_run(struct gc *c)
{
    g_cases++;
    tfc_session *s = NULL;
    tfc_tensor *ft[2 * GC_MAX], *xs[GC_MAX], *dxs[GC_MAX] = {0}, *vt[GC_MAX], *hv[GC_MAX] = {0};
    tfc_value *fv[2 * GC_MAX] = {0}, *terms[GC_MAX] = {0}, *got[1 + 2 * GC_MAX] = {0};
    ht v[GC_MAX] = {{0}};
    int nx = 0, xi[GC_MAX], ok = 1;
    tfc_status st;
    tfc_graph *g = c->g;
    if (!g) goto out;
    if (tfc_graph_status(g)) {
        REPORT("%s: graph build failed: %s", c->label, tfc_graph_errmsg(g));
        goto out;
    }
    for (int i = 0; i < c->nin; i++) {
        ft[i] = c->in[i];
        if (!(fv[i] = ht_value(&c->val[i]))) goto out;
        if (c->isx[i]) {
            xi[nx] = i;
            xs[nx++] = c->in[i];
        }
    }
    if ((st = open_session(g, &s))) {
        REPORT("%s: tfc_session_create: %s", c->label, tfc_status_string(st));
        goto out;
    }
    /* the terms' run-time shapes give the weights' */
    if (gc_fetch(c, s, c->nin, ft, fv, c->nterm, c->term, terms)) goto out;
    tfc_tensor *y = NULL;
    for (int k = 0; k < c->nterm; k++) {
        ht w = ht_rand(tfc_value_dtype(terms[k]), tfc_value_shape(terms[k]), -1, 1, 0.1);
        tfc_value *wv = ht_value(&w);
        tfc_tensor *wt = wv ? tfc_constant(g, NULL, wv) : NULL;
        tfc_value_destroy(wv);
        ht_free(&w);
        tfc_tensor *part = tfc_reduce_sum(g, tfc_mul(g, c->term[k], wt), 0, NULL, 0);
        y = y ? tfc_add(g, y, part) : part;
    }
    if (tfc_graph_status(g)) {
        REPORT("%s: objective: %s", c->label, tfc_graph_errmsg(g));
        goto out;
    }
    if ((st = tfc_gradients(g, 1, &y, NULL, nx, xs, dxs))) {
        REPORT("%s: tfc_gradients failed (%s): %s", c->label, tfc_status_string(st),
               tfc_graph_errmsg(g));
        goto out;
    }
    for (int j = 0; j < nx; j++) {
        if (!dxs[j]) {
            REPORT("%s: dx%d is NULL", c->label, j);
            goto out;
        }
        if (tfc_tensor_dtype(dxs[j]) != tfc_tensor_dtype(xs[j]) ||
            !compatible(tfc_tensor_shape(dxs[j]), tfc_tensor_shape(xs[j]))) {
            REPORT("%s: d/d%s is %s %s, expected %s %s", c->label, tfc_tensor_name(xs[j]),
                   DT(tfc_tensor_dtype(dxs[j])), SHP(tfc_tensor_shape(dxs[j])),
                   DT(tfc_tensor_dtype(xs[j])), SHP(tfc_tensor_shape(xs[j])));
            ok = 0;
        }
    }
    /* the Hessian-vector product: d(sum_j dx_j . v_j)/dx */
    for (int j = 0; j < nx; j++) {
        const ht *x = &c->val[xi[j]];
        char name[16];
        snprintf(name, sizeof name, "v%d", j);
        v[j] = ht_rand(x->dt, x->sh, -1, 1, 0.1);
        vt[j] = tfc_placeholder(g, name, x->dt, tfc_tensor_shape(xs[j]));
        ft[c->nin + j] = vt[j];
        if (!(fv[c->nin + j] = ht_value(&v[j]))) goto out;
    }
    if (!c->first_order && (st = tfc_gradients(g, nx, dxs, vt, nx, xs, hv))) {
        REPORT("%s: second-order tfc_gradients failed (%s): %s", c->label, tfc_status_string(st),
               tfc_graph_errmsg(g));
        goto out;
    }
    tfc_tensor *fetch[1 + 2 * GC_MAX];
    fetch[0] = y;
    for (int j = 0; j < nx; j++) fetch[1 + j] = dxs[j], fetch[1 + nx + j] = hv[j];
    if (gc_fetch(c, s, c->nin + nx, ft, fv, c->first_order ? 1 + nx : 1 + 2 * nx, fetch, got))
        goto out;

    /* first order: central differences of y, element by element */
    for (int j = 0; j < nx && ok; j++) {
        int i = xi[j];
        ht want = ht_new(c->val[i].dt, c->val[i].sh);
        tfc_value *keep = fv[i];
        for (int64_t e = 0; e < want.n && ok; e++) {
            double f[2];
            for (int sgn = 0; sgn < 2 && ok; sgn++) {
                ht p = ht_copy(&c->val[i]);
                p.d[e] += sgn ? -c->eps : c->eps;
                tfc_value *yv = NULL;
                fv[i] = ht_value(&p);
                ok = fv[i] && !gc_fetch(c, s, c->nin, ft, fv, 1, &y, &yv);
                f[sgn] = ok ? tfc_value_get(yv, 0) : 0;
                tfc_value_destroy(yv);
                tfc_value_destroy(fv[i]);
                ht_free(&p);
            }
            want.d[e] = (f[0] - f[1]) / (2 * c->eps);
        }
        fv[i] = keep;
        char what[96];
        snprintf(what, sizeof what, "d/d%s %s vs finite differences", tfc_tensor_name(xs[j]),
                 SHP(c->val[i].sh));
        if (ok) ok = check_value(c->label, what, got[1 + j], &want, 0);
        ht_free(&want);
    }
    /* second order: central differences of the gradient along v */
    if (ok && nx && !c->first_order) {
        tfc_value *gp[GC_MAX] = {0}, *gm[GC_MAX] = {0}, *keep[GC_MAX];
        for (int sgn = 0; sgn < 2 && ok; sgn++) {
            for (int j = 0; j < nx; j++) {
                int i = xi[j];
                ht p = ht_copy(&c->val[i]);
                for (int64_t e = 0; e < p.n; e++) p.d[e] += (sgn ? -c->eps : c->eps) * v[j].d[e];
                keep[j] = fv[i];
                fv[i] = ht_value(&p);
                ht_free(&p);
            }
            ok = !gc_fetch(c, s, c->nin, ft, fv, nx, dxs, sgn ? gm : gp);
            for (int j = 0; j < nx; j++) {
                tfc_value_destroy(fv[xi[j]]);
                fv[xi[j]] = keep[j];
            }
        }
        for (int j = 0; j < nx && ok; j++) {
            ht want = ht_new(c->val[xi[j]].dt, c->val[xi[j]].sh);
            for (int64_t e = 0; e < want.n; e++)
                want.d[e] = (tfc_value_get(gp[j], e) - tfc_value_get(gm[j], e)) / (2 * c->eps);
            char what[96];
            snprintf(what, sizeof what, "Hessian-vector product for %s vs finite differences",
                     tfc_tensor_name(xs[j]));
            ok = check_value(c->label, what, got[1 + nx + j], &want, 0);
            ht_free(&want);
        }
        for (int j = 0; j < nx; j++) tfc_value_destroy(gp[j]), tfc_value_destroy(gm[j]);
    }
    if (ok && g_dt == F64) mark_verified(c->op);
out:
    for (int k = 0; k < c->nterm; k++) tfc_value_destroy(terms[k]);
    for (int k = 0; k < 1 + 2 * nx; k++) tfc_value_destroy(got[k]);
    for (int i = 0; i < c->nin + nx; i++) tfc_value_destroy(fv[i]);
    for (int i = 0; i < c->nin; i++) ht_free(&c->val[i]);
    for (int j = 0; j < nx; j++) ht_free(&v[j]);
    tfc_session_destroy(s);
    tfc_graph_destroy(c->g);
    c->g = NULL;
}

/* ---- the sweep ------------------------------------------------------------------------- */

typedef tfc_tensor *(*unary_fn)(tfc_graph *, tfc_tensor *);
typedef tfc_tensor *(*binary_fn)(tfc_graph *, tfc_tensor *, tfc_tensor *);

/* the parametric ops with fixed parameters; their kinks are where the sweep keeps away from */
static tfc_tensor *b_elu(tfc_graph *g, tfc_tensor *x) { return tfc_elu(g, x, 0.7); }
static tfc_tensor *b_leaky(tfc_graph *g, tfc_tensor *x) { return tfc_leaky_relu(g, x, 0.1); }
static tfc_tensor *b_hard_sigmoid(tfc_graph *g, tfc_tensor *x)
{
    return tfc_hard_sigmoid(g, x, 0.2, 0.5); /* kinks at +-2.5 */
}
static tfc_tensor *b_clip(tfc_graph *g, tfc_tensor *x) { return tfc_clip(g, x, -0.5, 0.5); }

static void test_unary(void)
{
    static const struct {
        const char *name;
        unary_fn fn;
        double lo, hi, gap;
    } u[] = {
        {"neg", tfc_neg, -2, 2, 0},         {"abs", tfc_abs, -2, 2, 0.1},
        {"square", tfc_square, -2, 2, 0},   {"sqrt", tfc_sqrt, 0.5, 3, 0},
        {"rsqrt", tfc_rsqrt, 0.5, 3, 0},    {"exp", tfc_exp, -2, 2, 0},
        {"log", tfc_log, 0.5, 3, 0},        {"relu", tfc_relu, -2, 2, 0.1},
        {"sigmoid", tfc_sigmoid, -3, 3, 0}, {"tanh", tfc_tanh, -2, 2, 0},
        {"softplus", tfc_softplus, -3, 3, 0}, {"identity", tfc_identity, -2, 2, 0},
        {"erf", tfc_erf, -2, 2, 0},         {"gelu", tfc_gelu, -3, 3, 0},
        {"gelu_tanh", tfc_gelu_tanh, -3, 3, 0}, {"elu", b_elu, -2, 2, 0.1},
        {"selu", tfc_selu, -2, 2, 0.1},     {"leaky_relu", b_leaky, -2, 2, 0.1},
        {"silu", tfc_silu, -3, 3, 0},       {"hard_sigmoid", b_hard_sigmoid, -2, 2, 0},
        {"hard_sigmoid", b_hard_sigmoid, -4, 4, 2.6}, /* outside: zero */
        {"softsign", tfc_softsign, -2, 2, 0}, {"sin", tfc_sin, -3, 3, 0},
        {"cos", tfc_cos, -3, 3, 0},         {"reciprocal", tfc_reciprocal, 0.5, 3, 0},
        {"log1p", tfc_log1p, 0, 3, 0},      {"expm1", tfc_expm1, -2, 2, 0},
        /* piecewise constant: zero between the steps (at integers, at halves for round) */
        {"floor", tfc_floor, 0.1, 0.9, 0},  {"ceil", tfc_ceil, 1.1, 1.9, 0},
        {"round", tfc_round, 0.6, 1.4, 0},  {"sign", tfc_sign, -2, 2, 0.1},
        {"clip", b_clip, -0.4, 0.4, 0},     {"clip", b_clip, -2, 2, 0.6}, /* inside, outside */
    };
    const tfc_shape shapes[] = {S(2, 3), S0, S(3, 2)};
    rng_seed(1);
    for (int k = 0; k < COUNT(u); k++)
        for (int si = 0; si < COUNT(shapes); si++) {
            struct gc c;
            gc_begin(&c, u[k].name, "%s%s", SHP(shapes[si]), si == 2 ? " (dynamic)" : "");
            c.dyn = si == 2;
            tfc_tensor *x = gc_x(&c, ht_rand(F64, shapes[si], u[k].lo, u[k].hi, u[k].gap));
            gc_use(&c, u[k].fn(c.g, x));
            gc_run(&c);
        }
}

static void test_cast(void)
{
    rng_seed(2);
    /* float32 is in the path: inputs exact in float32 and a power-of-two step keep x +- eps
     * exact, so the differences see no rounding */
    for (int k = 0; k < 2; k++) {
        struct gc c;
        gc_begin(&c, "cast", "%s", k ? "float32 x -> float64" : "float64 -> float32 -> float64");
        c.eps = 0x1.0p-10;
        ht h = ht_rand(k ? F32 : F64, S(2, 3), -2, 2, 0);
        for (int64_t i = 0; i < h.n; i++) h.d[i] = (double)(float)h.d[i];
        tfc_tensor *x = gc_x(&c, h);
        gc_use(&c, k ? tfc_cast(c.g, x, F64) : tfc_cast(c.g, tfc_cast(c.g, x, F32), F64));
        gc_run(&c);
    }
    /* float64 -> float64 (a no-op cast) */
    struct gc c;
    gc_begin(&c, "cast", "float64 -> float64");
    tfc_tensor *x = gc_x(&c, ht_rand(F64, S(4), -2, 2, 0));
    gc_use(&c, tfc_cast(c.g, x, F64));
    gc_run(&c);
}

static void test_binary(void)
{
    static const struct {
        const char *name;
        binary_fn fn;
        int dom; /* 0 any, 1 b away from 0, 2 no ties, 3 a > 0 */
    } b[] = {
        {"add", tfc_add, 0},         {"sub", tfc_sub, 0},         {"mul", tfc_mul, 0},
        {"div", tfc_div, 1},         {"maximum", tfc_maximum, 2}, {"minimum", tfc_minimum, 2},
        {"pow", tfc_pow, 3},
    };
    static const struct {
        tfc_shape a, b;
        int dyn;
    } sh[] = {
        {{2, {2, 3}}, {2, {2, 3}}, 0}, {{2, {2, 3}}, {1, {3}}, 0}, {{1, {3}}, {2, {2, 3}}, 0},
        {{2, {2, 1}}, {2, {1, 3}}, 0}, {{2, {2, 3}}, {0, {0}}, 0}, {{0, {0}}, {2, {2, 1}}, 0},
        {{2, {2, 3}}, {1, {3}}, 1},    {{2, {3, 1}}, {2, {3, 2}}, 1},
    };
    rng_seed(3);
    for (int k = 0; k < COUNT(b); k++)
        for (int q = 0; q < COUNT(sh); q++) {
            struct gc c;
            gc_begin(&c, b[k].name, "%s with %s%s", SHP(sh[q].a), SHP(sh[q].b),
                     sh[q].dyn ? " (dynamic)" : "");
            c.dyn = sh[q].dyn;
            ht ha, hb;
            switch (b[k].dom) {
            case 1:
                ha = ht_rand(F64, sh[q].a, -2, 2, 0);
                hb = ht_rand(F64, sh[q].b, -2, 2, 0.5);
                break;
            case 2:
                ha = ht_grid(sh[q].a, 0.2);
                hb = ht_grid(sh[q].b, 0);
                break;
            case 3:
                ha = ht_rand(F64, sh[q].a, 0.5, 2, 0);
                hb = ht_rand(F64, sh[q].b, -2, 2, 0);
                break;
            default:
                ha = ht_rand(F64, sh[q].a, -2, 2, 0);
                hb = ht_rand(F64, sh[q].b, -2, 2, 0);
            }
            tfc_tensor *xa = gc_x(&c, ha), *xb = gc_x(&c, hb);
            gc_use(&c, b[k].fn(c.g, xa, xb));
            gc_run(&c);
        }
}

static void test_select(void)
{
    static const tfc_shape sh[][3] = {
        {{2, {2, 3}}, {2, {2, 3}}, {2, {2, 3}}},
        {{2, {2, 1}}, {1, {3}}, {2, {2, 3}}},
        {{2, {2, 3}}, {0, {0}}, {2, {2, 1}}},
    };
    rng_seed(4);
    for (int q = 0; q < COUNT(sh); q++) {
        struct gc c;
        gc_begin(&c, "select", "cond %s, a %s, b %s", SHP(sh[q][0]), SHP(sh[q][1]), SHP(sh[q][2]));
        tfc_tensor *cond = gc_fixed(&c, both_values(ht_rand(BOOL, sh[q][0], 0, 1, 0)));
        tfc_tensor *a = gc_x(&c, ht_rand(F64, sh[q][1], -2, 2, 0));
        tfc_tensor *b = gc_x(&c, ht_rand(F64, sh[q][2], -2, 2, 0));
        gc_use(&c, tfc_select(c.g, cond, a, b));
        gc_run(&c);
    }
}

/* ---- cond and while_loop (issue 13): gradients through the branch taken and the loop ------ */

/* the else branch (cf_then and the loop: tests/cflow_cases.c) */
static tfc_status cf_else(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    const struct cf_caps *k = arg;
    out[0] = tfc_sub(g, tfc_exp(g, k->a), tfc_square(g, k->b));
    return TFC_OK;
}

/* cond both ways (first and second order), and a while_loop of 3 iterations whose body reads
 * captured tensors (first order: the gradient loop has no gradient of its own yet) */
static void test_control_flow_grads(void)
{
    rng_seed(29);
    for (int taken = 0; taken < 2; taken++) {
        struct gc c;
        gc_begin(&c, "cond", "predicate %s, a [2,3], b [2,3]", taken ? "true" : "false");
        ht pred = ht_new(BOOL, (tfc_shape){0, {0}});
        pred.d[0] = taken;
        tfc_tensor *p = gc_fixed(&c, pred), *out[1] = {NULL};
        struct cf_caps k;
        k.a = gc_x(&c, ht_rand(F64, (tfc_shape){2, {2, 3}}, -1, 1, 0));
        k.b = gc_x(&c, ht_rand(F64, (tfc_shape){2, {2, 3}}, -1, 1, 0));
        if (c.g) tfc_cond(c.g, "branch", p, cf_then, cf_else, &k, 1, out);
        gc_use(&c, out[0]);
        gc_run(&c);
    }
    struct gc c;
    gc_begin(&c, "while", "h' = tanh(h*b + a), 3 iterations, a b h0 [2,3]");
    c.first_order = 1;
    struct cf_caps k;
    k.a = gc_x(&c, ht_rand(F64, (tfc_shape){2, {2, 3}}, -1, 1, 0));
    k.b = gc_x(&c, ht_rand(F64, (tfc_shape){2, {2, 3}}, -1, 1, 0));
    tfc_tensor *h0 = gc_x(&c, ht_rand(F64, (tfc_shape){2, {2, 3}}, -1, 1, 0)), *r[2] = {0};
    if (c.g) cf_tanh_loop(c.g, &k, h0, r);
    gc_use(&c, r[1]);
    gc_run(&c);
}

static void test_bias_add(void)
{
    static const struct {
        tfc_shape v, b;
        int dyn;
    } sh[] = {{{2, {2, 3}}, {1, {3}}, 0}, {{3, {2, 2, 3}}, {1, {3}}, 0},
              {{1, {3}}, {1, {3}}, 0},    {{2, {3, 2}}, {1, {2}}, 1}};
    rng_seed(5);
    for (int q = 0; q < COUNT(sh); q++) {
        struct gc c;
        gc_begin(&c, "bias_add", "%s + %s%s", SHP(sh[q].v), SHP(sh[q].b),
                 sh[q].dyn ? " (dynamic)" : "");
        c.dyn = sh[q].dyn;
        tfc_tensor *v = gc_x(&c, ht_rand(F64, sh[q].v, -2, 2, 0));
        tfc_tensor *bias = gc_x(&c, ht_rand(F64, sh[q].b, -2, 2, 0));
        gc_use(&c, tfc_bias_add(c.g, v, bias));
        gc_run(&c);
    }
}

static void test_add_n(void)
{
    rng_seed(6);
    struct gc c;
    gc_begin(&c, "add_n", "3 inputs [2,3]");
    tfc_tensor *in[3];
    for (int i = 0; i < 3; i++) in[i] = gc_x(&c, ht_rand(F64, S(2, 3), -2, 2, 0));
    gc_use(&c, tfc_add_n(c.g, 3, in));
    gc_run(&c);

    gc_begin(&c, "add_n", "add_n(x0, x0, x1): x0 counted twice");
    in[0] = in[1] = gc_x(&c, ht_rand(F64, S(4), -2, 2, 0));
    in[2] = gc_x(&c, ht_rand(F64, S(4), -2, 2, 0));
    gc_use(&c, tfc_add_n(c.g, 3, in));
    gc_run(&c);

    gc_begin(&c, "add_n", "one input");
    in[0] = gc_x(&c, ht_rand(F64, S(2, 2), -2, 2, 0));
    gc_use(&c, tfc_add_n(c.g, 1, in));
    gc_run(&c);
}

static void test_matmul(void)
{
    rng_seed(7);
    for (int t = 0; t < 5; t++) {
        int ta = t & 1, tb = (t >> 1) & 1, dyn = t == 4;
        struct gc c;
        gc_begin(&c, "matmul", "transpose_a=%d transpose_b=%d%s", ta, tb, dyn ? " (dynamic)" : "");
        c.dyn = dyn;
        tfc_tensor *a = gc_x(&c, ht_rand(F64, ta ? S(3, 2) : S(2, 3), -2, 2, 0));
        tfc_tensor *b = gc_x(&c, ht_rand(F64, tb ? S(4, 3) : S(3, 4), -2, 2, 0));
        gc_use(&c, tfc_matmul(c.g, a, b, ta, tb));
        gc_run(&c);
    }
}

static tfc_shape bmm_shape(tfc_shape batch, int64_t r, int64_t cols, int t)
{
    tfc_shape s = batch;
    s.dims[s.rank++] = t ? cols : r;
    s.dims[s.rank++] = t ? r : cols;
    return s;
}

static void test_batch_matmul(void)
{
    static const struct {
        tfc_shape ba, bb;
        int64_t m, k, n;
        int adj; /* bit 0 adj_a, bit 1 adj_b; -1: all four */
    } q[] = {
        {{1, {2}}, {1, {2}}, 2, 3, 2, -1},      /* same batch, all four adjoints */
        {{2, {2, 1}}, {1, {3}}, 2, 3, 2, 0},    /* [2,1] with [3] -> [2,3] */
        {{2, {2, 1}}, {1, {3}}, 2, 3, 2, 3},
        {{1, {2}}, {0, {0}}, 2, 3, 2, 0},       /* rank-2 b broadcast over a's batch */
        {{0, {0}}, {1, {2}}, 2, 3, 2, 1},       /* rank-2 a */
        {{2, {1, 2}}, {2, {2, 1}}, 1, 2, 2, 2}, /* both stretched */
    };
    rng_seed(8);
    for (int i = 0; i < COUNT(q); i++)
        for (int t = 0; t < 4; t++) {
            if (q[i].adj >= 0 && q[i].adj != t) continue;
            int ta = t & 1, tb = t >> 1;
            tfc_shape sa = bmm_shape(q[i].ba, q[i].m, q[i].k, ta);
            tfc_shape sb = bmm_shape(q[i].bb, q[i].k, q[i].n, tb);
            struct gc c;
            gc_begin(&c, "batch_matmul", "%s x %s adj_a=%d adj_b=%d", SHP(sa), SHP(sb), ta, tb);
            tfc_tensor *a = gc_x(&c, ht_rand(F64, sa, -2, 2, 0));
            tfc_tensor *b = gc_x(&c, ht_rand(F64, sb, -2, 2, 0));
            gc_use(&c, tfc_batch_matmul(c.g, a, b, ta, tb));
            gc_run(&c);
        }
}

static void test_softmax(void)
{
    static const struct {
        tfc_shape sh;
        int axis, dyn;
    } q[] = {{{2, {3, 4}}, 0, 0}, {{2, {3, 4}}, -1, 0}, {{2, {3, 4}}, 1, 0},
             {{3, {2, 3, 2}}, 1, 0}, {{1, {5}}, 0, 0}, {{2, {3, 4}}, -1, 1}};
    rng_seed(9);
    for (int lg = 0; lg < 2; lg++)
        for (int i = 0; i < COUNT(q); i++) {
            struct gc c;
            const char *op = lg ? "log_softmax" : "softmax";
            gc_begin(&c, op, "%s axis %d%s", SHP(q[i].sh), q[i].axis, q[i].dyn ? " (dynamic)" : "");
            c.dyn = q[i].dyn;
            tfc_tensor *x = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
            gc_use(&c, lg ? tfc_log_softmax(c.g, x, q[i].axis) : tfc_softmax(c.g, x, q[i].axis));
            gc_run(&c);
        }
}

static void test_xent(void)
{
    rng_seed(10);
    for (int k = 0; k < 4; k++) {
        /* 0: gradient wrt logits and (unnormalized) labels; 1: normalized labels fixed;
         * 2: both, dynamic batch; 3: labels through a softmax */
        struct gc c;
        gc_begin(&c, "softmax_cross_entropy", "[3,4] %s",
                 k == 0 ? "wrt logits and labels" : k == 1 ? "wrt logits, labels fixed"
                 : k == 2 ? "wrt both (dynamic)" : "labels = softmax(x)");
        c.dyn = k == 2;
        tfc_tensor *z = gc_x(&c, ht_rand(F64, S(3, 4), -2, 2, 0)), *l;
        if (k == 1) {
            ht h = ht_rand(F64, S(3, 4), 0.1, 1, 0);
            for (int r = 0; r < 3; r++) {
                double sum = 0;
                for (int j = 0; j < 4; j++) sum += h.d[r * 4 + j];
                for (int j = 0; j < 4; j++) h.d[r * 4 + j] /= sum;
            }
            l = gc_fixed(&c, h);
        } else if (k == 3) {
            l = tfc_softmax(c.g, gc_x(&c, ht_rand(F64, S(3, 4), -2, 2, 0)), -1);
        } else {
            l = gc_x(&c, ht_rand(F64, S(3, 4), 0.1, 1, 0));
        }
        gc_use(&c, tfc_softmax_cross_entropy(c.g, z, l));
        gc_run(&c);
    }
    static const struct {
        enum tfc_dtype dt;
        double ids[4];
        int dyn;
    } sp[] = {{I32, {1, 3, 0}, 0}, {I64, {2, 2, 0}, 0}, {I32, {3, 0, 3}, 1}};
    for (int k = 0; k < COUNT(sp); k++) {
        struct gc c;
        gc_begin(&c, "sparse_softmax_cross_entropy", "[3,4] %s labels%s", DT(sp[k].dt),
                 sp[k].dyn ? " (dynamic)" : "");
        c.dyn = sp[k].dyn;
        tfc_tensor *z = gc_x(&c, ht_rand(F64, S(3, 4), -2, 2, 0));
        tfc_tensor *l = gc_fixed(&c, ht_vals(sp[k].dt, S(3), sp[k].ids));
        gc_use(&c, tfc_sparse_softmax_cross_entropy(c.g, z, l));
        gc_run(&c);
    }
}

typedef tfc_tensor *(*reduce_fn)(tfc_graph *, tfc_tensor *, int, const int64_t *, int);

static void test_reduce(void)
{
    static const struct {
        const char *name;
        reduce_fn fn;
    } r[] = {{"reduce_sum", tfc_reduce_sum},
             {"reduce_mean", tfc_reduce_mean},
             {"reduce_max", tfc_reduce_max},
             {"reduce_min", tfc_reduce_min}};
    static const struct {
        int n;
        int64_t axes[3];
    } ax[] = {{0, {0}}, {1, {0}}, {1, {1}}, {1, {-1}}, {2, {0, 2}}, {3, {0, 1, 2}}};
    rng_seed(11);
    for (int k = 0; k < COUNT(r); k++)
        for (int a = 0; a < COUNT(ax); a++)
            for (int keep = 0; keep < 2; keep++) {
                struct gc c;
                char axs[32] = "";
                for (int i = 0, p = 0; i < ax[a].n; i++)
                    p += snprintf(axs + p, sizeof axs - (size_t)p, i ? ",%d" : "%d", (int)ax[a].axes[i]);
                gc_begin(&c, r[k].name, "[2,3,2] axes [%s] keepdims=%d", axs, keep);
                tfc_tensor *x = gc_x(&c, ht_distinct(S(2, 3, 2), -1.5, 0.25));
                gc_use(&c, r[k].fn(c.g, x, ax[a].n, ax[a].axes, keep));
                gc_run(&c);
            }
    /* unknown leading dimension: the count of reduce_mean is known at run time only */
    static const struct {
        int n;
        int64_t axes[2];
        int keep;
    } dq[] = {{1, {0}, 0}, {0, {0}, 1}, {1, {1}, 0}, {2, {0, 1}, 1}};
    for (int k = 0; k < COUNT(r); k++)
        for (int a = 0; a < COUNT(dq); a++) {
            struct gc c;
            gc_begin(&c, r[k].name, "[3,2] (dynamic) %d axes from %d keepdims=%d", dq[a].n,
                     (int)dq[a].axes[0], dq[a].keep);
            c.dyn = 1;
            tfc_tensor *x = gc_x(&c, ht_distinct(S(3, 2), -1.5, 0.25));
            gc_use(&c, r[k].fn(c.g, x, dq[a].n, dq[a].axes, dq[a].keep));
            gc_run(&c);
        }
}

static void test_reshape(void)
{
    static const struct {
        tfc_shape from, to;
        int dyn;
    } q[] = {{{3, {2, 3, 2}}, {2, {3, -1}}, 0}, {{1, {6}}, {2, {2, 3}}, 0},
             {{1, {1}}, {0, {0}}, 0},          {{2, {4, 3}}, {2, {-1, 6}}, 1}};
    rng_seed(12);
    for (int i = 0; i < COUNT(q); i++) {
        struct gc c;
        gc_begin(&c, "reshape", "%s -> %s%s", SHP(q[i].from), SHP(q[i].to),
                 q[i].dyn ? " (dynamic)" : "");
        c.dyn = q[i].dyn;
        tfc_tensor *x = gc_x(&c, ht_rand(F64, q[i].from, -2, 2, 0));
        gc_use(&c, tfc_reshape(c.g, x, q[i].to));
        gc_run(&c);
    }
}

static void test_transpose(void)
{
    static const struct {
        int rank;
        int64_t perm[3];
        int null_perm;
    } q[] = {{3, {2, 0, 1}, 0}, {3, {1, 2, 0}, 0}, {3, {0, 2, 1}, 0}, {3, {0}, 1}, {2, {1, 0}, 0}};
    rng_seed(13);
    for (int i = 0; i < COUNT(q); i++) {
        struct gc c;
        tfc_shape sh = q[i].rank == 3 ? S(2, 3, 2) : S(2, 3);
        char perm[32] = "NULL (reverse)";
        if (!q[i].null_perm)
            for (int d = 0, p = 0; d < q[i].rank; d++)
                p += snprintf(perm + p, sizeof perm - (size_t)p, "%s%d%s", d ? "," : "[",
                              (int)q[i].perm[d], d == q[i].rank - 1 ? "]" : "");
        gc_begin(&c, "transpose", "%s perm %s", SHP(sh), perm);
        tfc_tensor *x = gc_x(&c, ht_rand(F64, sh, -2, 2, 0));
        gc_use(&c, tfc_transpose(c.g, x, q[i].null_perm ? NULL : q[i].perm));
        gc_run(&c);
    }
}

static void test_concat(void)
{
    static const struct {
        tfc_shape s[3];
        int axis, dyn;
    } q[] = {
        {{{2, {2, 1}}, {2, {2, 3}}, {2, {2, 2}}}, 1, 0},
        {{{2, {1, 3}}, {2, {2, 3}}, {2, {1, 3}}}, 0, 0},
        {{{3, {2, 1, 2}}, {3, {2, 2, 2}}, {3, {2, 1, 2}}}, -2, 0},
        {{{2, {2, 1}}, {2, {2, 3}}, {2, {2, 2}}}, 1, 1},
    };
    rng_seed(14);
    for (int i = 0; i < COUNT(q); i++) {
        struct gc c;
        gc_begin(&c, "concat", "%s %s %s axis %d%s", SHP(q[i].s[0]), SHP(q[i].s[1]),
                 SHP(q[i].s[2]), q[i].axis, q[i].dyn ? " (dynamic)" : "");
        c.dyn = q[i].dyn;
        tfc_tensor *in[3];
        for (int k = 0; k < 3; k++) in[k] = gc_x(&c, ht_rand(F64, q[i].s[k], -2, 2, 0));
        gc_use(&c, tfc_concat(c.g, 3, in, q[i].axis));
        gc_run(&c);
    }
}

static void test_split(void)
{
    static const struct {
        tfc_shape sh;
        int axis;
        unsigned used; /* bit k: output k is in the objective */
    } q[] = {{{2, {2, 6}}, 1, 5}, {{2, {6, 2}}, 0, 2}, {{2, {2, 6}}, -1, 7}, {{3, {3, 2, 2}}, 0, 4}};
    rng_seed(15);
    for (int i = 0; i < COUNT(q); i++) {
        struct gc c;
        gc_begin(&c, "split", "%s in 3 along %d, outputs used 0x%x", SHP(q[i].sh), q[i].axis,
                 q[i].used);
        tfc_tensor *x = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0)), *out[3] = {0};
        if (tfc_split(c.g, x, 3, q[i].axis, out) == TFC_OK)
            for (int k = 0; k < 3; k++)
                if (q[i].used >> k & 1) gc_use(&c, out[k]);
        gc_run(&c);
    }
}

static void test_slice(void)
{
    static const struct {
        tfc_shape sh;
        int64_t begin[3], size[3];
        int dyn;
    } q[] = {{{2, {3, 4}}, {1, 0}, {2, -1}, 0},
             {{3, {2, 3, 2}}, {0, 1, 1}, {-1, 2, 1}, 0},
             {{1, {5}}, {2}, {2}, 0},
             {{2, {3, 4}}, {1, 1}, {-1, 2}, 1}};
    rng_seed(16);
    for (int i = 0; i < COUNT(q); i++) {
        struct gc c;
        gc_begin(&c, "slice", "%s begin %lld.. size %lld..%s", SHP(q[i].sh),
                 (long long)q[i].begin[0], (long long)q[i].size[0], q[i].dyn ? " (dynamic)" : "");
        c.dyn = q[i].dyn;
        tfc_tensor *x = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
        gc_use(&c, tfc_slice(c.g, x, q[i].begin, q[i].size));
        gc_run(&c);
    }
}

static void test_gather(void)
{
    static const struct {
        tfc_shape params, ix;
        enum tfc_dtype dt;
        double ids[4];
        int dyn;
    } q[] = {
        {{2, {4, 3}}, {2, {2, 2}}, I32, {0, 2, 0, 3}, 0}, /* repeated rows accumulate */
        {{1, {5}}, {1, {4}}, I64, {4, 1, 4, 4}, 0},
        {{3, {3, 2, 2}}, {1, {3}}, I32, {2, 2, 1}, 0},
        {{2, {4, 3}}, {1, {3}}, I64, {3, 3, 0}, 1},
    };
    rng_seed(17);
    for (int i = 0; i < COUNT(q); i++) {
        struct gc c;
        gc_begin(&c, "gather", "params %s, %s indices %s%s", SHP(q[i].params), DT(q[i].dt),
                 SHP(q[i].ix), q[i].dyn ? " (dynamic)" : "");
        c.dyn = q[i].dyn;
        tfc_tensor *p = gc_x(&c, ht_rand(F64, q[i].params, -2, 2, 0));
        tfc_tensor *ix = gc_fixed(&c, ht_vals(q[i].dt, q[i].ix, q[i].ids));
        gc_use(&c, tfc_gather(c.g, p, ix));
        gc_run(&c);
    }
}

/* conv and its adjoints over 1, 2 and 3 spatial dims: strides, asymmetric pads, SAME_*,
 * dilation, groups (depthwise too). All three are linear in each operand, so differences are
 * exact up to rounding, and the second-order check exercises each op's gradient builder. */
static void test_conv(void)
{
    static const struct {
        int rank;
        int64_t x[5], w[5];
        tfc_conv_params p;
        int dyn;
    } q[] = {
        {3, {2, 2, 5}, {2, 2, 3}, {.strides = {2}, .pads_begin = {1}}, 1},
        {4, {1, 4, 4, 3}, {4, 2, 2, 2}, {.strides = {2, 1}, .dilations = {1, 2}, .groups = 2,
                                         .auto_pad = TFC_CONV_PAD_SAME_LOWER}, 0},
        {4, {1, 2, 3, 3}, {2, 1, 2, 2}, {.groups = 2, .pads_begin = {1, 0}, .pads_end = {0, 1}},
         0},
        {5, {1, 1, 3, 3, 2}, {2, 1, 2, 2, 2}, {.strides = {1, 2, 1}, .pads_begin = {0, 1, 0},
                                              .pads_end = {1, 0, 1}}, 0},
        {4, {1, 2, 3, 4}, {2, 2, 2, 3}, {.strides = {2, 2}, .auto_pad = TFC_CONV_PAD_SAME_UPPER},
         0},
    };
    rng_seed(19);
    for (int i = 0; i < COUNT(q); i++) {
        tfc_shape xs = tfc_shape_of(q[i].rank, q[i].x), ws = tfc_shape_of(q[i].rank, q[i].w);
        struct gc c;
        gc_begin(&c, "conv", "x %s w %s%s", SHP(xs), SHP(ws), q[i].dyn ? " (dynamic)" : "");
        c.dyn = q[i].dyn;
        tfc_tensor *x = gc_x(&c, ht_rand(F64, xs, -2, 2, 0));
        tfc_tensor *w = gc_x(&c, ht_rand(F64, ws, -2, 2, 0));
        tfc_tensor *y = tfc_conv(c.g, x, w, &q[i].p);
        tfc_shape ys = y ? tfc_tensor_shape(y) : xs;
        ys.dims[0] = xs.dims[0], ys.dims[1] = ws.dims[0]; /* known here even when dynamic */
        gc_use(&c, y);
        gc_run(&c);
        if (!y) continue;
        /* the adjoints as ops of their own: dy of y's shape, the like inputs shape only */
        gc_begin(&c, "conv_backprop_input", "x %s w %s", SHP(xs), SHP(ws));
        tfc_tensor *dy = gc_x(&c, ht_rand(F64, ys, -2, 2, 0));
        w = gc_x(&c, ht_rand(F64, ws, -2, 2, 0));
        x = gc_x(&c, ht_rand(F64, xs, -2, 2, 0));
        gc_use(&c, tfc_conv_backprop_input(c.g, dy, w, x, &q[i].p));
        gc_run(&c);
        gc_begin(&c, "conv_backprop_filter", "x %s w %s", SHP(xs), SHP(ws));
        x = gc_x(&c, ht_rand(F64, xs, -2, 2, 0));
        dy = gc_x(&c, ht_rand(F64, ys, -2, 2, 0));
        w = gc_x(&c, ht_rand(F64, ws, -2, 2, 0));
        gc_use(&c, tfc_conv_backprop_filter(c.g, x, dy, w, &q[i].p));
        gc_run(&c);
    }
}

/* conv_transpose over 1, 2 and 3 spatial dims: strides, asymmetric pads, dilation,
 * output_padding, groups. Linear in x and in w: its gradients (a convolution for dx, a filter
 * gradient with the roles swapped for dw) against central differences, and the second-order
 * check runs their own gradient builders. */
static void test_conv_transpose(void)
{
    static const struct {
        int rank;
        int64_t x[5], w[5];
        tfc_conv_transpose_params p;
        int dyn;
    } q[] = {
        {3, {2, 2, 3}, {2, 2, 3}, {.strides = {2}, .pads_begin = {1}, .output_padding = {1}}, 1},
        {4, {1, 4, 2, 3}, {4, 1, 2, 2}, {.strides = {2, 1}, .dilations = {1, 2}, .groups = 2,
                                         .pads_end = {0, 1}}, 0},
        {5, {1, 1, 2, 2, 2}, {1, 2, 2, 1, 2}, {.strides = {1, 2, 2}, .pads_begin = {0, 0, 1},
                                              .output_padding = {0, 1, 0}}, 0},
    };
    rng_seed(23);
    for (int i = 0; i < COUNT(q); i++) {
        tfc_shape xs = tfc_shape_of(q[i].rank, q[i].x), ws = tfc_shape_of(q[i].rank, q[i].w);
        struct gc c;
        gc_begin(&c, "conv_transpose", "x %s w %s%s", SHP(xs), SHP(ws),
                 q[i].dyn ? " (dynamic)" : "");
        c.dyn = q[i].dyn;
        tfc_tensor *x = gc_x(&c, ht_rand(F64, xs, -2, 2, 0));
        tfc_tensor *w = gc_x(&c, ht_rand(F64, ws, -2, 2, 0));
        gc_use(&c, tfc_conv_transpose(c.g, x, w, &q[i].p));
        gc_run(&c);
    }
}

static void test_grad_ops(void)
{
    rng_seed(18);
    struct gc c;
    tfc_tensor *in[3];

    gc_begin(&c, "reshape_like", "[2,3] like [3,2]");
    in[0] = gc_x(&c, ht_rand(F64, S(2, 3), -2, 2, 0));
    in[1] = gc_x(&c, ht_rand(F64, S(3, 2), -2, 2, 0)); /* shape only: zero gradient */
    gc_use(&c, tfc_op(c.g, "reshape_like", 2, in, NULL, NULL, 0));
    gc_run(&c);

    static const tfc_shape bl[][2] = {{{2, {3, 1}}, {3, {2, 3, 2}}}, {{0, {0}}, {2, {2, 3}}},
                                      {{2, {1, 3}}, {2, {2, 1}}}};
    for (int i = 0; i < COUNT(bl); i++) {
        gc_begin(&c, "broadcast_like", "%s like %s", SHP(bl[i][0]), SHP(bl[i][1]));
        in[0] = gc_x(&c, ht_rand(F64, bl[i][0], -2, 2, 0));
        in[1] = gc_x(&c, ht_rand(F64, bl[i][1], -2, 2, 0));
        gc_use(&c, tfc_op(c.g, "broadcast_like", 2, in, NULL, NULL, 0));
        gc_run(&c);
    }

    static const tfc_shape sl[][2] = {{{3, {2, 3, 2}}, {2, {3, 1}}}, {{2, {2, 3}}, {0, {0}}},
                                      {{2, {2, 3}}, {1, {3}}}, {{2, {2, 3}}, {2, {2, 3}}}};
    for (int i = 0; i < COUNT(sl); i++) {
        gc_begin(&c, "sum_to_like", "%s to %s", SHP(sl[i][0]), SHP(sl[i][1]));
        in[0] = gc_x(&c, ht_rand(F64, sl[i][0], -2, 2, 0));
        in[1] = gc_x(&c, ht_rand(F64, sl[i][1], -2, 2, 0));
        gc_use(&c, tfc_op(c.g, "sum_to_like", 2, in, NULL, NULL, 0));
        gc_run(&c);
    }

    static const tfc_shape rg[][2] = {{{2, {2, 3}}, {2, {2, 3}}}, {{2, {2, 3}}, {1, {3}}},
                                      {{1, {3}}, {2, {2, 3}}}};
    for (int i = 0; i < COUNT(rg); i++) {
        gc_begin(&c, "relu_grad", "dy %s, x %s", SHP(rg[i][0]), SHP(rg[i][1]));
        in[0] = gc_x(&c, ht_rand(F64, rg[i][0], -2, 2, 0));
        in[1] = gc_x(&c, ht_rand(F64, rg[i][1], -2, 2, 0.1)); /* away from the kink */
        gc_use(&c, tfc_op(c.g, "relu_grad", 2, in, NULL, NULL, 0));
        gc_run(&c);
    }

    gc_begin(&c, "slice_grad", "[2,2] at [1,1] of [3,4]");
    in[0] = gc_x(&c, ht_rand(F64, S(2, 2), -2, 2, 0));
    in[1] = gc_x(&c, ht_rand(F64, S(3, 4), -2, 2, 0));
    gc_use(&c, tfc_op(c.g, "slice_grad", 2, in, "begin=[1,1],size=[2,2]", NULL, 0));
    gc_run(&c);

    gc_begin(&c, "slice_grad", "[2,-1] at [0,1,0] of [2,3,2]");
    in[0] = gc_x(&c, ht_rand(F64, S(2, 2, 2), -2, 2, 0));
    in[1] = gc_x(&c, ht_rand(F64, S(2, 3, 2), -2, 2, 0));
    gc_use(&c, tfc_op(c.g, "slice_grad", 2, in, "begin=[0,1,0],size=[-1,2,-1]", NULL, 0));
    gc_run(&c);

    static const struct {
        tfc_shape upd, ix, like;
        enum tfc_dtype dt;
        double ids[4];
    } sa[] = {{{2, {3, 2}}, {1, {3}}, {2, {4, 2}}, I32, {0, 2, 0}},
              {{3, {2, 2, 3}}, {2, {2, 2}}, {2, {3, 3}}, I64, {1, 1, 0, 1}},
              {{1, {4}}, {1, {4}}, {1, {3}}, I32, {2, 2, 2, 0}}};
    for (int i = 0; i < COUNT(sa); i++) {
        gc_begin(&c, "scatter_add_rows", "updates %s, %s indices %s, like %s", SHP(sa[i].upd),
                 DT(sa[i].dt), SHP(sa[i].ix), SHP(sa[i].like));
        in[0] = gc_x(&c, ht_rand(F64, sa[i].upd, -2, 2, 0));
        in[1] = gc_fixed(&c, ht_vals(sa[i].dt, sa[i].ix, sa[i].ids));
        in[2] = gc_x(&c, ht_rand(F64, sa[i].like, -2, 2, 0));
        gc_use(&c, tfc_op(c.g, "scatter_add_rows", 3, in, NULL, NULL, 0));
        gc_run(&c);
    }
}

/* A composite: a two-layer network with a loss, every op's gradient meeting the others'. */
/* ---- pooling: inputs without ties (distinct values), so every argmax is stable under the
 * finite differences' perturbation ------------------------------------------------------------ */

static const struct {
    tfc_shape sh;
    tfc_pool_params p;
    int dyn, avg; /* avg: the case also runs avg_pool (no dilations) */
} gpool[] = {
    {{4, {2, 2, 4, 6}}, {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, 0}, 0, 1},
    {{4, {1, 2, 5, 5}}, {2, {3, 2}, {2, 1}, {1, 0}, {1, 1}, {0}, 1, 0}, 0, 1},
    {{4, {1, 2, 5, 5}}, {2, {3, 2}, {2, 1}, {1, 0}, {1, 1}, {0}, 1, 1}, 1, 1},
    {{3, {2, 1, 7}}, {1, {3}, {2}, {1}, {0}, {0}, 1, 1}, 0, 1},
    {{5, {1, 1, 3, 4, 3}}, {3, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, {0, 1, 1}, {0}, 1, 1}, 0, 1},
    {{3, {1, 2, 9}}, {1, {3}, {2}, {2}, {1}, {2}, 0, 0}, 0, 0},
    {{4, {1, 1, 6, 5}}, {2, {2, 2}, {1, 2}, {1, 1}, {0, 1}, {2, 2}, 1, 0}, 1, 0},
};

/* The attributes of p as tfc_op text, for the gradient ops reached by name. */
static void pool_attr_text(const tfc_pool_params *p, char *buf, size_t len)
{
    const char *names[] = {"kernel", "strides", "pads_begin", "pads_end"};
    const int64_t *lists[] = {p->kernel, p->strides, p->pads_begin, p->pads_end};
    size_t k = 0;
    for (int a = 0; a < 4; a++) {
        k += (size_t)snprintf(buf + k, len - k, "%s%s=[", a ? "," : "", names[a]);
        for (int i = 0; i < p->n_spatial; i++)
            k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "",
                                  (long long)(a == 1 && !lists[a][i] ? 1 : lists[a][i]));
        k += (size_t)snprintf(buf + k, len - k, "]");
    }
    snprintf(buf + k, len - k, ",ceil_mode=%d,count_include_pad=%d", p->ceil_mode,
             p->count_include_pad);
}

static void test_pool(void)
{
    rng_seed(41);
    for (int i = 0; i < COUNT(gpool); i++) {
        const tfc_pool_params *p = &gpool[i].p;
        for (int op = 0; op < (gpool[i].avg ? 2 : 1); op++) {
            struct gc c;
            gc_begin(&c, op ? "avg_pool" : "max_pool", "%s case %d%s", SHP(gpool[i].sh), i,
                     gpool[i].dyn ? " (dynamic)" : "");
            c.dyn = gpool[i].dyn;
            tfc_tensor *x = gc_x(&c, ht_distinct(gpool[i].sh, -2, 0.25)), *ix = NULL;
            gc_use(&c, op ? tfc_avg_pool(c.g, x, p) : tfc_max_pool(c.g, x, p, i % 2 ? &ix : NULL));
            gc_run(&c);
        }
        /* the gradient ops themselves: the argmax comes from a fixed input */
        struct gc c;
        gc_begin(&c, "max_pool_grad", "%s case %d", SHP(gpool[i].sh), i);
        tfc_tensor *fx = gc_fixed(&c, ht_distinct(gpool[i].sh, -2, 0.25)), *ix = NULL;
        tfc_tensor *y = tfc_max_pool(c.g, fx, p, &ix);
        tfc_tensor *dy = gc_x(&c, ht_rand(F64, y ? tfc_tensor_shape(y) : S0, -2, 2, 0));
        tfc_tensor *in3[3] = {dy, ix, fx};
        gc_use(&c, tfc_op(c.g, "max_pool_grad", 3, in3, NULL, NULL, 0));
        gc_run(&c);
        gc_begin(&c, "max_pool_gather", "%s case %d", SHP(gpool[i].sh), i);
        fx = gc_fixed(&c, ht_distinct(gpool[i].sh, -2, 0.25));
        tfc_max_pool(c.g, fx, p, &ix);
        tfc_tensor *in2[2] = {gc_x(&c, ht_rand(F64, gpool[i].sh, -2, 2, 0)), ix};
        gc_use(&c, tfc_op(c.g, "max_pool_gather", 2, in2, NULL, NULL, 0));
        gc_run(&c);
        if (!gpool[i].avg) continue;
        char attrs[256];
        pool_attr_text(p, attrs, sizeof attrs);
        gc_begin(&c, "avg_pool_grad", "%s %s", SHP(gpool[i].sh), attrs);
        fx = gc_fixed(&c, ht_rand(F64, gpool[i].sh, -2, 2, 0));
        y = tfc_avg_pool(c.g, fx, p);
        tfc_tensor *in_a[2] = {gc_x(&c, ht_rand(F64, y ? tfc_tensor_shape(y) : S0, -2, 2, 0)), fx};
        gc_use(&c, tfc_op(c.g, "avg_pool_grad", 2, in_a, attrs, NULL, 0));
        gc_run(&c);
    }
    /* global average pooling is a reduce_mean over the spatial dims */
    struct gc c;
    gc_begin(&c, "reduce_mean", "global_avg_pool [2,3,2,2] (dynamic)");
    c.dyn = 1;
    gc_use(&c, tfc_global_avg_pool(c.g, gc_x(&c, ht_rand(F64, S(2, 3, 2, 2), -2, 2, 0))));
    gc_run(&c);
}

/* ---- pad (each mode) and its gradient op pad_grad ------------------------------------------ */

static void test_pad(void)
{
    static const struct {
        tfc_shape sh;
        int64_t b[3], e[3];
        int dyn;
    } q[] = {{{1, {5}}, {2}, {3}, 0},
             {{2, {3, 4}}, {2, 0}, {1, 3}, 0},
             {{2, {3, 4}}, {1, 2}, {2, 1}, 1},
             {{3, {2, 3, 3}}, {1, 2, 0}, {0, 1, 2}, 0}};
    static const char *const modes[] = {"constant", "reflect", "edge"};
    rng_seed(44);
    for (int i = 0; i < COUNT(q); i++)
        for (int mode = 0; mode < 3; mode++) {
            struct gc c;
            gc_begin(&c, "pad", "%s %s%s", modes[mode], SHP(q[i].sh), q[i].dyn ? " (dynamic)" : "");
            c.dyn = q[i].dyn;
            tfc_tensor *x = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
            gc_use(&c, tfc_pad(c.g, x, q[i].b, q[i].e, (enum tfc_pad_mode)mode, 1.5));
            gc_run(&c);
            gc_begin(&c, "pad_grad", "%s %s", modes[mode], SHP(q[i].sh));
            tfc_tensor *fx = gc_fixed(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
            tfc_shape ys = q[i].sh;
            char attrs[160];
            int k = snprintf(attrs, sizeof attrs, "mode=%d,begin=[", mode);
            for (int d = 0; d < ys.rank; d++)
                k += snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%lld", d ? "," : "",
                              (long long)q[i].b[d]);
            k += snprintf(attrs + k, sizeof attrs - (size_t)k, "],end=[");
            for (int d = 0; d < ys.rank; d++) {
                k += snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%lld", d ? "," : "",
                              (long long)q[i].e[d]);
                ys.dims[d] += q[i].b[d] + q[i].e[d];
            }
            snprintf(attrs + k, sizeof attrs - (size_t)k, "]");
            tfc_tensor *in2[2] = {gc_x(&c, ht_rand(F64, ys, -2, 2, 0)), fx};
            gc_use(&c, tfc_op(c.g, "pad_grad", 2, in2, attrs, NULL, 0));
            gc_run(&c);
        }
}

/* ---- dropout and its gradient op dropout_grad (the same mask, recomputed) ------------------ */

static void test_dropout(void)
{
    static const struct {
        tfc_shape sh;
        double rate;
        int64_t step;
        int training, dyn;
    } q[] = {{{1, {9}}, 0.5, 3, 1, 0}, {{2, {3, 4}}, 0.25, 11, 1, 1}, {{2, {2, 5}}, 0.5, 3, 0, 0}};
    rng_seed(48);
    for (int i = 0; i < COUNT(q); i++) {
        const char *ops[2] = {"dropout", "dropout_grad"};
        for (int k = 0; k < 2; k++) {
            struct gc c;
            gc_begin(&c, ops[k], "%s rate %g step %lld training %d%s", SHP(q[i].sh), q[i].rate,
                     (long long)q[i].step, q[i].training, q[i].dyn ? " (dynamic)" : "");
            c.dyn = q[i].dyn;
            tfc_tensor *x = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
            tfc_tensor *step = gc_fixed(&c, ht_vals(I64, S0, (double[]){(double)q[i].step}));
            tfc_tensor *tr = gc_fixed(&c, ht_vals(F32, S0, (double[]){q[i].training}));
            char attrs[64];
            snprintf(attrs, sizeof attrs, "rate=%g,seed=%d", q[i].rate, 100 + i);
            tfc_tensor *in3[3] = {x, step, tr};
            gc_use(&c, k ? tfc_op(c.g, ops[k], 3, in3, attrs, NULL, 0)
                         : tfc_dropout(c.g, x, q[i].rate, tr, step, (uint64_t)(100 + i)));
            gc_run(&c);
        }
    }
}

static void test_composite(void)
{
    rng_seed(19);
    struct gc c;
    gc_begin(&c, "matmul", "composite: mlp with bias, relu, tanh, softmax xent and mean");
    tfc_tensor *x = gc_x(&c, ht_rand(F64, S(3, 4), -2, 2, 0));
    tfc_tensor *w1 = gc_x(&c, ht_rand(F64, S(4, 3), -1, 1, 0));
    tfc_tensor *b1 = gc_x(&c, ht_rand(F64, S(3), -1, 1, 0));
    tfc_tensor *w2 = gc_x(&c, ht_rand(F64, S(3, 2), -1, 1, 0));
    tfc_tensor *lab = gc_fixed(&c, ht_vals(I32, S(3), (double[]){1, 0, 1}));
    tfc_tensor *h = tfc_tanh(c.g, tfc_bias_add(c.g, tfc_matmul(c.g, x, w1, 0, 0), b1));
    tfc_tensor *logits = tfc_matmul(c.g, h, w2, 0, 0);
    gc_use(&c, tfc_reduce_mean(c.g, tfc_sparse_softmax_cross_entropy(c.g, logits, lab), 0, NULL, 0));
    gc_use(&c, tfc_mul(c.g, h, h)); /* h has two consumers */
    gc_run(&c);
}

/* ---- Hessian-vector product ------------------------------------------------------------ */

/* f(x) = reduce_sum(tanh(x W)); g = df/dx; hv = d(g . v)/dx, against (g(x + eps v) -
 * g(x - eps v)) / 2 eps, and against the closed form -2 (t (1 - t^2) . (v W)) W^T. */
static void test_hvp(void)
{
    rng_seed(20);
    tfc_graph *g = NULL;
    tfc_session *s = NULL;
    if (tfc_graph_create(&g)) return REPORT("hvp: tfc_graph_create");
    ht x = ht_rand(F64, S(3, 4), -1, 1, 0), w = ht_rand(F64, S(4, 2), -1, 1, 0);
    ht v = ht_rand(F64, S(3, 4), -1, 1, 0.1);
    tfc_value *wv = ht_value(&w), *xv = ht_value(&x), *vv = ht_value(&v);
    tfc_tensor *tx = tfc_placeholder(g, "x", F64, S(3, 4)), *tv = tfc_placeholder(g, "v", F64, S(3, 4));
    tfc_tensor *tw = tfc_constant(g, "w", wv);
    tfc_tensor *f = tfc_reduce_sum(g, tfc_tanh(g, tfc_matmul(g, tx, tw, 0, 0)), 0, NULL, 0);
    tfc_tensor *gx = NULL, *hv = NULL;
    tfc_status st = tfc_gradients(g, 1, &f, NULL, 1, &tx, &gx);
    if (!st) st = tfc_gradients(g, 1, &gx, &tv, 1, &tx, &hv);
    if (st || tfc_graph_status(g) || open_session(g, &s)) {
        REPORT("hvp: build failed (%s): %s", tfc_status_string(st), tfc_graph_errmsg(g));
        goto out;
    }
    tfc_tensor *ft[2] = {tx, tv}, *fetch[2] = {gx, hv};
    tfc_value *fv[2] = {xv, vv}, *got[2] = {0}, *gp = NULL, *gm = NULL;
    if ((st = tfc_session_run(s, 2, ft, fv, 2, fetch, got, 0, NULL))) {
        REPORT("hvp: run failed: %s", tfc_session_errmsg(s));
        goto out;
    }
    ht want = ht_new(F64, S(3, 4)), closed = ht_new(F64, S(3, 4));
    for (int sgn = 0; sgn < 2; sgn++) {
        ht p = ht_copy(&x);
        for (int64_t e = 0; e < p.n; e++) p.d[e] += (sgn ? -GC_EPS : GC_EPS) * v.d[e];
        tfc_value *pv = ht_value(&p);
        st = tfc_session_run(s, 1, &tx, &pv, 1, &gx, sgn ? &gm : &gp, 0, NULL);
        if (st) REPORT("hvp: run failed: %s", tfc_session_errmsg(s));
        tfc_value_destroy(pv);
        ht_free(&p);
    }
    if (gp && gm) {
        for (int64_t e = 0; e < want.n; e++)
            want.d[e] = (tfc_value_get(gp, e) - tfc_value_get(gm, e)) / (2 * GC_EPS);
        check_value("hvp of reduce_sum(tanh(x W))", "finite differences of the gradient",
                    got[1], &want, 0);
    }
    /* closed form: H v = W^T-contracted -2 t (1 - t^2) (v W) */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            double acc = 0;
            for (int k = 0; k < 2; k++) {
                double z = 0, vw = 0;
                for (int l = 0; l < 4; l++) z += x.d[i * 4 + l] * w.d[l * 2 + k], vw += v.d[i * 4 + l] * w.d[l * 2 + k];
                double t = tanh(z);
                acc += -2 * t * (1 - t * t) * vw * w.d[j * 2 + k];
            }
            closed.d[i * 4 + j] = acc;
        }
    check_value("hvp of reduce_sum(tanh(x W))", "closed form", got[1], &closed, 0);
    ht_free(&want), ht_free(&closed);
    tfc_value_destroy(got[0]), tfc_value_destroy(got[1]), tfc_value_destroy(gp), tfc_value_destroy(gm);
out:
    tfc_value_destroy(wv), tfc_value_destroy(xv), tfc_value_destroy(vv);
    ht_free(&x), ht_free(&w), ht_free(&v);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- semantics ------------------------------------------------------------------------- */

/* Runs g in a new session with the given feeds, fetching n tensors into out. */
static tfc_status run_graph(tfc_graph *g, const char *label, int nfeed, tfc_tensor *const *ft,
                            tfc_value *const *fv, int n, tfc_tensor *const *fetch, tfc_value **out)
{
    tfc_session *s = NULL;
    for (int i = 0; i < n; i++) out[i] = NULL;
    tfc_status st = tfc_graph_status(g);
    if (st) {
        REPORT("%s: graph: %s", label, tfc_graph_errmsg(g));
        return st;
    }
    if ((st = open_session(g, &s))) {
        REPORT("%s: tfc_session_create: %s", label, tfc_status_string(st));
        return st;
    }
    tfc_session_init_variables(s);
    if ((st = tfc_session_run(s, nfeed, ft, fv, n, fetch, out, 0, NULL)))
        REPORT("%s: run failed (%s): %s", label, tfc_status_string(st), tfc_session_errmsg(s));
    tfc_session_destroy(s);
    return st;
}

/* A graph with one [4] float64 placeholder "x" fed with xh. */
struct sem {
    tfc_graph *g;
    tfc_tensor *x;
    ht xh;
    tfc_value *xv;
};

static int sem_begin(struct sem *m, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    rng_seed(seed);
    if (tfc_graph_create(&m->g)) {
        REPORT("tfc_graph_create: %s", tfc_errmsg());
        return -1;
    }
    m->xh = ht_rand(F64, S(4), -2, 2, 0.1);
    m->xv = ht_value(&m->xh);
    m->x = tfc_placeholder(m->g, "x", F64, S(4));
    return 0;
}

static void sem_end(struct sem *m)
{
    tfc_value_destroy(m->xv);
    ht_free(&m->xh);
    tfc_graph_destroy(m->g);
}

/* Fetches t (fed x) and checks it against want (freed). */
static void sem_check(struct sem *m, const char *label, tfc_tensor *t, ht want)
{
    tfc_value *got = NULL;
    if (!t) REPORT("%s: no tensor (%s)", label, tfc_graph_errmsg(m->g));
    else if (!run_graph(m->g, label, 1, &m->x, &m->xv, 1, &t, &got))
        check_value(label, "value", got, &want, 0);
    tfc_value_destroy(got);
    ht_free(&want);
}

static tfc_tensor *sum_all(tfc_graph *g, tfc_tensor *t) { return tfc_reduce_sum(g, t, 0, NULL, 0); }

static tfc_tensor *grad1(struct sem *m, tfc_tensor *y, tfc_tensor *x)
{
    tfc_tensor *d = NULL;
    tfc_status st = tfc_gradients(m->g, 1, &y, NULL, 1, &x, &d);
    if (st) REPORT("tfc_gradients failed (%s): %s", tfc_status_string(st), tfc_graph_errmsg(m->g));
    return d;
}

static void test_multi_consumer(void)
{
    struct sem m;
    if (sem_begin(&m, 30)) return;
    /* y = x*x + 3x: x reaches y through three edges */
    tfc_graph *g = m.g;
    tfc_tensor *y = sum_all(g, tfc_add(g, tfc_mul(g, m.x, m.x), tfc_mul(g, tfc_scalar(g, F64, 3), m.x)));
    ht want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 2 * m.xh.d[i] + 3;
    sem_check(&m, "d(x*x + 3x)/dx = 2x + 3", grad1(&m, y, m.x), want);
    sem_end(&m);

    /* 70 consumers: more contributions than one add_n takes */
    if (sem_begin(&m, 31)) return;
    g = m.g;
    y = NULL;
    double total = 0;
    for (int i = 0; i < 70; i++) {
        tfc_tensor *t = sum_all(g, tfc_mul(g, m.x, tfc_scalar(g, F64, 0.5 + i)));
        y = y ? tfc_add(g, y, t) : t;
        total += 0.5 + i;
    }
    want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = total;
    sem_check(&m, "70 consumers of x", grad1(&m, y, m.x), want);
    sem_end(&m);

    /* an intermediate tensor as x; a variable as x; y itself as x */
    if (sem_begin(&m, 32)) return;
    g = m.g;
    tfc_tensor *h = tfc_tanh(g, m.x), *var = tfc_variable(g, "w", F64, S(4), tfc_init_constant(1.5));
    tfc_tensor *ys = sum_all(g, tfc_add(g, tfc_mul(g, h, h), tfc_mul(g, var, m.x)));
    tfc_tensor *xs[3] = {h, var, ys}, *d[3] = {0};
    tfc_status st = tfc_gradients(g, 1, &ys, NULL, 3, xs, d);
    if (st) REPORT("gradients wrt h, a variable, y: %s", tfc_graph_errmsg(g));
    ht w0 = ht_new(F64, S(4)), w1 = ht_copy(&m.xh), w2 = ht_new(F64, S0);
    for (int i = 0; i < 4; i++) w0.d[i] = 2 * tanh(m.xh.d[i]);
    w2.d[0] = 1;
    tfc_value *got[3] = {0};
    if (!st && !run_graph(g, "gradients wrt h, a variable, y", 1, &m.x, &m.xv, 3, d, got)) {
        check_value("d/dh of sum(h*h + w*x), h = tanh(x)", "2h", got[0], &w0, 0);
        check_value("d/dw of sum(h*h + w*x), w a variable", "x", got[1], &w1, 0);
        check_value("dy/dy", "1", got[2], &w2, 1);
    }
    for (int i = 0; i < 3; i++) tfc_value_destroy(got[i]);
    ht_free(&w0), ht_free(&w1), ht_free(&w2);
    sem_end(&m);
}

static void test_unconnected(void)
{
    struct sem m;
    if (sem_begin(&m, 33)) return;
    tfc_graph *g = m.g;
    tfc_tensor *z = tfc_placeholder(g, "z", F64, S(-1, 3));
    tfc_tensor *q = tfc_placeholder(g, "q", F32, S(2));
    tfc_tensor *y = sum_all(g, tfc_exp(g, m.x));
    tfc_tensor *xs[3] = {m.x, z, q}, *d[3] = {0};
    tfc_status st = tfc_gradients(g, 1, &y, NULL, 3, xs, d);
    if (st) {
        REPORT("unconnected xs: %s", tfc_graph_errmsg(g));
    } else {
        ht zh = ht_rand(F64, S(2, 3), -1, 1, 0.1);
        tfc_value *zv = ht_value(&zh), *got[3] = {0};
        ht qh = ht_rand(F32, S(2), -1, 1, 0.1);
        tfc_value *qv = ht_value(&qh);
        /* q must be fed: zeros_like(q) takes its shape from the fed value */
        tfc_tensor *ft[3] = {m.x, z, q};
        tfc_value *fv[3] = {m.xv, zv, qv};
        if (!run_graph(g, "unconnected xs", 3, ft, fv, 3, d, got)) {
            ht w0 = ht_new(F64, S(4)), w1 = ht_new(F64, S(2, 3)), w2 = ht_new(F32, S(2));
            for (int i = 0; i < 4; i++) w0.d[i] = exp(m.xh.d[i]);
            check_value("d/dx exp", "exp(x)", got[0], &w0, 0);
            check_value("x that no y depends on ([-1,3] fed [2,3])", "zeros", got[1], &w1, 1);
            check_value("float32 x that no y depends on", "zeros", got[2], &w2, 1);
            ht_free(&w0), ht_free(&w1), ht_free(&w2);
        }
        for (int i = 0; i < 3; i++) tfc_value_destroy(got[i]);
        tfc_value_destroy(zv), tfc_value_destroy(qv);
        ht_free(&zh), ht_free(&qh);
    }
    sem_end(&m);
}

static void test_stop_gradient(void)
{
    struct sem m;
    if (sem_begin(&m, 34)) return;
    tfc_graph *g = m.g;
    /* d/dx x * stop_gradient(x) = stop_gradient(x)'s value */
    tfc_tensor *y = sum_all(g, tfc_mul(g, m.x, tfc_stop_gradient(g, m.x)));
    sem_check(&m, "d/dx x*stop_gradient(x)", grad1(&m, y, m.x), ht_copy(&m.xh));
    /* a path through stop_gradient only: zeros, no error */
    tfc_tensor *y2 = sum_all(g, tfc_exp(g, tfc_stop_gradient(g, m.x)));
    sem_check(&m, "d/dx exp(stop_gradient(x))", grad1(&m, y2, m.x), ht_new(F64, S(4)));
    sem_end(&m);
}

/* The sum_to_like nodes among g's nodes. */
static int count_sum_to_like(const tfc_graph *g)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++) c += strcmp(g->nodes[i]->op->name, "sum_to_like") == 0;
    return c;
}

/* A dynamic batch beside a bias: x [-1, 3] + b [3] and x * b have x's shape when they run, so
 * x's gradient through them is dy itself, not an identity sum_to_like copying it; b's is summed
 * over the batch. x [-1, 3] * z [-1, 3] keeps both: z may be fed [1, 3] and broadcast. */
static void test_dynamic_batch_no_copy(void)
{
    struct sem m;
    if (sem_begin(&m, 35)) return;
    tfc_graph *g = m.g;
    tfc_tensor *x = tfc_placeholder(g, "xb", F64, S(-1, 3));
    tfc_tensor *z = tfc_placeholder(g, "z", F64, S(-1, 3));
    tfc_tensor *b = tfc_variable(g, "b", F64, S(3), tfc_init_constant(0.25));
    tfc_tensor *y = tfc_add(g, sum_all(g, tfc_relu(g, tfc_add(g, x, b))),
                            tfc_add(g, sum_all(g, tfc_mul(g, x, b)), sum_all(g, tfc_mul(g, x, z))));
    tfc_tensor *xs[3] = {x, b, z}, *d[3] = {0};
    int before = count_sum_to_like(g);
    if (tfc_gradients(g, 1, &y, NULL, 3, xs, d)) {
        REPORT("dynamic batch gradients: %s", tfc_graph_errmsg(g));
        sem_end(&m);
        return;
    }
    /* b's two uses, and x and z in x * z: none for x in x + b and x * b */
    int added = count_sum_to_like(g) - before;
    if (added != 4)
        REPORT("dynamic batch: %d sum_to_like nodes in the gradient, expected 4", added);
    ht xh = ht_rand(F64, S(2, 3), -2, 2, 0.1), zh = ht_rand(F64, S(1, 3), -1, 1, 0.1);
    tfc_value *xv = ht_value(&xh), *zv = ht_value(&zh), *got[3] = {0};
    tfc_tensor *ft[2] = {x, z};
    tfc_value *fv[2] = {xv, zv};
    if (!run_graph(g, "dynamic batch", 2, ft, fv, 3, d, got)) {
        ht wx = ht_new(F64, S(2, 3)), wb = ht_new(F64, S(3)), wz = ht_new(F64, S(1, 3));
        for (int i = 0; i < 6; i++) {
            double xi = xh.d[i], relu_d = xi + 0.25 > 0;
            wx.d[i] = relu_d + 0.25 + zh.d[i % 3];
            wb.d[i % 3] += relu_d + xi;
            wz.d[i % 3] += xi;
        }
        check_value("d/dx, x [-1,3] fed [2,3]", "relu'(x + b) + b + z", got[0], &wx, 0);
        check_value("d/db, b [3]", "summed over the batch", got[1], &wb, 0);
        check_value("d/dz, z [-1,3] fed [1,3]", "summed over the batch", got[2], &wz, 0);
        ht_free(&wx), ht_free(&wb), ht_free(&wz);
    }
    for (int i = 0; i < 3; i++) tfc_value_destroy(got[i]);
    tfc_value_destroy(xv), tfc_value_destroy(zv);
    ht_free(&xh), ht_free(&zh);
    sem_end(&m);
}

/* reduce_max/min share the gradient equally among the elements equal to the result;
 * maximum/minimum give a tie to their first operand (as TensorFlow does) */
static void test_ties(void)
{
    tfc_graph *g = NULL;
    if (tfc_graph_create(&g)) return REPORT("ties: tfc_graph_create");
    ht xh = ht_vals(F64, S(2, 3), (double[]){1, 3, 3, 2, 0, 2});
    tfc_value *xv = ht_value(&xh), *bv = ht_value(&xh), *got[6] = {0};
    tfc_tensor *x = tfc_placeholder(g, "x", F64, S(2, 3)), *b = tfc_placeholder(g, "b", F64, S(2, 3));
    int64_t ax1 = 1;
    tfc_tensor *ys[4] = {tfc_reduce_max(g, x, 1, &ax1, 0), tfc_reduce_max(g, x, 0, NULL, 0),
                         tfc_reduce_min(g, x, 1, &ax1, 1), NULL};
    tfc_tensor *d[6] = {0}, *ab[2] = {x, b};
    for (int k = 0; k < 3; k++)
        if (tfc_gradients(g, 1, &ys[k], NULL, 1, &x, &d[k])) break;
    tfc_tensor *mx = sum_all(g, tfc_maximum(g, x, b)), *mn = sum_all(g, tfc_minimum(g, x, b));
    if (!tfc_graph_status(g)) tfc_gradients(g, 1, &mx, NULL, 1, &ab[1], &d[3]);
    if (!tfc_graph_status(g)) tfc_gradients(g, 1, &mx, NULL, 1, &ab[0], &d[4]);
    if (!tfc_graph_status(g)) tfc_gradients(g, 1, &mn, NULL, 1, &ab[0], &d[5]);
    tfc_value *fv[2] = {xv, bv};
    if (!run_graph(g, "ties", 2, ab, fv, 6, d, got)) {
        static const double want[6][6] = {
            {0, .5, .5, .5, 0, .5}, {0, .5, .5, 0, 0, 0}, {1, 0, 0, 0, 1, 0},
            {0, 0, 0, 0, 0, 0},     {1, 1, 1, 1, 1, 1},   {1, 1, 1, 1, 1, 1}};
        static const char *what[6] = {"reduce_max axis 1", "reduce_max all", "reduce_min axis 1",
                                      "maximum(a, b), a == b: d/db", "maximum: d/da",
                                      "minimum: d/da"};
        for (int k = 0; k < 6; k++) {
            ht w = ht_vals(F64, S(2, 3), want[k]);
            check_value("ties", what[k], got[k], &w, 1);
            ht_free(&w);
        }
    }
    for (int k = 0; k < 6; k++) tfc_value_destroy(got[k]);
    tfc_value_destroy(xv), tfc_value_destroy(bv);
    ht_free(&xh);
    tfc_graph_destroy(g);
}

static void test_grad_ys(void)
{
    struct sem m;
    if (sem_begin(&m, 35)) return;
    tfc_graph *g = m.g;
    ht gh = ht_rand(F64, S(4), -2, 2, 0.1);
    tfc_value *gv = ht_value(&gh);
    tfc_tensor *gy = tfc_constant(g, "gy", gv);
    tfc_value_destroy(gv);
    /* y = x*x (not a scalar), grad_ys = gy: dx = 2 x gy */
    tfc_tensor *y = tfc_mul(g, m.x, m.x), *d = NULL;
    tfc_status st = tfc_gradients(g, 1, &y, &gy, 1, &m.x, &d);
    if (st) REPORT("grad_ys: %s", tfc_graph_errmsg(g));
    ht want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 2 * m.xh.d[i] * gh.d[i];
    sem_check(&m, "d(x*x)/dx with grad_ys", d, want);
    /* a scalar y with a grad_ys of 2.5 next to one with a NULL entry (ones) */
    tfc_tensor *ys[2] = {sum_all(g, tfc_mul(g, m.x, m.x)),
                         sum_all(g, tfc_mul(g, tfc_scalar(g, F64, 3), m.x))};
    tfc_tensor *gys[2] = {tfc_scalar(g, F64, 2.5), NULL};
    d = NULL;
    st = tfc_gradients(g, 2, ys, gys, 1, &m.x, &d);
    if (st) REPORT("grad_ys with a NULL entry: %s", tfc_graph_errmsg(g));
    want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 2.5 * 2 * m.xh.d[i] + 3;
    sem_check(&m, "grad_ys {2.5, NULL}", d, want);
    ht_free(&gh);
    sem_end(&m);
}

static void test_multi_ys(void)
{
    struct sem m;
    if (sem_begin(&m, 36)) return;
    tfc_graph *g = m.g;
    tfc_tensor *ys[3] = {sum_all(g, tfc_mul(g, m.x, m.x)),
                         sum_all(g, tfc_mul(g, tfc_scalar(g, F64, 3), m.x)), NULL};
    tfc_tensor *d = NULL;
    tfc_status st = tfc_gradients(g, 2, ys, NULL, 1, &m.x, &d);
    if (st) REPORT("several ys: %s", tfc_graph_errmsg(g));
    ht want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 2 * m.xh.d[i] + 3;
    sem_check(&m, "ys {sum(x*x), sum(3x)}: summed", d, want);
    /* the same y twice counts twice; a y that is an x's consumer and an x's ancestor */
    ys[2] = ys[0];
    d = NULL;
    st = tfc_gradients(g, 3, ys, NULL, 1, &m.x, &d);
    if (st) REPORT("ys with a repeat: %s", tfc_graph_errmsg(g));
    want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 4 * m.xh.d[i] + 3;
    sem_check(&m, "ys {sum(x*x), sum(3x), sum(x*x)}", d, want);
    sem_end(&m);
}

static void expect_error(tfc_graph *g, const char *label, tfc_status st, tfc_status want,
                         const char *in_msg)
{
    const char *msg = tfc_graph_errmsg(g);
    if (st != want)
        REPORT("%s: status %s, expected %s (%s)", label, tfc_status_string(st),
               tfc_status_string(want), msg);
    else if (tfc_graph_status(g) != want)
        REPORT("%s: the graph's status is %s, expected %s", label,
               tfc_status_string(tfc_graph_status(g)), tfc_status_string(want));
    else if (in_msg && (!msg || !strstr(msg, in_msg)))
        REPORT("%s: the message '%s' does not name '%s'", label, msg ? msg : "(null)", in_msg);
    else
        PASS();
    tfc_graph_clear_error(g);
}

static void test_integer_tensors(void)
{
    struct sem m;
    if (sem_begin(&m, 37)) return;
    tfc_graph *g = m.g, *other = NULL;
    tfc_tensor *ix = tfc_placeholder(g, "ints", I32, S(4));
    tfc_tensor *flags = tfc_placeholder(g, "flags", BOOL, S(4));
    tfc_tensor *y = sum_all(g, tfc_mul(g, m.x, tfc_cast(g, ix, F64)));
    tfc_tensor *am = tfc_argmax(g, m.x, 0);
    tfc_tensor *d[2] = {0}, *xs[2] = {m.x, ix};
    expect_error(g, "an int32 x", tfc_gradients(g, 1, &y, NULL, 2, xs, d), TFC_ERR_DTYPE, "ints");
    expect_error(g, "a bool x", tfc_gradients(g, 1, &y, NULL, 1, &flags, d), TFC_ERR_DTYPE, "flags");
    expect_error(g, "an int64 y (argmax)", tfc_gradients(g, 1, &am, NULL, 1, &m.x, d),
                 TFC_ERR_DTYPE, tfc_tensor_name(am));
    expect_error(g, "no ys", tfc_gradients(g, 0, &y, NULL, 1, &m.x, d),
                 TFC_ERR_INVALID_ARGUMENT, NULL);
    expect_error(g, "NULL dxs", tfc_gradients(g, 1, &y, NULL, 1, &m.x, NULL),
                 TFC_ERR_INVALID_ARGUMENT, NULL);
    if (tfc_graph_create(&other) == TFC_OK) {
        tfc_tensor *ox = tfc_placeholder(other, "ox", F64, S(4));
        expect_error(g, "an x of another graph", tfc_gradients(g, 1, &y, NULL, 1, &ox, d),
                     TFC_ERR_INVALID_ARGUMENT, NULL);
        tfc_graph_destroy(other);
    }
    CU_ASSERT(tfc_gradients(NULL, 1, &y, NULL, 1, &m.x, d) == TFC_ERR_INVALID_ARGUMENT);
    /* after the errors the graph works: an integer path carries no gradient (no error):
     * y = sum(x * cast(cast(x, int32))) -> trunc(x); argmax -> one_hot stops silently */
    tfc_tensor *tr = tfc_cast(g, tfc_cast(g, m.x, I32), F64);
    tfc_tensor *oh = tfc_one_hot(g, tfc_argmax(g, m.x, 0), 4, F64, 1, 0);
    tfc_tensor *y2 = tfc_add(g, sum_all(g, tfc_mul(g, m.x, tr)), sum_all(g, tfc_mul(g, m.x, oh)));
    ht want = ht_new(F64, S(4));
    int best = 0;
    for (int i = 0; i < 4; i++) {
        want.d[i] = trunc(m.xh.d[i]);
        if (m.xh.d[i] > m.xh.d[best]) best = i;
    }
    want.d[best] += 1;
    sem_check(&m, "through int32 cast and argmax/one_hot", grad1(&m, y2, m.x), want);
    sem_end(&m);
}

static void test_no_gradient_ops(void)
{
    struct sem m;
    if (sem_begin(&m, 38)) return;
    tfc_graph *g = m.g;
    /* assign is NO_GRADIENT: the path x -> assign -> y carries nothing, without error */
    tfc_tensor *var = tfc_variable(g, "v", F64, S(4), tfc_init_zeros());
    tfc_tensor *a = tfc_assign(g, var, tfc_mul(g, m.x, tfc_scalar(g, F64, 2)));
    tfc_tensor *y = tfc_add(g, sum_all(g, a), sum_all(g, tfc_square(g, m.x)));
    ht want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 2 * m.xh.d[i];
    sem_check(&m, "d/dx through assign (NO_GRADIENT)", grad1(&m, y, m.x), want);
    sem_end(&m);
}

/* an op without gradient builder and without TFC_OP_NO_GRADIENT, made from identity's
 * descriptor (runs identity's kernel) */
extern const struct tfc_op tfc_op_identity;
static struct tfc_op no_grad_op, no_grad_flagged_op;

static tfc_status ident_grad(tfc_graph *g, int n_inputs, tfc_tensor *const *inputs,
                             int n_outputs, tfc_tensor *const *outputs, tfc_tensor *const *dys,
                             tfc_tensor **dxs, void *user)
{
    dxs[0] = tfc_mul(g, dys[0], tfc_scalar(g, tfc_tensor_dtype(dys[0]), *(const double *)user));
    return tfc_graph_status(g);
}

static void test_missing_gradient(void)
{
    /* ops of the table that have no builder and are not flagged: a gradient path through any
     * of them must be an error naming it; tried with float64 inputs of shape [3] */
    int n_missing = 0;
    for (int i = 0; i < tfc_op_table_size; i++) {
        const struct tfc_op *op = tfc_op_table[i];
        if (op->grad || (op->flags & (TFC_OP_SOURCE | TFC_OP_NO_GRADIENT))) continue;
        n_missing++;
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) continue;
        int n = op->flags & TFC_OP_VARIADIC ? 1 : op->n_inputs;
        tfc_tensor *in[TFC_MAX_OPERANDS], *x = NULL, *out = NULL, *d = NULL;
        for (int k = 0; k < n; k++) {
            char name[16];
            snprintf(name, sizeof name, "i%d", k);
            in[k] = k < op->n_state ? tfc_variable(g, name, F64, S(3), tfc_init_ones())
                                    : tfc_placeholder(g, name, F64, S(3));
            if (!x && k >= op->n_state) x = in[k];
        }
        if (!x && n) x = in[0];
        if (x) out = tfc_op(g, op->name, n, in, NULL, NULL, 0);
        if (!out || !tfc_dtype_is_float(tfc_tensor_dtype(out))) {
            fprintf(stderr, "\n  note: op '%s' has no gradient builder and no NO_GRADIENT flag; "
                    "not buildable generically (%s), its error path is covered by the "
                    "synthetic op\n", op->name, tfc_graph_errmsg(g));
        } else {
            tfc_tensor *y = sum_all(g, out);
            char label[96];
            snprintf(label, sizeof label, "gradient through op '%s' (no builder)", op->name);
            expect_error(g, label, tfc_gradients(g, 1, &y, NULL, 1, &x, &d), TFC_ERR_NOT_FOUND,
                         op->name);
        }
        tfc_graph_destroy(g);
    }
    fprintf(stderr, "\n  %d op(s) of the table have neither a gradient nor NO_GRADIENT\n",
            n_missing);

    /* the synthetic op: an error naming the op and the node; dxs cleared */
    no_grad_op = tfc_op_identity;
    no_grad_op.name = "test_no_grad";
    no_grad_op.grad = NULL;
    no_grad_op.flags &= ~(unsigned)TFC_OP_NO_GRADIENT;
    no_grad_flagged_op = no_grad_op;
    no_grad_flagged_op.name = "test_no_grad_flagged";
    no_grad_flagged_op.flags |= TFC_OP_NO_GRADIENT;
    struct sem m;
    if (sem_begin(&m, 39)) return;
    tfc_graph *g = m.g;
    tfc_tensor *t = tfc_build(g, &no_grad_op, 1, &m.x, NULL);
    if (t) tfc_tensor_set_name(t, "opaque");
    tfc_tensor *y = sum_all(g, tfc_exp(g, t)), *d = m.x; /* must come back NULL */
    tfc_status st = tfc_gradients(g, 1, &y, NULL, 1, &m.x, &d);
    expect_error(g, "gradient through an op without gradient", st, TFC_ERR_NOT_FOUND,
                 "test_no_grad");
    if (d != NULL) REPORT("a failed tfc_gradients left dxs[0] = %p, expected NULL", (void *)d);
    /* the message names the node too */
    st = tfc_gradients(g, 1, &y, NULL, 1, &m.x, &d);
    if (!strstr(tfc_graph_errmsg(g), "opaque"))
        REPORT("the error '%s' does not name the node 'opaque'", tfc_graph_errmsg(g));
    else
        PASS();
    tfc_graph_clear_error(g);
    /* a path around it still errs; a path that avoids it does not */
    tfc_tensor *y_ok = sum_all(g, tfc_square(g, m.x));
    ht want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 2 * m.xh.d[i];
    sem_check(&m, "a y that does not depend on the op without gradient", grad1(&m, y_ok, m.x),
              want);
    /* the same op flagged NO_GRADIENT: zeros, no error */
    tfc_tensor *tf = tfc_build(g, &no_grad_flagged_op, 1, &m.x, NULL);
    tfc_tensor *yf = tfc_add(g, sum_all(g, tfc_exp(g, tf)), sum_all(g, m.x));
    want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 1;
    sem_check(&m, "a path through a NO_GRADIENT op", grad1(&m, yf, m.x), want);
    /* a gradient set on the node makes the path differentiable */
    static const double three = 3;
    tfc_tensor_set_gradient(t, ident_grad, (void *)&three);
    want = ht_new(F64, S(4));
    for (int i = 0; i < 4; i++) want.d[i] = 3 * exp(m.xh.d[i]);
    sem_check(&m, "the op without gradient, given one by tfc_tensor_set_gradient",
              grad1(&m, y, m.x), want);
    sem_end(&m);
}

/* ---- user gradients -------------------------------------------------------------------- */

struct ug {
    double scale;
    int calls, bad;
    int n_out, dy_null[4];
    tfc_status fail;
};

static tfc_status user_grad(tfc_graph *g, int n_inputs, tfc_tensor *const *inputs, int n_outputs,
                            tfc_tensor *const *outputs, tfc_tensor *const *dys, tfc_tensor **dxs,
                            void *user)
{
    struct ug *u = user;
    u->calls++;
    u->n_out = n_outputs;
    for (int k = 0; k < n_outputs && k < 4; k++) u->dy_null[k] = dys[k] == NULL;
    if (u->fail) return u->fail;
    if (strcmp(tfc_tensor_op(outputs[0]), "split") == 0) return TFC_OK; /* no gradient */
    if (n_inputs != 1 || n_outputs != 1 || !dys[0] || !inputs[0] ||
        strcmp(tfc_tensor_op(outputs[0]), "tanh") != 0)
        u->bad++;
    dxs[0] = tfc_mul(g, dys[0], tfc_scalar(g, F64, u->scale));
    return tfc_graph_status(g);
}

/* y = sum(tanh(x)) + sum(tanh(2x)): d/dx = g1 + 2 g2 with each tanh's gradient */
static tfc_tensor *two_tanh(struct sem *m, tfc_tensor **t1, tfc_tensor **t2)
{
    tfc_graph *g = m->g;
    *t1 = tfc_tanh(g, m->x);
    *t2 = tfc_tanh(g, tfc_mul(g, m->x, tfc_scalar(g, F64, 2)));
    return tfc_add(g, sum_all(g, *t1), sum_all(g, *t2));
}

static ht two_tanh_want(const ht *x, double g1, double g2) /* NAN: the built-in gradient */
{
    ht w = ht_new(F64, x->sh);
    for (int i = 0; i < x->n; i++) {
        double a = tanh(x->d[i]), b = tanh(2 * x->d[i]);
        w.d[i] = (isnan(g1) ? 1 - a * a : g1) + 2 * (isnan(g2) ? 1 - b * b : g2);
    }
    return w;
}

static void test_user_gradients(void)
{
    struct sem m;
    struct ug u = {.scale = 7}, un = {.scale = 5};
    tfc_tensor *t1, *t2, *y;

    /* registered for the op: every tanh node uses it */
    CU_ASSERT_EQUAL(tfc_register_gradient("tanh", user_grad, &u), TFC_OK);
    if (sem_begin(&m, 40)) goto restore;
    y = two_tanh(&m, &t1, &t2);
    sem_check(&m, "tanh's gradient registered (scale 7) on both nodes", grad1(&m, y, m.x),
              two_tanh_want(&m.xh, 7, 7));
    if (u.calls != 2 || u.bad)
        REPORT("the registered gradient ran %d times (expected 2), %d bad calls", u.calls, u.bad);
    /* a per-node gradient wins over the registered one, for its node only */
    u.calls = 0;
    tfc_tensor_set_gradient(t1, user_grad, &un);
    sem_check(&m, "per-node gradient (scale 5) over registered (scale 7)", grad1(&m, y, m.x),
              two_tanh_want(&m.xh, 5, 7));
    CU_ASSERT(u.calls == 1 && un.calls == 1);
    sem_end(&m);

    /* restored: built-in again; restoring twice is harmless */
    CU_ASSERT_EQUAL(tfc_register_gradient("tanh", NULL, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_register_gradient("tanh", NULL, NULL), TFC_OK);
    if (sem_begin(&m, 41)) goto restore;
    y = two_tanh(&m, &t1, &t2);
    u.calls = 0;
    sem_check(&m, "tanh's gradient restored", grad1(&m, y, m.x),
              two_tanh_want(&m.xh, NAN, NAN));
    CU_ASSERT_EQUAL(u.calls, 0);
    /* per node only */
    un.calls = 0;
    tfc_tensor_set_gradient(t2, user_grad, &un);
    sem_check(&m, "per-node gradient on the second tanh only", grad1(&m, y, m.x),
              two_tanh_want(&m.xh, NAN, 5));
    CU_ASSERT_EQUAL(un.calls, 1);
    /* and removed again with NULL */
    tfc_tensor_set_gradient(t2, NULL, NULL);
    sem_check(&m, "per-node gradient removed", grad1(&m, y, m.x), two_tanh_want(&m.xh, NAN, NAN));
    sem_end(&m);

    /* errors */
    CU_ASSERT_EQUAL(tfc_register_gradient("nope", user_grad, &u), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "nope"));
    CU_ASSERT_EQUAL(tfc_register_gradient(NULL, user_grad, &u), TFC_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(tfc_tensor_set_gradient(NULL, user_grad, &u), TFC_ERR_INVALID_ARGUMENT);

    /* a user function that fails: its status, a message naming the node */
    if (sem_begin(&m, 42)) goto restore;
    struct ug uf = {.fail = TFC_ERR_SHAPE};
    tfc_tensor *th = tfc_tanh(m.g, m.x), *d = NULL;
    tfc_tensor_set_name(th, "my_tanh");
    tfc_tensor_set_gradient(th, user_grad, &uf);
    y = sum_all(m.g, th);
    expect_error(m.g, "a failing user gradient", tfc_gradients(m.g, 1, &y, NULL, 1, &m.x, &d),
                 TFC_ERR_SHAPE, "my_tanh");
    sem_end(&m);

    /* dys[k] is NULL for the outputs no gradient reaches: split, outputs 0 and 2 used */
    if (sem_begin(&m, 43)) goto restore;
    struct ug us = {.scale = 1};
    tfc_tensor *parts[2] = {0};
    tfc_tensor *x6 = tfc_placeholder(m.g, "x12", F64, S(12)), *sp[3] = {0};
    tfc_split(m.g, x6, 3, 0, sp);
    parts[0] = sp[0], parts[1] = sp[2];
    tfc_tensor_set_gradient(sp[0], user_grad, &us);
    y = tfc_add(m.g, sum_all(m.g, parts[0]), sum_all(m.g, tfc_mul(m.g, parts[1], m.x)));
    tfc_tensor *xs[2] = {x6, m.x}, *dd[2] = {0};
    tfc_status st = tfc_gradients(m.g, 1, &y, NULL, 2, xs, dd);
    if (st) REPORT("split with a user gradient: %s", tfc_graph_errmsg(m.g));
    else if (us.calls != 1 || us.n_out != 3 || us.dy_null[0] || !us.dy_null[1] || us.dy_null[2])
        REPORT("split's user gradient: %d calls, %d outputs, dys NULL: %d %d %d (expected 1 call, "
               "3 outputs, 0 1 0)", us.calls, us.n_out, us.dy_null[0], us.dy_null[1],
               us.dy_null[2]);
    else
        PASS();
    sem_end(&m);
restore:
    tfc_register_gradient("tanh", NULL, NULL);
}

/* ---- coverage -------------------------------------------------------------------------- */

static void test_grad_table(void)
{
    int n = 0;
    if (tfc_op_table_size > (int)sizeof g_verified)
        REPORT("the op table has %d ops; raise g_verified", tfc_op_table_size);
    for (int i = 0; i < tfc_op_table_size; i++) {
        const struct tfc_op *op = tfc_op_table[i];
        if (!op->grad) continue;
        n++;
        int found = 0;
        for (int k = 0; k < COUNT(grad_cases) && !found; k++)
            found = strcmp(grad_cases[k].op, op->name) == 0;
        if (!found)
            REPORT("op '%s' has a gradient builder but no case in test_grad.c (add one and list "
                   "it in grad_cases[])", op->name);
        else
            PASS();
    }
    for (int k = 0; k < COUNT(grad_cases); k++) {
        const struct tfc_op *op = tfc_op_lookup(grad_cases[k].op);
        if (!op || !op->grad)
            REPORT("grad_cases[] lists '%s', which is not an op with a gradient",
                   grad_cases[k].op);
    }
    CU_ASSERT(n > 0);
}

static void test_all_verified(void)
{
    for (int i = 0; i < tfc_op_table_size && i < (int)sizeof g_verified; i++) {
        if (!tfc_op_table[i]->grad) continue;
        if (!g_verified[i])
            REPORT("the gradient of op '%s' was not verified by any passing case",
                   tfc_op_table[i]->name);
        else
            PASS();
    }
}

/* ---- main ------------------------------------------------------------------------------ */

static int suite_init(enum tfc_dtype dt)
{
    g_dt = dt;
    g_eps = dt == F32 ? GC_EPS32 : GC_EPS;
    g_atol = dt == F32 ? GC_TOL32 : GC_ATOL;
    g_rtol = dt == F32 ? GC_TOL32 : GC_RTOL;
    g_cases = g_runs = 0;
    g_worst = 0;
    g_worst_at[0] = 0;
    g_t0 = now_s();
    if (tfc_ctx_create(&g_ctx)) {
        fprintf(stderr, "tfc_ctx_create: %s\n", tfc_errmsg());
        return 1;
    }
    if (g_cuda || g_ocl) {
        tfc_ctx_info info;
        int have = !tfc_ctx_info_get(g_ctx, &info) &&
                   (g_cuda ? info.n_cuda_workers : info.n_opencl_workers) > 0;
        if (!have) {
            fprintf(stderr, "TFC_TEST_WHERE=%s but StarPU has no such worker: skipped\n",
                    g_cuda ? "cuda" : "opencl");
            tfc_ctx_destroy(g_ctx);
            exit(77);
        }
    }
    return 0;
}
static int suite_init64(void) { return suite_init(F64); }
static int suite_init32(void) { return suite_init(F32); }

static int suite_clean(void)
{
    tfc_ctx_destroy(g_ctx);
    g_ctx = NULL;
    fprintf(stderr, "\n%s: %d gradient cases, %d runs in %.2f s; worst error %.3g of the "
            "tolerance (%s)\n", DT(g_dt), g_cases, g_runs, now_s() - g_t0, g_worst, g_worst_at);
    return 0;
}

/* the sweep: run in float64 and in float32 */
/* batch_norm in both modes (training a fixed float32 scalar), through y alone and through its
 * statistics outputs too; layer_norm; and their gradient ops called by name. */
static void test_norm(void)
{
    static const struct {
        tfc_shape sh;
        int dyn;
    } q[] = {{{2, {4, 3}}, 0}, {{4, {2, 2, 2, 2}}, 0}, {{3, {3, 2, 2}}, 1}};
    rng_seed(61);
    for (int i = 0; i < COUNT(q); i++)
        for (int training = 0; training < 2; training++)
            for (int stats = 0; stats < 2; stats++) {
                struct gc c;
                tfc_shape cs = tfc_shape_of(1, &q[i].sh.dims[1]);
                gc_begin(&c, "batch_norm", "%s training=%d%s%s", SHP(q[i].sh), training,
                         stats ? ", mean and var used" : "", q[i].dyn ? " (dynamic)" : "");
                c.dyn = q[i].dyn;
                tfc_tensor *in[6], *outs[3] = {0};
                in[0] = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
                in[1] = gc_x(&c, ht_rand(F64, cs, 0.5, 2, 0));
                in[2] = gc_x(&c, ht_rand(F64, cs, -1, 1, 0));
                in[3] = gc_x(&c, ht_rand(F64, cs, -1, 1, 0));
                in[4] = gc_x(&c, ht_rand(F64, cs, 0.5, 2, 0));
                in[5] = gc_fixed(&c, ht_vals(F32, S0, (double[]){training}));
                tfc_op(c.g, "batch_norm", 6, in, "epsilon=0.01", outs, 3);
                for (int k = 0; k < (stats ? 3 : 1); k++) gc_use(&c, outs[k]);
                gc_run(&c);
                if (stats) continue; /* the gradient op: once per shape and mode */
                gc_begin(&c, "batch_norm_grad", "%s training=%d%s", SHP(q[i].sh), training,
                         q[i].dyn ? " (dynamic)" : "");
                c.dyn = q[i].dyn;
                tfc_tensor *gin[6], *gout[5] = {0};
                gin[0] = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
                gin[1] = gc_x(&c, ht_rand(F64, q[i].sh, -2, 2, 0));
                gin[2] = gc_x(&c, ht_rand(F64, cs, 0.5, 2, 0));
                gin[3] = gc_x(&c, ht_rand(F64, cs, -1, 1, 0));
                gin[4] = gc_x(&c, ht_rand(F64, cs, 0.5, 2, 0));
                gin[5] = gc_fixed(&c, ht_vals(F32, S0, (double[]){training}));
                tfc_op(c.g, "batch_norm_grad", 6, gin, "epsilon=0.01", gout, 5);
                for (int k = 0; k < 5; k++) gc_use(&c, gout[k]);
                gc_run(&c);
            }
    static const struct {
        tfc_shape sh;
        int k, dyn;
    } l[] = {{{2, {3, 4}}, 1, 0}, {{3, {2, 3, 2}}, 2, 1}, {{2, {2, 3}}, 2, 0}};
    for (int i = 0; i < COUNT(l); i++)
        for (int stats = 0; stats < 2; stats++) {
            struct gc c;
            char attrs[64];
            snprintf(attrs, sizeof attrs, "epsilon=0.01,n_axes=%d", l[i].k);
            gc_begin(&c, "layer_norm", "%s n_axes=%d%s%s", SHP(l[i].sh), l[i].k,
                     stats ? ", mean and var used" : "", l[i].dyn ? " (dynamic)" : "");
            c.dyn = l[i].dyn;
            tfc_tensor *x = gc_x(&c, ht_rand(F64, l[i].sh, -2, 2, 0)), *outs[3] = {0};
            tfc_op(c.g, "layer_norm", 1, &x, attrs, outs, 3);
            for (int k = 0; k < (stats ? 3 : 1); k++) gc_use(&c, outs[k]);
            gc_run(&c);
            if (stats) continue;
            tfc_shape outer = tfc_shape_of(l[i].sh.rank - l[i].k, l[i].sh.dims);
            gc_begin(&c, "layer_norm_grad", "%s n_axes=%d%s", SHP(l[i].sh), l[i].k,
                     l[i].dyn ? " (dynamic)" : "");
            c.dyn = l[i].dyn && outer.rank > 0;
            tfc_tensor *gin[4];
            gin[0] = gc_x(&c, ht_rand(F64, l[i].sh, -2, 2, 0));
            gin[1] = gc_x(&c, ht_rand(F64, l[i].sh, -2, 2, 0));
            gin[2] = gc_x(&c, ht_rand(F64, outer, -1, 1, 0));
            gin[3] = gc_x(&c, ht_rand(F64, outer, 0.5, 2, 0));
            gc_use(&c, tfc_op(c.g, "layer_norm_grad", 4, gin, attrs, NULL, 0));
            gc_run(&c);
        }
}

static const struct {
    const char *name;
    CU_TestFunc fn;
} sweep[] = {
    {"unary", test_unary},
    {"cast", test_cast},
    {"binary with broadcasting", test_binary},
    {"select", test_select},
    {"cond/while_loop", test_control_flow_grads},
    {"bias_add", test_bias_add},
    {"add_n", test_add_n},
    {"matmul", test_matmul},
    {"batch_matmul", test_batch_matmul},
    {"conv", test_conv},
    {"conv_transpose", test_conv_transpose},
    {"softmax/log_softmax", test_softmax},
    {"cross entropy", test_xent},
    {"reductions", test_reduce},
    {"reshape", test_reshape},
    {"transpose", test_transpose},
    {"concat", test_concat},
    {"split", test_split},
    {"slice", test_slice},
    {"gather", test_gather},
    {"gradient ops", test_grad_ops},
    {"pooling", test_pool},
    {"pad/pad_grad", test_pad},
    {"dropout/dropout_grad", test_dropout},
    {"batch_norm/layer_norm", test_norm},
    {"composite", test_composite},
};

/* float64 only */
static const struct {
    const char *name;
    CU_TestFunc fn;
} semantics[] = {
    {"Hessian-vector product", test_hvp},
    {"ties", test_ties},
    {"several consumers", test_multi_consumer},
    {"unconnected xs", test_unconnected},
    {"dynamic batch: no identity sum_to_like", test_dynamic_batch_no_copy},
    {"stop_gradient", test_stop_gradient},
    {"grad_ys", test_grad_ys},
    {"several ys", test_multi_ys},
    {"integer tensors", test_integer_tensors},
    {"NO_GRADIENT ops", test_no_gradient_ops},
    {"ops without gradient", test_missing_gradient},
    {"user gradients", test_user_gradients},
    {"every gradient verified", test_all_verified},
};

int main(void)
{
    const char *where = getenv("TFC_TEST_WHERE");
    g_cuda = where && strcmp(where, "cuda") == 0;
    g_ocl = where && strcmp(where, "opencl") == 0;
    if (where && *where && !g_cuda && !g_ocl) {
        fprintf(stderr, "TFC_TEST_WHERE=%s: only 'cuda' and 'opencl' are known\n", where);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite t = CU_add_suite("op table", NULL, NULL);
    if (!t || !CU_add_test(t, "every op with a gradient has a case", test_grad_table)) return 1;
    CU_pSuite s = CU_add_suite("gradients float64", suite_init64, suite_clean);
    if (!s) return 1;
    for (int i = 0; i < COUNT(sweep); i++)
        if (!CU_add_test(s, sweep[i].name, sweep[i].fn)) return 1;
    for (int i = 0; i < COUNT(semantics); i++)
        if (!CU_add_test(s, semantics[i].name, semantics[i].fn)) return 1;
    s = CU_add_suite("gradients float32", suite_init32, suite_clean);
    if (!s) return 1;
    for (int i = 0; i < COUNT(sweep); i++)
        if (!CU_add_test(s, sweep[i].name, sweep[i].fn)) return 1;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
