/* fused_cuda.cu: the CUDA kernel of fused element-wise steps (codelets/fused.h), computing
 * what fused.c computes: one thread per output element (grid-stride) loads its broadcast
 * inputs, evaluates the op list in registers and writes the outputs. The program, pointers,
 * dims and strides go by value as one kernel parameter; enqueued on the worker's stream. */
#include <string.h>
#include "cuda_common.h"
#include "fused.h"

struct fused_params {
    struct tfc_fused_prog prog;
    int n_in, n_out, rank, pad_;
    int64_t dims[TFC_K_MAX_RANK];
    int64_t st[TFC_FUSED_MAX_IN][TFC_K_MAX_RANK];
    const void *in[TFC_FUSED_MAX_IN];
    void *out[TFC_FUSED_MAX_OUT];
};

static __device__ __forceinline__ float fused_op(int kind, float x, float y)
{
    switch (kind) {
    case TFC_K_NEG: return -x;
    case TFC_K_ABS: return fabsf(x);
    case TFC_K_SQUARE: return x * x;
    case TFC_K_SQRT: return sqrtf(x);
    case TFC_K_RSQRT: return 1.0f / sqrtf(x);
    case TFC_K_EXP: return expf(x);
    case TFC_K_LOG: return logf(x);
    case TFC_K_RELU: return x > 0 ? x : 0.0f;
    case TFC_K_SIGMOID: return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case TFC_K_TANH: return tanhf(x);
    case TFC_K_SOFTPLUS: return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case TFC_K_ADD: return x + y;
    case TFC_K_SUB: return x - y;
    case TFC_K_MUL: return x * y;
    case TFC_K_DIV: return x / y;
    case TFC_K_MAXIMUM: return (x > y || x != x) ? x : y; /* NaN propagates */
    case TFC_K_MINIMUM: return (x < y || x != x) ? x : y;
    case TFC_K_POW: return powf(x, y);
    case TFC_K_RELU_GRAD: return y > 0 ? x : 0.0f; /* x is dy, y the relu input */
    default: return x;
    }
}

static __device__ __forceinline__ double fused_op(int kind, double x, double y)
{
    switch (kind) {
    case TFC_K_NEG: return -x;
    case TFC_K_ABS: return fabs(x);
    case TFC_K_SQUARE: return x * x;
    case TFC_K_SQRT: return sqrt(x);
    case TFC_K_RSQRT: return 1.0 / sqrt(x);
    case TFC_K_EXP: return exp(x);
    case TFC_K_LOG: return log(x);
    case TFC_K_RELU: return x > 0 ? x : 0.0;
    case TFC_K_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case TFC_K_TANH: return tanh(x);
    case TFC_K_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    case TFC_K_ADD: return x + y;
    case TFC_K_SUB: return x - y;
    case TFC_K_MUL: return x * y;
    case TFC_K_DIV: return x / y;
    case TFC_K_MAXIMUM: return (x > y || x != x) ? x : y;
    case TFC_K_MINIMUM: return (x < y || x != x) ? x : y;
    case TFC_K_POW: return pow(x, y);
    case TFC_K_RELU_GRAD: return y > 0 ? x : 0.0;
    default: return x;
    }
}

template <typename T>
static __global__ void fused_kernel(const struct fused_params p, int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        T r[TFC_FUSED_MAX_REGS];
        for (int k = 0; k < p.n_in; k++) {
            int64_t rem = i, off = 0;
            for (int d = p.rank - 1; d >= 0; d--) {
                int64_t dim = p.dims[d], q = rem / dim;
                off += (rem - q * dim) * p.st[k][d];
                rem = q;
            }
            r[k] = ((const T *)p.in[k])[off];
        }
        for (int k = 0; k < p.prog.n_ops; k++) {
            const struct tfc_fused_op &op = p.prog.ops[k];
            r[p.n_in + k] = fused_op(op.kind, r[op.a], op.b >= 0 ? r[op.b] : (T)0);
        }
        for (int j = 0; j < p.n_out; j++) ((T *)p.out[j])[i] = r[p.prog.out_reg[j]];
    }
}

extern "C" void tfc_fused_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct fused_params p;
    memset(&p, 0, sizeof p);
    p.prog = *tfc_fused_prog_of(a);
    p.n_in = a->n_in;
    p.n_out = a->n_out;
    p.rank = tfc_fused_strides(a, p.dims, p.st);
    for (int k = 0; k < a->n_in; k++) p.in[k] = tfc_kin(buffers, a, k);
    for (int j = 0; j < a->n_out; j++)
        if (!(p.out[j] = tfc_kout(buffers, a, j))) return;
    int64_t n = od->numel;
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (od->dtype == TFC_FLOAT32)
        fused_kernel<float><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(p, n);
    else
        fused_kernel<double><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(p, n);
    tfc_cu_check_launch(a, "fused");
}
