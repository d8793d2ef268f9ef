/* export_ops.c: the export table (each of our ops that has an ONNX form, and the function that
 * writes it at opset 17) and the exporters of the element-wise, reduction and array ops. Ops
 * left out (optimizer updates, gradients, assignments, control flow) fail the export naming
 * the op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"

#define NAME_LEN 256
#define OOM(ex) onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory")

static const struct onnx_export_map table[] = {
    {"identity", onnx_ex_simple, "Identity"}, {"stop_gradient", onnx_ex_simple, "Identity"},
    {"placeholder_with_default", onnx_ex_simple, "Identity"},
    {"neg", onnx_ex_simple, "Neg"}, {"abs", onnx_ex_simple, "Abs"},
    {"sqrt", onnx_ex_simple, "Sqrt"}, {"exp", onnx_ex_simple, "Exp"},
    {"log", onnx_ex_simple, "Log"}, {"relu", onnx_ex_simple, "Relu"},
    {"sigmoid", onnx_ex_simple, "Sigmoid"}, {"tanh", onnx_ex_simple, "Tanh"},
    {"softplus", onnx_ex_simple, "Softplus"}, {"logical_not", onnx_ex_simple, "Not"},
    {"erf", onnx_ex_simple, "Erf"}, {"selu", onnx_ex_simple, "Selu"},
    {"softsign", onnx_ex_simple, "Softsign"}, {"sin", onnx_ex_simple, "Sin"},
    {"cos", onnx_ex_simple, "Cos"}, {"sign", onnx_ex_simple, "Sign"},
    {"reciprocal", onnx_ex_simple, "Reciprocal"}, {"is_nan", onnx_ex_simple, "IsNaN"},
    {"is_inf", onnx_ex_simple, "IsInf"},
    {"floor", onnx_ex_unary_composite, "Floor"}, {"ceil", onnx_ex_unary_composite, "Ceil"},
    {"round", onnx_ex_unary_composite, "Round"}, {"square", onnx_ex_unary_composite, NULL},
    {"rsqrt", onnx_ex_unary_composite, NULL}, {"silu", onnx_ex_unary_composite, NULL},
    {"log1p", onnx_ex_unary_composite, NULL}, {"expm1", onnx_ex_unary_composite, NULL},
    {"gelu", onnx_ex_unary_composite, NULL}, {"gelu_tanh", onnx_ex_unary_composite, NULL},
    {"elu", onnx_ex_alpha, "Elu"}, {"leaky_relu", onnx_ex_alpha, "LeakyRelu"},
    {"hard_sigmoid", onnx_ex_hard_sigmoid, "HardSigmoid"},
    {"cast", onnx_ex_cast, "Cast"}, {"clip", onnx_ex_clip, "Clip"},
    {"add", onnx_ex_simple, "Add"}, {"sub", onnx_ex_simple, "Sub"},
    {"mul", onnx_ex_simple, "Mul"}, {"div", onnx_ex_simple, "Div"},
    {"maximum", onnx_ex_simple, "Max"}, {"minimum", onnx_ex_simple, "Min"},
    {"pow", onnx_ex_simple, "Pow"}, {"equal", onnx_ex_simple, "Equal"},
    {"not_equal", onnx_ex_not_equal, NULL}, {"less", onnx_ex_simple, "Less"},
    {"greater", onnx_ex_simple, "Greater"}, {"logical_and", onnx_ex_simple, "And"},
    {"logical_or", onnx_ex_simple, "Or"}, {"select", onnx_ex_simple, "Where"},
    {"bias_add", onnx_ex_simple, "Add"}, /* [..., C] + [C] broadcasts along the last axis */
    {"add_n", onnx_ex_simple, "Sum"}, {"gather", onnx_ex_simple, "Gather"},
    {"zeros_like", onnx_ex_fill_like, NULL}, {"ones_like", onnx_ex_fill_like, NULL},
    {"fill", onnx_ex_fill, NULL},
    {"reduce_sum", onnx_ex_reduce, "ReduceSum"}, {"reduce_mean", onnx_ex_reduce, "ReduceMean"},
    {"reduce_max", onnx_ex_reduce, "ReduceMax"}, {"reduce_min", onnx_ex_reduce, "ReduceMin"},
    {"softmax", onnx_ex_axis, "Softmax"}, {"log_softmax", onnx_ex_axis, "LogSoftmax"},
    {"concat", onnx_ex_axis, "Concat"}, {"argmax", onnx_ex_argmax, "ArgMax"},
    {"reshape", onnx_ex_reshape, "Reshape"}, {"transpose", onnx_ex_transpose, "Transpose"},
    {"split", onnx_ex_split, "Split"}, {"slice", onnx_ex_slice, "Slice"},
    {"one_hot", onnx_ex_one_hot, "OneHot"},
    {"reshape_like", onnx_ex_like, "Reshape"}, {"broadcast_like", onnx_ex_like, "Expand"},
    {"matmul", onnx_ex_matmul, NULL}, {"batch_matmul", onnx_ex_batch_matmul, "MatMul"},
    {"conv", onnx_ex_conv, "Conv"}, {"conv_transpose", onnx_ex_conv, "ConvTranspose"},
    {"max_pool", onnx_ex_pool, "MaxPool"}, {"avg_pool", onnx_ex_pool, "AveragePool"},
    {"pad", onnx_ex_pad, "Pad"},
    {"batch_norm", onnx_ex_batch_norm, "BatchNormalization", 1u << 5}, /* training */
    {"layer_norm", onnx_ex_layer_norm, "LayerNormalization"},
    {"dropout", onnx_ex_dropout, NULL, 1u << 1 | 1u << 2}, /* step, training */
    {"sparse_softmax_cross_entropy", onnx_ex_xent, "SoftmaxCrossEntropyLoss"},
    {"softmax_cross_entropy", onnx_ex_xent, NULL},
};

const struct onnx_export_map *tfc_onnx_export_find(const char *op)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].op, op)) return &table[i];
    return NULL;
}

int tfc_onnx_export_count(void) { return (int)(sizeof table / sizeof table[0]); }

const char *tfc_onnx_export_op(int i)
{
    return i >= 0 && i < tfc_onnx_export_count() ? table[i].op : NULL;
}

/* Node op(in...) -> out[0]. */
static Onnx__NodeProto *emit1(struct onnx_export *ex, const char *op, int n_in,
                              const char *const *in, const char *out)
{
    return onnx_emit(ex, op, n_in, in, 1, &out);
}

ONNX_EXPORTER(onnx_ex_simple)
{
    return emit1(ex, e->onnx_op, n->n_inputs, in, out[0]) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

/* A fresh name for an intermediate of a composite. */
#define TMP(var) char var[NAME_LEN]; onnx_fresh_name(ex, #var, var, NAME_LEN)

/* a op b -> out, with b a scalar of x's dtype. */
static tfc_status with_scalar(struct onnx_export *ex, const char *op, const char *a,
                              enum tfc_dtype dt, double b, const char *out)
{
    char c[NAME_LEN];
    if (onnx_const_fill(ex, dt, 0, NULL, b, c, sizeof c)) return TFC_ERR_OUT_OF_MEMORY;
    return emit1(ex, op, 2, (const char *[]){a, c}, out) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

static tfc_status gelu_erf(struct onnx_export *ex, const char *x, enum tfc_dtype dt,
                           const char *out)
{
    TMP(scaled); TMP(erf); TMP(one_plus); TMP(half_x);
    if (with_scalar(ex, "Mul", x, dt, M_SQRT1_2, scaled) ||
        !emit1(ex, "Erf", 1, (const char *[]){scaled}, erf) ||
        with_scalar(ex, "Add", erf, dt, 1.0, one_plus) ||
        with_scalar(ex, "Mul", x, dt, 0.5, half_x))
        return TFC_ERR_OUT_OF_MEMORY;
    return emit1(ex, "Mul", 2, (const char *[]){half_x, one_plus}, out) ? TFC_OK
                                                                        : TFC_ERR_OUT_OF_MEMORY;
}

/* 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
static tfc_status gelu_tanh(struct onnx_export *ex, const char *x, enum tfc_dtype dt,
                            const char *out)
{
    TMP(x2); TMP(x3); TMP(cx3); TMP(inner); TMP(arg); TMP(th); TMP(one_plus); TMP(half_x);
    if (!emit1(ex, "Mul", 2, (const char *[]){x, x}, x2) ||
        !emit1(ex, "Mul", 2, (const char *[]){x2, x}, x3) ||
        with_scalar(ex, "Mul", x3, dt, 0.044715, cx3) ||
        !emit1(ex, "Add", 2, (const char *[]){x, cx3}, inner) ||
        with_scalar(ex, "Mul", inner, dt, sqrt(2.0 / M_PI), arg) ||
        !emit1(ex, "Tanh", 1, (const char *[]){arg}, th) ||
        with_scalar(ex, "Add", th, dt, 1.0, one_plus) ||
        with_scalar(ex, "Mul", x, dt, 0.5, half_x))
        return TFC_ERR_OUT_OF_MEMORY;
    return emit1(ex, "Mul", 2, (const char *[]){half_x, one_plus}, out) ? TFC_OK
                                                                        : TFC_ERR_OUT_OF_MEMORY;
}

/* Unary ops that ONNX (opset 17) writes as a few nodes; floor, ceil and round of integers are
 * the identity (ONNX's take floats only). */
ONNX_EXPORTER(onnx_ex_unary_composite)
{
    const char *op = n->op->name, *x = in[0];
    enum tfc_dtype dt = n->outputs[0].desc.dtype;
    if (e->onnx_op) return emit1(ex, tfc_dtype_is_float(dt) ? e->onnx_op : "Identity", 1, in,
                                 out[0]) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    if (!strcmp(op, "square"))
        return emit1(ex, "Mul", 2, (const char *[]){x, x}, out[0]) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    if (!strcmp(op, "gelu")) return gelu_erf(ex, x, dt, out[0]);
    if (!strcmp(op, "gelu_tanh")) return gelu_tanh(ex, x, dt, out[0]);
    TMP(t);
    if (!strcmp(op, "rsqrt"))
        return emit1(ex, "Sqrt", 1, in, t) && emit1(ex, "Reciprocal", 1, (const char *[]){t}, out[0])
                   ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    if (!strcmp(op, "silu"))
        return emit1(ex, "Sigmoid", 1, in, t) && emit1(ex, "Mul", 2, (const char *[]){x, t}, out[0])
                   ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    if (!strcmp(op, "log1p"))
        return with_scalar(ex, "Add", x, dt, 1.0, t) ||
                       !emit1(ex, "Log", 1, (const char *[]){t}, out[0]) ? TFC_ERR_OUT_OF_MEMORY
                                                                        : TFC_OK;
    /* expm1 */
    return !emit1(ex, "Exp", 1, in, t) ? TFC_ERR_OUT_OF_MEMORY
                                       : with_scalar(ex, "Sub", t, dt, 1.0, out[0]);
}

ONNX_EXPORTER(onnx_ex_not_equal)
{
    TMP(eq);
    return emit1(ex, "Equal", 2, in, eq) && emit1(ex, "Not", 1, (const char *[]){eq}, out[0])
               ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

ONNX_EXPORTER(onnx_ex_cast)
{
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 1, in, out[0]);
    return nd && !onnx_set_int(nd, "to", tfc_onnx_elem_type(n->outputs[0].desc.dtype))
               ? TFC_OK : OOM(ex);
}

/* Clip's bounds are inputs of x's dtype from opset 11; an infinite bound is left out. */
ONNX_EXPORTER(onnx_ex_clip)
{
    enum tfc_dtype dt = n->outputs[0].desc.dtype;
    double lo = onnx_ex_attr(n, "min")->f, hi = onnx_ex_attr(n, "max")->f;
    char bl[NAME_LEN] = "", bh[NAME_LEN] = "";
    if ((isfinite(lo) && onnx_const_fill(ex, dt, 0, NULL, lo, bl, sizeof bl)) ||
        (isfinite(hi) && onnx_const_fill(ex, dt, 0, NULL, hi, bh, sizeof bh)))
        return TFC_ERR_OUT_OF_MEMORY;
    return emit1(ex, e->onnx_op, 3, (const char *[]){in[0], bl, bh}, out[0])
               ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

ONNX_EXPORTER(onnx_ex_alpha)
{
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 1, in, out[0]);
    return nd && !onnx_set_float(nd, "alpha", onnx_ex_attr(n, "alpha")->f) ? TFC_OK : OOM(ex);
}

ONNX_EXPORTER(onnx_ex_hard_sigmoid)
{
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 1, in, out[0]);
    return nd && !onnx_set_float(nd, "alpha", onnx_ex_attr(n, "alpha")->f) &&
                   !onnx_set_float(nd, "beta", onnx_ex_attr(n, "beta")->f)
               ? TFC_OK : OOM(ex);
}

/* zeros_like, ones_like: ConstantOfShape(Shape(x)) with the value in x's dtype. */
ONNX_EXPORTER(onnx_ex_fill_like)
{
    tfc_value *v;
    int64_t one = 1;
    if (tfc_value_create(n->outputs[0].desc.dtype, tfc_shape_of(1, &one), &v)) return OOM(ex);
    onnx_value_set(v, 0, onnx_ex_attr(n, "value")->f);
    TMP(shape);
    Onnx__NodeProto *nd = NULL;
    if (emit1(ex, "Shape", 1, in, shape))
        nd = emit1(ex, "ConstantOfShape", 1, (const char *[]){shape}, out[0]);
    int bad = !nd || onnx_set_tensor(nd, "value", v);
    tfc_value_destroy(v);
    return bad ? OOM(ex) : TFC_OK;
}

/* fill: a tensor of a static shape, as an initializer. */
ONNX_EXPORTER(onnx_ex_fill)
{
    const tfc_shape *s = &n->outputs[0].desc.shape;
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] < 0)
            return onnx_export_fail(ex, TFC_ERR_SHAPE, "a fill of unknown dimension %d", d);
    char name[NAME_LEN];
    tfc_status st = onnx_const_fill(ex, n->outputs[0].desc.dtype, s->rank, s->dims,
                                    onnx_ex_attr(n, "value")->f, name, sizeof name);
    return st ? st : emit1(ex, "Identity", 1, (const char *[]){name}, out[0])
                         ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

/* ReduceSum takes its axes as an input from opset 13, the others as an attribute up to 17;
 * no axes reduces every dim, as ours. */
ONNX_EXPORTER(onnx_ex_reduce)
{
    const struct tfc_kattr *axes = onnx_ex_attr(n, "axes");
    int input = !strcmp(e->onnx_op, "ReduceSum") && axes->n > 0;
    char an[NAME_LEN] = "";
    if (input && onnx_const_ints(ex, axes->n, axes->v, an, sizeof an)) return TFC_ERR_OUT_OF_MEMORY;
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, input ? 2 : 1, (const char *[]){in[0], an},
                                out[0]);
    if (!nd || onnx_set_int(nd, "keepdims", onnx_ex_attr(n, "keepdims")->i)) return OOM(ex);
    if (!input && axes->n > 0 && onnx_set_ints(nd, "axes", axes->n, axes->v)) return OOM(ex);
    return TFC_OK;
}

ONNX_EXPORTER(onnx_ex_axis)
{
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, n->n_inputs, in, out[0]);
    return nd && !onnx_set_int(nd, "axis", onnx_ex_attr(n, "axis")->i) ? TFC_OK : OOM(ex);
}

ONNX_EXPORTER(onnx_ex_argmax)
{
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 1, in, out[0]);
    return nd && !onnx_set_int(nd, "axis", onnx_ex_attr(n, "axis")->i) &&
                   !onnx_set_int(nd, "keepdims", 0) ? TFC_OK : OOM(ex);
}

/* Reshape: a 0 in ONNX's shape copies the input's dim unless allowzero is set. */
ONNX_EXPORTER(onnx_ex_reshape)
{
    const struct tfc_kattr *shape = onnx_ex_attr(n, "shape");
    char sn[NAME_LEN];
    int zero = 0;
    for (int i = 0; i < shape->n; i++) zero |= shape->v[i] == 0;
    if (onnx_const_ints(ex, shape->n, shape->v, sn, sizeof sn)) return TFC_ERR_OUT_OF_MEMORY;
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 2, (const char *[]){in[0], sn}, out[0]);
    return nd && (!zero || !onnx_set_int(nd, "allowzero", 1)) ? TFC_OK : OOM(ex);
}

ONNX_EXPORTER(onnx_ex_transpose)
{
    const struct tfc_kattr *perm = onnx_ex_attr(n, "perm");
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 1, in, out[0]);
    return nd && (perm->n == 0 || !onnx_set_ints(nd, "perm", perm->n, perm->v)) ? TFC_OK
                                                                                : OOM(ex);
}

/* Split into equal parts (no split input: ONNX divides evenly into its outputs); every output
 * is named, unused ones freshly. */
ONNX_EXPORTER(onnx_ex_split)
{
    char fresh[TFC_MAX_OPERANDS][NAME_LEN];
    const char *outs[TFC_MAX_OPERANDS];
    for (int k = 0; k < n->n_outputs; k++)
        outs[k] = out[k] ? out[k] : onnx_fresh_name(ex, "unused", fresh[k], NAME_LEN);
    Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, 1, in, n->n_outputs, outs);
    return nd && !onnx_set_int(nd, "axis", onnx_ex_attr(n, "axis")->i) ? TFC_OK : OOM(ex);
}

/* slice(begin, size): ends are begin + size, or past the end for size -1; axes taken whole
 * are left out (an importer then need not know their size: the batch). */
ONNX_EXPORTER(onnx_ex_slice)
{
    const struct tfc_kattr *b = onnx_ex_attr(n, "begin"), *sz = onnx_ex_attr(n, "size");
    int64_t starts[TFC_MAX_RANK], ends[TFC_MAX_RANK], axes[TFC_MAX_RANK];
    int k = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->v[i] == 0 && sz->v[i] < 0) continue;
        starts[k] = b->v[i];
        ends[k] = sz->v[i] < 0 ? INT64_MAX : b->v[i] + sz->v[i];
        axes[k++] = i;
    }
    if (k == 0) return emit1(ex, "Identity", 1, in, out[0]) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    char sn[NAME_LEN], en[NAME_LEN], an[NAME_LEN];
    if (onnx_const_ints(ex, k, starts, sn, sizeof sn) || onnx_const_ints(ex, k, ends, en, sizeof en) ||
        onnx_const_ints(ex, k, axes, an, sizeof an))
        return TFC_ERR_OUT_OF_MEMORY;
    return emit1(ex, e->onnx_op, 4, (const char *[]){in[0], sn, en, an}, out[0])
               ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

/* OneHot(indices, depth, [off, on]) along a new last axis, in the output's dtype. */
ONNX_EXPORTER(onnx_ex_one_hot)
{
    enum tfc_dtype dt = n->outputs[0].desc.dtype;
    int64_t depth = onnx_ex_attr(n, "depth")->i, two = 2;
    char dn[NAME_LEN], vn[NAME_LEN];
    tfc_value *v;
    if (onnx_const_ints(ex, 1, &depth, dn, sizeof dn)) return TFC_ERR_OUT_OF_MEMORY;
    if (tfc_value_create(dt, tfc_shape_of(1, &two), &v)) return OOM(ex);
    double vals[2] = {onnx_ex_attr(n, "off")->f, onnx_ex_attr(n, "on")->f};
    for (int i = 0; i < 2; i++) onnx_value_set(v, i, vals[i]);
    tfc_status st = onnx_add_initializer(ex, onnx_fresh_name(ex, "values", vn, sizeof vn), v);
    tfc_value_destroy(v);
    if (st) return st;
    Onnx__NodeProto *nd = emit1(ex, e->onnx_op, 3, (const char *[]){in[0], dn, vn}, out[0]);
    return nd && !onnx_set_int(nd, "axis", -1) ? TFC_OK : OOM(ex);
}

/* reshape_like and broadcast_like: Reshape or Expand to Shape(like). */
ONNX_EXPORTER(onnx_ex_like)
{
    TMP(shape);
    return emit1(ex, "Shape", 1, &in[1], shape) &&
                   emit1(ex, e->onnx_op, 2, (const char *[]){in[0], shape}, out[0])
               ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}
