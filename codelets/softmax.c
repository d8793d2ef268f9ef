/* softmax.c: CPU kernels for softmax and log_softmax over one axis, and softmax cross-entropy
 * from logits with dense or sparse (integer class id) labels. Computed stably: shift by the
 * maximum, accumulate in double. */
#include <math.h>
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "ew_vexpf.h"
#include "../src/tfc.h"

/* e[j] = exp(x[j] - mx) for x[j] <= mx, by ew_vexpf.h's formula (relative error about 1e-7),
 * vectorized per CPU (TFC_EW_VECTOR_CLONES). */
TFC_EW_VECTOR_CLONES static void exp_below(const float *x, float *e, int64_t n, float mx)
{
    for (int64_t j = 0; j < n; j++) e[j] = tfc_vexpf_neg(mx - x[j]);
}

/* softmax of one contiguous float32 row, each exp once (libm's exp twice per element cost the
 * imported MLP's blocks more than their bias and ReLU), the sum in double. 0, writing
 * nothing, when the row holds a NaN or an infinite maximum: the double path then gives
 * IEEE's NaNs. */
static int softmax_row_f32(const float *x, float *y, int64_t len)
{
    float mx = -INFINITY;
    int nan = 0;
    for (int64_t j = 0; j < len; j++) {
        nan |= x[j] != x[j];
        mx = x[j] > mx ? x[j] : mx;
    }
    if (nan || !isfinite(mx)) return 0;
    exp_below(x, y, len, mx);
    double sum = 0;
    for (int64_t j = 0; j < len; j++) sum += y[j];
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < len; j++) y[j] *= inv;
    return 1;
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
    int rows_f32 = !log_out && inner == 1 && d->dtype == TFC_FLOAT32;
    for (int64_t o = 0; o < outer; o++) {
        if (rows_f32 && softmax_row_f32((const float *)x + o * len, (float *)y + o * len, len))
            continue;
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) {
                double v = tfc_load_f64(x, d->dtype, base + j * inner);
                if (v > mx) mx = v;
            }
            for (int64_t j = 0; j < len; j++)
                sum += exp(tfc_load_f64(x, d->dtype, base + j * inner) - mx);
            double lse = log(sum);
            for (int64_t j = 0; j < len; j++) {
                double v = tfc_load_f64(x, d->dtype, base + j * inner) - mx;
                tfc_store_f64(y, d->dtype, base + j * inner, log_out ? v - lse : exp(v) / sum);
            }
        }
    }
}

/* loss[b] = -sum_c labels[b,c] * log_softmax(logits)[b,c] (dense) or -log_softmax[b, id]. */
static void xent_run(const struct tfc_kargs *a, const void *logits, const void *labels,
                     void *loss)
{
    const struct tfc_kdesc *d = &a->d[0], *dl = &a->d[1];
    int64_t classes = d->dims[d->rank - 1];
    int64_t rows = classes ? d->numel / classes : a->d[2].numel;
    for (int64_t b = 0; b < rows; b++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < classes; c++) {
            double v = tfc_load_f64(logits, d->dtype, b * classes + c);
            if (v > mx) mx = v;
        }
        for (int64_t c = 0; c < classes; c++)
            sum += exp(tfc_load_f64(logits, d->dtype, b * classes + c) - mx);
        double lse = mx + log(sum), l = 0;
        if (a->kind == TFC_K_SPARSE_XENT) {
            int64_t id = tfc_load_i64(labels, dl->dtype, b);
            if (id < 0 || id >= classes) {
                tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE,
                                "label %lld of row %lld is outside [0, %lld)", (long long)id,
                                (long long)b, (long long)classes);
                l = NAN;
            } else {
                l = lse - tfc_load_f64(logits, d->dtype, b * classes + id);
            }
        } else {
            for (int64_t c = 0; c < classes; c++) {
                double p = tfc_load_f64(labels, dl->dtype, b * classes + c);
                if (p != 0)
                    l -= p * (tfc_load_f64(logits, d->dtype, b * classes + c) - lse);
            }
        }
        tfc_store_f64(loss, d->dtype, b, l);
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
