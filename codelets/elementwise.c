/* elementwise.c: CPU kernels of the element-wise family: unary math, binary ops with NumPy
 * broadcasting, select, add_n, cast, identity and fill. Float32 and float64 run typed loops;
 * integer and bool operands go through an int64 path (rare in models, kept simple). */
#include <math.h>
#include <string.h>
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

/* ---- unary ---------------------------------------------------------------------------- */

static double unary_f64(int kind, double x)
{
    switch (kind) {
    case TFC_K_NEG: return -x;
    case TFC_K_ABS: return fabs(x);
    case TFC_K_SQUARE: return x * x;
    case TFC_K_SQRT: return sqrt(x);
    case TFC_K_RSQRT: return 1.0 / sqrt(x);
    case TFC_K_EXP: return exp(x);
    case TFC_K_LOG: return log(x);
    case TFC_K_RELU: return x > 0 ? x : 0;
    case TFC_K_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case TFC_K_TANH: return tanh(x);
    case TFC_K_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    default: return x;
    }
}

static float unary_f32(int kind, float x)
{
    switch (kind) {
    case TFC_K_NEG: return -x;
    case TFC_K_ABS: return fabsf(x);
    case TFC_K_SQUARE: return x * x;
    case TFC_K_SQRT: return sqrtf(x);
    case TFC_K_RSQRT: return 1.0f / sqrtf(x);
    case TFC_K_EXP: return expf(x);
    case TFC_K_LOG: return logf(x);
    case TFC_K_RELU: return x > 0 ? x : 0;
    case TFC_K_SIGMOID: return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case TFC_K_TANH: return tanhf(x);
    case TFC_K_SOFTPLUS: return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
    default: return x;
    }
}

static void unary_run(const struct tfc_kargs *a, const void *in, void *out)
{
    int64_t n = a->d[a->n_in].numel;
    int dt = a->d[0].dtype;
    if (a->kind == TFC_K_RELU && dt == TFC_FLOAT32) { /* the hot one in MLPs */
        const float *x = in;
        float *y = out;
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
    } else if (dt == TFC_FLOAT32) {
        const float *x = in;
        float *y = out;
        for (int64_t i = 0; i < n; i++) y[i] = unary_f32(a->kind, x[i]);
    } else if (dt == TFC_FLOAT64) {
        const double *x = in;
        double *y = out;
        for (int64_t i = 0; i < n; i++) y[i] = unary_f64(a->kind, x[i]);
    } else if (a->kind == TFC_K_LOGICAL_NOT) {
        const uint8_t *x = in;
        uint8_t *y = out;
        for (int64_t i = 0; i < n; i++) y[i] = !x[i];
    } else { /* integer neg, abs, square */
        for (int64_t i = 0; i < n; i++) {
            int64_t v = tfc_load_i64(in, dt, i);
            v = a->kind == TFC_K_NEG ? -v : a->kind == TFC_K_ABS ? (v < 0 ? -v : v)
              : a->kind == TFC_K_SQUARE ? v * v : v;
            tfc_store_i64(out, dt, i, v);
        }
    }
}

static void cast_run(const struct tfc_kargs *a, const void *in, void *out)
{
    int from = a->d[0].dtype, to = a->d[1].dtype;
    int64_t n = a->d[1].numel;
    if (from == to) {
        memcpy(out, in, (size_t)n * tfc_kdtype_size(to));
        return;
    }
    int from_float = from == TFC_FLOAT32 || from == TFC_FLOAT64;
    int to_float = to == TFC_FLOAT32 || to == TFC_FLOAT64;
    for (int64_t i = 0; i < n; i++) {
        if (from_float || to_float)
            tfc_store_f64(out, to, i, tfc_load_f64(in, from, i));
        else
            tfc_store_i64(out, to, i, tfc_load_i64(in, from, i));
    }
}

/* ---- binary --------------------------------------------------------------------------- */

static inline float max_nan_f32(float x, float y) { return (x > y || x != x) ? x : y; }
static inline float min_nan_f32(float x, float y) { return (x < y || x != x) ? x : y; }
static inline double max_nan_f64(double x, double y) { return (x > y || x != x) ? x : y; }
static inline double min_nan_f64(double x, double y) { return (x < y || x != x) ? x : y; }

static void binary_f32(int kind, float *o, const float *x, int64_t sx, const float *y,
                       int64_t sy, int64_t n)
{
    int64_t i;
    switch (kind) {
    case TFC_K_ADD: for (i = 0; i < n; i++) o[i] = x[i * sx] + y[i * sy]; break;
    case TFC_K_SUB: for (i = 0; i < n; i++) o[i] = x[i * sx] - y[i * sy]; break;
    case TFC_K_MUL: for (i = 0; i < n; i++) o[i] = x[i * sx] * y[i * sy]; break;
    case TFC_K_DIV: for (i = 0; i < n; i++) o[i] = x[i * sx] / y[i * sy]; break;
    case TFC_K_MAXIMUM: /* NaN propagates, as in NumPy and PyTorch */
        for (i = 0; i < n; i++) o[i] = max_nan_f32(x[i * sx], y[i * sy]);
        break;
    case TFC_K_MINIMUM: for (i = 0; i < n; i++) o[i] = min_nan_f32(x[i * sx], y[i * sy]); break;
    case TFC_K_POW: for (i = 0; i < n; i++) o[i] = powf(x[i * sx], y[i * sy]); break;
    case TFC_K_RELU_GRAD: /* x is dy, y the relu input */
        for (i = 0; i < n; i++) o[i] = y[i * sy] > 0 ? x[i * sx] : 0;
        break;
    }
}

static void binary_f64(int kind, double *o, const double *x, int64_t sx, const double *y,
                       int64_t sy, int64_t n)
{
    int64_t i;
    switch (kind) {
    case TFC_K_ADD: for (i = 0; i < n; i++) o[i] = x[i * sx] + y[i * sy]; break;
    case TFC_K_SUB: for (i = 0; i < n; i++) o[i] = x[i * sx] - y[i * sy]; break;
    case TFC_K_MUL: for (i = 0; i < n; i++) o[i] = x[i * sx] * y[i * sy]; break;
    case TFC_K_DIV: for (i = 0; i < n; i++) o[i] = x[i * sx] / y[i * sy]; break;
    case TFC_K_MAXIMUM: for (i = 0; i < n; i++) o[i] = max_nan_f64(x[i * sx], y[i * sy]); break;
    case TFC_K_MINIMUM: for (i = 0; i < n; i++) o[i] = min_nan_f64(x[i * sx], y[i * sy]); break;
    case TFC_K_POW: for (i = 0; i < n; i++) o[i] = pow(x[i * sx], y[i * sy]); break;
    case TFC_K_RELU_GRAD: for (i = 0; i < n; i++) o[i] = y[i * sy] > 0 ? x[i * sx] : 0; break;
    }
}

static int is_compare(int kind)
{
    return kind == TFC_K_EQUAL || kind == TFC_K_NOT_EQUAL || kind == TFC_K_LESS ||
           kind == TFC_K_GREATER || kind == TFC_K_LOGICAL_AND || kind == TFC_K_LOGICAL_OR;
}

static uint8_t compare_f64(int kind, double x, double y)
{
    switch (kind) {
    case TFC_K_EQUAL: return x == y;
    case TFC_K_NOT_EQUAL: return x != y;
    case TFC_K_LESS: return x < y;
    case TFC_K_GREATER: return x > y;
    case TFC_K_LOGICAL_AND: return x != 0 && y != 0;
    default: return x != 0 || y != 0;
    }
}

static uint8_t compare_i64(int kind, int64_t x, int64_t y)
{
    switch (kind) {
    case TFC_K_EQUAL: return x == y;
    case TFC_K_NOT_EQUAL: return x != y;
    case TFC_K_LESS: return x < y;
    case TFC_K_GREATER: return x > y;
    case TFC_K_LOGICAL_AND: return x != 0 && y != 0;
    default: return x != 0 || y != 0;
    }
}

/* Integer arithmetic; division by zero fails the run. */
static int64_t arith_i64(const struct tfc_kargs *a, int64_t x, int64_t y)
{
    switch (a->kind) {
    case TFC_K_ADD: return x + y;
    case TFC_K_SUB: return x - y;
    case TFC_K_MUL: return x * y;
    case TFC_K_MAXIMUM: return x > y ? x : y;
    case TFC_K_MINIMUM: return x < y ? x : y;
    case TFC_K_DIV:
        if (y == 0) {
            tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE, "integer division by zero");
            return 0;
        }
        return x / y;
    default: return 0;
    }
}

/* One row of a binary op: out[0..n) from x[i*sx], y[i*sy] (element offsets ox, oy). */
static void binary_row(const struct tfc_kargs *a, void *out, int64_t oo, const void *x,
                       int64_t ox, int64_t sx, const void *y, int64_t oy, int64_t sy, int64_t n)
{
    int dt = a->d[0].dtype;
    if (a->kind == TFC_K_BROADCAST) { /* y gives only the shape */
        size_t es = tfc_kdtype_size(dt);
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)out + (size_t)(oo + i) * es, (const char *)x + (size_t)(ox + i * sx) * es, es);
        return;
    }
    if (!is_compare(a->kind)) {
        if (dt == TFC_FLOAT32) {
            binary_f32(a->kind, (float *)out + oo, (const float *)x + ox, sx,
                       (const float *)y + oy, sy, n);
        } else if (dt == TFC_FLOAT64) {
            binary_f64(a->kind, (double *)out + oo, (const double *)x + ox, sx,
                       (const double *)y + oy, sy, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                tfc_store_i64(out, dt, oo + i,
                              arith_i64(a, tfc_load_i64(x, dt, ox + i * sx),
                                        tfc_load_i64(y, dt, oy + i * sy)));
        }
        return;
    }
    uint8_t *o = (uint8_t *)out + oo;
    if (dt == TFC_FLOAT32 || dt == TFC_FLOAT64) {
        for (int64_t i = 0; i < n; i++)
            o[i] = compare_f64(a->kind, tfc_load_f64(x, dt, ox + i * sx),
                               tfc_load_f64(y, dt, oy + i * sy));
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = compare_i64(a->kind, tfc_load_i64(x, dt, ox + i * sx),
                               tfc_load_i64(y, dt, oy + i * sy));
    }
}

static void binary_run(const struct tfc_kargs *a, const void *x, const void *y, void *out)
{
    struct tfc_bcast it;
    tfc_bcast_init(&it, tfc_kout_desc(a, 0), 2, (const struct tfc_kdesc *[]){&a->d[0], &a->d[1]});
    int64_t inner = it.dims[it.rank - 1];
    int64_t sx = it.st[0][it.rank - 1], sy = it.st[1][it.rank - 1];
    for (int64_t r = 0; r < it.rows; r++) {
        binary_row(a, out, r * inner, x, it.off[0], sx, y, it.off[1], sy, inner);
        tfc_bcast_next(&it);
    }
}

static void select_run(const struct tfc_kargs *a, const uint8_t *c, const void *x,
                       const void *y, void *out)
{
    struct tfc_bcast it;
    tfc_bcast_init(&it, tfc_kout_desc(a, 0), 3,
                   (const struct tfc_kdesc *[]){&a->d[0], &a->d[1], &a->d[2]});
    size_t es = tfc_kdtype_size(a->d[1].dtype);
    int64_t inner = it.dims[it.rank - 1];
    int64_t sc = it.st[0][it.rank - 1], sx = it.st[1][it.rank - 1], sy = it.st[2][it.rank - 1];
    for (int64_t r = 0; r < it.rows; r++) {
        char *o = (char *)out + (size_t)(r * inner) * es;
        for (int64_t i = 0; i < inner; i++) {
            int64_t ci = it.off[0] + i * sc;
            const char *src = c[ci] ? (const char *)x + (size_t)(it.off[1] + i * sx) * es
                                    : (const char *)y + (size_t)(it.off[2] + i * sy) * es;
            memcpy(o + (size_t)i * es, src, es);
        }
        tfc_bcast_next(&it);
    }
}

static void add_n_run(const struct tfc_kargs *a, void *buffers[], void *out)
{
    int64_t n = a->d[a->n_in].numel;
    int dt = a->d[a->n_in].dtype;
    size_t es = tfc_kdtype_size(dt);
    memcpy(out, tfc_kin(buffers, a, 0), (size_t)n * es);
    for (int k = 1; k < a->n_in; k++) {
        const void *x = tfc_kin(buffers, a, k);
        if (dt == TFC_FLOAT32) {
            float *o = out;
            const float *v = x;
            for (int64_t i = 0; i < n; i++) o[i] += v[i];
        } else if (dt == TFC_FLOAT64) {
            double *o = out;
            const double *v = x;
            for (int64_t i = 0; i < n; i++) o[i] += v[i];
        } else {
            for (int64_t i = 0; i < n; i++)
                tfc_store_i64(out, dt, i, tfc_load_i64(out, dt, i) + tfc_load_i64(x, dt, i));
        }
    }
}

static void fill_run(const struct tfc_kargs *a, void *out)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    double v = a->attrs[0].f;
    if (o->dtype == TFC_FLOAT32) {
        float *p = out;
        for (int64_t i = 0; i < o->numel; i++) p[i] = (float)v;
    } else {
        for (int64_t i = 0; i < o->numel; i++) tfc_store_f64(out, o->dtype, i, v);
    }
}

static void elementwise_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    switch (a->kind) {
    case TFC_K_CAST:
        cast_run(a, tfc_kin(buffers, a, 0), out);
        break;
    case TFC_K_IDENTITY:
        memcpy(out, tfc_kin(buffers, a, 0),
               (size_t)a->d[1].numel * tfc_kdtype_size(a->d[1].dtype));
        break;
    case TFC_K_SELECT:
        select_run(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), tfc_kin(buffers, a, 2),
                   out);
        break;
    case TFC_K_ADD_N:
        add_n_run(a, buffers, out);
        break;
    case TFC_K_FILL:
        fill_run(a, out);
        break;
    default:
        if (a->kind >= TFC_K_ADD && a->kind <= TFC_K_RELU_GRAD)
            binary_run(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out);
        else
            unary_run(a, tfc_kin(buffers, a, 0), out);
    }
}

static struct starpu_perfmodel elementwise_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_elementwise",
};

struct starpu_codelet tfc_cl_elementwise = {
    .cpu_funcs = {elementwise_cpu},
    .cpu_funcs_name = {"elementwise_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_elementwise_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_elementwise_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &elementwise_model,
    .name = "elementwise",
};
