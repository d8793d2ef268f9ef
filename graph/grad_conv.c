/* grad_conv.c: gradients of the convolution, of its two adjoints and of conv_transpose. All
 * are linear in each operand, so each gradient is one of the three ops again (same attributes,
 * same geometry): gradients of any order work. */
#include <string.h>
#include "grad.h"
#include "../codelets/op_attrs.h"

extern const struct tfc_op tfc_op_conv, tfc_op_conv_backprop_input, tfc_op_conv_backprop_filter;

/* A node of op over (a, b, c) with the attributes of the node n it differentiates. */
static tfc_tensor *like_node(tfc_graph *g, const struct tfc_op *op, struct tfc_node *n,
                             tfc_tensor *a, tfc_tensor *b, tfc_tensor *c)
{
    tfc_tensor *in[3] = {a, b, c};
    return tfc_build(g, op, op->n_inputs, in, n->attrs);
}

/* y = conv(x, w): dx = conv_backprop_input(dy, w), dw = conv_backprop_filter(x, dy). */
tfc_status tfc_grad_conv(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                         tfc_tensor **dxs)
{
    tfc_tensor *x = n->inputs[0], *w = n->inputs[1], *dy = dys[0];
    dxs[0] = like_node(g, &tfc_op_conv_backprop_input, n, dy, w, x);
    dxs[1] = like_node(g, &tfc_op_conv_backprop_filter, n, x, dy, w);
    return g->status;
}

/* dx = bp_input(dy, w) is conv's adjoint in x: <ddx, dx> = <conv(ddx, w), dy>, so
 * d dy = conv(ddx, w) and d w = conv_backprop_filter(ddx, dy). */
tfc_status tfc_grad_conv_backprop_input(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                        tfc_tensor **dxs)
{
    tfc_tensor *dy = n->inputs[0], *w = n->inputs[1], *ddx = dys[0];
    dxs[0] = like_node(g, &tfc_op_conv, n, ddx, w, NULL);
    dxs[1] = like_node(g, &tfc_op_conv_backprop_filter, n, ddx, dy, w);
    return g->status;
}

/* dw = bp_filter(x, dy): <ddw, dw> = <conv(x, ddw), dy>, so d x = conv_backprop_input(dy, ddw)
 * and d dy = conv(x, ddw). */
tfc_status tfc_grad_conv_backprop_filter(tfc_graph *g, struct tfc_node *n,
                                         tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *x = n->inputs[0], *dy = n->inputs[1], *ddw = dys[0];
    dxs[0] = like_node(g, &tfc_op_conv_backprop_input, n, dy, ddw, x);
    dxs[1] = like_node(g, &tfc_op_conv, n, x, ddw, NULL);
    return g->status;
}

/* y = conv_transpose(x, w) is conv_backprop_input(x, w) of the convolution c of y-shaped
 * tensors by w (same strides, pads, dilations, groups): <y, dy> = <bp_input(x, w), dy> =
 * <x, c(dy, w)>, so dx = conv(dy, w); and dw is c's filter gradient with the roles swapped:
 * the convolution's input is dy and its output gradient x, dw = conv_backprop_filter(dy, x). */
tfc_status tfc_grad_conv_transpose(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                   tfc_tensor **dxs)
{
    tfc_tensor *x = n->inputs[0], *w = n->inputs[1], *dy = dys[0];
    struct tfc_kattr at[TFC_MAX_ATTRS]; /* the convolution's: output_padding dropped */
    memcpy(at, n->attrs, sizeof at);
    for (int i = CONV_AUTO_PAD + 1; i < TFC_MAX_ATTRS; i++) at[i] = (struct tfc_kattr){0};
    tfc_tensor *in[3] = {dy, w, NULL};
    dxs[0] = tfc_build(g, &tfc_op_conv, 2, in, at);
    tfc_tensor *fin[3] = {dy, x, w};
    dxs[1] = tfc_build(g, &tfc_op_conv_backprop_filter, 3, fin, at);
    return g->status;
}
