/* dropout_cuda.cu: CUDA kernels of the dropout codelet (dropout and dropout_grad, float32 and
 * float64): one thread per element, the keep decision from philox.h (the very functions the
 * CPU runs, compiled __host__ __device__), the step and training read on the device, and the
 * dtype-rounded scale applied by one round-to-nearest multiply: the CPU's bits. */
#include "cuda_common.h"
#include "philox.h"

template <typename T> static __device__ T mul_rn(T a, T b);
template <> __device__ float mul_rn<float>(float a, float b) { return __fmul_rn(a, b); }
template <> __device__ double mul_rn<double>(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
static __global__ void dropout_kernel(const T *x, T *y, const int64_t *step, const float *training,
                                      int64_t n, uint64_t seed, uint32_t threshold, T scale)
{
    uint64_t s = (uint64_t)*step;
    int train = *training != 0;
    TFC_CU_LOOP(i, n) {
        if (!train)
            y[i] = x[i];
        else
            y[i] = tfc_dropout_keep(seed, s, (uint64_t)i, threshold) ? mul_rn(x[i], scale) : (T)0;
    }
}

extern "C" void tfc_dropout_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    cudaStream_t s = starpu_cuda_get_local_stream();
    const void *x = tfc_kin(buffers, a, 0);
    void *y = tfc_kout(buffers, a, 0);
    if (!x || !y) return; /* zero elements */
    const int64_t *step = (const int64_t *)tfc_kin(buffers, a, 1);
    const float *training = (const float *)tfc_kin(buffers, a, 2);
    int64_t n = tfc_kout_desc(a, 0)->numel;
    double rate = a->attrs[DROPOUT_RATE].f, scale = 1.0 / (1.0 - rate);
    uint64_t seed = (uint64_t)a->attrs[DROPOUT_SEED].i;
    uint32_t threshold = tfc_dropout_threshold(rate);
    if (a->d[0].dtype == TFC_FLOAT32)
        dropout_kernel<float><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(
            (const float *)x, (float *)y, step, training, n, seed, threshold, (float)scale);
    else
        dropout_kernel<double><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(
            (const double *)x, (double *)y, step, training, n, seed, threshold, scale);
    tfc_cu_check_launch(a, "dropout");
}
