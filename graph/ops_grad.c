/* ops_grad.c: the ops gradients are made of (reshape_like, broadcast_like, sum_to_like,
 * relu_grad, slice_grad, scatter_add_rows), stop_gradient and group. The *_like ops take their
 * second operand's shape only: the plan gives them no buffer for it. */
#include <string.h>
#include "grad.h"

static tfc_status infer_group(const struct tfc_infer *in)
{
    in->out[0].dtype = TFC_INT32;
    in->out[0].shape.rank = 1;
    in->out[0].shape.dims[0] = 0; /* empty: no task, no data */
    return TFC_OK;
}

static tfc_status infer_same(const struct tfc_infer *in)
{
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_reshape_like(const struct tfc_infer *in)
{
    int64_t a = tfc_shape_numel(&in->in[0].shape), b = tfc_shape_numel(&in->in[1].shape);
    if (a >= 0 && b >= 0 && a != b)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "%lld elements cannot take a shape of %lld",
                        (long long)a, (long long)b);
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = in->in[1].shape;
    return TFC_OK;
}

static tfc_status infer_broadcast_like(const struct tfc_infer *in)
{
    const tfc_shape *shapes[2] = {&in->in[0].shape, &in->in[1].shape};
    in->out[0].dtype = in->in[0].dtype;
    return tfc_broadcast_shapes(2, shapes, &in->out[0].shape, in->msg);
}

static tfc_status infer_sum_to_like(const struct tfc_infer *in)
{
    const tfc_shape *x = &in->in[0].shape, *t = &in->in[1].shape;
    char a[96], b[96];
    int lead = x->rank - t->rank, ok = lead >= 0;
    for (int i = 0; ok && i < t->rank; i++) {
        int64_t td = t->dims[i], xd = x->dims[i + lead];
        ok = td == 1 || td == xd || td < 0 || xd < 0;
    }
    if (!ok)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "%s does not reduce to %s by summing",
                        tfc_shape_str(x, a, sizeof a), tfc_shape_str(t, b, sizeof b));
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = *t;
    return TFC_OK;
}

static tfc_status infer_relu_grad(const struct tfc_infer *in)
{
    if (!tfc_dtype_is_float(in->in[0].dtype) || in->in[0].dtype != in->in[1].dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "needs two float tensors of one dtype");
    const tfc_shape *shapes[2] = {&in->in[0].shape, &in->in[1].shape};
    in->out[0].dtype = in->in[0].dtype;
    return tfc_broadcast_shapes(2, shapes, &in->out[0].shape, in->msg);
}

/* slice_grad: attrs begin, size (those of the slice it undoes) */
static tfc_status infer_slice_grad(const struct tfc_infer *in)
{
    const struct tfc_kattr *begin = &in->attrs[SLICE_GRAD_BEGIN];
    if (begin->n != in->in[1].shape.rank || in->in[0].shape.rank != in->in[1].shape.rank)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "begin, gradient and target ranks differ");
    for (int d = 0; d < in->in[1].shape.rank; d++) {
        int64_t full = in->in[1].shape.dims[d], part = in->in[0].shape.dims[d];
        int64_t at = begin->v[d];
        /* a stored graph's begin may be anything: negative or past the end is out of range
         * (the sum is not formed: it could overflow) */
        if (at < 0 || (full >= 0 && at > full) || (full >= 0 && part >= 0 && part > full - at))
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "axis %d: the gradient does not fit at "
                            "begin %lld", d, (long long)at);
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = in->in[1].shape;
    return TFC_OK;
}

static tfc_status infer_scatter_add(const struct tfc_infer *in)
{
    const struct tfc_desc *u = &in->in[0], *ix = &in->in[1], *like = &in->in[2];
    if (!tfc_dtype_is_float(u->dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "updates must be float");
    if (ix->dtype != TFC_INT32 && ix->dtype != TFC_INT64)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "indices must be int32 or int64");
    if (like->shape.rank < 1 || u->shape.rank != ix->shape.rank + like->shape.rank - 1)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "updates must be indices' shape + rows' shape");
    in->out[0].dtype = u->dtype;
    in->out[0].shape = like->shape;
    return TFC_OK;
}

static const struct tfc_attr_def slice_grad_attrs[] = {
    [SLICE_GRAD_BEGIN] = {"begin", TFC_ATTR_INTS, 0},
    [SLICE_GRAD_SIZE] = {"size", TFC_ATTR_INTS, 0},
};

/* shape_inputs: the *_like ops read input 1's shape only (bit 1), scatter_add_rows input 2's
 * (bit 2), group none of its inputs' data (every bit) */
const struct tfc_op tfc_op_group = {
    .name = "group", .kind = TFC_K_IDENTITY, .flags = TFC_OP_VARIADIC | TFC_OP_NO_GRADIENT,
    .infer = infer_group, .codelet = &tfc_cl_elementwise, .shape_inputs = ~0u,
};
const struct tfc_op tfc_op_stop_gradient = {
    .name = "stop_gradient", .n_inputs = 1, .kind = TFC_K_IDENTITY,
    .flags = TFC_OP_NO_GRADIENT, .infer = infer_same, .codelet = &tfc_cl_elementwise,
};
const struct tfc_op tfc_op_reshape_like = {
    .name = "reshape_like", .n_inputs = 2, .kind = TFC_K_RESHAPE,
    .infer = infer_reshape_like, .codelet = &tfc_cl_layout, .grad = tfc_grad_reshape,
    .shape_inputs = 1u << 1,
};
const struct tfc_op tfc_op_broadcast_like = {
    .name = "broadcast_like", .n_inputs = 2, .kind = TFC_K_BROADCAST,
    .infer = infer_broadcast_like, .codelet = &tfc_cl_elementwise,
    .grad = tfc_grad_broadcast_like, .shape_inputs = 1u << 1,
};
const struct tfc_op tfc_op_sum_to_like = {
    .name = "sum_to_like", .n_inputs = 2, .kind = TFC_K_SUM_TO,
    .infer = infer_sum_to_like, .codelet = &tfc_cl_reduce, .grad = tfc_grad_sum_to_like,
    .shape_inputs = 1u << 1,
};
const struct tfc_op tfc_op_relu_grad = {
    .name = "relu_grad", .n_inputs = 2, .kind = TFC_K_RELU_GRAD, .flags = TFC_OP_ELEMENTWISE,
    .infer = infer_relu_grad, .codelet = &tfc_cl_elementwise, .grad = tfc_grad_relu_grad,
};
const struct tfc_op tfc_op_slice_grad = {
    .name = "slice_grad", .n_inputs = 2, .kind = TFC_K_SLICE_GRAD,
    .attrs = slice_grad_attrs, .n_attrs = TFC_ATTR_COUNT(slice_grad_attrs),
    .infer = infer_slice_grad, .codelet = &tfc_cl_layout, .grad = tfc_grad_slice_grad,
    .shape_inputs = 1u << 1,
};
const struct tfc_op tfc_op_scatter_add_rows = {
    .name = "scatter_add_rows", .n_inputs = 3, .kind = TFC_K_SCATTER_ADD,
    .infer = infer_scatter_add, .codelet = &tfc_cl_layout, .grad = tfc_grad_scatter_add,
    .shape_inputs = 1u << 2,
};

tfc_tensor *tfc_group(tfc_graph *g, int n, tfc_tensor *const *inputs)
{
    return tfc_build(g, &tfc_op_group, n, inputs, NULL);
}

tfc_tensor *tfc_stop_gradient(tfc_graph *g, tfc_tensor *x) { return tfc_build(g, &tfc_op_stop_gradient, 1, &x, NULL); }

static tfc_tensor *pair(tfc_graph *g, const struct tfc_op *op, tfc_tensor *a, tfc_tensor *b)
{
    tfc_tensor *in[2] = {a, b};
    return tfc_build(g, op, 2, in, NULL);
}

tfc_tensor *tfc_reshape_like(tfc_graph *g, tfc_tensor *x, tfc_tensor *like) { return pair(g, &tfc_op_reshape_like, x, like); }
tfc_tensor *tfc_broadcast_like(tfc_graph *g, tfc_tensor *x, tfc_tensor *like) { return pair(g, &tfc_op_broadcast_like, x, like); }
tfc_tensor *tfc_sum_to_like(tfc_graph *g, tfc_tensor *x, tfc_tensor *like) { return pair(g, &tfc_op_sum_to_like, x, like); }
tfc_tensor *tfc_relu_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x) { return pair(g, &tfc_op_relu_grad, dy, x); }

tfc_tensor *tfc_slice_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *like,
                           const struct tfc_kattr *begin, const struct tfc_kattr *size)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_slice_grad, at);
    at[SLICE_GRAD_BEGIN] = *begin;
    at[SLICE_GRAD_SIZE] = *size;
    tfc_tensor *in[2] = {dy, like};
    return tfc_build(g, &tfc_op_slice_grad, 2, in, at);
}

tfc_tensor *tfc_scatter_add_rows(tfc_graph *g, tfc_tensor *updates, tfc_tensor *indices,
                                 tfc_tensor *like)
{
    tfc_tensor *in[3] = {updates, indices, like};
    return tfc_build(g, &tfc_op_scatter_add_rows, 3, in, NULL);
}
