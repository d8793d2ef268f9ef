/* softmax.cu: CUDA softmax/log_softmax over one axis (cuDNN's cudnnSoftmaxForward on a 4-D
 * NCHW view N=outer, C=len, H=inner, W=1; our own kernel when cuDNN cannot take the shape or
 * dtype) and softmax cross-entropy from logits with dense or sparse labels (one warp per row,
 * max-shifted log-sum-exp accumulated in double, as softmax.c does). */
#include "cuda_common.h"

#define WARPS_PER_BLOCK 8

static __device__ __forceinline__ double warp_max(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        double w = __shfl_xor_sync(0xffffffffu, v, o);
        if (w > v) v = w; /* NaN never wins, as in the CPU's `v > mx` */
    }
    return v;
}

static __device__ __forceinline__ double warp_sum(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

struct softmax_args {
    int dt, log_out;
    int64_t outer, len, inner;
};

/* One warp per (outer, inner) row of len elements spaced inner apart. */
static __global__ void softmax_kernel(struct softmax_args p, const void *x, void *y)
{
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    int64_t rows = p.outer * p.inner;
    for (int64_t r = warp; r < rows; r += nwarps) {
        int64_t o = r / p.inner, in = r - o * p.inner;
        int64_t base = o * p.len * p.inner + in;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = lane; j < p.len; j += 32) {
            double v = tfc_cu_ld_f64(x, p.dt, base + j * p.inner);
            if (v > mx) mx = v;
        }
        mx = warp_max(mx);
        for (int64_t j = lane; j < p.len; j += 32)
            sum += exp(tfc_cu_ld_f64(x, p.dt, base + j * p.inner) - mx);
        sum = warp_sum(sum);
        double lse = log(sum);
        for (int64_t j = lane; j < p.len; j += 32) {
            double v = tfc_cu_ld_f64(x, p.dt, base + j * p.inner) - mx;
            tfc_cu_st_f64(y, p.dt, base + j * p.inner, p.log_out ? v - lse : exp(v) / sum);
        }
    }
}

struct xent_args {
    int dt, label_dt, sparse;
    int64_t rows, classes;
};

/* loss[b] = -sum_c labels[b,c] * log_softmax(logits)[b,c] (dense) or -log_softmax[b, id]. */
static __global__ void xent_kernel(struct xent_args p, const void *logits, const void *labels,
                                   void *loss, struct tfc_cu_err *err)
{
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t b = warp; b < p.rows; b += nwarps) {
        int64_t base = b * p.classes;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = lane; c < p.classes; c += 32) {
            double v = tfc_cu_ld_f64(logits, p.dt, base + c);
            if (v > mx) mx = v;
        }
        mx = warp_max(mx);
        for (int64_t c = lane; c < p.classes; c += 32)
            sum += exp(tfc_cu_ld_f64(logits, p.dt, base + c) - mx);
        sum = warp_sum(sum);
        double lse = mx + log(sum), l = 0;
        if (p.sparse) {
            if (lane == 0) {
                int64_t id = tfc_cu_ld_i64(labels, p.label_dt, b);
                if (id < 0 || id >= p.classes) {
                    tfc_cu_raise(err, b);
                    l = NAN;
                } else {
                    l = lse - tfc_cu_ld_f64(logits, p.dt, base + id);
                }
            }
        } else {
            for (int64_t c = lane; c < p.classes; c += 32) {
                double q = tfc_cu_ld_f64(labels, p.label_dt, base + c);
                if (q != 0)
                    l -= __dmul_rn(q, tfc_cu_ld_f64(logits, p.dt, base + c) - lse);
            }
            l = warp_sum(l);
        }
        if (lane == 0)
            tfc_cu_st_f64(loss, p.dt, b, l);
    }
}

static unsigned warp_blocks(int64_t rows)
{
    return tfc_cu_blocks(rows, WARPS_PER_BLOCK);
}

/* cuDNN softmax; returns 1 when done (or failed and reported), 0 to fall back. */
static int softmax_cudnn(const struct tfc_kargs *a, const struct softmax_args *p, const void *x,
                         void *y)
{
    if (p->dt != TFC_FLOAT32 && p->dt != TFC_FLOAT64)
        return 0;
    if (p->outer > 0x7fffffff || p->len > 0x7fffffff || p->inner > 0x7fffffff ||
        a->d[0].numel > 0x7fffffff)
        return 0;
    cudnnHandle_t h = tfc_cuda_cudnn_handle();
    if (!h)
        return 0;
    cudnnTensorDescriptor_t desc;
    if (cudnnCreateTensorDescriptor(&desc) != CUDNN_STATUS_SUCCESS)
        return 0;
    cudnnDataType_t dtype = p->dt == TFC_FLOAT32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
    cudnnStatus_t st = cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, dtype, (int)p->outer,
                                                  (int)p->len, (int)p->inner, 1);
    int done = 0;
    if (st == CUDNN_STATUS_SUCCESS) {
        cudnnSoftmaxAlgorithm_t algo = p->log_out ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
        const float onef = 1.0f, zerof = 0.0f;
        const double oned = 1.0, zerod = 0.0;
        const void *alpha = p->dt == TFC_FLOAT32 ? (const void *)&onef : (const void *)&oned;
        const void *beta = p->dt == TFC_FLOAT32 ? (const void *)&zerof : (const void *)&zerod;
        st = cudnnSoftmaxForward(h, algo, CUDNN_SOFTMAX_MODE_CHANNEL, alpha, desc, x, beta, desc,
                                 y);
        if (st == CUDNN_STATUS_SUCCESS) {
            done = 1;
        } else if (st != CUDNN_STATUS_NOT_SUPPORTED && st != CUDNN_STATUS_BAD_PARAM) {
            tfc_kernel_fail(a, TFC_ERR_RUNTIME, "cuDNN softmax failed: %s",
                            cudnnGetErrorString(st));
            done = 1;
        }
    }
    cudnnDestroyTensorDescriptor(desc);
    return done;
}

extern "C" void tfc_softmax_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    cudaStream_t s = starpu_cuda_get_local_stream();
    const struct tfc_kdesc *d = &a->d[0];
    if (a->kind == TFC_K_SOFTMAX || a->kind == TFC_K_LOG_SOFTMAX) {
        const void *x = tfc_kin(buffers, a, 0);
        struct softmax_args p;
        p.dt = d->dtype;
        p.log_out = a->kind == TFC_K_LOG_SOFTMAX;
        p.outer = 1;
        p.len = 1;
        p.inner = 1;
        if (d->rank > 0) {
            int axis = (int)a->attrs[SOFTMAX_AXIS].i;
            if (axis < 0) axis += d->rank;
            p.len = d->dims[axis];
            for (int i = 0; i < axis; i++) p.outer *= d->dims[i];
            for (int i = axis + 1; i < d->rank; i++) p.inner *= d->dims[i];
        }
        if (softmax_cudnn(a, &p, x, out))
            return;
        softmax_kernel<<<warp_blocks(p.outer * p.inner), 32 * WARPS_PER_BLOCK, 0, s>>>(p, x,
                                                                                       out);
        tfc_cu_check_launch(a, "softmax");
        return;
    }
    const struct tfc_kdesc *dl = &a->d[1];
    struct xent_args p;
    p.dt = d->dtype;
    p.label_dt = dl->dtype;
    p.sparse = a->kind == TFC_K_SPARSE_XENT;
    p.classes = d->dims[d->rank - 1];
    p.rows = p.classes ? d->numel / p.classes : a->d[2].numel;
    const void *labels = tfc_kin(buffers, a, 1);
    struct tfc_cu_err *e = p.sparse ? tfc_cu_err_begin(a, s) : NULL;
    xent_kernel<<<warp_blocks(p.rows), 32 * WARPS_PER_BLOCK, 0, s>>>(
        p, tfc_kin(buffers, a, 0), labels, out, e);
    if (!tfc_cu_check_launch(a, "softmax cross-entropy") && e)
        tfc_cu_err_end(a, s, e, TFC_CU_ERR_LABEL, p.classes, labels, dl->dtype);
}
