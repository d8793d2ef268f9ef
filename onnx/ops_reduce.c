/* ops_reduce.c: ONNX reductions (ReduceSum's axes became an input at opset 13, the others'
 * stay an attribute through opset 17) written with our reduce_sum/mean/max/min, and ArgMax /
 * ArgMin with keepdims. */
#include <string.h>
#include "onnx_import.h"

static tfc_status reduce_axes(struct onnx_import *im, int64_t *axes, int *n)
{
    *n = 0;
    int axes_input = !strcmp(im->node->op_type, "ReduceSum") && im->opset >= 13;
    if (!axes_input) {
        int k = onnx_attr_ints(im->node, "axes", axes, TFC_MAX_RANK);
        if (k == -2) return onnx_unsupported(im, "more than %d axes", TFC_MAX_RANK);
        *n = k < 0 ? 0 : k;
        return TFC_OK;
    }
    if (!onnx_has_input(im, 1)) return TFC_OK;
    return onnx_input_ints(im, 1, "axes", axes, TFC_MAX_RANK, n);
}

/* The product as exp(sum(log|x|)), its sign from the parity of the negative factors, 0 where
 * a factor is 0. */
static tfc_tensor *reduce_prod(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes, int keep)
{
    enum tfc_dtype dt = tfc_tensor_dtype(x);
    tfc_tensor *zero = tfc_scalar(g, dt, 0), *one = tfc_scalar(g, dt, 1), *two = tfc_scalar(g, dt, 2);
    tfc_tensor *is_zero = tfc_equal(g, x, zero);
    tfc_tensor *safe = tfc_select(g, is_zero, tfc_ones_like(g, x), tfc_abs(g, x));
    tfc_tensor *mag = tfc_exp(g, tfc_reduce_sum(g, tfc_log(g, safe), n, axes, keep));
    tfc_tensor *negs = tfc_reduce_sum(g, tfc_cast(g, tfc_less(g, x, zero), dt), n, axes, keep);
    tfc_tensor *odd = tfc_sub(g, negs, tfc_mul(g, two, tfc_floor(g, tfc_div(g, negs, two))));
    tfc_tensor *sign = tfc_sub(g, one, tfc_mul(g, two, odd));
    tfc_tensor *any_zero = tfc_reduce_max(g, tfc_cast(g, is_zero, dt), n, axes, keep);
    return tfc_mul(g, tfc_mul(g, mag, sign), tfc_sub(g, one, any_zero));
}

ONNX_BUILDER(onnx_reduce)
{
    tfc_graph *g = im->g;
    const char *op = im->node->op_type;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    int64_t axes[TFC_MAX_RANK];
    int n;
    tfc_status st = reduce_axes(im, axes, &n);
    if (st) return st;
    int keep = (int)onnx_attr_int(im->node, "keepdims", 1);
    if (n == 0 && onnx_attr_int(im->node, "noop_with_empty_axes", 0)) {
        outs[0] = tfc_identity(g, x);
        return tfc_graph_status(g);
    }
    tfc_tensor *y;
    if (!strcmp(op, "ReduceSum")) y = tfc_reduce_sum(g, x, n, axes, keep);
    else if (!strcmp(op, "ReduceMean")) y = tfc_reduce_mean(g, x, n, axes, keep);
    else if (!strcmp(op, "ReduceMax")) y = tfc_reduce_max(g, x, n, axes, keep);
    else if (!strcmp(op, "ReduceMin")) y = tfc_reduce_min(g, x, n, axes, keep);
    else if (!strcmp(op, "ReduceL1")) y = tfc_reduce_sum(g, tfc_abs(g, x), n, axes, keep);
    else if (!strcmp(op, "ReduceL2")) y = tfc_sqrt(g, tfc_reduce_sum(g, tfc_square(g, x), n, axes, keep));
    else if (!strcmp(op, "ReduceSumSquare")) y = tfc_reduce_sum(g, tfc_square(g, x), n, axes, keep);
    else if (!strcmp(op, "ReduceLogSum")) y = tfc_log(g, tfc_reduce_sum(g, x, n, axes, keep));
    else if (!strcmp(op, "ReduceProd")) y = reduce_prod(g, x, n, axes, keep);
    else if (!strcmp(op, "ReduceLogSumExp")) {
        /* log(sum(exp(x - max))) + max: no overflow for large x */
        tfc_tensor *m = tfc_stop_gradient(g, tfc_reduce_max(g, x, n, axes, 1));
        y = tfc_add(g, tfc_log(g, tfc_reduce_sum(g, tfc_exp(g, tfc_sub(g, x, m)), n, axes, 1)), m);
        if (y && !keep) y = tfc_reshape(g, y, tfc_tensor_shape(tfc_reduce_max(g, x, n, axes, 0)));
    } else
        return onnx_unsupported(im, "no reduction mapping");
    outs[0] = y;
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_argmax)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    int64_t axis = onnx_attr_int(im->node, "axis", 0);
    if (axis < 0) axis += onnx_rank(x);
    if (axis < 0 || axis >= onnx_rank(x)) return onnx_unsupported(im, "axis outside the rank");
    if (!strcmp(im->node->op_type, "ArgMin")) x = tfc_neg(g, x);
    int64_t n = tfc_tensor_shape(x).dims[axis];
    int last = (int)onnx_attr_int(im->node, "select_last_index", 0);
    if (last) { /* the first of the reversed axis is the last: n - 1 - argmax(reversed) */
        tfc_value *rev;
        if (tfc_value_create(TFC_INT64, tfc_shape_of(1, &n), &rev))
            return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
        for (int64_t i = 0; i < n; i++) ((int64_t *)tfc_value_data(rev))[i] = n - 1 - i;
        x = onnx_gather_axis(g, x, tfc_constant(g, NULL, rev), (int)axis);
        tfc_value_destroy(rev);
    }
    tfc_tensor *y = tfc_argmax(g, x, axis);
    if (y && last) y = tfc_sub(g, tfc_scalar(g, TFC_INT64, (double)(n - 1)), y);
    if (y && onnx_attr_int(im->node, "keepdims", 1)) y = tfc_unsqueeze(g, y, axis);
    outs[0] = y;
    return tfc_graph_status(g);
}
