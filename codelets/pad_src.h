/* pad_src.h: where an element of a padded dim comes from, shared by pad's and pad_grad's
 * kernels (CPU now; the other devices' too). Plain C, no includes. */
#ifndef TFC_PAD_SRC_H
#define TFC_PAD_SRC_H

/* The source index in [0, n) of output index o of a dim padded by `begin` in front, or -1 when
 * the element is the constant (mode 0: constant, 1: reflect, 2: edge, as enum tfc_pad_mode).
 * Reflect needs every pad < n, edge n >= 1 (inference checks both). */
static inline long long tfc_pad_src(long long o, long long begin, long long n, int mode)
{
    long long i = o - begin;
    if (i >= 0 && i < n) return i;
    if (mode == 1) return i < 0 ? -i : 2 * (n - 1) - i;
    if (mode == 2) return i < 0 ? 0 : n - 1;
    return -1;
}

#endif
