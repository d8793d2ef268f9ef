/* pad_cuda.cu: CUDA kernels of the pad codelet: pad for every dtype (elements copied as bytes,
 * the constant as the dtype's bytes) and pad_grad (float32, float64; one thread, in the CPU's
 * order, as float atomics would change the sums). Sources follow pad_src.h. */
#include "cuda_common.h"
#include "pad_src.h"

struct pad_geom {
    int rank, mode, es;
    int64_t in[TFC_K_MAX_RANK], out[TFC_K_MAX_RANK], begin[TFC_K_MAX_RANK];
    unsigned char value[8]; /* the constant as the output dtype's bytes */
};

static __device__ int64_t source(const struct pad_geom &p, int64_t flat)
{
    int64_t src = 0, stride = 1;
    for (int d = p.rank - 1; d >= 0; d--) {
        int64_t o = flat % p.out[d], n = p.in[d], i = o - p.begin[d];
        flat /= p.out[d];
        if (i < 0 || i >= n) { /* pad_src.h's tfc_pad_src */
            if (p.mode == 1) i = i < 0 ? -i : 2 * (n - 1) - i;
            else if (p.mode == 2) i = i < 0 ? 0 : n - 1;
            else return -1;
        }
        src += i * stride;
        stride *= n;
    }
    return src;
}

static __global__ void pad_kernel(struct pad_geom p, const unsigned char *x, unsigned char *y,
                                  int64_t total)
{
    TFC_CU_LOOP(k, total) {
        int64_t s = x ? source(p, k) : -1;
        for (int b = 0; b < p.es; b++) y[k * p.es + b] = s >= 0 ? x[s * p.es + b] : p.value[b];
    }
}

static __global__ void pad_grad_kernel(struct pad_geom p, int dt, const void *dy, void *dx,
                                       int64_t n_dy, int64_t n_dx)
{
    if (blockIdx.x || threadIdx.x) return;
    for (int64_t i = 0; i < n_dx; i++) tfc_cu_st_f64(dx, dt, i, 0);
    for (int64_t k = 0; k < n_dy && dy; k++) {
        int64_t s = source(p, k);
        if (s >= 0) tfc_cu_st_f64(dx, dt, s, tfc_cu_ld_f64(dx, dt, s) + tfc_cu_ld_f64(dy, dt, k));
    }
}

extern "C" void tfc_pad_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    cudaStream_t s = starpu_cuda_get_local_stream();
    void *y = tfc_kout(buffers, a, 0);
    if (!y) return;
    int grad = a->kind == TFC_K_PAD_GRAD;
    const struct tfc_kdesc *x = grad ? tfc_kout_desc(a, 0) : &a->d[0];
    const struct tfc_kdesc *o = grad ? &a->d[0] : tfc_kout_desc(a, 0);
    struct pad_geom p = {};
    p.rank = x->rank;
    p.mode = (int)a->attrs[PAD_MODE].i;
    p.es = (int)tfc_kdtype_size(tfc_kout_desc(a, 0)->dtype);
    for (int d = 0; d < x->rank; d++) {
        p.in[d] = x->dims[d];
        p.out[d] = o->dims[d];
        p.begin[d] = a->attrs[PAD_BEGIN].v[d];
    }
    if (grad) {
        pad_grad_kernel<<<1, 1, 0, s>>>(p, x->dtype, tfc_kin(buffers, a, 0), y, o->numel,
                                        x->numel);
        tfc_cu_check_launch(a, "pad_grad");
        return;
    }
    tfc_cu_st_f64(p.value, o->dtype, 0, a->attrs[PAD_VALUE].f);
    pad_kernel<<<tfc_cu_blocks(o->numel), TFC_CU_THREADS, 0, s>>>(
        p, (const unsigned char *)tfc_kin(buffers, a, 0), (unsigned char *)y, o->numel);
    tfc_cu_check_launch(a, "pad");
}
