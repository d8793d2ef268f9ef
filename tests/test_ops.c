/* test_ops.c: the op sweep, in the style of ggml's test-backend-ops.
 *
 * Every registered op (tfc_op_count / tfc_op_name) must have a case here: the first suite fails
 * when an op of the table is missing from op_cases[], and each scheduler suite ends by checking
 * that every registered op was actually run and verified under that scheduler. A case builds a
 * small graph over placeholders fed with deterministic random inputs (kept in each op's domain),
 * runs it with tfc_session_run and compares every fetched value with a float64 reference
 * computed here by plain C loops (never by the library): relative tolerance 1e-5 for float32
 * (1e-4 for exp/pow/softplus/softmax/xent), 1e-12 for float64, exact for integer and bool
 * outputs. Shapes include scalars, broadcasting, empty tensors and > 8 StarPU buffers.
 *
 * Environment:
 *   TFC_TEST_SCHEDS  space-separated STARPU_SCHED values to sweep (default "eager lws dmda dmdas");
 *                    StarPU is started and shut down once per scheduler.
 *   TFC_TEST_HOP=opencl  every produced value is copied through a task pinned to the OpenCL
 *                    worker (device coherence); exits 77 when StarPU has no OpenCL worker.
 *   TFC_TEST_WHERE=cuda  every op task is pinned to the CUDA worker, so every CUDA kernel is
 *                    checked against the float64 reference; exits 77 without a CUDA worker.
 *   TFC_TEST_WHERE=opencl  every op task whose codelet has an OpenCL implementation for its
 *                    kind and dtypes is pinned to the OpenCL worker (the rest run unpinned, on
 *                    the CPU); exits 77 without an OpenCL worker (STARPU_OPENCL_ON_CPUS=1 with
 *                    PoCL).
 *   TFC_TEST_WHERE=alternate  as opencl, but every other such task is pinned to the CPU, so
 *                    values cross memory nodes in both directions.
 */
#include <CUnit/Basic.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <starpu.h>
#include "../src/tfc.h"
#include "../sched/testing.h"
#include "../codelets/kargs.h"    /* test_conv_batch_tiles: the conv codelet's arguments */
#include "../codelets/kernel.h"   /* test_matmul_footprints: tfc_kargs_finish */
#include "../codelets/matmul_dnnl.h" /* test_matmul_backends: whether oneDNN ran */
#include "../codelets/op_attrs.h"
#include "../codelets/philox.h"   /* test_dropout: the generator of the reference masks */
#include "cflow_cases.h"
#include "host_tensor.h"



/* ---- which test covers which op ---------------------------------------------------------- */

/* Every registered op must appear here (checked against the op table by test_op_table); the
 * sweep also records which ops each scheduler actually ran and verified. */
static const struct {
    const char *op;
    const char *where;
} op_cases[] = {
    {"placeholder", "every case (fed inputs)"},
    {"constant", "test_binary_float, test_add_n"},
    {"variable", "test_assign"},
    {"neg", "test_unary_float, test_unary_int_bool"},
    {"abs", "test_unary_float, test_unary_int_bool"},
    {"square", "test_unary_float, test_unary_int_bool"},
    {"sqrt", "test_unary_float"},
    {"rsqrt", "test_unary_float"},
    {"exp", "test_unary_float"},
    {"log", "test_unary_float"},
    {"relu", "test_unary_float"},
    {"sigmoid", "test_unary_float"},
    {"tanh", "test_unary_float"},
    {"softplus", "test_unary_float"},
    {"logical_not", "test_unary_int_bool"},
    {"erf", "test_unary_float"},
    {"gelu", "test_unary_float"},
    {"gelu_tanh", "test_unary_float"},
    {"elu", "test_unary_float"},
    {"selu", "test_unary_float"},
    {"leaky_relu", "test_unary_float"},
    {"silu", "test_unary_float"},
    {"hard_sigmoid", "test_unary_float"},
    {"softsign", "test_unary_float"},
    {"sin", "test_unary_float"},
    {"cos", "test_unary_float"},
    {"reciprocal", "test_unary_float"},
    {"log1p", "test_unary_float"},
    {"expm1", "test_unary_float"},
    {"floor", "test_unary_float, test_unary_special, test_unary_int_bool"},
    {"ceil", "test_unary_float, test_unary_special, test_unary_int_bool"},
    {"round", "test_unary_float, test_unary_special, test_unary_int_bool"},
    {"sign", "test_unary_float, test_unary_special, test_unary_int_bool"},
    {"clip", "test_unary_float, test_unary_special, test_unary_int_bool"},
    {"is_nan", "test_unary_special"},
    {"is_inf", "test_unary_special"},
    {"identity", "test_unary_float, test_unary_int_bool"},
    {"cast", "test_cast"},
    {"add", "test_binary_float, test_binary_int"},
    {"sub", "test_binary_float, test_binary_int"},
    {"mul", "test_binary_float, test_binary_int"},
    {"div", "test_binary_float"},
    {"maximum", "test_binary_float, test_binary_int"},
    {"minimum", "test_binary_float, test_binary_int"},
    {"pow", "test_binary_float"},
    {"equal", "test_compare_logic"},
    {"not_equal", "test_compare_logic"},
    {"less", "test_compare_logic"},
    {"greater", "test_compare_logic"},
    {"logical_and", "test_compare_logic"},
    {"logical_or", "test_compare_logic"},
    {"select", "test_select"},
    {"bias_add", "test_bias_add"},
    {"add_n", "test_add_n"},
    {"fill", "test_fill_like"},
    {"zeros_like", "test_fill_like"},
    {"ones_like", "test_fill_like"},
    {"matmul", "test_matmul"},
    {"batch_matmul", "test_batch_matmul"},
    {"softmax", "test_softmax"},
    {"log_softmax", "test_softmax"},
    {"softmax_cross_entropy", "test_xent, test_xent_rows"},
    {"sparse_softmax_cross_entropy", "test_xent, test_xent_rows, test_errors"},
    {"reduce_sum", "test_reduce"},
    {"reduce_mean", "test_reduce"},
    {"reduce_max", "test_reduce"},
    {"reduce_min", "test_reduce"},
    {"argmax", "test_argmax"},
    {"reshape", "test_reshape, test_squeeze"},
    {"transpose", "test_transpose"},
    {"concat", "test_concat"},
    {"split", "test_split"},
    {"slice", "test_slice"},
    {"gather", "test_gather, test_errors"},
    {"one_hot", "test_one_hot"},
    {"assign", "test_assign"},
    {"assign_add", "test_assign"},
    {"assign_sub", "test_assign"},
    {"group", "test_grad_ops"},
    {"stop_gradient", "test_grad_ops"},
    {"reshape_like", "test_grad_ops"},
    {"broadcast_like", "test_grad_ops"},
    {"sum_to_like", "test_grad_ops"},
    {"relu_grad", "test_grad_ops"},
    {"slice_grad", "test_grad_ops"},
    {"scatter_add_rows", "test_grad_ops"},
    {"apply_sgd", "test_optim_ops"},
    {"apply_momentum", "test_optim_ops"},
    {"apply_adagrad", "test_optim_ops"},
    {"apply_rmsprop", "test_optim_ops"},
    {"apply_adam", "test_optim_ops"},
    {"lr_schedule", "test_optim_ops"},
    {"conv", "test_conv, test_conv_errors"},
    {"conv_backprop_input", "test_conv"},
    {"conv_backprop_filter", "test_conv"},
    {"conv_transpose", "test_conv_transpose"},
    {"max_pool", "test_pool"},
    {"avg_pool", "test_pool"},
    {"max_pool_grad", "test_pool, test_pool_grad_range"},
    {"max_pool_gather", "test_pool"},
    {"avg_pool_grad", "test_pool"},
    {"pad", "test_pad"},
    {"pad_grad", "test_pad"},
    {"dropout", "test_dropout"},
    {"dropout_grad", "test_dropout"},
    {"batch_norm", "test_norm"},
    {"batch_norm_grad", "test_norm"},
    {"batch_norm_update", "test_norm"},
    {"layer_norm", "test_norm"},
    {"layer_norm_grad", "test_norm"},
    {"placeholder_with_default", "test_grad_ops (fed input); test_session (default)"},
};

/* ---- globals ------------------------------------------------------------------------------ */

static tfc_ctx *g_ctx;
static const char *g_sched = "";
static int g_hop, g_cuda;
static int g_ocl; /* TFC_TEST_WHERE: 1 opencl, 2 alternate */
static char *g_scheds[16];
static int g_nscheds, g_suite_next;
static unsigned char g_executed[512];
static int g_cases;
static double g_suite_t0;

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
    fprintf(stderr, "\n[sched=%s] FAIL (test_ops.c:%d): %s\n", g_sched, line, buf);
    CU_assertImplementation(CU_FALSE, (unsigned)line, buf, __FILE__, "", CU_FALSE);
}
#define REPORT(...) report_at(__LINE__, __VA_ARGS__)
#define PASS() CU_assertImplementation(CU_TRUE, __LINE__, "ok", __FILE__, "", CU_FALSE)

static void mark(const char *op)
{
    for (int i = 0; i < tfc_op_count() && i < (int)sizeof g_executed; i++)
        if (op && strcmp(tfc_op_name(i), op) == 0) g_executed[i] = 1;
}





/* ---- host tensors: the reference side, every element held as a double ------------------- */



static double tol_of(enum tfc_dtype dt) { return dt == F32 ? 1e-5 : dt == F64 ? 1e-12 : 0; }
static double tol_loose(enum tfc_dtype dt) { return dt == F32 ? 1e-4 : dt == F64 ? 1e-12 : 0; }








static double load_el(const void *p, enum tfc_dtype dt, int64_t i)
{
    switch (dt) {
    case F32: return ((const float *)p)[i];
    case F64: return ((const double *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}



/* ---- broadcasting helpers ----------------------------------------------------------------- */

static tfc_shape bshape(int n, const tfc_shape *s)
{
    tfc_shape o = {0};
    for (int k = 0; k < n; k++) if (s[k].rank > o.rank) o.rank = s[k].rank;
    for (int d = 0; d < o.rank; d++) {
        int64_t dim = 1;
        for (int k = 0; k < n; k++) {
            int id = s[k].rank - (o.rank - d);
            int64_t v = id >= 0 ? s[k].dims[id] : 1;
            if (v != 1) dim = v;
        }
        o.dims[d] = dim;
    }
    return o;
}

/* The element of a tensor of shape `in` that broadcasts to flat index `flat` of shape `out`. */
static int64_t bidx(tfc_shape in, tfc_shape out, int64_t flat)
{
    int64_t idx = 0, stride = 1;
    for (int d = out.rank - 1; d >= 0; d--) {
        int64_t c = flat % out.dims[d];
        flat /= out.dims[d];
        int id = in.rank - (out.rank - d);
        if (id >= 0) {
            if (in.dims[id] != 1) idx += c * stride;
            stride *= in.dims[id];
        }
    }
    return idx;
}

static void unravel(tfc_shape s, int64_t flat, int64_t *idx)
{
    for (int d = s.rank - 1; d >= 0; d--) {
        idx[d] = flat % s.dims[d];
        flat /= s.dims[d];
    }
}

static void strides(tfc_shape s, int64_t *st)
{
    int64_t k = 1;
    for (int d = s.rank - 1; d >= 0; d--) {
        st[d] = k;
        k *= s.dims[d];
    }
}

/* ---- one case: a graph, its feeds, and the expected fetches ------------------------------ */

#define TC_MAX 64

struct tc {
    tfc_graph *g;
    char label[192];
    int dyn;        /* placeholders of rank >= 1 get an unknown leading dimension */
    int nfeed;
    tfc_tensor *ft[TC_MAX];
    tfc_value *fv[TC_MAX];
    int nfetch;
    tfc_tensor *fetch[TC_MAX];
    ht want[TC_MAX];
    double tol[TC_MAX];
    char what[TC_MAX][96];
    int used_const;
};

static void tc_begin(struct tc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tc_begin(struct tc *c, const char *fmt, ...)
{
    memset(c, 0, sizeof *c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, ap);
    va_end(ap);
    if (tfc_graph_create(&c->g)) REPORT("%s: tfc_graph_create: %s", c->label, tfc_errmsg());
}

static tfc_tensor *tc_in(struct tc *c, const ht *h)
{
    if (!c->g) return NULL;
    if (c->nfeed == TC_MAX) {
        REPORT("%s: too many feeds", c->label);
        return NULL;
    }
    char name[16];
    snprintf(name, sizeof name, "in%d", c->nfeed);
    tfc_shape ps = h->sh;
    if (c->dyn && ps.rank > 0) ps.dims[0] = -1;
    tfc_tensor *t = tfc_placeholder(c->g, name, h->dt, ps);
    if (!t) return NULL;
    c->ft[c->nfeed] = t;
    c->fv[c->nfeed] = ht_value(h);
    c->nfeed++;
    return t;
}

static tfc_tensor *tc_const(struct tc *c, const ht *h)
{
    if (!c->g) return NULL;
    tfc_value *v = ht_value(h);
    tfc_tensor *t = tfc_constant(c->g, NULL, v);
    tfc_value_destroy(v);
    c->used_const = 1;
    return t;
}

/* Expects t to equal want (owned by the case from here on). */
static void tc_want(struct tc *c, tfc_tensor *t, ht want, double tol, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void tc_want(struct tc *c, tfc_tensor *t, ht want, double tol, const char *fmt, ...)
{
    if (!t || c->nfetch == TC_MAX) {
        if (t) REPORT("%s: too many fetches", c->label);
        ht_free(&want);
        return;
    }
    int j = c->nfetch++;
    c->fetch[j] = t;
    c->want[j] = want;
    c->tol[j] = tol;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->what[j], sizeof c->what[j], fmt, ap);
    va_end(ap);
}

static tfc_status open_session(tfc_graph *g, tfc_session **s)
{
    tfc_status st = tfc_session_create(g_ctx, g, s);
    if (st) return st;
    if (g_hop) tfc_session_set_hop(*s, 1, STARPU_OPENCL);
    if (g_cuda) tfc_session_set_where(*s, STARPU_CUDA);
    if (g_ocl) tfc_session_set_where(*s, STARPU_OPENCL);
    if (g_hop || g_cuda || g_ocl) tfc_session_set_profiling(*s, 1); /* to check where tasks ran */
    return TFC_OK;
}

/* In the device modes, checks from the last run's task records that the hop copies ran on
 * the OpenCL worker and (where=cuda) that every op task ran on the CUDA worker. */
static int g_hops_seen, g_pinned_seen, g_ocl_seen, g_ocl_cpu_seen;
static void check_placement(tfc_session *s, const char *label)
{
    if (!g_hop && !g_cuda && !g_ocl) return;
    const tfc_task_record *r = NULL;
    int n = tfc_session_last_records(s, &r);
    for (int i = 0; i < n; i++) {
        int hop = r[i].op && strcmp(r[i].op, "hop") == 0;
        enum starpu_worker_archtype type = starpu_worker_get_type(r[i].worker);
        if (hop && g_hop) {
            g_hops_seen++;
            if (type != STARPU_OPENCL_WORKER)
                REPORT("%s: the hop of node '%s' ran on %s, not on the OpenCL worker", label,
                       r[i].node, r[i].worker_name);
        } else if (!hop && g_ocl) {
            if (type == STARPU_OPENCL_WORKER)
                g_ocl_seen++;
            else
                g_ocl_cpu_seen++;
        } else if (!hop && g_cuda) {
            g_pinned_seen++;
            if (type != STARPU_CUDA_WORKER)
                REPORT("%s: node '%s' (%s) ran on %s, not on the CUDA worker", label, r[i].node,
                       r[i].op, r[i].worker_name);
        }
    }
}

static int close_enough(double got, double want, double tol, int exact)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    if (exact) return got == want;
    return fabs(got - want) <= tol * (1.0 + fabs(want));
}

/* Compares a fetched value with its reference: dtype, shape, every element. */
static int check_value(const char *label, const char *what, const tfc_value *v, const ht *w,
                       double tol)
{
    if (!v) {
        REPORT("%s / %s: no value fetched", label, what);
        return 0;
    }
    if (tfc_value_dtype(v) != w->dt) {
        REPORT("%s / %s: dtype %s, expected %s", label, what, DT(tfc_value_dtype(v)), DT(w->dt));
        return 0;
    }
    tfc_shape gs = tfc_value_shape(v);
    int same = gs.rank == w->sh.rank;
    for (int d = 0; same && d < gs.rank; d++) same = gs.dims[d] == w->sh.dims[d];
    if (!same) {
        REPORT("%s / %s: shape %s, expected %s", label, what, SHP(gs), SHP(w->sh));
        return 0;
    }
    const void *p = tfc_value_cdata(v);
    int exact = !is_float(w->dt);
    int64_t bad = 0, first = -1;
    double fg = 0;
    for (int64_t i = 0; i < w->n; i++) {
        double g = load_el(p, w->dt, i);
        if (!close_enough(g, w->d[i], tol, exact)) {
            if (first < 0) {
                first = i;
                fg = g;
            }
            bad++;
        }
    }
    if (bad) {
        int64_t idx[TFC_MAX_RANK] = {0};
        unravel(w->sh, first, idx);
        tfc_shape is = {.rank = w->sh.rank};
        memcpy(is.dims, idx, sizeof idx);
        REPORT("%s / %s: %lld of %lld elements differ; first at %s: expected %.17g, got %.17g "
               "(%s, tolerance %g)",
               label, what, (long long)bad, (long long)w->n, SHP(is), w->d[first], fg, DT(w->dt),
               exact ? 0.0 : tol);
        return 0;
    }
    PASS();
    return 1;
}

/* Runs the case in a new session and checks every fetch; frees everything. */
static void tc_run(struct tc *c)
{
    g_cases++;
    tfc_value *got[TC_MAX] = {0};
    tfc_session *s = NULL;
    if (!c->g) goto out;
    if (tfc_graph_status(c->g)) {
        REPORT("%s: graph build failed: %s", c->label, tfc_graph_errmsg(c->g));
        goto out;
    }
    for (int i = 0; i < c->nfeed; i++)
        if (!c->fv[i]) goto out;
    tfc_status st = open_session(c->g, &s);
    if (st) {
        REPORT("%s: tfc_session_create: %s", c->label, tfc_status_string(st));
        goto out;
    }
    st = tfc_session_run(s, c->nfeed, c->ft, c->fv, c->nfetch, c->fetch, got, 0, NULL);
    if (st) {
        REPORT("%s: run failed (%s): %s", c->label, tfc_status_string(st), tfc_session_errmsg(s));
        goto out;
    }
    check_placement(s, c->label);
    int all = 1;
    for (int j = 0; j < c->nfetch; j++) {
        if (check_value(c->label, c->what[j], got[j], &c->want[j], c->tol[j]))
            mark(tfc_tensor_op(c->fetch[j]));
        else
            all = 0;
    }
    if (all && c->nfeed) mark("placeholder");
    if (all && c->used_const) mark("constant");
out:
    for (int j = 0; j < c->nfetch; j++) {
        tfc_value_destroy(got[j]);
        ht_free(&c->want[j]);
    }
    for (int i = 0; i < c->nfeed; i++) tfc_value_destroy(c->fv[i]);
    tfc_session_destroy(s);
    tfc_graph_destroy(c->g);
    c->g = NULL;
}

/* ---- references: element-wise ------------------------------------------------------------- */

static ht map1(const ht *x, enum tfc_dtype odt, double (*f)(double))
{
    ht o = ht_new(odt, x->sh);
    for (int64_t i = 0; i < x->n; i++) o.d[i] = f(x->d[i]);
    return o;
}

static ht map2(const ht *a, const ht *b, enum tfc_dtype odt, double (*f)(double, double))
{
    tfc_shape sh[2] = {a->sh, b->sh};
    ht o = ht_new(odt, bshape(2, sh));
    for (int64_t i = 0; i < o.n; i++)
        o.d[i] = f(a->d[bidx(a->sh, o.sh, i)], b->d[bidx(b->sh, o.sh, i)]);
    return o;
}

static double r_neg(double x) { return -x; }
static double r_abs(double x) { return x < 0 ? -x : x; }
static double r_square(double x) { return x * x; }
static double r_sqrt(double x) { return sqrt(x); }
static double r_rsqrt(double x) { return 1.0 / sqrt(x); }
static double r_exp(double x) { return exp(x); }
static double r_log(double x) { return log(x); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_tanh(double x) { return tanh(x); }
static double r_softplus(double x) { return log1p(exp(-fabs(x))) + (x > 0 ? x : 0); }
static double r_ident(double x) { return x; }
static double r_erf(double x) { return erf(x); }
static double r_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double r_gelu_tanh(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double r_elu(double x) { return x > 0 ? x : 0.7 * expm1(x); } /* alpha 0.7 */
static double r_selu(double x)
{
    return 1.0507009873554804934193349852946 *
           (x > 0 ? x : 1.6732632423543772848170429916717 * expm1(x));
}
static double r_leaky(double x) { return x > 0 ? x : 0.1 * x; } /* alpha 0.1 */
static double r_silu(double x) { return x / (1 + exp(-x)); }
static double r_hard_sigmoid(double x)
{
    double v = 0.2 * x + 0.5;
    return v < 0 ? 0 : v > 1 ? 1 : v; /* NaN stays NaN */
}
static double r_softsign(double x) { return x / (1 + fabs(x)); }
static double r_sin(double x) { return sin(x); }
static double r_cos(double x) { return cos(x); }
static double r_recip(double x) { return 1 / x; }
static double r_log1p(double x) { return log1p(x); }
static double r_expm1(double x) { return expm1(x); }
static double r_floor(double x) { return floor(x); }
static double r_ceil(double x) { return ceil(x); }
static double r_round(double x) { return nearbyint(x); } /* the default mode: halves to even */
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }
static double r_clip(double x) { return x < -1.5 ? -1.5 : x > 2.25 ? 2.25 : x; }
static double r_clip_int(double x) { return x < -7 ? -7 : x > 12 ? 12 : x; }
static double r_is_nan(double x) { return isnan(x); }
static double r_is_inf(double x) { return isinf(x) != 0; } /* glibc: -1 for -inf */
static double r_not(double x) { return x == 0; }
static double r_trunc(double x) { return trunc(x); }
static double r_nonzero(double x) { return x != 0; }
static double r_to_f32(double x) { return (double)(float)x; }

static double r_add(double x, double y) { return x + y; }
static double r_sub(double x, double y) { return x - y; }
static double r_mul(double x, double y) { return x * y; }
static double r_div(double x, double y) { return x / y; }
static double r_max(double x, double y) { return x > y ? x : y; }
static double r_min(double x, double y) { return x < y ? x : y; }
static double r_pow(double x, double y) { return pow(x, y); }
static double r_eq(double x, double y) { return x == y; }
static double r_ne(double x, double y) { return x != y; }
static double r_lt(double x, double y) { return x < y; }
static double r_gt(double x, double y) { return x > y; }
static double r_and(double x, double y) { return x != 0 && y != 0; }
static double r_or(double x, double y) { return x != 0 || y != 0; }

typedef tfc_tensor *(*unary_fn)(tfc_graph *, tfc_tensor *);
typedef tfc_tensor *(*binary_fn)(tfc_graph *, tfc_tensor *, tfc_tensor *);

/* ---- unary ops ---------------------------------------------------------------------------- */

/* the parametric ops with the parameters their references use */
static tfc_tensor *b_elu(tfc_graph *g, tfc_tensor *x) { return tfc_elu(g, x, 0.7); }
static tfc_tensor *b_leaky(tfc_graph *g, tfc_tensor *x) { return tfc_leaky_relu(g, x, 0.1); }
static tfc_tensor *b_hard_sigmoid(tfc_graph *g, tfc_tensor *x)
{
    return tfc_hard_sigmoid(g, x, 0.2, 0.5);
}
static tfc_tensor *b_clip(tfc_graph *g, tfc_tensor *x) { return tfc_clip(g, x, -1.5, 2.25); }

static const struct {
    const char *name;
    unary_fn fn;
    double (*ref)(double);
    int positive; /* domain (0, inf) */
    int loose;
} unary_cases[] = {
    {"neg", tfc_neg, r_neg, 0, 0},          {"abs", tfc_abs, r_abs, 0, 0},
    {"square", tfc_square, r_square, 0, 0}, {"sqrt", tfc_sqrt, r_sqrt, 1, 0},
    {"rsqrt", tfc_rsqrt, r_rsqrt, 1, 0},    {"exp", tfc_exp, r_exp, 0, 1},
    {"log", tfc_log, r_log, 1, 0},          {"relu", tfc_relu, r_relu, 0, 0},
    {"sigmoid", tfc_sigmoid, r_sigmoid, 0, 0}, {"tanh", tfc_tanh, r_tanh, 0, 0},
    {"softplus", tfc_softplus, r_softplus, 0, 1}, {"identity", tfc_identity, r_ident, 0, 0},
    {"erf", tfc_erf, r_erf, 0, 0},          {"gelu", tfc_gelu, r_gelu, 0, 0},
    {"gelu_tanh", tfc_gelu_tanh, r_gelu_tanh, 0, 0}, {"elu", b_elu, r_elu, 0, 0},
    {"selu", tfc_selu, r_selu, 0, 0},       {"leaky_relu", b_leaky, r_leaky, 0, 0},
    {"silu", tfc_silu, r_silu, 0, 0},       {"hard_sigmoid", b_hard_sigmoid, r_hard_sigmoid, 0, 0},
    {"softsign", tfc_softsign, r_softsign, 0, 0}, {"sin", tfc_sin, r_sin, 0, 0},
    {"cos", tfc_cos, r_cos, 0, 0},          {"reciprocal", tfc_reciprocal, r_recip, 1, 0},
    {"log1p", tfc_log1p, r_log1p, 1, 0},    {"expm1", tfc_expm1, r_expm1, 0, 1},
    {"floor", tfc_floor, r_floor, 0, 0},    {"ceil", tfc_ceil, r_ceil, 0, 0},
    {"round", tfc_round, r_round, 0, 0},    {"sign", tfc_sign, r_sign, 0, 0},
    {"clip", b_clip, r_clip, 0, 0},
};

/* Values where the formulas have edges: halves (round to even), signed zeros, NaN and
 * infinities (the predicates; NaN passing through sign, clip and the activations). */
static void test_unary_special(void)
{
    static const double v[] = {-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, -7.25,
                               NAN,  INFINITY, -INFINITY, 1e-7, -1e-7, 40, -40};
    const enum tfc_dtype dts[] = {F32, F64};
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = dts[di];
        struct tc c;
        tc_begin(&c, "unary %s special values", DT(dt));
        ht x = ht_vals(dt, S(COUNT(v)), v);
        tfc_tensor *t = tc_in(&c, &x);
        tc_want(&c, tfc_round(c.g, t), map1(&x, dt, r_round), 0, "round");
        tc_want(&c, tfc_floor(c.g, t), map1(&x, dt, r_floor), 0, "floor");
        tc_want(&c, tfc_ceil(c.g, t), map1(&x, dt, r_ceil), 0, "ceil");
        tc_want(&c, tfc_sign(c.g, t), map1(&x, dt, r_sign), 0, "sign");
        tc_want(&c, b_clip(c.g, t), map1(&x, dt, r_clip), 0, "clip");
        tc_want(&c, tfc_is_nan(c.g, t), map1(&x, BOOL, r_is_nan), 0, "is_nan");
        tc_want(&c, tfc_is_inf(c.g, t), map1(&x, BOOL, r_is_inf), 0, "is_inf");
        tc_want(&c, tfc_expm1(c.g, t), map1(&x, dt, r_expm1), tol_loose(dt), "expm1");
        tc_want(&c, tfc_silu(c.g, t), map1(&x, dt, r_silu), tol_of(dt), "silu");
        tc_want(&c, tfc_gelu(c.g, t), map1(&x, dt, r_gelu), tol_of(dt), "gelu");
        tc_want(&c, b_hard_sigmoid(c.g, t), map1(&x, dt, r_hard_sigmoid), tol_of(dt),
                "hard_sigmoid");
        tc_run(&c);
        ht_free(&x);
    }
}

static void test_unary_float(void)
{
    const tfc_shape shapes[] = {S0, S(5), S(2, 3), S(2, 0, 3), S(3, 1, 4), S(4, 2)};
    const enum tfc_dtype dts[] = {F32, F64};
    rng_seed(1);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = dts[di];
        for (int si = 0; si < COUNT(shapes); si++) {
            struct tc c;
            tc_begin(&c, "unary %s %s%s", DT(dt), SHP(shapes[si]), si == 5 ? " (dynamic)" : "");
            c.dyn = si == 5;
            ht xs = ht_rand(dt, shapes[si], -4, 4, 0.05), xp = ht_rand(dt, shapes[si], 0.05, 4, 0);
            tfc_tensor *ts = tc_in(&c, &xs), *tp = tc_in(&c, &xp);
            for (int k = 0; k < COUNT(unary_cases); k++) {
                const ht *x = unary_cases[k].positive ? &xp : &xs;
                tc_want(&c, unary_cases[k].fn(c.g, unary_cases[k].positive ? tp : ts),
                        map1(x, dt, unary_cases[k].ref),
                        unary_cases[k].loose ? tol_loose(dt) : tol_of(dt), "%s",
                        unary_cases[k].name);
            }
            tc_run(&c);
            ht_free(&xs);
            ht_free(&xp);
        }
        /* large magnitudes: the stable forms of sigmoid, softplus, tanh */
        static const double big[] = {-60, -20, -0.5, 0.5, 20, 60};
        struct tc c;
        tc_begin(&c, "unary %s large magnitudes", DT(dt));
        ht x = ht_vals(dt, S(6), big);
        tfc_tensor *t = tc_in(&c, &x);
        tc_want(&c, tfc_sigmoid(c.g, t), map1(&x, dt, r_sigmoid), tol_of(dt), "sigmoid");
        tc_want(&c, tfc_tanh(c.g, t), map1(&x, dt, r_tanh), tol_of(dt), "tanh");
        tc_want(&c, tfc_softplus(c.g, t), map1(&x, dt, r_softplus), tol_loose(dt), "softplus");
        tc_want(&c, tfc_exp(c.g, t), map1(&x, dt, r_exp), tol_loose(dt), "exp");
        tc_want(&c, tfc_relu(c.g, t), map1(&x, dt, r_relu), tol_of(dt), "relu");
        tc_run(&c);
        ht_free(&x);
    }
}

static void test_unary_int_bool(void)
{
    const tfc_shape shapes[] = {S0, S(2, 3), S(0, 2), S(7)};
    rng_seed(2);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? I64 : I32;
        double r = di ? 1e6 : 1000;
        for (int si = 0; si < COUNT(shapes); si++) {
            struct tc c;
            tc_begin(&c, "unary %s %s", DT(dt), SHP(shapes[si]));
            ht x = ht_rand(dt, shapes[si], -r, r, 0);
            tfc_tensor *t = tc_in(&c, &x);
            tc_want(&c, tfc_neg(c.g, t), map1(&x, dt, r_neg), 0, "neg");
            tc_want(&c, tfc_abs(c.g, t), map1(&x, dt, r_abs), 0, "abs");
            tc_want(&c, tfc_square(c.g, t), map1(&x, dt, r_square), 0, "square");
            tc_want(&c, tfc_identity(c.g, t), ht_copy(&x), 0, "identity");
            tc_want(&c, tfc_sign(c.g, t), map1(&x, dt, r_sign), 0, "sign");
            tc_want(&c, tfc_floor(c.g, t), ht_copy(&x), 0, "floor");
            tc_want(&c, tfc_ceil(c.g, t), ht_copy(&x), 0, "ceil");
            tc_want(&c, tfc_round(c.g, t), ht_copy(&x), 0, "round");
            /* the bounds round inwards on integers: [-7.5, 12.5] clips to [-7, 12] */
            tc_want(&c, tfc_clip(c.g, t, -7.5, 12.5), map1(&x, dt, r_clip_int), 0, "clip");
            tc_run(&c);
            ht_free(&x);
        }
    }
    for (int si = 0; si < COUNT(shapes); si++) {
        struct tc c;
        tc_begin(&c, "unary bool %s", SHP(shapes[si]));
        ht x = ht_rand(BOOL, shapes[si], 0, 1, 0);
        tfc_tensor *t = tc_in(&c, &x);
        tc_want(&c, tfc_logical_not(c.g, t), map1(&x, BOOL, r_not), 0, "logical_not");
        tc_want(&c, tfc_identity(c.g, t), ht_copy(&x), 0, "identity");
        tc_want(&c, tfc_logical_not(c.g, tfc_logical_not(c.g, t)), ht_copy(&x), 0,
                "logical_not twice");
        tc_run(&c);
        ht_free(&x);
    }
}

/* ---- cast --------------------------------------------------------------------------------- */

static ht cast_ref(const ht *x, enum tfc_dtype to, double (*f)(double))
{
    ht o = map1(x, to, f);
    for (int64_t i = 0; i < o.n; i++) o.d[i] = as_dtype(to, o.d[i]);
    return o;
}

static void test_cast(void)
{
    const tfc_shape shapes[] = {S0, S(7), S(2, 0), S(3, 4)};
    rng_seed(3);
    for (int si = 0; si < COUNT(shapes); si++) {
        tfc_shape sh = shapes[si];
        struct tc c;
        tc_begin(&c, "cast %s", SHP(sh));
        ht xf = ht_rand(F32, sh, -10, 10, 0);
        static const double fixed[] = {0.375, -0.75, 2.999, -3.5, 0};
        for (int64_t i = 0; i < xf.n && i < 5; i++) xf.d[i] = as_dtype(F32, fixed[i]);
        if (sh.rank == 0) xf.d[0] = as_dtype(F32, -7.25);
        ht xl = ht_rand(I64, sh, -(double)(1ll << 40), (double)(1ll << 40), 0);
        ht xb = ht_rand(BOOL, sh, 0, 1, 0);
        ht xi = ht_rand(I32, sh, -100000, 100000, 0);
        ht xu = ht_rand(I32, sh, 0, 255, 0);
        ht xl32 = ht_rand(I64, sh, -2000000000.0, 2000000000.0, 0);
        ht xd = ht_rand(F64, sh, -1e3, 1e3, 0);
        tfc_tensor *tf = tc_in(&c, &xf), *tl = tc_in(&c, &xl), *tb = tc_in(&c, &xb);
        tfc_tensor *ti = tc_in(&c, &xi), *tu = tc_in(&c, &xu), *tl32 = tc_in(&c, &xl32);
        tfc_tensor *td = tc_in(&c, &xd);
        /* the chain float32 -> int32 -> float64 -> bool (truncation toward zero, as TF) */
        tfc_tensor *i32 = tfc_cast(c.g, tf, I32);
        tfc_tensor *f64 = tfc_cast(c.g, i32, F64);
        tfc_tensor *b = tfc_cast(c.g, f64, BOOL);
        tc_want(&c, i32, cast_ref(&xf, I32, r_trunc), 0, "float32->int32");
        tc_want(&c, f64, cast_ref(&xf, F64, r_trunc), 0, "float32->int32->float64");
        {
            ht t = cast_ref(&xf, F64, r_trunc);
            tc_want(&c, b, cast_ref(&t, BOOL, r_nonzero), 0, "float32->int32->float64->bool");
            ht_free(&t);
        }
        tc_want(&c, tfc_cast(c.g, tf, I64), cast_ref(&xf, I64, r_trunc), 0, "float32->int64");
        tc_want(&c, tfc_cast(c.g, tf, BOOL), cast_ref(&xf, BOOL, r_nonzero), 0, "float32->bool");
        tc_want(&c, tfc_cast(c.g, tf, F32), ht_copy(&xf), tol_of(F32), "float32->float32");
        tc_want(&c, tfc_cast(c.g, tl, F32), cast_ref(&xl, F32, r_to_f32), tol_of(F32),
                "int64->float32");
        tc_want(&c, tfc_cast(c.g, tl, F64), cast_ref(&xl, F64, r_ident), 0, "int64->float64");
        tc_want(&c, tfc_cast(c.g, tl32, I32), cast_ref(&xl32, I32, r_ident), 0, "int64->int32");
        tc_want(&c, tfc_cast(c.g, tb, F32), cast_ref(&xb, F32, r_ident), 0, "bool->float32");
        tc_want(&c, tfc_cast(c.g, tb, I32), cast_ref(&xb, I32, r_ident), 0, "bool->int32");
        tc_want(&c, tfc_cast(c.g, ti, I64), cast_ref(&xi, I64, r_ident), 0, "int32->int64");
        tc_want(&c, tfc_cast(c.g, ti, BOOL), cast_ref(&xi, BOOL, r_nonzero), 0, "int32->bool");
        tc_want(&c, tfc_cast(c.g, tu, U8), cast_ref(&xu, U8, r_ident), 0, "int32->uint8");
        tc_want(&c, tfc_cast(c.g, tfc_cast(c.g, tu, U8), F64), cast_ref(&xu, F64, r_ident), 0,
                "int32->uint8->float64");
        tc_want(&c, tfc_cast(c.g, td, F32), cast_ref(&xd, F32, r_to_f32), tol_of(F32),
                "float64->float32");
        tc_want(&c, tfc_cast(c.g, td, I32), cast_ref(&xd, I32, r_trunc), 0, "float64->int32");
        tc_want(&c, tfc_op(c.g, "cast", 1, &ti, "dtype=float64", NULL, 0),
                cast_ref(&xi, F64, r_ident), 0, "tfc_op(cast, dtype=float64) of int32");
        tc_run(&c);
        ht_free(&xf), ht_free(&xl), ht_free(&xb), ht_free(&xi), ht_free(&xu), ht_free(&xl32);
        ht_free(&xd);
    }
}

/* ---- binary arithmetic -------------------------------------------------------------------- */

static const struct {
    const char *name;
    binary_fn fn;
    double (*ref)(double, double);
} arith_cases[] = {
    {"add", tfc_add, r_add},         {"sub", tfc_sub, r_sub},         {"mul", tfc_mul, r_mul},
    {"div", tfc_div, r_div},         {"maximum", tfc_maximum, r_max}, {"minimum", tfc_minimum, r_min},
    {"pow", tfc_pow, r_pow},
};

static const tfc_shape *pair_shapes(int i, tfc_shape *a, tfc_shape *b)
{
    const tfc_shape pa[] = {S(2, 3), S(3),    S(4, 1, 3), S0,       S(5),   S(1),
                            S0,      S(2, 3), S(0, 3),    S(0, 3),  S(3, 1), S(2, 1, 4, 1)};
    const tfc_shape pb[] = {S(3),    S(2, 3), S(2, 1),    S(5),     S0,     S(3, 1),
                            S0,      S(2, 3), S(0, 3),    S(3),     S(1, 0), S(3, 1, 5)};
    if (i >= COUNT(pa)) return NULL;
    *a = pa[i];
    *b = pb[i];
    return a;
}

static void test_binary_float(void)
{
    rng_seed(4);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        tfc_shape sa, sb;
        for (int pi = 0; pair_shapes(pi, &sa, &sb); pi++) {
            struct tc c;
            tc_begin(&c, "binary %s %s with %s", DT(dt), SHP(sa), SHP(sb));
            ht a = ht_rand(dt, sa, -3, 3, 0.1), b = ht_rand(dt, sb, -3, 3, 0.1);
            ht base = ht_rand(dt, sa, 0.2, 3, 0), ex = ht_rand(dt, sb, -2, 2, 0);
            tfc_tensor *ta = tc_in(&c, &a), *tb = tc_in(&c, &b);
            tfc_tensor *tbase = tc_in(&c, &base), *tex = tc_in(&c, &ex);
            for (int k = 0; k < COUNT(arith_cases); k++) {
                int is_pow = arith_cases[k].ref == r_pow;
                tc_want(&c, arith_cases[k].fn(c.g, is_pow ? tbase : ta, is_pow ? tex : tb),
                        map2(is_pow ? &base : &a, is_pow ? &ex : &b, dt, arith_cases[k].ref),
                        is_pow ? tol_loose(dt) : tol_of(dt), "%s", arith_cases[k].name);
            }
            tc_run(&c);
            ht_free(&a), ht_free(&b), ht_free(&base), ht_free(&ex);
        }
        /* a constant operand, a scalar constant, and a chain */
        struct tc c;
        tc_begin(&c, "binary %s with constants", DT(dt));
        ht x = ht_rand(dt, S(3, 4), -3, 3, 0.1), k = ht_rand(dt, S(4), -3, 3, 0.1);
        ht two = ht_vals(dt, S0, (double[]){2.5});
        tfc_tensor *tx = tc_in(&c, &x), *tk = tc_const(&c, &k), *t2 = tc_const(&c, &two);
        tc_want(&c, tfc_mul(c.g, tx, tk), map2(&x, &k, dt, r_mul), tol_of(dt), "mul by constant");
        tc_want(&c, tfc_sub(c.g, t2, tx), map2(&two, &x, dt, r_sub), tol_of(dt),
                "scalar constant minus x");
        tc_want(&c, tfc_div(c.g, tx, tfc_scalar(c.g, dt, 4.0)),
                map2(&x, &(ht){dt, S0, 1, (double[]){4.0}}, dt, r_div), tol_of(dt),
                "div by tfc_scalar");
        {
            ht xk = map2(&x, &k, dt, r_add);
            tc_want(&c, tfc_mul(c.g, tfc_add(c.g, tx, tk), t2), map2(&xk, &two, dt, r_mul),
                    tol_of(dt), "(x + k) * 2.5");
            ht_free(&xk);
        }
        /* NaN propagates through maximum and minimum, as in NumPy and PyTorch */
        ht n = ht_vals(dt, S(3), (double[]){NAN, 1.0, -2.0});
        ht m = ht_vals(dt, S(3), (double[]){0.5, NAN, -3.0});
        {
            tfc_tensor *tn = tc_in(&c, &n), *tm = tc_in(&c, &m);
            tc_want(&c, tfc_maximum(c.g, tn, tm), ht_vals(dt, S(3), (double[]){NAN, NAN, -2.0}),
                    tol_of(dt), "maximum with NaN");
            tc_want(&c, tfc_minimum(c.g, tn, tm), ht_vals(dt, S(3), (double[]){NAN, NAN, -3.0}),
                    tol_of(dt), "minimum with NaN");
        }
        tc_run(&c);
        ht_free(&x), ht_free(&k), ht_free(&two), ht_free(&n), ht_free(&m);
    }
}

static void test_binary_int(void)
{
    const tfc_shape pa[] = {S(2, 3), S0, S(4, 1, 3), S(0, 2), S(3), S0};
    const tfc_shape pb[] = {S(3), S(4), S(2, 1), S(2), S(3), S0};
    rng_seed(5);
    for (int di = 0; di < 3; di++) {
        /* uint8 wraps modulo 256 (3 - 5 = 254, 200 * 200 = 64) */
        enum tfc_dtype dt = di == 0 ? I32 : di == 1 ? I64 : U8;
        double ra = di == 1 ? (double)(1ll << 40) : 30000, rb = 1000;
        for (int pi = 0; pi < COUNT(pa); pi++) {
            struct tc c;
            tc_begin(&c, "binary %s %s with %s", DT(dt), SHP(pa[pi]), SHP(pb[pi]));
            ht a = dt == U8 ? ht_rand(dt, pa[pi], 0, 255, 0) : ht_rand(dt, pa[pi], -ra, ra, 0);
            ht b = dt == U8 ? ht_rand(dt, pb[pi], 0, 255, 0) : ht_rand(dt, pb[pi], -rb, rb, 0);
            tfc_tensor *ta = tc_in(&c, &a), *tb = tc_in(&c, &b);
            for (int k = 0; k < COUNT(arith_cases); k++) {
                double (*f)(double, double) = arith_cases[k].ref;
                if (f == r_div || f == r_pow) continue; /* float-only semantics */
                ht w = map2(&a, &b, dt, f);
                for (int64_t i = 0; i < w.n; i++) w.d[i] = as_dtype(dt, w.d[i]);
                tc_want(&c, arith_cases[k].fn(c.g, ta, tb), w, 0, "%s", arith_cases[k].name);
            }
            tc_run(&c);
            ht_free(&a), ht_free(&b);
        }
    }
}

/* ---- comparisons and logic ---------------------------------------------------------------- */

static void test_compare_logic(void)
{
    const tfc_shape pa[] = {S(2, 3), S0, S(1), S(0, 3), S(4), S(2, 1, 3)};
    const tfc_shape pb[] = {S(3), S(5), S(3, 1), S(3), S(4), S(4, 1)};
    static const struct {
        const char *name;
        binary_fn fn;
        double (*ref)(double, double);
    } cmp[] = {{"equal", tfc_equal, r_eq}, {"not_equal", tfc_not_equal, r_ne},
               {"less", tfc_less, r_lt},   {"greater", tfc_greater, r_gt}};
    const enum tfc_dtype dts[] = {F32, F64, I32, I64};
    rng_seed(6);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        for (int pi = 0; pi < COUNT(pa); pi++) {
            struct tc c;
            tc_begin(&c, "compare %s %s with %s", DT(dt), SHP(pa[pi]), SHP(pb[pi]));
            /* few distinct values, so ties happen */
            ht a = ht_rand(I32, pa[pi], -2, 2, 0), b = ht_rand(I32, pb[pi], -2, 2, 0);
            a.dt = b.dt = dt;
            if (is_float(dt))
                for (int64_t i = 0; i < a.n; i++) a.d[i] += (a.d[i] > 1) ? 0.5 : 0;
            if (dt == I64)
                for (int64_t i = 0; i < b.n; i++) b.d[i] *= (double)(1ll << 35);
            if (dt == I64)
                for (int64_t i = 0; i < a.n; i++) a.d[i] *= (double)(1ll << 35);
            tfc_tensor *ta = tc_in(&c, &a), *tb = tc_in(&c, &b);
            for (int k = 0; k < COUNT(cmp); k++)
                tc_want(&c, cmp[k].fn(c.g, ta, tb), map2(&a, &b, BOOL, cmp[k].ref), 0, "%s",
                        cmp[k].name);
            tc_run(&c);
            ht_free(&a), ht_free(&b);
        }
    }
    for (int pi = 0; pi < COUNT(pa); pi++) {
        struct tc c;
        tc_begin(&c, "logic bool %s with %s", SHP(pa[pi]), SHP(pb[pi]));
        ht a = ht_rand(BOOL, pa[pi], 0, 1, 0), b = ht_rand(BOOL, pb[pi], 0, 1, 0);
        tfc_tensor *ta = tc_in(&c, &a), *tb = tc_in(&c, &b);
        tc_want(&c, tfc_logical_and(c.g, ta, tb), map2(&a, &b, BOOL, r_and), 0, "logical_and");
        tc_want(&c, tfc_logical_or(c.g, ta, tb), map2(&a, &b, BOOL, r_or), 0, "logical_or");
        tc_want(&c, tfc_equal(c.g, ta, tb), map2(&a, &b, BOOL, r_eq), 0, "equal");
        tc_want(&c, tfc_not_equal(c.g, ta, tb), map2(&a, &b, BOOL, r_ne), 0, "not_equal");
        tc_run(&c);
        ht_free(&a), ht_free(&b);
    }
}

/* ---- select, bias_add, add_n, fill ---------------------------------------------------------- */

static void test_select(void)
{
    const tfc_shape sc[] = {S(2, 3), S0, S(4, 1), S(3), S(0, 2), S(2, 2)};
    const tfc_shape sa[] = {S(3), S(2, 2), S(1, 5), S(2, 3), S(2), S(2, 2)};
    const tfc_shape sb[] = {S0, S(2, 2), S(4, 5), S(2, 3), S(0, 2), S(2, 2)};
    const enum tfc_dtype dts[] = {F32, F64, I32, I64, BOOL};
    rng_seed(7);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        for (int k = 0; k < COUNT(sc); k++) {
            struct tc c;
            tc_begin(&c, "select %s cond %s, %s, %s", DT(dt), SHP(sc[k]), SHP(sa[k]), SHP(sb[k]));
            ht cond = ht_rand(BOOL, sc[k], 0, 1, 0);
            ht a = ht_rand(dt, sa[k], -50, 50, 0), b = ht_rand(dt, sb[k], -50, 50, 0);
            tfc_tensor *tcnd = tc_in(&c, &cond), *ta = tc_in(&c, &a), *tb = tc_in(&c, &b);
            tfc_shape shs[3] = {sc[k], sa[k], sb[k]};
            ht o = ht_new(dt, bshape(3, shs));
            for (int64_t i = 0; i < o.n; i++)
                o.d[i] = cond.d[bidx(cond.sh, o.sh, i)] ? a.d[bidx(a.sh, o.sh, i)]
                                                        : b.d[bidx(b.sh, o.sh, i)];
            tc_want(&c, tfc_select(c.g, tcnd, ta, tb), o, tol_of(dt), "select");
            tc_run(&c);
            ht_free(&cond), ht_free(&a), ht_free(&b);
        }
    }
}

/* ---- cond and while_loop (issue 13): the host picks the branch / the next iteration ---------- */

/* the else branch (cf_then and the loop: tests/cflow_cases.c) */
static tfc_status cf_else(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    const struct cf_caps *k = arg;
    out[0] = tfc_sub(g, k->a, tfc_square(g, k->b)); /* a - b^2 */
    return TFC_OK;
}

/* cond both ways on a fed predicate, and a while_loop of 3 iterations with captured tensors,
 * in float32 and float64 (under TFC_TEST_WHERE the regions' ops are pinned as any others) */
static void test_control_flow_ops(void)
{
    const enum tfc_dtype dts[] = {F32, F64};
    rng_seed(31);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        for (int taken = 0; taken < 2; taken++) {
            struct tc c;
            tc_begin(&c, "cond %s, predicate %s", DT(dt), taken ? "true" : "false");
            ht pred = ht_new(BOOL, S0), a = ht_rand(dt, S(2, 3), -2, 2, 0),
               b = ht_rand(dt, S(2, 3), -2, 2, 0);
            pred.d[0] = taken;
            tfc_tensor *tp = tc_in(&c, &pred), *out[1] = {NULL};
            struct cf_caps k = {tc_in(&c, &a), tc_in(&c, &b)};
            tfc_cond(c.g, "branch", tp, cf_then, cf_else, &k, 1, out);
            ht o = ht_new(dt, S(2, 3));
            for (int64_t i = 0; i < o.n; i++)
                o.d[i] = taken ? a.d[i] * b.d[i] + tanh(a.d[i]) : a.d[i] - b.d[i] * b.d[i];
            tc_want(&c, out[0], o, tol_loose(dt), "cond's output");
            tc_run(&c);
            ht_free(&pred), ht_free(&a), ht_free(&b);
        }
        struct tc c;
        tc_begin(&c, "while_loop %s: h' = tanh(h*b + a), 3 iterations", DT(dt));
        ht a = ht_rand(dt, S(2, 3), -1, 1, 0), b = ht_rand(dt, S(2, 3), -1, 1, 0);
        ht h0 = ht_rand(dt, S(2, 3), -1, 1, 0);
        struct cf_caps k = {tc_in(&c, &a), tc_in(&c, &b)};
        tfc_tensor *r[2] = {0};
        cf_tanh_loop(c.g, &k, tc_in(&c, &h0), r);
        ht o = ht_new(dt, S(2, 3)), n = ht_new(I32, S0);
        for (int64_t i = 0; i < o.n; i++) {
            double h = h0.d[i];
            for (int t = 0; t < 3; t++) h = tanh(h * b.d[i] + a.d[i]);
            o.d[i] = h;
        }
        n.d[0] = 3;
        tc_want(&c, r[0], n, 0, "the loop counter");
        tc_want(&c, r[1], o, tol_loose(dt), "the loop's h");
        tc_run(&c);
        ht_free(&a), ht_free(&b), ht_free(&h0);
    }
}

static void test_bias_add(void)
{
    const tfc_shape sv[] = {S(4, 3), S(2, 3, 5), S(0, 3), S(6), S(1, 1)};
    const enum tfc_dtype dts[] = {F32, F64, I32, I64};
    rng_seed(8);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        for (int k = 0; k < COUNT(sv); k++) {
            struct tc c;
            tc_begin(&c, "bias_add %s %s", DT(dt), SHP(sv[k]));
            c.dyn = k == 0;
            ht v = ht_rand(dt, sv[k], -100, 100, 0);
            ht b = ht_rand(dt, S(sv[k].dims[sv[k].rank - 1]), -100, 100, 0);
            tfc_tensor *tv = tc_in(&c, &v);
            c.dyn = 0;
            tfc_tensor *tb = tc_in(&c, &b);
            tc_want(&c, tfc_bias_add(c.g, tv, tb), map2(&v, &b, dt, r_add), tol_of(dt),
                    "bias_add");
            tc_run(&c);
            ht_free(&v), ht_free(&b);
        }
    }
}

static void test_add_n(void)
{
    const enum tfc_dtype dts[] = {F32, F64, I32, I64};
    const int ns[] = {1, 3, 10};
    rng_seed(9);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        for (int ni = 0; ni < COUNT(ns); ni++) {
            for (int si = 0; si < 3; si++) {
                tfc_shape sh = si == 0 ? S(2, 3) : si == 1 ? S0 : S(0, 4);
                if (si && ns[ni] != 3) continue;
                struct tc c;
                tc_begin(&c, "add_n %s of %d %s", DT(dt), ns[ni], SHP(sh));
                tfc_tensor *in[10];
                ht x[10];
                ht sum = ht_new(dt, sh);
                for (int k = 0; k < ns[ni]; k++) {
                    x[k] = ht_rand(dt, sh, -100, 100, 0);
                    /* one constant input, the rest fed */
                    in[k] = k == 1 ? tc_const(&c, &x[k]) : tc_in(&c, &x[k]);
                    for (int64_t i = 0; i < sum.n; i++) sum.d[i] += x[k].d[i];
                }
                tc_want(&c, tfc_add_n(c.g, ns[ni], in), sum, tol_of(dt), "add_n");
                tc_run(&c);
                for (int k = 0; k < ns[ni]; k++) ht_free(&x[k]);
            }
        }
    }
}

static void test_fill_like(void)
{
    const tfc_shape shapes[] = {S0, S(2, 3), S(0, 3), S(2, 1, 2)};
    const enum tfc_dtype dts[] = {F32, F64, I32, I64, U8, BOOL};
    const double vals[] = {1.5, -2.25, 7, -3, 200, 1};
    rng_seed(10);
    for (int si = 0; si < COUNT(shapes); si++) {
        struct tc c;
        tc_begin(&c, "fill/zeros_like/ones_like %s", SHP(shapes[si]));
        for (int di = 0; di < COUNT(dts); di++) {
            enum tfc_dtype dt = dts[di];
            ht f = ht_new(dt, shapes[si]), z = ht_new(dt, shapes[si]), o = ht_new(dt, shapes[si]);
            for (int64_t i = 0; i < f.n; i++) {
                f.d[i] = vals[di];
                o.d[i] = 1;
            }
            tc_want(&c, tfc_fill(c.g, shapes[si], dt, vals[di]), f, 0, "fill %s %g", DT(dt),
                    vals[di]);
            ht x = ht_rand(dt, shapes[si], dt == U8 ? 0 : -9, 9, 0);
            tfc_tensor *tx = tc_in(&c, &x);
            tc_want(&c, tfc_zeros_like(c.g, tx), z, 0, "zeros_like %s", DT(dt));
            tc_want(&c, tfc_ones_like(c.g, tx), o, 0, "ones_like %s", DT(dt));
            ht_free(&x);
        }
        tc_run(&c);
    }
}

/* ---- matmul and batch_matmul -------------------------------------------------------------- */

/* a stored as batchA + (ta ? [k,m] : [m,k]); b as batchB + (tb ? [n,k] : [k,n]). */
static ht ref_bmm(const ht *a, const ht *b, int ta, int tb)
{
    int ra = a->sh.rank, rb = b->sh.rank;
    int64_t m = ta ? a->sh.dims[ra - 1] : a->sh.dims[ra - 2];
    int64_t k = ta ? a->sh.dims[ra - 2] : a->sh.dims[ra - 1];
    int64_t n = tb ? b->sh.dims[rb - 2] : b->sh.dims[rb - 1];
    tfc_shape bs[2] = {a->sh, b->sh};
    bs[0].rank -= 2;
    bs[1].rank -= 2;
    tfc_shape bo = bshape(2, bs), os = bo;
    os.rank = bo.rank + 2;
    os.dims[bo.rank] = m;
    os.dims[bo.rank + 1] = n;
    ht o = ht_new(a->dt, os);
    int64_t nb = numel(bo);
    for (int64_t bi = 0; bi < nb; bi++) {
        const double *A = a->d + bidx(bs[0], bo, bi) * m * k;
        const double *B = b->d + bidx(bs[1], bo, bi) * k * n;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t p = 0; p < k; p++)
                    s += (ta ? A[p * m + i] : A[i * k + p]) * (tb ? B[j * k + p] : B[p * n + j]);
                o.d[bi * m * n + i * n + j] = s;
            }
    }
    return o;
}

static void test_matmul(void)
{
    const int64_t mkn[][3] = {{3, 4, 5}, {1, 7, 1}, {4, 0, 3}, {0, 3, 2}, {2, 1, 3}, {6, 5, 4},
                               {1, 64, 1024}, {1024, 64, 1}, /* one row, one column: gemv */
                               {128, 10, 128}, {40, 64, 128}}; /* float32: oneDNN (auto) */
    rng_seed(11);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int q = 0; q < COUNT(mkn); q++) {
            int64_t m = mkn[q][0], k = mkn[q][1], n = mkn[q][2];
            struct tc c;
            tc_begin(&c, "matmul %s m=%lld k=%lld n=%lld", DT(dt), (long long)m, (long long)k,
                     (long long)n);
            c.dyn = q == 5;
            for (int t = 0; t < 4; t++) {
                int ta = t & 1, tb = t >> 1;
                ht a = ht_rand(dt, ta ? S(k, m) : S(m, k), -2, 2, 0);
                ht b = ht_rand(dt, tb ? S(n, k) : S(k, n), -2, 2, 0);
                tfc_tensor *xa = tc_in(&c, &a), *xb = tc_in(&c, &b);
                tc_want(&c, tfc_matmul(c.g, xa, xb, ta, tb), ref_bmm(&a, &b, ta, tb), tol_of(dt),
                        "transpose_a=%d transpose_b=%d", ta, tb);
                ht_free(&a), ht_free(&b);
            }
            tc_run(&c);
        }
    }
}

/* The perfmodel footprint of a float32 matmul task [m,k]x[k,n] under TFC_MATMUL_BACKEND=backend
 * (tfc_kargs_finish). */
static uint32_t matmul_footprint(int64_t m, int64_t k, int64_t n, const char *backend)
{
    struct tfc_kargs *a = calloc(1, sizeof *a + 3 * sizeof(struct tfc_kdesc));
    CU_ASSERT_FATAL(a != NULL);
    a->kind = TFC_K_MATMUL, a->n_in = 2, a->n_out = 1;
    const int64_t dims[3][2] = {{m, k}, {k, n}, {m, n}};
    for (int i = 0; i < 3; i++)
        a->d[i] = (struct tfc_kdesc){.dtype = TFC_FLOAT32, .rank = 2,
                                     .dims = {dims[i][0], dims[i][1]},
                                     .numel = dims[i][0] * dims[i][1], .buf = i};
    setenv("TFC_MATMUL_BACKEND", backend, 1);
    tfc_kargs_finish(a);
    unsetenv("TFC_MATMUL_BACKEND");
    uint32_t f = a->footprint;
    free(a);
    return f;
}

/* A product's task times get a history per library: its footprint under dnnl differs from
 * that under blas, and auto's is that of the library auto picks for the shape (oneDNN for the
 * MLP's [64,784]x[784,256] where the library has it; OpenBLAS for a 3136-long product on AVX2,
 * as codelets/matmul_dnnl.c's rule says). */
static void test_matmul_footprints(void)
{
    static const int64_t shapes[][3] = {{64, 784, 256}, {128, 3136, 1024}, {16, 2048, 16}};
    for (int i = 0; i < 3; i++) {
        int64_t m = shapes[i][0], k = shapes[i][1], n = shapes[i][2];
        uint32_t dnnl = matmul_footprint(m, k, n, "dnnl"), blas = matmul_footprint(m, k, n, "blas");
        uint32_t want = tfc_matmul_dnnl_wins(m, n, k) ? dnnl : blas;
        CU_ASSERT_NOT_EQUAL(dnnl, blas);
        CU_ASSERT_EQUAL(matmul_footprint(m, k, n, "auto"), want);
    }
    CU_ASSERT(!tfc_matmul_dnnl_present() || tfc_matmul_dnnl_wins(64, 256, 784));
}

/* The float32 products TFC_MATMUL_BACKEND=auto sends to oneDNN (the MLP's logits gradient
 * [128,10]x[10,128] in every transpose, a batch_matmul of two [64,48]x[48,64]) under each
 * backend, against the float64 reference. With oneDNN in the library, auto and dnnl must run
 * all 6 products through it and blas none; without it, dnnl fails the run saying so. A 7th,
 * [16,2048]x[2048,16], goes to oneDNN under auto only on a CPU with AVX-512 (without it, a
 * product over more than 1024 goes to OpenBLAS: codelets/matmul_dnnl.c). */
static void test_matmul_backends(void)
{
    static const char *const backends[] = {"blas", "dnnl", "auto"};
    rng_seed(13);
    for (int bi = 0; bi < 3; bi++) {
        int absent = bi == 1 && !tfc_matmul_dnnl_present();
        long runs0 = tfc_matmul_dnnl_runs();
        setenv("TFC_MATMUL_BACKEND", backends[bi], 1);
        struct tc c;
        tc_begin(&c, "matmul float32 TFC_MATMUL_BACKEND=%s", backends[bi]);
        for (int t = 0; t < 4 && !absent; t++) {
            int ta = t & 1, tb = t >> 1;
            ht a = ht_rand(F32, ta ? S(10, 128) : S(128, 10), -2, 2, 0);
            ht b = ht_rand(F32, tb ? S(128, 10) : S(10, 128), -2, 2, 0);
            tfc_tensor *xa = tc_in(&c, &a), *xb = tc_in(&c, &b);
            tc_want(&c, tfc_matmul(c.g, xa, xb, ta, tb), ref_bmm(&a, &b, ta, tb), tol_of(F32),
                    "transpose_a=%d transpose_b=%d", ta, tb);
            ht_free(&a), ht_free(&b);
        }
        ht a = ht_rand(F32, S(2, 64, 48), -2, 2, 0), b = ht_rand(F32, S(2, 48, 64), -2, 2, 0);
        tfc_tensor *xa = tc_in(&c, &a), *xb = tc_in(&c, &b);
        tfc_tensor *p = tfc_batch_matmul(c.g, xa, xb, 0, 0);
        if (absent) { /* the run must fail and say why */
            tfc_session *s = NULL;
            tfc_value *got = NULL;
            CU_ASSERT_FATAL(tfc_graph_status(c.g) == TFC_OK && open_session(c.g, &s) == TFC_OK);
            tfc_status st = tfc_session_run(s, c.nfeed, c.ft, c.fv, 1, &p, &got, 0, NULL);
            CU_ASSERT(st != TFC_OK && strstr(tfc_session_errmsg(s), "built without oneDNN"));
            tfc_value_destroy(got);
            tfc_session_destroy(s);
            tfc_graph_destroy(c.g);
            c.g = NULL; /* tc_run frees the feeds */
        } else
            tc_want(&c, p, ref_bmm(&a, &b, 0, 0), tol_of(F32), "batch_matmul [2,64,48]x[2,48,64]");
        ht_free(&a), ht_free(&b);
        if (!absent) {
            ht la = ht_rand(F32, S(16, 2048), -1, 1, 0), lb = ht_rand(F32, S(2048, 16), -1, 1, 0);
            tfc_tensor *ya = tc_in(&c, &la), *yb = tc_in(&c, &lb);
            tc_want(&c, tfc_matmul(c.g, ya, yb, 0, 0), ref_bmm(&la, &lb, 0, 0),
                    10 * tol_of(F32), "[16,2048]x[2048,16]"); /* sums of 2048 products */
            ht_free(&la), ht_free(&lb);
        }
        tc_run(&c);
        unsetenv("TFC_MATMUL_BACKEND");
        /* tiled (tests/run-tiling.sh): how many tiles auto sends depends on the tile size */
        const char *tile_min = getenv("TFC_TILE_MIN");
        int tiled = tile_min && *tile_min && strcmp(tile_min, "0");
        /* with an OpenCL or CUDA worker beside the CPUs (run-opencl.sh's alternate and hop
         * modes, run-starpu-envs.sh), the scheduler may run some products there */
        int cpu_only = starpu_cpu_worker_get_count() == starpu_worker_get_count();
        long want = 6 + (bi == 1 || __builtin_cpu_supports("avx512f")); /* the long one */
        long ran = tfc_matmul_dnnl_runs() - runs0, lo = want, hi = want; /* in [lo, hi] */
        if (bi == 0 || !tfc_matmul_dnnl_present() || g_cuda || g_ocl == 1)
            lo = hi = 0;
        else if (!cpu_only)
            lo = 0;
        else if (tiled)
            lo = 1, hi = LONG_MAX;
        if (ran < lo || ran > hi)
            REPORT("TFC_MATMUL_BACKEND=%s: oneDNN ran %ld products, not %ld to %ld", backends[bi],
                   ran, lo, hi);
    }
}

static tfc_shape bmm_shape(tfc_shape batch, int64_t r, int64_t c, int t)
{
    tfc_shape s = batch;
    s.dims[s.rank++] = t ? c : r;
    s.dims[s.rank++] = t ? r : c;
    return s;
}

static void test_batch_matmul(void)
{
    static const struct {
        tfc_shape ba, bb;
        int64_t m, k, n;
    } cases[] = {
        {{1, {2}}, {1, {2}}, 3, 4, 5},     {{1, {3}}, {0, {0}}, 2, 4, 5},
        {{2, {2, 1}}, {1, {3}}, 3, 4, 2},  {{0, {0}}, {1, {2}}, 2, 3, 2},
        {{1, {2}}, {1, {2}}, 3, 0, 4},     {{2, {1, 2}}, {2, {3, 1}}, 2, 2, 3},
        {{1, {0}}, {1, {1}}, 2, 3, 2},
    };
    rng_seed(12);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int q = 0; q < COUNT(cases); q++) {
            struct tc c;
            tc_begin(&c, "batch_matmul %s batch %s x %s, m=%lld k=%lld n=%lld", DT(dt),
                     SHP(cases[q].ba), SHP(cases[q].bb), (long long)cases[q].m,
                     (long long)cases[q].k, (long long)cases[q].n);
            for (int t = 0; t < 4; t++) {
                int ta = t & 1, tb = t >> 1;
                ht a = ht_rand(dt, bmm_shape(cases[q].ba, cases[q].m, cases[q].k, ta), -2, 2, 0);
                ht b = ht_rand(dt, bmm_shape(cases[q].bb, cases[q].k, cases[q].n, tb), -2, 2, 0);
                tfc_tensor *xa = tc_in(&c, &a), *xb = tc_in(&c, &b);
                tc_want(&c, tfc_batch_matmul(c.g, xa, xb, ta, tb), ref_bmm(&a, &b, ta, tb),
                        tol_of(dt), "adj_a=%d adj_b=%d (%s x %s)", ta, tb, SHP(a.sh), SHP(b.sh));
                ht_free(&a), ht_free(&b);
            }
            tc_run(&c);
        }
    }
}

/* ---- softmax family ----------------------------------------------------------------------- */

static ht ref_softmax(const ht *x, int axis, int log_out)
{
    int r = x->sh.rank;
    if (axis < 0) axis += r;
    int64_t outer = 1, len = x->sh.dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->sh.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= x->sh.dims[i];
    ht o = ht_new(x->dt, x->sh);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t b = 0; b < inner; b++) {
            const double *p = x->d + a * len * inner + b;
            double mx = -INFINITY, s = 0;
            for (int64_t j = 0; j < len; j++) mx = fmax(mx, p[j * inner]);
            for (int64_t j = 0; j < len; j++) s += exp(p[j * inner] - mx);
            for (int64_t j = 0; j < len; j++) {
                double v = p[j * inner] - mx;
                o.d[a * len * inner + b + j * inner] = log_out ? v - log(s) : exp(v) / s;
            }
        }
    return o;
}

static void test_softmax(void)
{
    static const struct {
        tfc_shape sh;
        int axis;
        double scale;
    } cases[] = {
        {{3, {2, 3, 4}}, 0, 3},  {{3, {2, 3, 4}}, 1, 3},   {{3, {2, 3, 4}}, 2, 3},
        {{3, {2, 3, 4}}, -1, 3}, {{3, {2, 3, 4}}, -3, 3},  {{3, {2, 3, 4}}, 1, 60},
        {{3, {2, 3, 4}}, -1, 60}, {{1, {5}}, 0, 3},        {{2, {3, 1}}, -1, 3},
        {{2, {4, 5}}, 0, 3},     {{2, {0, 5}}, -1, 3},     {{2, {4, 5}}, -1, 30},
    };
    rng_seed(13);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int q = 0; q < COUNT(cases); q++) {
            struct tc c;
            tc_begin(&c, "softmax %s %s axis %d, |x| < %g", DT(dt), SHP(cases[q].sh),
                     cases[q].axis, cases[q].scale);
            ht x = ht_rand(dt, cases[q].sh, -cases[q].scale, cases[q].scale, 0);
            tfc_tensor *t = tc_in(&c, &x);
            tc_want(&c, tfc_softmax(c.g, t, cases[q].axis), ref_softmax(&x, cases[q].axis, 0),
                    tol_loose(dt), "softmax");
            tc_want(&c, tfc_log_softmax(c.g, t, cases[q].axis), ref_softmax(&x, cases[q].axis, 1),
                    tol_loose(dt), "log_softmax");
            tc_run(&c);
            ht_free(&x);
        }
    }
}

/* float32 rows over the last axis (the kernel's one-exp path) with what it leaves to the
 * double path: a long row of |x| < 80 (exps down to e^-160 underflow to 0), a row with -inf
 * entries (exact zeros), a row holding a NaN (all NaN) and a row of -inf only (all NaN). */
static void test_softmax_special(void)
{
    enum { LEN = 1000 };
    struct tc c;
    tc_begin(&c, "softmax float32 [4, %d]: long, -inf, NaN and all -inf rows", LEN);
    rng_seed(17);
    ht x = ht_rand(F32, S(4, LEN), -80, 80, 0);
    for (int j = 0; j < LEN; j += 3) x.d[LEN + j] = -INFINITY;
    x.d[2 * LEN + 500] = NAN;
    for (int j = 0; j < LEN; j++) x.d[3 * LEN + j] = -INFINITY;
    tfc_tensor *t = tc_in(&c, &x);
    tc_want(&c, tfc_softmax(c.g, t, -1), ref_softmax(&x, -1, 0), tol_loose(F32), "softmax");
    tc_run(&c);
    ht_free(&x);
}

/* Many short float32 rows (the kernel takes a few hundred at a time, their exps in one loop),
 * with rows for the double path among them: -inf entries, a NaN, all -inf, a +inf maximum. */
static void test_softmax_short_rows(void)
{
    enum { ROWS = 600, LEN = 10 };
    struct tc c;
    tc_begin(&c, "softmax float32 [%d, %d]: short rows, special rows among them", ROWS, LEN);
    rng_seed(19);
    ht x = ht_rand(F32, S(ROWS, LEN), -30, 30, 0);
    x.d[5 * LEN + 2] = x.d[5 * LEN + 7] = -INFINITY;
    x.d[250 * LEN + 9] = NAN;
    for (int j = 0; j < LEN; j++) x.d[410 * LEN + j] = -INFINITY;
    x.d[599 * LEN] = INFINITY;
    tfc_tensor *t = tc_in(&c, &x);
    tc_want(&c, tfc_softmax(c.g, t, -1), ref_softmax(&x, -1, 0), tol_loose(F32), "softmax");
    tc_run(&c);
    ht_free(&x);
}

/* labels: dense [batch, classes] distributions, or class ids [batch] when sparse. */
static ht ref_xent(const ht *logits, const ht *labels, int sparse)
{
    int64_t rows = logits->sh.dims[0], cls = logits->sh.dims[1];
    ht o = ht_new(logits->dt, S(rows));
    for (int64_t b = 0; b < rows; b++) {
        const double *x = logits->d + b * cls;
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < cls; j++) mx = fmax(mx, x[j]);
        for (int64_t j = 0; j < cls; j++) s += exp(x[j] - mx);
        double lse = mx + log(s), l = 0;
        if (sparse)
            l = lse - x[(int64_t)labels->d[b]];
        else
            for (int64_t j = 0; j < cls; j++) l -= labels->d[b * cls + j] * (x[j] - lse);
        o.d[b] = l;
    }
    return o;
}

static void test_xent(void)
{
    const int64_t shapes[][2] = {{4, 5}, {1, 3}, {6, 2}, {0, 5}, {3, 1}};
    rng_seed(14);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int q = 0; q < COUNT(shapes); q++) {
            int64_t rows = shapes[q][0], cls = shapes[q][1];
            struct tc c;
            tc_begin(&c, "cross entropy %s logits [%lld,%lld]", DT(dt), (long long)rows,
                     (long long)cls);
            c.dyn = q == 2;
            ht x = ht_rand(dt, S(rows, cls), -4, 4, 0);
            /* dense: random distributions, and one-hot rows */
            ht p = ht_rand(dt, S(rows, cls), 0.05, 1, 0), oh = ht_new(dt, S(rows, cls));
            ht id32 = ht_new(I32, S(rows)), id64 = ht_new(I64, S(rows));
            for (int64_t b = 0; b < rows; b++) {
                double s = 0;
                for (int64_t j = 0; j < cls; j++) s += p.d[b * cls + j];
                for (int64_t j = 0; j < cls; j++) p.d[b * cls + j] = as_dtype(dt, p.d[b * cls + j] / s);
                id32.d[b] = (double)rng_int(0, cls - 1);
                id64.d[b] = (double)rng_int(0, cls - 1);
                oh.d[b * cls + (int64_t)id32.d[b]] = 1;
            }
            tfc_tensor *tx = tc_in(&c, &x), *tp = tc_in(&c, &p), *toh = tc_in(&c, &oh);
            tfc_tensor *t32 = tc_in(&c, &id32), *t64 = tc_in(&c, &id64);
            tc_want(&c, tfc_softmax_cross_entropy(c.g, tx, tp), ref_xent(&x, &p, 0), tol_loose(dt),
                    "dense, distributions");
            tc_want(&c, tfc_softmax_cross_entropy(c.g, tx, toh), ref_xent(&x, &oh, 0),
                    tol_loose(dt), "dense, one-hot");
            tc_want(&c, tfc_sparse_softmax_cross_entropy(c.g, tx, t32), ref_xent(&x, &id32, 1),
                    tol_loose(dt), "sparse, int32 labels");
            tc_want(&c, tfc_sparse_softmax_cross_entropy(c.g, tx, t64), ref_xent(&x, &id64, 1),
                    tol_loose(dt), "sparse, int64 labels");
            tc_run(&c);
            ht_free(&x), ht_free(&p), ht_free(&oh), ht_free(&id32), ht_free(&id64);
        }
    }
}

/* float32 logits in the shapes the kernel groups differently (many short rows, whose exps run
 * in one loop a few hundred rows at a time; rows of two classes; rows longer than its buffer,
 * a buffer at a time; lengths with a remainder after the kernel's eight lanes), each with six
 * special rows: 0 its maximum last and 100 above the rest (only that maximum keeps the exps
 * finite), 1 a -inf entry under its label (an infinite loss), 2 -inf in every odd entry (exps
 * of +inf shifts: zeros), then rows for the double path: 3 a NaN, 4 all -inf, 5 a +inf
 * maximum. Sparse and dense labels. */
static void test_xent_rows(void)
{
    static const int64_t shapes[][2] = {{600, 10}, {300, 2}, {6, 700}, {6, 5001}};
    rng_seed(23);
    for (int q = 0; q < COUNT(shapes); q++) {
        int64_t rows = shapes[q][0], cls = shapes[q][1];
        struct tc c;
        tc_begin(&c, "cross entropy float32 [%lld, %lld]: row groups, special rows",
                 (long long)rows, (long long)cls);
        ht x = ht_rand(F32, S(rows, cls), -30, 30, 0);
        ht p = ht_rand(F32, S(rows, cls), 0, 1, 0), id = ht_new(I32, S(rows));
        for (int64_t b = 0; b < rows; b++) id.d[b] = (double)rng_int(0, cls - 1);
        double *row[6];
        for (int r = 0; r < 6; r++) row[r] = x.d + r * cls;
        for (int64_t j = 0; j < cls; j++) row[0][j] = j == cls - 1 ? 40 : -60;
        row[1][0] = -INFINITY;
        id.d[1] = 0;
        for (int64_t j = 1; j < cls; j += 2) row[2][j] = -INFINITY;
        row[3][cls / 2] = NAN;
        for (int64_t j = 0; j < cls; j++) row[4][j] = -INFINITY;
        row[5][0] = INFINITY;
        tfc_tensor *tx = tc_in(&c, &x), *tp = tc_in(&c, &p), *tid = tc_in(&c, &id);
        tc_want(&c, tfc_sparse_softmax_cross_entropy(c.g, tx, tid), ref_xent(&x, &id, 1),
                tol_loose(F32), "sparse");
        tc_want(&c, tfc_softmax_cross_entropy(c.g, tx, tp), ref_xent(&x, &p, 0), tol_loose(F32),
                "dense");
        tc_run(&c);
        ht_free(&x), ht_free(&p), ht_free(&id);
    }
}

/* ---- reductions --------------------------------------------------------------------------- */

enum { R_SUM, R_MEAN, R_MAX, R_MIN };

static ht ref_reduce(int kind, const ht *x, int n_axes, const int64_t *axes, int keep)
{
    int r = x->sh.rank, red[TFC_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) red[i] = n_axes == 0;
    for (int i = 0; i < n_axes; i++) red[axes[i] < 0 ? axes[i] + r : axes[i]] = 1;
    tfc_shape os = {0};
    for (int i = 0; i < r; i++) {
        if (!red[i]) os.dims[os.rank++] = x->sh.dims[i];
        else if (keep) os.dims[os.rank++] = 1;
    }
    ht o = ht_new(x->dt, os);
    double init = kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : 0;
    for (int64_t i = 0; i < o.n; i++) o.d[i] = init;
    int64_t idx[TFC_MAX_RANK];
    for (int64_t e = 0; e < x->n; e++) {
        unravel(x->sh, e, idx);
        int64_t oi = 0;
        for (int d = 0; d < r; d++)
            if (!red[d]) oi = oi * x->sh.dims[d] + idx[d];
        double v = x->d[e];
        if (kind == R_MAX) o.d[oi] = fmax(o.d[oi], v);
        else if (kind == R_MIN) o.d[oi] = fmin(o.d[oi], v);
        else o.d[oi] += v;
    }
    if (kind == R_MEAN) {
        int64_t count = o.n ? x->n / o.n : 0;
        for (int64_t i = 0; i < o.n; i++) o.d[i] = count ? o.d[i] / (double)count : NAN;
    }
    return o;
}

typedef tfc_tensor *(*reduce_fn)(tfc_graph *, tfc_tensor *, int, const int64_t *, int);
static const struct {
    const char *name;
    reduce_fn fn;
    int kind;
} reduce_cases[] = {{"reduce_sum", tfc_reduce_sum, R_SUM},
                    {"reduce_mean", tfc_reduce_mean, R_MEAN},
                    {"reduce_max", tfc_reduce_max, R_MAX},
                    {"reduce_min", tfc_reduce_min, R_MIN}};

static void reduce_case(enum tfc_dtype dt, const ht *x, int n_axes, const int64_t *axes,
                        int dyn)
{
    char ax[64] = "all";
    if (n_axes) {
        size_t k = 0;
        for (int i = 0; i < n_axes; i++)
            k += (size_t)snprintf(ax + k, sizeof ax - k, i ? ",%d" : "{%d", (int)axes[i]);
        snprintf(ax + k, sizeof ax - k, "}");
    }
    struct tc c;
    tc_begin(&c, "reduce %s %s axes %s%s", DT(dt), SHP(x->sh), ax, dyn ? " (dynamic)" : "");
    c.dyn = dyn;
    tfc_tensor *t = tc_in(&c, x);
    for (int keep = 0; keep < 2; keep++)
        for (int k = 0; k < COUNT(reduce_cases); k++)
            tc_want(&c, reduce_cases[k].fn(c.g, t, n_axes, axes, keep),
                    ref_reduce(reduce_cases[k].kind, x, n_axes, axes, keep), tol_of(dt),
                    "%s keepdims=%d", reduce_cases[k].name, keep);
    tc_run(&c);
}

static void test_reduce(void)
{
    static const struct {
        int n;
        int64_t axes[3];
    } sets[] = {{0, {0}},    {1, {0}},    {1, {1}},    {1, {2}},    {1, {-1}},
                {2, {0, 2}}, {2, {1, 2}}, {2, {0, 1}}, {2, {2, 0}}, {3, {0, 1, 2}},
                {2, {-3, -1}}};
    rng_seed(15);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        ht x = ht_rand(dt, S(2, 3, 4), -5, 5, 0);
        for (int q = 0; q < COUNT(sets); q++) reduce_case(dt, &x, sets[q].n, sets[q].axes, q == 5);
        ht_free(&x);
        /* runs of 45 elements (a bias gradient's [N, C, H*W] over N and H*W): codelets/reduce.c's
         * float run sums, in lanes of 8 and a tail */
        ht r = ht_rand(dt, S(3, 5, 45), -5, 5, 0);
        reduce_case(dt, &r, 2, (int64_t[]){0, 2}, 0);
        reduce_case(dt, &r, 1, (int64_t[]){2}, 1);
        ht_free(&r);
        /* a scalar, a vector, and empty tensors (sum 0, mean NaN, max -inf, min +inf) */
        ht s = ht_rand(dt, S0, -5, 5, 0.1), v = ht_rand(dt, S(5), -5, 5, 0);
        reduce_case(dt, &s, 0, NULL, 0);
        reduce_case(dt, &v, 0, NULL, 0);
        reduce_case(dt, &v, 1, (int64_t[]){0}, 0);
        ht e = ht_new(dt, S(0, 3)), f = ht_new(dt, S(2, 0));
        reduce_case(dt, &e, 1, (int64_t[]){0}, 0);
        reduce_case(dt, &e, 0, NULL, 0);
        reduce_case(dt, &f, 1, (int64_t[]){1}, 0);
        reduce_case(dt, &f, 1, (int64_t[]){0}, 0);
        ht_free(&s), ht_free(&v), ht_free(&e), ht_free(&f);
    }
}

static ht ref_argmax(const ht *x, int axis)
{
    int r = x->sh.rank;
    if (axis < 0) axis += r;
    int64_t outer = 1, len = x->sh.dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= x->sh.dims[i];
    for (int i = axis + 1; i < r; i++) inner *= x->sh.dims[i];
    tfc_shape os = {0};
    for (int i = 0; i < r; i++)
        if (i != axis) os.dims[os.rank++] = x->sh.dims[i];
    ht o = ht_new(I64, os);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t b = 0; b < inner; b++) {
            int64_t best = 0;
            for (int64_t j = 1; j < len; j++)
                if (x->d[a * len * inner + j * inner + b] > x->d[a * len * inner + best * inner + b])
                    best = j;
            o.d[a * inner + b] = (double)best;
        }
    return o;
}

static void test_argmax(void)
{
    rng_seed(16);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        struct tc c;
        tc_begin(&c, "argmax %s", DT(dt));
        ht x = ht_rand(dt, S(2, 3, 4), -5, 5, 0), v = ht_rand(dt, S(5), -5, 5, 0);
        ht w = ht_rand(dt, S(3, 1), -5, 5, 0), z = ht_rand(dt, S(0, 4), -5, 5, 0);
        tfc_tensor *tx = tc_in(&c, &x), *tv = tc_in(&c, &v), *tw = tc_in(&c, &w);
        tfc_tensor *tz = tc_in(&c, &z);
        const int64_t axes[] = {0, 1, 2, -1, -3};
        for (int k = 0; k < COUNT(axes); k++)
            tc_want(&c, tfc_argmax(c.g, tx, axes[k]), ref_argmax(&x, axes[k]), 0,
                    "[2,3,4] axis %d", (int)axes[k]);
        tc_want(&c, tfc_argmax(c.g, tv, 0), ref_argmax(&v, 0), 0, "[5] axis 0");
        tc_want(&c, tfc_argmax(c.g, tw, 1), ref_argmax(&w, 1), 0, "[3,1] axis 1");
        tc_want(&c, tfc_op(c.g, "argmax", 1, &tw, "axis=0", NULL, 0), ref_argmax(&w, 0), 0,
                "tfc_op(argmax, axis=0) of [3,1]");
        tc_want(&c, tfc_argmax(c.g, tz, 1), ref_argmax(&z, 1), 0, "[0,4] axis 1");
        /* ties: the first maximum wins (as TF) */
        ht ties = ht_vals(dt, S(3, 4), (double[]){1, 3, 3, 0, -2, -2, -2, -2, 5, 1, 2, 5});
        tfc_tensor *tt = tc_in(&c, &ties);
        tc_want(&c, tfc_argmax(c.g, tt, 1), ref_argmax(&ties, 1), 0, "ties, axis 1");
        tc_want(&c, tfc_argmax(c.g, tt, 0), ref_argmax(&ties, 0), 0, "ties, axis 0");
        ht_free(&ties);
        tc_run(&c);
        ht_free(&x), ht_free(&v), ht_free(&w), ht_free(&z);
    }
}

/* ---- layout ops --------------------------------------------------------------------------- */

static ht reshaped(const ht *x, tfc_shape to)
{
    ht o = ht_copy(x);
    int64_t known = 1;
    int unknown = -1;
    for (int i = 0; i < to.rank; i++) {
        if (to.dims[i] < 0) unknown = i;
        else known *= to.dims[i];
    }
    if (unknown >= 0) to.dims[unknown] = known ? x->n / known : 0;
    o.sh = to;
    return o;
}

static void test_reshape(void)
{
    static const struct {
        tfc_shape from, to;
    } cases[] = {
        {{3, {2, 3, 4}}, {2, {6, 4}}},     {{3, {2, 3, 4}}, {1, {-1}}},
        {{3, {2, 3, 4}}, {3, {4, -1, 3}}}, {{0, {0}}, {2, {1, 1}}},
        {{2, {1, 1}}, {0, {0}}},           {{2, {0, 3}}, {2, {3, 0}}},
        {{2, {0, 3}}, {2, {-1, 3}}},       {{1, {6}}, {2, {2, 3}}},
        {{2, {3, 2}}, {4, {1, 3, 1, 2}}},
    };
    const enum tfc_dtype dts[] = {F32, F64, I64, BOOL};
    rng_seed(17);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        struct tc c;
        tc_begin(&c, "reshape %s", DT(dt));
        for (int q = 0; q < COUNT(cases); q++) {
            ht x = ht_rand(dt, cases[q].from, -9, 9, 0);
            c.dyn = q == 7;
            tfc_tensor *t = tc_in(&c, &x);
            tc_want(&c, tfc_reshape(c.g, t, cases[q].to), reshaped(&x, cases[q].to), 0,
                    "%s to %s", SHP(cases[q].from), SHP(cases[q].to));
            ht_free(&x);
        }
        tc_run(&c);
    }
}

static ht ref_transpose(const ht *x, const int64_t *perm)
{
    int r = x->sh.rank, p[TFC_MAX_RANK];
    for (int i = 0; i < r; i++) p[i] = perm ? (perm[i] < 0 ? perm[i] + r : perm[i]) : r - 1 - i;
    tfc_shape os = {.rank = r};
    for (int i = 0; i < r; i++) os.dims[i] = x->sh.dims[p[i]];
    int64_t ist[TFC_MAX_RANK], idx[TFC_MAX_RANK];
    strides(x->sh, ist);
    ht o = ht_new(x->dt, os);
    for (int64_t e = 0; e < o.n; e++) {
        unravel(os, e, idx);
        int64_t off = 0;
        for (int i = 0; i < r; i++) off += idx[i] * ist[p[i]];
        o.d[e] = x->d[off];
    }
    return o;
}

static void test_transpose(void)
{
    static const int64_t p3[][3] = {{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {0, 2, 1},
                                {2, 0, 1}, {1, 2, 0}, {-1, 0, 1}};
    static const int64_t p4[][4] = {{3, 2, 1, 0}, {0, 2, 3, 1}, {1, 3, 0, 2}, {2, 3, 0, 1}};
    const enum tfc_dtype dts[] = {F32, F64, I32, BOOL};
    rng_seed(18);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        struct tc c;
        tc_begin(&c, "transpose %s", DT(dt));
        ht x3 = ht_rand(dt, S(2, 3, 4), -9, 9, 0), x4 = ht_rand(dt, S(2, 3, 1, 4), -9, 9, 0);
        ht x2 = ht_rand(dt, S(3, 5), -9, 9, 0), e = ht_rand(dt, S(0, 2, 3), -9, 9, 0);
        tfc_tensor *t3 = tc_in(&c, &x3), *t4 = tc_in(&c, &x4), *t2 = tc_in(&c, &x2);
        tfc_tensor *te = tc_in(&c, &e);
        for (int q = 0; q < COUNT(p3); q++)
            tc_want(&c, tfc_transpose(c.g, t3, p3[q]), ref_transpose(&x3, p3[q]), 0,
                    "[2,3,4] perm (%d,%d,%d)", (int)p3[q][0], (int)p3[q][1], (int)p3[q][2]);
        tc_want(&c, tfc_transpose(c.g, t3, NULL), ref_transpose(&x3, NULL), 0,
                "[2,3,4] perm NULL (reversed)");
        for (int q = 0; q < COUNT(p4); q++)
            tc_want(&c, tfc_transpose(c.g, t4, p4[q]), ref_transpose(&x4, p4[q]), 0,
                    "[2,3,1,4] perm (%d,%d,%d,%d)", (int)p4[q][0], (int)p4[q][1],
                    (int)p4[q][2], (int)p4[q][3]);
        tc_want(&c, tfc_transpose(c.g, t2, NULL), ref_transpose(&x2, NULL), 0, "[3,5] reversed");
        ht x1 = ht_rand(dt, S(4), -9, 9, 0), x0 = ht_rand(dt, S0, -9, 9, 0);
        tfc_tensor *t1 = tc_in(&c, &x1), *t0 = tc_in(&c, &x0);
        tc_want(&c, tfc_transpose(c.g, t1, (int64_t[]){0}), ht_copy(&x1), 0, "[4] perm (0)");
        tc_want(&c, tfc_transpose(c.g, t0, NULL), ht_copy(&x0), 0, "scalar");
        ht_free(&x1), ht_free(&x0);
        tc_want(&c, tfc_op(c.g, "transpose", 1, &t3, "perm=[1,2,0]", NULL, 0),
                ref_transpose(&x3, (int64_t[]){1, 2, 0}), 0, "tfc_op(transpose, perm=[1,2,0])");
        tc_want(&c, tfc_transpose(c.g, te, (int64_t[]){2, 0, 1}), ref_transpose(&e, (int64_t[]){2, 0, 1}),
                0, "[0,2,3] perm (2,0,1)");
        tc_run(&c);
        ht_free(&x3), ht_free(&x4), ht_free(&x2), ht_free(&e);
    }
}

static ht ref_concat(int n, const ht *const *x, int axis)
{
    int r = x[0]->sh.rank;
    if (axis < 0) axis += r;
    tfc_shape os = x[0]->sh;
    os.dims[axis] = 0;
    for (int k = 0; k < n; k++) os.dims[axis] += x[k]->sh.dims[axis];
    ht o = ht_new(x[0]->dt, os);
    int64_t idx[TFC_MAX_RANK];
    for (int64_t e = 0; e < o.n; e++) {
        unravel(os, e, idx);
        int64_t a = idx[axis];
        int k = 0;
        while (a >= x[k]->sh.dims[axis]) a -= x[k++]->sh.dims[axis];
        idx[axis] = a;
        int64_t off = 0;
        for (int d = 0; d < r; d++) off = off * x[k]->sh.dims[d] + idx[d];
        o.d[e] = x[k]->d[off];
    }
    return o;
}

static void concat_case(struct tc *c, enum tfc_dtype dt, int n, const tfc_shape *shapes, int axis)
{
    ht x[16];
    const ht *px[16];
    tfc_tensor *t[16];
    char what[96];
    size_t k = (size_t)snprintf(what, sizeof what, "%d inputs axis %d:", n, axis);
    for (int i = 0; i < n; i++) {
        x[i] = ht_rand(dt, shapes[i], -9, 9, 0);
        px[i] = &x[i];
        t[i] = tc_in(c, &x[i]);
        if (k < sizeof what) k += (size_t)snprintf(what + k, sizeof what - k, " %s", SHP(shapes[i]));
    }
    tc_want(c, tfc_concat(c->g, n, t, axis), ref_concat(n, px, axis), 0, "%s", what);
    for (int i = 0; i < n; i++) ht_free(&x[i]);
}

static void test_concat(void)
{
    const enum tfc_dtype dts[] = {F32, I64, BOOL};
    rng_seed(19);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        struct tc c;
        tc_begin(&c, "concat %s", DT(dt));
        /* 12 inputs (> 8 StarPU buffers), one of them empty */
        const int64_t ks[12] = {1, 2, 3, 1, 0, 2, 1, 1, 3, 2, 1, 1};
        tfc_shape s12[12];
        for (int i = 0; i < 12; i++) s12[i] = S(2, ks[i], 3);
        concat_case(&c, dt, 12, s12, 1);
        concat_case(&c, dt, 2, (tfc_shape[]){S(0, 3), S(2, 3)}, 0);
        concat_case(&c, dt, 3, (tfc_shape[]){S(2, 3), S(0, 3), S(1, 3)}, 0);
        concat_case(&c, dt, 2, (tfc_shape[]){S(2, 2), S(2, 3)}, -1);
        concat_case(&c, dt, 1, (tfc_shape[]){S(3, 2)}, 0);
        concat_case(&c, dt, 2, (tfc_shape[]){S(3), S(4)}, 0);
        concat_case(&c, dt, 3, (tfc_shape[]){S(2, 1, 2), S(2, 1, 2), S(2, 1, 2)}, 1);
        concat_case(&c, dt, 2, (tfc_shape[]){S(0, 2), S(0, 3)}, 1);
        tc_run(&c);
    }
}

static ht ref_slice(const ht *x, const int64_t *begin, const int64_t *size)
{
    int r = x->sh.rank;
    tfc_shape os = {.rank = r};
    for (int d = 0; d < r; d++) os.dims[d] = size[d] >= 0 ? size[d] : x->sh.dims[d] - begin[d];
    int64_t ist[TFC_MAX_RANK], idx[TFC_MAX_RANK];
    strides(x->sh, ist);
    ht o = ht_new(x->dt, os);
    for (int64_t e = 0; e < o.n; e++) {
        unravel(os, e, idx);
        int64_t off = 0;
        for (int d = 0; d < r; d++) off += (idx[d] + begin[d]) * ist[d];
        o.d[e] = x->d[off];
    }
    return o;
}

static void test_split(void)
{
    static const struct {
        tfc_shape sh;
        int n, axis;
    } cases[] = {{{2, {6, 4}}, 3, 0}, {{3, {2, 9, 2}}, 3, 1}, {{2, {2, 3}}, 3, -1},
                 {{2, {4, 2}}, 1, 0}, {{2, {0, 6}}, 3, 1},    {{3, {2, 2, 4}}, 2, 2},
                 {{2, {2, 10}}, 10, 1}}; /* 10 outputs: > 8 StarPU buffers */
    const enum tfc_dtype dts[] = {F32, F64, I32};
    rng_seed(20);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        struct tc c;
        tc_begin(&c, "split %s", DT(dt));
        for (int q = 0; q < COUNT(cases); q++) {
            ht x = ht_rand(dt, cases[q].sh, -9, 9, 0);
            tfc_tensor *t = tc_in(&c, &x), *out[16] = {0};
            if (tfc_split(c.g, t, cases[q].n, cases[q].axis, out) == TFC_OK) {
                int r = x.sh.rank, ax = cases[q].axis < 0 ? cases[q].axis + r : cases[q].axis;
                int64_t part = x.sh.dims[ax] / cases[q].n;
                for (int k = 0; k < cases[q].n; k++) {
                    int64_t begin[TFC_MAX_RANK] = {0}, size[TFC_MAX_RANK];
                    for (int d = 0; d < r; d++) size[d] = -1;
                    begin[ax] = k * part;
                    size[ax] = part;
                    tc_want(&c, out[k], ref_slice(&x, begin, size), 0, "%s into %d on axis %d: part %d",
                            SHP(x.sh), cases[q].n, cases[q].axis, k);
                }
            }
            ht_free(&x);
        }
        tc_run(&c);
    }
}

static void test_slice(void)
{
    static const struct {
        tfc_shape sh;
        int64_t begin[4], size[4];
    } cases[] = {
        {{2, {4, 5}}, {1, 2}, {2, -1}},         {{3, {2, 3, 4}}, {0, 1, 1}, {-1, 2, -1}},
        {{3, {2, 3, 4}}, {1, 0, 3}, {1, 3, 1}}, {{1, {5}}, {4}, {1}},
        {{0, {0}}, {0}, {0}},                   {{2, {4, 5}}, {1, 5}, {2, -1}},
        {{2, {4, 5}}, {0, 0}, {-1, -1}},        {{2, {4, 5}}, {3, 0}, {-1, 5}},
        {{4, {2, 3, 2, 3}}, {1, 1, 0, 1}, {1, -1, 2, 2}},
    };
    const enum tfc_dtype dts[] = {F32, F64, I32, BOOL};
    rng_seed(21);
    for (int di = 0; di < COUNT(dts); di++) {
        enum tfc_dtype dt = dts[di];
        struct tc c;
        tc_begin(&c, "slice %s", DT(dt));
        for (int q = 0; q < COUNT(cases); q++) {
            ht x = ht_rand(dt, cases[q].sh, -9, 9, 0);
            c.dyn = q == 6;
            tfc_tensor *t = tc_in(&c, &x);
            const int64_t *b = cases[q].begin, *z = cases[q].size;
            tc_want(&c, tfc_slice(c.g, t, b, z), ref_slice(&x, b, z), 0,
                    "%s begin (%lld,%lld,...) size (%lld,%lld,...)", SHP(x.sh), (long long)b[0],
                    (long long)b[1], (long long)z[0], (long long)z[1]);
            ht_free(&x);
        }
        tc_run(&c);
    }
}

static ht ref_gather(const ht *p, const ht *ix)
{
    tfc_shape os = ix->sh;
    for (int d = 1; d < p->sh.rank; d++) os.dims[os.rank++] = p->sh.dims[d];
    int64_t row = p->sh.dims[0] ? p->n / p->sh.dims[0] : 0;
    ht o = ht_new(p->dt, os);
    for (int64_t i = 0; i < ix->n; i++)
        for (int64_t j = 0; j < row; j++) o.d[i * row + j] = p->d[(int64_t)ix->d[i] * row + j];
    return o;
}

static void test_gather(void)
{
    static const struct {
        enum tfc_dtype pdt;
        tfc_shape ps;
        enum tfc_dtype idt;
        tfc_shape is;
    } cases[] = {
        {F32, {2, {5, 3}}, I32, {1, {4}}},    {F64, {2, {5, 3}}, I64, {2, {2, 3}}},
        {I32, {1, {6}}, I32, {2, {2, 2}}},    {F32, {3, {4, 2, 3}}, I64, {0, {0}}},
        {F32, {2, {5, 3}}, I32, {1, {0}}},    {I64, {2, {3, 2}}, I32, {1, {3}}},
        {F64, {2, {5, 3}}, I32, {2, {2, 3}}}, {F32, {1, {7}}, I64, {1, {5}}},
        {BOOL, {2, {4, 2}}, I64, {1, {6}}},
    };
    rng_seed(22);
    struct tc c;
    tc_begin(&c, "gather");
    for (int q = 0; q < COUNT(cases); q++) {
        ht p = ht_rand(cases[q].pdt, cases[q].ps, -9, 9, 0);
        ht ix = ht_rand(cases[q].idt, cases[q].is, 0, (double)(cases[q].ps.dims[0] - 1), 0);
        tfc_tensor *tp = tc_in(&c, &p), *ti = tc_in(&c, &ix);
        tc_want(&c, tfc_gather(c.g, tp, ti), ref_gather(&p, &ix), tol_of(cases[q].pdt),
                "params %s %s, indices %s %s", DT(cases[q].pdt), SHP(p.sh), DT(cases[q].idt),
                SHP(ix.sh));
        ht_free(&p), ht_free(&ix);
    }
    tc_run(&c);
}

static ht ref_one_hot(const ht *ix, int64_t depth, enum tfc_dtype dt, double on, double off)
{
    tfc_shape os = ix->sh;
    os.dims[os.rank++] = depth;
    ht o = ht_new(dt, os);
    for (int64_t i = 0; i < o.n; i++) o.d[i] = off;
    for (int64_t i = 0; i < ix->n; i++) {
        int64_t id = (int64_t)ix->d[i];
        if (id >= 0 && id < depth) o.d[i * depth + id] = on;
    }
    return o;
}

static void test_one_hot(void)
{
    static const struct {
        enum tfc_dtype idt;
        tfc_shape is;
        double ids[8];
        int64_t depth;
        enum tfc_dtype dt;
        double on, off;
    } cases[] = {
        {I32, {1, {5}}, {0, 3, -1, 4, 2}, 4, F32, 1, 0},
        {I64, {2, {2, 3}}, {2, 7, 0, 1, -5, 2}, 3, F64, 5, -1},
        {I32, {0, {0}}, {1}, 3, I32, 1, 0},
        {I64, {1, {4}}, {4, 0, 5, 1}, 5, I64, 9, 2},
        {I32, {1, {3}}, {1, 0, 2}, 3, BOOL, 1, 0},
        {I32, {1, {0}}, {0}, 3, F32, 1, 0},
        {I64, {2, {3, 1}}, {1, 100, 0}, 2, F32, 0.5, -0.25},
    };
    struct tc c;
    tc_begin(&c, "one_hot");
    for (int q = 0; q < COUNT(cases); q++) {
        ht ix = ht_vals(cases[q].idt, cases[q].is, cases[q].ids);
        tfc_tensor *t = tc_in(&c, &ix);
        tc_want(&c, tfc_one_hot(c.g, t, cases[q].depth, cases[q].dt, cases[q].on, cases[q].off),
                ref_one_hot(&ix, cases[q].depth, cases[q].dt, cases[q].on, cases[q].off),
                tol_of(cases[q].dt), "indices %s %s, depth %lld, %s on %g off %g",
                DT(cases[q].idt), SHP(ix.sh), (long long)cases[q].depth, DT(cases[q].dt),
                cases[q].on, cases[q].off);
        ht_free(&ix);
    }
    tc_want(&c,
            tfc_op(c.g, "one_hot", 1, &c.ft[0], "depth=6,dtype=float64,on=2,off=0.5", NULL, 0),
            ref_one_hot(&(ht){I32, S(5), 5, (double[]){0, 3, -1, 4, 2}}, 6, F64, 2, 0.5), 0,
            "tfc_op(one_hot, depth=6,dtype=float64,on=2,off=0.5)");
    tc_run(&c);
}

/* ---- variables and the stateful ops ------------------------------------------------------- */

/* Runs one fetch; checks it against want when want is not NULL. */
static int run_check(tfc_session *s, const char *label, int nfeed, tfc_tensor **ft,
                     tfc_value **fv, tfc_tensor *fetch, int as_target, const ht *want)
{
    tfc_value *got = NULL;
    tfc_status st = as_target ? tfc_session_run(s, nfeed, ft, fv, 0, NULL, NULL, 1, &fetch)
                              : tfc_session_run(s, nfeed, ft, fv, 1, &fetch, &got, 0, NULL);
    if (st) {
        REPORT("%s: run failed (%s): %s", label, tfc_status_string(st), tfc_session_errmsg(s));
        return 0;
    }
    int ok = 1;
    if (want && !as_target) ok = check_value(label, tfc_tensor_name(fetch), got, want, tol_of(want->dt));
    tfc_value_destroy(got);
    return ok;
}

static int read_check(tfc_session *s, const char *label, tfc_tensor *var, const ht *want)
{
    tfc_value *got = NULL;
    tfc_status st = tfc_session_read_variable(s, var, &got);
    if (st) {
        REPORT("%s: read_variable (%s): %s", label, tfc_status_string(st), tfc_session_errmsg(s));
        return 0;
    }
    int ok = check_value(label, "read_variable", got, want, tol_of(want->dt));
    tfc_value_destroy(got);
    return ok;
}

static void test_assign(void)
{
    const enum tfc_dtype dts[] = {F32, F64, I32, I64};
    const tfc_shape shapes[] = {S(2, 3), S0, S(4)};
    rng_seed(23);
    for (int di = 0; di < COUNT(dts); di++) {
        for (int si = 0; si < COUNT(shapes); si++) {
            enum tfc_dtype dt = dts[di];
            tfc_shape sh = shapes[si];
            char label[96];
            snprintf(label, sizeof label, "assign %s %s", DT(dt), SHP(sh));
            g_cases++;
            tfc_graph *g = NULL;
            tfc_session *s = NULL;
            tfc_value *fv[3] = {0};
            ht x[3], cur = ht_new(dt, sh);
            for (int k = 0; k < 3; k++) {
                x[k] = ht_rand(dt, sh, -50, 50, 0);
                fv[k] = ht_value(&x[k]);
            }
            if (tfc_graph_create(&g)) {
                REPORT("%s: tfc_graph_create", label);
                goto out;
            }
            tfc_tensor *v = tfc_variable(g, "v", dt, sh, tfc_init_constant(3));
            tfc_tensor *p = tfc_placeholder(g, "x", dt, sh);
            tfc_tensor *a = tfc_assign(g, v, p);
            tfc_tensor *aa = tfc_assign_add(g, v, p);
            tfc_tensor *as = tfc_assign_sub(g, v, p);
            tfc_tensor *twice = tfc_add(g, v, v); /* reads the variable as an op input */
            if (tfc_graph_status(g)) {
                REPORT("%s: graph build failed: %s", label, tfc_graph_errmsg(g));
                goto out;
            }
            if (open_session(g, &s) || tfc_session_init_variables(s)) {
                REPORT("%s: session: %s", label, s ? tfc_session_errmsg(s) : "create failed");
                goto out;
            }
            int ok = 1;
            for (int64_t i = 0; i < cur.n; i++) cur.d[i] = 3;
            ok &= run_check(s, label, 0, NULL, NULL, v, 0, &cur);
            /* assign: v = x0 */
            ok &= run_check(s, label, 1, &p, &fv[0], a, 0, &x[0]);
            int ok_a = ok;
            for (int64_t i = 0; i < cur.n; i++) cur.d[i] = x[0].d[i];
            ok &= read_check(s, label, v, &cur);
            /* assign_add: v += x1 (fetched) then v += x2 (as a target) */
            for (int64_t i = 0; i < cur.n; i++) cur.d[i] += x[1].d[i];
            ok &= run_check(s, label, 1, &p, &fv[1], aa, 0, &cur);
            for (int64_t i = 0; i < cur.n; i++) cur.d[i] += x[2].d[i];
            ok &= run_check(s, label, 1, &p, &fv[2], aa, 1, NULL);
            ok &= read_check(s, label, v, &cur);
            int ok_aa = ok;
            /* assign_sub: v -= x0 */
            for (int64_t i = 0; i < cur.n; i++) cur.d[i] -= x[0].d[i];
            ok &= run_check(s, label, 1, &p, &fv[0], as, 0, &cur);
            ok &= run_check(s, label, 0, NULL, NULL, v, 0, &cur);
            ht dbl = map2(&cur, &cur, dt, r_add);
            ok &= run_check(s, label, 0, NULL, NULL, twice, 0, &dbl);
            ht_free(&dbl);
            if (ok_a) mark("assign"), mark("variable"), mark("placeholder");
            if (ok_aa) mark("assign_add");
            if (ok) mark("assign_sub");
        out:
            tfc_session_destroy(s);
            tfc_graph_destroy(g);
            for (int k = 0; k < 3; k++) {
                tfc_value_destroy(fv[k]);
                ht_free(&x[k]);
            }
            ht_free(&cur);
        }
    }
}

/* ---- errors found by kernels: the run fails, names the node, the process goes on ---------- */

static void expect_run_error(tfc_session *s, const char *label, tfc_tensor *in0, tfc_value *v0,
                             tfc_tensor *in1, tfc_value *v1, tfc_tensor *fetch, const char *node)
{
    tfc_tensor *ft[2] = {in0, in1};
    tfc_value *fv[2] = {v0, v1};
    tfc_value *got = (tfc_value *)&got; /* must be reset to NULL */
    tfc_status st = tfc_session_run(s, 2, ft, fv, 1, &fetch, &got, 0, NULL);
    if (st != TFC_ERR_OUT_OF_RANGE)
        REPORT("%s: run returned %s, expected %s (message: %s)", label, tfc_status_string(st),
               tfc_status_string(TFC_ERR_OUT_OF_RANGE), tfc_session_errmsg(s));
    else
        PASS();
    const char *msg = tfc_session_errmsg(s);
    if (!msg || !strstr(msg, node))
        REPORT("%s: the message '%s' does not name node '%s'", label, msg ? msg : "(null)", node);
    else
        PASS();
    if (!msg || !strstr(msg, " is outside [0, ")) /* the kernel's position, value and range */
        REPORT("%s: the message '%s' does not say which index is outside which range", label,
               msg ? msg : "(null)");
    else
        PASS();
    if (st == TFC_OK) tfc_value_destroy(got);
    else if (got != NULL) REPORT("%s: a failed run left a fetch value", label);
}

/* ---- the ops gradients are built from ------------------------------------------------------- */

static double r_relu_grad(double dy, double x) { return x > 0 ? dy : 0; }

static void test_grad_ops(void)
{
    rng_seed(31);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        struct tc c;
        tc_begin(&c, "gradient ops %s", DT(dt));
        ht x = ht_rand(dt, S(2, 6), -3, 3, 0.1);
        tfc_tensor *tx = tc_in(&c, &x);
        tc_want(&c, tfc_stop_gradient(c.g, tx), ht_copy(&x), 0, "stop_gradient");
        tc_want(&c, tfc_op(c.g, "placeholder_with_default", 1, &tx, NULL, NULL, 0), ht_copy(&x), 0,
                "placeholder_with_default");
        /* group: depends on its inputs, holds nothing */
        tfc_tensor *grp[2] = {tx, tfc_neg(c.g, tx)};
        tc_want(&c, tfc_group(c.g, 2, grp), ht_new(I32, S(0)), 0, "group");
        /* reshape_like: x's data in like's shape */
        ht like34 = ht_rand(dt, S(3, 4), -1, 1, 0.1);
        tfc_tensor *tl34 = tc_in(&c, &like34), *in2[2] = {tx, tl34};
        ht rx = ht_copy(&x);
        rx.sh = S(3, 4);
        tc_want(&c, tfc_op(c.g, "reshape_like", 2, in2, NULL, NULL, 0), rx, 0, "reshape_like");
        /* broadcast_like: [3,1] to [2,3,4] */
        ht b = ht_rand(dt, S(3, 1), -3, 3, 0.1), big = ht_rand(dt, S(2, 3, 4), -1, 1, 0.1);
        tfc_tensor *tb = tc_in(&c, &b), *tbig = tc_in(&c, &big);
        ht zeros = ht_new(dt, S(2, 3, 4));
        tfc_tensor *in3[2] = {tb, tbig};
        tc_want(&c, tfc_op(c.g, "broadcast_like", 2, in3, NULL, NULL, 0), map2(&b, &zeros, dt, r_add),
                tol_of(dt), "broadcast_like [3,1] -> [2,3,4]");
        /* sum_to_like: [2,3,4] summed to [3,1] */
        ht sum = ht_new(dt, S(3, 1));
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k2 = 0; k2 < 4; k2++) sum.d[j] += big.d[(i * 3 + j) * 4 + k2];
        tfc_tensor *in4[2] = {tbig, tb};
        tc_want(&c, tfc_op(c.g, "sum_to_like", 2, in4, NULL, NULL, 0), sum, tol_of(dt),
                "sum_to_like [2,3,4] -> [3,1]");
        /* relu_grad(dy, x) */
        ht dy = ht_rand(dt, S(2, 6), -3, 3, 0.1);
        tfc_tensor *tdy = tc_in(&c, &dy), *in5[2] = {tdy, tx};
        tc_want(&c, tfc_op(c.g, "relu_grad", 2, in5, NULL, NULL, 0), map2(&dy, &x, dt, r_relu_grad),
                0, "relu_grad");
        /* slice_grad: a [2,2] gradient placed at [1,1] of [3,4] zeros */
        ht part = ht_rand(dt, S(2, 2), -3, 3, 0.1), placed = ht_new(dt, S(3, 4));
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) placed.d[(1 + i) * 4 + 1 + j] = part.d[i * 2 + j];
        tfc_tensor *tpart = tc_in(&c, &part), *in6[2] = {tpart, tl34};
        tc_want(&c, tfc_op(c.g, "slice_grad", 2, in6, "begin=[1,1],size=[2,2]", NULL, 0), placed, 0,
                "slice_grad");
        /* scatter_add_rows: rows 0, 2, 0 of [4,2] receive three update rows */
        ht upd = ht_rand(dt, S(3, 2), -3, 3, 0.1), ids = ht_vals(I32, S(3), (double[]){0, 2, 0});
        ht rows = ht_rand(dt, S(4, 2), -1, 1, 0.1), scat = ht_new(dt, S(4, 2));
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) scat.d[(int)ids.d[i] * 2 + j] += upd.d[i * 2 + j];
        tfc_tensor *tu = tc_in(&c, &upd), *ti = tc_in(&c, &ids), *tr = tc_in(&c, &rows);
        tfc_tensor *in7[3] = {tu, ti, tr};
        tc_want(&c, tfc_op(c.g, "scatter_add_rows", 3, in7, NULL, NULL, 0), scat, tol_of(dt),
                "scatter_add_rows");
        tc_run(&c);
        ht *all[] = {&x, &like34, &b, &big, &zeros, &dy, &part, &upd, &ids, &rows};
        for (int i = 0; i < COUNT(all); i++) ht_free(all[i]);
    }
}

/* Per-channel bias on NCHW, the flagship CNN's shapes in small: x + b and relu(x + b) with b
 * [C,1,1] or [1,C,1,1] (the fused kernel's run-constant loads, across its 512-element blocks;
 * element-wise's merged axes with a broadcast or contiguous operand on either side), relu_grad
 * on equal shapes, and sums over axes 0,2,3 (reduce's per-channel runs: 8 channels at a time
 * plus the rest, so C = 10) or over no axis. */
static void test_channel_bias(void)
{
    const tfc_shape bias_shapes[] = {S(10, 1, 1), S(1, 10, 1, 1)};
    rng_seed(47);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int bi = 0; bi < COUNT(bias_shapes); bi++) {
            struct tc c;
            tc_begin(&c, "channel bias %s [3,10,5,6] with %s", DT(dt), SHP(bias_shapes[bi]));
            ht x = ht_rand(dt, S(3, 10, 5, 6), -3, 3, 0.1), dy = ht_rand(dt, x.sh, -3, 3, 0.1);
            ht b = ht_rand(dt, bias_shapes[bi], -2, 2, 0);
            tfc_tensor *tx = tc_in(&c, &x), *tb = tc_in(&c, &b), *tdy = tc_in(&c, &dy);
            ht xb = map2(&x, &b, dt, r_add);
            tc_want(&c, tfc_add(c.g, tx, tb), ht_copy(&xb), tol_of(dt), "x + b");
            tc_want(&c, tfc_sub(c.g, tb, tx), map2(&b, &x, dt, r_sub), tol_of(dt), "b - x");
            tc_want(&c, tfc_relu(c.g, tfc_add(c.g, tx, tb)), map1(&xb, dt, r_relu), tol_of(dt),
                    "relu(x + b)");
            tfc_tensor *in_rg[2] = {tdy, tx}, *in_st[2] = {tdy, tb};
            /* to the same shape (a gradient whose dims are known only at run time) */
            tc_want(&c, tfc_op(c.g, "sum_to_like", 2, in_rg, NULL, NULL, 0), ht_copy(&dy),
                    tol_of(dt), "sum_to_like dy -> x");
            tc_want(&c, tfc_op(c.g, "relu_grad", 2, in_rg, NULL, NULL, 0),
                    map2(&dy, &x, dt, r_relu_grad), 0, "relu_grad");
            ht sum = ht_new(dt, bias_shapes[bi]);
            for (int64_t i = 0; i < dy.n; i++) sum.d[i / 30 % 10] += dy.d[i];
            tc_want(&c, tfc_op(c.g, "sum_to_like", 2, in_st, NULL, NULL, 0), sum, tol_of(dt),
                    "sum_to_like dy -> b");
            tc_run(&c);
            ht_free(&x), ht_free(&b), ht_free(&dy), ht_free(&xb);
        }
        /* the reductions themselves over the same layout */
        ht x = ht_rand(dt, S(3, 10, 5, 6), -5, 5, 0);
        reduce_case(dt, &x, 3, (int64_t[]){0, 2, 3}, 0);
        reduce_case(dt, &x, 2, (int64_t[]){2, 3}, 0);
        reduce_case(dt, &x, 2, (int64_t[]){0, 1}, 0);
        ht_free(&x);
    }
}

/* ---- pooling (max_pool, avg_pool and their gradient ops) ---------------------------------- */

/* The output size of one pooled dim, as PyTorch defines it (ceil_mode: a window must start
 * inside the input or its left padding). */
static int64_t ref_pool_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                            int ceil_mode)
{
    int64_t num = in + pb + pe - d * (k - 1) - 1;
    int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pb) o--;
    return o;
}

struct ref_pool {
    int nsp;
    int64_t planes, in[3], out[3], k[3], s[3], d[3], pb[3], pe[3], nin, nout, ntap;
};

static struct ref_pool ref_pool_geom(tfc_shape xs, const tfc_pool_params *p)
{
    struct ref_pool r = {.nsp = p->n_spatial, .planes = xs.dims[0] * xs.dims[1], .nin = 1,
                         .nout = 1, .ntap = 1};
    for (int i = 0; i < r.nsp; i++) {
        r.in[i] = xs.dims[2 + i];
        r.k[i] = p->kernel[i];
        r.s[i] = p->strides[i] ? p->strides[i] : 1;
        r.d[i] = p->dilations[i] ? p->dilations[i] : 1;
        r.pb[i] = p->pads_begin[i];
        r.pe[i] = p->pads_end[i];
        r.out[i] = ref_pool_dim(r.in[i], r.k[i], r.s[i], r.d[i], r.pb[i], r.pe[i], p->ceil_mode);
        r.nin *= r.in[i], r.nout *= r.out[i], r.ntap *= r.k[i];
    }
    return r;
}

/* Tap t of output q: its flat index in the plane, or -1 in the padding; *lo_out gets the
 * window's first position per dim. */
static int64_t ref_tap(const struct ref_pool *r, int64_t q, int64_t t, int64_t *lo_out)
{
    int64_t at = 0, ok = 1, o[3], j[3], qr = q, tr = t;
    for (int i = r->nsp - 1; i >= 0; i--) {
        o[i] = qr % r->out[i], qr /= r->out[i];
        j[i] = tr % r->k[i], tr /= r->k[i];
    }
    for (int i = 0; i < r->nsp; i++) {
        int64_t lo = o[i] * r->s[i] - r->pb[i], pos = lo + j[i] * r->d[i];
        if (lo_out) lo_out[i] = lo;
        ok &= pos >= 0 && pos < r->in[i];
        at = at * r->in[i] + pos;
    }
    return ok ? at : -1;
}

/* count_include_pad's divisor: the window clipped to the padding (not the ceil overhang). */
static int64_t ref_padded_count(const struct ref_pool *r, const int64_t *lo)
{
    int64_t cnt = 1;
    for (int i = 0; i < r->nsp; i++) {
        int64_t end = lo[i] + r->k[i];
        if (end > r->in[i] + r->pe[i]) end = r->in[i] + r->pe[i];
        cnt *= end - lo[i];
    }
    return cnt;
}

/* max (arg: the first maximum's flat index per plane) or average of each window. */
static ht ref_pool_run(const ht *x, const tfc_pool_params *p, int is_max, ht *arg)
{
    struct ref_pool r = ref_pool_geom(x->sh, p);
    tfc_shape os = x->sh;
    for (int i = 0; i < r.nsp; i++) os.dims[2 + i] = r.out[i];
    ht y = ht_new(x->dt, os);
    if (arg) *arg = ht_new(I64, os);
    for (int64_t pl = 0; pl < r.planes; pl++)
        for (int64_t q = 0; q < r.nout; q++) {
            double best = -INFINITY, sum = 0;
            int64_t bi = -1, cnt = 0, lo[3];
            for (int64_t t = 0; t < r.ntap; t++) {
                int64_t at = ref_tap(&r, q, t, lo);
                if (at < 0) continue;
                double v = x->d[pl * r.nin + at];
                if (bi < 0 || v > best) best = v, bi = at;
                sum += v, cnt++;
            }
            if (!is_max && p->count_include_pad) cnt = ref_padded_count(&r, lo);
            y.d[pl * r.nout + q] = is_max ? best : sum / (double)cnt;
            if (arg) arg->d[pl * r.nout + q] = (double)bi;
        }
    return y;
}

/* The adjoint of average pooling: dy[q] / divisor shared by the taps of window q. */
static ht ref_avg_pool_grad(const ht *dy, const ht *x, const tfc_pool_params *p)
{
    struct ref_pool r = ref_pool_geom(x->sh, p);
    ht dx = ht_new(dy->dt, x->sh);
    for (int64_t pl = 0; pl < r.planes; pl++)
        for (int64_t q = 0; q < r.nout; q++) {
            int64_t n = 0, lo[3];
            for (int64_t t = 0; t < r.ntap; t++) n += ref_tap(&r, q, t, lo) >= 0;
            if (p->count_include_pad) n = ref_padded_count(&r, lo);
            double share = dy->d[pl * r.nout + q] / (double)n;
            for (int64_t t = 0; t < r.ntap; t++) {
                int64_t at = ref_tap(&r, q, t, NULL);
                if (at >= 0) dx.d[pl * r.nin + at] += share;
            }
        }
    return dx;
}

/* scatter (dx[plane, idx] += dy) or gather (x[plane, idx]) through argmax indices. */
static ht ref_argmax_route(const ht *v, const ht *idx, tfc_shape big, int scatter)
{
    int64_t Q = 1, P = 1;
    for (int i = 2; i < idx->sh.rank; i++) Q *= idx->sh.dims[i];
    for (int i = 2; i < big.rank; i++) P *= big.dims[i];
    ht o = ht_new(v->dt, scatter ? big : idx->sh);
    for (int64_t pl = 0; Q && pl < idx->n / Q; pl++)
        for (int64_t q = 0; q < Q; q++) {
            int64_t k = (int64_t)idx->d[pl * Q + q];
            if (scatter)
                o.d[pl * P + k] += v->d[pl * Q + q];
            else
                o.d[pl * Q + q] = v->d[pl * P + k];
        }
    return o;
}

static const struct pool_case {
    tfc_shape sh;
    tfc_pool_params p;
    int dyn;
} pool_cases[] = {
    {{4, {2, 3, 5, 6}}, {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, 0}, 0},
    {{4, {1, 2, 7, 5}}, {2, {3, 2}, {2, 1}, {1, 0}, {1, 1}, {0}, 1, 0}, 0},
    {{4, {1, 2, 7, 5}}, {2, {3, 2}, {2, 1}, {1, 0}, {1, 1}, {0}, 1, 1}, 1},
    {{4, {2, 1, 6, 6}}, {2, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0}, 0, 1}, 0},
    {{3, {2, 2, 9}}, {1, {3}, {2}, {1}, {0}, {0}, 1, 0}, 0},
    {{5, {1, 2, 4, 5, 3}}, {3, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, {0, 1, 1}, {0}, 1, 1}, 0},
    {{5, {1, 1, 3, 3, 3}}, {3, {3, 3, 3}, {0}, {0}, {0}, {0}, 0, 0}, 0},
    {{4, {0, 3, 4, 4}}, {2, {2, 2}, {0}, {0}, {0}, {0}, 0, 0}, 0},
};

/* Max pooling with dilations (a separate list: avg_pool refuses them). */
static const struct pool_case dilated_cases[] = {
    {{3, {2, 2, 9}}, {1, {3}, {2}, {2}, {1}, {2}, 0, 0}, 0},
    {{4, {1, 2, 8, 7}}, {2, {2, 3}, {1, 2}, {1, 1}, {0, 2}, {3, 2}, 1, 0}, 0},
    {{4, {1, 1, 4, 4}}, {2, {2, 2}, {1, 1}, {0}, {0}, {2, 2}, 0, 0}, 1},
};

static void pool_case_run(enum tfc_dtype dt, const struct pool_case *q, int with_avg)
{
    struct tc c;
    tc_begin(&c, "pool %s %s k=%lld s=%lld pads=%lld/%lld dil=%lld ceil=%d incl=%d%s", DT(dt),
             SHP(q->sh), (long long)q->p.kernel[0], (long long)q->p.strides[0],
             (long long)q->p.pads_begin[0], (long long)q->p.pads_end[0],
             (long long)q->p.dilations[0], q->p.ceil_mode, q->p.count_include_pad,
             q->dyn ? " (dynamic)" : "");
    c.dyn = q->dyn;
    ht x = ht_rand(dt, q->sh, -4, 4, 0), arg;
    tfc_tensor *tx = tc_in(&c, &x), *ti = NULL;
    ht ymax = ref_pool_run(&x, &q->p, 1, &arg);
    tc_want(&c, tfc_max_pool(c.g, tx, &q->p, &ti), ht_copy(&ymax), 0, "max_pool");
    tc_want(&c, ti, ht_copy(&arg), 0, "max_pool indices");
    tc_want(&c, tfc_max_pool(c.g, tx, &q->p, NULL), ht_copy(&ymax), 0, "max_pool, no indices");
    /* the gradient ops, fed the reference argmax */
    ht dy = ht_rand(dt, ymax.sh, -2, 2, 0.1);
    tfc_tensor *tdy = tc_in(&c, &dy), *tai = tc_in(&c, &arg);
    tfc_tensor *in_g[3] = {tdy, tai, tx}, *in_t[2] = {tx, tai};
    tc_want(&c, tfc_op(c.g, "max_pool_grad", 3, in_g, NULL, NULL, 0),
            ref_argmax_route(&dy, &arg, x.sh, 1), tol_of(dt), "max_pool_grad");
    tc_want(&c, tfc_op(c.g, "max_pool_gather", 2, in_t, NULL, NULL, 0),
            ref_argmax_route(&x, &arg, x.sh, 0), 0, "max_pool_gather");
    if (with_avg) {
        tc_want(&c, tfc_avg_pool(c.g, tx, &q->p), ref_pool_run(&x, &q->p, 0, NULL), tol_of(dt),
                "avg_pool");
        struct tfc_pool_params p = q->p;
        char attrs[256]; /* avg_pool_grad is reached by name: its attributes as text */
        int k = 0;
        const char *names[] = {"kernel", "strides", "pads_begin", "pads_end"};
        const int64_t *lists[] = {p.kernel, p.strides, p.pads_begin, p.pads_end};
        for (int a = 0; a < 4; a++) {
            k += snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%s=[", a ? "," : "", names[a]);
            for (int i = 0; i < p.n_spatial; i++)
                k += snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%lld", i ? "," : "",
                              (long long)(a == 1 && !lists[a][i] ? 1 : lists[a][i]));
            k += snprintf(attrs + k, sizeof attrs - (size_t)k, "]");
        }
        snprintf(attrs + k, sizeof attrs - (size_t)k, ",ceil_mode=%d,count_include_pad=%d",
                 p.ceil_mode, p.count_include_pad);
        tfc_tensor *in_a[2] = {tdy, tx};
        tc_want(&c, tfc_op(c.g, "avg_pool_grad", 2, in_a, attrs, NULL, 0),
                ref_avg_pool_grad(&dy, &x, &q->p), tol_of(dt), "avg_pool_grad (%s)", attrs);
    }
    tc_run(&c);
    ht_free(&x), ht_free(&arg), ht_free(&ymax), ht_free(&dy);
}

/* The 2-D fast path of codelets/pool.c: 2x2 stride-2 windows (its unrolled case) whose last
 * row and column are clipped by ceil_mode or padded, on odd sizes. */
static const struct pool_case fast_2x2_cases[] = {
    {{4, {2, 3, 7, 5}}, {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 1, 0}, 0},
    {{4, {1, 2, 6, 7}}, {2, {2, 2}, {2, 2}, {1, 1}, {1, 1}, {0}, 0, 1}, 0},
    {{4, {1, 2, 5, 7}}, {2, {2, 2}, {2, 2}, {1, 0}, {0, 1}, {0}, 1, 0}, 0},
    /* rows of 14, 7 and 9 (+1 clipped) windows: codelets/pool.c's float blocks of 8 and 4
     * windows, the last block overlapping the one before */
    {{4, {2, 3, 6, 28}}, {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, 0}, 0},
    {{4, {1, 2, 4, 14}}, {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, 0}, 0},
    {{4, {1, 2, 5, 19}}, {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 1, 0}, 0},
};

/* NaN and ties in 2x2 stride-2 windows, whole and clipped by ceil_mode: a NaN wins over a
 * number, the first NaN or the first of equal maxima keeps its index. */
static void pool_fast_nan_ties(enum tfc_dtype dt)
{
    struct tc c;
    tc_begin(&c, "max_pool 2x2 NaN and ties %s", DT(dt));
    static const double xs[20] = {1, NAN, NAN, 0, 2, 3, 4, 9, 9, 5,
                                  0, 7,   7,   -1, 1, 7, 6, 8, 8, NAN};
    static const double ys[6] = {NAN, NAN, 5, 7, 8, NAN}, is[6] = {1, 2, 9, 11, 17, 19};
    ht x = ht_new(dt, S(1, 1, 4, 5)), y = ht_new(dt, S(1, 1, 2, 3)), arg = ht_new(I64, y.sh);
    for (int64_t i = 0; i < x.n; i++) x.d[i] = xs[i];
    for (int64_t i = 0; i < y.n; i++) y.d[i] = ys[i], arg.d[i] = is[i];
    tfc_pool_params p = {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 1, 0};
    tfc_tensor *ti = NULL;
    tc_want(&c, tfc_max_pool(c.g, tc_in(&c, &x), &p, &ti), y, 0, "max_pool");
    tc_want(&c, ti, arg, 0, "indices");
    tc_run(&c);
    ht_free(&x);
}

/* The same rules along a row of 10 windows (the float kernel's blocks of 8, the second
 * overlapping the first): each window's taps in order (row 0's two, then row 1's), and the
 * tap whose value and index win. */
static void pool_fast_nan_ties_row(enum tfc_dtype dt)
{
    struct tc c;
    tc_begin(&c, "max_pool 2x2 NaN and ties along a row %s", DT(dt));
    static const double taps[10][4] = {
        {1, NAN, NAN, 0}, {2, 3, 4, 9}, {9, 5, 0, 7}, {7, -1, 1, 7}, {6, 8, 8, NAN},
        {NAN, 1, 2, 3}, {-0.0, 0, 0, 0}, {-3, -2, -2, -1}, {5, 5, 5, 5}, {1, 2, NAN, NAN}};
    static const int win[10] = {1, 3, 0, 0, 3, 0, 0, 3, 0, 2};
    const int64_t W = 20;
    ht x = ht_new(dt, S(1, 1, 2, 20)), y = ht_new(dt, S(1, 1, 1, 10)), arg = ht_new(I64, y.sh);
    for (int w = 0; w < 10; w++) {
        for (int t = 0; t < 4; t++) x.d[(t >> 1) * W + 2 * w + (t & 1)] = taps[w][t];
        y.d[w] = taps[w][win[w]];
        arg.d[w] = (double)((win[w] >> 1) * W + 2 * w + (win[w] & 1));
    }
    tfc_pool_params p = {2, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, 0};
    tfc_tensor *ti = NULL;
    tc_want(&c, tfc_max_pool(c.g, tc_in(&c, &x), &p, &ti), y, 0, "max_pool");
    tc_want(&c, ti, arg, 0, "indices");
    tc_run(&c);
    ht_free(&x);
}

/* Ties: small integers repeat in every window; the first in row-major window order wins. */
static void pool_ties(enum tfc_dtype dt)
{
    struct tc c;
    tc_begin(&c, "max_pool ties %s", DT(dt));
    ht x = ht_new(dt, S(1, 2, 4, 6));
    for (int64_t i = 0; i < x.n; i++) x.d[i] = (double)rng_int(0, 2);
    tfc_pool_params p = {2, {2, 3}, {1, 2}, {0}, {0}, {0}, 0, 0};
    ht arg, y = ref_pool_run(&x, &p, 1, &arg);
    tfc_tensor *tx = tc_in(&c, &x), *ti = NULL;
    tc_want(&c, tfc_max_pool(c.g, tx, &p, &ti), y, 0, "max_pool");
    tc_want(&c, ti, arg, 0, "indices: the first maximum");
    /* global average pooling is a reduce_mean over the spatial dims, kept as 1 */
    ht gx = ht_rand(dt, S(2, 3, 4, 5), -3, 3, 0), gy = ht_new(dt, S(2, 3, 1, 1));
    for (int64_t i = 0; i < gx.n; i++) gy.d[i / 20] += gx.d[i] / 20.0;
    tc_want(&c, tfc_global_avg_pool(c.g, tc_in(&c, &gx)), gy, tol_of(dt), "global_avg_pool");
    tc_run(&c);
    ht_free(&x), ht_free(&gx);
}

/* Build-time errors name the attribute and what is allowed. */
static void pool_errors(void)
{
    static const struct {
        const char *op, *attrs, *want;
    } bad[] = {
        {"max_pool", "kernel=[2]", "kernel has 1 values, the input has 2 spatial dims"},
        {"max_pool", "kernel=[2,2],strides=[1]", "strides has 1 values"},
        {"max_pool", "kernel=[2,2],pads_begin=[2,0]", "a pad is larger than half"},
        {"max_pool", "kernel=[0,2]", "kernel, strides and dilations must be >= 1"},
        {"avg_pool", "kernel=[2,2],dilations=[2,1]", "dilations must be 1 for avg_pool"},
        {"avg_pool", "kernel=[2,2],with_indices=1", "with_indices is for max_pool only"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) return;
        tfc_tensor *x = tfc_placeholder(g, "x", F32, S(1, 2, 4, 4));
        tfc_tensor *y = tfc_op(g, bad[i].op, 1, &x, bad[i].attrs, NULL, 0);
        const char *msg = tfc_graph_errmsg(g);
        if (y || !tfc_graph_status(g) || !msg || !strstr(msg, bad[i].want))
            REPORT("%s(%s): want an error with '%s', got %s", bad[i].op, bad[i].attrs,
                   bad[i].want, msg ? msg : "none");
        else
            PASS();
        tfc_graph_destroy(g);
    }
    tfc_graph *g = NULL;
    if (tfc_graph_create(&g)) return;
    tfc_tensor *v = tfc_placeholder(g, "v", F32, S(4, 4));
    tfc_pool_params p = {2, {2, 2}, {0}, {0}, {0}, {0}, 0, 0};
    if (tfc_max_pool(g, v, &p, NULL) || !strstr(tfc_graph_errmsg(g), "got rank 2"))
        REPORT("max_pool of a rank-2 input: want 'got rank 2', got %s", tfc_graph_errmsg(g));
    else
        PASS();
    tfc_graph_destroy(g);
}

static void test_pool(void)
{
    rng_seed(41);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int q = 0; q < COUNT(pool_cases); q++) pool_case_run(dt, &pool_cases[q], 1);
        for (int q = 0; q < COUNT(dilated_cases); q++) pool_case_run(dt, &dilated_cases[q], 0);
        pool_ties(dt);
        for (int q = 0; q < COUNT(fast_2x2_cases); q++) pool_case_run(dt, &fast_2x2_cases[q], 1);
        pool_fast_nan_ties(dt);
        pool_fast_nan_ties_row(dt);
    }
    pool_errors();
}

/* ---- pad and pad_grad --------------------------------------------------------------------- */

/* NumPy's np.pad: constant fills; reflect mirrors about the border element; edge repeats it.
 * scatter: the adjoint instead (dy summed onto the sources; x gives the shape). */
static ht ref_pad(const ht *x, const int64_t *b, const int64_t *e, int mode, double value,
                  const ht *dy)
{
    tfc_shape os = x->sh;
    for (int d = 0; d < os.rank; d++) os.dims[d] += b[d] + e[d];
    ht o = ht_new(dy ? dy->dt : x->dt, dy ? x->sh : os);
    int64_t idx[TFC_MAX_RANK];
    for (int64_t k = 0; k < numel(os); k++) {
        unravel(os, k, idx);
        int64_t src = 0, inside = 1;
        for (int d = 0; d < os.rank; d++) {
            int64_t n = x->sh.dims[d], i = idx[d] - b[d];
            if (i < 0 || i >= n) {
                if (mode == TFC_PAD_CONSTANT) inside = 0;
                else if (mode == TFC_PAD_EDGE) i = i < 0 ? 0 : n - 1;
                else i = i < 0 ? -i : 2 * (n - 1) - i;
            }
            src = src * n + i;
        }
        if (dy) {
            if (inside) o.d[src] += dy->d[k]; /* src means nothing outside */
        } else
            o.d[k] = inside ? x->d[src] : as_dtype(x->dt, value);
    }
    return o;
}

static const struct pad_case {
    tfc_shape sh;
    int64_t b[4], e[4];
    int dyn;
} pad_cases[] = {
    {{1, {5}}, {2}, {3}, 0},
    {{2, {3, 4}}, {1, 0}, {2, 3}, 0},
    {{2, {3, 4}}, {2, 3}, {1, 1}, 1},
    {{3, {2, 3, 4}}, {0, 2, 1}, {1, 0, 3}, 0},
    {{4, {2, 2, 3, 3}}, {0, 0, 1, 2}, {0, 0, 2, 1}, 1},
    {{2, {1, 4}}, {0, 0}, {0, 0}, 0},
};

static void pad_case_run(enum tfc_dtype dt, const struct pad_case *q)
{
    static const char *const modes[] = {"constant", "reflect", "edge"};
    for (int mode = 0; mode < 3; mode++) {
        struct tc c;
        tc_begin(&c, "pad %s %s %s%s", modes[mode], DT(dt), SHP(q->sh),
                 q->dyn ? " (dynamic)" : "");
        c.dyn = q->dyn;
        ht x = is_float(dt) ? ht_rand(dt, q->sh, -4, 4, 0) : ht_rand(dt, q->sh, -50, 50, 0);
        tfc_tensor *tx = tc_in(&c, &x);
        tc_want(&c, tfc_pad(c.g, tx, q->b, q->e, (enum tfc_pad_mode)mode, 2.5),
                ref_pad(&x, q->b, q->e, mode, 2.5, NULL), 0, "pad value 2.5");
        if (is_float(dt)) {
            ht y = ref_pad(&x, q->b, q->e, mode, 0, NULL);
            ht dy = ht_rand(dt, y.sh, -2, 2, 0.1);
            tfc_tensor *in2[2] = {tc_in(&c, &dy), tx};
            char attrs[160];
            int k = snprintf(attrs, sizeof attrs, "mode=%d,begin=[", mode);
            for (int d = 0; d < q->sh.rank; d++)
                k += snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%lld", d ? "," : "",
                              (long long)q->b[d]);
            k += snprintf(attrs + k, sizeof attrs - (size_t)k, "],end=[");
            for (int d = 0; d < q->sh.rank; d++)
                k += snprintf(attrs + k, sizeof attrs - (size_t)k, "%s%lld", d ? "," : "",
                              (long long)q->e[d]);
            snprintf(attrs + k, sizeof attrs - (size_t)k, "]");
            tc_want(&c, tfc_op(c.g, "pad_grad", 2, in2, attrs, NULL, 0),
                    ref_pad(&x, q->b, q->e, mode, 0, &dy), tol_of(dt), "pad_grad (%s)", attrs);
            ht_free(&y), ht_free(&dy);
        }
        tc_run(&c);
        ht_free(&x);
    }
}

/* np.pad([1, 2, 3], 2, mode) written out, and the errors that name what is allowed. */
static void pad_literal_and_errors(void)
{
    struct tc c;
    tc_begin(&c, "pad literals");
    ht x = ht_vals(F64, S(3), (double[]){1, 2, 3});
    tfc_tensor *tx = tc_in(&c, &x);
    const int64_t two[1] = {2};
    tc_want(&c, tfc_pad(c.g, tx, two, two, TFC_PAD_REFLECT, 0),
            ht_vals(F64, S(7), (double[]){3, 2, 1, 2, 3, 2, 1}), 0, "reflect");
    tc_want(&c, tfc_pad(c.g, tx, two, two, TFC_PAD_EDGE, 0),
            ht_vals(F64, S(7), (double[]){1, 1, 1, 2, 3, 3, 3}), 0, "edge");
    tc_want(&c, tfc_pad(c.g, tx, two, two, TFC_PAD_CONSTANT, -1),
            ht_vals(F64, S(7), (double[]){-1, -1, 1, 2, 3, -1, -1}), 0, "constant -1");
    tc_run(&c);
    ht_free(&x);
    static const struct {
        const char *attrs, *want;
    } bad[] = {
        {"begin=[3,0],end=[0,0],mode=1", "reflect pads 3 and 0 must be smaller than the dim"},
        {"begin=[0,-1],end=[0,0]", "dim 1: pads -1 and 0 must be >= 0"},
        {"begin=[1],end=[1]", "begin has 1 values and end 1, the input has rank 2"},
        {"begin=[0,0],end=[0,0],mode=3", "mode 3 is unknown"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) return;
        tfc_tensor *p = tfc_placeholder(g, "p", F32, S(3, 4));
        tfc_tensor *y = tfc_op(g, "pad", 1, &p, bad[i].attrs, NULL, 0);
        const char *msg = tfc_graph_errmsg(g);
        if (y || !msg || !strstr(msg, bad[i].want))
            REPORT("pad(%s): want an error with '%s', got %s", bad[i].attrs, bad[i].want,
                   msg ? msg : "none");
        else
            PASS();
        tfc_graph_destroy(g);
    }
}

static void test_pad(void)
{
    rng_seed(43);
    const enum tfc_dtype dts[] = {F32, F64, I32, I64};
    for (int di = 0; di < COUNT(dts); di++)
        for (int q = 0; q < COUNT(pad_cases); q++) pad_case_run(dts[di], &pad_cases[q]);
    pad_literal_and_errors();
}

/* ---- dropout and dropout_grad ------------------------------------------------------------- */

/* Philox4x32-10 against Random123's known-answer vectors (kat_vectors: counter, key, result),
 * so that the reference below rests on the published generator, not on the library alone. */
static void dropout_philox_kat(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int k = 0; k < COUNT(kat); k++) {
        uint32_t c[4] = {kat[k][0], kat[k][1], kat[k][2], kat[k][3]};
        tfc_philox4x32_10(c, kat[k][4], kat[k][5]);
        if (memcmp(c, kat[k] + 6, sizeof c))
            REPORT("philox4x32-10 vector %d: got %08x %08x %08x %08x, want %08x %08x %08x %08x",
                   k, c[0], c[1], c[2], c[3], kat[k][6], kat[k][7], kat[k][8], kat[k][9]);
        else
            PASS();
    }
}

/* The float64 reference: element i's word w from the generator; kept when w * 2^-32 >= rate,
 * then divided by 1 - rate; training 0 is the identity. */
static ht ref_dropout(const ht *x, double rate, uint64_t seed, uint64_t step, int training)
{
    ht o = ht_new(x->dt, x->sh);
    for (int64_t i = 0; i < x->n; i++) {
        uint32_t w[4];
        tfc_philox_block(seed, step, (uint64_t)i / 4, w);
        int keep = ldexp((double)w[i % 4], -32) >= rate;
        o.d[i] = !training ? x->d[i] : keep ? x->d[i] / (1.0 - rate) : 0;
    }
    return o;
}

static void dropout_case_run(enum tfc_dtype dt, tfc_shape sh, int dyn, double rate,
                             uint64_t step, int training)
{
    struct tc c;
    uint64_t seed = 0x5eed0000ull + (uint64_t)(rate * 100) + step;
    tc_begin(&c, "dropout %s %s%s rate %g step %llu training %d", DT(dt), SHP(sh),
             dyn ? " (dynamic)" : "", rate, (unsigned long long)step, training);
    c.dyn = dyn;
    ht x = ht_rand(dt, sh, -4, 4, 0.1), dy = ht_rand(dt, sh, -2, 2, 0.1);
    ht st = ht_vals(I64, S0, (double[]){(double)step});
    ht tr = ht_vals(F32, S0, (double[]){training ? 1 : 0});
    tfc_tensor *tx = tc_in(&c, &x), *tdy = tc_in(&c, &dy), *tst = tc_in(&c, &st);
    tfc_tensor *ttr = tc_in(&c, &tr);
    tc_want(&c, tfc_dropout(c.g, tx, rate, ttr, tst, seed),
            ref_dropout(&x, rate, seed, step, training), tol_of(dt), "dropout");
    char attrs[96];
    snprintf(attrs, sizeof attrs, "rate=%.17g,seed=%llu", rate, (unsigned long long)seed);
    tfc_tensor *in3[3] = {tdy, tst, ttr};
    tc_want(&c, tfc_op(c.g, "dropout_grad", 3, in3, attrs, NULL, 0),
            ref_dropout(&dy, rate, seed, step, training), tol_of(dt), "dropout_grad (%s)", attrs);
    tc_run(&c);
    ht_free(&x), ht_free(&dy), ht_free(&st), ht_free(&tr);
}

/* Runs fetches over constants only; writes each value into got (the caller destroys them). */
static int dropout_fetch(tfc_graph *g, const char *label, int n, tfc_tensor **t, tfc_value **got)
{
    tfc_session *s = NULL;
    tfc_status st = tfc_graph_status(g) ? tfc_graph_status(g) : open_session(g, &s);
    if (!st) st = tfc_session_run(s, 0, NULL, NULL, n, t, got, 0, NULL);
    if (st)
        REPORT("%s: %s", label, s ? tfc_session_errmsg(s) : tfc_graph_errmsg(g));
    tfc_session_destroy(s);
    return st == TFC_OK;
}

/* The fraction of elements where a and b (float32) differ in being zero. */
static double dropout_disagree(const tfc_value *a, const tfc_value *b, int64_t n)
{
    const float *p = tfc_value_cdata(a), *q = tfc_value_cdata(b);
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += (p[i] == 0) != (q[i] == 0);
    return (double)d / (double)n;
}

/* Over 2^20 units: the kept fraction is within 5 sigma of 1 - rate, and masks of another step
 * or another seed differ in about 2 rate (1 - rate) of the units, as independent masks do.
 * Every element has the exact bits of the reference mask times x times the float32 scale
 * (one IEEE multiply), whichever device ran it: CPU and OpenCL results are bit-identical. */
static void dropout_statistics(void)
{
    const int64_t n = 1 << 20;
    const double rate = 0.3;
    const uint64_t seeds[3] = {77, 77, 78}, steps[3] = {5, 6, 5}; /* next step, other seed */
    tfc_graph *g = NULL;
    if (tfc_graph_create(&g)) return;
    tfc_value *xv = NULL;
    tfc_value_create(F32, S(n), &xv);
    float *x = xv ? tfc_value_data(xv) : NULL;
    for (int64_t i = 0; x && i < n; i++) x[i] = 1.0f + (float)(i % 1000) / 1024.0f;
    tfc_tensor *tx = tfc_constant(g, "x", xv), *tr = tfc_scalar(g, F32, 1), *y[3];
    for (int k = 0; k < 3; k++)
        y[k] = tfc_dropout(g, tx, rate, tr, tfc_scalar(g, I64, (double)steps[k]), seeds[k]);
    tfc_value *got[3] = {0};
    g_cases++;
    if (x && dropout_fetch(g, "dropout statistics", 3, y, got)) {
        const float scale = (float)(1.0 / (1.0 - rate));
        double sd = sqrt(rate * (1 - rate) / (double)n), ok = 1;
        for (int k = 0; k < 3; k++) {
            const float *p = tfc_value_cdata(got[k]);
            int64_t kept = 0, bad = 0;
            for (int64_t i = 0; i < n; i++) {
                uint32_t w[4];
                tfc_philox_block(seeds[k], steps[k], (uint64_t)i / 4, w);
                float want = ldexp((double)w[i % 4], -32) >= rate ? x[i] * scale : 0.0f;
                kept += p[i] != 0;
                bad += memcmp(&p[i], &want, sizeof want) != 0;
            }
            double f = (double)kept / (double)n;
            if (fabs(f - (1 - rate)) > 5 * sd || bad)
                ok = 0, REPORT("dropout statistics: mask %d keeps %.6f of the units (want %.6f "
                               "+- %.6f); %lld elements are not the bits of x * %.9g or 0", k,
                               f, 1 - rate, 5 * sd, (long long)bad, (double)scale);
        }
        double want = 2 * rate * (1 - rate), sd2 = sqrt(want * (1 - want) / (double)n);
        double ds = dropout_disagree(got[0], got[1], n), dk = dropout_disagree(got[0], got[2], n);
        if (fabs(ds - want) > 5 * sd2 || fabs(dk - want) > 5 * sd2)
            ok = 0, REPORT("dropout statistics: masks differ in %.6f of the units between steps "
                           "and %.6f between seeds, want %.6f +- %.6f", ds, dk, want, 5 * sd2);
        if (ok) PASS(), mark("dropout");
    }
    for (int k = 0; k < 3; k++) tfc_value_destroy(got[k]);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* Dropout of a matmul's output: under run-tiling.sh the matmul runs as tiles, and the mask
 * must not change with them (element i is i of the whole tensor). */
static void dropout_after_matmul(enum tfc_dtype dt)
{
    struct tc c;
    tc_begin(&c, "dropout of a matmul %s", DT(dt));
    ht a = ht_rand(dt, S(6, 5), -2, 2, 0.1), b = ht_rand(dt, S(5, 7), -2, 2, 0.1);
    ht ab = ht_new(dt, S(6, 7));
    for (int64_t i = 0; i < 6; i++)
        for (int64_t j = 0; j < 7; j++)
            for (int64_t k = 0; k < 5; k++) ab.d[i * 7 + j] += a.d[i * 5 + k] * b.d[k * 7 + j];
    tfc_tensor *prod = tfc_matmul(c.g, tc_in(&c, &a), tc_in(&c, &b), 0, 0);
    tc_want(&c, tfc_dropout(c.g, prod, 0.4, tfc_scalar(c.g, F32, 1), tfc_scalar(c.g, I64, 12), 9),
            ref_dropout(&ab, 0.4, 9, 12, 1), tol_loose(dt), "dropout(matmul)");
    tc_run(&c);
    ht_free(&a), ht_free(&b), ht_free(&ab);
}

/* seed 0: two layers in one graph differ; the same graph built again drops the same units; a
 * different graph seed drops others. */
static void dropout_derived_seeds(void)
{
    const int64_t n = 4096;
    tfc_value *got[2][2] = {{0}};
    for (int k = 0; k < 2; k++) {
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) return;
        tfc_graph_set_seed(g, k ? 12 : 11);
        tfc_tensor *x = tfc_fill(g, S(n), F32, 1.0), *tr = tfc_scalar(g, F32, 1);
        tfc_tensor *st = tfc_scalar(g, I64, 3);
        tfc_tensor *y[2] = {tfc_dropout(g, x, 0.5, tr, st, 0), tfc_dropout(g, x, 0.5, tr, st, 0)};
        g_cases++;
        dropout_fetch(g, "dropout derived seeds", 2, y, got[k]);
        tfc_graph_destroy(g);
    }
    if (got[0][0] && got[0][1] && got[1][0]) {
        double layers = dropout_disagree(got[0][0], got[0][1], n);
        double seeds = dropout_disagree(got[0][0], got[1][0], n);
        if (layers < 0.4 || seeds < 0.4)
            REPORT("dropout derived seeds: two layers differ in %.3f of the units, two graph "
                   "seeds in %.3f (independent masks: about 0.5)", layers, seeds);
        else
            PASS();
    }
    /* the same graph again: the same seeds, so the same units */
    tfc_graph *g = NULL;
    if (!tfc_graph_create(&g)) {
        tfc_graph_set_seed(g, 11);
        tfc_tensor *x = tfc_fill(g, S(n), F32, 1.0), *tr = tfc_scalar(g, F32, 1);
        tfc_tensor *st = tfc_scalar(g, I64, 3);
        tfc_tensor *y[2] = {tfc_dropout(g, x, 0.5, tr, st, 0), tfc_dropout(g, x, 0.5, tr, st, 0)};
        tfc_value *again[2] = {0};
        if (dropout_fetch(g, "dropout derived seeds again", 2, y, again) && got[0][1]) {
            if (memcmp(tfc_value_cdata(again[1]), tfc_value_cdata(got[0][1]), (size_t)n * 4))
                REPORT("dropout derived seeds: the same graph built twice drops other units");
            else
                PASS();
        }
        for (int k = 0; k < 2; k++) tfc_value_destroy(again[k]);
        tfc_graph_destroy(g);
    }
    for (int k = 0; k < 4; k++) tfc_value_destroy(got[k / 2][k % 2]);
}

/* The step is the global step as the run found it: built before the increment (as tfc_minimize
 * builds it, after the model), the dropout reads the value before the increment of the same
 * run, although its input comes later than the increment could run (operations on a variable
 * follow node creation order, and StarPU orders the read before the read-write). */
static void dropout_global_step_order(void)
{
    const char *label = "dropout reads the global step before its increment";
    g_cases++;
    tfc_graph *g = NULL;
    tfc_session *s = NULL;
    ht x = ht_rand(F32, S(64), -3, 3, 0.1);
    tfc_value *xv = ht_value(&x), *one = NULL;
    tfc_value_scalar(F32, 1, &one);
    if (tfc_graph_create(&g)) goto out;
    tfc_tensor *gs = tfc_global_step(g), *px = tfc_placeholder(g, "x", F32, S(64));
    tfc_tensor *tr = tfc_placeholder(g, "training", F32, S0);
    tfc_tensor *y = tfc_dropout(g, tfc_add(g, px, px), 0.5, tr, NULL, 4242);
    tfc_tensor *inc = tfc_assign_add(g, gs, tfc_scalar(g, I64, 1));
    tfc_tensor *ft[2] = {px, tr};
    tfc_value *fv[2] = {xv, one};
    if (tfc_graph_status(g) || open_session(g, &s) || tfc_session_init_variables(s)) {
        REPORT("%s: %s", label, s ? tfc_session_errmsg(s) : tfc_graph_errmsg(g));
        goto out;
    }
    ht two_x = map2(&x, &x, F32, r_add);
    int ok = 1;
    for (uint64_t step = 0; step < 3 && ok; step++) {
        tfc_value *got = NULL;
        ht want = ref_dropout(&two_x, 0.5, 4242, step, 1);
        tfc_status st = tfc_session_run(s, 2, ft, fv, 1, &y, &got, 1, &inc);
        if (st)
            ok = 0, REPORT("%s: run %llu: %s", label, (unsigned long long)step,
                           tfc_session_errmsg(s));
        else
            ok = check_value(label, "y at the step before the increment", got, &want, 1e-6);
        tfc_value_destroy(got);
        ht_free(&want);
    }
    ht_free(&two_x);
    ht three = ht_vals(I64, S0, (double[]){3});
    if (ok && read_check(s, label, gs, &three)) mark("dropout");
    ht_free(&three);
out:
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_value_destroy(xv), tfc_value_destroy(one);
    ht_free(&x);
}

/* rate outside [0, 1), and inputs of the wrong kind: build errors naming the value. */
static void dropout_errors(void)
{
    static const struct {
        double rate;
        enum tfc_dtype x, step, training;
        const char *want;
    } bad[] = {
        {1, F32, I64, F32, "rate 1 is outside [0, 1)"},
        {-0.25, F32, I64, F32, "rate -0.25 is outside [0, 1)"},
        {NAN, F64, I64, F32, "rate nan is outside [0, 1)"},
        {0.5, I32, I64, F32, "the input must be float32 or float64, got int32"},
        {0.5, F32, I32, F32, "the step (input 1) must be an int64 scalar"},
        {0.5, F32, I64, I64, "training (input 2) must be a float32 scalar"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) return;
        tfc_tensor *x = tfc_placeholder(g, "x", bad[i].x, S(3));
        tfc_tensor *st = tfc_placeholder(g, "step", bad[i].step, S0);
        tfc_tensor *tr = tfc_placeholder(g, "training", bad[i].training, S0);
        tfc_tensor *y = tfc_dropout(g, x, bad[i].rate, tr, st, 1);
        const char *msg = tfc_graph_errmsg(g);
        if (y || !msg || !strstr(msg, bad[i].want))
            REPORT("dropout error %d: want an error with '%s', got %s", i, bad[i].want,
                   msg ? msg : "none");
        else
            PASS();
        tfc_graph_destroy(g);
    }
    /* the generic builder checks the rate attribute the same way */
    tfc_graph *g = NULL;
    if (tfc_graph_create(&g)) return;
    tfc_tensor *in[3] = {tfc_placeholder(g, "x", F32, S(3)), tfc_placeholder(g, "s", I64, S0),
                         tfc_placeholder(g, "t", F32, S0)};
    tfc_tensor *y = tfc_op(g, "dropout_grad", 3, in, "rate=1.5", NULL, 0);
    const char *msg = tfc_graph_errmsg(g);
    if (y || !msg || !strstr(msg, "rate 1.5 is outside [0, 1)"))
        REPORT("dropout_grad rate=1.5: got %s", msg ? msg : "no error");
    else
        PASS();
    tfc_graph_destroy(g);
}

static void test_dropout(void)
{
    rng_seed(47);
    dropout_philox_kat();
    const struct {
        tfc_shape sh;
        int dyn;
    } shapes[] = {{S(7), 0}, {S(3, 5), 0}, {S(2, 3, 4), 1}, {S(0, 3), 0},
                /* two of the CPU kernel's 64-element chunks and a tail of 15 */
                {S(13, 11), 0}};
    const double rates[] = {0, 0.3, 0.75};
    const uint64_t steps[] = {0, 5, (1ull << 33) + 7}; /* the last needs the counter's high word */
    const enum tfc_dtype dts[] = {F32, F64};
    for (int di = 0; di < COUNT(dts); di++)
        for (int si = 0; si < COUNT(shapes); si++)
            for (int ri = 0; ri < COUNT(rates); ri++)
                dropout_case_run(dts[di], shapes[si].sh, shapes[si].dyn, rates[ri],
                                 steps[(si + ri) % COUNT(steps)], 1);
    dropout_case_run(F32, S(4, 5), 0, 0.5, 9, 0); /* training 0: the identity */
    dropout_case_run(F64, S(9), 1, 0.5, 9, 0);
    dropout_after_matmul(F32);
    dropout_after_matmul(F64);
    dropout_statistics();
    dropout_derived_seeds();
    dropout_global_step_order();
    dropout_errors();
}

/* ---- squeeze, unsqueeze, flatten: reshapes by rule (their nodes are reshapes) ------------ */

static void test_squeeze(void)
{
    rng_seed(45);
    for (int dyn = 0; dyn < 2; dyn++) {
        struct tc c;
        tc_begin(&c, "squeeze/unsqueeze/flatten%s", dyn ? " (dynamic)" : "");
        c.dyn = dyn;
        ht x = ht_rand(F32, S(2, 1, 3, 1), -3, 3, 0);
        tfc_tensor *tx = tc_in(&c, &x);
        const int64_t last[1] = {-1}, both[2] = {1, 3};
        tc_want(&c, tfc_squeeze(c.g, tx, 0, NULL), reshaped(&x, S(2, 3)), 0, "squeeze all");
        tc_want(&c, tfc_squeeze(c.g, tx, 1, last), reshaped(&x, S(2, 1, 3)), 0, "squeeze -1");
        tc_want(&c, tfc_squeeze(c.g, tx, 2, both), reshaped(&x, S(2, 3)), 0, "squeeze 1, 3");
        tc_want(&c, tfc_unsqueeze(c.g, tx, 0), reshaped(&x, S(1, 2, 1, 3, 1)), 0,
                "unsqueeze 0");
        tc_want(&c, tfc_unsqueeze(c.g, tx, 4), reshaped(&x, S(2, 1, 3, 1, 1)), 0,
                "unsqueeze 4");
        tc_want(&c, tfc_unsqueeze(c.g, tx, -2), reshaped(&x, S(2, 1, 3, 1, 1)), 0,
                "unsqueeze -2");
        tc_want(&c, tfc_unsqueeze(c.g, tx, 2), reshaped(&x, S(2, 1, 1, 3, 1)), 0,
                "unsqueeze 2");
        tc_want(&c, tfc_flatten(c.g, tx, 0), reshaped(&x, S(1, 6)), 0, "flatten 0");
        tc_want(&c, tfc_flatten(c.g, tx, 1), reshaped(&x, S(2, 3)), 0, "flatten 1");
        tc_want(&c, tfc_flatten(c.g, tx, 3), reshaped(&x, S(6, 1)), 0, "flatten 3");
        tc_want(&c, tfc_flatten(c.g, tx, 4), reshaped(&x, S(6, 1)), 0, "flatten 4");
        tc_want(&c, tfc_flatten(c.g, tx, -2), reshaped(&x, S(2, 3)), 0, "flatten -2");
        tc_run(&c);
        ht_free(&x);
    }
    static const struct {
        int which;
        int64_t axis;
        const char *want;
    } bad[] = {
        {0, 0, "squeeze of 'x': dim 0 has size 2, not 1"},
        {0, 4, "squeeze of 'x': axis 4 is invalid for rank 4"},
        {1, 5, "unsqueeze of 'x': axis 5 is invalid for rank 4"},
        {1, -6, "unsqueeze of 'x': axis -6 is invalid"},
        {2, 5, "flatten of 'x': axis 5 is outside [-4, 4]"},
        {2, -5, "flatten of 'x': axis -5 is outside [-4, 4]"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) return;
        tfc_tensor *x = tfc_placeholder(g, "x", F32, S(2, 1, 3, 1)), *y;
        y = bad[i].which == 0   ? tfc_squeeze(g, x, 1, &bad[i].axis)
            : bad[i].which == 1 ? tfc_unsqueeze(g, x, bad[i].axis)
                                : tfc_flatten(g, x, bad[i].axis);
        const char *msg = tfc_graph_errmsg(g);
        if (y || !msg || !strstr(msg, bad[i].want))
            REPORT("want an error with '%s', got %s", bad[i].want, msg ? msg : "none");
        else
            PASS();
        tfc_graph_destroy(g);
    }
}

/* ---- fused optimizer updates (torch.optim formulas, float64 reference) ------------------- */

struct optim_case {
    const char *op;
    int n_slots;
    const char *attrs;
    double wd, mom, b1, b2, eps;
    int nesterov, centered, decoupled;
};

/* One reference step on element i of w and its slots s[k]. */
static void optim_ref(const struct optim_case *c, double lr, double t, double *w, double *s, double g)
{
    if (c->wd != 0 && c->decoupled) *w *= 1 - lr * c->wd;
    else if (c->wd != 0) g += c->wd * *w;
    if (!strcmp(c->op, "apply_sgd")) {
        *w -= lr * g;
    } else if (!strcmp(c->op, "apply_momentum")) {
        s[0] = c->mom * s[0] + g;
        *w -= lr * (c->nesterov ? g + c->mom * s[0] : s[0]);
    } else if (!strcmp(c->op, "apply_adagrad")) {
        s[0] += g * g;
        *w -= lr * g / (sqrt(s[0]) + c->eps);
    } else if (!strcmp(c->op, "apply_rmsprop")) {
        s[0] = c->b1 * s[0] + (1 - c->b1) * g * g;
        double avg;
        if (c->centered) {
            s[2] = c->b1 * s[2] + (1 - c->b1) * g;
            avg = sqrt(s[0] - s[2] * s[2]) + c->eps;
        } else {
            avg = sqrt(s[0]) + c->eps;
        }
        if (c->mom > 0) {
            s[1] = c->mom * s[1] + g / avg;
            *w -= lr * s[1];
        } else {
            *w -= lr * g / avg;
        }
    } else { /* adam */
        s[0] = c->b1 * s[0] + (1 - c->b1) * g;
        s[1] = c->b2 * s[1] + (1 - c->b2) * g * g;
        double bc1 = 1 - pow(c->b1, t), bc2 = 1 - pow(c->b2, t);
        *w -= lr / bc1 * s[0] / (sqrt(s[1]) / sqrt(bc2) + c->eps);
    }
}

static void test_optim_ops(void)
{
    static const struct optim_case cases[] = {
        {"apply_sgd", 0, "weight_decay=0.1", 0.1, 0, 0, 0, 0, 0, 0, 0},
        {"apply_momentum", 1, "momentum=0.9,nesterov=1", 0, 0.9, 0, 0, 0, 1, 0, 0},
        {"apply_momentum", 1, "momentum=0.8,weight_decay=0.01", 0.01, 0.8, 0, 0, 0, 0, 0, 0},
        {"apply_adagrad", 1, "eps=1e-10", 0, 0, 0, 0, 1e-10, 0, 0, 0},
        {"apply_rmsprop", 3, "beta1=0.99,eps=1e-8", 0, 0, 0.99, 0, 1e-8, 0, 0, 0},
        {"apply_rmsprop", 3, "beta1=0.9,eps=1e-6,momentum=0.5,centered=1", 0, 0.5, 0.9, 0, 1e-6, 0, 1, 0},
        {"apply_adam", 2, "beta1=0.9,beta2=0.999,eps=1e-8", 0, 0, 0.9, 0.999, 1e-8, 0, 0, 0},
        {"apply_adam", 2, "beta1=0.8,beta2=0.99,eps=1e-6,weight_decay=0.05,decoupled=1", 0.05, 0, 0.8, 0.99, 1e-6, 0, 0, 1},
        {"apply_adam", 2, "weight_decay=0.02", 0.02, 0, 0.9, 0.999, 1e-8, 0, 0, 0},
    };
    rng_seed(41);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int ci = 0; ci < COUNT(cases); ci++) {
            const struct optim_case *c = &cases[ci];
            char label[160];
            snprintf(label, sizeof label, "%s %s (%s)", c->op, DT(dt), c->attrs);
            g_cases++;
            tfc_graph *g = NULL;
            tfc_session *s = NULL;
            ht w = ht_rand(dt, S(2, 3), -1, 1, 0.05), grads[3];
            tfc_value *gv[3] = {0};
            for (int k = 0; k < 3; k++) {
                grads[k] = ht_rand(dt, S(2, 3), -2, 2, 0.05);
                gv[k] = ht_value(&grads[k]);
            }
            double slots[4][6] = {{0}};
            tfc_graph_create(&g);
            tfc_tensor *in[8];
            int n = 0;
            in[n++] = tfc_variable(g, "w", dt, S(2, 3), tfc_init_zeros());
            for (int k = 0; k < c->n_slots; k++) {
                char name[16];
                snprintf(name, sizeof name, "slot%d", k);
                in[n++] = tfc_variable(g, name, dt, S(2, 3), tfc_init_zeros());
            }
            tfc_tensor *gp = tfc_placeholder(g, "grad", dt, S(2, 3));
            in[n++] = gp;
            in[n++] = tfc_scalar(g, TFC_FLOAT32, 0.05);
            tfc_tensor *step = tfc_variable(g, "step", I64, S0, tfc_init_zeros());
            if (!strcmp(c->op, "apply_adam")) in[n++] = step;
            tfc_tensor *upd = tfc_op(g, c->op, n, in, c->attrs, NULL, 0);
            tfc_tensor *bump = tfc_assign_add(g, step, tfc_scalar(g, I64, 1));
            tfc_tensor *both[2] = {upd, bump}, *train = tfc_group(g, 2, both);
            int ok = 1;
            if (tfc_graph_status(g)) {
                REPORT("%s: graph build failed: %s", label, tfc_graph_errmsg(g));
                goto out;
            }
            if (open_session(g, &s) || tfc_session_init_variables(s)) {
                REPORT("%s: session failed", label);
                goto out;
            }
            tfc_value *wv = ht_value(&w);
            tfc_session_write_variable(s, in[0], wv);
            tfc_value_destroy(wv);
            double lr = (double)0.05f;
            for (int it = 0; it < 3; it++) {
                ok &= run_check(s, label, 1, &gp, &gv[it], train, 1, NULL);
                for (int64_t i = 0; i < w.n; i++) {
                    double sl[4] = {slots[0][i], slots[1][i], slots[2][i], slots[3][i]};
                    optim_ref(c, lr, it + 1, &w.d[i], sl, grads[it].d[i]);
                    for (int k = 0; k < 4; k++) slots[k][i] = sl[k];
                }
            }
            ht want = ht_copy(&w);
            for (int64_t i = 0; i < w.n; i++) want.d[i] = as_dtype(dt, want.d[i]);
            ok &= read_check(s, label, in[0], &want);
            for (int k = 0; k < c->n_slots && ok; k++) {
                ht sw = ht_new(dt, S(2, 3));
                for (int64_t i = 0; i < sw.n; i++) sw.d[i] = as_dtype(dt, slots[k][i]);
                ok &= read_check(s, label, in[1 + k], &sw);
                ht_free(&sw);
            }
            ht_free(&want);
            if (ok) mark(c->op), mark("group");
        out:
            tfc_session_destroy(s);
            tfc_graph_destroy(g);
            ht_free(&w);
            for (int k = 0; k < 3; k++) {
                tfc_value_destroy(gv[k]);
                ht_free(&grads[k]);
            }
        }
    }
    /* lr_schedule: step decay, exponential, cosine at step 25 */
    struct tc c;
    tc_begin(&c, "lr_schedule");
    ht st = ht_vals(I64, S0, (double[]){25});
    tfc_tensor *ts = tc_in(&c, &st);
    tc_want(&c, tfc_op(c.g, "lr_schedule", 1, &ts, "kind=0,base=0.1,gamma=0.5,period=10", NULL, 0),
            ht_vals(F32, S0, (double[]){0.1 * 0.25}), 1e-6, "step decay");
    tc_want(&c, tfc_op(c.g, "lr_schedule", 1, &ts, "kind=1,base=0.1,gamma=0.5,period=10", NULL, 0),
            ht_vals(F32, S0, (double[]){0.1 * pow(0.5, 2.5)}), 1e-6, "exponential");
    tc_want(&c, tfc_op(c.g, "lr_schedule", 1, &ts, "kind=2,base=0.1,period=100,floor=0.01", NULL, 0),
            ht_vals(F32, S0, (double[]){0.01 + 0.045 * (1 + cos(M_PI * 0.25))}), 1e-6, "cosine");
    tc_run(&c);
    ht_free(&st);
}

static void test_errors(void)
{
    static const enum tfc_dtype idts[] = {I32, I64};
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype idt = idts[di];
        char label[96];
        tfc_graph *g = NULL;
        tfc_session *s = NULL;
        g_cases++;
        if (tfc_graph_create(&g)) {
            REPORT("errors: tfc_graph_create");
            continue;
        }
        tfc_tensor *params = tfc_placeholder(g, "params", F32, S(5, 3));
        tfc_tensor *ix = tfc_placeholder(g, "ix", idt, S(3));
        tfc_tensor *gat = tfc_gather(g, params, ix);
        tfc_tensor *logits = tfc_placeholder(g, "logits", F32, S(3, 4));
        tfc_tensor *labels = tfc_placeholder(g, "labels", idt, S(3));
        tfc_tensor *xent = tfc_sparse_softmax_cross_entropy(g, logits, labels);
        if (gat) tfc_tensor_set_name(gat, "bad_gather");
        if (xent) tfc_tensor_set_name(xent, "bad_xent");
        if (tfc_graph_status(g) || open_session(g, &s)) {
            REPORT("errors: build: %s", tfc_graph_errmsg(g));
            tfc_graph_destroy(g);
            continue;
        }
        rng_seed(24);
        ht p = ht_rand(F32, S(5, 3), -3, 3, 0), l = ht_rand(F32, S(3, 4), -3, 3, 0);
        ht bad_ix[2] = {ht_vals(idt, S(3), (double[]){1, 5, 0}),
                        ht_vals(idt, S(3), (double[]){-1, 2, 0})};
        ht bad_lab[2] = {ht_vals(idt, S(3), (double[]){0, 4, 1}),
                         ht_vals(idt, S(3), (double[]){0, 1, -1})};
        ht good_ix = ht_vals(idt, S(3), (double[]){4, 0, 2});
        ht good_lab = ht_vals(idt, S(3), (double[]){3, 0, 1});
        tfc_value *vp = ht_value(&p), *vl = ht_value(&l);
        for (int k = 0; k < 2; k++) {
            tfc_value *vi = ht_value(&bad_ix[k]), *vb = ht_value(&bad_lab[k]);
            snprintf(label, sizeof label, "gather %s index %g out of range", DT(idt),
                     bad_ix[k].d[k ? 0 : 1]);
            expect_run_error(s, label, params, vp, ix, vi, gat, "bad_gather");
            snprintf(label, sizeof label, "sparse xent %s label %g out of range", DT(idt),
                     bad_lab[k].d[k ? 2 : 1]);
            expect_run_error(s, label, logits, vl, labels, vb, xent, "bad_xent");
            tfc_value_destroy(vi);
            tfc_value_destroy(vb);
        }
        /* the session still works, and the error does not stick to later runs */
        tfc_value *vi = ht_value(&good_ix), *vb = ht_value(&good_lab);
        tfc_tensor *ft[4] = {params, ix, logits, labels};
        tfc_value *fv[4] = {vp, vi, vl, vb};
        tfc_tensor *fetch[2] = {gat, xent};
        tfc_value *got[2] = {0};
        tfc_status st = tfc_session_run(s, 4, ft, fv, 2, fetch, got, 0, NULL);
        snprintf(label, sizeof label, "gather/xent %s after errors", DT(idt));
        if (st) {
            REPORT("%s: run failed (%s): %s", label, tfc_status_string(st), tfc_session_errmsg(s));
        } else {
            ht wg = ref_gather(&p, &good_ix), wx = ref_xent(&l, &good_lab, 1);
            check_value(label, "gather", got[0], &wg, tol_of(F32));
            check_value(label, "sparse xent", got[1], &wx, tol_loose(F32));
            ht_free(&wg), ht_free(&wx);
        }
        tfc_value_destroy(got[0]);
        tfc_value_destroy(got[1]);
        tfc_value_destroy(vi);
        tfc_value_destroy(vb);
        tfc_value_destroy(vp);
        tfc_value_destroy(vl);
        ht_free(&p), ht_free(&l), ht_free(&good_ix), ht_free(&good_lab);
        for (int k = 0; k < 2; k++) ht_free(&bad_ix[k]), ht_free(&bad_lab[k]);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
    }
}

/* max_pool_grad of float32 (codelets/pool.c's float scatter): an index outside the plane fails
 * the run with the kernel's message naming the node, position and range, and the session goes
 * on; -1 (a window of padding only) adds nothing; equal indices add up. */
static void test_pool_grad_range(void)
{
    tfc_graph *g = NULL;
    tfc_session *s = NULL;
    g_cases++;
    if (tfc_graph_create(&g)) {
        REPORT("pool grad range: tfc_graph_create");
        return;
    }
    ht x = ht_rand(F32, S(1, 1, 2, 2), -1, 1, 0);
    tfc_value *vx = ht_value(&x);
    tfc_tensor *dy = tfc_placeholder(g, "dy", F32, S(1, 1, 1, 3));
    tfc_tensor *ix = tfc_placeholder(g, "ix", I64, S(1, 1, 1, 3));
    tfc_tensor *in[3] = {dy, ix, tfc_constant(g, "x", vx)};
    tfc_tensor *dx = tfc_op(g, "max_pool_grad", 3, in, NULL, NULL, 0);
    if (dx) tfc_tensor_set_name(dx, "bad_pool_grad");
    if (tfc_graph_status(g) || open_session(g, &s)) {
        REPORT("pool grad range: build: %s", tfc_graph_errmsg(g));
        tfc_value_destroy(vx), ht_free(&x);
        tfc_graph_destroy(g);
        return;
    }
    ht vdy = ht_vals(F32, S(1, 1, 1, 3), (double[]){0.5, -2, 3});
    ht bad = ht_vals(I64, S(1, 1, 1, 3), (double[]){1, 4, 0});
    ht good = ht_vals(I64, S(1, 1, 1, 3), (double[]){-1, 3, 3});
    tfc_value *vd = ht_value(&vdy), *vb = ht_value(&bad), *vg = ht_value(&good);
    expect_run_error(s, "max_pool_grad f32 index 4 outside a plane of 4", dy, vd, ix, vb, dx,
                     "bad_pool_grad");
    tfc_tensor *ft[2] = {dy, ix};
    tfc_value *fv[2] = {vd, vg}, *got = NULL;
    tfc_status st = tfc_session_run(s, 2, ft, fv, 1, &dx, &got, 0, NULL);
    if (st) {
        REPORT("max_pool_grad f32 after an error: run failed (%s): %s", tfc_status_string(st),
               tfc_session_errmsg(s));
    } else {
        ht want = ht_vals(F32, S(1, 1, 2, 2), (double[]){0, 0, 0, 1});
        check_value("max_pool_grad f32, indices -1 3 3", "dx", got, &want, 0);
        ht_free(&want);
    }
    tfc_value_destroy(got);
    tfc_value_destroy(vd), tfc_value_destroy(vb), tfc_value_destroy(vg), tfc_value_destroy(vx);
    ht_free(&vdy), ht_free(&bad), ht_free(&good), ht_free(&x);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- coverage ------------------------------------------------------------------------------ */

static void test_op_table(void)
{
    int n = tfc_op_count();
    CU_ASSERT(n > 0);
    if (n > (int)sizeof g_executed) REPORT("the op table has %d ops; raise g_executed", n);
    for (int i = 0; i < n; i++) {
        const char *name = tfc_op_name(i);
        int found = 0;
        for (int k = 0; k < COUNT(op_cases) && !found; k++)
            found = name && strcmp(op_cases[k].op, name) == 0;
        if (!found)
            REPORT("registered op '%s' has no test case in test_ops.c (add one and list it in "
                   "op_cases[])",
                   name ? name : "(null)");
        else
            PASS();
    }
}

/* ---- normalization: batch_norm (both modes), its gradient and moving-statistics update,
 * layer_norm and its gradient, against float64 loops ------------------------------------- */

/* x = [N, C, S...] as N x C x S (element (n, c, s) at (n C + c) S + s). */
static void nc_geom(tfc_shape s, int64_t *n, int64_t *c, int64_t *sp)
{
    *n = s.dims[0];
    *c = s.dims[1];
    *sp = 1;
    for (int d = 2; d < s.rank; d++) *sp *= s.dims[d];
}

/* Channel c's mean and biased variance over N and the spatial dims. */
static void ref_channel_stats(const ht *x, int64_t c, double *mean, double *var)
{
    int64_t N, C, S;
    nc_geom(x->sh, &N, &C, &S);
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) sum += x->d[(n * C + c) * S + s];
    *mean = sum / (double)(N * S);
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) {
            double d = x->d[(n * C + c) * S + s] - *mean;
            sq += d * d;
        }
    *var = sq / (double)(N * S);
}

/* y, mean, var of batch norm; in[] = x, gamma, beta, moving_mean, moving_var. */
static void ref_batch_norm(const ht *in, int training, double eps, ht *out)
{
    const ht *x = &in[0];
    int64_t N, C, S;
    nc_geom(x->sh, &N, &C, &S);
    out[0] = ht_new(x->dt, x->sh);
    out[1] = ht_new(x->dt, S(C));
    out[2] = ht_new(x->dt, S(C));
    for (int64_t c = 0; c < C; c++) {
        double mean = in[3].d[c], var = in[4].d[c];
        if (training) ref_channel_stats(x, c, &mean, &var);
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                out[0].d[i] = in[1].d[c] * (x->d[i] - mean) / sqrt(var + eps) + in[2].d[c];
            }
        out[1].d[c] = mean;
        out[2].d[c] = var;
    }
}

/* dx, dgamma, dbeta, dmoving_mean, dmoving_var; in[] = dy, x, gamma, mean, var. */
static void ref_batch_norm_grad(const ht *in, int training, double eps, ht *out)
{
    const ht *dy = &in[0], *x = &in[1];
    int64_t N, C, S;
    nc_geom(x->sh, &N, &C, &S);
    double M = (double)(N * S);
    out[0] = ht_new(x->dt, x->sh);
    for (int k = 1; k < 5; k++) out[k] = ht_new(x->dt, S(C));
    for (int64_t c = 0; c < C; c++) {
        double mu = in[3].d[c], is = 1 / sqrt(in[4].d[c] + eps), gm = in[2].d[c];
        double sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                sdy += dy->d[i];
                sdyx += dy->d[i] * (x->d[i] - mu) * is;
            }
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t i = (n * C + c) * S + s;
                double xh = (x->d[i] - mu) * is;
                out[0].d[i] = training ? gm * is / M * (M * dy->d[i] - sdy - xh * sdyx)
                                       : gm * is * dy->d[i];
            }
        out[1].d[c] = sdyx;
        out[2].d[c] = sdy;
        out[3].d[c] = training ? 0 : -gm * is * sdy;
        out[4].d[c] = training ? 0 : -0.5 * gm * is * is * sdyx;
    }
}

static const tfc_shape *norm_shapes(int *n)
{
    static tfc_shape s[3];
    s[0] = S(5, 3);
    s[1] = S(2, 3, 2, 2);
    s[2] = S(3, 2, 4);
    *n = 3;
    return s;
}

/* batch_norm and batch_norm_grad by name, both modes (training a placeholder). */
static void batch_norm_ops_case(enum tfc_dtype dt, tfc_shape sh, int training, int dyn)
{
    struct tc c;
    tc_begin(&c, "batch_norm %s %s training=%d%s", DT(dt), SHP(sh), training,
             dyn ? " (dynamic)" : "");
    c.dyn = dyn;
    tfc_shape cs = S(sh.dims[1]);
    ht in[5] = {ht_rand(dt, sh, -3, 3, 0), ht_rand(dt, cs, 0.5, 2, 0), ht_rand(dt, cs, -1, 1, 0),
                ht_rand(dt, cs, -1, 1, 0), ht_rand(dt, cs, 0.2, 2, 0)};
    ht flag = ht_vals(F32, S0, (double[]){training ? 1.5 : 0});
    tfc_tensor *t[6], *outs[5] = {0};
    for (int i = 0; i < 5; i++) t[i] = tc_in(&c, &in[i]);
    t[5] = tc_in(&c, &flag);
    ht want[5];
    ref_batch_norm(in, training, 1e-3, want);
    tfc_op(c.g, "batch_norm", 6, t, "epsilon=0.001", outs, 3);
    static const char *const what[] = {"y", "mean", "var"};
    for (int k = 0; k < 3; k++) tc_want(&c, outs[k], want[k], tol_of(dt), "batch_norm %s", what[k]);
    /* the gradient op at the statistics of this mode */
    ht gin[5] = {ht_rand(dt, sh, -2, 2, 0), ht_copy(&in[0]), ht_copy(&in[1]), ht_new(dt, cs),
                 ht_new(dt, cs)};
    for (int64_t ch = 0; ch < cs.dims[0]; ch++) {
        double m = in[3].d[ch], v = in[4].d[ch];
        if (training) ref_channel_stats(&in[0], ch, &m, &v);
        gin[3].d[ch] = as_dtype(dt, m);
        gin[4].d[ch] = as_dtype(dt, v);
    }
    ref_batch_norm_grad(gin, training, 1e-3, want);
    tfc_tensor *gt[6];
    for (int i = 0; i < 5; i++) gt[i] = tc_in(&c, &gin[i]);
    gt[5] = t[5];
    tfc_op(c.g, "batch_norm_grad", 6, gt, "epsilon=0.001", outs, 5);
    static const char *const gwhat[] = {"dx", "dgamma", "dbeta", "dmoving_mean", "dmoving_var"};
    for (int k = 0; k < 5; k++)
        tc_want(&c, outs[k], want[k], 10 * tol_of(dt), "batch_norm_grad %s", gwhat[k]);
    tc_run(&c);
    for (int i = 0; i < 5; i++) ht_free(&in[i]), ht_free(&gin[i]);
    ht_free(&flag);
}

/* tfc_batch_norm over variables: a training run moves the moving statistics once (PyTorch:
 * momentum, unbiased variance), an inference run uses and keeps them. */
static void batch_norm_update_case(enum tfc_dtype dt, tfc_shape sh)
{
    char label[96];
    snprintf(label, sizeof label, "batch_norm_update %s %s", DT(dt), SHP(sh));
    g_cases++;
    tfc_graph *g = NULL;
    tfc_session *s = NULL;
    tfc_shape cs = S(sh.dims[1]);
    ht in[5] = {ht_rand(dt, sh, -3, 3, 0), ht_rand(dt, cs, 0.5, 2, 0), ht_rand(dt, cs, -1, 1, 0),
                ht_rand(dt, cs, -1, 1, 0), ht_rand(dt, cs, 0.2, 2, 0)};
    ht flag[2] = {ht_vals(F32, S0, (double[]){1}), ht_vals(F32, S0, (double[]){0})};
    tfc_value *fv[3] = {ht_value(&in[0]), ht_value(&flag[0]), ht_value(&flag[1])};
    ht want[3], mm = ht_copy(&in[3]), mv = ht_copy(&in[4]);
    int ok = 1;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", dt, sh), *tr = tfc_placeholder(g, "training", F32, S0);
    tfc_tensor *v[4];
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "v%d", i);
        v[i] = tfc_variable(g, name, dt, cs, tfc_init_zeros());
    }
    tfc_batch_norm_params p = {1e-3, 0.25};
    tfc_tensor *y = tfc_batch_norm(g, x, v[0], v[1], v[2], v[3], tr, &p);
    if (tfc_graph_status(g) || open_session(g, &s) || tfc_session_init_variables(s)) {
        REPORT("%s: build or session: %s", label, tfc_graph_errmsg(g));
        goto out;
    }
    for (int i = 0; i < 4; i++) {
        tfc_value *iv = ht_value(&in[1 + i]);
        tfc_session_write_variable(s, v[i], iv);
        tfc_value_destroy(iv);
    }
    tfc_tensor *ft[2] = {x, tr};
    tfc_value *feed[2] = {fv[0], fv[1]};
    ref_batch_norm(in, 1, 1e-3, want);
    ok &= run_check(s, label, 2, ft, feed, y, 0, &want[0]);
    double M = (double)(numel(sh) / sh.dims[1]);
    for (int64_t ch = 0; ch < cs.dims[0]; ch++) {
        mm.d[ch] = as_dtype(dt, 0.75 * in[3].d[ch] + 0.25 * want[1].d[ch]);
        mv.d[ch] = as_dtype(dt, 0.75 * in[4].d[ch] + 0.25 * want[2].d[ch] * M / (M - 1));
    }
    for (int k = 0; k < 3; k++) ht_free(&want[k]);
    ok &= read_check(s, label, v[2], &mm) && read_check(s, label, v[3], &mv);
    /* inference: normalizes with the moved statistics and leaves them */
    ht_free(&in[3]), ht_free(&in[4]);
    in[3] = ht_copy(&mm), in[4] = ht_copy(&mv);
    feed[1] = fv[2];
    ref_batch_norm(in, 0, 1e-3, want);
    ok &= run_check(s, label, 2, ft, feed, y, 0, &want[0]);
    ok &= read_check(s, label, v[2], &mm) && read_check(s, label, v[3], &mv);
    for (int k = 0; k < 3; k++) ht_free(&want[k]);
    if (ok) mark("batch_norm_update"), mark("variable"), mark("identity");
out:
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    for (int i = 0; i < 5; i++) ht_free(&in[i]);
    for (int i = 0; i < 3; i++) tfc_value_destroy(fv[i]);
    ht_free(&flag[0]), ht_free(&flag[1]), ht_free(&mm), ht_free(&mv);
}

/* y, mean, var of layer norm over the last k dims (rows x len). */
static void ref_layer_norm(const ht *x, int k, double eps, ht *out)
{
    tfc_shape outer = tfc_shape_of(x->sh.rank - k, x->sh.dims);
    int64_t rows = numel(outer), len = rows ? x->n / rows : 0;
    out[0] = ht_new(x->dt, x->sh);
    out[1] = ht_new(x->dt, outer);
    out[2] = ht_new(x->dt, outer);
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < len; j++) sum += x->d[r * len + j];
        double mean = sum / (double)len;
        for (int64_t j = 0; j < len; j++) {
            double d = x->d[r * len + j] - mean;
            sq += d * d;
        }
        double var = sq / (double)len;
        for (int64_t j = 0; j < len; j++)
            out[0].d[r * len + j] = (x->d[r * len + j] - mean) / sqrt(var + eps);
        out[1].d[r] = mean;
        out[2].d[r] = var;
    }
}

/* dx of layer norm: d/dx of sum(dy . y) by the textbook formula. */
static ht ref_layer_norm_grad(const ht *dy, const ht *x, const ht *mean, const ht *var,
                              double eps)
{
    int64_t rows = mean->n, len = rows ? x->n / rows : 0;
    ht dx = ht_new(x->dt, x->sh);
    for (int64_t r = 0; r < rows; r++) {
        double is = 1 / sqrt(var->d[r] + eps), a = 0, b = 0;
        for (int64_t j = 0; j < len; j++) {
            a += dy->d[r * len + j];
            b += dy->d[r * len + j] * (x->d[r * len + j] - mean->d[r]) * is;
        }
        for (int64_t j = 0; j < len; j++) {
            double xh = (x->d[r * len + j] - mean->d[r]) * is;
            dx.d[r * len + j] = is / (double)len * ((double)len * dy->d[r * len + j] - a - xh * b);
        }
    }
    return dx;
}

static void layer_norm_case(enum tfc_dtype dt, tfc_shape sh, int k, int dyn)
{
    struct tc c;
    tc_begin(&c, "layer_norm %s %s n_axes=%d%s", DT(dt), SHP(sh), k, dyn ? " (dynamic)" : "");
    c.dyn = dyn;
    ht x = ht_rand(dt, sh, -3, 3, 0), want[3];
    tfc_shape ns = tfc_shape_of(k, &sh.dims[sh.rank - k]);
    ht gamma = ht_rand(dt, ns, 0.5, 2, 0), beta = ht_rand(dt, ns, -1, 1, 0);
    tfc_tensor *tx = tc_in(&c, &x), *outs[3] = {0};
    char attrs[64];
    snprintf(attrs, sizeof attrs, "epsilon=0.001,n_axes=%d", k);
    ref_layer_norm(&x, k, 1e-3, want);
    tfc_op(c.g, "layer_norm", 1, &tx, attrs, outs, 3);
    /* with gamma and beta (the builder's mul and add broadcast over the leading dims) */
    ht affine = ht_new(dt, sh);
    int64_t len = numel(ns);
    for (int64_t i = 0; i < affine.n; i++)
        affine.d[i] = want[0].d[i] * gamma.d[i % len] + beta.d[i % len];
    tc_want(&c, tfc_layer_norm(c.g, tx, tc_in(&c, &gamma), tc_in(&c, &beta), k, 1e-3), affine,
            tol_of(dt), "tfc_layer_norm with gamma and beta");
    ht dy = ht_rand(dt, sh, -2, 2, 0), m = ht_copy(&want[1]), v = ht_copy(&want[2]);
    for (int64_t i = 0; i < m.n; i++) m.d[i] = as_dtype(dt, m.d[i]), v.d[i] = as_dtype(dt, v.d[i]);
    ht dx = ref_layer_norm_grad(&dy, &x, &m, &v, 1e-3);
    for (int j = 0; j < 3; j++)
        tc_want(&c, outs[j], want[j], tol_of(dt), "layer_norm output %d", j);
    tfc_tensor *gin[4] = {tc_in(&c, &dy), tx, tc_in(&c, &m), tc_in(&c, &v)};
    tc_want(&c, tfc_op(c.g, "layer_norm_grad", 4, gin, attrs, NULL, 0), dx, 10 * tol_of(dt),
            "layer_norm_grad");
    tc_run(&c);
    ht_free(&x), ht_free(&gamma), ht_free(&beta), ht_free(&dy), ht_free(&m), ht_free(&v);
}

/* Errors that name the tensor and what is allowed. */
static void norm_errors(void)
{
    static const struct {
        int which;
        const char *want;
    } bad[] = {
        {0, "gamma is float32 [4], must be float32 [3]"},
        {1, "training must be one float value"},
        {2, "momentum is 1.5, must be in [0, 1]"},
        {3, "n_axes is 3, must be 1 to the rank of x (2)"},
        {4, "beta 'b' is float32 [2], must be float32 with those dims"},
        {5, "epsilon is 0, must be > 0"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g = NULL;
        if (tfc_graph_create(&g)) return;
        tfc_tensor *x = tfc_placeholder(g, "x", F32, S(4, 3));
        tfc_tensor *c3 = tfc_placeholder(g, "c", F32, S(3));
        tfc_tensor *c4 = tfc_placeholder(g, "c4", F32, S(4));
        tfc_tensor *tr = tfc_scalar(g, F32, 1), *tv = tfc_placeholder(g, "tv", F32, S(2));
        tfc_tensor *b = tfc_placeholder(g, "b", F32, S(2)), *y = NULL;
        tfc_batch_norm_params p = {1e-5, bad[i].which == 2 ? 1.5 : 0.1};
        switch (bad[i].which) {
        case 0: y = tfc_batch_norm(g, x, c4, c3, c3, c3, tr, &p); break;
        case 1: y = tfc_batch_norm(g, x, c3, c3, c3, c3, tv, &p); break;
        case 2: y = tfc_batch_norm(g, x, c3, c3, c3, c3, tr, &p); break;
        case 3: y = tfc_layer_norm(g, x, NULL, NULL, 3, 1e-5); break;
        case 4: y = tfc_layer_norm(g, x, NULL, b, 1, 1e-5); break;
        case 5: y = tfc_layer_norm(g, x, NULL, NULL, 1, 0); break;
        }
        const char *msg = tfc_graph_errmsg(g);
        if (y || !msg || !strstr(msg, bad[i].want))
            REPORT("norm errors: want an error with '%s', got %s", bad[i].want, msg ? msg : "none");
        else
            PASS();
        tfc_graph_destroy(g);
    }
}

/* Run-time mistakes fail the run with a message, never abort: training mode with one value
 * per channel (the moving variance's unbiased estimate needs 2); inference mode runs. */
static void norm_run_errors(void)
{
    tfc_graph *g = NULL;
    tfc_session *s = NULL;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", F32, S(1, 3)), *v[4];
    tfc_tensor *tr = tfc_placeholder(g, "training", F32, S0);
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "v%d", i);
        v[i] = tfc_variable(g, name, F32, S(3), tfc_init_ones());
    }
    tfc_tensor *y = tfc_batch_norm(g, x, v[0], v[1], v[2], v[3], tr, NULL);
    if (tfc_graph_status(g) || open_session(g, &s) || tfc_session_init_variables(s)) {
        REPORT("norm run errors: build or session: %s", tfc_graph_errmsg(g));
        goto out;
    }
    ht xv = ht_rand(F32, S(1, 3), -1, 1, 0);
    for (int training = 1; training >= 0; training--) {
        ht flag = ht_vals(F32, S0, (double[]){training});
        tfc_value *fv[2] = {ht_value(&xv), ht_value(&flag)}, *got = NULL;
        tfc_tensor *ft[2] = {x, tr};
        tfc_status st = tfc_session_run(s, 2, ft, fv, 1, &y, &got, 0, NULL);
        const char *msg = tfc_session_errmsg(s);
        if (training && (st != TFC_ERR_INVALID_ARGUMENT || !msg ||
                         !strstr(msg, "1 value per channel in this batch")))
            REPORT("norm run errors: want a failed run naming 1 value per channel, got %s: %s",
                   tfc_status_string(st), msg ? msg : "no message");
        else if (!training && st)
            REPORT("norm run errors: inference with one value per channel: %s", msg);
        else
            PASS();
        tfc_value_destroy(got);
        tfc_value_destroy(fv[0]);
        tfc_value_destroy(fv[1]);
        ht_free(&flag);
    }
    ht_free(&xv);
out:
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_norm(void)
{
    rng_seed(61);
    int ns;
    const tfc_shape *shapes = norm_shapes(&ns);
    const enum tfc_dtype dts[] = {F32, F64};
    for (int di = 0; di < 2; di++) {
        for (int si = 0; si < ns; si++)
            for (int training = 0; training < 2; training++)
                batch_norm_ops_case(dts[di], shapes[si], training, si == 2);
        batch_norm_update_case(dts[di], S(4, 3));
        batch_norm_update_case(dts[di], S(2, 3, 2, 2));
        layer_norm_case(dts[di], S(4, 5), 1, 0);
        layer_norm_case(dts[di], S(2, 3, 4), 2, 1);
        layer_norm_case(dts[di], S(3, 4), 2, 0);
    }
    norm_errors();
    norm_run_errors();
}

static void test_all_ops_executed(void)
{
    if (g_hop && g_hops_seen == 0) REPORT("TFC_TEST_HOP=opencl: no hop task was recorded");
    if (g_cuda && g_pinned_seen == 0) REPORT("TFC_TEST_WHERE=cuda: no op task was recorded");
    if (g_ocl && g_ocl_seen == 0)
        REPORT("TFC_TEST_WHERE=%s: no op task ran on the OpenCL worker",
               g_ocl == 2 ? "alternate" : "opencl");
    if (g_ocl == 2 && g_ocl_cpu_seen == 0)
        REPORT("TFC_TEST_WHERE=alternate: no op task ran on the CPU");
    for (int i = 0; i < tfc_op_count() && i < (int)sizeof g_executed; i++) {
        if (!g_executed[i])
            REPORT("op '%s' was not run and verified under STARPU_SCHED=%s", tfc_op_name(i),
                   g_sched);
        else
            PASS();
    }
}

/* ---- conv, conv_backprop_input, conv_backprop_filter -------------------------------------- */

/* One convolution case: x [N, C, in...], w [K, C/groups, kernel...] and the parameters. */
struct conv_case {
    int nd;
    int64_t n, c, k, in[3], kern[3];
    tfc_conv_params p;
    int dyn;
    double tol; /* float32 tolerance when not tol_loose's */
};

/* The padding of spatial dim d, resolved here from ONNX's definition (not the library's). */
static void conv_ref_pads(const struct conv_case *q, int d, int64_t *lo, int64_t *hi)
{
    int64_t s = q->p.strides[d] ? q->p.strides[d] : 1, dil = q->p.dilations[d] ? q->p.dilations[d] : 1;
    if (q->p.auto_pad == TFC_CONV_PAD_NOTSET) {
        *lo = q->p.pads_begin[d], *hi = q->p.pads_end[d];
    } else if (q->p.auto_pad == TFC_CONV_PAD_VALID) {
        *lo = *hi = 0;
    } else {
        int64_t out = (q->in[d] + s - 1) / s;
        int64_t total = (out - 1) * s + (q->kern[d] - 1) * dil + 1 - q->in[d];
        if (total < 0) total = 0;
        *lo = q->p.auto_pad == TFC_CONV_PAD_SAME_UPPER ? total / 2 : (total + 1) / 2;
        *hi = total - *lo;
    }
}

static tfc_shape conv_x_shape(const struct conv_case *q)
{
    tfc_shape s = {.rank = q->nd + 2, .dims = {q->n, q->c}};
    for (int d = 0; d < q->nd; d++) s.dims[2 + d] = q->in[d];
    return s;
}

static tfc_shape conv_w_shape(const struct conv_case *q)
{
    int64_t groups = q->p.groups ? q->p.groups : 1;
    tfc_shape s = {.rank = q->nd + 2, .dims = {q->k, q->c / groups}};
    for (int d = 0; d < q->nd; d++) s.dims[2 + d] = q->kern[d];
    return s;
}

static tfc_shape conv_y_shape(const struct conv_case *q)
{
    tfc_shape s = {.rank = q->nd + 2, .dims = {q->n, q->k}};
    for (int d = 0; d < q->nd; d++) {
        int64_t lo, hi, st = q->p.strides[d] ? q->p.strides[d] : 1;
        int64_t dil = q->p.dilations[d] ? q->p.dilations[d] : 1;
        conv_ref_pads(q, d, &lo, &hi);
        s.dims[2 + d] = (q->in[d] + lo + hi - dil * (q->kern[d] - 1) - 1) / st + 1;
    }
    return s;
}

/* The direct definition, term by term: every (image, output channel, output position, input
 * channel of the group, kernel position) whose input position is inside x. mode 0 adds the
 * term to y, mode 1 to dx (from dy), mode 2 to dw (from x and dy). */
static void conv_ref_terms(const struct conv_case *q, int mode, const ht *x, const ht *w,
                           const ht *y, ht *out)
{
    tfc_shape ys = conv_y_shape(q);
    int64_t groups = q->p.groups ? q->p.groups : 1, cg = q->c / groups, kg = q->k / groups;
    int64_t ovol = 1, kvol = 1, ivol = 1;
    for (int d = 0; d < q->nd; d++) ovol *= ys.dims[2 + d], kvol *= q->kern[d], ivol *= q->in[d];
    for (int64_t n = 0; n < q->n; n++)
        for (int64_t k = 0; k < q->k; k++)
            for (int64_t o = 0; o < ovol; o++)
                for (int64_t cl = 0; cl < cg; cl++)
                    for (int64_t kk = 0; kk < kvol; kk++) {
                        int64_t ipos = 0, orem = o, krem = kk, ostride = ovol, kstride = kvol;
                        int inside = 1;
                        for (int d = 0; d < q->nd; d++) {
                            ostride /= ys.dims[2 + d], kstride /= q->kern[d];
                            int64_t od = orem / ostride, kd = krem / kstride, lo, hi;
                            orem %= ostride, krem %= kstride;
                            conv_ref_pads(q, d, &lo, &hi);
                            int64_t st = q->p.strides[d] ? q->p.strides[d] : 1;
                            int64_t dil = q->p.dilations[d] ? q->p.dilations[d] : 1;
                            int64_t i = od * st - lo + kd * dil;
                            inside &= i >= 0 && i < q->in[d];
                            ipos = ipos * q->in[d] + i;
                        }
                        if (!inside) continue;
                        int64_t c = k / kg * cg + cl;
                        int64_t xi = (n * q->c + c) * ivol + ipos, wi = (k * cg + cl) * kvol + kk;
                        int64_t yi = (n * q->k + k) * ovol + o;
                        if (mode == 0) out->d[yi] += x->d[xi] * w->d[wi];
                        else if (mode == 1) out->d[xi] += y->d[yi] * w->d[wi];
                        else out->d[wi] += x->d[xi] * y->d[yi];
                    }
}

static const struct conv_case conv_cases[] = {
    /* 1-D: stride, asymmetric pads; dilation with SAME_UPPER; an empty batch (the SAME cases
     * pad an odd total, so UPPER and LOWER differ) */
    {1, 2, 3, 4, {7}, {3}, {.strides = {2}, .pads_begin = {1}, .pads_end = {2}}, 0},
    {1, 1, 2, 2, {8}, {3}, {.strides = {2}, .dilations = {2}, .auto_pad = TFC_CONV_PAD_SAME_UPPER}, 1},
    {1, 0, 2, 3, {5}, {2}, {.groups = 1}, 0},
    /* 2-D: strides, asymmetric pads and dilation; groups with SAME_LOWER; depthwise; VALID
     * with a stride that leaves input unread; 1x1 */
    {2, 2, 3, 4, {5, 6}, {3, 2},
     {.strides = {1, 2}, .pads_begin = {0, 1}, .pads_end = {2, 0}, .dilations = {2, 1}}, 0},
    {2, 1, 4, 6, {6, 5}, {3, 3}, {.strides = {2, 2}, .groups = 2,
                                  .auto_pad = TFC_CONV_PAD_SAME_LOWER}, 0},
    {2, 2, 3, 3, {6, 5}, {3, 3}, {.groups = 3, .pads_begin = {1, 1}, .pads_end = {1, 1}}, 1},
    {2, 1, 2, 2, {8, 7}, {2, 3}, {.strides = {3, 2}, .auto_pad = TFC_CONV_PAD_VALID}, 0},
    {2, 3, 4, 5, {2, 3}, {1, 1}, {.groups = 1}, 0},
    /* 5x5 stride 1, 16 channels, output sizes not multiples of 4: what TFC_CONV_BACKEND=auto
     * gives Winograd F(4x4, 5x5) in batch tiles of 12 or more images (codelets/conv_winograd.c;
     * the sweep's tiles are smaller: TFC_CONV_BACKEND=winograd runs it). Winograd's error
     * scales with the sum of |terms| (400 products of up to 4 here), not with the result:
     * up to 1.5e-4 where terms cancel to ~0.1, so 1e-3; tests/test_conv_winograd bounds it
     * against the terms. A 3x3 case that winograd runs with F(m x m, 3x3). */
    {2, 13, 16, 16, {7, 9}, {5, 5}, {.pads_begin = {2, 1}, .pads_end = {2, 2}}, 0, 1e-3},
    {2, 3, 5, 4, {6, 7}, {3, 3}, {.pads_begin = {1, 1}, .pads_end = {1, 1}}, 0},
    /* 3-D: strides, asymmetric pads, dilation; groups with SAME_UPPER */
    {3, 1, 2, 3, {4, 5, 4}, {2, 3, 2}, {.strides = {1, 2, 1}, .pads_begin = {1, 0, 1},
                                         .pads_end = {0, 1, 1}, .dilations = {1, 1, 2}}, 0},
    {3, 2, 4, 2, {3, 4, 5}, {3, 2, 3}, {.groups = 2, .auto_pad = TFC_CONV_PAD_SAME_UPPER}, 0},
};

static void test_conv(void)
{
    rng_seed(61);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int i = 0; i < COUNT(conv_cases); i++) {
            const struct conv_case *q = &conv_cases[i];
            struct tc c;
            tc_begin(&c, "conv %s case %d (%d-D, x %s, w %s)", DT(dt), i, q->nd,
                     SHP(conv_x_shape(q)), SHP(conv_w_shape(q)));
            c.dyn = q->dyn;
            ht x = ht_rand(dt, conv_x_shape(q), -2, 2, 0), w = ht_rand(dt, conv_w_shape(q), -2, 2, 0);
            ht dy = ht_rand(dt, conv_y_shape(q), -2, 2, 0);
            ht y = ht_new(dt, conv_y_shape(q)), dx = ht_new(dt, x.sh), dw = ht_new(dt, w.sh);
            conv_ref_terms(q, 0, &x, &w, NULL, &y);
            conv_ref_terms(q, 1, NULL, &w, &dy, &dx);
            conv_ref_terms(q, 2, &x, NULL, &dy, &dw);
            tfc_tensor *tx = tc_in(&c, &x), *tw = tc_in(&c, &w), *tdy = tc_in(&c, &dy);
            double tol = q->tol && dt == F32 ? q->tol : tol_loose(dt);
            tc_want(&c, tfc_conv(c.g, tx, tw, &q->p), y, tol, "conv");
            tc_want(&c, tfc_conv_backprop_input(c.g, tdy, tw, tx, &q->p), dx, tol,
                    "conv_backprop_input");
            tc_want(&c, tfc_conv_backprop_filter(c.g, tx, tdy, tw, &q->p), dw, tol,
                    "conv_backprop_filter");
            ht_free(&x), ht_free(&w), ht_free(&dy);
            tc_run(&c);
        }
    }
}

/* Shape inference names what does not fit, and the graph keeps the first error. */
static void test_conv_errors(void)
{
    static const struct {
        int64_t x[5], w[5];
        int rank;
        tfc_conv_params p;
        const char *says;
    } bad[] = {
        {{1, 3, 5, 5}, {4, 1, 3, 3}, 4, {.groups = 2}, "divisible by groups 2"},
        {{1, 4, 5, 5}, {4, 1, 3, 3}, 4, {.groups = 2}, "must be 2"},
        {{1, 2, 3}, {2, 2, 5}, 3, {.pads_begin = {1}}, "the padded input has 4"},
        {{1, 2, 9}, {2, 2, 3}, 3, {.pads_begin = {1}, .auto_pad = TFC_CONV_PAD_SAME_UPPER},
         "explicit pads need auto_pad=0"},
        {{1, 2, 9}, {2, 2, 3}, 3, {.strides = {-1}}, "strides[0] is -1"},
        {{1, 2}, {2, 2}, 2, {.groups = 1}, "must be 3, 4 or 5"},
        /* int64 extremes are errors, not overflows */
        {{1, 2, 9}, {2, 2, 3}, 3, {.pads_end = {INT64_MAX}}, "pads[1] is 9223372036854775807"},
        {{1, 2, 9}, {2, 2, 3}, 3, {.dilations = {INT64_MAX / 2}}, "must be in [1, 2147483647]"},
        {{1, 1, INT64_MAX / 8}, {2, 1, 3}, 3, {.auto_pad = TFC_CONV_PAD_SAME_UPPER},
         "is above 2147483647"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g;
        if (tfc_graph_create(&g)) continue;
        tfc_tensor *x = tfc_placeholder(g, "x", F32, tfc_shape_of(bad[i].rank, bad[i].x));
        tfc_tensor *w = tfc_placeholder(g, "w", F32, tfc_shape_of(bad[i].rank, bad[i].w));
        tfc_tensor *y = tfc_conv(g, x, w, &bad[i].p);
        const char *msg = tfc_graph_errmsg(g);
        if (y || tfc_graph_status(g) != TFC_ERR_SHAPE || !strstr(msg, bad[i].says))
            REPORT("conv error case %d: status %s, message '%s'; expected a shape error "
                   "saying '%s'", i, tfc_status_string(tfc_graph_status(g)), msg, bad[i].says);
        else
            PASS();
        tfc_graph_destroy(g);
    }
}

/* One task per batch tile: the conv codelet run on row blocks of x and y (StarPU's block
 * filter over the batch), with kernel arguments whose batch dim is the tile's, gives the whole
 * convolution and its input gradient. This is what a plan pass splitting conv over the batch
 * submits (sched/ has no such pass yet); the filter gradient sums over the batch and would need
 * partial sums plus a reduce, as split-K matmul does. */
extern struct starpu_codelet tfc_cl_conv;

static void conv_tile_tasks(int kind, const struct conv_case *q, const ht *in0, const ht *w,
                            ht *out, int tiles)
{
    int n_args = 3;
    struct tfc_kargs *a = calloc(1, sizeof *a + (size_t)n_args * sizeof(struct tfc_kdesc));
    struct tfc_kerr kerr;
    memset(&kerr, 0, sizeof kerr);
    a->kind = kind, a->n_in = 2, a->n_out = 1, a->err = &kerr;
    a->attrs[CONV_GROUPS].i = q->p.groups ? q->p.groups : 1;
    a->attrs[CONV_PADS].n = 2 * q->nd;
    for (int d = 0; d < q->nd; d++)
        a->attrs[CONV_PADS].v[d] = q->p.pads_begin[d], a->attrs[CONV_PADS].v[q->nd + d] = q->p.pads_end[d];
    const ht *ops[3] = {in0, w, out};
    double *data[3];
    starpu_data_handle_t h[3];
    for (int i = 0; i < 3; i++) {
        a->d[i].dtype = F64, a->d[i].rank = ops[i]->sh.rank, a->d[i].buf = i;
        memcpy(a->d[i].dims, ops[i]->sh.dims, sizeof(int64_t) * (size_t)ops[i]->sh.rank);
        data[i] = ops[i]->d;
        starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)data[i],
                                    (uint32_t)ops[i]->n, sizeof(double));
    }
    struct starpu_data_filter f = {.filter_func = starpu_vector_filter_block, .nchildren = (unsigned)tiles};
    starpu_data_partition(h[0], &f);
    starpu_data_partition(h[2], &f);
    for (int t = 0; t < tiles; t++) {
        struct tfc_kargs *ta = malloc(sizeof *a + (size_t)n_args * sizeof(struct tfc_kdesc));
        memcpy(ta, a, sizeof *a + (size_t)n_args * sizeof(struct tfc_kdesc));
        for (int i = 0; i < 3; i += 2) { /* x (or dy) and y (or dx): the tile's images */
            ta->d[i].dims[0] = ops[i]->sh.dims[0] / tiles;
            ta->d[i].numel = ops[i]->n / tiles;
        }
        ta->d[1].numel = w->n;
        struct starpu_task *task = starpu_task_create();
        task->cl = &tfc_cl_conv, task->nbuffers = 3, task->cl_arg = ta;
        task->cl_arg_size = sizeof *a + (size_t)n_args * sizeof(struct tfc_kdesc);
        task->cl_arg_free = 1, task->synchronous = 1;
        task->handles[0] = starpu_data_get_sub_data(h[0], 1, t), task->modes[0] = STARPU_R;
        task->handles[1] = h[1], task->modes[1] = STARPU_R;
        task->handles[2] = starpu_data_get_sub_data(h[2], 1, t), task->modes[2] = STARPU_W;
        if (starpu_task_submit(task)) REPORT("conv tile task %d: submit failed", t);
    }
    starpu_data_unpartition(h[0], STARPU_MAIN_RAM);
    starpu_data_unpartition(h[2], STARPU_MAIN_RAM);
    for (int i = 0; i < 3; i++) starpu_data_unregister(h[i]);
    if (kerr.set) REPORT("conv tile tasks: %s", kerr.msg);
    free(a);
}

static void test_conv_batch_tiles(void)
{
    const struct conv_case q = {2, 4, 2, 3, {5, 4}, {3, 2},
                                {.pads_begin = {1, 0}, .pads_end = {0, 1}}, 0};
    rng_seed(67);
    ht x = ht_rand(F64, conv_x_shape(&q), -2, 2, 0), w = ht_rand(F64, conv_w_shape(&q), -2, 2, 0);
    ht dy = ht_rand(F64, conv_y_shape(&q), -2, 2, 0);
    ht y = ht_new(F64, dy.sh), dx = ht_new(F64, x.sh), y_want = ht_new(F64, dy.sh);
    ht dx_want = ht_new(F64, x.sh);
    conv_ref_terms(&q, 0, &x, &w, NULL, &y_want);
    conv_ref_terms(&q, 1, NULL, &w, &dy, &dx_want);
    conv_tile_tasks(TFC_K_CONV, &q, &x, &w, &y, 2);
    conv_tile_tasks(TFC_K_CONV_BP_INPUT, &q, &dy, &w, &dx, 2);
    ht *got[2] = {&y, &dx}, *want[2] = {&y_want, &dx_want};
    for (int k = 0; k < 2; k++) {
        int64_t bad = 0;
        for (int64_t i = 0; i < want[k]->n; i++)
            bad += !close_enough(got[k]->d[i], want[k]->d[i], 1e-12, 0);
        if (bad)
            REPORT("conv over 2 batch tiles: %lld of %lld elements of %s differ", (long long)bad,
                   (long long)want[k]->n, k ? "dx" : "y");
        else
            PASS();
    }
    ht_free(&x), ht_free(&w), ht_free(&dy), ht_free(&y), ht_free(&dx), ht_free(&y_want);
    ht_free(&dx_want);
}

/* ---- conv_transpose ------------------------------------------------------------------------ */

static const struct conv_t_case {
    int nd;
    int64_t n, cin, cout, in[3], kern[3]; /* cout: output channels (w dim 1 * groups) */
    tfc_conv_transpose_params p;
    int dyn;
} conv_t_cases[] = {
    {1, 2, 3, 2, {5}, {3}, {.strides = {2}, .pads_begin = {1}, .pads_end = {0},
                            .output_padding = {1}}, 0},
    {1, 3, 2, 4, {4}, {2}, {.dilations = {3}, .groups = 2}, 1},
    {2, 2, 4, 6, {3, 4}, {3, 2}, {.strides = {2, 3}, .pads_begin = {1, 0}, .pads_end = {0, 2},
                                  .dilations = {1, 2}, .output_padding = {1, 2}, .groups = 2}, 0},
    {2, 1, 3, 3, {4, 3}, {2, 2}, {.groups = 3}, 0}, /* depthwise */
    {3, 2, 2, 3, {2, 3, 2}, {2, 1, 3}, {.strides = {2, 1, 2}, .pads_end = {1, 0, 0},
                                        .output_padding = {0, 0, 1}}, 0},
};

static int64_t conv_t_param(const int64_t *v, int d, int64_t zero_means)
{
    return v[d] ? v[d] : zero_means;
}

static tfc_shape conv_t_y_shape(const struct conv_t_case *q)
{
    tfc_shape s = {.rank = q->nd + 2, .dims = {q->n, q->cout}};
    for (int d = 0; d < q->nd; d++)
        s.dims[2 + d] = (q->in[d] - 1) * conv_t_param(q->p.strides, d, 1) - q->p.pads_begin[d] -
                        q->p.pads_end[d] +
                        conv_t_param(q->p.dilations, d, 1) * (q->kern[d] - 1) +
                        q->p.output_padding[d] + 1;
    return s;
}

/* PyTorch's definition, in float64 (dtype dt only labels the result): every input element scattered through the kernel,
 * y[n, g*cog + co, i*s - pad + k*dil] += x[n, g*cig + ci, i] w[g*cig + ci, co, k], the
 * positions outside y dropped. */
static ht conv_t_ref(enum tfc_dtype dt, const struct conv_t_case *q, const ht *x, const ht *w)
{
    tfc_shape ys = conv_t_y_shape(q);
    ht y = ht_new(dt, ys); /* values kept in float64 */
    int64_t groups = q->p.groups ? q->p.groups : 1, cig = q->cin / groups, cog = q->cout / groups;
    int64_t ivol = 1, kvol = 1, ovol = 1;
    for (int d = 0; d < q->nd; d++) ivol *= q->in[d], kvol *= q->kern[d], ovol *= ys.dims[2 + d];
    for (int64_t n = 0; n < q->n; n++)
        for (int64_t c = 0; c < q->cin; c++)
            for (int64_t i = 0; i < ivol; i++)
                for (int64_t co = 0; co < cog; co++)
                    for (int64_t k = 0; k < kvol; k++) {
                        int64_t irem = i, krem = k, istr = ivol, kstr = kvol, opos = 0;
                        int inside = 1;
                        for (int d = 0; d < q->nd; d++) {
                            istr /= q->in[d], kstr /= q->kern[d];
                            int64_t id = irem / istr, kd = krem / kstr;
                            irem %= istr, krem %= kstr;
                            int64_t o = id * conv_t_param(q->p.strides, d, 1) -
                                        q->p.pads_begin[d] +
                                        kd * conv_t_param(q->p.dilations, d, 1);
                            inside &= o >= 0 && o < ys.dims[2 + d];
                            opos = opos * ys.dims[2 + d] + o;
                        }
                        if (!inside) continue;
                        int64_t oc = c / cig * cog + co;
                        y.d[(n * q->cout + oc) * ovol + opos] +=
                            x->d[(n * q->cin + c) * ivol + i] * w->d[(c * cog + co) * kvol + k];
                    }
    return y;
}

static void test_conv_transpose(void)
{
    rng_seed(71);
    for (int di = 0; di < 2; di++) {
        enum tfc_dtype dt = di ? F64 : F32;
        for (int i = 0; i < COUNT(conv_t_cases); i++) {
            const struct conv_t_case *q = &conv_t_cases[i];
            int64_t groups = q->p.groups ? q->p.groups : 1;
            tfc_shape xs = {.rank = q->nd + 2, .dims = {q->n, q->cin}};
            tfc_shape ws = {.rank = q->nd + 2, .dims = {q->cin, q->cout / groups}};
            for (int d = 0; d < q->nd; d++) xs.dims[2 + d] = q->in[d], ws.dims[2 + d] = q->kern[d];
            struct tc c;
            tc_begin(&c, "conv_transpose %s case %d (%d-D, x %s, w %s)", DT(dt), i, q->nd,
                     SHP(xs), SHP(ws));
            c.dyn = q->dyn;
            ht x = ht_rand(dt, xs, -2, 2, 0), w = ht_rand(dt, ws, -2, 2, 0);
            ht y = conv_t_ref(dt, q, &x, &w);
            tfc_tensor *tx = tc_in(&c, &x), *tw = tc_in(&c, &w);
            tc_want(&c, tfc_conv_transpose(c.g, tx, tw, &q->p), y, tol_loose(dt),
                    "conv_transpose");
            ht_free(&x), ht_free(&w);
            tc_run(&c);
        }
    }
    /* inference names what does not fit */
    static const struct {
        int64_t x[3], w[3];
        tfc_conv_transpose_params p;
        const char *says;
    } bad[] = {
        {{1, 2, 5}, {2, 2, 3}, {.strides = {2}, .output_padding = {2}},
         "output_padding[0] is 2; it must be below the stride 2"},
        {{1, 3, 5}, {2, 2, 3}, {.groups = 1}, "filter dim 0 2"},
        {{1, 2, 5}, {2, 2, 3}, {.groups = 4}, "divisible by groups"},
        {{1, 2, 1}, {2, 2, 2}, {.pads_begin = {1}, .pads_end = {1}}, "give an output of 0"},
    };
    for (int i = 0; i < COUNT(bad); i++) {
        tfc_graph *g;
        if (tfc_graph_create(&g)) continue;
        tfc_tensor *x = tfc_placeholder(g, "x", F32, tfc_shape_of(3, bad[i].x));
        tfc_tensor *w = tfc_placeholder(g, "w", F32, tfc_shape_of(3, bad[i].w));
        tfc_tensor *y = tfc_conv_transpose(g, x, w, &bad[i].p);
        const char *msg = tfc_graph_errmsg(g);
        if (y || tfc_graph_status(g) != TFC_ERR_SHAPE || !strstr(msg, bad[i].says))
            REPORT("conv_transpose error case %d: status %s, message '%s'; expected a shape "
                   "error saying '%s'", i, tfc_status_string(tfc_graph_status(g)), msg,
                   bad[i].says);
        else
            PASS();
        tfc_graph_destroy(g);
    }
}

/* ---- suites: one per scheduler ------------------------------------------------------------ */

static int suite_init(void)
{
    if (g_suite_next >= g_nscheds) return 1;
    g_sched = g_scheds[g_suite_next++];
    memset(g_executed, 0, sizeof g_executed);
    g_cases = g_hops_seen = g_pinned_seen = g_ocl_seen = g_ocl_cpu_seen = 0;
    setenv("STARPU_SCHED", g_sched, 1);
    g_suite_t0 = now_s();
    if (tfc_ctx_create(&g_ctx)) {
        fprintf(stderr, "sched=%s: tfc_ctx_create: %s\n", g_sched, tfc_errmsg());
        return 1;
    }
    tfc_ctx_info info;
    if (tfc_ctx_info_get(g_ctx, &info)) return 1;
    if (g_hop && info.n_opencl_workers == 0) {
        fprintf(stderr, "TFC_TEST_HOP=opencl but StarPU has no OpenCL worker: skipped\n");
        tfc_ctx_destroy(g_ctx);
        exit(77);
    }
    if (g_ocl && info.n_opencl_workers == 0) {
        fprintf(stderr, "TFC_TEST_WHERE=%s but StarPU has no OpenCL worker: skipped\n",
                g_ocl == 2 ? "alternate" : "opencl");
        tfc_ctx_destroy(g_ctx);
        exit(77);
    }
    if (g_cuda && info.n_cuda_workers == 0) {
        fprintf(stderr, "TFC_TEST_WHERE=cuda but StarPU has no CUDA worker: skipped\n");
        tfc_ctx_destroy(g_ctx);
        exit(77);
    }
    if (strcmp(info.sched_policy, g_sched) != 0) {
        fprintf(stderr, "STARPU_SCHED=%s but StarPU runs '%s'\n", g_sched, info.sched_policy);
        tfc_ctx_destroy(g_ctx);
        g_ctx = NULL;
        return 1;
    }
    return 0;
}

static int suite_clean(void)
{
    tfc_ctx_destroy(g_ctx);
    g_ctx = NULL;
    fprintf(stderr, "\nsched=%s: %d cases in %.2f s", g_sched, g_cases, now_s() - g_suite_t0);
    if (g_hop) fprintf(stderr, ", %d hop copies on the OpenCL worker", g_hops_seen);
    if (g_cuda) fprintf(stderr, ", %d op tasks on the CUDA worker", g_pinned_seen);
    if (g_ocl)
        fprintf(stderr, ", %d op tasks on the OpenCL worker, %d elsewhere", g_ocl_seen,
                g_ocl_cpu_seen);
    fprintf(stderr, "\n");
    return 0;
}

static const struct {
    const char *name;
    CU_TestFunc fn;
} sweep[] = {
    {"unary float", test_unary_float},
    {"unary int/bool", test_unary_int_bool},
    {"unary special values", test_unary_special},
    {"cast", test_cast},
    {"binary float", test_binary_float},
    {"binary int", test_binary_int},
    {"compare/logic", test_compare_logic},
    {"select", test_select},
    {"cond/while_loop", test_control_flow_ops},
    {"bias_add", test_bias_add},
    {"channel bias (NCHW)", test_channel_bias},
    {"add_n", test_add_n},
    {"fill/zeros_like/ones_like", test_fill_like},
    {"matmul", test_matmul},
    {"batch_matmul", test_batch_matmul},
    {"matmul backends", test_matmul_backends},
    {"matmul footprints per library", test_matmul_footprints},
    {"softmax/log_softmax", test_softmax},
    {"softmax special values", test_softmax_special},
    {"softmax short rows", test_softmax_short_rows},
    {"cross entropy", test_xent},
    {"cross entropy row groups", test_xent_rows},
    {"reductions", test_reduce},
    {"argmax", test_argmax},
    {"reshape", test_reshape},
    {"transpose", test_transpose},
    {"concat", test_concat},
    {"split", test_split},
    {"slice", test_slice},
    {"gather", test_gather},
    {"one_hot", test_one_hot},
    {"assign/assign_add/assign_sub", test_assign},
    {"gradient ops", test_grad_ops},
    {"optimizer updates", test_optim_ops},
    {"pooling", test_pool},
    {"pad/pad_grad", test_pad},
    {"dropout/dropout_grad", test_dropout},
    {"batch_norm/layer_norm", test_norm},
    {"squeeze/unsqueeze/flatten", test_squeeze},
    {"kernel errors", test_errors},
    {"max_pool_grad index range", test_pool_grad_range},
    {"conv", test_conv},
    {"conv shape errors", test_conv_errors},
    {"conv batch tiles", test_conv_batch_tiles},
    {"conv_transpose", test_conv_transpose},
    {"every op ran", test_all_ops_executed},
};

int main(void)
{
    const char *hop = getenv("TFC_TEST_HOP"), *where = getenv("TFC_TEST_WHERE");
    g_hop = hop && strcmp(hop, "opencl") == 0;
    g_cuda = where && strcmp(where, "cuda") == 0;
    g_ocl = !where ? 0 : strcmp(where, "opencl") == 0 ? 1 : strcmp(where, "alternate") == 0 ? 2
                                                                                        : 0;
    tfc_testing_set_where_alternate(g_ocl == 2);
    if (hop && *hop && !g_hop) {
        fprintf(stderr, "TFC_TEST_HOP=%s: only 'opencl' is known\n", hop);
        return 1;
    }
    if (where && *where && !g_cuda && !g_ocl) {
        fprintf(stderr, "TFC_TEST_WHERE=%s: only 'cuda', 'opencl' and 'alternate' are known\n",
                where);
        return 1;
    }
    const char *env = getenv("TFC_TEST_SCHEDS");
    static char list[512];
    snprintf(list, sizeof list, "%s", env && *env ? env : "eager lws dmda dmdas");
    for (char *save = NULL, *tok = strtok_r(list, " \t,", &save); tok && g_nscheds < 16;
         tok = strtok_r(NULL, " \t,", &save))
        g_scheds[g_nscheds++] = tok;
    if (!g_nscheds) {
        fprintf(stderr, "TFC_TEST_SCHEDS is empty\n");
        return 1;
    }

    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite t = CU_add_suite("op table", NULL, NULL);
    if (!t || !CU_add_test(t, "every registered op has a case", test_op_table)) return 1;
    for (int k = 0; k < g_nscheds; k++) {
        static char names[16][64];
        snprintf(names[k], sizeof names[k], "STARPU_SCHED=%s%s%s", g_scheds[k],
                 g_hop ? " hop=opencl" : "",
                 g_cuda ? " where=cuda"
                 : g_ocl == 1 ? " where=opencl" : g_ocl == 2 ? " where=alternate" : "");
        CU_pSuite s = CU_add_suite(names[k], suite_init, suite_clean);
        if (!s) return 1;
        for (int i = 0; i < COUNT(sweep); i++)
            if (!CU_add_test(s, sweep[i].name, sweep[i].fn)) return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
