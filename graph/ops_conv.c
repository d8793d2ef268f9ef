/* ops_conv.c: descriptors, inference and builders of the N-D convolution (1 to 3 spatial dims,
 * NCHW/NCDHW) and of its two adjoints, conv_backprop_input (the transposed convolution) and
 * conv_backprop_filter. The three share one attribute table and one geometry
 * (codelets/conv_geom.h), so auto_pad is resolved the same way at build and run time. */
#include <string.h>
#include "grad.h"
#include "../codelets/conv_geom.h"

extern struct starpu_codelet tfc_cl_conv;

/* Checks dtypes (float, all alike) and resolves the geometry from x's and w's shapes. */
static tfc_status conv_geometry(const struct tfc_infer *in, const struct tfc_desc *x,
                                const struct tfc_desc *w, const struct tfc_desc *other,
                                struct tfc_conv_geom *g)
{
    if (!tfc_dtype_is_float(x->dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "input must be float32 or float64, got %s",
                        tfc_dtype_name(x->dtype));
    if (w->dtype != x->dtype || other->dtype != x->dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "operands are %s, %s and %s; they must match",
                        tfc_dtype_name(x->dtype), tfc_dtype_name(w->dtype),
                        tfc_dtype_name(other->dtype));
    for (int i = 1; i < x->shape.rank; i++)
        if (x->shape.dims[i] < 0)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "input dim %d is unknown; only the batch "
                            "dim may be", i);
    for (int i = 1; i < w->shape.rank; i++)
        if (w->shape.dims[i] < 0)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "filter dim %d is unknown; only dim 0 "
                            "(the output channels) may be", i);
    if (tfc_conv_geom_make(x->shape.dims, x->shape.rank, w->shape.dims, w->shape.rank, in->attrs,
                           g, in->msg, TFC_MSG_LEN))
        return TFC_ERR_SHAPE;
    return TFC_OK;
}

/* The output shape of the convolution: [N, K, out...]. */
static tfc_shape conv_out_shape(const struct tfc_conv_geom *g)
{
    tfc_shape s = {.rank = g->nd + 2};
    s.dims[0] = g->batch;
    s.dims[1] = g->out_ch;
    for (int d = 0; d < g->nd; d++) s.dims[2 + d] = g->out[d];
    return s;
}

/* dy of a backprop op must have the convolution's output shape (an unknown dim matches). */
static tfc_status check_dy(const struct tfc_infer *in, const struct tfc_desc *dy,
                           const struct tfc_conv_geom *g)
{
    tfc_shape want = conv_out_shape(g);
    int same = dy->shape.rank == want.rank;
    for (int i = 0; same && i < want.rank; i++)
        same = dy->shape.dims[i] == want.dims[i] || dy->shape.dims[i] < 0 || want.dims[i] < 0;
    if (!same) {
        char a[128], b[128];
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "output gradient has shape %s; the "
                        "convolution's output has %s", tfc_shape_str(&dy->shape, a, sizeof a),
                        tfc_shape_str(&want, b, sizeof b));
    }
    return TFC_OK;
}

/* conv(x [N, C, in...], w [K, C/groups, kernel...]) -> [N, K, out...] */
static tfc_status infer_conv(const struct tfc_infer *in)
{
    struct tfc_conv_geom g;
    tfc_status st = conv_geometry(in, &in->in[0], &in->in[1], &in->in[1], &g);
    if (st) return st;
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = conv_out_shape(&g);
    return TFC_OK;
}

/* conv_backprop_input(dy, w, x_like) -> dx, x_like's shape (only its shape is read) */
static tfc_status infer_bp_input(const struct tfc_infer *in)
{
    struct tfc_conv_geom g;
    tfc_status st = conv_geometry(in, &in->in[2], &in->in[1], &in->in[0], &g);
    if (!st) st = check_dy(in, &in->in[0], &g);
    if (st) return st;
    in->out[0] = in->in[2];
    if (in->out[0].shape.dims[0] < 0) in->out[0].shape.dims[0] = in->in[0].shape.dims[0];
    return TFC_OK;
}

/* conv_backprop_filter(x, dy, w_like) -> dw, w_like's shape (only its shape is read) */
static tfc_status infer_bp_filter(const struct tfc_infer *in)
{
    struct tfc_conv_geom g;
    tfc_status st = conv_geometry(in, &in->in[0], &in->in[2], &in->in[1], &g);
    if (!st) st = check_dy(in, &in->in[1], &g);
    if (st) return st;
    in->out[0] = in->in[2];
    if (in->out[0].shape.dims[0] < 0) in->out[0].shape.dims[0] = in->in[1].shape.dims[1];
    return TFC_OK;
}

static const struct tfc_attr_def conv_attrs[] = {
    [CONV_STRIDES] = {"strides", TFC_ATTR_INTS, 0},
    [CONV_PADS] = {"pads", TFC_ATTR_INTS, 0},
    [CONV_DILATIONS] = {"dilations", TFC_ATTR_INTS, 0},
    [CONV_GROUPS] = {"groups", TFC_ATTR_INT, 1},
    [CONV_AUTO_PAD] = {"auto_pad", TFC_ATTR_INT, TFC_CONV_NOTSET},
};

const struct tfc_op tfc_op_conv = {
    .name = "conv", .n_inputs = 2, .kind = TFC_K_CONV,
    .attrs = conv_attrs, .n_attrs = TFC_ATTR_COUNT(conv_attrs),
    .infer = infer_conv, .codelet = &tfc_cl_conv, .grad = tfc_grad_conv,
};
const struct tfc_op tfc_op_conv_backprop_input = {
    .name = "conv_backprop_input", .n_inputs = 3, .kind = TFC_K_CONV_BP_INPUT,
    .attrs = conv_attrs, .n_attrs = TFC_ATTR_COUNT(conv_attrs),
    .infer = infer_bp_input, .codelet = &tfc_cl_conv, .grad = tfc_grad_conv_backprop_input,
    .shape_inputs = 1u << 2,
};
const struct tfc_op tfc_op_conv_backprop_filter = {
    .name = "conv_backprop_filter", .n_inputs = 3, .kind = TFC_K_CONV_BP_FILTER,
    .attrs = conv_attrs, .n_attrs = TFC_ATTR_COUNT(conv_attrs),
    .infer = infer_bp_filter, .codelet = &tfc_cl_conv, .grad = tfc_grad_conv_backprop_filter,
    .shape_inputs = 1u << 2,
};

/* The attributes of p for a convolution over nd spatial dims (p NULL: the defaults). A rank
 * that fits no convolution leaves the lists empty: inference then names the rank. */
static void conv_params_attrs(const struct tfc_op *op, int nd, const tfc_conv_params *p,
                              struct tfc_kattr *at)
{
    tfc_attrs_default(op, at);
    if (!p) return;
    at[CONV_GROUPS].i = p->groups ? p->groups : 1;
    at[CONV_AUTO_PAD].i = p->auto_pad;
    if (nd < 1 || nd > TFC_CONV_MAX_SPATIAL) return;
    at[CONV_STRIDES].n = at[CONV_DILATIONS].n = nd;
    int any_pad = 0;
    for (int d = 0; d < nd; d++) {
        at[CONV_STRIDES].v[d] = p->strides[d] ? p->strides[d] : 1;
        at[CONV_DILATIONS].v[d] = p->dilations[d] ? p->dilations[d] : 1;
        any_pad |= p->pads_begin[d] != 0 || p->pads_end[d] != 0;
    }
    /* pads given with an auto_pad go through, so that inference refuses the mix */
    if (p->auto_pad == TFC_CONV_PAD_NOTSET || any_pad) {
        at[CONV_PADS].n = 2 * nd;
        for (int d = 0; d < nd; d++) {
            at[CONV_PADS].v[d] = p->pads_begin[d];
            at[CONV_PADS].v[nd + d] = p->pads_end[d];
        }
    }
}

static tfc_tensor *build3(tfc_graph *g, const struct tfc_op *op, tfc_tensor *a, tfc_tensor *b,
                          tfc_tensor *c, tfc_tensor *shaped, const tfc_conv_params *p)
{
    if (!g || !a || !b || (op->n_inputs == 3 && !c)) return NULL;
    struct tfc_kattr at[TFC_MAX_ATTRS];
    conv_params_attrs(op, shaped->desc.shape.rank - 2, p, at);
    tfc_tensor *in[3] = {a, b, c};
    return tfc_build(g, op, op->n_inputs, in, at);
}

tfc_tensor *tfc_conv(tfc_graph *g, tfc_tensor *x, tfc_tensor *w, const tfc_conv_params *p)
{
    return build3(g, &tfc_op_conv, x, w, NULL, x, p);
}

tfc_tensor *tfc_conv_backprop_input(tfc_graph *g, tfc_tensor *dy, tfc_tensor *w,
                                    tfc_tensor *x_like, const tfc_conv_params *p)
{
    return build3(g, &tfc_op_conv_backprop_input, dy, w, x_like, w, p);
}

tfc_tensor *tfc_conv_backprop_filter(tfc_graph *g, tfc_tensor *x, tfc_tensor *dy,
                                     tfc_tensor *w_like, const tfc_conv_params *p)
{
    return build3(g, &tfc_op_conv_backprop_filter, x, dy, w_like, x, p);
}
