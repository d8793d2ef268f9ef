/* elementwise.c: CPU kernels of the element-wise family: unary math, binary ops with NumPy
 * broadcasting, select, add_n, cast, identity and fill. The formulas are ew_math.h's, one loop
 * per kind from its tables; float32 and float64 run typed loops, integer and bool operands go
 * through an int64 path (rare in models, kept simple). */
#include <string.h>
#include "kernel.h"
#include "ew_math.h"
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

/* ---- unary ---------------------------------------------------------------------------- */

/* One loop per kind and float type, from the tables (the formula inlines and vectorizes). */
#define UNARY_LOOP(K, name, SFX)                                                                \
    case TFC_K_##K:                                                                            \
        for (int64_t i = 0; i < n; i++) y[i] = tfc_ew_##name##_##SFX(x[i], p0, p1);            \
        break;
#define UNARY_F32(K, name) UNARY_LOOP(K, name, f32)
#define UNARY_F64(K, name) UNARY_LOOP(K, name, f64)

TFC_EW_VECTOR_CLONES
static void unary_f32(int kind, const float *x, float *y, int64_t n, float p0, float p1)
{
    switch (kind) { TFC_EW_UNARY_ANY(UNARY_F32) TFC_EW_UNARY_FLOAT(UNARY_F32) }
}

TFC_EW_VECTOR_CLONES
static void unary_f64(int kind, const double *x, double *y, int64_t n, double p0, double p1)
{
    switch (kind) { TFC_EW_UNARY_ANY(UNARY_F64) TFC_EW_UNARY_FLOAT(UNARY_F64) }
}

static void unary_run(const struct tfc_kargs *a, const void *in, void *out)
{
    int64_t n = a->d[a->n_in].numel;
    int dt = a->d[0].dtype;
    double p0 = a->attrs[TFC_EW_ATTR_P0].f, p1 = a->attrs[TFC_EW_ATTR_P1].f;
    if (dt == TFC_FLOAT32) {
        unary_f32(a->kind, in, out, n, (float)p0, (float)p1);
    } else if (dt == TFC_FLOAT64) {
        unary_f64(a->kind, in, out, n, p0, p1);
    } else if (a->kind == TFC_K_LOGICAL_NOT) {
        const uint8_t *x = in;
        uint8_t *y = out;
        for (int64_t i = 0; i < n; i++) y[i] = !x[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            tfc_store_i64(out, dt, i, tfc_ew_unary_i64(a->kind, tfc_load_i64(in, dt, i), p0, p1));
    }
}

/* is_nan, is_inf: a float in, a bool out */
static void predicate_run(const struct tfc_kargs *a, const void *in, uint8_t *out)
{
    int64_t n = a->d[a->n_in].numel;
    if (a->d[0].dtype == TFC_FLOAT32) {
        const float *x = in;
        for (int64_t i = 0; i < n; i++) out[i] = (uint8_t)tfc_ew_predicate_f32(a->kind, x[i]);
    } else {
        const double *x = in;
        for (int64_t i = 0; i < n; i++) out[i] = (uint8_t)tfc_ew_predicate_f64(a->kind, x[i]);
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

/* Runs BODY for i in [0, n): in chunks of a length known at compile time, which -O2 (whose
 * cost model vectorizes only loops needing no scalar remainder) vectorizes, then the rest. */
#define CHUNK 256
#define CHUNKED_LOOP(n, BODY)                                                                  \
    do {                                                                                       \
        int64_t c0_ = 0;                                                                       \
        for (; c0_ + CHUNK <= (n); c0_ += CHUNK)                                               \
            for (int64_t j_ = 0; j_ < CHUNK; j_++) {                                           \
                int64_t i = c0_ + j_;                                                          \
                BODY;                                                                          \
            }                                                                                  \
        for (int64_t i = c0_; i < (n); i++) BODY;                                              \
    } while (0)

/* Contiguous and broadcast-scalar operands get their own loops (the common rows after
 * tfc_bcast_coalesce: same shapes, a per-channel bias); other strides the generic one. */
#define BINARY_LOOP(K, name, SFX)                                                               \
    case TFC_K_##K:                                                                            \
        if (sx == 1 && sy == 1)                                                                \
            CHUNKED_LOOP(n, o[i] = tfc_ew_##name##_##SFX(x[i], y[i]));                         \
        else if (sx == 1 && sy == 0)                                                           \
            CHUNKED_LOOP(n, o[i] = tfc_ew_##name##_##SFX(x[i], y0));                           \
        else if (sx == 0 && sy == 1)                                                           \
            CHUNKED_LOOP(n, o[i] = tfc_ew_##name##_##SFX(x0, y[i]));                           \
        else                                                                                   \
            for (int64_t i = 0; i < n; i++) o[i] = tfc_ew_##name##_##SFX(x[i * sx], y[i * sy]); \
        break;
#define BINARY_F32(K, name) BINARY_LOOP(K, name, f32)
#define BINARY_F64(K, name) BINARY_LOOP(K, name, f64)

TFC_EW_VECTOR_CLONES
static void binary_f32(int kind, float *restrict o, const float *x, int64_t sx,
                       const float *y, int64_t sy, int64_t n)
{
    if (n <= 0) return;
    float x0 = x[0], y0 = y[0];
    switch (kind) { TFC_EW_BINARY(BINARY_F32) }
}

TFC_EW_VECTOR_CLONES
static void binary_f64(int kind, double *restrict o, const double *x, int64_t sx,
                       const double *y, int64_t sy, int64_t n)
{
    if (n <= 0) return;
    double x0 = x[0], y0 = y[0];
    switch (kind) { TFC_EW_BINARY(BINARY_F64) }
}

/* Integer arithmetic; division by zero fails the run. */
static int64_t arith_i64(const struct tfc_kargs *a, int64_t x, int64_t y)
{
    if (a->kind == TFC_K_DIV && y == 0)
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE, "integer division by zero");
    return tfc_ew_binary_i64(a->kind, x, y);
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
    if (tfc_ew_class(a->kind) == TFC_EW_CLASS_BINARY) {
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
            o[i] = (uint8_t)tfc_ew_compare_f64(a->kind, tfc_load_f64(x, dt, ox + i * sx),
                                               tfc_load_f64(y, dt, oy + i * sy));
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i] = (uint8_t)tfc_ew_compare_i64(a->kind, tfc_load_i64(x, dt, ox + i * sx),
                                               tfc_load_i64(y, dt, oy + i * sy));
    }
}

static void binary_run(const struct tfc_kargs *a, const void *x, const void *y, void *out)
{
    struct tfc_bcast it;
    tfc_bcast_init(&it, tfc_kout_desc(a, 0), 2, (const struct tfc_kdesc *[]){&a->d[0], &a->d[1]});
    tfc_bcast_coalesce(&it);
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
    tfc_bcast_coalesce(&it);
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
    double v = a->attrs[TFC_FILL_ATTR_VALUE].f;
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
    case TFC_K_BROADCAST:
        binary_run(a, tfc_kin(buffers, a, 0), NULL, out);
        break;
    default:
        switch (tfc_ew_class(a->kind)) {
        case TFC_EW_CLASS_BINARY:
        case TFC_EW_CLASS_COMPARE:
            binary_run(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out);
            break;
        case TFC_EW_CLASS_PREDICATE:
            predicate_run(a, tfc_kin(buffers, a, 0), out);
            break;
        default:
            unary_run(a, tfc_kin(buffers, a, 0), out);
        }
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
