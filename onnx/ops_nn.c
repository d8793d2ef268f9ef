/* ops_nn.c: ONNX neural-network ops: MatMul and Gemm, Conv and ConvTranspose (with a bias
 * added after), the pools, the normalizations (BatchNormalization in inference mode, before
 * and after opset 7's is_test and opset 14's training_mode), Softmax and LogSoftmax (over
 * the flattened trailing dims before opset 13, over one axis from 13) and Dropout at
 * inference (the identity). */
#include <math.h>
#include <string.h>
#include "onnx_import.h"

static tfc_tensor *scalar_like(tfc_graph *g, tfc_tensor *x, double v)
{
    return tfc_scalar(g, tfc_tensor_dtype(x), v);
}

ONNX_BUILDER(onnx_matmul)
{
    tfc_graph *g = im->g;
    tfc_tensor *a = onnx_input(im, 0), *b = onnx_input(im, 1);
    if (!a || !b) return tfc_graph_status(g);
    int ra = onnx_rank(a), rb = onnx_rank(b);
    if (ra == 1) a = tfc_unsqueeze(g, a, 0); /* NumPy: a vector is a row, then dropped */
    if (rb == 1) b = tfc_unsqueeze(g, b, 1);
    tfc_tensor *y = (ra <= 2 && rb <= 2) ? tfc_matmul(g, a, b, 0, 0)
                                         : tfc_batch_matmul(g, a, b, 0, 0);
    if (rb == 1 && y) y = tfc_squeeze(g, y, 1, (int64_t[]){-1});
    if (ra == 1 && y) y = tfc_squeeze(g, y, 1, (int64_t[]){-2 + (rb == 1)});
    outs[0] = y;
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_gemm)
{
    tfc_graph *g = im->g;
    const Onnx__NodeProto *n = im->node;
    tfc_tensor *a = onnx_input(im, 0), *b = onnx_input(im, 1);
    if (!a || !b) return tfc_graph_status(g);
    double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
    tfc_tensor *y = tfc_matmul(g, a, b, (int)onnx_attr_int(n, "transA", 0),
                               (int)onnx_attr_int(n, "transB", 0));
    if (y && alpha != 1.0) y = tfc_mul(g, y, scalar_like(g, y, alpha));
    if (y && onnx_has_input(im, 2)) {
        tfc_tensor *c = onnx_input(im, 2);
        if (c && beta != 1.0) c = tfc_mul(g, c, scalar_like(g, c, beta));
        y = tfc_add(g, y, c);
    }
    outs[0] = y;
    return tfc_graph_status(g);
}

/* Spatial attribute lists: n values, missing ones `dflt`; pads split in begin and end. */
static tfc_status spatial_attrs(struct onnx_import *im, int ns, int64_t *strides, int64_t *dil,
                                int64_t *pb, int64_t *pe)
{
    int64_t v[6];
    const Onnx__NodeProto *n = im->node;
    for (int i = 0; i < 3; i++) strides[i] = dil[i] = 1, pb[i] = pe[i] = 0;
    int k = onnx_attr_ints(n, "strides", v, 3);
    if (k >= 0 && k != ns) return onnx_unsupported(im, "strides of %d values for %d spatial dims", k, ns);
    for (int i = 0; i < k; i++) strides[i] = v[i];
    k = onnx_attr_ints(n, "dilations", v, 3);
    if (k >= 0 && k != ns) return onnx_unsupported(im, "dilations of %d values for %d spatial dims", k, ns);
    for (int i = 0; i < k; i++) dil[i] = v[i];
    k = onnx_attr_ints(n, "pads", v, 6);
    if (k >= 0 && k != 2 * ns) return onnx_unsupported(im, "pads of %d values for %d spatial dims", k, ns);
    for (int i = 0; i < ns && k > 0; i++) pb[i] = v[i], pe[i] = v[ns + i];
    return TFC_OK;
}

static int auto_pad_kind(struct onnx_import *im)
{
    char buf[32];
    const char *ap = onnx_attr_str(im->node, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER")) return TFC_CONV_PAD_SAME_UPPER;
    if (!strcmp(ap, "SAME_LOWER")) return TFC_CONV_PAD_SAME_LOWER;
    if (!strcmp(ap, "VALID")) return TFC_CONV_PAD_VALID;
    return strcmp(ap, "NOTSET") ? -1 : TFC_CONV_PAD_NOTSET;
}

/* [-1, 1, ...]: a per-channel [C] reshaped to broadcast over [N, C, spatial...]. */
static tfc_shape channel_shape(int rank)
{
    tfc_shape s = {.rank = rank - 1};
    s.dims[0] = -1;
    for (int i = 1; i < s.rank; i++) s.dims[i] = 1;
    return s;
}

/* y + bias [K] reshaped to [K, 1, ...] so that it broadcasts over the spatial dims. */
static tfc_tensor *add_channel_bias(struct onnx_import *im, tfc_tensor *y, int input)
{
    if (!y || !onnx_has_input(im, input)) return y;
    tfc_tensor *b = onnx_input(im, input);
    if (!b) return NULL;
    tfc_shape s = channel_shape(onnx_rank(y));
    return tfc_add(im->g, y, tfc_reshape(im->g, b, s));
}

ONNX_BUILDER(onnx_conv)
{
    tfc_tensor *x = onnx_input(im, 0), *w = onnx_input(im, 1);
    if (!x || !w) return tfc_graph_status(im->g);
    int ns = onnx_rank(x) - 2;
    if (ns < 1 || ns > 3) return onnx_unsupported(im, "%d spatial dims (1 to 3 are)", ns);
    tfc_conv_params p = {0};
    tfc_status st = spatial_attrs(im, ns, p.strides, p.dilations, p.pads_begin, p.pads_end);
    if (st) return st;
    p.groups = onnx_attr_int(im->node, "group", 1);
    p.auto_pad = auto_pad_kind(im);
    if (p.auto_pad < 0) return onnx_unsupported(im, "this auto_pad");
    if (p.auto_pad != TFC_CONV_PAD_NOTSET)
        for (int i = 0; i < 3; i++) p.pads_begin[i] = p.pads_end[i] = 0;
    outs[0] = add_channel_bias(im, tfc_conv(im->g, x, w, &p), 2);
    return tfc_graph_status(im->g);
}

/* ConvTranspose pads from output_shape or SAME_*, as ONNX computes them:
 * total = stride (in - 1) + output_padding + (k - 1) d + 1 - out, split between begin and end
 * (SAME_UPPER: the smaller half first). A negative total grows output_padding instead. */
static void conv_transpose_pads(const tfc_shape *xs, const tfc_shape *ws, int ns, int upper,
                                const int64_t *out, tfc_conv_transpose_params *p)
{
    for (int i = 0; i < ns; i++) {
        int64_t in = xs->dims[2 + i], k = ws->dims[2 + i];
        int64_t total = p->strides[i] * (in - 1) + p->output_padding[i] + (k - 1) * p->dilations[i]
                        + 1 - out[i];
        if (total < 0) {
            p->output_padding[i] -= total;
            total = 0;
        }
        p->pads_begin[i] = upper ? total / 2 : total - total / 2;
        p->pads_end[i] = total - p->pads_begin[i];
    }
}

ONNX_BUILDER(onnx_conv_transpose)
{
    tfc_tensor *x = onnx_input(im, 0), *w = onnx_input(im, 1);
    if (!x || !w) return tfc_graph_status(im->g);
    int ns = onnx_rank(x) - 2;
    if (ns < 1 || ns > 3) return onnx_unsupported(im, "%d spatial dims (1 to 3 are)", ns);
    int ap = auto_pad_kind(im);
    if (ap < 0) return onnx_unsupported(im, "this auto_pad");
    tfc_conv_transpose_params p = {0};
    tfc_status st = spatial_attrs(im, ns, p.strides, p.dilations, p.pads_begin, p.pads_end);
    if (st) return st;
    int64_t op[3], out[8];
    int k = onnx_attr_ints(im->node, "output_padding", op, 3);
    for (int i = 0; i < k; i++) p.output_padding[i] = op[i];
    p.groups = onnx_attr_int(im->node, "group", 1);
    tfc_shape xs = tfc_tensor_shape(x), ws = tfc_tensor_shape(w);
    int n_out = onnx_attr_ints(im->node, "output_shape", out, 8);
    if (n_out >= ns) { /* spatial sizes (the last ns values) decide the pads */
        conv_transpose_pads(&xs, &ws, ns, ap != TFC_CONV_PAD_SAME_LOWER, out + n_out - ns, &p);
    } else if (ap == TFC_CONV_PAD_SAME_UPPER || ap == TFC_CONV_PAD_SAME_LOWER) {
        for (int i = 0; i < ns; i++) out[i] = xs.dims[2 + i] * p.strides[i];
        conv_transpose_pads(&xs, &ws, ns, ap == TFC_CONV_PAD_SAME_UPPER, out, &p);
    } else if (ap == TFC_CONV_PAD_VALID) {
        for (int i = 0; i < 3; i++) p.pads_begin[i] = p.pads_end[i] = 0;
    }
    outs[0] = add_channel_bias(im, tfc_conv_transpose(im->g, x, w, &p), 2);
    return tfc_graph_status(im->g);
}

/* SAME_UPPER/LOWER pads of a pool from the input's static shape, as ONNX computes them. */
static void same_pads(const tfc_shape *xs, tfc_pool_params *p, int lower)
{
    for (int i = 0; i < p->n_spatial; i++) {
        int64_t in = xs->dims[2 + i], s = p->strides[i], k = p->kernel[i];
        int64_t d = p->dilations[i] ? p->dilations[i] : 1;
        int64_t out = (in + s - 1) / s;
        int64_t total = (out - 1) * s + (k - 1) * d + 1 - in;
        if (total < 0) total = 0;
        p->pads_begin[i] = lower ? total - total / 2 : total / 2;
        p->pads_end[i] = total - p->pads_begin[i];
    }
}

/* Our pools take pads of at most half the dilated kernel (PyTorch's rule); ONNX allows more. */
static int pads_too_large(const tfc_pool_params *p)
{
    for (int i = 0; i < p->n_spatial; i++) {
        int64_t d = p->dilations[i] ? p->dilations[i] : 1, eff = d * (p->kernel[i] - 1) + 1;
        if (2 * p->pads_begin[i] > eff || 2 * p->pads_end[i] > eff) return 1;
    }
    return 0;
}

/* Such pools pad explicitly first: max with -inf (padding never wins); average as the mean
 * of the padded input over the mean of padded ones, so the divisor counts only real elements
 * unless count_include_pad. */
static tfc_tensor *pool_padded(tfc_graph *g, tfc_tensor *x, tfc_pool_params *p, int is_max)
{
    int r = onnx_rank(x), ns = p->n_spatial;
    int64_t pb[TFC_MAX_RANK] = {0}, pe[TFC_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        pb[r - ns + i] = p->pads_begin[i];
        pe[r - ns + i] = p->pads_end[i];
        p->pads_begin[i] = p->pads_end[i] = 0;
    }
    if (is_max) return tfc_max_pool(g, tfc_pad(g, x, pb, pe, TFC_PAD_CONSTANT, -INFINITY), p, NULL);
    tfc_tensor *sum = tfc_avg_pool(g, tfc_pad(g, x, pb, pe, TFC_PAD_CONSTANT, 0), p);
    if (p->count_include_pad) return sum;
    tfc_tensor *ones = tfc_pad(g, tfc_ones_like(g, x), pb, pe, TFC_PAD_CONSTANT, 0);
    return tfc_div(g, sum, tfc_avg_pool(g, ones, p));
}

/* ONNX's Indices count over the whole [N, C, spatial...] tensor, ours within each plane:
 * add (n C + c) * plane (N must be known). */
static tfc_tensor *pool_indices(struct onnx_import *im, tfc_tensor *ind, const tfc_shape *xs)
{
    if (!ind) return NULL;
    if (xs->dims[0] < 0) return tfc_graph_fail(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' "
                                               "(MaxPool): unsupported: Indices with an unknown "
                                               "batch dimension", im->node->name);
    int64_t plane = 1, nc = xs->dims[0] * xs->dims[1];
    for (int d = 2; d < xs->rank; d++) plane *= xs->dims[d];
    tfc_shape s = {.rank = xs->rank};
    s.dims[0] = xs->dims[0];
    s.dims[1] = xs->dims[1];
    for (int d = 2; d < s.rank; d++) s.dims[d] = 1;
    tfc_value *off;
    if (tfc_value_create(TFC_INT64, s, &off))
        return tfc_graph_fail(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    for (int64_t i = 0; i < nc; i++) ((int64_t *)tfc_value_data(off))[i] = i * plane;
    tfc_tensor *t = tfc_add(im->g, ind, tfc_constant(im->g, NULL, off));
    tfc_value_destroy(off);
    return t;
}

ONNX_BUILDER(onnx_pool)
{
    const Onnx__NodeProto *n = im->node;
    int is_max = !strcmp(n->op_type, "MaxPool");
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    tfc_pool_params p = {0};
    p.n_spatial = onnx_rank(x) - 2;
    if (p.n_spatial < 1 || p.n_spatial > 3)
        return onnx_unsupported(im, "%d spatial dims (1 to 3 are)", p.n_spatial);
    if (onnx_attr_ints(n, "kernel_shape", p.kernel, 3) != p.n_spatial)
        return onnx_unsupported(im, "kernel_shape missing or not one value per spatial dim");
    tfc_status st = spatial_attrs(im, p.n_spatial, p.strides, p.dilations, p.pads_begin,
                                  p.pads_end);
    if (st) return st;
    if (onnx_attr_int(n, "storage_order", 0) != 0) return onnx_unsupported(im, "storage_order 1");
    int want_indices = is_max && n->n_output > 1 && n->output[1][0];
    p.ceil_mode = (int)onnx_attr_int(n, "ceil_mode", 0);
    p.count_include_pad = (int)onnx_attr_int(n, "count_include_pad", 0);
    int ap = auto_pad_kind(im);
    tfc_shape xs = tfc_tensor_shape(x);
    if (ap < 0) return onnx_unsupported(im, "this auto_pad");
    if (ap == TFC_CONV_PAD_VALID)
        for (int i = 0; i < 3; i++) p.pads_begin[i] = p.pads_end[i] = 0;
    if (ap == TFC_CONV_PAD_SAME_UPPER || ap == TFC_CONV_PAD_SAME_LOWER)
        same_pads(&xs, &p, ap == TFC_CONV_PAD_SAME_LOWER);
    if (!p.ceil_mode && pads_too_large(&p)) {
        if (want_indices) return onnx_unsupported(im, "the Indices output with pads above half the kernel");
        outs[0] = pool_padded(im->g, x, &p, is_max);
        return tfc_graph_status(im->g);
    }
    if (!want_indices) {
        outs[0] = is_max ? tfc_max_pool(im->g, x, &p, NULL) : tfc_avg_pool(im->g, x, &p);
        return tfc_graph_status(im->g);
    }
    tfc_tensor *ind = NULL;
    outs[0] = tfc_max_pool(im->g, x, &p, &ind);
    outs[1] = pool_indices(im, ind, &xs);
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_global_pool)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    if (!strcmp(im->node->op_type, "GlobalAveragePool")) {
        outs[0] = tfc_global_avg_pool(im->g, x);
        return TFC_OK;
    }
    int64_t axes[TFC_MAX_RANK];
    int k = 0;
    for (int d = 2; d < onnx_rank(x); d++) axes[k++] = d;
    outs[0] = tfc_reduce_max(im->g, x, k, axes, 1);
    return TFC_OK;
}

ONNX_BUILDER(onnx_batch_norm)
{
    const Onnx__NodeProto *n = im->node;
    if (im->opset < 7 && !onnx_attr_int(n, "is_test", 0))
        return onnx_unsupported(im, "is_test=0 (training mode; import for inference)");
    if (im->opset < 9 && !onnx_attr_int(n, "spatial", 1))
        return onnx_unsupported(im, "spatial=0 (statistics per element)");
    if (im->opset >= 14 && onnx_attr_int(n, "training_mode", 0))
        return onnx_unsupported(im, "training_mode=1");
    for (size_t k = 1; k < n->n_output; k++)
        if (n->output[k][0]) return onnx_unsupported(im, "output %zu (training statistics)", k);
    tfc_tensor *in[5];
    for (int i = 0; i < 5; i++)
        if (!(in[i] = onnx_input(im, i))) return tfc_graph_status(im->g);
    for (int i = 3; i < 5; i++) /* with trainable: running statistics are no parameters */
        if (!strcmp(tfc_tensor_op(in[i]), "variable") && tfc_variable_set_trainable(in[i], 0))
            return tfc_graph_status(im->g);
    tfc_batch_norm_params p = {onnx_attr_float(n, "epsilon", 1e-5), 0.1};
    tfc_tensor *inference = tfc_scalar(im->g, TFC_FLOAT32, 0);
    outs[0] = tfc_batch_norm(im->g, in[0], in[1], in[2], in[3], in[4], inference, &p);
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_instance_norm)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0), *scale = onnx_input(im, 1), *b = onnx_input(im, 2);
    if (!x || !scale || !b) return tfc_graph_status(g);
    int64_t axes[TFC_MAX_RANK];
    int k = 0;
    for (int d = 2; d < onnx_rank(x); d++) axes[k++] = d;
    tfc_tensor *mean = tfc_reduce_mean(g, x, k, axes, 1);
    tfc_tensor *c = tfc_sub(g, x, mean);
    tfc_tensor *var = tfc_reduce_mean(g, tfc_square(g, c), k, axes, 1);
    tfc_tensor *eps = scalar_like(g, x, onnx_attr_float(im->node, "epsilon", 1e-5));
    tfc_tensor *y = tfc_mul(g, c, tfc_rsqrt(g, tfc_add(g, var, eps)));
    tfc_shape s = channel_shape(onnx_rank(x));
    y = tfc_mul(g, y, tfc_reshape(g, scale, s));
    outs[0] = tfc_add(g, y, tfc_reshape(g, b, s));
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_layer_norm)
{
    tfc_graph *g = im->g;
    const Onnx__NodeProto *n = im->node;
    tfc_tensor *x = onnx_input(im, 0), *scale = onnx_input(im, 1);
    tfc_tensor *b = onnx_has_input(im, 2) ? onnx_input(im, 2) : NULL;
    if (!x || !scale) return tfc_graph_status(g);
    int rank = onnx_rank(x);
    int64_t axis = onnx_attr_int(n, "axis", -1);
    if (axis < 0) axis += rank;
    double eps = onnx_attr_float(n, "epsilon", 1e-5);
    outs[0] = tfc_layer_norm(g, x, scale, b, rank - (int)axis, eps);
    if (n->n_output > 1) { /* the statistics, kept as size-1 dims: Mean and InvStdDev */
        int64_t axes[TFC_MAX_RANK];
        int k = 0;
        for (int d = (int)axis; d < rank; d++) axes[k++] = d;
        tfc_tensor *mean = tfc_reduce_mean(g, x, k, axes, 1);
        tfc_tensor *var = tfc_reduce_mean(g, tfc_square(g, tfc_sub(g, x, mean)), k, axes, 1);
        outs[1] = mean;
        if (n->n_output > 2) outs[2] = tfc_rsqrt(g, tfc_add(g, var, scalar_like(g, x, eps)));
    }
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_softmax)
{
    tfc_graph *g = im->g;
    int log = !strcmp(im->node->op_type, "LogSoftmax");
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    if (im->opset >= 13) {
        int64_t axis = onnx_attr_int(im->node, "axis", -1);
        outs[0] = log ? tfc_log_softmax(g, x, axis) : tfc_softmax(g, x, axis);
        return tfc_graph_status(g);
    }
    /* before 13: over the dims from axis on, flattened into one */
    int64_t axis = onnx_attr_int(im->node, "axis", 1);
    tfc_tensor *flat = tfc_flatten(g, x, axis);
    tfc_tensor *y = log ? tfc_log_softmax(g, flat, 1) : tfc_softmax(g, flat, 1);
    outs[0] = tfc_reshape(g, y, tfc_tensor_shape(x));
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_dropout)
{
    tfc_graph *g = im->g;
    const Onnx__NodeProto *n = im->node;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    if (im->opset < 7 && !onnx_attr_int(n, "is_test", 0))
        return onnx_unsupported(im, "is_test=0 (training mode; import for inference)");
    if (onnx_has_input(im, 2)) {
        const tfc_value *tm = onnx_input_value(im, 2);
        if (!tm) return onnx_unsupported(im, "a training_mode computed when the graph runs (it must be known at import time)");
        double ratio = onnx_has_input(im, 1) && onnx_input_value(im, 1)
                           ? tfc_value_get(onnx_input_value(im, 1), 0) : 0.5;
        if (tfc_value_get(tm, 0) != 0 && ratio != 0)
            return onnx_unsupported(im, "training_mode=1 (random masks)");
    }
    outs[0] = tfc_identity(g, x);
    if (n->n_output > 1 && n->output[1][0])
        outs[1] = tfc_cast(g, tfc_ones_like(g, x), TFC_BOOL); /* nothing dropped */
    return tfc_graph_status(g);
}

/* LRN: x / (bias + alpha / size * sum of x^2 over a window of `size` channels)^beta; the sum is
 * an average pool over the channel dim of x^2 seen as [N, 1, C, rest], times size. */
ONNX_BUILDER(onnx_lrn)
{
    tfc_graph *g = im->g;
    const Onnx__NodeProto *n = im->node;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    tfc_shape xs = tfc_tensor_shape(x);
    int64_t size = onnx_attr_int(n, "size", 0), rest = 1;
    if (xs.rank < 3 || size < 1) return onnx_unsupported(im, "rank below 3 or size below 1");
    for (int d = 2; d < xs.rank; d++) rest *= xs.dims[d];
    tfc_tensor *sq = tfc_reshape(g, tfc_square(g, x), tfc_shape_of(4, (int64_t[]){xs.dims[0], 1, xs.dims[1], rest}));
    tfc_pool_params p = {.n_spatial = 2, .kernel = {size, 1}, .count_include_pad = 1};
    p.pads_begin[0] = (size - 1) / 2;
    p.pads_end[0] = size - 1 - (size - 1) / 2;
    tfc_tensor *mean = tfc_reshape(g, tfc_avg_pool(g, sq, &p), xs); /* sum / size */
    tfc_tensor *base = tfc_add(g, scalar_like(g, x, onnx_attr_float(n, "bias", 1.0)),
                               tfc_mul(g, mean, scalar_like(g, x, onnx_attr_float(n, "alpha", 1e-4))));
    outs[0] = tfc_div(g, x, tfc_pow(g, base, scalar_like(g, x, onnx_attr_float(n, "beta", 0.75))));
    return tfc_graph_status(g);
}

/* DepthToSpace (DCR and CRD modes) and SpaceToDepth: a reshape, a transpose, a reshape. */
ONNX_BUILDER(onnx_depth_to_space)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    tfc_shape s = tfc_tensor_shape(x);
    int64_t b = onnx_attr_int(im->node, "blocksize", 0);
    if (s.rank != 4 || b < 1) return onnx_unsupported(im, "rank other than 4 or blocksize below 1");
    int64_t N = s.dims[0], C = s.dims[1], H = s.dims[2], W = s.dims[3];
    char buf[8];
    tfc_tensor *y;
    if (!strcmp(im->node->op_type, "SpaceToDepth")) {
        y = tfc_reshape(g, x, tfc_shape_of(6, (int64_t[]){N, C, H / b, b, W / b, b}));
        y = tfc_transpose(g, y, (int64_t[]){0, 3, 5, 1, 2, 4});
        outs[0] = tfc_reshape(g, y, tfc_shape_of(4, (int64_t[]){N, C * b * b, H / b, W / b}));
    } else if (!strcmp(onnx_attr_str(im->node, "mode", "DCR", buf, sizeof buf), "CRD")) {
        y = tfc_reshape(g, x, tfc_shape_of(6, (int64_t[]){N, C / (b * b), b, b, H, W}));
        y = tfc_transpose(g, y, (int64_t[]){0, 1, 4, 2, 5, 3});
        outs[0] = tfc_reshape(g, y, tfc_shape_of(4, (int64_t[]){N, C / (b * b), H * b, W * b}));
    } else {
        y = tfc_reshape(g, x, tfc_shape_of(6, (int64_t[]){N, b, b, C / (b * b), H, W}));
        y = tfc_transpose(g, y, (int64_t[]){0, 3, 4, 1, 5, 2});
        outs[0] = tfc_reshape(g, y, tfc_shape_of(4, (int64_t[]){N, C / (b * b), H * b, W * b}));
    }
    return tfc_graph_status(g);
}
