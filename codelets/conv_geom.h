/* conv_geom.h: the geometry of an N-D convolution (1 to 3 spatial dims, NCHW/NCDHW like ONNX
 * and PyTorch) resolved from the operands' shapes and the op's attributes: strides, explicit
 * pads, auto_pad (resolved here, as ONNX's Conv resolves it at shape inference), dilations and
 * groups. One definition, read by shape inference (graph/ops_conv.c) and the kernels. */
#ifndef TFC_CONV_GEOM_H
#define TFC_CONV_GEOM_H

#include <stdio.h>
#include "kargs.h"
#include "op_attrs.h"

#define TFC_CONV_MAX_SPATIAL 3
/* The largest extent, pad, stride or dilation: products of two stay far inside int64 (shapes
 * and stored graphs may carry any int64). */
#define TFC_CONV_MAX_EXTENT 2147483647LL

struct tfc_conv_geom {
    int nd;                                   /* spatial dims, 1..3 */
    int64_t batch, in_ch, out_ch, groups;     /* N, C, K, G (batch may be -1 at build time) */
    int64_t in[TFC_CONV_MAX_SPATIAL];         /* input extent per spatial dim */
    int64_t kern[TFC_CONV_MAX_SPATIAL];       /* kernel extent */
    int64_t out[TFC_CONV_MAX_SPATIAL];        /* output extent */
    int64_t stride[TFC_CONV_MAX_SPATIAL], dil[TFC_CONV_MAX_SPATIAL];
    int64_t pad_lo[TFC_CONV_MAX_SPATIAL], pad_hi[TFC_CONV_MAX_SPATIAL];
};

/* An INTS attribute of n values, or every value `def` when it is empty; -1 (with a message)
 * when it has another count or a value below `min`. */
static inline int tfc_conv_ints_(const struct tfc_kattr *at, const char *name, int n, int64_t def,
                                 int64_t min, int64_t *out, char *msg, size_t len)
{
    if (at->n != 0 && at->n != n) {
        snprintf(msg, len, "attribute %s has %d values; this convolution needs %d (or none "
                 "for the default %lld)", name, (int)at->n, n, (long long)def);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = at->n ? at->v[i] : def;
        if (out[i] < min || out[i] > TFC_CONV_MAX_EXTENT) {
            snprintf(msg, len, "attribute %s[%d] is %lld; it must be in [%lld, %lld]", name, i,
                     (long long)out[i], (long long)min, (long long)TFC_CONV_MAX_EXTENT);
            return -1;
        }
    }
    return 0;
}

/* auto_pad per ONNX: SAME_* gives out = ceil(in / stride) and splits the total padding, the odd
 * element at the end (SAME_UPPER) or at the beginning (SAME_LOWER); VALID pads nothing. */
static inline void tfc_conv_auto_pad_(struct tfc_conv_geom *g, int mode, int d)
{
    if (mode == TFC_CONV_VALID) {
        g->pad_lo[d] = g->pad_hi[d] = 0;
        return;
    }
    int64_t out = (g->in[d] + g->stride[d] - 1) / g->stride[d];
    int64_t total = (out - 1) * g->stride[d] + (g->kern[d] - 1) * g->dil[d] + 1 - g->in[d];
    if (total < 0) total = 0;
    g->pad_lo[d] = mode == TFC_CONV_SAME_UPPER ? total / 2 : total - total / 2;
    g->pad_hi[d] = total - g->pad_lo[d];
}

/* Fills g from x's dims [N, C, spatial...] and w's dims [K, C/groups, kernel...] (N and K may
 * be -1, unknown, at build time); returns 0, or -1 with a message naming the dimension or
 * attribute at fault. */
static inline int tfc_conv_geom_make(const int64_t *x, int xrank, const int64_t *w, int wrank,
                                     const struct tfc_kattr *attrs, struct tfc_conv_geom *g,
                                     char *msg, size_t len)
{
    int nd = xrank - 2;
    if (nd < 1 || nd > TFC_CONV_MAX_SPATIAL || wrank != xrank) {
        snprintf(msg, len, "input has rank %d and filter rank %d; both must be 3, 4 or 5 "
                 "([N, C, spatial...] and [K, C/groups, kernel...])", xrank, wrank);
        return -1;
    }
    g->nd = nd;
    g->batch = x[0], g->in_ch = x[1], g->out_ch = w[0], g->groups = attrs[CONV_GROUPS].i;
    int mode = (int)attrs[CONV_AUTO_PAD].i;
    if (mode < TFC_CONV_NOTSET || mode > TFC_CONV_VALID) {
        snprintf(msg, len, "auto_pad is %d; it must be 0 (NOTSET), 1 (SAME_UPPER), "
                 "2 (SAME_LOWER) or 3 (VALID)", mode);
        return -1;
    }
    if (mode != TFC_CONV_NOTSET && attrs[CONV_PADS].n) {
        snprintf(msg, len, "attribute pads is given with auto_pad=%d; explicit pads need "
                 "auto_pad=0 (NOTSET)", mode);
        return -1;
    }
    int64_t pads[2 * TFC_CONV_MAX_SPATIAL];
    if (tfc_conv_ints_(&attrs[CONV_STRIDES], "strides", nd, 1, 1, g->stride, msg, len) ||
        tfc_conv_ints_(&attrs[CONV_DILATIONS], "dilations", nd, 1, 1, g->dil, msg, len) ||
        tfc_conv_ints_(&attrs[CONV_PADS], "pads", 2 * nd, 0, 0, pads, msg, len))
        return -1;
    if (g->groups < 1) {
        snprintf(msg, len, "groups is %lld; it must be >= 1", (long long)g->groups);
        return -1;
    }
    if (g->in_ch % g->groups || (g->out_ch >= 0 && g->out_ch % g->groups)) {
        snprintf(msg, len, "input channels %lld and output channels %lld must both be "
                 "divisible by groups %lld", (long long)g->in_ch, (long long)g->out_ch,
                 (long long)g->groups);
        return -1;
    }
    if (w[1] != g->in_ch / g->groups) {
        snprintf(msg, len, "filter dim 1 is %lld; with %lld input channels and groups %lld it "
                 "must be %lld", (long long)w[1], (long long)g->in_ch, (long long)g->groups,
                 (long long)(g->in_ch / g->groups));
        return -1;
    }
    for (int d = 0; d < nd; d++) {
        g->in[d] = x[2 + d], g->kern[d] = w[2 + d];
        g->pad_lo[d] = pads[d], g->pad_hi[d] = pads[nd + d];
        if (g->in[d] > TFC_CONV_MAX_EXTENT || g->kern[d] > TFC_CONV_MAX_EXTENT) {
            snprintf(msg, len, "spatial dim %d: input %lld or kernel %lld is above %lld", d,
                     (long long)g->in[d], (long long)g->kern[d], (long long)TFC_CONV_MAX_EXTENT);
            return -1;
        }
        if (mode != TFC_CONV_NOTSET) tfc_conv_auto_pad_(g, mode, d);
        int64_t span = (g->kern[d] - 1) * g->dil[d] + 1;
        int64_t padded = g->in[d] + g->pad_lo[d] + g->pad_hi[d];
        if (g->kern[d] < 1 || padded < span) {
            snprintf(msg, len, "spatial dim %d: the dilated kernel spans %lld but the padded "
                     "input has %lld (input %lld, pads %lld and %lld)", d, (long long)span,
                     (long long)padded, (long long)g->in[d], (long long)g->pad_lo[d],
                     (long long)g->pad_hi[d]);
            return -1;
        }
        g->out[d] = (padded - span) / g->stride[d] + 1;
    }
    return 0;
}

/* The geometry over exactly three spatial dims, the missing leading ones of extent 1 (no
 * padding, stride and dilation 1): the loops the kernels of every device run. */
struct tfc_conv_3d {
    int64_t in[3], k[3], o[3], s[3], d[3], p[3]; /* input, kernel, output, stride, dilation,
                                                  * padding before */
    int64_t in_vol, k_vol, o_vol;                /* their volumes (in, kernel, output) */
};

static inline void tfc_conv_geom_3d(const struct tfc_conv_geom *g, struct tfc_conv_3d *t)
{
    int off = 3 - g->nd;
    t->in_vol = t->k_vol = t->o_vol = 1;
    for (int d = 0; d < 3; d++) {
        int s = d - off, in = s >= 0;
        t->in[d] = in ? g->in[s] : 1, t->k[d] = in ? g->kern[s] : 1;
        t->o[d] = in ? g->out[s] : 1, t->s[d] = in ? g->stride[s] : 1;
        t->d[d] = in ? g->dil[s] : 1, t->p[d] = in ? g->pad_lo[s] : 0;
        t->in_vol *= t->in[d], t->k_vol *= t->k[d], t->o_vol *= t->o[d];
    }
}

/* A kernel's geometry from its arguments: x is input 0 (conv, conv_backprop_filter) or the
 * output (conv_backprop_input), w input 1 or the output (conv_backprop_filter). */
static inline int tfc_conv_geom_of(const struct tfc_kargs *a, struct tfc_conv_geom *g,
                                   char *msg, size_t len)
{
    const struct tfc_kdesc *x = a->kind == TFC_K_CONV_BP_INPUT ? tfc_kout_desc(a, 0) : &a->d[0];
    const struct tfc_kdesc *w = a->kind == TFC_K_CONV_BP_FILTER ? tfc_kout_desc(a, 0) : &a->d[1];
    return tfc_conv_geom_make(x->dims, x->rank, w->dims, w->rank, a->attrs, g, msg, len);
}

#endif
