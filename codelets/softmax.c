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

/* y[j] = exp(-y[j]) for y[j] >= 0, in place, by ew_vexpf.h's formula (relative error about
 * 1e-7), vectorized per CPU (TFC_EW_VECTOR_CLONES). */
TFC_EW_VECTOR_CLONES static void exp_neg_in_place(float *y, int64_t n)
{
    for (int64_t j = 0; j < n; j++) y[j] = tfc_vexpf_neg(y[j]);
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
static void softmax_rows_f32(const struct tfc_kdesc *d, const float *x, float *y, int64_t o0,
                             int64_t n, int64_t len)
{
    unsigned char bad[ROWS_MAX];
    for (int64_t r = 0; r < n; r++) {
        const float *xr = x + (o0 + r) * len;
        float *yr = y + (o0 + r) * len, mx = -INFINITY;
        int nan = 0;
        for (int64_t j = 0; j < len; j++) {
            nan |= xr[j] != xr[j];
            mx = xr[j] > mx ? xr[j] : mx;
        }
        bad[r] = nan || !isfinite(mx);
        if (bad[r]) /* the double path writes the row after the exps (of these zeros) */
            memset(yr, 0, (size_t)len * sizeof *yr);
        else
            for (int64_t j = 0; j < len; j++) yr[j] = mx - xr[j];
    }
    exp_neg_in_place(y + o0 * len, n * len);
    for (int64_t r = 0; r < n; r++) {
        if (bad[r]) {
            softmax_row_f64(d, x, y, o0 + r, 0, len, 1, 0);
            continue;
        }
        float *yr = y + (o0 + r) * len;
        double sum = 0;
        for (int64_t j = 0; j < len; j++) sum += yr[j];
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < len; j++) yr[j] *= inv;
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
