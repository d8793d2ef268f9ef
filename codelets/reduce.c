/* reduce.c: CPU kernels for reduce sum, mean, max, min over a set of axes (with or without
 * keepdims: the output has the same element order either way) and argmax over one axis.
 * Sums accumulate in double (long float runs in their own order: reduce_runs_float). Empty
 * reductions give 0 (sum), NaN (mean), -inf (max), +inf (min).
 * A tiled reduction (sched/tiling.c) reads 2-D tiles with a leading dimension, and its final
 * mean divides the sum of partial sums by the whole count (bcast.h tfc_reduce_divisor). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "ew_vexpf.h" /* TFC_EW_VECTOR_CLONES */
#include "../src/tfc.h"

static inline double red_step(int kind, double acc, double v)
{
    switch (kind) {
    case TFC_K_REDUCE_MAX: return (v > acc || isnan(v)) ? v : acc;
    case TFC_K_REDUCE_MIN: return (v < acc || isnan(v)) ? v : acc;
    default: return acc + v;
    }
}

/* The common 2-D float cases, over rows (axis 0: bias gradients, the partial sums of tiled
 * reductions and split-K) or over columns (axis 1), as loops the compiler vectorizes; each
 * output still adds its elements in the generic loop's order, so the results are the same. */
#define REDUCE_2D(T)                                                                          \
    static void reduce_2d_##T(int kind, const T *x, int64_t m, int64_t n, int64_t ld,        \
                              int over_rows, double *acc)                                    \
    {                                                                                         \
        if (over_rows) {                                                                      \
            for (int64_t r = 0; r < m; r++) {                                                 \
                const T *row = x + r * ld;                                                    \
                if (kind != TFC_K_REDUCE_MAX && kind != TFC_K_REDUCE_MIN)                   \
                    for (int64_t j = 0; j < n; j++) acc[j] += (double)row[j];                 \
                else                                                                          \
                    for (int64_t j = 0; j < n; j++) acc[j] = red_step(kind, acc[j], row[j]);  \
            }                                                                                 \
        } else {                                                                              \
            for (int64_t r = 0; r < m; r++) {                                                 \
                const T *row = x + r * ld;                                                    \
                double s = acc[r];                                                            \
                for (int64_t j = 0; j < n; j++) s = red_step(kind, s, row[j]);                \
                acc[r] = s;                                                                   \
            }                                                                                 \
        }                                                                                     \
    }
REDUCE_2D(float)
REDUCE_2D(double)

/* Sums over the reduced axes of a contiguous input whose kept axes are adjacent: viewed as
 * [outer, kept, inner] (a bias gradient: dy [N,C,H,W] over axes 0,2,3 is [N, C, H*W]), each
 * output k adds its inner runs one after another. This keeps the generic loop's order per
 * output (same results); 8 outputs' chains are interleaved so the adds overlap. */
#define REDUCE_RUNS(T)                                                                        \
    static void reduce_chains_##T(const T *x, int64_t outer, int64_t kept, int64_t inner,    \
                                  double *acc)                                               \
    {                                                                                         \
        for (int64_t o = 0; o < outer; o++) {                                                 \
            const T *blk = x + o * kept * inner;                                              \
            int64_t k = 0;                                                                    \
            for (; k + 8 <= kept; k += 8) {                                                   \
                double s[8];                                                                  \
                for (int t = 0; t < 8; t++) s[t] = acc[k + t];                                \
                for (int64_t j = 0; j < inner; j++)                                           \
                    for (int t = 0; t < 8; t++) s[t] += (double)blk[(k + t) * inner + j];     \
                for (int t = 0; t < 8; t++) acc[k + t] = s[t];                                \
            }                                                                                 \
            for (; k < kept; k++) {                                                           \
                double s = acc[k];                                                            \
                for (int64_t j = 0; j < inner; j++) s += (double)blk[k * inner + j];          \
                acc[k] = s;                                                                   \
            }                                                                                 \
        }                                                                                     \
    }
REDUCE_RUNS(float)
REDUCE_RUNS(double)

/* One contiguous float run's sum in double, in 8 lanes added pairwise at the end (the loop
 * vectorizes: the 8-row interleave above reads with a stride of a run, converts one float at
 * a time and ran about 5x slower on the CNN's bias gradients). */
TFC_EW_VECTOR_CLONES static double float_run_sum(const float *r, int64_t n)
{
    double p[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int t = 0; t < 8; t++) p[t] += (double)r[j + t];
    double s = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
    for (; j < n; j++) s += (double)r[j];
    return s;
}

/* Float input with runs of at least FLOAT_RUN_MIN elements (the CNN's bias gradients: 196
 * and 784): each run summed on its own (float_run_sum), then added to its output in run
 * order. Another order than the generic loop's, in double: the float results agree but where
 * the double sum's rounding (about 1e-16 relative) lands on the other side of a float
 * rounding boundary. Shorter runs keep the chains (and their order). */
#define FLOAT_RUN_MIN 32
static void reduce_runs_float(const float *x, int64_t outer, int64_t kept, int64_t inner,
                              double *acc)
{
    if (inner < FLOAT_RUN_MIN) {
        reduce_chains_float(x, outer, kept, inner, acc);
        return;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < kept; k++)
            acc[k] += float_run_sum(x + (o * kept + k) * inner, inner);
}

static int reduce_by_runs(const struct tfc_kargs *a, const int *reduced, const void *x,
                          int64_t ld, double *acc)
{
    const struct tfc_kdesc *d = &a->d[0];
    if (a->kind == TFC_K_REDUCE_MAX || a->kind == TFC_K_REDUCE_MIN ||
        (d->dtype != TFC_FLOAT32 && d->dtype != TFC_FLOAT64) ||
        (d->rank == 2 && ld != d->dims[1]))
        return 0;
    /* kept axes must be one adjacent group: reduced* kept* reduced* */
    int64_t dims3[3] = {1, 1, 1};
    int part = 0;
    for (int i = 0; i < d->rank; i++) {
        if (part == 0 && !reduced[i]) part = 1;
        if (part == 1 && reduced[i]) part = 2;
        if (part == 2 && !reduced[i]) return 0;
        dims3[part] *= d->dims[i];
    }
    if (d->dtype == TFC_FLOAT32)
        reduce_runs_float(x, dims3[0], dims3[1], dims3[2], acc);
    else
        reduce_chains_double(x, dims3[0], dims3[1], dims3[2], acc);
    return 1;
}

/* A sum that reduces nothing (sum_to_like to the same shape, which the gradient emits when a
 * dim is only known at run time): each output is 0.0 + its element, as the generic loop
 * computes it (so -0 still becomes +0), without the double buffer. Returns 0 otherwise. */
static int sum_of_one(const struct tfc_kargs *a, const void *x, int64_t ld, void *y)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    if ((a->kind != TFC_K_REDUCE_SUM && a->kind != TFC_K_SUM_TO) || o->numel != d->numel ||
        d->dtype != o->dtype || (d->rank == 2 && ld != d->dims[1]))
        return 0;
    if (d->dtype == TFC_FLOAT32) {
        const float *xf = x;
        float *yf = y;
        for (int64_t i = 0; i < d->numel; i++) yf[i] = (float)(0.0 + (double)xf[i]);
    } else if (d->dtype == TFC_FLOAT64) {
        const double *xd = x;
        double *yd = y;
        for (int64_t i = 0; i < d->numel; i++) yd[i] = 0.0 + xd[i];
    } else {
        return 0;
    }
    return 1;
}

/* The accumulators to the output: typed loops for the float outputs. */
static void store_results(const struct tfc_kargs *a, const double *acc, int64_t n_out,
                          int64_t count, void *y)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    int mean = a->kind == TFC_K_REDUCE_MEAN;
    if (!mean && o->dtype == TFC_FLOAT32) {
        float *yf = y;
        for (int64_t i = 0; i < n_out; i++) yf[i] = (float)acc[i];
        return;
    }
    for (int64_t i = 0; i < n_out; i++) {
        double v = acc[i];
        if (mean) v = count ? v / (double)count : NAN;
        tfc_store_f64(y, o->dtype, i, v);
    }
}

/* Maps every input element to its output element: out_index = sum over kept axes. The
 * input may be a 2-D tile of a larger matrix (sched/tiling.c): rows ld elements apart. */
static void reduce_run(const struct tfc_kargs *a, const void *x, int64_t ld, void *y)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    if (sum_of_one(a, x, ld, y))
        return;
    int reduced[TFC_K_MAX_RANK];
    tfc_reduced_axes(a, reduced);
    /* output strides over the input's axes (0 on reduced axes); the input's own strides */
    int64_t ost[TFC_K_MAX_RANK], ist[TFC_K_MAX_RANK], stride = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        ost[i] = reduced[i] ? 0 : stride;
        if (!reduced[i]) stride *= d->dims[i];
    }
    tfc_reduce_input_strides(d, ld, ist);
    int64_t n_out = o->numel, count = tfc_reduce_divisor(a, n_out ? d->numel / n_out : 0);
    double init = a->kind == TFC_K_REDUCE_MAX ? -INFINITY
                : a->kind == TFC_K_REDUCE_MIN ? INFINITY : 0.0;
    double *acc = malloc((size_t)(n_out ? n_out : 1) * sizeof(double));
    if (!acc) {
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "no memory for a reduction buffer");
        return;
    }
    for (int64_t i = 0; i < n_out; i++) acc[i] = init;
    int two_d = d->rank == 2 && reduced[0] != reduced[1] &&
                (d->dtype == TFC_FLOAT32 || d->dtype == TFC_FLOAT64);
    int done = two_d;
    if (two_d && d->dtype == TFC_FLOAT32)
        reduce_2d_float(a->kind, x, d->dims[0], d->dims[1], ld, reduced[0], acc);
    else if (two_d)
        reduce_2d_double(a->kind, x, d->dims[0], d->dims[1], ld, reduced[0], acc);
    else
        done = reduce_by_runs(a, reduced, x, ld, acc);
    int64_t idx[TFC_K_MAX_RANK] = {0}, off = 0, xo = 0;
    for (int64_t e = 0; !done && e < d->numel; e++) { /* the generic path */
        acc[off] = red_step(a->kind, acc[off], tfc_load_f64(x, d->dtype, xo));
        for (int dd = d->rank - 1; dd >= 0; dd--) {
            off += ost[dd];
            xo += ist[dd];
            if (++idx[dd] < d->dims[dd]) break;
            off -= ost[dd] * d->dims[dd];
            xo -= ist[dd] * d->dims[dd];
            idx[dd] = 0;
        }
    }
    store_results(a, acc, n_out, count, y);
    free(acc);
}

static void argmax_run(const struct tfc_kargs *a, const void *x, int64_t *y)
{
    const struct tfc_kdesc *d = &a->d[0];
    int axis = (int)a->attrs[ARGMAX_AXIS].i;
    if (axis < 0) axis += d->rank;
    int64_t outer = 1, len = d->dims[axis], inner = 1;
    for (int i = 0; i < axis; i++) outer *= d->dims[i];
    for (int i = axis + 1; i < d->rank; i++) inner *= d->dims[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * len * inner + in, best = 0;
            double bv = -INFINITY;
            for (int64_t j = 0; j < len; j++) {
                double v = tfc_load_f64(x, d->dtype, base + j * inner);
                if (v > bv || (j == 0)) { bv = v; best = j; }
            }
            y[o * inner + in] = best;
        }
}

static void reduce_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    if (a->kind == TFC_K_ARGMAX)
        argmax_run(a, tfc_kin(buffers, a, 0), out);
    else
        reduce_run(a, tfc_kin(buffers, a, 0), tfc_kdesc_ld(buffers, &a->d[0]), out);
}

static struct starpu_perfmodel reduce_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_reduce",
};

struct starpu_codelet tfc_cl_reduce = {
    .cpu_funcs = {reduce_cpu},
    .cpu_funcs_name = {"reduce_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_reduce_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_reduce_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &reduce_model,
    .name = "reduce",
};
