/* ops_reduce.c: ONNX reductions (ReduceSum's axes became an input at opset 13, the others'
 * stay an attribute through opset 17) written with our reduce_sum/mean/max/min, ArgMax /
 * ArgMin with keepdims, and Einsum (a broadcast product summed over the letters it drops). */
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

/* One Einsum operand aligned to the letters `all` (n of them): transposed into their order,
 * with a dim of 1 for each letter it lacks. */
static tfc_tensor *einsum_align(tfc_graph *g, tfc_tensor *x, const char *term, const char *all,
                                int n)
{
    int r = (int)strlen(term), order[TFC_MAX_RANK], k = 0;
    int64_t perm[TFC_MAX_RANK];
    for (int a = 0; a < n; a++) /* x's letters in the order of `all` */
        for (int i = 0; i < r; i++)
            if (term[i] == all[a]) order[k] = a, perm[k++] = i;
    tfc_tensor *t = r > 1 ? tfc_transpose(g, x, perm) : x;
    tfc_shape ts = tfc_tensor_shape(x), s = {.rank = n};
    for (int a = 0; a < n; a++) s.dims[a] = 1;
    for (int j = 0; j < k; j++) s.dims[order[j]] = ts.dims[perm[j]];
    return tfc_reshape(g, t, s);
}

/* Einsum without repeated letters in one term or ellipses: every operand aligned to all the
 * letters, multiplied with broadcasting, summed over the letters the output lacks, and
 * transposed into the output's order (implicit output: the letters used once, sorted). */
ONNX_BUILDER(onnx_einsum)
{
    tfc_graph *g = im->g;
    char eq[128], buf[128], terms[8][16], all[TFC_MAX_RANK + 1] = "", out[TFC_MAX_RANK + 1] = "";
    snprintf(eq, sizeof eq, "%s", onnx_attr_str(im->node, "equation", "", buf, sizeof buf));
    int nt = 0, n = 0, count[128] = {0};
    char *arrow = strstr(eq, "->"), *p = eq;
    if (arrow) *arrow = 0;
    for (char *t = strtok(p, ","); t && nt < 8; t = strtok(NULL, ",")) {
        int j = 0;
        for (; *t; t++) {
            if (*t == ' ') continue;
            if (*t == '.' || j >= 15) return onnx_unsupported(im, "equation '%s' (ellipses)", buf);
            for (int i = 0; i < j; i++)
                if (terms[nt][i] == *t) return onnx_unsupported(im, "equation '%s' (a letter repeated in one term)", buf);
            terms[nt][j++] = *t;
            count[*t & 127]++;
            if (!strchr(all, *t)) {
                if (n == TFC_MAX_RANK) return onnx_unsupported(im, "more than %d letters", TFC_MAX_RANK);
                all[n++] = *t, all[n] = 0;
            }
        }
        terms[nt++][j] = 0;
    }
    if (nt != (int)im->node->n_input) return onnx_unsupported(im, "equation '%s' for %zu inputs", buf, im->node->n_input);
    int no = 0;
    if (arrow) {
        for (const char *q = arrow + 2; *q && no < TFC_MAX_RANK; q++)
            if (*q != ' ') out[no++] = *q;
    } else {
        for (int c = 'A'; c <= 'z'; c++)
            if (count[c] == 1 && no < TFC_MAX_RANK) out[no++] = (char)c;
    }
    out[no] = 0;
    tfc_tensor *prod = NULL;
    for (int i = 0; i < nt; i++) {
        tfc_tensor *x = onnx_input(im, i);
        if (!x) return tfc_graph_status(g);
        if (onnx_rank(x) != (int)strlen(terms[i])) return onnx_unsupported(im, "term '%s' for rank %d", terms[i], onnx_rank(x));
        tfc_tensor *a = einsum_align(g, x, terms[i], all, n);
        prod = prod ? tfc_mul(g, prod, a) : a;
    }
    int64_t axes[TFC_MAX_RANK], perm[TFC_MAX_RANK];
    int na = 0, kept = 0;
    char left[TFC_MAX_RANK + 1];
    for (int a = 0; a < n; a++) {
        if (strchr(out, all[a])) left[kept++] = all[a];
        else axes[na++] = a;
    }
    left[kept] = 0;
    if (kept != no) return onnx_unsupported(im, "equation '%s' (an output letter no input has)", buf);
    tfc_tensor *y = na ? tfc_reduce_sum(g, prod, na, axes, 0) : prod;
    for (int i = 0; i < no; i++) perm[i] = strchr(left, out[i]) - left;
    outs[0] = no > 1 ? tfc_transpose(g, y, perm) : na ? y : tfc_identity(g, y);
    return tfc_graph_status(g);
}
