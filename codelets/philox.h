/* philox.h: Philox4x32-10, the counter-based generator of Salmon et al. 2011 ("Parallel random
 * numbers: as easy as 1, 2, 3"; Random123, cuRAND's and PyTorch's Philox), and dropout's keep
 * decision built on it: element i's bits are a pure function of (seed, step, i), so which units
 * drop never depends on the device, the worker, the tiling or the order of the work. One text
 * serves C, CUDA C++ and OpenCL C: TFC_PHILOX_CODE is expanded here for C and CUDA and
 * stringified into TFC_PHILOX_CL_SOURCE for the OpenCL programs. */
#ifndef TFC_PHILOX_H
#define TFC_PHILOX_H

#ifndef __OPENCL_VERSION__
#include <math.h>
#include <stdint.h>
#define TFC_U32 uint32_t
#define TFC_U64 uint64_t
#ifdef __CUDACC__
#define TFC_PHILOX_FN static inline __host__ __device__
#else
#define TFC_PHILOX_FN static inline
#endif
#endif

/* Why Philox: it is the published counter-based generator that cuRAND and PyTorch use (easy to
 * check against), it needs only 32x32->64 multiplies (every device has them), and a 128-bit
 * counter holds (element block, step) with no state to save in a checkpoint.
 *
 * The stream: key = the op's seed (64 bits), counter = (i / 4 as 64 bits, step as 64 bits);
 * element i takes word i % 4 of its block. It is kept when that word is >= the threshold
 * ceil(rate * 2^32) (tfc_dropout_threshold), so P(drop) = rate to within 2^-32. */
#define TFC_PHILOX_CODE(M) M(                                                                  \
/* One Philox-4x32 block, 10 rounds, in place: c is the counter, (k0, k1) the key. */          \
TFC_PHILOX_FN void tfc_philox4x32_10(TFC_U32 *c, TFC_U32 k0, TFC_U32 k1)                       \
{                                                                                              \
    for (int r = 0; r < 10; r++) {                                                             \
        TFC_U64 p0 = (TFC_U64)0xD2511F53u * c[0], p1 = (TFC_U64)0xCD9E8D57u * c[2];            \
        TFC_U32 c0 = (TFC_U32)(p1 >> 32) ^ c[1] ^ k0, c2 = (TFC_U32)(p0 >> 32) ^ c[3] ^ k1;    \
        c[0] = c0; c[1] = (TFC_U32)p1; c[2] = c2; c[3] = (TFC_U32)p0;                          \
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;                                                  \
    }                                                                                          \
}                                                                                              \
/* The four words of block b (elements 4b .. 4b+3) of the stream (seed, step). */              \
TFC_PHILOX_FN void tfc_philox_block(TFC_U64 seed, TFC_U64 step, TFC_U64 b, TFC_U32 *w)         \
{                                                                                              \
    w[0] = (TFC_U32)b; w[1] = (TFC_U32)(b >> 32);                                              \
    w[2] = (TFC_U32)step; w[3] = (TFC_U32)(step >> 32);                                        \
    tfc_philox4x32_10(w, (TFC_U32)seed, (TFC_U32)(seed >> 32));                                \
}                                                                                              \
/* Dropout keeps element i of the stream (seed, step): 1 or 0. */                               \
TFC_PHILOX_FN int tfc_dropout_keep(TFC_U64 seed, TFC_U64 step, TFC_U64 i, TFC_U32 threshold)   \
{                                                                                              \
    TFC_U32 w[4];                                                                              \
    tfc_philox_block(seed, step, i >> 2, w);                                                   \
    return w[i & 3] >= threshold;                                                              \
}                                                                                              \
)

#define TFC_PHILOX_EXPAND_(...) __VA_ARGS__
#define TFC_PHILOX_STRING_(...) #__VA_ARGS__

#ifndef __OPENCL_VERSION__
TFC_PHILOX_CODE(TFC_PHILOX_EXPAND_)

/* The same functions as OpenCL C source (a string literal, with the type names it needs),
 * guarded so that a program may hold it in each of its dtype instances. */
#define TFC_PHILOX_CL_SOURCE                                                                   \
    "#ifndef TFC_PHILOX_CL\n#define TFC_PHILOX_CL\n#define TFC_U32 uint\n"                      \
    "#define TFC_U64 ulong\n#define TFC_PHILOX_FN static inline\n"                              \
    TFC_PHILOX_CODE(TFC_PHILOX_STRING_) "\n#endif\n"

/* The keep threshold of a drop probability in [0, 1): ceil(rate * 2^32) (exact: a power-of-two
 * product), so that a word w drops exactly when w * 2^-32 < rate. Computed on the host once,
 * and every device compares against the same integer. */
static inline uint32_t tfc_dropout_threshold(double rate)
{
    double t = ceil(rate * 4294967296.0);
    return t <= 0 ? 0u : t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
}
#endif

#endif
