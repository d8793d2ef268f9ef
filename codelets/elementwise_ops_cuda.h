/* elementwise_ops_cuda.h: the scalar math of the element-wise family on the device, shared by
 * the element-wise kernels (elementwise_cuda.cu) and the fused kernel (fused_cuda.cu) so that a
 * fused chain computes exactly what its ops compute one by one. Mirrors elementwise.c. */
#ifndef TFC_ELEMENTWISE_OPS_CUDA_H
#define TFC_ELEMENTWISE_OPS_CUDA_H

#include "kargs.h"

static __device__ __forceinline__ float tfc_cu_unary(int kind, float x)
{
    switch (kind) {
    case TFC_K_NEG: return -x;
    case TFC_K_ABS: return fabsf(x);
    case TFC_K_SQUARE: return x * x;
    case TFC_K_SQRT: return sqrtf(x);
    case TFC_K_RSQRT: return 1.0f / sqrtf(x);
    case TFC_K_EXP: return expf(x);
    case TFC_K_LOG: return logf(x);
    case TFC_K_RELU: return x > 0 ? x : 0;
    case TFC_K_SIGMOID: return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case TFC_K_TANH: return tanhf(x);
    case TFC_K_SOFTPLUS: return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
    default: return x;
    }
}

static __device__ __forceinline__ double tfc_cu_unary(int kind, double x)
{
    switch (kind) {
    case TFC_K_NEG: return -x;
    case TFC_K_ABS: return fabs(x);
    case TFC_K_SQUARE: return x * x;
    case TFC_K_SQRT: return sqrt(x);
    case TFC_K_RSQRT: return 1.0 / sqrt(x);
    case TFC_K_EXP: return exp(x);
    case TFC_K_LOG: return log(x);
    case TFC_K_RELU: return x > 0 ? x : 0;
    case TFC_K_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case TFC_K_TANH: return tanh(x);
    case TFC_K_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    default: return x;
    }
}

static __device__ __forceinline__ float tfc_cu_binary(int kind, float x, float y)
{
    switch (kind) {
    case TFC_K_ADD: return x + y;
    case TFC_K_SUB: return x - y;
    case TFC_K_MUL: return x * y;
    case TFC_K_DIV: return x / y;
    case TFC_K_MAXIMUM: return (x > y || x != x) ? x : y; /* NaN propagates */
    case TFC_K_MINIMUM: return (x < y || x != x) ? x : y;
    case TFC_K_RELU_GRAD: return y > 0 ? x : 0.0f; /* x is dy, y the relu input */
    default: return powf(x, y);
    }
}

static __device__ __forceinline__ double tfc_cu_binary(int kind, double x, double y)
{
    switch (kind) {
    case TFC_K_ADD: return x + y;
    case TFC_K_SUB: return x - y;
    case TFC_K_MUL: return x * y;
    case TFC_K_DIV: return x / y;
    case TFC_K_MAXIMUM: return (x > y || x != x) ? x : y;
    case TFC_K_MINIMUM: return (x < y || x != x) ? x : y;
    case TFC_K_RELU_GRAD: return y > 0 ? x : 0.0;
    default: return pow(x, y);
    }
}

/* The binary kinds of tfc_cu_binary (the rest are unary). */
static __host__ __device__ __forceinline__ int tfc_cu_is_binary(int kind)
{
    return (kind >= TFC_K_ADD && kind <= TFC_K_POW) || kind == TFC_K_RELU_GRAD;
}

#endif
