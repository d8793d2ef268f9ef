/* ew_math.h: the element-wise maths for the C and CUDA kernels: ew_scalar.h's formulas for
 * float (tfc_ew_<name>_f32 in C) and double (_f64), overloaded by type in CUDA (tfc_ew_<name>),
 * the integer forms of the kinds that take integers, and the class of each kind. The OpenCL
 * programs get the same formulas from the same text (ew_math_cl.c). */
#ifndef TFC_EW_MATH_H
#define TFC_EW_MATH_H

#include <stdint.h>
#include "kinds.h"

#ifdef __CUDACC__
#include <math.h>
#define TFC_EW_FN static __device__ __forceinline__
#define TFC_EW_HD static __host__ __device__ __forceinline__
#define EW(name) tfc_ew_##name
#define EWS(f) f
#define T float
#include "ew_scalar.h"
#undef T
#define T double
#include "ew_scalar.h"
#undef T
#undef EW
#undef EWS
#else
#include <tgmath.h>
#define TFC_EW_FN static inline
#define TFC_EW_HD static inline
#include "ew_vexpf.h"
#define EW(name) tfc_ew_##name##_f32
#define EWS(f) f##_f32
#define T float
#define TFC_EW_CPU_F32 1
#include "ew_scalar.h"
#undef TFC_EW_CPU_F32
#undef T
#undef EW
#undef EWS
#define EW(name) tfc_ew_##name##_f64
#define EWS(f) f##_f64
#define T double
#include "ew_scalar.h"
#undef T
#undef EW
#undef EWS
#endif

/* ---- integer forms (int64 arithmetic, wrapping as two's complement; stored back at the
 * operand's width by the kernel) --------------------------------------------------------- */

TFC_EW_FN int64_t tfc_ew_wrap_neg(int64_t v) { return (int64_t)(0 - (uint64_t)v); }

/* A bound inside int64's range (so converting it is defined); NaN stays NaN (no bound). */
TFC_EW_FN double tfc_ew_int_bound(double b)
{
    return b < -0x1p63 ? -0x1p63 : b > 0x1.fffffffffffffp62 ? 0x1.fffffffffffffp62 : b;
}

/* The kinds of TFC_EW_UNARY_ANY on integers; clip's bounds round inwards (ceil of the min,
 * floor of the max) so results stay in [min, max]; floor, ceil and round are the identity. */
TFC_EW_FN int64_t tfc_ew_unary_i64(int kind, int64_t v, double p0, double p1)
{
    switch (kind) {
    case TFC_K_NEG: return tfc_ew_wrap_neg(v);
    case TFC_K_ABS: return v < 0 ? tfc_ew_wrap_neg(v) : v;
    case TFC_K_SQUARE: return (int64_t)((uint64_t)v * (uint64_t)v);
    case TFC_K_SIGN: return v > 0 ? 1 : v < 0 ? -1 : 0;
    case TFC_K_CLIP: {
        double lo = tfc_ew_int_bound(ceil(p0)), hi = tfc_ew_int_bound(floor(p1));
        int64_t r = (double)v < lo ? (int64_t)lo : v;
        return (double)r > hi ? (int64_t)hi : r;
    }
    default: return v; /* floor, ceil, round */
    }
}

/* The arithmetic kinds on integers; division by zero gives 0 (the kernel reports it). */
TFC_EW_FN int64_t tfc_ew_binary_i64(int kind, int64_t x, int64_t y)
{
    switch (kind) {
    case TFC_K_ADD: return (int64_t)((uint64_t)x + (uint64_t)y);
    case TFC_K_SUB: return (int64_t)((uint64_t)x - (uint64_t)y);
    case TFC_K_MUL: return (int64_t)((uint64_t)x * (uint64_t)y);
    case TFC_K_MAXIMUM: return x > y ? x : y;
    case TFC_K_MINIMUM: return x < y ? x : y;
    case TFC_K_DIV: return y == 0 ? 0 : y == -1 ? tfc_ew_wrap_neg(x) : x / y;
    default: return 0; /* relu_grad on integers */
    }
}

TFC_EW_FN int tfc_ew_compare_i64(int kind, int64_t x, int64_t y)
{
    switch (kind) {
    case TFC_K_EQUAL: return x == y;
    case TFC_K_NOT_EQUAL: return x != y;
    case TFC_K_LESS: return x < y;
    case TFC_K_GREATER: return x > y;
    case TFC_K_LOGICAL_AND: return x != 0 && y != 0;
    default: return x != 0 || y != 0;
    }
}

/* ---- classes ------------------------------------------------------------------------------ */

enum tfc_ew_class {
    TFC_EW_OTHER = 0,
    TFC_EW_CLASS_UNARY_ANY,   /* floats and integers, same dtype out */
    TFC_EW_CLASS_UNARY_FLOAT, /* floats, same dtype out */
    TFC_EW_CLASS_PREDICATE,   /* floats in, bool out */
    TFC_EW_CLASS_BINARY,      /* arithmetic, same dtype out */
    TFC_EW_CLASS_COMPARE,     /* bool out */
};

#define TFC_EW_CASE_CLASS_(K, name) case TFC_K_##K:
TFC_EW_HD int tfc_ew_class(int kind)
{
    switch (kind) {
    TFC_EW_UNARY_ANY(TFC_EW_CASE_CLASS_) return TFC_EW_CLASS_UNARY_ANY;
    TFC_EW_UNARY_FLOAT(TFC_EW_CASE_CLASS_) return TFC_EW_CLASS_UNARY_FLOAT;
    TFC_EW_PREDICATE(TFC_EW_CASE_CLASS_) return TFC_EW_CLASS_PREDICATE;
    TFC_EW_BINARY(TFC_EW_CASE_CLASS_) return TFC_EW_CLASS_BINARY;
    TFC_EW_COMPARE(TFC_EW_CASE_CLASS_) return TFC_EW_CLASS_COMPARE;
    default: return TFC_EW_OTHER;
    }
}
#undef TFC_EW_CASE_CLASS_

/* Unary kinds whose result has the operand's dtype (what fusion and the unary loops take). */
TFC_EW_HD int tfc_ew_is_unary(int kind)
{
    int c = tfc_ew_class(kind);
    return c == TFC_EW_CLASS_UNARY_ANY || c == TFC_EW_CLASS_UNARY_FLOAT;
}

TFC_EW_HD int tfc_ew_is_binary(int kind) { return tfc_ew_class(kind) == TFC_EW_CLASS_BINARY; }

#endif
