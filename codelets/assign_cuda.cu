/* assign.cu: CUDA kernels of the stateful ops, as assign.c: assign (a device copy into the
 * variable, buffer 0), assign_add and assign_sub (read-modify-write of buffer 0). */
#include "cuda_common.h"

template <typename T>
static __global__ void assign_float_kernel(T *__restrict__ v, const T *__restrict__ x, T sign,
                                           int64_t n)
{
    /* sign is +-1, so sign * x is exact and a fused multiply-add rounds as v + sign * x */
    TFC_CU_LOOP(i, n) v[i] += sign * x[i];
}

static __global__ void assign_int_kernel(int dt, void *v, const void *x, int sub, int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        uint64_t a = (uint64_t)tfc_cu_ld_i64(v, dt, i), b = (uint64_t)tfc_cu_ld_i64(x, dt, i);
        tfc_cu_st_i64(v, dt, i, (int64_t)(sub ? a - b : a + b));
    }
}

extern "C" void tfc_assign_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    void *var = tfc_kin(buffers, a, 0);
    const void *val = tfc_kin(buffers, a, 1);
    const struct tfc_kdesc *d = &a->d[0];
    if (!var)
        return;
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (a->kind == TFC_K_ASSIGN) {
        tfc_cu_check(a,
                     cudaMemcpyAsync(var, val, (size_t)d->numel * tfc_kdtype_size(d->dtype),
                                     cudaMemcpyDeviceToDevice, s),
                     "assign copy");
        return;
    }
    int sub = a->kind == TFC_K_ASSIGN_SUB;
    unsigned g = tfc_cu_blocks(d->numel);
    if (d->dtype == TFC_FLOAT32)
        assign_float_kernel<float><<<g, TFC_CU_THREADS, 0, s>>>(
            (float *)var, (const float *)val, sub ? -1.0f : 1.0f, d->numel);
    else if (d->dtype == TFC_FLOAT64)
        assign_float_kernel<double><<<g, TFC_CU_THREADS, 0, s>>>(
            (double *)var, (const double *)val, sub ? -1.0 : 1.0, d->numel);
    else
        assign_int_kernel<<<g, TFC_CU_THREADS, 0, s>>>(d->dtype, var, val, sub, d->numel);
    tfc_cu_check_launch(a, "assign");
}
