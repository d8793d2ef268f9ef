/* conv_cuda.cu: CUDA kernels of conv, conv_backprop_input (and conv_transpose) and
 * conv_backprop_filter, float32 and float64. cuDNN runs a task first (codelets/conv_cudnn.cu,
 * TFC_CONV_BACKEND); what it declines runs on the own kernels here: direct, one thread per
 * output element (y, dx or dw) in a grid-stride loop, summing in double the terms of the
 * definition, as opencl_conv.c does (correct rather than fast). */
#include "cuda_common.h"
#include "conv_geom.h"
#include "conv_cudnn.h"
extern "C" {
#include "../src/env.h"
}

struct conv_cu_args {
    int kind;                        /* 0 conv, 1 backprop input, 2 backprop filter */
    int64_t total;                   /* output elements */
    int64_t batch, cin, cout, cg, kg; /* N, C, K, C/groups, K/groups */
    struct tfc_conv_3d t;            /* the geometry over three spatial dims */
};

/* y[n,k,o] = sum over c' and kk of x[n,c,i] w[k,c',kk] (A x, B w). */
template <typename T>
static __device__ double conv_y(const conv_cu_args &p, const T *A, const T *B, int64_t g)
{
    const tfc_conv_3d &t = p.t;
    int64_t o = g % t.o_vol, k = g / t.o_vol % p.cout, n = g / t.o_vol / p.cout;
    int64_t o2 = o % t.o[2], o1 = o / t.o[2] % t.o[1], o0 = o / t.o[2] / t.o[1];
    double s = 0;
    for (int64_t cl = 0; cl < p.cg; cl++) {
        int64_t c = k / p.kg * p.cg + cl;
        for (int64_t k0 = 0; k0 < t.k[0]; k0++)
            for (int64_t k1 = 0; k1 < t.k[1]; k1++)
                for (int64_t k2 = 0; k2 < t.k[2]; k2++) {
                    int64_t i0 = o0 * t.s[0] - t.p[0] + k0 * t.d[0];
                    int64_t i1 = o1 * t.s[1] - t.p[1] + k1 * t.d[1];
                    int64_t i2 = o2 * t.s[2] - t.p[2] + k2 * t.d[2];
                    if (i0 < 0 || i0 >= t.in[0] || i1 < 0 || i1 >= t.in[1] || i2 < 0 ||
                        i2 >= t.in[2])
                        continue;
                    s += (double)A[(n * p.cin + c) * t.in_vol + (i0 * t.in[1] + i1) * t.in[2] + i2] *
                         (double)B[(k * p.cg + cl) * t.k_vol + (k0 * t.k[1] + k1) * t.k[2] + k2];
                }
    }
    return s;
}

/* dx[n,c,i] = sum over the group's k and kk of dy[n,k,o] w[k,c',kk] (A dy, B w). */
template <typename T>
static __device__ double conv_dx(const conv_cu_args &p, const T *A, const T *B, int64_t g)
{
    const tfc_conv_3d &t = p.t;
    int64_t i = g % t.in_vol, c = g / t.in_vol % p.cin, n = g / t.in_vol / p.cin;
    int64_t i2 = i % t.in[2], i1 = i / t.in[2] % t.in[1], i0 = i / t.in[2] / t.in[1];
    int64_t cl = c % p.cg;
    double s = 0;
    for (int64_t kl = 0; kl < p.kg; kl++) {
        int64_t k = c / p.cg * p.kg + kl;
        for (int64_t k0 = 0; k0 < t.k[0]; k0++)
            for (int64_t k1 = 0; k1 < t.k[1]; k1++)
                for (int64_t k2 = 0; k2 < t.k[2]; k2++) {
                    int64_t t0 = i0 + t.p[0] - k0 * t.d[0], t1 = i1 + t.p[1] - k1 * t.d[1];
                    int64_t t2 = i2 + t.p[2] - k2 * t.d[2];
                    if (t0 < 0 || t1 < 0 || t2 < 0 || t0 % t.s[0] || t1 % t.s[1] || t2 % t.s[2])
                        continue;
                    int64_t o0 = t0 / t.s[0], o1 = t1 / t.s[1], o2 = t2 / t.s[2];
                    if (o0 >= t.o[0] || o1 >= t.o[1] || o2 >= t.o[2]) continue;
                    s += (double)A[(n * p.cout + k) * t.o_vol + (o0 * t.o[1] + o1) * t.o[2] + o2] *
                         (double)B[(k * p.cg + cl) * t.k_vol + (k0 * t.k[1] + k1) * t.k[2] + k2];
                }
    }
    return s;
}

/* dw[k,c',kk] = sum over images and outputs of x[n,c,i] dy[n,k,o] (A x, B dy). */
template <typename T>
static __device__ double conv_dw(const conv_cu_args &p, const T *A, const T *B, int64_t g)
{
    const tfc_conv_3d &t = p.t;
    int64_t kk = g % t.k_vol, cl = g / t.k_vol % p.cg, k = g / t.k_vol / p.cg;
    int64_t c = k / p.kg * p.cg + cl;
    int64_t k2 = kk % t.k[2], k1 = kk / t.k[2] % t.k[1], k0 = kk / t.k[2] / t.k[1];
    double s = 0;
    for (int64_t n = 0; n < p.batch; n++)
        for (int64_t o0 = 0; o0 < t.o[0]; o0++)
            for (int64_t o1 = 0; o1 < t.o[1]; o1++)
                for (int64_t o2 = 0; o2 < t.o[2]; o2++) {
                    int64_t i0 = o0 * t.s[0] - t.p[0] + k0 * t.d[0];
                    int64_t i1 = o1 * t.s[1] - t.p[1] + k1 * t.d[1];
                    int64_t i2 = o2 * t.s[2] - t.p[2] + k2 * t.d[2];
                    if (i0 < 0 || i0 >= t.in[0] || i1 < 0 || i1 >= t.in[1] || i2 < 0 ||
                        i2 >= t.in[2])
                        continue;
                    s += (double)A[(n * p.cin + c) * t.in_vol + (i0 * t.in[1] + i1) * t.in[2] + i2] *
                         (double)B[(n * p.cout + k) * t.o_vol + (o0 * t.o[1] + o1) * t.o[2] + o2];
                }
    return s;
}

template <typename T>
static __global__ void conv_kernel(conv_cu_args p, const T *A, const T *B, T *Y)
{
    TFC_CU_LOOP(g, p.total)
    {
        double s = p.kind == 0 ? conv_y(p, A, B, g) : p.kind == 1 ? conv_dx(p, A, B, g)
                                                                  : conv_dw(p, A, B, g);
        Y[g] = (T)s;
    }
}

/* TFC_CONV_BACKEND on CUDA workers: auto and dnnl (the vendor library) run cuDNN first, im2col
 * (the library's own kernels) only the direct kernels. 1 when cuDNN ran the task (or a failure
 * is recorded); 0 when the own kernel must run it. Read per task, as codelets/conv.c does. */
static int conv_ran_cudnn(void *buffers[], const struct tfc_kargs *a)
{
    enum { BACKEND_AUTO, BACKEND_DNNL, BACKEND_IM2COL }; /* the words' order in src/env.c */
    char msg[TFC_MSG_LEN];
    int backend;
    if (tfc_env_choice("TFC_CONV_BACKEND", &backend, msg)) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "%s", msg);
        return 1;
    }
    return backend != BACKEND_IM2COL && tfc_conv_cudnn(buffers, a) == TFC_CONV_CUDNN_RAN;
}

extern "C" void tfc_conv_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    if (conv_ran_cudnn(buffers, a)) return;
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    void *Y = tfc_kout(buffers, a, 0);
    if (!Y) return;
    cudaStream_t s = starpu_cuda_get_local_stream();
    const void *A = tfc_kin(buffers, a, 0), *B = tfc_kin(buffers, a, 1);
    if (!A || !B) { /* an empty operand: nothing to sum */
        tfc_cu_check(a, cudaMemsetAsync(Y, 0, (size_t)o->numel * tfc_kdtype_size(o->dtype), s),
                     "conv: cudaMemsetAsync");
        return;
    }
    struct tfc_conv_geom g;
    char msg[200];
    if (tfc_conv_geom_of(a, &g, msg, sizeof msg)) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "convolution geometry: %s", msg);
        return;
    }
    conv_cu_args p;
    p.kind = a->kind == TFC_K_CONV ? 0 : a->kind == TFC_K_CONV_BP_INPUT ? 1 : 2;
    p.total = o->numel;
    p.batch = g.batch, p.cin = g.in_ch, p.cout = g.out_ch;
    p.cg = g.in_ch / g.groups, p.kg = g.out_ch / g.groups;
    tfc_conv_geom_3d(&g, &p.t);
    if (o->dtype == TFC_FLOAT32)
        conv_kernel<float><<<tfc_cu_blocks(p.total), TFC_CU_THREADS, 0, s>>>(
            p, (const float *)A, (const float *)B, (float *)Y);
    else
        conv_kernel<double><<<tfc_cu_blocks(p.total), TFC_CU_THREADS, 0, s>>>(
            p, (const double *)A, (const double *)B, (double *)Y);
    tfc_cu_check_launch(a, "conv");
}
