/* fold.c: ONNX ops whose results are known at import time, so that the value-dependent
 * arguments downstream (a Reshape's shape from Shape, a ConstantOfShape's fill) can be read:
 * Constant, Shape and Size of statically shaped tensors, ConstantOfShape and Range of constant
 * inputs. Their outputs are values; a constant node is made only where an op needs a tensor. */
#include <math.h>
#include <string.h>
#include "onnx_import.h"

static tfc_status new_value(struct onnx_import *im, enum tfc_dtype dt, tfc_shape s, tfc_value **out)
{
    if (tfc_value_create(dt, s, out))
        return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    return TFC_OK;
}

ONNX_BUILDER(onnx_constant)
{
    const Onnx__NodeProto *n = im->node;
    const Onnx__AttributeProto *a;
    char what[300];
    snprintf(what, sizeof what, "node '%s' (Constant) value", n->name);
    if ((a = onnx_attr(n, "value")) && a->t)
        return tfc_onnx_tensor_value(im->g, a->t, im->model_dir, what, &out_values[0]);
    tfc_status st;
    if ((a = onnx_attr(n, "value_float")) && a->has_f) {
        if ((st = new_value(im, TFC_FLOAT32, tfc_shape_of(0, NULL), &out_values[0]))) return st;
        *(float *)tfc_value_data(out_values[0]) = a->f;
        return TFC_OK;
    }
    if ((a = onnx_attr(n, "value_int")) && a->has_i) {
        if ((st = new_value(im, TFC_INT64, tfc_shape_of(0, NULL), &out_values[0]))) return st;
        *(int64_t *)tfc_value_data(out_values[0]) = a->i;
        return TFC_OK;
    }
    if ((a = onnx_attr(n, "value_floats"))) {
        int64_t len = (int64_t)a->n_floats;
        if ((st = new_value(im, TFC_FLOAT32, tfc_shape_of(1, &len), &out_values[0]))) return st;
        if (len) memcpy(tfc_value_data(out_values[0]), a->floats, (size_t)len * sizeof(float));
        return TFC_OK;
    }
    if ((a = onnx_attr(n, "value_ints"))) {
        int64_t len = (int64_t)a->n_ints;
        if ((st = new_value(im, TFC_INT64, tfc_shape_of(1, &len), &out_values[0]))) return st;
        if (len) memcpy(tfc_value_data(out_values[0]), a->ints, (size_t)len * sizeof(int64_t));
        return TFC_OK;
    }
    return onnx_unsupported(im, "a Constant without value, value_float(s) or value_int(s) "
                                "(sparse and string constants are not supported)");
}

/* The static shape of input 0, every dim known. */
static tfc_status static_shape(struct onnx_import *im, tfc_shape *s)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    *s = tfc_tensor_shape(x);
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] < 0)
            return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT,
                                   "ONNX node '%s' (%s): dim %d of '%s' is known only when the "
                                   "graph runs (we fold shapes at import time)", im->node->name,
                                   im->node->op_type, d, im->node->input[0]);
    return TFC_OK;
}

ONNX_BUILDER(onnx_shape)
{
    tfc_shape s;
    tfc_status st = static_shape(im, &s);
    if (st) return st;
    int64_t start = onnx_attr_int(im->node, "start", 0), end = onnx_attr_int(im->node, "end", s.rank);
    if (start < 0) start += s.rank;
    if (end < 0) end += s.rank;
    start = start < 0 ? 0 : start > s.rank ? s.rank : start;
    end = end < start ? start : end > s.rank ? s.rank : end;
    int64_t len = end - start;
    if ((st = new_value(im, TFC_INT64, tfc_shape_of(1, &len), &out_values[0]))) return st;
    if (len) memcpy(tfc_value_data(out_values[0]), s.dims + start, (size_t)len * sizeof(int64_t));
    return TFC_OK;
}

ONNX_BUILDER(onnx_size)
{
    tfc_shape s;
    tfc_status st = static_shape(im, &s);
    if (st) return st;
    if ((st = new_value(im, TFC_INT64, tfc_shape_of(0, NULL), &out_values[0]))) return st;
    *(int64_t *)tfc_value_data(out_values[0]) = tfc_shape_numel(&s);
    return TFC_OK;
}

ONNX_BUILDER(onnx_constant_of_shape)
{
    int64_t dims[TFC_MAX_RANK];
    int n;
    tfc_status st = onnx_input_ints(im, 0, "shape", dims, TFC_MAX_RANK, &n);
    if (st) return st;
    for (int i = 0; i < n; i++)
        if (dims[i] < 0) return onnx_unsupported(im, "a negative dim %lld", (long long)dims[i]);
    const Onnx__AttributeProto *a = onnx_attr(im->node, "value");
    tfc_value *fill = NULL;
    if (a && a->t) {
        char what[300];
        snprintf(what, sizeof what, "node '%s' (ConstantOfShape) value", im->node->name);
        if ((st = tfc_onnx_tensor_value(im->g, a->t, im->model_dir, what, &fill))) return st;
        if (tfc_value_numel(fill) != 1) {
            tfc_value_destroy(fill);
            return onnx_unsupported(im, "a value of other than one element");
        }
    }
    enum tfc_dtype dt = fill ? tfc_value_dtype(fill) : TFC_FLOAT32;
    st = new_value(im, dt, tfc_shape_of(n, dims), &out_values[0]);
    if (!st && fill) {
        size_t es = tfc_dtype_size(dt);
        uint8_t *p = tfc_value_data(out_values[0]);
        for (int64_t i = 0; i < tfc_value_numel(out_values[0]); i++)
            memcpy(p + (size_t)i * es, tfc_value_cdata(fill), es);
    }
    tfc_value_destroy(fill);
    return st;
}

ONNX_BUILDER(onnx_range)
{
    const tfc_value *v[3];
    for (int i = 0; i < 3; i++)
        if (!(v[i] = onnx_input_value(im, i)))
            return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (Range): "
                                   "input %d must be known at import time", im->node->name, i);
    double start = tfc_value_get(v[0], 0), limit = tfc_value_get(v[1], 0),
           delta = tfc_value_get(v[2], 0);
    if (delta == 0) return onnx_unsupported(im, "delta 0");
    double cnt = ceil((limit - start) / delta);
    int64_t len = cnt > 0 ? (int64_t)cnt : 0;
    enum tfc_dtype dt = tfc_value_dtype(v[0]);
    tfc_status st = new_value(im, dt, tfc_shape_of(1, &len), &out_values[0]);
    if (st) return st;
    void *p = tfc_value_data(out_values[0]);
    for (int64_t i = 0; i < len; i++) {
        double x = start + (double)i * delta;
        switch (dt) {
        case TFC_FLOAT32: ((float *)p)[i] = (float)x; break;
        case TFC_FLOAT64: ((double *)p)[i] = x; break;
        case TFC_INT32: ((int32_t *)p)[i] = (int32_t)x; break;
        case TFC_INT64: ((int64_t *)p)[i] = (int64_t)x; break;
        default: return onnx_unsupported(im, "Range of %s", tfc_dtype_name(dt));
        }
    }
    return TFC_OK;
}

int onnx_inputs_known(struct onnx_import *im)
{
    const Onnx__NodeProto *n = im->node;
    int any = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!onnx_has_input(im, (int)i)) continue;
        struct onnx_sym *s = onnx_sym_find(im, n->input[i]);
        if (!s || !s->value) return 0;
        any = 1;
    }
    return any;
}

/* A node whose inputs are all known computes now, in a session of its own (shape arithmetic
 * in exported models: Shape -> Gather -> Concat -> Reshape), so that what depends on its
 * values can be read at import time. The context is made on first need (it joins a StarPU the
 * application already runs). */
tfc_status onnx_fold_outputs(struct onnx_import *im, tfc_tensor **outs, tfc_value **vals)
{
    tfc_tensor *fetch[64];
    int idx[64], n = 0;
    for (size_t k = 0; k < im->node->n_output && k < 64; k++)
        if (outs[k] && !vals[k]) {
            idx[n] = (int)k;
            fetch[n++] = outs[k];
        }
    if (n == 0) return TFC_OK;
    if (!im->ctx && tfc_ctx_create(&im->ctx))
        return tfc_graph_error(im->g, TFC_ERR_RUNTIME, "ONNX node '%s' (%s): folding its constant "
                               "inputs needs a runtime: %s", im->node->name, im->node->op_type,
                               tfc_errmsg());
    tfc_session *s;
    if (tfc_session_create(im->ctx, im->g, &s))
        return tfc_graph_error(im->g, TFC_ERR_RUNTIME, "ONNX node '%s' (%s): folding: %s",
                               im->node->name, im->node->op_type, tfc_errmsg());
    tfc_value *got[64] = {0};
    tfc_status st = tfc_session_run(s, 0, NULL, NULL, n, fetch, got, 0, NULL);
    if (st)
        tfc_graph_error(im->g, st, "ONNX node '%s' (%s): folding its constant inputs: %s",
                        im->node->name, im->node->op_type, tfc_session_errmsg(s));
    tfc_session_destroy(s);
    for (int i = 0; !st && i < n; i++) vals[idx[i]] = got[i];
    return st;
}

/* Hann, Hamming and Blackman windows of a constant size, computed now (ONNX's formulas:
 * periodic divides by size, symmetric by size - 1). */
ONNX_BUILDER(onnx_window)
{
    int64_t size;
    int n;
    tfc_status st = onnx_input_ints(im, 0, "size", &size, 1, &n);
    if (st) return st;
    if (n != 1 || size < 0) return onnx_unsupported(im, "a size other than one value >= 0");
    int dt = tfc_onnx_dtype((int32_t)onnx_attr_int(im->node, "output_datatype", 1));
    if (dt != TFC_FLOAT32 && dt != TFC_FLOAT64) return onnx_unsupported(im, "a non-float output_datatype");
    const char *op = im->node->op_type;
    double a0 = 0.5, a1 = 0.5, a2 = 0;
    if (!strcmp(op, "HammingWindow")) a0 = 25.0 / 46, a1 = 1 - a0;
    if (!strcmp(op, "BlackmanWindow")) a0 = 0.42, a1 = 0.5, a2 = 0.08;
    double span = onnx_attr_int(im->node, "periodic", 1) ? (double)size : (double)size - 1;
    if ((st = new_value(im, (enum tfc_dtype)dt, tfc_shape_of(1, &size), &out_values[0]))) return st;
    for (int64_t i = 0; i < size; i++) {
        double t = 2 * M_PI * (double)i / span;
        double w = a0 - a1 * cos(t) + a2 * cos(2 * t);
        if (dt == TFC_FLOAT32) ((float *)tfc_value_data(out_values[0]))[i] = (float)w;
        else ((double *)tfc_value_data(out_values[0]))[i] = w;
    }
    return TFC_OK;
}
