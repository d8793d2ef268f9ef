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

/* ---- conv_transpose: the transposed convolution as an op of its own ------------------------ */

/* conv_transpose(x [N, C_in, in...], w [C_in, C_out/groups, kernel...]) -> y [N, C_out, out...]
 * with out = (in - 1) stride - pad_begin - pad_end + dilation (kernel - 1) + output_padding + 1
 * (PyTorch's ConvTranspose, ONNX's with explicit pads). It is conv_backprop_input of the
 * convolution of y by w with the same strides, pads, dilations and groups, whose output has
 * x's shape: the same kernel (kind TFC_K_CONV_BP_INPUT, x as dy, y as dx), with output_padding
 * below the stride so that that convolution maps out back onto in exactly. */
enum { CONV_T_OUTPUT_PADDING = CONV_AUTO_PAD + 1 }; /* after the conv attributes it shares */

tfc_status tfc_grad_conv_transpose(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                   tfc_tensor **dxs); /* graph/grad_conv.c */

/* The output's spatial extents of a conv_transpose of x (its known dims) and w; TFC_OK, or a
 * message naming the attribute or dim at fault. */
static tfc_status conv_t_out(const struct tfc_infer *in, const struct tfc_desc *x,
                             const struct tfc_desc *w, int64_t *out)
{
    const struct tfc_kattr *at = in->attrs;
    int nd = x->shape.rank - 2;
    int64_t s[TFC_CONV_MAX_SPATIAL], d[TFC_CONV_MAX_SPATIAL], op[TFC_CONV_MAX_SPATIAL];
    int64_t pads[2 * TFC_CONV_MAX_SPATIAL];
    if (tfc_conv_ints_(&at[CONV_STRIDES], "strides", nd, 1, 1, s, in->msg, TFC_MSG_LEN) ||
        tfc_conv_ints_(&at[CONV_DILATIONS], "dilations", nd, 1, 1, d, in->msg, TFC_MSG_LEN) ||
        tfc_conv_ints_(&at[CONV_PADS], "pads", 2 * nd, 0, 0, pads, in->msg, TFC_MSG_LEN) ||
        tfc_conv_ints_(&at[CONV_T_OUTPUT_PADDING], "output_padding", nd, 0, 0, op, in->msg,
                       TFC_MSG_LEN))
        return TFC_ERR_SHAPE;
    for (int i = 0; i < nd; i++) {
        if (op[i] >= s[i])
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "output_padding[%d] is %lld; it must be "
                            "below the stride %lld", i, (long long)op[i], (long long)s[i]);
        int64_t k = w->shape.dims[2 + i], xi = x->shape.dims[2 + i];
        if (xi > TFC_CONV_MAX_EXTENT || k > TFC_CONV_MAX_EXTENT) /* products stay in int64 */
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "spatial dim %d: input %lld or kernel %lld "
                            "is above %lld", i, (long long)xi, (long long)k,
                            (long long)TFC_CONV_MAX_EXTENT);
        out[i] = (xi - 1) * s[i] - pads[i] - pads[nd + i] + d[i] * (k - 1) + op[i] + 1;
        if (k < 1 || xi < 1 || out[i] < 1)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "spatial dim %d: input %lld, kernel %lld, "
                            "stride %lld, pads %lld and %lld, dilation %lld give an output of "
                            "%lld; it must be at least 1", i, (long long)xi, (long long)k,
                            (long long)s[i], (long long)pads[i], (long long)pads[nd + i],
                            (long long)d[i], (long long)out[i]);
    }
    return TFC_OK;
}

static tfc_status infer_conv_transpose(const struct tfc_infer *in)
{
    const struct tfc_desc *x = &in->in[0], *w = &in->in[1];
    int nd = x->shape.rank - 2;
    if (nd < 1 || nd > TFC_CONV_MAX_SPATIAL || w->shape.rank != x->shape.rank)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "input has rank %d and filter rank %d; both "
                        "must be 3, 4 or 5 ([N, C_in, spatial...] and [C_in, C_out/groups, "
                        "kernel...])", x->shape.rank, w->shape.rank);
    if (in->attrs[CONV_AUTO_PAD].i != TFC_CONV_NOTSET)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "auto_pad is %lld; conv_transpose takes "
                        "explicit pads only (auto_pad 0)", (long long)in->attrs[CONV_AUTO_PAD].i);
    for (int i = 1; i < x->shape.rank; i++)
        if (x->shape.dims[i] < 0)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "input dim %d is unknown; only the batch "
                            "dim may be", i);
    for (int i = 1; i < w->shape.rank; i++)
        if (w->shape.dims[i] < 0)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "filter dim %d is unknown; only dim 0 (the "
                            "input channels) may be", i);
    int64_t groups = in->attrs[CONV_GROUPS].i, w0 = w->shape.dims[0];
    if (groups < 1 || (w0 >= 0 && x->shape.dims[1] != w0) || x->shape.dims[1] % groups)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "input channels %lld, filter dim 0 %lld and "
                        "groups %lld: the filter's dim 0 must be the input channels, divisible "
                        "by groups >= 1", (long long)x->shape.dims[1],
                        (long long)w->shape.dims[0], (long long)groups);
    tfc_shape ys = {.rank = x->shape.rank};
    ys.dims[0] = x->shape.dims[0];
    ys.dims[1] = w->shape.dims[1] * groups;
    tfc_status st = conv_t_out(in, x, w, ys.dims + 2);
    if (st) return st;
    /* the convolution of y by w whose adjoint this is must map y back onto x: checks dtypes
     * and the remaining attributes in its own words */
    struct tfc_desc y = {.dtype = x->dtype, .shape = ys};
    struct tfc_conv_geom g;
    if ((st = conv_geometry(in, &y, w, w, &g))) return st;
    for (int i = 0; i < nd; i++)
        if (g.out[i] != x->shape.dims[2 + i])
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "spatial dim %d: the output %lld does not "
                            "convolve back to the input's %lld", i, (long long)ys.dims[2 + i],
                            (long long)x->shape.dims[2 + i]);
    in->out[0].dtype = x->dtype;
    in->out[0].shape = ys;
    return TFC_OK;
}

static const struct tfc_attr_def conv_t_attrs[] = {
    [CONV_STRIDES] = {"strides", TFC_ATTR_INTS, 0},
    [CONV_PADS] = {"pads", TFC_ATTR_INTS, 0},
    [CONV_DILATIONS] = {"dilations", TFC_ATTR_INTS, 0},
    [CONV_GROUPS] = {"groups", TFC_ATTR_INT, 1},
    [CONV_AUTO_PAD] = {"auto_pad", TFC_ATTR_INT, TFC_CONV_NOTSET},
    [CONV_T_OUTPUT_PADDING] = {"output_padding", TFC_ATTR_INTS, 0},
};

const struct tfc_op tfc_op_conv_transpose = {
    .name = "conv_transpose", .n_inputs = 2, .kind = TFC_K_CONV_BP_INPUT,
    .attrs = conv_t_attrs, .n_attrs = TFC_ATTR_COUNT(conv_t_attrs),
    .infer = infer_conv_transpose, .codelet = &tfc_cl_conv, .grad = tfc_grad_conv_transpose,
};

tfc_tensor *tfc_conv_transpose(tfc_graph *g, tfc_tensor *x, tfc_tensor *w,
                               const tfc_conv_transpose_params *p)
{
    if (!g || !x || !w) return NULL;
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_conv_transpose, at);
    int nd = x->desc.shape.rank - 2;
    if (p) {
        at[CONV_GROUPS].i = p->groups ? p->groups : 1;
        if (nd >= 1 && nd <= TFC_CONV_MAX_SPATIAL) {
            at[CONV_STRIDES].n = at[CONV_DILATIONS].n = nd;
            at[CONV_PADS].n = 2 * nd;
            at[CONV_T_OUTPUT_PADDING].n = nd;
            for (int d = 0; d < nd; d++) {
                at[CONV_STRIDES].v[d] = p->strides[d] ? p->strides[d] : 1;
                at[CONV_DILATIONS].v[d] = p->dilations[d] ? p->dilations[d] : 1;
                at[CONV_PADS].v[d] = p->pads_begin[d];
                at[CONV_PADS].v[nd + d] = p->pads_end[d];
                at[CONV_T_OUTPUT_PADDING].v[d] = p->output_padding[d];
            }
        }
    }
    tfc_tensor *in[2] = {x, w};
    return tfc_build(g, &tfc_op_conv_transpose, 2, in, at);
}
