/* ew_vexpf.h: the CPU's float32 sigmoid and tanh, written so that gcc -O2 vectorizes the loops
 * that call them (libm's expf is one call per element, and at -O2 with -ftrapping-math a float
 * ?: stays a branch: no loop with either vectorizes). So every choice here is made on the
 * bits, with integer masks, and exp is Cephes' expf inline: n = round(a log2 e) by the
 * 1.5 * 2^23 trick (no rint, which SSE2 lacks), r = a - n ln 2 in two parts, a degree-6
 * polynomial, times 2^n built in the exponent bits: relative error about 1e-7. The formulas
 * are ew_scalar.h's (tfc_ew_sigmoid_f32, tfc_ew_tanh_f32 call these under TFC_EW_CPU_F32,
 * which ew_math.h defines for the C float32 formulas only; CUDA, OpenCL and float64 keep
 * libm's). */
#ifndef TFC_EW_VEXPF_H
#define TFC_EW_VEXPF_H

#include <stdint.h>

/* The loops that call these formulas, built once per vector width (AVX-512, AVX2, the
 * baseline SSE2) and picked at load time by the CPU (gcc's target_clones, an ifunc): the
 * build's flags stay portable. The targets carry no FMA, so every width gives the same bits.
 * Left out under clang (the fuzz build), the sanitizers and C libraries without ifuncs
 * (glibc only), which then run the baseline. vect-cost-model=dynamic: -O2's "very cheap" model
 * vectorizes only loops whose trip count is a known multiple of the vector width, so these
 * loops of any length stayed scalar in every clone (softmax's exps, unary_f32: no ymm). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* gcc's avx512f target implies FMA and contracts a * b + c into one rounding: fp-contract=off
 * keeps the separate multiply and add of the baseline (objdump showed vfmadd in the clones). */
#define TFC_EW_VECTOR_CLONES                                                                    \
    __attribute__((target_clones("avx512f", "avx2", "default"),                                 \
                   optimize("fp-contract=off", "vect-cost-model=dynamic")))
#else
#define TFC_EW_VECTOR_CLONES
#endif

static inline int32_t tfc_vf_bits(float f)
{
    union { float f; int32_t i; } u = { f };
    return u.i;
}

static inline float tfc_vf_float(int32_t i)
{
    union { int32_t i; float f; } u = { i };
    return u.f;
}

/* m all ones: a, m zero: b */
static inline float tfc_vf_pick(int32_t m, float a, float b)
{
    return tfc_vf_float((tfc_vf_bits(a) & m) | (tfc_vf_bits(b) & ~m));
}

/* exp(-a) for a >= 0 (not NaN); 0 from a = 87 on (expf nears the subnormals there) */
static inline float tfc_vexpf_neg(float a)
{
    int32_t big = -(int32_t)(tfc_vf_bits(a) > 0x42ae0000); /* a > 87.0f */
    float x = -tfc_vf_pick(big, 87.0f, a);
    float fn = x * 1.44269504088896341f + 12582912.0f;
    fn -= 12582912.0f;
    float r = x - fn * 0.693359375f;
    r -= fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float v = p * tfc_vf_float(((int32_t)fn + 127) << 23);
    return tfc_vf_pick(big, 0.0f, v);
}

/* NaN in, NaN out: m all ones where |x| is a NaN */
static inline int32_t tfc_vf_nan_mask(float x)
{
    return -(int32_t)((tfc_vf_bits(x) & 0x7fffffff) > 0x7f800000);
}

/* 1 / (1 + e), e = exp(-|x|) <= 1 (never overflows); times e for x < 0 */
static inline float tfc_vsigmoidf(float x)
{
    float a = tfc_vf_float(tfc_vf_bits(x) & 0x7fffffff);
    float e = tfc_vexpf_neg(a), r = 1.0f / (1.0f + e);
    float s = tfc_vf_pick(tfc_vf_bits(x) >> 31, e * r, r);
    return tfc_vf_pick(tfc_vf_nan_mask(x), x, s);
}

/* Cephes' tanhf on |x|: an odd polynomial below 0.625 (where 1 - e would cancel), else
 * (1 - e) / (1 + e), e = exp(-2|x|); then x's sign (so -0 stays -0) */
static inline float tfc_vtanhf(float x)
{
    int32_t sign = tfc_vf_bits(x) & (int32_t)0x80000000;
    float a = tfc_vf_float(tfc_vf_bits(x) & 0x7fffffff), z = a * a;
    float q = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                1.33314422036e-1f) * z - 3.33332819422e-1f) * z * a + a;
    float e = tfc_vexpf_neg(2.0f * a), w = (1.0f - e) / (1.0f + e);
    int32_t small = -(int32_t)(tfc_vf_bits(a) < 0x3f200000); /* a < 0.625f */
    float t = tfc_vf_float(tfc_vf_bits(tfc_vf_pick(small, q, w)) | sign);
    return tfc_vf_pick(tfc_vf_nan_mask(x), x, t);
}

#endif
