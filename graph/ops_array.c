/* ops_array.c: descriptors, inference and builders of the ops that move data: reshape,
 * transpose, concat, split, slice, gather and one_hot (codelet: layout). */
#include <string.h>
#include "grad.h"

/* reshape: attr shape (may hold one -1) */
static tfc_status infer_reshape(const struct tfc_infer *in)
{
    const struct tfc_kattr *t = &in->attrs[0];
    int64_t numel = tfc_shape_numel(&in->in[0].shape), known = 1;
    int unknown = -1;
    for (int i = 0; i < t->n; i++) {
        if (t->v[i] == -1) {
            if (unknown >= 0)
                return tfc_fail(in->msg, TFC_ERR_SHAPE, "more than one -1 in the target shape");
            unknown = i;
        } else if (t->v[i] < 0) {
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "dimension %d is negative", i);
        } else {
            known *= t->v[i];
        }
    }
    tfc_shape o = {.rank = t->n};
    memcpy(o.dims, t->v, sizeof(int64_t) * (size_t)t->n);
    char a[96], b[96];
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
    const struct tfc_kattr *p = &in->attrs[0];
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
    int ax = tfc_axis_norm(in->attrs[0].i, s0->rank);
    if (ax < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)in->attrs[0].i, s0->rank);
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
        o.dims[ax] = (o.dims[ax] < 0 || s->dims[ax] < 0) ? -1 : o.dims[ax] + s->dims[ax];
    }
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = o;
    return TFC_OK;
}

/* split: attrs num, axis */
static int split_outputs(const struct tfc_kattr *attrs) { return (int)attrs[0].i; }

static tfc_status infer_split(const struct tfc_infer *in)
{
    const tfc_shape *s = &in->in[0].shape;
    int ax = tfc_axis_norm(in->attrs[1].i, s->rank);
    int64_t num = in->attrs[0].i;
    if (ax < 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %lld is invalid for rank %d",
                        (long long)in->attrs[1].i, s->rank);
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
    const struct tfc_kattr *b = &in->attrs[0], *z = &in->attrs[1];
    if (b->n != s->rank || z->n != s->rank)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "begin and size need %d entries (got %d and %d)", s->rank, b->n, z->n);
    tfc_shape o = {.rank = s->rank};
    for (int d = 0; d < s->rank; d++) {
        int64_t dim = s->dims[d], beg = b->v[d], len = z->v[d];
        if (beg < 0 || len < -1)
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "axis %d: begin %lld, size %lld",
                            d, (long long)beg, (long long)len);
        if (dim >= 0 && (beg > dim || (len >= 0 && beg + len > dim)))
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
    if (in->attrs[0].i < 0) return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "negative depth");
    if (!tfc_dtype_valid((int)in->attrs[1].i))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid dtype");
    if (ix->rank + 1 > TFC_MAX_RANK)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "result rank exceeds %d", TFC_MAX_RANK);
    in->out[0].dtype = (enum tfc_dtype)in->attrs[1].i;
    in->out[0].shape = *ix;
    in->out[0].shape.dims[in->out[0].shape.rank++] = in->attrs[0].i;
    return TFC_OK;
}

static const struct tfc_attr_def reshape_attrs[] = {{"shape", TFC_ATTR_INTS, 0}};
static const struct tfc_attr_def transpose_attrs[] = {{"perm", TFC_ATTR_INTS, 0}};
static const struct tfc_attr_def concat_attrs[] = {{"axis", TFC_ATTR_INT, 0}};
static const struct tfc_attr_def split_attrs[] = {{"num", TFC_ATTR_INT, 1}, {"axis", TFC_ATTR_INT, 0}};
static const struct tfc_attr_def slice_attrs[] = {{"begin", TFC_ATTR_INTS, 0}, {"size", TFC_ATTR_INTS, 0}};
static const struct tfc_attr_def one_hot_attrs[] = {{"depth", TFC_ATTR_INT, 1},
                                                    {"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32},
                                                    {"on", TFC_ATTR_FLOAT, 1},
                                                    {"off", TFC_ATTR_FLOAT, 0}};

const struct tfc_op tfc_op_reshape = {"reshape", 1, TFC_K_RESHAPE, 0, 0, reshape_attrs, 1, NULL, infer_reshape, &tfc_cl_layout, tfc_grad_reshape};
const struct tfc_op tfc_op_transpose = {"transpose", 1, TFC_K_TRANSPOSE, 0, 0, transpose_attrs, 1, NULL, infer_transpose, &tfc_cl_layout, tfc_grad_transpose};
const struct tfc_op tfc_op_concat = {"concat", 0, TFC_K_CONCAT, TFC_OP_VARIADIC, 0, concat_attrs, 1, NULL, infer_concat, &tfc_cl_layout, tfc_grad_concat};
const struct tfc_op tfc_op_split = {"split", 1, TFC_K_SPLIT, 0, 0, split_attrs, 2, split_outputs, infer_split, &tfc_cl_layout, tfc_grad_split};
const struct tfc_op tfc_op_slice = {"slice", 1, TFC_K_SLICE, 0, 0, slice_attrs, 2, NULL, infer_slice, &tfc_cl_layout, tfc_grad_slice};
const struct tfc_op tfc_op_gather = {"gather", 2, TFC_K_GATHER, 0, 0, NULL, 0, NULL, infer_gather, &tfc_cl_layout, tfc_grad_gather};
const struct tfc_op tfc_op_one_hot = {"one_hot", 1, TFC_K_ONE_HOT, TFC_OP_NO_GRADIENT, 0, one_hot_attrs, 4, NULL, infer_one_hot, &tfc_cl_layout};

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
    ints_attr(&at[0], shape.rank, shape.dims);
    return tfc_build(g, &tfc_op_reshape, 1, &x, at);
}

tfc_tensor *tfc_transpose(tfc_graph *g, tfc_tensor *x, const int *perm)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_transpose, at);
    if (perm && x) {
        at[0].n = x->desc.shape.rank;
        for (int i = 0; i < at[0].n; i++) at[0].v[i] = perm[i];
    }
    return tfc_build(g, &tfc_op_transpose, 1, &x, at);
}

tfc_tensor *tfc_concat(tfc_graph *g, int n, tfc_tensor *const *inputs, int axis)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_concat, at);
    at[0].i = axis;
    return tfc_build(g, &tfc_op_concat, n, inputs, at);
}

tfc_status tfc_split(tfc_graph *g, tfc_tensor *x, int n, int axis, tfc_tensor **out)
{
    if (!g) return TFC_ERR_INVALID_ARGUMENT;
    if (n < 1 || n > TFC_MAX_OPERANDS || !out) {
        tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "split: %d parts is outside [1, %d]", n,
                       TFC_MAX_OPERANDS);
        return g->status;
    }
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_split, at);
    at[0].i = n;
    at[1].i = axis;
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
        ints_attr(&at[0], x->desc.shape.rank, begin);
        ints_attr(&at[1], x->desc.shape.rank, size);
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
    at[0].i = depth;
    at[1].i = dtype;
    at[2].f = on;
    at[3].f = off;
    return tfc_build(g, &tfc_op_one_hot, 1, &indices, at);
}
