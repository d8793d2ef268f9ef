/* ops_nn.c: descriptors, inference and builders of matmul and batched matmul, the softmax
 * family with cross-entropy, and the reductions (sum, mean, max, min, argmax). */
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
    int ta = in->attrs[0].i != 0, tb = in->attrs[1].i != 0;
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
    int ta = in->attrs[0].i != 0, tb = in->attrs[1].i != 0;
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
    if (rank < 1 || tfc_axis_norm(in->attrs[0].i, rank) < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)in->attrs[0].i, rank);
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
    const struct tfc_kattr *axes = &in->attrs[0];
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
        else if (in->attrs[1].i)
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
    int ax = tfc_axis_norm(in->attrs[0].i, s->rank);
    if (ax < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)in->attrs[0].i, s->rank);
    if (s->dims[ax] == 0)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "argmax over an empty axis");
    tfc_shape o = {0};
    for (int i = 0; i < s->rank; i++)
        if (i != ax) o.dims[o.rank++] = s->dims[i];
    in->out[0].dtype = TFC_INT64;
    in->out[0].shape = o;
    return TFC_OK;
}

static const struct tfc_attr_def matmul_attrs[] = {{"transpose_a", TFC_ATTR_INT, 0},
                                                   {"transpose_b", TFC_ATTR_INT, 0}};
static const struct tfc_attr_def bmm_attrs[] = {{"adj_a", TFC_ATTR_INT, 0}, {"adj_b", TFC_ATTR_INT, 0}};
static const struct tfc_attr_def axis_attrs[] = {{"axis", TFC_ATTR_INT, -1}};
static const struct tfc_attr_def argmax_attrs[] = {{"axis", TFC_ATTR_INT, 0}};
static const struct tfc_attr_def reduce_attrs[] = {{"axes", TFC_ATTR_INTS, 0},
                                                   {"keepdims", TFC_ATTR_INT, 0}};

const struct tfc_op tfc_op_matmul = {"matmul", 2, TFC_K_MATMUL, 0, 0, matmul_attrs, 2, NULL, infer_matmul, &tfc_cl_matmul, tfc_grad_matmul};
const struct tfc_op tfc_op_batch_matmul = {"batch_matmul", 2, TFC_K_BATCH_MATMUL, 0, 0, bmm_attrs, 2, NULL, infer_batch_matmul, &tfc_cl_matmul, tfc_grad_batch_matmul};
const struct tfc_op tfc_op_softmax = {"softmax", 1, TFC_K_SOFTMAX, 0, 0, axis_attrs, 1, NULL, infer_softmax, &tfc_cl_softmax, tfc_grad_softmax};
const struct tfc_op tfc_op_log_softmax = {"log_softmax", 1, TFC_K_LOG_SOFTMAX, 0, 0, axis_attrs, 1, NULL, infer_softmax, &tfc_cl_softmax, tfc_grad_log_softmax};
const struct tfc_op tfc_op_softmax_cross_entropy = {"softmax_cross_entropy", 2, TFC_K_XENT, 0, 0, NULL, 0, NULL, infer_dense_xent, &tfc_cl_softmax, tfc_grad_xent};
const struct tfc_op tfc_op_sparse_softmax_cross_entropy = {"sparse_softmax_cross_entropy", 2, TFC_K_SPARSE_XENT, 0, 0, NULL, 0, NULL, infer_sparse_xent, &tfc_cl_softmax, tfc_grad_sparse_xent};
const struct tfc_op tfc_op_reduce_sum = {"reduce_sum", 1, TFC_K_REDUCE_SUM, 0, 0, reduce_attrs, 2, NULL, infer_reduce, &tfc_cl_reduce, tfc_grad_reduce};
const struct tfc_op tfc_op_reduce_mean = {"reduce_mean", 1, TFC_K_REDUCE_MEAN, 0, 0, reduce_attrs, 2, NULL, infer_reduce, &tfc_cl_reduce, tfc_grad_reduce};
const struct tfc_op tfc_op_reduce_max = {"reduce_max", 1, TFC_K_REDUCE_MAX, 0, 0, reduce_attrs, 2, NULL, infer_reduce, &tfc_cl_reduce, tfc_grad_reduce};
const struct tfc_op tfc_op_reduce_min = {"reduce_min", 1, TFC_K_REDUCE_MIN, 0, 0, reduce_attrs, 2, NULL, infer_reduce, &tfc_cl_reduce, tfc_grad_reduce};
const struct tfc_op tfc_op_argmax = {"argmax", 1, TFC_K_ARGMAX, TFC_OP_NO_GRADIENT, 0, argmax_attrs, 1, NULL, infer_argmax, &tfc_cl_reduce};

static tfc_tensor *two_flags(tfc_graph *g, const struct tfc_op *op, tfc_tensor *a, tfc_tensor *b,
                             int f0, int f1)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    at[0].i = f0 != 0;
    at[1].i = f1 != 0;
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

static tfc_tensor *with_axis(tfc_graph *g, const struct tfc_op *op, tfc_tensor *x, int axis)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    at[0].i = axis;
    return tfc_build(g, op, 1, &x, at);
}

tfc_tensor *tfc_softmax(tfc_graph *g, tfc_tensor *x, int axis) { return with_axis(g, &tfc_op_softmax, x, axis); }
tfc_tensor *tfc_log_softmax(tfc_graph *g, tfc_tensor *x, int axis) { return with_axis(g, &tfc_op_log_softmax, x, axis); }
tfc_tensor *tfc_argmax(tfc_graph *g, tfc_tensor *x, int axis) { return with_axis(g, &tfc_op_argmax, x, axis); }

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
                          const int *axes, int keepdims)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    if (n_axes < 0 || n_axes > TFC_MAX_RANK || (n_axes && !axes))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s: invalid axes (n_axes=%d)",
                              op->name, n_axes);
    at[0].n = n_axes;
    for (int i = 0; i < n_axes; i++) at[0].v[i] = axes[i];
    at[1].i = keepdims != 0;
    return tfc_build(g, op, 1, &x, at);
}

tfc_tensor *tfc_reduce_sum(tfc_graph *g, tfc_tensor *x, int n, const int *axes, int keep) { return reduce(g, &tfc_op_reduce_sum, x, n, axes, keep); }
tfc_tensor *tfc_reduce_mean(tfc_graph *g, tfc_tensor *x, int n, const int *axes, int keep) { return reduce(g, &tfc_op_reduce_mean, x, n, axes, keep); }
tfc_tensor *tfc_reduce_max(tfc_graph *g, tfc_tensor *x, int n, const int *axes, int keep) { return reduce(g, &tfc_op_reduce_max, x, n, axes, keep); }
tfc_tensor *tfc_reduce_min(tfc_graph *g, tfc_tensor *x, int n, const int *axes, int keep) { return reduce(g, &tfc_op_reduce_min, x, n, axes, keep); }
