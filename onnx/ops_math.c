/* ops_math.c: ONNX element-wise ops: one-input maths, activations with parameters (written
 * with our ops where we have no single one), the binary ops with NumPy broadcasting (and the
 * explicit broadcast/axis attributes of opsets 1 to 6), the variadic Sum/Mean/Max/Min, Cast,
 * Clip and Where. */
#include <math.h>
#include <string.h>
#include "onnx_import.h"

typedef tfc_tensor *(*unary_fn)(tfc_graph *, tfc_tensor *);
typedef tfc_tensor *(*binary_fn)(tfc_graph *, tfc_tensor *, tfc_tensor *);

static const struct { const char *op; unary_fn fn; } unaries[] = {
    {"Abs", tfc_abs}, {"Neg", tfc_neg}, {"Sqrt", tfc_sqrt}, {"Exp", tfc_exp}, {"Log", tfc_log},
    {"Relu", tfc_relu}, {"Sigmoid", tfc_sigmoid}, {"Tanh", tfc_tanh}, {"Softplus", tfc_softplus},
    {"Softsign", tfc_softsign}, {"Not", tfc_logical_not}, {"Erf", tfc_erf}, {"Sin", tfc_sin},
    {"Cos", tfc_cos}, {"Floor", tfc_floor}, {"Ceil", tfc_ceil}, {"Round", tfc_round},
    {"Sign", tfc_sign}, {"Reciprocal", tfc_reciprocal}, {"IsNaN", tfc_is_nan},
};

static tfc_tensor *scalar_like(tfc_graph *g, tfc_tensor *x, double v)
{
    return tfc_scalar(g, tfc_tensor_dtype(x), v);
}

ONNX_BUILDER(onnx_unary)
{
    const char *op = im->node->op_type;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    if (!strcmp(op, "IsInf")) {
        int neg = (int)onnx_attr_int(im->node, "detect_negative", 1);
        int pos = (int)onnx_attr_int(im->node, "detect_positive", 1);
        tfc_tensor *inf = tfc_is_inf(im->g, x);
        if (neg && !pos) inf = tfc_logical_and(im->g, inf, tfc_less(im->g, x, scalar_like(im->g, x, 0)));
        if (pos && !neg) inf = tfc_logical_and(im->g, inf, tfc_greater(im->g, x, scalar_like(im->g, x, 0)));
        if (!pos && !neg) inf = tfc_logical_and(im->g, inf, tfc_logical_not(im->g, inf));
        outs[0] = inf;
        return TFC_OK;
    }
    for (size_t i = 0; i < sizeof unaries / sizeof unaries[0]; i++)
        if (!strcmp(op, unaries[i].op)) {
            outs[0] = unaries[i].fn(im->g, x);
            return TFC_OK;
        }
    return onnx_unsupported(im, "no unary mapping");
}

ONNX_BUILDER(onnx_activation)
{
    const Onnx__NodeProto *n = im->node;
    const char *op = n->op_type;
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    if (!strcmp(op, "Elu")) outs[0] = tfc_elu(g, x, onnx_attr_float(n, "alpha", 1.0));
    else if (!strcmp(op, "Selu"))
        outs[0] = tfc_mul(g, tfc_elu(g, x, onnx_attr_float(n, "alpha", 1.67326319217681884765625)),
                          scalar_like(g, x, onnx_attr_float(n, "gamma", 1.05070102214813232421875)));
    else if (!strcmp(op, "LeakyRelu")) outs[0] = tfc_leaky_relu(g, x, onnx_attr_float(n, "alpha", 0.01));
    else if (!strcmp(op, "HardSigmoid"))
        outs[0] = tfc_hard_sigmoid(g, x, onnx_attr_float(n, "alpha", 0.2),
                                   onnx_attr_float(n, "beta", 0.5));
    else if (!strcmp(op, "HardSwish"))
        outs[0] = tfc_mul(g, x, tfc_hard_sigmoid(g, x, 1.0 / 6, 0.5));
    else if (!strcmp(op, "ThresholdedRelu")) {
        tfc_tensor *a = scalar_like(g, x, onnx_attr_float(n, "alpha", 1.0));
        outs[0] = tfc_mul(g, x, tfc_cast(g, tfc_greater(g, x, a), tfc_tensor_dtype(x)));
    } else if (!strcmp(op, "Celu")) {
        double alpha = onnx_attr_float(n, "alpha", 1.0);
        tfc_tensor *a = scalar_like(g, x, alpha);
        outs[0] = tfc_mul(g, tfc_elu(g, tfc_div(g, x, a), 1.0), a); /* max(0,x)+min(0,a(e^(x/a)-1)) */
    } else
        return onnx_unsupported(im, "no activation mapping");
    return TFC_OK;
}

ONNX_BUILDER(onnx_prelu)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0), *slope = onnx_input(im, 1);
    if (!x || !slope) return tfc_graph_status(g);
    tfc_tensor *neg = tfc_less(g, x, scalar_like(g, x, 0));
    outs[0] = tfc_select(g, neg, tfc_mul(g, x, slope), tfc_mul(g, x, tfc_ones_like(g, slope)));
    return TFC_OK;
}

static const struct { const char *op; binary_fn fn; int negate; } binaries[] = {
    {"Add", tfc_add, 0}, {"Sub", tfc_sub, 0}, {"Mul", tfc_mul, 0}, {"Div", tfc_div, 0},
    {"Pow", tfc_pow, 0}, {"Equal", tfc_equal, 0}, {"Less", tfc_less, 0},
    {"Greater", tfc_greater, 0}, {"And", tfc_logical_and, 0}, {"Or", tfc_logical_or, 0},
    {"Xor", tfc_not_equal, 0}, {"LessOrEqual", tfc_greater, 1},
    {"GreaterOrEqual", tfc_less, 1},
};

/* Opsets 1 to 6: broadcasting only with broadcast=1, B's dims aligned at `axis` of A (default:
 * trailing); B gets trailing 1s so that NumPy broadcasting does the same. */
static tfc_tensor *legacy_broadcast(struct onnx_import *im, tfc_tensor *a, tfc_tensor *b)
{
    if (im->opset >= 7 || !onnx_attr_int(im->node, "broadcast", 0)) return b;
    int ra = onnx_rank(a), rb = onnx_rank(b);
    int64_t axis = onnx_attr_int(im->node, "axis", ra - rb);
    if (axis < 0) axis += ra;
    int trailing = ra - (int)axis - rb;
    if (trailing <= 0) return b;
    tfc_shape s = tfc_tensor_shape(b);
    for (int k = 0; k < trailing && s.rank < TFC_MAX_RANK; k++) s.dims[s.rank++] = 1;
    return tfc_reshape(im->g, b, s);
}

ONNX_BUILDER(onnx_binary)
{
    const char *op = im->node->op_type;
    tfc_tensor *a = onnx_input(im, 0), *b = onnx_input(im, 1);
    if (!a || !b) return tfc_graph_status(im->g);
    b = legacy_broadcast(im, a, b);
    enum tfc_dtype at = tfc_tensor_dtype(a);
    if (!strcmp(op, "Pow") && at != TFC_FLOAT32 && at != TFC_FLOAT64) {
        /* integer powers in float64, exact for the values int64 holds below 2^53 */
        tfc_tensor *y = tfc_pow(im->g, tfc_cast(im->g, a, TFC_FLOAT64), tfc_cast(im->g, b, TFC_FLOAT64));
        outs[0] = tfc_cast(im->g, y, at);
        return tfc_graph_status(im->g);
    }
    if (!strcmp(op, "Pow") && tfc_tensor_dtype(b) != at)
        b = tfc_cast(im->g, b, at); /* ONNX allows another exponent type */
    for (size_t i = 0; i < sizeof binaries / sizeof binaries[0]; i++)
        if (!strcmp(op, binaries[i].op)) {
            tfc_tensor *y = binaries[i].fn(im->g, a, b);
            outs[0] = binaries[i].negate ? tfc_logical_not(im->g, y) : y;
            return TFC_OK;
        }
    return onnx_unsupported(im, "no binary mapping");
}

ONNX_BUILDER(onnx_variadic)
{
    const char *op = im->node->op_type;
    int n = (int)im->node->n_input;
    binary_fn fn = !strcmp(op, "Max") ? tfc_maximum : !strcmp(op, "Min") ? tfc_minimum : tfc_add;
    tfc_tensor *acc = onnx_input(im, 0);
    for (int i = 1; acc && i < n; i++) {
        tfc_tensor *x = onnx_input(im, i);
        if (!x) return tfc_graph_status(im->g);
        acc = fn(im->g, acc, x);
    }
    if (acc && n == 1) acc = tfc_identity(im->g, acc);
    if (acc && !strcmp(op, "Mean")) acc = tfc_div(im->g, acc, scalar_like(im->g, acc, n));
    outs[0] = acc;
    return tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_cast_like)
{
    tfc_tensor *x = onnx_input(im, 0), *like = onnx_input(im, 1);
    if (x && like) outs[0] = tfc_cast(im->g, x, tfc_tensor_dtype(like));
    return tfc_graph_status(im->g);
}

/* Functions we write with our ops: tan, the hyperbolic ones and their inverses. */
ONNX_BUILDER(onnx_composite)
{
    tfc_graph *g = im->g;
    const char *op = im->node->op_type;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    tfc_tensor *half = scalar_like(g, x, 0.5), *one = scalar_like(g, x, 1);
    if (!strcmp(op, "Tan")) outs[0] = tfc_div(g, tfc_sin(g, x), tfc_cos(g, x));
    else if (!strcmp(op, "Sinh")) outs[0] = tfc_mul(g, tfc_sub(g, tfc_exp(g, x), tfc_exp(g, tfc_neg(g, x))), half);
    else if (!strcmp(op, "Cosh")) outs[0] = tfc_mul(g, tfc_add(g, tfc_exp(g, x), tfc_exp(g, tfc_neg(g, x))), half);
    else if (!strcmp(op, "Asinh"))
        outs[0] = tfc_log(g, tfc_add(g, x, tfc_sqrt(g, tfc_add(g, tfc_square(g, x), one))));
    else if (!strcmp(op, "Acosh"))
        outs[0] = tfc_log(g, tfc_add(g, x, tfc_sqrt(g, tfc_sub(g, tfc_square(g, x), one))));
    else if (!strcmp(op, "Atanh"))
        outs[0] = tfc_mul(g, tfc_log(g, tfc_div(g, tfc_add(g, one, x), tfc_sub(g, one, x))), half);
    else if (!strcmp(op, "Shrink")) {
        double lambd = onnx_attr_float(im->node, "lambd", 0.5), bias = onnx_attr_float(im->node, "bias", 0);
        tfc_tensor *lo = tfc_less(g, x, scalar_like(g, x, -lambd));
        tfc_tensor *hi = tfc_greater(g, x, scalar_like(g, x, lambd));
        tfc_tensor *zero = tfc_zeros_like(g, x);
        outs[0] = tfc_select(g, lo, tfc_add(g, x, scalar_like(g, x, bias)),
                             tfc_select(g, hi, tfc_sub(g, x, scalar_like(g, x, bias)), zero));
    } else
        return onnx_unsupported(im, "no composite mapping");
    return tfc_graph_status(g);
}

ONNX_BUILDER(onnx_cast)
{
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(im->g);
    int64_t to = onnx_attr_int(im->node, "to", -1);
    int dt = tfc_onnx_dtype((int32_t)to);
    if (dt < 0) return onnx_unsupported(im, "cast to %s", tfc_onnx_dtype_name((int32_t)to));
    outs[0] = tfc_cast(im->g, x, (enum tfc_dtype)dt);
    return TFC_OK;
}

ONNX_BUILDER(onnx_clip)
{
    tfc_graph *g = im->g;
    tfc_tensor *x = onnx_input(im, 0);
    if (!x) return tfc_graph_status(g);
    if (im->opset < 11) {
        outs[0] = tfc_clip(g, x, onnx_attr_float(im->node, "min", -INFINITY),
                           onnx_attr_float(im->node, "max", INFINITY));
        return TFC_OK;
    }
    /* min and max are optional tensor inputs from opset 11 */
    tfc_tensor *y = x;
    if (onnx_has_input(im, 1)) y = tfc_maximum(g, y, onnx_input(im, 1));
    if (onnx_has_input(im, 2)) y = tfc_minimum(g, y, onnx_input(im, 2));
    outs[0] = y == x ? tfc_identity(g, x) : y;
    return TFC_OK;
}

ONNX_BUILDER(onnx_where)
{
    tfc_tensor *c = onnx_input(im, 0), *a = onnx_input(im, 1), *b = onnx_input(im, 2);
    if (!c || !a || !b) return tfc_graph_status(im->g);
    outs[0] = tfc_select(im->g, c, a, b);
    return TFC_OK;
}

/* Mod in float64: x - trunc(x / y) y with fmod=1 (C's fmod), x - floor(x / y) y otherwise
 * (Python's %, the sign of the divisor); then back to x's type. */
ONNX_BUILDER(onnx_mod)
{
    tfc_graph *g = im->g;
    tfc_tensor *a = onnx_input(im, 0), *b = onnx_input(im, 1);
    if (!a || !b) return tfc_graph_status(g);
    enum tfc_dtype dt = tfc_tensor_dtype(a);
    tfc_tensor *x = tfc_cast(g, a, TFC_FLOAT64), *y = tfc_cast(g, b, TFC_FLOAT64);
    tfc_tensor *q = tfc_div(g, x, y);
    tfc_tensor *whole = onnx_attr_int(im->node, "fmod", 0)
                            ? tfc_mul(g, tfc_sign(g, q), tfc_floor(g, tfc_abs(g, q)))
                            : tfc_floor(g, q);
    outs[0] = tfc_cast(g, tfc_sub(g, x, tfc_mul(g, whole, y)), dt);
    return tfc_graph_status(g);
}
