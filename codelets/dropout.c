/* dropout.c: the dropout codelet (dropout and dropout_grad, float32 and float64) and its CPU
 * kernel. Both kinds compute y = x * keep(seed, step, i) / (1 - rate) where training is nonzero,
 * y = x where it is 0; the keep decision is codelets/philox.h's, shared with the other devices,
 * and the scale is rounded to the dtype once, so every device multiplies by the same number. */
#include <string.h>
#include "kernel.h"
#include "philox.h"
#include "opencl_common.h" /* tfc_opencl_can_execute */

#ifdef STARPU_USE_OPENCL
void tfc_dropout_opencl(void *buffers[], void *cl_arg); /* codelets/opencl_dropout.c */
#endif
#ifdef STARPU_USE_CUDA
void tfc_dropout_cuda(void *buffers[], void *cl_arg); /* codelets/dropout_cuda.cu */
#endif

/* One task's element-wise work over n elements: kept units times s, dropped ones 0. One
 * Philox block gives the words of four consecutive elements. */
static void dropout_f32(const float *x, float *y, int64_t n, float s, uint64_t seed,
                        uint64_t step, uint32_t threshold)
{
    for (int64_t b = 0; b * 4 < n; b++) {
        uint32_t w[4];
        tfc_philox_block(seed, step, (uint64_t)b, w);
        for (int64_t i = b * 4; i < n && i < b * 4 + 4; i++)
            y[i] = w[i & 3] >= threshold ? x[i] * s : 0.0f;
    }
}

static void dropout_f64(const double *x, double *y, int64_t n, double s, uint64_t seed,
                        uint64_t step, uint32_t threshold)
{
    for (int64_t b = 0; b * 4 < n; b++) {
        uint32_t w[4];
        tfc_philox_block(seed, step, (uint64_t)b, w);
        for (int64_t i = b * 4; i < n && i < b * 4 + 4; i++)
            y[i] = w[i & 3] >= threshold ? x[i] * s : 0.0;
    }
}

static void dropout_run(const struct tfc_kargs *a, const void *x, void *y, uint64_t step)
{
    int64_t n = tfc_kout_desc(a, 0)->numel;
    double rate = a->attrs[DROPOUT_RATE].f, scale = 1.0 / (1.0 - rate);
    uint64_t seed = (uint64_t)a->attrs[DROPOUT_SEED].i;
    uint32_t threshold = tfc_dropout_threshold(rate);
    if (a->d[0].dtype == TFC_FLOAT32)
        dropout_f32(x, y, n, (float)scale, seed, step, threshold);
    else
        dropout_f64(x, y, n, scale, seed, step, threshold);
}

static void dropout_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const void *x = tfc_kin(buffers, a, 0);
    void *y = tfc_kout(buffers, a, 0);
    if (!x || !y) return; /* zero elements */
    const int64_t *step = tfc_kin(buffers, a, 1);
    const float *training = tfc_kin(buffers, a, 2);
    if (*training != 0)
        dropout_run(a, x, y, (uint64_t)*step);
    else if (x != y)
        memcpy(y, x, (size_t)a->d[0].numel * tfc_kdtype_size(a->d[0].dtype));
}

static struct starpu_perfmodel dropout_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_dropout",
};

struct starpu_codelet tfc_cl_dropout = {
    .cpu_funcs = {dropout_cpu},
    .cpu_funcs_name = {"dropout_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_dropout_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    /* both kinds and dtypes: tfc_opencl_supports' default for codelets it does not list */
    .opencl_funcs = {tfc_dropout_opencl},
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &dropout_model,
    .name = "dropout",
};
