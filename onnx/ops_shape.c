/* ops_shape.c: ONNX shape and data-movement ops, and the arrays built from shapes (Trilu,
 * CumSum, EyeLike, Hardmax). Their value-dependent arguments (Reshape's shape, Squeeze/
 * Unsqueeze axes and Split sizes from opset 13, Slice bounds from opset 10, Expand's shape,
 * Pad's pads from 11, Tile's repeats) are read from constant inputs at import time; an input
 * computed when the graph runs is an error that names it. */
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

ONNX_BUILDER(onnx_identity)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (x) outs[0] = tfc_identity(im->g, x);
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_reshape)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int64_t dims[TFC_MAX_RANK];
    int n;
    if (im->opset < 5) {
        n = onnx_attr_ints(im->node, "shape", dims, TFC_MAX_RANK);
        if (n < 0) return onnx_unsupported(im, "no shape attribute, or one of rank above %d", TFC_MAX_RANK);
    } else {
        tfc_status st = onnx_input_ints(im, 1, "shape", dims, TFC_MAX_RANK, &n);
        if (st) return st;
    }
    tfc_shape xs = tfc_tensor_shape(x);
    int allowzero = (int)onnx_attr_int(im->node, "allowzero", 0);
    for (int i = 0; i < n; i++)
        if (dims[i] == 0 && !allowzero) {
            if (i >= xs.rank) return onnx_unsupported(im, "shape dim %d is 0 (copy) past the input's rank", i);
            dims[i] = xs.dims[i];
        }
    outs[0] = tfc_reshape(im->g, x, tfc_shape_of(n, dims));
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_flatten)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (x) outs[0] = tfc_flatten(im->g, x, onnx_attr_int(im->node, "axis", 1));
    return tfc_graph_status(im->g);
}

/* Axes of Squeeze/Unsqueeze/Reduce*: an attribute before `input_since`, an input after. */
static tfc_status axes_arg(struct onnx_import *im, int64_t input_since, int64_t *axes, int *n)
{
    *n = 0;
    if (im->opset < input_since) {
        int k = onnx_attr_ints(im->node, "axes", axes, TFC_MAX_RANK);
        if (k == -2) return onnx_unsupported(im, "more than %d axes", TFC_MAX_RANK);
        *n = k < 0 ? 0 : k;
        return TFC_OK;
    }
    if (!onnx_has_input(im, 1)) return TFC_OK;
    return onnx_input_ints(im, 1, "axes", axes, TFC_MAX_RANK, n);
}

ONNX_BUILDER(onnx_squeeze)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int64_t axes[TFC_MAX_RANK];
    int n;
    tfc_status st = axes_arg(im, 13, axes, &n);
    if (st) return st;
    outs[0] = tfc_squeeze(im->g, x, n, axes);
    return tfc_graph_status(im->g);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

tfc_tensor *onnx_unsqueeze_axes(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes)
{
    int out_rank = onnx_rank(x) + n;
    int64_t a[TFC_MAX_RANK];
    for (int i = 0; i < n && i < TFC_MAX_RANK; i++) a[i] = axes[i] < 0 ? axes[i] + out_rank : axes[i];
    qsort(a, (size_t)n, sizeof a[0], cmp_i64);
    for (int i = 0; x && i < n; i++) x = tfc_unsqueeze(g, x, a[i]); /* ascending: final positions */
    return x;
}

ONNX_BUILDER(onnx_unsqueeze)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int64_t axes[TFC_MAX_RANK];
    int n;
    tfc_status st = axes_arg(im, 13, axes, &n);
    if (st) return st;
    if (n == 0) return onnx_unsupported(im, "no axes");
    if (onnx_rank(x) + n > TFC_MAX_RANK) return onnx_unsupported(im, "a result above rank %d", TFC_MAX_RANK);
    outs[0] = onnx_unsqueeze_axes(im->g, x, n, axes);
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_transpose)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int64_t perm[TFC_MAX_RANK];
    int n = onnx_attr_ints(im->node, "perm", perm, TFC_MAX_RANK);
    if (n >= 0 && n != onnx_rank(x))
        return onnx_unsupported(im, "perm of %d values for rank %d", n, onnx_rank(x));
    outs[0] = tfc_transpose(im->g, x, n < 0 ? NULL : perm);
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_concat)
{
    int n = (int)im->node->n_input;
    tfc_tensor **xs = calloc((size_t)n + 1, sizeof *xs);
    if (!xs) return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = (xs[i] = onnx_input(im, i)) != NULL;
    if (ok) outs[0] = tfc_concat(im->g, n, xs, onnx_attr_int(im->node, "axis", 0));
    free(xs);
    return tfc_graph_status(im->g);
}

/* x[begin:begin+size] along one axis. */
static tfc_tensor *slice_axis(tfc_graph *g, tfc_tensor *x, int axis, int64_t begin, int64_t size)
{
    int64_t b[TFC_MAX_RANK] = {0}, s[TFC_MAX_RANK];
    for (int i = 0; i < TFC_MAX_RANK; i++) s[i] = -1;
    b[axis] = begin;
    s[axis] = size;
    return tfc_slice(g, x, b, s);
}

ONNX_BUILDER(onnx_split)
{
    const Onnx__NodeProto *n = im->node;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int rank = onnx_rank(x), k = (int)n->n_output;
    int64_t axis = onnx_attr_int(n, "axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return onnx_unsupported(im, "axis outside the rank %d", rank);
    int64_t sizes[64];
    int ns = -1;
    if (im->opset < 13) ns = onnx_attr_ints(n, "split", sizes, 64);
    else if (onnx_has_input(im, 1)) {
        tfc_status st = onnx_input_ints(im, 1, "split", sizes, 64, &ns);
        if (st) return st;
    }
    if (ns < 0) { /* equal parts */
        if (k > 64) return onnx_unsupported(im, "more than 64 outputs");
        if (tfc_split(im->g, x, k, axis, outs)) return tfc_graph_status(im->g);
        return TFC_OK;
    }
    if (ns != k) return onnx_unsupported(im, "%d split sizes for %d outputs", ns, k);
    int64_t at = 0;
    for (int i = 0; i < k; i++) {
        outs[i] = slice_axis(im->g, x, (int)axis, at, sizes[i]);
        at += sizes[i];
    }
    return tfc_graph_status(im->g);
}

/* ONNX slice bounds: negative from the end, clamped to [0, dim] (to [0, dim - 1] and
 * [-1, dim - 1] for a negative step). */
static int64_t clamp_bound(int64_t v, int64_t dim, int64_t lo, int64_t hi)
{
    if (v < 0) v += dim;
    return v < lo ? lo : v > hi ? hi : v;
}

/* The indices start, start + step, ... before end, as a constant; NULL and *n = 0 when none. */
static tfc_tensor *step_indices(tfc_graph *g, int64_t start, int64_t end, int64_t step, int64_t *n)
{
    *n = 0;
    for (int64_t i = start; step > 0 ? i < end : i > end; i += step) (*n)++;
    if (*n == 0) return NULL;
    tfc_value *v;
    if (tfc_value_create(TFC_INT64, tfc_shape_of(1, n), &v))
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    for (int64_t k = 0; k < *n; k++) ((int64_t *)tfc_value_data(v))[k] = start + k * step;
    tfc_tensor *t = tfc_constant(g, NULL, v);
    tfc_value_destroy(v);
    return t;
}

ONNX_BUILDER(onnx_slice)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    tfc_shape xs = tfc_tensor_shape(x);
    int64_t starts[TFC_MAX_RANK], ends[TFC_MAX_RANK], axes[TFC_MAX_RANK], steps[TFC_MAX_RANK];
    int ns, ne, na = -1, nst = -1;
    tfc_status st = TFC_OK;
    if (im->opset < 10) {
        ns = onnx_attr_ints(im->node, "starts", starts, TFC_MAX_RANK);
        ne = onnx_attr_ints(im->node, "ends", ends, TFC_MAX_RANK);
        na = onnx_attr_ints(im->node, "axes", axes, TFC_MAX_RANK);
    } else {
        st = onnx_input_ints(im, 1, "starts", starts, TFC_MAX_RANK, &ns);
        if (!st) st = onnx_input_ints(im, 2, "ends", ends, TFC_MAX_RANK, &ne);
        if (!st && onnx_has_input(im, 3)) st = onnx_input_ints(im, 3, "axes", axes, TFC_MAX_RANK, &na);
        if (!st && onnx_has_input(im, 4)) st = onnx_input_ints(im, 4, "steps", steps, TFC_MAX_RANK, &nst);
    }
    if (st) return st;
    if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return onnx_unsupported(im, "starts, ends, axes and steps of different lengths");
    int64_t begin[TFC_MAX_RANK] = {0}, size[TFC_MAX_RANK];
    int64_t gstart[TFC_MAX_RANK], gend[TFC_MAX_RANK], gstep[TFC_MAX_RANK] = {0};
    for (int d = 0; d < TFC_MAX_RANK; d++) size[d] = -1;
    for (int i = 0; i < ns; i++) {
        int64_t a = na >= 0 ? axes[i] : i, step = nst >= 0 ? steps[i] : 1;
        if (a < 0) a += xs.rank;
        if (a < 0 || a >= xs.rank) return onnx_unsupported(im, "axis %lld outside rank %d", (long long)axes[i], xs.rank);
        int64_t dim = xs.dims[a];
        if (dim < 0) return onnx_unsupported(im, "slicing the unknown batch dimension");
        if (step == 0) return onnx_unsupported(im, "step 0");
        if (step == 1) {
            int64_t b = clamp_bound(starts[i], dim, 0, dim), e = clamp_bound(ends[i], dim, 0, dim);
            begin[a] = b;
            size[a] = e > b ? e - b : 0;
        } else { /* other steps gather the elements they pick */
            gstep[a] = step;
            gstart[a] = step > 0 ? clamp_bound(starts[i], dim, 0, dim) : clamp_bound(starts[i], dim, 0, dim - 1);
            gend[a] = step > 0 ? clamp_bound(ends[i], dim, 0, dim) : clamp_bound(ends[i], dim, -1, dim - 1);
        }
    }
    tfc_tensor *y = tfc_slice(g, x, begin, size);
    for (int a = 0; a < xs.rank && y; a++) {
        if (!gstep[a]) continue;
        int64_t n;
        tfc_tensor *idx = step_indices(g, gstart[a], gend[a], gstep[a], &n);
        y = n ? onnx_gather_axis(g, y, idx, a) : slice_axis(g, y, a, 0, 0);
    }
    outs[0] = y;
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_expand)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    int64_t dims[TFC_MAX_RANK];
    int n;
    tfc_status st = onnx_input_ints(im, 1, "shape", dims, TFC_MAX_RANK, &n);
    if (st) return st;
    tfc_shape xs = tfc_tensor_shape(x), ts = tfc_shape_of(n, dims), out;
    const tfc_shape *both[2] = {&xs, &ts};
    char msg[TFC_MSG_LEN];
    if (tfc_broadcast_shapes(2, both, &out, msg))
        return tfc_graph_error(g, TFC_ERR_SHAPE, "ONNX node '%s' (Expand): %s", im->node->name, msg);
    tfc_tensor *like = tfc_fill(g, out, tfc_tensor_dtype(x), 0);
    outs[0] = tfc_op(g, "broadcast_like", 2, (tfc_tensor *[]){x, like}, NULL, NULL, 0);
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_pad)
{
    const Onnx__NodeProto *n = im->node;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int r = onnx_rank(x), np;
    int64_t pads[2 * TFC_MAX_RANK];
    double value = 0;
    if (im->opset < 11) {
        np = onnx_attr_ints(n, im->opset < 2 ? "paddings" : "pads", pads, 2 * TFC_MAX_RANK);
        value = onnx_attr_float(n, "value", 0);
    } else {
        tfc_status st = onnx_input_ints(im, 1, "pads", pads, 2 * TFC_MAX_RANK, &np);
        if (st) return st;
        if (onnx_has_input(im, 3)) return onnx_unsupported(im, "the axes input");
        if (onnx_has_input(im, 2)) {
            const tfc_value *cv = onnx_input_value(im, 2);
            if (!cv) return onnx_unsupported(im, "a constant_value computed when the graph runs (it must be known at import time)");
            if (tfc_value_numel(cv) > 0) value = tfc_value_get(cv, 0);
        }
    }
    if (np != 2 * r) return onnx_unsupported(im, "%d pads for rank %d (2 per dim are needed)", np, r);
    for (int i = 0; i < np; i++)
        if (pads[i] < 0) return onnx_unsupported(im, "negative pads (cropping)");
    char buf[32];
    const char *mode = onnx_attr_str(n, "mode", "constant", buf, sizeof buf);
    enum tfc_pad_mode m = !strcmp(mode, "reflect") ? TFC_PAD_REFLECT
                          : !strcmp(mode, "edge") ? TFC_PAD_EDGE : TFC_PAD_CONSTANT;
    if (m == TFC_PAD_CONSTANT && strcmp(mode, "constant"))
        return onnx_unsupported(im, "mode '%s' (constant, reflect, edge are)", mode);
    outs[0] = tfc_pad(im->g, x, pads, pads + r, m, value);
    return tfc_graph_status(im->g);
}

/* Tile with constant repeats: each dim's copies concatenated. */
ONNX_BUILDER(onnx_tile)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int64_t rep[TFC_MAX_RANK];
    int n;
    tfc_status st = onnx_input_ints(im, 1, "repeats", rep, TFC_MAX_RANK, &n);
    if (st) return st;
    if (n != onnx_rank(x)) return onnx_unsupported(im, "%d repeats for rank %d", n, onnx_rank(x));
    for (int d = 0; d < n && x; d++) {
        if (rep[d] < 0 || rep[d] > 4096) return onnx_unsupported(im, "repeats %lld", (long long)rep[d]);
        if (rep[d] == 1) continue;
        tfc_tensor *copies[4096];
        for (int64_t k = 0; k < rep[d]; k++) copies[k] = x;
        x = rep[d] ? tfc_concat(im->g, (int)rep[d], copies, d) : slice_axis(im->g, x, d, 0, 0);
    }
    outs[0] = x == onnx_input(im, 0) ? tfc_identity(im->g, x) : x;
    return tfc_graph_status(im->g);
}

/* Hardmax: one-hot of the argmax along axis (over the flattened dims from axis before 13). */
ONNX_BUILDER(onnx_hardmax)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    tfc_shape xs = tfc_tensor_shape(x);
    int64_t axis = onnx_attr_int(im->node, "axis", im->opset >= 13 ? -1 : 1);
    if (axis < 0) axis += xs.rank;
    tfc_tensor *t = im->opset >= 13 ? x : tfc_flatten(g, x, axis);
    int r = onnx_rank(t);
    int64_t a = im->opset >= 13 ? axis : 1;
    int64_t perm[TFC_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) perm[i] = i == a ? r - 1 : j++;
    int64_t depth = tfc_tensor_shape(t).dims[a];
    tfc_tensor *y = tfc_one_hot(g, tfc_argmax(g, t, a), depth, tfc_tensor_dtype(x), 1, 0);
    if (y && a != r - 1) y = tfc_transpose(g, y, perm);
    outs[0] = y && im->opset < 13 ? tfc_reshape(g, y, xs) : y;
    return tfc_graph_status(g);
}

/* Trilu: x times a constant mask of its last two dims (j - i >= k upper, <= k lower). */
ONNX_BUILDER(onnx_trilu)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    tfc_shape xs = tfc_tensor_shape(x);
    int64_t k = 0;
    int nk = 0;
    if (onnx_has_input(im, 1)) {
        tfc_status st = onnx_input_ints(im, 1, "k", &k, 1, &nk);
        if (st) return st;
    }
    int upper = (int)onnx_attr_int(im->node, "upper", 1);
    if (xs.rank < 2 || xs.dims[xs.rank - 1] < 0 || xs.dims[xs.rank - 2] < 0)
        return onnx_unsupported(im, "a rank below 2 or unknown last dims");
    int64_t dims[2] = {xs.dims[xs.rank - 2], xs.dims[xs.rank - 1]};
    tfc_value *mask;
    if (tfc_value_create(TFC_BOOL, tfc_shape_of(2, dims), &mask))
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    uint8_t *m = tfc_value_data(mask);
    for (int64_t i = 0; i < dims[0]; i++)
        for (int64_t j = 0; j < dims[1]; j++)
            if (m) m[i * dims[1] + j] = upper ? j - i >= k : j - i <= k;
    tfc_tensor *mt = tfc_constant(g, NULL, mask);
    tfc_value_destroy(mask);
    outs[0] = tfc_select(g, mt, x, tfc_zeros_like(g, x));
    return tfc_graph_status(g);
}

/* CumSum along a constant axis: a matmul with a triangular matrix of ones (strict when
 * exclusive, the other triangle when reverse), in float64 for integer inputs. */
ONNX_BUILDER(onnx_cumsum)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    int64_t axis;
    int na;
    tfc_status st = onnx_input_ints(im, 1, "axis", &axis, 1, &na);
    if (st) return st;
    tfc_shape xs = tfc_tensor_shape(x);
    int r = xs.rank;
    if (axis < 0) axis += r;
    if (na != 1 || axis < 0 || axis >= r || xs.dims[axis] < 0)
        return onnx_unsupported(im, "axis outside the rank, or of unknown size");
    int64_t n = xs.dims[axis];
    int excl = (int)onnx_attr_int(im->node, "exclusive", 0), rev = (int)onnx_attr_int(im->node, "reverse", 0);
    enum tfc_dtype dt = tfc_tensor_dtype(x), ct = dt == TFC_FLOAT32 ? TFC_FLOAT32 : TFC_FLOAT64;
    tfc_value *tri;
    if (tfc_value_create(ct, tfc_shape_of(2, (int64_t[]){n, n}), &tri))
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    for (int64_t i = 0; i < n; i++) /* y[j] = sum_i x[i] tri[i][j] */
        for (int64_t j = 0; j < n; j++) {
            int on = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
            if (ct == TFC_FLOAT32) ((float *)tfc_value_data(tri))[i * n + j] = (float)on;
            else ((double *)tfc_value_data(tri))[i * n + j] = on;
        }
    int64_t perm[TFC_MAX_RANK], back[TFC_MAX_RANK];
    for (int d = 0, j = 0; d < r; d++)
        if (d != axis) perm[j++] = d;
    perm[r - 1] = axis;
    for (int d = 0; d < r; d++) back[perm[d]] = d;
    tfc_tensor *xt = tfc_transpose(g, ct == dt ? x : tfc_cast(g, x, ct), perm);
    tfc_shape ts = tfc_tensor_shape(xt);
    tfc_tensor *flat = tfc_reshape(g, xt, tfc_shape_of(2, (int64_t[]){-1, n}));
    tfc_tensor *y = tfc_matmul(g, flat, tfc_constant(g, NULL, tri), 0, 0);
    tfc_value_destroy(tri);
    y = tfc_transpose(g, tfc_reshape(g, y, ts), back);
    outs[0] = ct == dt ? y : tfc_cast(g, y, dt);
    return tfc_graph_status(g);
}

/* EyeLike: ones on diagonal k of input 0's static [N, M] shape, computed now. */
ONNX_BUILDER(onnx_eye_like)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    tfc_shape s = tfc_tensor_shape(x);
    if (s.rank != 2 || s.dims[0] < 0 || s.dims[1] < 0) return onnx_unsupported(im, "a shape other than a static [N, M]");
    int dt = onnx_attr(im->node, "dtype") ? tfc_onnx_dtype((int32_t)onnx_attr_int(im->node, "dtype", 1))
                                          : (int)tfc_tensor_dtype(x);
    if (dt < 0) return onnx_unsupported(im, "this dtype");
    int64_t k = onnx_attr_int(im->node, "k", 0);
    tfc_value *v;
    if (tfc_value_create((enum tfc_dtype)dt, s, &v))
        return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    size_t es = tfc_dtype_size((enum tfc_dtype)dt);
    tfc_value *one;
    tfc_value_scalar((enum tfc_dtype)dt, 1, &one);
    for (int64_t i = 0; one && i < s.dims[0]; i++)
        if (i + k >= 0 && i + k < s.dims[1])
            memcpy((uint8_t *)tfc_value_data(v) + (size_t)(i * s.dims[1] + i + k) * es,
                   tfc_value_cdata(one), es);
    tfc_value_destroy(one);
    out_values[0] = v;
    return TFC_OK;
}
