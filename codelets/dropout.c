/* dropout.c: the dropout codelet (dropout and dropout_grad, float32 and float64) and its CPU
 * kernel. Both kinds compute y = x * keep(seed, step, i) / (1 - rate) where training is nonzero,
 * y = x where it is 0; the keep decision is codelets/philox.h's, shared with the other devices,
 * and the scale is rounded to the dtype once, so every device multiplies by the same number. */
#include <string.h>
#include "kernel.h"
#include "philox.h"
#include "ew_vexpf.h" /* TFC_EW_VECTOR_CLONES */
#include "opencl_common.h" /* tfc_opencl_can_execute */

#ifdef STARPU_USE_OPENCL
void tfc_dropout_opencl(void *buffers[], void *cl_arg); /* codelets/opencl_dropout.c */
#endif
#ifdef STARPU_USE_CUDA
void tfc_dropout_cuda(void *buffers[], void *cl_arg); /* codelets/dropout_cuda.cu */
#endif

/* Blocks of the stream computed side by side: DROPOUT_LANES Philox blocks (4 * DROPOUT_LANES
 * elements) per chunk, one lane per block, so the rounds vectorize (the 32x32->64 multiplies
 * become vpmuludq); each lane runs philox.h's tfc_philox4x32_10 step for step, so every word,
 * and every kept unit, is the scalar loop's. Built per vector width (TFC_EW_VECTOR_CLONES). */
#define DROPOUT_LANES 16

static inline void philox_lanes(uint64_t b0, uint64_t seed, uint64_t step,
                                 uint32_t c[4][DROPOUT_LANES])
{
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int l = 0; l < DROPOUT_LANES; l++) {
        uint64_t b = b0 + (uint64_t)l;
        c[0][l] = (uint32_t)b, c[1][l] = (uint32_t)(b >> 32);
        c[2][l] = (uint32_t)step, c[3][l] = (uint32_t)(step >> 32);
    }
    for (int r = 0; r < 10; r++) {
        for (int l = 0; l < DROPOUT_LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c[0][l], p1 = (uint64_t)0xCD9E8D57u * c[2][l];
            uint32_t c0 = (uint32_t)(p1 >> 32) ^ c[1][l] ^ k0;
            uint32_t c2 = (uint32_t)(p0 >> 32) ^ c[3][l] ^ k1;
            c[0][l] = c0, c[1][l] = (uint32_t)p1, c[2][l] = c2, c[3][l] = (uint32_t)p0;
        }
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
}

/* One task's element-wise work over n elements: kept units times s, dropped ones +0. The
 * product's bits are masked (an integer and, as a float ?: would stay a branch at -O2), which
 * gives the same bits as computing it only for the kept units. Whole chunks first, then the
 * tail one Philox block (the words of four consecutive elements) at a time. */
#define DROPOUT_KERNEL(T, I)                                                                  \
    TFC_EW_VECTOR_CLONES static void dropout_##T(const T *x, T *y, int64_t n, T s,            \
                                                 uint64_t seed, uint64_t step,                \
                                                 uint32_t threshold)                          \
    {                                                                                          \
        const int64_t chunk = 4 * DROPOUT_LANES;                                               \
        int64_t i0 = 0;                                                                        \
        for (; i0 + chunk <= n; i0 += chunk) {                                                 \
            uint32_t c[4][DROPOUT_LANES];                                                      \
            philox_lanes((uint64_t)(i0 / 4), seed, step, c);                                   \
            I m[4 * DROPOUT_LANES];                                                            \
            for (int l = 0; l < DROPOUT_LANES; l++)                                            \
                for (int j = 0; j < 4; j++) m[4 * l + j] = -(I)(c[j][l] >= threshold);         \
            for (int i = 0; i < chunk; i++) {                                                  \
                union { T f; I b; } u = { x[i0 + i] * s };                                     \
                u.b &= m[i];                                                                   \
                y[i0 + i] = u.f;                                                               \
            }                                                                                  \
        }                                                                                      \
        for (int64_t b = i0 / 4; b * 4 < n; b++) {                                             \
            uint32_t w[4];                                                                     \
            tfc_philox_block(seed, step, (uint64_t)b, w);                                      \
            for (int64_t i = b * 4; i < n && i < b * 4 + 4; i++)                               \
                y[i] = w[i & 3] >= threshold ? x[i] * s : (T)0;                                \
        }                                                                                      \
    }
DROPOUT_KERNEL(float, int32_t)
DROPOUT_KERNEL(double, int64_t)

static void dropout_run(const struct tfc_kargs *a, const void *x, void *y, uint64_t step)
{
    int64_t n = tfc_kout_desc(a, 0)->numel;
    double rate = a->attrs[DROPOUT_RATE].f, scale = 1.0 / (1.0 - rate);
    uint64_t seed = (uint64_t)a->attrs[DROPOUT_SEED].i;
    uint32_t threshold = tfc_dropout_threshold(rate);
    if (a->d[0].dtype == TFC_FLOAT32)
        dropout_float(x, y, n, (float)scale, seed, step, threshold);
    else
        dropout_double(x, y, n, scale, seed, step, threshold);
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
