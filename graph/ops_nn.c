/* ops_nn.c: descriptors, inference and builders of matmul and batched matmul, the softmax
 * family with cross-entropy, and the reductions (sum, mean, max, min, argmax). Their attribute
 * slots are named in codelets/op_attrs.h: the kernels and tiling read them too. */
#include <string.h>
#include "grad.h"

static tfc_status need_float(const struct tfc_infer *in, int i)
{
    if (!tfc_dtype_is_float(in->in[i].dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "input %d must be float32 or float64, got %s", i,
                        tfc_dtype_name(in->in[i].dtype));
    return TFC_OK;
}

static tfc_status infer_matmul(const struct tfc_infer *in)
{
    const struct tfc_desc *a = &in->in[0], *b = &in->in[1];
    tfc_status st = need_float(in, 0);
    if (st) return st;
    if (a->dtype != b->dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "operands are %s and %s",
                        tfc_dtype_name(a->dtype), tfc_dtype_name(b->dtype));
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "needs rank-2 operands, got ranks %d and %d",
                        a->shape.rank, b->shape.rank);
    int ta = in->attrs[MATMUL_TRANSPOSE_A].i != 0, tb = in->attrs[MATMUL_TRANSPOSE_B].i != 0;
    int64_t m = a->shape.dims[ta ? 1 : 0], ka = a->shape.dims[ta ? 0 : 1];
    int64_t kb = b->shape.dims[tb ? 1 : 0], n = b->shape.dims[tb ? 0 : 1];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return tfc_fail(in->msg, TFC_ERR_SHAPE,
                        "inner dimensions differ: %lld and %lld (transpose_a=%d, transpose_b=%d)",
                        (long long)ka, (long long)kb, ta, tb);
    in->out[0].dtype = a->dtype;
    in->out[0].shape.rank = 2;
    in->out[0].shape.dims[0] = m;
    in->out[0].shape.dims[1] = n;
    return TFC_OK;
}

static tfc_status infer_batch_matmul(const struct tfc_infer *in)
{
    const struct tfc_desc *a = &in->in[0], *b = &in->in[1];
    tfc_status st = need_float(in, 0);
    if (st) return st;
    if (a->dtype != b->dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "operands are %s and %s",
                        tfc_dtype_name(a->dtype), tfc_dtype_name(b->dtype));
    int ra = a->shape.rank, rb = b->shape.rank;
    if (ra < 2 || rb < 2)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "needs operands of rank >= 2, got %d and %d", ra,
                        rb);
    int ta = in->attrs[BATCH_MATMUL_ADJ_A].i != 0, tb = in->attrs[BATCH_MATMUL_ADJ_B].i != 0;
    int64_t m = a->shape.dims[ra - (ta ? 1 : 2)], ka = a->shape.dims[ra - (ta ? 2 : 1)];
    int64_t kb = b->shape.dims[rb - (tb ? 1 : 2)], n = b->shape.dims[rb - (tb ? 2 : 1)];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "inner dimensions differ: %lld and %lld",
                        (long long)ka, (long long)kb);
    tfc_shape ba = a->shape, bb = b->shape, bo;
    ba.rank -= 2;
    bb.rank -= 2;
    const tfc_shape *shapes[2] = {&ba, &bb};
    st = tfc_broadcast_shapes(2, shapes, &bo, in->msg);
    if (st) return st;
    if (bo.rank + 2 > TFC_MAX_RANK) return tfc_fail(in->msg, TFC_ERR_SHAPE, "rank too large");
    in->out[0].dtype = a->dtype;
    in->out[0].shape = bo;
    in->out[0].shape.rank = bo.rank + 2;
    in->out[0].shape.dims[bo.rank] = m;
    in->out[0].shape.dims[bo.rank + 1] = n;
    return TFC_OK;
}

static tfc_status infer_softmax(const struct tfc_infer *in)
{
    tfc_status st = need_float(in, 0);
    if (st) return st;
    int rank = in->in[0].shape.rank;
    int64_t axis = in->attrs[SOFTMAX_AXIS].i;
    if (rank < 1 || tfc_axis_norm(axis, rank) < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)axis, rank);
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_xent(const struct tfc_infer *in, int sparse)
{
    const struct tfc_desc *l = &in->in[0], *y = &in->in[1];
    tfc_status st = need_float(in, 0);
    if (st) return st;
    if (l->shape.rank != 2)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "logits must be [batch, classes], got rank %d",
                        l->shape.rank);
    if (sparse) {
        if (y->dtype != TFC_INT32 && y->dtype != TFC_INT64)
            return tfc_fail(in->msg, TFC_ERR_DTYPE, "labels must be int32 or int64, got %s",
                            tfc_dtype_name(y->dtype));
        if (y->shape.rank != 1)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "labels must be [batch], got rank %d",
                            y->shape.rank);
    } else {
        if (y->dtype != l->dtype)
            return tfc_fail(in->msg, TFC_ERR_DTYPE, "labels are %s, logits %s",
                            tfc_dtype_name(y->dtype), tfc_dtype_name(l->dtype));
        if (y->shape.rank != 2)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "labels must be [batch, classes]");
        if (y->shape.dims[1] >= 0 && l->shape.dims[1] >= 0 && y->shape.dims[1] != l->shape.dims[1])
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "labels have %lld classes, logits %lld",
                            (long long)y->shape.dims[1], (long long)l->shape.dims[1]);
    }
    if (y->shape.dims[0] >= 0 && l->shape.dims[0] >= 0 && y->shape.dims[0] != l->shape.dims[0])
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "labels have %lld rows, logits %lld",
                        (long long)y->shape.dims[0], (long long)l->shape.dims[0]);
    in->out[0].dtype = l->dtype;
    in->out[0].shape.rank = 1;
    in->out[0].shape.dims[0] = l->shape.dims[0] >= 0 ? l->shape.dims[0] : y->shape.dims[0];
    return TFC_OK;
}

static tfc_status infer_dense_xent(const struct tfc_infer *in) { return infer_xent(in, 0); }
static tfc_status infer_sparse_xent(const struct tfc_infer *in) { return infer_xent(in, 1); }

/* reduce: attrs axes (empty = all), keepdims */
static tfc_status infer_reduce(const struct tfc_infer *in)
{
    tfc_status st = need_float(in, 0);
    if (st) return st;
    const tfc_shape *s = &in->in[0].shape;
    const struct tfc_kattr *axes = &in->attrs[REDUCE_AXES];
    int reduced[TFC_MAX_RANK] = {0};
    for (int i = 0; i < axes->n; i++) {
        int ax = tfc_axis_norm(axes->v[i], s->rank);
        if (ax < 0)
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                            (long long)axes->v[i], s->rank);
        if (reduced[ax])
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %d is repeated", ax);
        reduced[ax] = 1;
    }
    if (axes->n == 0)
        for (int i = 0; i < s->rank; i++) reduced[i] = 1;
    tfc_shape o = {0};
    for (int i = 0; i < s->rank; i++) {
        if (!reduced[i])
            o.dims[o.rank++] = s->dims[i];
        else if (in->attrs[REDUCE_KEEPDIMS].i)
            o.dims[o.rank++] = 1;
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

static tfc_status infer_argmax(const struct tfc_infer *in)
{
    tfc_status st = need_float(in, 0);
    if (st) return st;
    const tfc_shape *s = &in->in[0].shape;
    int64_t axis = in->attrs[ARGMAX_AXIS].i;
    int ax = tfc_axis_norm(axis, s->rank);
    if (ax < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)axis, s->rank);
    if (s->dims[ax] == 0)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "argmax over an empty axis");
    tfc_shape o = {0};
    for (int i = 0; i < s->rank; i++)
        if (i != ax) o.dims[o.rank++] = s->dims[i];
    in->out[0].dtype = TFC_INT64;
    in->out[0].shape = o;
    return TFC_OK;
}

static const struct tfc_attr_def matmul_attrs[] = {
    [MATMUL_TRANSPOSE_A] = {"transpose_a", TFC_ATTR_INT, 0},
    [MATMUL_TRANSPOSE_B] = {"transpose_b", TFC_ATTR_INT, 0},
};
static const struct tfc_attr_def bmm_attrs[] = {
    [BATCH_MATMUL_ADJ_A] = {"adj_a", TFC_ATTR_INT, 0},
    [BATCH_MATMUL_ADJ_B] = {"adj_b", TFC_ATTR_INT, 0},
};
static const struct tfc_attr_def softmax_attrs[] = {
    [SOFTMAX_AXIS] = {"axis", TFC_ATTR_INT, -1},
};
static const struct tfc_attr_def argmax_attrs[] = {
    [ARGMAX_AXIS] = {"axis", TFC_ATTR_INT, 0},
};
static const struct tfc_attr_def reduce_attrs[] = {
    [REDUCE_AXES] = {"axes", TFC_ATTR_INTS, 0},
    [REDUCE_KEEPDIMS] = {"keepdims", TFC_ATTR_INT, 0},
};

const struct tfc_op tfc_op_matmul = {
    .name = "matmul", .n_inputs = 2, .kind = TFC_K_MATMUL,
    .attrs = matmul_attrs, .n_attrs = TFC_ATTR_COUNT(matmul_attrs),
    .infer = infer_matmul, .codelet = &tfc_cl_matmul, .grad = tfc_grad_matmul,
};
const struct tfc_op tfc_op_batch_matmul = {
    .name = "batch_matmul", .n_inputs = 2, .kind = TFC_K_BATCH_MATMUL,
    .attrs = bmm_attrs, .n_attrs = TFC_ATTR_COUNT(bmm_attrs),
    .infer = infer_batch_matmul, .codelet = &tfc_cl_matmul, .grad = tfc_grad_batch_matmul,
};
const struct tfc_op tfc_op_softmax = {
    .name = "softmax", .n_inputs = 1, .kind = TFC_K_SOFTMAX,
    .attrs = softmax_attrs, .n_attrs = TFC_ATTR_COUNT(softmax_attrs),
    .infer = infer_softmax, .codelet = &tfc_cl_softmax, .grad = tfc_grad_softmax,
};
const struct tfc_op tfc_op_log_softmax = {
    .name = "log_softmax", .n_inputs = 1, .kind = TFC_K_LOG_SOFTMAX,
    .attrs = softmax_attrs, .n_attrs = TFC_ATTR_COUNT(softmax_attrs),
    .infer = infer_softmax, .codelet = &tfc_cl_softmax, .grad = tfc_grad_log_softmax,
};
const struct tfc_op tfc_op_softmax_cross_entropy = {
    .name = "softmax_cross_entropy", .n_inputs = 2, .kind = TFC_K_XENT,
    .infer = infer_dense_xent, .codelet = &tfc_cl_softmax, .grad = tfc_grad_xent,
};
const struct tfc_op tfc_op_sparse_softmax_cross_entropy = {
    .name = "sparse_softmax_cross_entropy", .n_inputs = 2, .kind = TFC_K_SPARSE_XENT,
    .infer = infer_sparse_xent, .codelet = &tfc_cl_softmax, .grad = tfc_grad_sparse_xent,
};
const struct tfc_op tfc_op_reduce_sum = {
    .name = "reduce_sum", .n_inputs = 1, .kind = TFC_K_REDUCE_SUM,
    .attrs = reduce_attrs, .n_attrs = TFC_ATTR_COUNT(reduce_attrs),
    .infer = infer_reduce, .codelet = &tfc_cl_reduce, .grad = tfc_grad_reduce,
};
const struct tfc_op tfc_op_reduce_mean = {
    .name = "reduce_mean", .n_inputs = 1, .kind = TFC_K_REDUCE_MEAN,
    .attrs = reduce_attrs, .n_attrs = TFC_ATTR_COUNT(reduce_attrs),
    .infer = infer_reduce, .codelet = &tfc_cl_reduce, .grad = tfc_grad_reduce,
};
const struct tfc_op tfc_op_reduce_max = {
    .name = "reduce_max", .n_inputs = 1, .kind = TFC_K_REDUCE_MAX,
    .attrs = reduce_attrs, .n_attrs = TFC_ATTR_COUNT(reduce_attrs),
    .infer = infer_reduce, .codelet = &tfc_cl_reduce, .grad = tfc_grad_reduce,
};
const struct tfc_op tfc_op_reduce_min = {
    .name = "reduce_min", .n_inputs = 1, .kind = TFC_K_REDUCE_MIN,
    .attrs = reduce_attrs, .n_attrs = TFC_ATTR_COUNT(reduce_attrs),
    .infer = infer_reduce, .codelet = &tfc_cl_reduce, .grad = tfc_grad_reduce,
};
const struct tfc_op tfc_op_argmax = {
    .name = "argmax", .n_inputs = 1, .kind = TFC_K_ARGMAX, .flags = TFC_OP_NO_GRADIENT,
    .attrs = argmax_attrs, .n_attrs = TFC_ATTR_COUNT(argmax_attrs),
    .infer = infer_argmax, .codelet = &tfc_cl_reduce,
};

/* matmul and batch_matmul: their two flags share the slots MATMUL_TRANSPOSE_A and _B */
static tfc_tensor *two_flags(tfc_graph *g, const struct tfc_op *op, tfc_tensor *a, tfc_tensor *b,
                             int f0, int f1)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    at[MATMUL_TRANSPOSE_A].i = f0 != 0;
    at[MATMUL_TRANSPOSE_B].i = f1 != 0;
    tfc_tensor *in[2] = {a, b};
    return tfc_build(g, op, 2, in, at);
}

tfc_tensor *tfc_matmul(tfc_graph *g, tfc_tensor *a, tfc_tensor *b, int ta, int tb)
{
    return two_flags(g, &tfc_op_matmul, a, b, ta, tb);
}

tfc_tensor *tfc_batch_matmul(tfc_graph *g, tfc_tensor *a, tfc_tensor *b, int adj_a, int adj_b)
{
    return two_flags(g, &tfc_op_batch_matmul, a, b, adj_a, adj_b);
}

/* softmax, log_softmax and argmax: one axis attribute each (SOFTMAX_AXIS, ARGMAX_AXIS) */
static tfc_tensor *with_axis(tfc_graph *g, const struct tfc_op *op, int slot, tfc_tensor *x,
                             int64_t axis)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    at[slot].i = axis;
    return tfc_build(g, op, 1, &x, at);
}

tfc_tensor *tfc_softmax(tfc_graph *g, tfc_tensor *x, int64_t axis)
{
    return with_axis(g, &tfc_op_softmax, SOFTMAX_AXIS, x, axis);
}

tfc_tensor *tfc_log_softmax(tfc_graph *g, tfc_tensor *x, int64_t axis)
{
    return with_axis(g, &tfc_op_log_softmax, SOFTMAX_AXIS, x, axis);
}

tfc_tensor *tfc_argmax(tfc_graph *g, tfc_tensor *x, int64_t axis)
{
    return with_axis(g, &tfc_op_argmax, ARGMAX_AXIS, x, axis);
}

tfc_tensor *tfc_softmax_cross_entropy(tfc_graph *g, tfc_tensor *logits, tfc_tensor *labels)
{
    tfc_tensor *in[2] = {logits, labels};
    return tfc_build(g, &tfc_op_softmax_cross_entropy, 2, in, NULL);
}

tfc_tensor *tfc_sparse_softmax_cross_entropy(tfc_graph *g, tfc_tensor *logits, tfc_tensor *labels)
{
    tfc_tensor *in[2] = {logits, labels};
    return tfc_build(g, &tfc_op_sparse_softmax_cross_entropy, 2, in, NULL);
}

static tfc_tensor *reduce(tfc_graph *g, const struct tfc_op *op, tfc_tensor *x, int n_axes,
                          const int64_t *axes, int keepdims)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    if (n_axes < 0 || n_axes > TFC_MAX_RANK || (n_axes && !axes))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s: invalid axes (n_axes=%d)",
                              op->name, n_axes);
    at[REDUCE_AXES].n = n_axes;
    for (int i = 0; i < n_axes; i++) at[REDUCE_AXES].v[i] = axes[i];
    at[REDUCE_KEEPDIMS].i = keepdims != 0;
    return tfc_build(g, op, 1, &x, at);
}

tfc_tensor *tfc_reduce_sum(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes, int keep) { return reduce(g, &tfc_op_reduce_sum, x, n, axes, keep); }
tfc_tensor *tfc_reduce_mean(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes, int keep) { return reduce(g, &tfc_op_reduce_mean, x, n, axes, keep); }
tfc_tensor *tfc_reduce_max(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes, int keep) { return reduce(g, &tfc_op_reduce_max, x, n, axes, keep); }
tfc_tensor *tfc_reduce_min(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes, int keep) { return reduce(g, &tfc_op_reduce_min, x, n, axes, keep); }
