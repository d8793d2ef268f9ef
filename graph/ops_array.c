/* ops_array.c: descriptors, inference and builders of the ops that move data: reshape,
 * transpose, concat, split, slice, gather and one_hot (codelet: layout). Their attribute slots
 * are named in codelets/op_attrs.h (the layout kernels read them), reshape's here. */
#include <string.h>
#include "grad.h"

enum { RESHAPE_SHAPE }; /* only inference reads it: the kernel copies the bytes */

/* reshape: attr shape (may hold one -1) */
static tfc_status infer_reshape(const struct tfc_infer *in)
{
    const struct tfc_kattr *t = &in->attrs[RESHAPE_SHAPE];
    int64_t numel = tfc_shape_numel(&in->in[0].shape), known = 1;
    int unknown = -1, zero = 0, overflow = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->v[i] == -1) {
            if (unknown >= 0)
                return tfc_fail(in->msg, TFC_ERR_SHAPE, "more than one -1 in the target shape");
            unknown = i;
        } else if (t->v[i] < 0) {
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "dimension %d is negative", i);
        } else {
            zero |= t->v[i] == 0;
            overflow |= __builtin_mul_overflow(known, t->v[i], &known);
        }
    }
    tfc_shape o = {.rank = t->n};
    memcpy(o.dims, t->v, sizeof(int64_t) * (size_t)t->n);
    char a[96], b[96];
    if (zero) known = 0; /* no elements, however large the other dims */
    else if (overflow)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "the target shape %s has more elements than "
                        "int64 counts", tfc_shape_str(&o, b, sizeof b));
    if (numel >= 0) {
        if (unknown >= 0) {
            if (known == 0 || numel % known)
                return tfc_fail(in->msg, TFC_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                                tfc_shape_str(&in->in[0].shape, a, sizeof a), (long long)numel,
                                tfc_shape_str(&o, b, sizeof b));
            o.dims[unknown] = numel / known;
        } else if (known != numel) {
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "cannot reshape %s (%lld elements) to %s",
                            tfc_shape_str(&in->in[0].shape, a, sizeof a), (long long)numel,
                            tfc_shape_str(&o, b, sizeof b));
        }
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

/* transpose: attr perm (empty = reversed axes) */
static tfc_status infer_transpose(const struct tfc_infer *in)
{
    const tfc_shape *s = &in->in[0].shape;
    const struct tfc_kattr *p = &in->attrs[TRANSPOSE_PERM];
    if (p->n && p->n != s->rank)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "perm has %d entries for rank %d",
                        p->n, s->rank);
    int seen[TFC_MAX_RANK] = {0};
    tfc_shape o = {.rank = s->rank};
    for (int i = 0; i < s->rank; i++) {
        int ax = p->n ? tfc_axis_norm(p->v[i], s->rank) : s->rank - 1 - i;
        if (ax < 0 || seen[ax])
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "perm is not a permutation");
        seen[ax] = 1;
        o.dims[i] = s->dims[ax];
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

/* concat: attr axis */
static tfc_status infer_concat(const struct tfc_infer *in)
{
    const tfc_shape *s0 = &in->in[0].shape;
    int64_t axis = in->attrs[CONCAT_AXIS].i;
    int ax = tfc_axis_norm(axis, s0->rank);
    if (ax < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)axis, s0->rank);
    tfc_shape o = *s0;
    for (int k = 1; k < in->n_in; k++) {
        const tfc_shape *s = &in->in[k].shape;
        if (in->in[k].dtype != in->in[0].dtype)
            return tfc_fail(in->msg, TFC_ERR_DTYPE, "input %d is %s, input 0 is %s", k,
                            tfc_dtype_name(in->in[k].dtype), tfc_dtype_name(in->in[0].dtype));
        if (s->rank != s0->rank)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "input %d has rank %d, input 0 rank %d", k,
                            s->rank, s0->rank);
        for (int d = 0; d < s->rank; d++) {
            if (d == ax) continue;
            if (s->dims[d] >= 0 && o.dims[d] >= 0 && s->dims[d] != o.dims[d])
                return tfc_fail(in->msg, TFC_ERR_SHAPE,
                                "input %d has %lld on axis %d where input 0 has %lld", k,
                                (long long)s->dims[d], d, (long long)o.dims[d]);
            if (o.dims[d] < 0) o.dims[d] = s->dims[d];
        }
        if (o.dims[ax] < 0 || s->dims[ax] < 0)
            o.dims[ax] = -1;
        else if (__builtin_add_overflow(o.dims[ax], s->dims[ax], &o.dims[ax]))
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "axis %d: inputs 0 to %d hold more than "
                            "int64 counts", ax, k);
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

/* split: attrs num, axis */
static int split_outputs(const struct tfc_kattr *attrs) { return (int)attrs[SPLIT_NUM].i; }

static tfc_status infer_split(const struct tfc_infer *in)
{
    const tfc_shape *s = &in->in[0].shape;
    int64_t axis = in->attrs[SPLIT_AXIS].i, num = in->attrs[SPLIT_NUM].i;
    int ax = tfc_axis_norm(axis, s->rank);
    if (ax < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)axis, s->rank);
    if (s->dims[ax] >= 0 && s->dims[ax] % num)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "axis %d of size %lld does not split in %lld",
                        ax, (long long)s->dims[ax], (long long)num);
    for (int k = 0; k < in->n_out; k++) {
        in->out[k].dtype = in->in[0].dtype;
        in->out[k].shape = *s;
        in->out[k].shape.dims[ax] = s->dims[ax] >= 0 ? s->dims[ax] / num : -1;
    }
    return TFC_OK;
}

/* slice: attrs begin, size (-1 = to the end) */
static tfc_status infer_slice(const struct tfc_infer *in)
{
    const tfc_shape *s = &in->in[0].shape;
    const struct tfc_kattr *b = &in->attrs[SLICE_BEGIN], *z = &in->attrs[SLICE_SIZE];
    if (b->n != s->rank || z->n != s->rank)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "begin and size need %d entries (got %d and %d)", s->rank, b->n, z->n);
    tfc_shape o = {.rank = s->rank};
    for (int d = 0; d < s->rank; d++) {
        int64_t dim = s->dims[d], beg = b->v[d], len = z->v[d];
        if (beg < 0 || len < -1)
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %d: begin %lld, size %lld",
                            d, (long long)beg, (long long)len);
        if (dim >= 0 && (beg > dim || (len >= 0 && len > dim - beg))) /* beg + len may overflow */
            return tfc_fail(in->msg, TFC_ERR_SHAPE,
                            "axis %d: [%lld, %lld + %lld) is outside [0, %lld)", d,
                            (long long)beg, (long long)beg, (long long)len, (long long)dim);
        o.dims[d] = len >= 0 ? len : (dim >= 0 ? dim - beg : -1);
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

static tfc_status infer_gather(const struct tfc_infer *in)
{
    const tfc_shape *p = &in->in[0].shape, *ix = &in->in[1].shape;
    if (in->in[1].dtype != TFC_INT32 && in->in[1].dtype != TFC_INT64)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "indices must be int32 or int64, got %s",
                        tfc_dtype_name(in->in[1].dtype));
    if (p->rank < 1) return tfc_fail(in->msg, TFC_ERR_SHAPE, "params must have rank >= 1");
    if (ix->rank + p->rank - 1 > TFC_MAX_RANK)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "result rank exceeds %d", TFC_MAX_RANK);
    tfc_shape o = *ix;
    for (int d = 1; d < p->rank; d++) o.dims[o.rank++] = p->dims[d];
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

/* one_hot: attrs depth, dtype, on, off */
static tfc_status infer_one_hot(const struct tfc_infer *in)
{
    const tfc_shape *ix = &in->in[0].shape;
    if (in->in[0].dtype != TFC_INT32 && in->in[0].dtype != TFC_INT64)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "indices must be int32 or int64, got %s",
                        tfc_dtype_name(in->in[0].dtype));
    int64_t depth = in->attrs[ONE_HOT_DEPTH].i, dtype = in->attrs[ONE_HOT_DTYPE].i;
    if (depth < 0) return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "negative depth");
    if (!tfc_dtype_valid((int)dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid dtype");
    if (ix->rank + 1 > TFC_MAX_RANK)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "result rank exceeds %d", TFC_MAX_RANK);
    in->out[0].dtype = (enum tfc_dtype)dtype;
    in->out[0].shape = *ix;
    in->out[0].shape.dims[in->out[0].shape.rank++] = depth;
    return TFC_OK;
}

static const struct tfc_attr_def reshape_attrs[] = {
    [RESHAPE_SHAPE] = {"shape", TFC_ATTR_INTS, 0},
};
static const struct tfc_attr_def transpose_attrs[] = {
    [TRANSPOSE_PERM] = {"perm", TFC_ATTR_INTS, 0},
};
static const struct tfc_attr_def concat_attrs[] = {
    [CONCAT_AXIS] = {"axis", TFC_ATTR_INT, 0},
};
static const struct tfc_attr_def split_attrs[] = {
    [SPLIT_NUM] = {"num", TFC_ATTR_INT, 1},
    [SPLIT_AXIS] = {"axis", TFC_ATTR_INT, 0},
};
static const struct tfc_attr_def slice_attrs[] = {
    [SLICE_BEGIN] = {"begin", TFC_ATTR_INTS, 0},
    [SLICE_SIZE] = {"size", TFC_ATTR_INTS, 0},
};
static const struct tfc_attr_def one_hot_attrs[] = {
    [ONE_HOT_DEPTH] = {"depth", TFC_ATTR_INT, 1},
    [ONE_HOT_DTYPE] = {"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32},
    [ONE_HOT_ON] = {"on", TFC_ATTR_FLOAT, 1},
    [ONE_HOT_OFF] = {"off", TFC_ATTR_FLOAT, 0},
};

const struct tfc_op tfc_op_reshape = {
    .name = "reshape", .n_inputs = 1, .kind = TFC_K_RESHAPE,
    .attrs = reshape_attrs, .n_attrs = TFC_ATTR_COUNT(reshape_attrs),
    .infer = infer_reshape, .codelet = &tfc_cl_layout, .grad = tfc_grad_reshape,
};
const struct tfc_op tfc_op_transpose = {
    .name = "transpose", .n_inputs = 1, .kind = TFC_K_TRANSPOSE,
    .attrs = transpose_attrs, .n_attrs = TFC_ATTR_COUNT(transpose_attrs),
    .infer = infer_transpose, .codelet = &tfc_cl_layout, .grad = tfc_grad_transpose,
};
const struct tfc_op tfc_op_concat = {
    .name = "concat", .kind = TFC_K_CONCAT, .flags = TFC_OP_VARIADIC,
    .attrs = concat_attrs, .n_attrs = TFC_ATTR_COUNT(concat_attrs),
    .infer = infer_concat, .codelet = &tfc_cl_layout, .grad = tfc_grad_concat,
};
const struct tfc_op tfc_op_split = {
    .name = "split", .n_inputs = 1, .kind = TFC_K_SPLIT,
    .attrs = split_attrs, .n_attrs = TFC_ATTR_COUNT(split_attrs), .n_outputs = split_outputs,
    .infer = infer_split, .codelet = &tfc_cl_layout, .grad = tfc_grad_split,
};
const struct tfc_op tfc_op_slice = {
    .name = "slice", .n_inputs = 1, .kind = TFC_K_SLICE,
    .attrs = slice_attrs, .n_attrs = TFC_ATTR_COUNT(slice_attrs),
    .infer = infer_slice, .codelet = &tfc_cl_layout, .grad = tfc_grad_slice,
};
const struct tfc_op tfc_op_gather = {
    .name = "gather", .n_inputs = 2, .kind = TFC_K_GATHER,
    .infer = infer_gather, .codelet = &tfc_cl_layout, .grad = tfc_grad_gather,
};
const struct tfc_op tfc_op_one_hot = {
    .name = "one_hot", .n_inputs = 1, .kind = TFC_K_ONE_HOT, .flags = TFC_OP_NO_GRADIENT,
    .attrs = one_hot_attrs, .n_attrs = TFC_ATTR_COUNT(one_hot_attrs),
    .infer = infer_one_hot, .codelet = &tfc_cl_layout,
};

static void ints_attr(struct tfc_kattr *a, int n, const int64_t *v)
{
    a->n = n;
    for (int i = 0; i < n; i++) a->v[i] = v[i];
}

tfc_tensor *tfc_reshape(tfc_graph *g, tfc_tensor *x, tfc_shape shape)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_reshape, at);
    if (shape.rank < 0 || shape.rank > TFC_MAX_RANK)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "reshape: invalid rank %d", shape.rank);
    ints_attr(&at[RESHAPE_SHAPE], shape.rank, shape.dims);
    return tfc_build(g, &tfc_op_reshape, 1, &x, at);
}

tfc_tensor *tfc_transpose(tfc_graph *g, tfc_tensor *x, const int64_t *perm)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_transpose, at);
    if (perm && x) {
        struct tfc_kattr *p = &at[TRANSPOSE_PERM];
        p->n = x->desc.shape.rank;
        for (int i = 0; i < p->n; i++) p->v[i] = perm[i];
    }
    return tfc_build(g, &tfc_op_transpose, 1, &x, at);
}

tfc_tensor *tfc_concat(tfc_graph *g, int n, tfc_tensor *const *inputs, int64_t axis)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_concat, at);
    at[CONCAT_AXIS].i = axis;
    return tfc_build(g, &tfc_op_concat, n, inputs, at);
}

tfc_status tfc_split(tfc_graph *g, tfc_tensor *x, int n, int64_t axis, tfc_tensor **out)
{
    if (!g) return TFC_ERR_INVALID_ARGUMENT;
    if (n < 1 || n > TFC_MAX_OPERANDS || !out) {
        tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "split: %d parts is outside [1, %d]", n,
                        TFC_MAX_OPERANDS);
        return g->status; /* an earlier error stays the graph's */
    }
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_split, at);
    at[SPLIT_NUM].i = n;
    at[SPLIT_AXIS].i = axis;
    struct tfc_node *node = tfc_node_build(g, &tfc_op_split, NULL, 1, &x, at);
    if (!node) return g->status ? g->status : TFC_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) out[i] = &node->outputs[i];
    return TFC_OK;
}

tfc_tensor *tfc_slice(tfc_graph *g, tfc_tensor *x, const int64_t *begin, const int64_t *size)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_slice, at);
    if (x && (!begin || !size))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "slice: begin or size is NULL");
    if (x) {
        ints_attr(&at[SLICE_BEGIN], x->desc.shape.rank, begin);
        ints_attr(&at[SLICE_SIZE], x->desc.shape.rank, size);
    }
    return tfc_build(g, &tfc_op_slice, 1, &x, at);
}

tfc_tensor *tfc_gather(tfc_graph *g, tfc_tensor *params, tfc_tensor *indices)
{
    tfc_tensor *in[2] = {params, indices};
    return tfc_build(g, &tfc_op_gather, 2, in, NULL);
}

tfc_tensor *tfc_one_hot(tfc_graph *g, tfc_tensor *indices, int64_t depth, enum tfc_dtype dtype,
                        double on, double off)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_one_hot, at);
    at[ONE_HOT_DEPTH].i = depth;
    at[ONE_HOT_DTYPE].i = dtype;
    at[ONE_HOT_ON].f = on;
    at[ONE_HOT_OFF].f = off;
    return tfc_build(g, &tfc_op_one_hot, 1, &indices, at);
}
