/* softmax.c: CPU kernels for softmax and log_softmax over one axis, and softmax cross-entropy
 * from logits with dense or sparse (integer class id) labels. Computed stably: shift by the
 * maximum, accumulate in double. */
#include <math.h>
#include <string.h>
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "ew_vexpf.h"
#include "../src/tfc.h"

/* The helpers below are inlined into the row kernels, which are built once per vector width
 * (TFC_EW_VECTOR_CLONES): a short row then pays no call through the clones' dispatch. */
#define ROW_HELPER static inline __attribute__((always_inline))

/* GCC's generic vectors of eight lanes (codelets/pool.c names its own the same way). */
typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef double f64x8 __attribute__((vector_size(64)));

/* y[j] = exp(-y[j]) for y[j] >= 0, in place, by ew_vexpf.h's formula (relative error about
 * 1e-7). */
ROW_HELPER void exp_neg_in_place(float *y, int64_t n)
{
    for (int64_t j = 0; j < n; j++) y[j] = tfc_vexpf_neg(y[j]);
}

/* The maximum of x[0..n) (-inf when n is 0), *has_nan set when one is a NaN: eight running
 * maxima in one vector (a single one would stall on each comparison), picked by bit masks. */
ROW_HELPER float row_max_f32(const float *x, int64_t n, int *has_nan)
{
    f32x8 m = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
               -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    i32x8 bad = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        f32x8 v;
        memcpy(&v, x + j, sizeof v);
        bad |= v != v;
        i32x8 gt = v > m;
        m = (f32x8)(((i32x8)v & gt) | ((i32x8)m & ~gt));
    }
    float mx = -INFINITY;
    int any = 0;
    for (int k = 0; k < 8; k++) {
        mx = m[k] > mx ? m[k] : mx;
        any |= bad[k] != 0;
    }
    for (; j < n; j++) {
        any |= x[j] != x[j];
        mx = x[j] > mx ? x[j] : mx;
    }
    *has_nan = any;
    return mx;
}

/* y[j] = m - x[j]: the exps' arguments. */
ROW_HELPER void shift_from(float *y, const float *x, float m, int64_t n)
{
    for (int64_t j = 0; j < n; j++) y[j] = m - x[j];
}

/* y[j] *= s: a softmax row by the inverse of its sum. */
ROW_HELPER void scale_in_place(float *y, float s, int64_t n)
{
    for (int64_t j = 0; j < n; j++) y[j] *= s;
}

/* sum of x[0..n) in double: eight running sums (element j in sum j % 8, one vector of eight
 * doubles), then the rest, so every vector width gives the same bits; a single sum had added
 * at the latency of each double add, most of a long row's time. */
ROW_HELPER double sum_f64(const float *x, int64_t n)
{
    f64x8 acc = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        f32x8 v;
        memcpy(&v, x + j, sizeof v);
        acc += __builtin_convertvector(v, f64x8);
    }
    for (; j < n; j++) acc[j % 8] += x[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Rows of a float32 softmax taken at once: their elements fill about this many floats (the
 * three passes over them stay in L1) and at most ROWS_MAX rows. */
enum { CHUNK_FLOATS = 2048, ROWS_MAX = 256 };

/* softmax (or log_softmax) of row o, stably in double: the path of every dtype, and of float32
 * rows holding a NaN or an infinite maximum (IEEE's NaNs then). */
static void softmax_row_f64(const struct tfc_kdesc *d, const void *x, void *y, int64_t o,
                            int64_t in, int64_t len, int64_t inner, int log_out)
{
    int64_t base = o * len * inner + in;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; j++) {
        double v = tfc_load_f64(x, d->dtype, base + j * inner);
        if (v > mx) mx = v;
    }
    for (int64_t j = 0; j < len; j++) sum += exp(tfc_load_f64(x, d->dtype, base + j * inner) - mx);
    double lse = log(sum);
    for (int64_t j = 0; j < len; j++) {
        double v = tfc_load_f64(x, d->dtype, base + j * inner) - mx;
        tfc_store_f64(y, d->dtype, base + j * inner, log_out ? v - lse : exp(v) / sum);
    }
}

/* softmax of n contiguous float32 rows of len (n <= ROWS_MAX): each row's maximum, the
 * differences mx - x of all rows, their exps in one vectorized loop (a loop per row of ten
 * classes would be latency-bound: the imported MLP's softmax took 7 us a block so), the sums in
 * double, the scaling. Rows with a NaN or an infinite maximum take the double path. */
TFC_EW_VECTOR_CLONES static void softmax_rows_f32(const struct tfc_kdesc *d, const float *x,
                                                  float *y, int64_t o0, int64_t n, int64_t len)
{
    unsigned char bad[ROWS_MAX];
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + (o0 + r) * len;
        float *yr = y + (o0 + r) * len;
        int has_nan;
        float mx = row_max_f32(xr, len, &has_nan);
        bad[r] = has_nan || !isfinite(mx);
        if (bad[r]) /* the double path writes the row after the exps (of these zeros) */
            memset(yr, 0, (size_t)len * sizeof *yr);
        else
            shift_from(yr, xr, mx, len);
    }
    exp_neg_in_place(y + o0 * len, n * len);
    for (int64_t r = 0; r < n; r++) {
        if (bad[r]) {
            softmax_row_f64(d, x, y, o0 + r, 0, len, 1, 0);
            continue;
        }
        float *yr = y + (o0 + r) * len;
        float inv = (float)(1.0 / sum_f64(yr, len));
        scale_in_place(yr, inv, len);
    }
}

/* softmax/log_softmax of x over `axis`: outer x len x inner layout. */
static void softmax_run(const struct tfc_kargs *a, const void *x, void *y)
{
    const struct tfc_kdesc *d = &a->d[0];
    int axis = (int)a->attrs[SOFTMAX_AXIS].i;
    if (axis < 0) axis += d->rank;
    int64_t outer = 1, len = d->rank ? d->dims[axis] : 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= d->dims[i];
    for (int i = axis + 1; i < d->rank; i++) inner *= d->dims[i];
    int log_out = a->kind == TFC_K_LOG_SOFTMAX;
    if (!log_out && inner == 1 && d->dtype == TFC_FLOAT32 && len > 0) {
        int64_t step = CHUNK_FLOATS / len < 1 ? 1 : CHUNK_FLOATS / len;
        step = step > ROWS_MAX ? ROWS_MAX : step;
        for (int64_t o = 0; o < outer; o += step)
            softmax_rows_f32(d, x, y, o, outer - o < step ? outer - o : step, len);
        return;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) softmax_row_f64(d, x, y, o, in, len, inner, log_out);
}

/* log(sum_c exp(logits[b, c])) of row b, in double: the path of every dtype, and of float32
 * rows holding a NaN or an infinite maximum. */
static double row_lse_f64(const struct tfc_kdesc *d, const void *logits, int64_t b,
                          int64_t classes)
{
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < classes; c++) {
        double v = tfc_load_f64(logits, d->dtype, b * classes + c);
        if (v > mx) mx = v;
    }
    for (int64_t c = 0; c < classes; c++)
        sum += exp(tfc_load_f64(logits, d->dtype, b * classes + c) - mx);
    return mx + log(sum);
}

/* sum_j exp(xr[j] - m) of one float32 row longer than CHUNK_FLOATS, a buffer at a time. */
TFC_EW_VECTOR_CLONES static double long_row_sum_f32(const float *xr, int64_t len, float m)
{
    float buf[CHUNK_FLOATS];
    double sum = 0;
    for (int64_t j0 = 0; j0 < len; j0 += CHUNK_FLOATS) {
        int64_t k = len - j0 < CHUNK_FLOATS ? len - j0 : CHUNK_FLOATS;
        shift_from(buf, xr + j0, m, k);
        exp_neg_in_place(buf, k);
        sum += sum_f64(buf, k);
    }
    return sum;
}

/* log(sum_j exp(x[r, j])) of n contiguous float32 rows of len into lse (n <= ROWS_MAX, and
 * n * len <= CHUNK_FLOATS unless n is 1): each row's maximum, the differences mx - x of all
 * rows in a buffer, their exps in one vectorized loop, the sums in double (as
 * softmax_rows_f32: a double exp per element had made the loss the dearest kernel of a
 * classifier with many classes). A row with a NaN or an infinite maximum takes the double
 * path. */
TFC_EW_VECTOR_CLONES static void lse_rows_f32(const struct tfc_kdesc *d, const float *x,
                                              int64_t b0, int64_t n, int64_t len, double *lse)
{
    float buf[CHUNK_FLOATS], mx[ROWS_MAX];
    unsigned char bad[ROWS_MAX];
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + (b0 + r) * len;
        float *br = buf + r * len;
        int has_nan;
        mx[r] = row_max_f32(xr, len, &has_nan);
        bad[r] = has_nan || !isfinite(mx[r]);
        if (bad[r]) {
            lse[r] = row_lse_f64(d, x, b0 + r, len);
            if (len <= CHUNK_FLOATS) /* exps of these zeros: unused */
                memset(br, 0, (size_t)len * sizeof *br);
        } else if (len > CHUNK_FLOATS) { /* (then n is 1) */
            lse[r] = mx[r] + log(long_row_sum_f32(xr, len, mx[r]));
        } else {
            shift_from(br, xr, mx[r], len);
        }
    }
    if (len > CHUNK_FLOATS) return;
    exp_neg_in_place(buf, n * len);
    for (int64_t r = 0; r < n; r++)
        if (!bad[r]) lse[r] = mx[r] + log(sum_f64(buf + r * len, len));
}

/* The loss of row b from its log-sum-exp: -log_softmax[b, id] (sparse) or
 * -sum_c labels[b, c] * log_softmax[b, c] (dense). */
static double row_xent(const struct tfc_kargs *a, const void *logits, const void *labels,
                       int64_t b, int64_t classes, double lse)
{
    const struct tfc_kdesc *d = &a->d[0], *dl = &a->d[1];
    if (a->kind == TFC_K_SPARSE_XENT) {
        int64_t id = tfc_load_i64(labels, dl->dtype, b);
        if (id >= 0 && id < classes) return lse - tfc_load_f64(logits, d->dtype, b * classes + id);
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE, "label %lld of row %lld is outside [0, %lld)",
                        (long long)id, (long long)b, (long long)classes);
        return NAN;
    }
    double l = 0;
    for (int64_t c = 0; c < classes; c++) {
        double p = tfc_load_f64(labels, dl->dtype, b * classes + c);
        if (p != 0) l -= p * (tfc_load_f64(logits, d->dtype, b * classes + c) - lse);
    }
    return l;
}

/* loss[b] = -sum_c labels[b,c] * log_softmax(logits)[b,c] (dense) or -log_softmax[b, id]. */
static void xent_run(const struct tfc_kargs *a, const void *logits, const void *labels,
                     void *loss)
{
    const struct tfc_kdesc *d = &a->d[0];
    int64_t classes = d->dims[d->rank - 1];
    int64_t rows = classes ? d->numel / classes : a->d[2].numel;
    int f32 = d->dtype == TFC_FLOAT32 && classes > 0;
    int64_t step = !f32 || CHUNK_FLOATS / classes < 1 ? 1 : CHUNK_FLOATS / classes;
    step = step > ROWS_MAX ? ROWS_MAX : step;
    double lse[ROWS_MAX];
    for (int64_t b0 = 0; b0 < rows; b0 += step) {
        int64_t n = rows - b0 < step ? rows - b0 : step;
        if (f32)
            lse_rows_f32(d, logits, b0, n, classes, lse);
        else
            lse[0] = row_lse_f64(d, logits, b0, classes);
        for (int64_t r = 0; r < n; r++)
            tfc_store_f64(loss, d->dtype, b0 + r, row_xent(a, logits, labels, b0 + r, classes,
                                                         lse[r]));
    }
}

static void softmax_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    if (a->kind == TFC_K_SOFTMAX || a->kind == TFC_K_LOG_SOFTMAX)
        softmax_run(a, tfc_kin(buffers, a, 0), out);
    else
        xent_run(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out);
}

static struct starpu_perfmodel softmax_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_softmax",
};

struct starpu_codelet tfc_cl_softmax = {
    .cpu_funcs = {softmax_cpu},
    .cpu_funcs_name = {"softmax_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_softmax_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_softmax_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &softmax_model,
    .name = "softmax",
};
