/* pool_geom.h: the geometry of a pooling window over the last 1-3 dims of an [N, C, spatial...]
 * tensor, from the pool attributes (codelets/op_attrs.h POOL_*) and the input's dims. Shared by
 * shape inference (graph/ops_pool.c) and the kernels of every device, so the output size, the
 * window bounds and the average's divisor are computed in one place. Plain C, no includes but
 * kargs.h. Output sizes and divisors follow PyTorch (ceil_mode drops a last window that would
 * start in the right padding; count_include_pad counts the padding but not the ceil overhang). */
#ifndef TFC_POOL_GEOM_H
#define TFC_POOL_GEOM_H

#include "kargs.h"
#include "op_attrs.h"

/* Always 3 spatial dims: 1-D and 2-D pooling are padded in front with dims of size 1. */
struct tfc_pool_geom {
    int nsp;                   /* spatial dims the tensor has, 1..3 */
    int64_t planes;            /* N * C (-1 when unknown) */
    int64_t in[3], out[3];     /* spatial sizes, elements (-1 when unknown) */
    int64_t k[3], s[3], d[3];  /* kernel, stride, dilation */
    int64_t pb[3], pe[3];      /* padding before and after */
    int ceil_mode, include_pad;
};

/* An INTS attribute as nsp values: empty gives `def` for each dim. Returns 0, or -1 when the
 * count is neither 0 nor nsp. */
static inline int tfc_pool_ints(const struct tfc_kattr *a, int nsp, int64_t def, int64_t *v)
{
    if (a->n != 0 && a->n != nsp) return -1;
    for (int i = 0; i < nsp; i++) v[i] = a->n ? a->v[i] : def;
    return 0;
}

/* Output size of one dim (in >= 0). */
static inline int64_t tfc_pool_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                                       int64_t pe, int ceil_mode)
{
    int64_t span = in + pb + pe - d * (k - 1) - 1; /* room for window starts */
    if (span < 0) return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pb) o--; /* the last window must start inside */
    return o;
}

/* Fills g from the attributes and the input's rank and dims. Returns 0, or the number (1..6) of
 * the first thing wrong, for the caller's message: 1 rank, 2 a list's length, 3 a kernel,
 * stride or dilation < 1, 4 a negative pad, 5 a pad larger than half the dilated kernel. */
static inline int tfc_pool_geom_make(const struct tfc_kattr *attrs, int rank,
                                     const int64_t *dims, struct tfc_pool_geom *g)
{
    int nsp = rank - 2, off;
    if (nsp < 1 || nsp > 3) return 1;
    g->nsp = nsp;
    off = 3 - nsp;
    for (int i = 0; i < 3; i++) {
        g->in[i] = g->out[i] = g->k[i] = g->s[i] = g->d[i] = 1;
        g->pb[i] = g->pe[i] = 0;
    }
    if (attrs[POOL_KERNEL].n != nsp) return 2;
    if (tfc_pool_ints(&attrs[POOL_KERNEL], nsp, 1, g->k + off) ||
        tfc_pool_ints(&attrs[POOL_STRIDES], nsp, 1, g->s + off) ||
        tfc_pool_ints(&attrs[POOL_DILATIONS], nsp, 1, g->d + off) ||
        tfc_pool_ints(&attrs[POOL_PADS_BEGIN], nsp, 0, g->pb + off) ||
        tfc_pool_ints(&attrs[POOL_PADS_END], nsp, 0, g->pe + off))
        return 2;
    g->ceil_mode = attrs[POOL_CEIL_MODE].i != 0;
    g->include_pad = attrs[POOL_COUNT_INCLUDE_PAD].i != 0;
    g->planes = dims[0] < 0 || dims[1] < 0 ? -1 : dims[0] * dims[1];
    for (int i = 0; i < 3; i++) {
        if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1) return 3;
        if (g->pb[i] < 0 || g->pe[i] < 0) return 4;
        int64_t eff = g->d[i] * (g->k[i] - 1) + 1;
        if (2 * g->pb[i] > eff || 2 * g->pe[i] > eff) return 5;
    }
    for (int i = 0; i < nsp; i++) {
        int j = off + i;
        g->in[j] = dims[2 + i];
        g->out[j] = dims[2 + i] < 0 ? -1 : tfc_pool_out_dim(g->in[j], g->k[j], g->s[j], g->d[j],
                                                            g->pb[j], g->pe[j], g->ceil_mode);
    }
    return 0;
}

static inline int64_t tfc_pool_in_size(const struct tfc_pool_geom *g)
{
    return g->in[0] * g->in[1] * g->in[2];
}

static inline int64_t tfc_pool_out_size(const struct tfc_pool_geom *g)
{
    return g->out[0] * g->out[1] * g->out[2];
}

/* Window of output position o along dim i: first tap at lo (may be < 0), end (exclusive,
 * for the average's divisor with padding) as PyTorch clips it to in + pe. */
static inline int64_t tfc_pool_win_lo(const struct tfc_pool_geom *g, int i, int64_t o)
{
    return o * g->s[i] - g->pb[i];
}

/* The average's divisor for the window starting at lo[3] (dilation 1). */
static inline int64_t tfc_pool_divisor(const struct tfc_pool_geom *g, const int64_t *lo)
{
    int64_t n = 1;
    for (int i = 0; i < 3; i++) {
        int64_t a = lo[i], b = lo[i] + g->k[i];
        if (g->include_pad) {
            if (b > g->in[i] + g->pe[i]) b = g->in[i] + g->pe[i];
        } else {
            if (a < 0) a = 0;
            if (b > g->in[i]) b = g->in[i];
        }
        n *= b > a ? b - a : 0;
    }
    return n;
}

#endif
