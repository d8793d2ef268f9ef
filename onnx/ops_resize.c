/* ops_resize.c: ONNX Resize (opsets 10 to 17) and Upsample, axis by axis: each output index
 * maps back to a source coordinate by the coordinate_transformation_mode, then picks its
 * neighbours (nearest: 1 by nearest_mode; linear: 2; cubic: 4 with cubic_coeff_a and
 * exclude_outside), clamped to the edge as ONNX's reference does. The picks are constant
 * gathers and the weights constants, so a resize is a few gathers, products and sums. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

struct resize_mode {
    char mode[16], coord[32], nearest[24];
    double cubic_a, extrapolation;
    int exclude_outside;
};

/* out is the resized length as ONNX's reference takes it: in * scale, not rounded, when
 * scales are given. */
static double source_coord(const struct resize_mode *m, int64_t o, int64_t in, double out,
                           double scale, double roi_lo, double roi_hi, int *outside)
{
    double x = (double)o;
    *outside = 0;
    if (!strcmp(m->coord, "asymmetric")) return x / scale;
    if (!strcmp(m->coord, "align_corners")) return out == 1 ? 0 : x * (double)(in - 1) / (double)(out - 1);
    if (!strcmp(m->coord, "pytorch_half_pixel")) return out > 1 ? (x + 0.5) / scale - 0.5 : 0;
    if (!strcmp(m->coord, "tf_half_pixel_for_nearest") || !strcmp(m->coord, "tf_half_pixel_for_nn"))
        return (x + 0.5) / scale; /* the second is opset 11's name */
    if (!strcmp(m->coord, "tf_crop_and_resize")) {
        double c = out > 1 ? roi_lo * (double)(in - 1) + x * (roi_hi - roi_lo) * (double)(in - 1) / (double)(out - 1)
                           : 0.5 * (roi_lo + roi_hi) * (double)(in - 1);
        *outside = c < 0 || c > (double)(in - 1);
        return c;
    }
    return (x + 0.5) / scale - 0.5; /* half_pixel */
}

static int64_t nearest_index(const struct resize_mode *m, double c)
{
    if (!strcmp(m->nearest, "floor")) return (int64_t)floor(c);
    if (!strcmp(m->nearest, "ceil")) return (int64_t)ceil(c);
    if (!strcmp(m->nearest, "round_prefer_ceil")) return (int64_t)floor(c + 0.5);
    return c == floor(c) + 0.5 ? (int64_t)floor(c) : (int64_t)floor(c + 0.5); /* prefer floor */
}

static void cubic_coeffs(double r, double a, double *c)
{
    c[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
    c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    c[2] = ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1;
    c[3] = ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a;
}

/* Neighbours and weights of every output index of one axis: idx[k * out + o], w[...], and
 * extra[o] (the extrapolation value where the source falls outside). Returns K. */
static int axis_taps(const struct resize_mode *m, int64_t in, int64_t out, double out_len,
                     double scale, double roi_lo, double roi_hi, int64_t *idx, double *w,
                     double *extra)
{
    int K = !strcmp(m->mode, "nearest") ? 1 : !strcmp(m->mode, "linear") ? 2 : 4;
    for (int64_t o = 0; o < out; o++) {
        int outside;
        double c = source_coord(m, o, in, out_len, scale, roi_lo, roi_hi, &outside);
        double cw[4] = {1, 0, 0, 0};
        int64_t first = K == 1 ? nearest_index(m, c) : (int64_t)floor(c) - (K == 4);
        double r = c - floor(c);
        if (K == 2) cw[0] = 1 - r, cw[1] = r;
        if (K == 4) cubic_coeffs(r, m->cubic_a, cw);
        double sum = 0;
        for (int k = 0; k < K; k++) {
            int64_t j = first + k;
            if (m->exclude_outside && (j < 0 || j >= in)) cw[k] = 0;
            sum += cw[k];
            idx[k * out + o] = j < 0 ? 0 : j >= in ? in - 1 : j;
        }
        for (int k = 0; k < K; k++) w[k * out + o] = outside ? 0 : m->exclude_outside ? cw[k] / sum : cw[k];
        extra[o] = outside ? m->extrapolation : 0;
    }
    return K;
}

static tfc_tensor *const_1d(tfc_graph *g, enum tfc_dtype dt, int64_t n, const int64_t *iv,
                            const double *dv, int rank, int axis)
{
    tfc_shape s = {.rank = iv ? 1 : rank};
    for (int d = 0; d < s.rank; d++) s.dims[d] = 1;
    s.dims[iv ? 0 : axis] = n;
    tfc_value *v;
    if (tfc_value_create(dt, s, &v))
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    for (int64_t i = 0; i < n; i++) {
        if (dt == TFC_INT64) ((int64_t *)tfc_value_data(v))[i] = iv[i];
        else if (dt == TFC_FLOAT32) ((float *)tfc_value_data(v))[i] = (float)dv[i];
        else ((double *)tfc_value_data(v))[i] = dv[i];
    }
    tfc_tensor *t = tfc_constant(g, NULL, v);
    tfc_value_destroy(v);
    return t;
}

static tfc_tensor *resize_axis(tfc_graph *g, tfc_tensor *x, int axis, int64_t out, double out_len,
                               double scale, double roi_lo, double roi_hi,
                               const struct resize_mode *m)
{
    int64_t in = tfc_tensor_shape(x).dims[axis];
    int rank = onnx_rank(x);
    enum tfc_dtype dt = tfc_tensor_dtype(x);
    int64_t *idx = malloc((size_t)(4 * out + 1) * sizeof *idx);
    double *w = malloc((size_t)(4 * out + 1) * sizeof *w), *extra = malloc((size_t)(out + 1) * sizeof *extra);
    tfc_tensor *y = NULL;
    if (!idx || !w || !extra) {
        tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    } else {
        int K = axis_taps(m, in, out, out_len, scale, roi_lo, roi_hi, idx, w, extra);
        int weighted = K > 1 || !strcmp(m->coord, "tf_crop_and_resize");
        for (int k = 0; k < K; k++) {
            tfc_tensor *t = onnx_gather_axis(g, x, const_1d(g, TFC_INT64, out, idx + k * out, NULL, 1, 0), axis);
            if (weighted) t = tfc_mul(g, t, const_1d(g, dt, out, NULL, w + k * out, rank, axis));
            y = y ? tfc_add(g, y, t) : t;
        }
        if (!strcmp(m->coord, "tf_crop_and_resize"))
            y = tfc_add(g, y, const_1d(g, dt, out, NULL, extra, rank, axis));
    }
    free(idx);
    free(w);
    free(extra);
    return y;
}

static void read_mode(struct onnx_import *im, struct resize_mode *m)
{
    const Onnx__NodeProto *n = im->node;
    int legacy = im->opset < 11 || !strcmp(n->op_type, "Upsample"); /* asymmetric, floor */
    char b1[32], b2[32], b3[32];
    snprintf(m->mode, sizeof m->mode, "%s", onnx_attr_str(n, "mode", "nearest", b1, sizeof b1));
    snprintf(m->coord, sizeof m->coord, "%s", legacy ? "asymmetric"
             : onnx_attr_str(n, "coordinate_transformation_mode", "half_pixel", b2, sizeof b2));
    snprintf(m->nearest, sizeof m->nearest, "%s", legacy ? "floor"
             : onnx_attr_str(n, "nearest_mode", "round_prefer_floor", b3, sizeof b3));
    if (!strcmp(m->mode, "bilinear") || !strcmp(m->mode, "trilinear")) snprintf(m->mode, sizeof m->mode, "linear");
    m->cubic_a = onnx_attr_float(n, "cubic_coeff_a", -0.75);
    m->exclude_outside = (int)onnx_attr_int(n, "exclude_outside", 0);
    m->extrapolation = onnx_attr_float(n, "extrapolation_value", 0);
}

ONNX_BUILDER(onnx_resize)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    struct resize_mode m;
    read_mode(im, &m);
    if (strcmp(m.mode, "nearest") && strcmp(m.mode, "linear") && strcmp(m.mode, "cubic"))
        return onnx_unsupported(im, "mode '%s'", m.mode);
    static const char *const coords[] = {"half_pixel", "asymmetric", "align_corners",
        "pytorch_half_pixel", "tf_half_pixel_for_nearest", "tf_half_pixel_for_nn",
        "tf_crop_and_resize"};
    int known = 0;
    for (size_t i = 0; i < sizeof coords / sizeof coords[0]; i++) known |= !strcmp(m.coord, coords[i]);
    if (!known) return onnx_unsupported(im, "coordinate_transformation_mode '%s'", m.coord);
    tfc_shape xs = tfc_tensor_shape(x);
    int r = xs.rank;
    int scales_in = im->opset < 11 || !strcmp(im->node->op_type, "Upsample") ? 1 : 2;
    const tfc_value *roi = im->opset >= 11 ? onnx_input_value(im, 1) : NULL;
    const tfc_value *scales = onnx_input_value(im, scales_in), *sizes = onnx_input_value(im, 3);
    if (scales && tfc_value_numel(scales) == 0) scales = NULL;
    if (!strcmp(m.coord, "tf_crop_and_resize") && onnx_has_input(im, 1) && !roi)
        return onnx_unsupported(im, "a roi computed when the graph runs (it must be known at import time)");
    if (!scales && !sizes)
        return onnx_unsupported(im, "scales or sizes computed when the graph runs (they must be known at import time)");
    if ((scales && tfc_value_numel(scales) != r) || (sizes && tfc_value_numel(sizes) != r))
        return onnx_unsupported(im, "scales or sizes of other than one value per dim");
    for (int a = 0; a < r && x; a++) {
        int64_t in = xs.dims[a];
        if (in < 0) return onnx_unsupported(im, "resizing the unknown batch dimension");
        double scale = scales ? tfc_value_get(scales, a) : 0;
        int64_t out = sizes ? (int64_t)tfc_value_get(sizes, a) : (int64_t)floor((double)in * scale);
        if (sizes) scale = (double)out / (double)in;
        double lo = roi && tfc_value_numel(roi) == 2 * r ? tfc_value_get(roi, a) : 0;
        double hi = roi && tfc_value_numel(roi) == 2 * r ? tfc_value_get(roi, r + a) : 1;
        int crop = !strcmp(m.coord, "tf_crop_and_resize");
        if (out == in && scale == 1 && (!crop || (lo == 0 && hi == 1))) continue;
        if (out < 1) return onnx_unsupported(im, "an output size of %lld", (long long)out);
        x = resize_axis(g, x, a, out, sizes ? (double)out : (double)in * scale, scale, lo, hi, &m);
    }
    outs[0] = x == onnx_input(im, 0) ? tfc_identity(g, x) : x;
    return tfc_graph_status(g);
}
