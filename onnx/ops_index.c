/* ops_index.c: ONNX ops that pick or place elements by index: Gather (any axis), GatherElements,
 * GatherND, Compress, OneHot, ScatterElements (and opset 9's Scatter), ScatterND. Negative
 * indices wrap at run time; element-wise picks and placements are one-hot products. */
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

/* Negative indices count from the end of a dim of size `dim`, as ONNX says: idx + dim where
 * idx < 0, computed when the graph runs (folded when idx is known). */
static tfc_tensor *wrap_negative(tfc_graph *g, tfc_tensor *idx, int64_t dim)
{
    if (!idx || dim < 0) return idx;
    enum tfc_dtype dt = tfc_tensor_dtype(idx);
    tfc_tensor *neg = tfc_less(g, idx, tfc_scalar(g, dt, 0));
    return tfc_select(g, neg, tfc_add(g, idx, tfc_scalar(g, dt, (double)dim)), idx);
}

tfc_tensor *onnx_gather_axis(tfc_graph *g, tfc_tensor *x, tfc_tensor *idx, int axis)
{
    if (!x || !idx) return NULL;
    if (axis == 0) return tfc_gather(g, x, idx);
    /* bring the axis first, gather rows, then move the index dims back to where it was */
    int r = onnx_rank(x), q = onnx_rank(idx), k = axis;
    if (q + r - 1 > TFC_MAX_RANK)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "gather along axis %d: a result above rank %d",
                              axis, TFC_MAX_RANK);
    int64_t p1[TFC_MAX_RANK], p2[TFC_MAX_RANK];
    p1[0] = k;
    for (int i = 0, j = 1; i < r; i++)
        if (i != k) p1[j++] = i;
    int j = 0;
    for (int i = 0; i < k; i++) p2[j++] = q + i;
    for (int i = 0; i < q; i++) p2[j++] = i;
    for (int i = q + k; i < q + r - 1; i++) p2[j++] = i;
    tfc_tensor *y = tfc_gather(g, tfc_transpose(g, x, p1), idx);
    return y ? tfc_transpose(g, y, p2) : NULL;
}

ONNX_BUILDER(onnx_gather)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    int r = onnx_rank(x);
    int64_t axis = onnx_attr_int(im->node, "axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return onnx_unsupported(im, "axis outside the rank %d", r);
    tfc_tensor *idx = wrap_negative(g, onnx_input(im, 1), tfc_tensor_shape(x).dims[axis]);
    outs[0] = onnx_gather_axis(g, x, idx, (int)axis);
    return tfc_graph_status(g);
}

/* GatherElements: y[..., j, ...] = x[..., idx[..., j, ...], ...] along axis, as a one-hot
 * product summed over the axis (x sliced to idx's other dims first, which may be smaller). */
ONNX_BUILDER(onnx_gather_elements)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0), *idx = onnx_input(im, 1);
    if (!x || !idx) return tfc_graph_status(g);
    tfc_shape xs = tfc_tensor_shape(x), is = tfc_tensor_shape(idx);
    int r = xs.rank;
    int64_t axis = onnx_attr_int(im->node, "axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r || is.rank != r || r + 1 > TFC_MAX_RANK)
        return onnx_unsupported(im, "axis or ranks (x %d, indices %d)", r, is.rank);
    int64_t begin[TFC_MAX_RANK] = {0}, size[TFC_MAX_RANK], perm[TFC_MAX_RANK], back[TFC_MAX_RANK];
    for (int d = 0; d < r; d++) size[d] = d == axis ? -1 : is.dims[d];
    int64_t depth = xs.dims[axis];
    x = tfc_slice(g, x, begin, size);
    idx = wrap_negative(g, idx, depth);
    for (int d = 0, j = 0; d < r; d++)
        if (d != axis) perm[j++] = d;
    perm[r - 1] = axis;
    for (int d = 0; d < r; d++) back[perm[d]] = d;
    tfc_tensor *xt = tfc_unsqueeze(g, tfc_transpose(g, x, perm), r - 1);       /* [.., 1, C] */
    tfc_tensor *oh = tfc_one_hot(g, tfc_transpose(g, idx, perm), depth, tfc_tensor_dtype(x),
                                 1, 0);                                         /* [.., m, C] */
    tfc_tensor *y = tfc_reduce_sum(g, tfc_mul(g, oh, xt), 1, (int64_t[]){-1}, 0);
    outs[0] = y ? tfc_transpose(g, y, back) : NULL;
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_one_hot)
{
    tfc_graph *g = im->g;
    tfc_tensor *idx = onnx_input(im, 0);
    if (!idx) return tfc_graph_status(g);
    int64_t depth;
    const tfc_value *dv = onnx_input_value(im, 1), *vals = onnx_input_value(im, 2);
    if (!dv || tfc_value_numel(dv) != 1)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (OneHot): input 1 "
                               "(depth) must be one value known at import time", im->node->name);
    if (!vals || tfc_value_numel(vals) != 2)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (OneHot): input 2 "
                               "(values: off, on) must be two values known at import time",
                               im->node->name);
    depth = (int64_t)tfc_value_get(dv, 0);
    if (tfc_tensor_dtype(idx) != TFC_INT32 && tfc_tensor_dtype(idx) != TFC_INT64)
        idx = tfc_cast(g, idx, TFC_INT64);
    idx = wrap_negative(g, idx, depth);
    int r = onnx_rank(idx);
    int64_t axis = onnx_attr_int(im->node, "axis", -1);
    if (axis < 0) axis += r + 1;
    if (axis < 0 || axis > r) return onnx_unsupported(im, "axis outside [%d, %d]", -r - 1, r);
    tfc_tensor *y = tfc_one_hot(g, idx, depth, tfc_value_dtype(vals), tfc_value_get(vals, 1),
                                tfc_value_get(vals, 0));
    if (y && axis != r) { /* move the new last dim to axis */
        int64_t perm[TFC_MAX_RANK];
        for (int i = 0, j = 0; i <= r; i++) perm[i] = i == axis ? r : j++;
        y = tfc_transpose(g, y, perm);
    }
    outs[0] = y;
    return tfc_graph_status(g);
}

/* Compress with a constant condition: the picked indices gathered (x flattened first when the
 * node has no axis). */
ONNX_BUILDER(onnx_compress)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    const tfc_value *c = onnx_input_value(im, 1);
    if (!x) return tfc_graph_status(g);
    if (!c) return onnx_unsupported(im, "a condition computed when the graph runs (it must be known at import time)");
    const Onnx__AttributeProto *ax = onnx_attr(im->node, "axis");
    int64_t axis = ax ? onnx_attr_int(im->node, "axis", 0) : 0;
    if (!ax) x = tfc_reshape(g, x, tfc_shape_of(1, (int64_t[]){-1}));
    if (!x) return tfc_graph_status(g);
    if (axis < 0) axis += onnx_rank(x);
    int64_t dim = tfc_tensor_shape(x).dims[axis], n = 0, cnt = tfc_value_numel(c);
    if (axis < 0 || axis >= onnx_rank(x) || dim < 0 || cnt > dim)
        return onnx_unsupported(im, "this axis, or a condition longer than its dim");
    int64_t *picked = malloc((size_t)(cnt + 1) * sizeof *picked);
    if (!picked) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    for (int64_t i = 0; i < cnt; i++)
        if (tfc_value_get(c, i) != 0) picked[n++] = i;
    tfc_value *v = NULL;
    if (n && !tfc_value_from_data(TFC_INT64, tfc_shape_of(1, &n), picked, &v)) {
        outs[0] = onnx_gather_axis(g, x, tfc_constant(g, NULL, v), (int)axis);
        tfc_value_destroy(v);
    } else if (!n) { /* nothing picked: an empty slice */
        int64_t begin[TFC_MAX_RANK] = {0}, size[TFC_MAX_RANK];
        for (int d = 0; d < TFC_MAX_RANK; d++) size[d] = d == axis ? 0 : -1;
        outs[0] = tfc_slice(g, x, begin, size);
    }
    free(picked);
    return tfc_graph_status(g);
}

/* The row numbers of idx's index tuples (its last dim, k values each) in data of shape xs
 * seen as [rows, rest...]: sum of idx_j * stride_j, negative components wrapped; in float64,
 * as our reductions are for floats. */
static tfc_tensor *tuple_rows(tfc_graph *g, tfc_tensor *idx, const tfc_shape *xs, int64_t k,
                              int64_t *rows)
{
    double stride[TFC_MAX_RANK], dims[TFC_MAX_RANK];
    *rows = 1;
    for (int64_t j = k - 1; j >= 0; j--) {
        stride[j] = (double)*rows;
        dims[j] = (double)xs->dims[j];
        *rows *= xs->dims[j];
    }
    tfc_value *sv = NULL, *dv = NULL;
    if (tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &k), stride, &sv) ||
        tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(1, &k), dims, &dv)) {
        tfc_value_destroy(sv);
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    }
    tfc_tensor *fi = tfc_cast(g, idx, TFC_FLOAT64);
    tfc_tensor *neg = tfc_cast(g, tfc_less(g, fi, tfc_scalar(g, TFC_FLOAT64, 0)), TFC_FLOAT64);
    fi = tfc_add(g, fi, tfc_mul(g, tfc_constant(g, NULL, dv), neg));
    tfc_tensor *lin = tfc_reduce_sum(g, tfc_mul(g, fi, tfc_constant(g, NULL, sv)), 1,
                                     (int64_t[]){-1}, 0);
    tfc_value_destroy(sv);
    tfc_value_destroy(dv);
    return tfc_cast(g, lin, TFC_INT64);
}

/* GatherND (batch_dims 0): the index tuples become row numbers of data reshaped to
 * [prod(first k dims), rest...], then one gather. */
ONNX_BUILDER(onnx_gather_nd)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0), *idx = onnx_input(im, 1);
    if (!x || !idx) return tfc_graph_status(g);
    if (onnx_attr_int(im->node, "batch_dims", 0)) return onnx_unsupported(im, "batch_dims other than 0");
    tfc_shape xs = tfc_tensor_shape(x), is = tfc_tensor_shape(idx);
    int64_t k = is.rank ? is.dims[is.rank - 1] : -1, rows;
    if (k < 1 || k > xs.rank) return onnx_unsupported(im, "index tuples of %lld values for rank %d", (long long)k, xs.rank);
    tfc_tensor *lin = tuple_rows(g, idx, &xs, k, &rows);
    tfc_shape flat = {.rank = xs.rank - (int)k + 1};
    flat.dims[0] = rows;
    for (int d = (int)k; d < xs.rank; d++) flat.dims[d - k + 1] = xs.dims[d];
    outs[0] = tfc_gather(g, tfc_reshape(g, x, flat), lin);
    return tfc_graph_status(g);
}

/* ScatterElements (reduction none or add) where indices and updates have data's dims except
 * along axis: one-hot rows of the indices place the updates (summed over the scattered
 * entries) and mask the replaced elements. */
ONNX_BUILDER(onnx_scatter_elements)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0), *idx = onnx_input(im, 1), *upd = onnx_input(im, 2);
    if (!x || !idx || !upd) return tfc_graph_status(g);
    char buf[16];
    const char *red = onnx_attr_str(im->node, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add")) return onnx_unsupported(im, "reduction '%s'", red);
    tfc_shape xs = tfc_tensor_shape(x), is = tfc_tensor_shape(idx);
    int r = xs.rank;
    int64_t axis = onnx_attr_int(im->node, "axis", 0);
    if (axis < 0) axis += r;
    int fits = axis >= 0 && axis < r && is.rank == r && r + 1 <= TFC_MAX_RANK;
    for (int d = 0; fits && d < r; d++) fits = d == axis || is.dims[d] == xs.dims[d];
    if (!fits) return onnx_unsupported(im, "indices whose dims differ from data's off the axis");
    int64_t perm[TFC_MAX_RANK], back[TFC_MAX_RANK], depth = xs.dims[axis];
    for (int d = 0, j = 0; d < r; d++)
        if (d != axis) perm[j++] = d;
    perm[r - 1] = axis;
    for (int d = 0; d < r; d++) back[perm[d]] = d;
    enum tfc_dtype dt = tfc_tensor_dtype(x);
    tfc_tensor *oh = tfc_one_hot(g, tfc_transpose(g, wrap_negative(g, idx, depth), perm), depth,
                                 dt, 1, 0);                                     /* [.., m, C] */
    tfc_tensor *ut = tfc_unsqueeze(g, tfc_transpose(g, upd, perm), r);         /* [.., m, 1] */
    tfc_tensor *placed = tfc_reduce_sum(g, tfc_mul(g, oh, ut), 1, (int64_t[]){-2}, 0);
    tfc_tensor *hit = tfc_minimum(g, tfc_reduce_sum(g, oh, 1, (int64_t[]){-2}, 0), tfc_scalar(g, dt, 1));
    tfc_tensor *xt = tfc_transpose(g, x, perm);
    tfc_tensor *kept = !strcmp(red, "add") ? xt : tfc_mul(g, xt, tfc_sub(g, tfc_scalar(g, dt, 1), hit));
    tfc_tensor *y = tfc_add(g, kept, placed);
    outs[0] = y ? tfc_transpose(g, y, back) : NULL;
    return tfc_graph_status(g);
}

/* ScatterND (reduction none or add): data seen as [rows, rest] and the index tuples as row
 * numbers; a one-hot [M, rows] matrix places the update rows (a matmul) and masks the
 * replaced ones. */
ONNX_BUILDER(onnx_scatter_nd)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0), *idx = onnx_input(im, 1), *upd = onnx_input(im, 2);
    if (!x || !idx || !upd) return tfc_graph_status(g);
    char buf[16];
    const char *red = onnx_attr_str(im->node, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add")) return onnx_unsupported(im, "reduction '%s'", red);
    enum tfc_dtype dt = tfc_tensor_dtype(x);
    if (dt != TFC_FLOAT32 && dt != TFC_FLOAT64) return onnx_unsupported(im, "data of %s", tfc_dtype_name(dt));
    tfc_shape xs = tfc_tensor_shape(x), is = tfc_tensor_shape(idx);
    int64_t k = is.rank ? is.dims[is.rank - 1] : -1, rows, rest = 1, m = 1;
    if (k < 1 || k > xs.rank) return onnx_unsupported(im, "index tuples of %lld values for rank %d", (long long)k, xs.rank);
    for (int d = (int)k; d < xs.rank; d++) rest *= xs.dims[d];
    for (int d = 0; d < is.rank - 1; d++) m *= is.dims[d];
    tfc_tensor *lin = tuple_rows(g, idx, &xs, k, &rows);
    tfc_tensor *oh = tfc_one_hot(g, tfc_reshape(g, lin, tfc_shape_of(1, &m)), rows, dt, 1, 0);
    tfc_tensor *u = tfc_reshape(g, upd, tfc_shape_of(2, (int64_t[]){m, rest}));
    tfc_tensor *placed = tfc_matmul(g, oh, u, 1, 0);                         /* [rows, rest] */
    tfc_tensor *flat = tfc_reshape(g, x, tfc_shape_of(2, (int64_t[]){rows, rest}));
    if (!strcmp(red, "none")) {
        tfc_tensor *hit = tfc_minimum(g, tfc_reduce_sum(g, oh, 1, (int64_t[]){0}, 0), tfc_scalar(g, dt, 1));
        hit = tfc_reshape(g, hit, tfc_shape_of(2, (int64_t[]){rows, 1}));
        flat = tfc_mul(g, flat, tfc_sub(g, tfc_scalar(g, dt, 1), hit));
    }
    outs[0] = tfc_reshape(g, tfc_add(g, flat, placed), xs);
    return tfc_graph_status(g);
}
