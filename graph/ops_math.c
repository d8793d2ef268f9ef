/* ops_math.c: descriptors, inference and builders of the element-wise ops: unary math, binary
 * ops with broadcasting, comparisons and logic, select, add_n, bias_add, cast, fill and the
 * *_like fills. All run in the element-wise codelet. */
#include <math.h>
#include <string.h>
#include "grad.h"

/* ---- attributes: each table's slots by name --------------------------------------------- */

enum { CAST_DTYPE };
static const struct tfc_attr_def cast_attrs[] = {{"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32}};
enum { FILL_VALUE = TFC_FILL_ATTR_VALUE, FILL_DTYPE, FILL_SHAPE };
static const struct tfc_attr_def fill_attrs[] = {
    {"value", TFC_ATTR_FLOAT, 0}, {"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32}, {"shape", TFC_ATTR_INTS, 0}};
static const struct tfc_attr_def zeros_attrs[] = {{"value", TFC_ATTR_FLOAT, 0}};
static const struct tfc_attr_def ones_attrs[] = {{"value", TFC_ATTR_FLOAT, 1}};
/* the parametric element-wise ops: their float parameters in the slots the kernels read */
enum { ELU_ALPHA = TFC_EW_ATTR_P0 };
static const struct tfc_attr_def elu_attrs[] = {{"alpha", TFC_ATTR_FLOAT, 1.0}};
enum { LEAKY_RELU_ALPHA = TFC_EW_ATTR_P0 };
static const struct tfc_attr_def leaky_relu_attrs[] = {{"alpha", TFC_ATTR_FLOAT, 0.01}};
enum { HARD_SIGMOID_ALPHA = TFC_EW_ATTR_P0, HARD_SIGMOID_BETA = TFC_EW_ATTR_P1 };
static const struct tfc_attr_def hard_sigmoid_attrs[] = {{"alpha", TFC_ATTR_FLOAT, 0.2},
                                                         {"beta", TFC_ATTR_FLOAT, 0.5}};
enum { CLIP_MIN = TFC_EW_ATTR_P0, CLIP_MAX = TFC_EW_ATTR_P1 };
static const struct tfc_attr_def clip_attrs[] = {{"min", TFC_ATTR_FLOAT, -HUGE_VAL},
                                                 {"max", TFC_ATTR_FLOAT, HUGE_VAL}};

/* ---- inference ------------------------------------------------------------------------- */

/* Unary ops on floats and integers (neg, abs, square, sign, clip, floor, ceil, round). */
static tfc_status infer_numeric(const struct tfc_infer *in)
{
    if (in->in[0].dtype == TFC_BOOL) return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take bool");
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_float(const struct tfc_infer *in)
{
    enum tfc_dtype dt = in->in[0].dtype;
    if (!tfc_dtype_is_float(dt))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take %s", tfc_dtype_name(dt));
    in->out[0] = in->in[0];
    return TFC_OK;
}

/* is_nan, is_inf: a float in, a bool of its shape out */
static tfc_status infer_predicate(const struct tfc_infer *in)
{
    tfc_status st = infer_float(in);
    in->out[0].dtype = TFC_BOOL;
    return st;
}

static tfc_status infer_logical_not(const struct tfc_infer *in)
{
    if (in->in[0].dtype != TFC_BOOL)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "needs bool, got %s",
                        tfc_dtype_name(in->in[0].dtype));
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_identity(const struct tfc_infer *in)
{
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_broadcast(const struct tfc_infer *in)
{
    const tfc_shape *shapes[3];
    for (int i = 0; i < in->n_in; i++) shapes[i] = &in->in[i].shape;
    return tfc_broadcast_shapes(in->n_in, shapes, &in->out[0].shape, in->msg);
}

enum binary_class { ARITH, ARITH_FLOAT, COMPARE_ANY, COMPARE_ORDERED, LOGIC };

static tfc_status infer_binary(const struct tfc_infer *in, enum binary_class cls)
{
    enum tfc_dtype a = in->in[0].dtype, b = in->in[1].dtype;
    if (a != b)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "operands have different dtypes %s and %s",
                        tfc_dtype_name(a), tfc_dtype_name(b));
    int ok = cls == ARITH ? a != TFC_BOOL
           : cls == ARITH_FLOAT ? tfc_dtype_is_float(a)
           : cls == COMPARE_ORDERED ? a != TFC_BOOL
           : cls == LOGIC ? a == TFC_BOOL : 1;
    if (!ok) return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take %s", tfc_dtype_name(a));
    in->out[0].dtype = cls <= ARITH_FLOAT ? a : TFC_BOOL;
    return infer_broadcast(in);
}

static tfc_status infer_arith(const struct tfc_infer *in) { return infer_binary(in, ARITH); }
static tfc_status infer_arith_float(const struct tfc_infer *in)
{
    return infer_binary(in, ARITH_FLOAT);
}
static tfc_status infer_compare_any(const struct tfc_infer *in)
{
    return infer_binary(in, COMPARE_ANY);
}
static tfc_status infer_compare_ordered(const struct tfc_infer *in)
{
    return infer_binary(in, COMPARE_ORDERED);
}
static tfc_status infer_logic(const struct tfc_infer *in) { return infer_binary(in, LOGIC); }

static tfc_status infer_select(const struct tfc_infer *in)
{
    if (in->in[0].dtype != TFC_BOOL)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "condition must be bool, got %s",
                        tfc_dtype_name(in->in[0].dtype));
    if (in->in[1].dtype != in->in[2].dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "branches have different dtypes %s and %s",
                        tfc_dtype_name(in->in[1].dtype), tfc_dtype_name(in->in[2].dtype));
    in->out[0].dtype = in->in[1].dtype;
    return infer_broadcast(in);
}

static tfc_status infer_bias_add(const struct tfc_infer *in)
{
    const struct tfc_desc *v = &in->in[0], *b = &in->in[1];
    if (v->dtype != b->dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "value is %s but bias is %s",
                        tfc_dtype_name(v->dtype), tfc_dtype_name(b->dtype));
    if (v->dtype == TFC_BOOL) return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take bool");
    if (b->shape.rank != 1 || v->shape.rank < 1)
        return tfc_fail(in->msg, TFC_ERR_SHAPE,
                        "needs a value of rank >= 1 and a bias of rank 1 (got ranks %d, %d)",
                        v->shape.rank, b->shape.rank);
    int64_t last = v->shape.dims[v->shape.rank - 1];
    if (last >= 0 && b->shape.dims[0] >= 0 && last != b->shape.dims[0])
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "bias has %lld elements, the last axis %lld",
                        (long long)b->shape.dims[0], (long long)last);
    in->out[0] = *v;
    return TFC_OK;
}

static tfc_status infer_add_n(const struct tfc_infer *in)
{
    for (int i = 1; i < in->n_in; i++) {
        if (in->in[i].dtype != in->in[0].dtype)
            return tfc_fail(in->msg, TFC_ERR_DTYPE, "input %d is %s, input 0 is %s", i,
                            tfc_dtype_name(in->in[i].dtype), tfc_dtype_name(in->in[0].dtype));
        const tfc_shape *a = &in->in[0].shape, *b = &in->in[i].shape;
        int same = a->rank == b->rank;
        for (int d = 0; same && d < a->rank; d++)
            same = a->dims[d] == b->dims[d] || a->dims[d] < 0 || b->dims[d] < 0;
        if (!same) {
            char x[96], y[96];
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "input %d has shape %s, input 0 %s", i,
                            tfc_shape_str(b, y, sizeof y), tfc_shape_str(a, x, sizeof x));
        }
    }
    if (in->in[0].dtype == TFC_BOOL) return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take bool");
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_cast(const struct tfc_infer *in)
{
    if (!tfc_dtype_valid((int)in->attrs[CAST_DTYPE].i))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid target dtype %lld",
                        (long long)in->attrs[CAST_DTYPE].i);
    in->out[0].dtype = (enum tfc_dtype)in->attrs[CAST_DTYPE].i;
    in->out[0].shape = in->in[0].shape;
    return TFC_OK;
}

/* fill: attrs value, dtype, shape */
static tfc_status infer_fill(const struct tfc_infer *in)
{
    const struct tfc_kattr *shape = &in->attrs[FILL_SHAPE];
    if (!tfc_dtype_valid((int)in->attrs[FILL_DTYPE].i))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid dtype");
    in->out[0].dtype = (enum tfc_dtype)in->attrs[FILL_DTYPE].i;
    in->out[0].shape.rank = shape->n;
    for (int i = 0; i < shape->n; i++) {
        if (shape->v[i] < 0)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "dimension %d is negative", i);
        in->out[0].shape.dims[i] = shape->v[i];
    }
    return TFC_OK;
}

/* ---- descriptors ----------------------------------------------------------------------- */

/* An element-wise op of the element-wise codelet (fusable when unary or binary arithmetic);
 * the trailing arguments are further designated initializers (attributes, flags). */
#define EW_OP_FLAGS(op_name, arity, op_kind, op_flags, op_infer, op_grad, ...)                \
    {.name = op_name, .n_inputs = arity, .kind = op_kind, .flags = op_flags, .infer = op_infer, \
     .codelet = &tfc_cl_elementwise, .grad = op_grad, __VA_ARGS__}
#define EW_OP(op_name, arity, op_kind, op_infer, op_grad, ...)                                 \
    EW_OP_FLAGS(op_name, arity, op_kind, TFC_OP_ELEMENTWISE, op_infer, op_grad, __VA_ARGS__)
/* comparisons, logic and predicates: a bool out, no gradient flows through */
#define BOOL_OP(op_name, arity, op_kind, op_infer)                                             \
    EW_OP_FLAGS(op_name, arity, op_kind, TFC_OP_ELEMENTWISE | TFC_OP_NO_GRADIENT, op_infer, NULL)

const struct tfc_op tfc_op_neg = EW_OP("neg", 1, TFC_K_NEG, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_abs = EW_OP("abs", 1, TFC_K_ABS, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_square = EW_OP("square", 1, TFC_K_SQUARE, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_sign = EW_OP("sign", 1, TFC_K_SIGN, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_clip = EW_OP("clip", 1, TFC_K_CLIP, infer_numeric, tfc_grad_unary,
                                        .attrs = clip_attrs, .n_attrs = 2);
const struct tfc_op tfc_op_floor = EW_OP("floor", 1, TFC_K_FLOOR, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_ceil = EW_OP("ceil", 1, TFC_K_CEIL, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_round = EW_OP("round", 1, TFC_K_ROUND, infer_numeric, tfc_grad_unary);
const struct tfc_op tfc_op_sqrt = EW_OP("sqrt", 1, TFC_K_SQRT, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_rsqrt = EW_OP("rsqrt", 1, TFC_K_RSQRT, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_exp = EW_OP("exp", 1, TFC_K_EXP, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_log = EW_OP("log", 1, TFC_K_LOG, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_relu = EW_OP("relu", 1, TFC_K_RELU, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_sigmoid = EW_OP("sigmoid", 1, TFC_K_SIGMOID, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_tanh = EW_OP("tanh", 1, TFC_K_TANH, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_softplus = EW_OP("softplus", 1, TFC_K_SOFTPLUS, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_erf = EW_OP("erf", 1, TFC_K_ERF, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_gelu = EW_OP("gelu", 1, TFC_K_GELU, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_gelu_tanh = EW_OP("gelu_tanh", 1, TFC_K_GELU_TANH, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_elu = EW_OP("elu", 1, TFC_K_ELU, infer_float, tfc_grad_unary,
                                       .attrs = elu_attrs, .n_attrs = 1);
const struct tfc_op tfc_op_selu = EW_OP("selu", 1, TFC_K_SELU, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_leaky_relu = EW_OP("leaky_relu", 1, TFC_K_LEAKY_RELU, infer_float,
                                              tfc_grad_unary, .attrs = leaky_relu_attrs,
                                              .n_attrs = 1);
const struct tfc_op tfc_op_silu = EW_OP("silu", 1, TFC_K_SILU, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_hard_sigmoid = EW_OP("hard_sigmoid", 1, TFC_K_HARD_SIGMOID,
                                                infer_float, tfc_grad_unary,
                                                .attrs = hard_sigmoid_attrs, .n_attrs = 2);
const struct tfc_op tfc_op_softsign = EW_OP("softsign", 1, TFC_K_SOFTSIGN, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_sin = EW_OP("sin", 1, TFC_K_SIN, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_cos = EW_OP("cos", 1, TFC_K_COS, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_reciprocal = EW_OP("reciprocal", 1, TFC_K_RECIPROCAL, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_log1p = EW_OP("log1p", 1, TFC_K_LOG1P, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_expm1 = EW_OP("expm1", 1, TFC_K_EXPM1, infer_float, tfc_grad_unary);
const struct tfc_op tfc_op_is_nan = BOOL_OP("is_nan", 1, TFC_K_IS_NAN, infer_predicate);
const struct tfc_op tfc_op_is_inf = BOOL_OP("is_inf", 1, TFC_K_IS_INF, infer_predicate);
const struct tfc_op tfc_op_logical_not = BOOL_OP("logical_not", 1, TFC_K_LOGICAL_NOT, infer_logical_not);
const struct tfc_op tfc_op_identity = EW_OP("identity", 1, TFC_K_IDENTITY, infer_identity, tfc_grad_identity);
const struct tfc_op tfc_op_cast = EW_OP("cast", 1, TFC_K_CAST, infer_cast, tfc_grad_cast,
                                        .attrs = cast_attrs, .n_attrs = 1);

const struct tfc_op tfc_op_add = EW_OP("add", 2, TFC_K_ADD, infer_arith, tfc_grad_binary);
const struct tfc_op tfc_op_sub = EW_OP("sub", 2, TFC_K_SUB, infer_arith, tfc_grad_binary);
const struct tfc_op tfc_op_mul = EW_OP("mul", 2, TFC_K_MUL, infer_arith, tfc_grad_binary);
const struct tfc_op tfc_op_div = EW_OP("div", 2, TFC_K_DIV, infer_arith, tfc_grad_binary);
const struct tfc_op tfc_op_maximum = EW_OP("maximum", 2, TFC_K_MAXIMUM, infer_arith, tfc_grad_binary);
const struct tfc_op tfc_op_minimum = EW_OP("minimum", 2, TFC_K_MINIMUM, infer_arith, tfc_grad_binary);
const struct tfc_op tfc_op_pow = EW_OP("pow", 2, TFC_K_POW, infer_arith_float, tfc_grad_binary);
const struct tfc_op tfc_op_equal = BOOL_OP("equal", 2, TFC_K_EQUAL, infer_compare_any);
const struct tfc_op tfc_op_not_equal = BOOL_OP("not_equal", 2, TFC_K_NOT_EQUAL, infer_compare_any);
const struct tfc_op tfc_op_less = BOOL_OP("less", 2, TFC_K_LESS, infer_compare_ordered);
const struct tfc_op tfc_op_greater = BOOL_OP("greater", 2, TFC_K_GREATER, infer_compare_ordered);
const struct tfc_op tfc_op_logical_and = BOOL_OP("logical_and", 2, TFC_K_LOGICAL_AND, infer_logic);
const struct tfc_op tfc_op_logical_or = BOOL_OP("logical_or", 2, TFC_K_LOGICAL_OR, infer_logic);
const struct tfc_op tfc_op_select = EW_OP("select", 3, TFC_K_SELECT, infer_select, tfc_grad_select);
const struct tfc_op tfc_op_bias_add = EW_OP("bias_add", 2, TFC_K_ADD, infer_bias_add, tfc_grad_bias_add);
const struct tfc_op tfc_op_add_n = EW_OP_FLAGS("add_n", 0, TFC_K_ADD_N,
                                               TFC_OP_ELEMENTWISE | TFC_OP_VARIADIC, infer_add_n,
                                               tfc_grad_add_n);
const struct tfc_op tfc_op_fill = {
    .name = "fill", .n_inputs = 0, .kind = TFC_K_FILL, .flags = TFC_OP_NO_GRADIENT,
    .attrs = fill_attrs, .n_attrs = 3, .infer = infer_fill, .codelet = &tfc_cl_elementwise};
/* zeros_like, ones_like: only input 0's shape is used */
const struct tfc_op tfc_op_zeros_like = {
    .name = "zeros_like", .n_inputs = 1, .kind = TFC_K_FILL, .flags = TFC_OP_NO_GRADIENT,
    .attrs = zeros_attrs, .n_attrs = 1, .infer = infer_identity,
    .codelet = &tfc_cl_elementwise, .shape_inputs = 1};
const struct tfc_op tfc_op_ones_like = {
    .name = "ones_like", .n_inputs = 1, .kind = TFC_K_FILL, .flags = TFC_OP_NO_GRADIENT,
    .attrs = ones_attrs, .n_attrs = 1, .infer = infer_identity,
    .codelet = &tfc_cl_elementwise, .shape_inputs = 1};
#undef BOOL_OP
#undef EW_OP
#undef EW_OP_FLAGS

/* ---- builders -------------------------------------------------------------------------- */

static tfc_tensor *unary(tfc_graph *g, const struct tfc_op *op, tfc_tensor *x)
{
    return tfc_build(g, op, 1, &x, NULL);
}

static tfc_tensor *binary(tfc_graph *g, const struct tfc_op *op, tfc_tensor *a, tfc_tensor *b)
{
    tfc_tensor *in[2] = {a, b};
    return tfc_build(g, op, 2, in, NULL);
}

tfc_tensor *tfc_neg(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_neg, x); }
tfc_tensor *tfc_abs(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_abs, x); }
tfc_tensor *tfc_square(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_square, x); }
tfc_tensor *tfc_sqrt(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_sqrt, x); }
tfc_tensor *tfc_rsqrt(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_rsqrt, x); }
tfc_tensor *tfc_exp(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_exp, x); }
tfc_tensor *tfc_log(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_log, x); }
tfc_tensor *tfc_relu(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_relu, x); }
tfc_tensor *tfc_sigmoid(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_sigmoid, x); }
tfc_tensor *tfc_tanh(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_tanh, x); }
tfc_tensor *tfc_softplus(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_softplus, x); }
tfc_tensor *tfc_logical_not(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_logical_not, x); }
tfc_tensor *tfc_identity(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_identity, x); }
tfc_tensor *tfc_erf(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_erf, x); }
tfc_tensor *tfc_gelu(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_gelu, x); }
tfc_tensor *tfc_gelu_tanh(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_gelu_tanh, x); }
tfc_tensor *tfc_selu(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_selu, x); }
tfc_tensor *tfc_silu(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_silu, x); }
tfc_tensor *tfc_softsign(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_softsign, x); }
tfc_tensor *tfc_sin(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_sin, x); }
tfc_tensor *tfc_cos(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_cos, x); }
tfc_tensor *tfc_reciprocal(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_reciprocal, x); }
tfc_tensor *tfc_log1p(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_log1p, x); }
tfc_tensor *tfc_expm1(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_expm1, x); }
tfc_tensor *tfc_floor(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_floor, x); }
tfc_tensor *tfc_ceil(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_ceil, x); }
tfc_tensor *tfc_round(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_round, x); }
tfc_tensor *tfc_sign(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_sign, x); }
tfc_tensor *tfc_is_nan(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_is_nan, x); }
tfc_tensor *tfc_is_inf(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_is_inf, x); }

/* A unary op with float parameters p0, p1 (in the slots TFC_EW_ATTR_P0/P1). */
static tfc_tensor *unary_params(tfc_graph *g, const struct tfc_op *op, tfc_tensor *x, double p0,
                                double p1)
{
    struct tfc_kattr a[TFC_MAX_ATTRS];
    tfc_attrs_default(op, a);
    a[TFC_EW_ATTR_P0].f = p0;
    a[TFC_EW_ATTR_P1].f = p1;
    return tfc_build(g, op, 1, &x, a);
}

tfc_tensor *tfc_elu(tfc_graph *g, tfc_tensor *x, double alpha)
{
    return unary_params(g, &tfc_op_elu, x, alpha, 0);
}

tfc_tensor *tfc_leaky_relu(tfc_graph *g, tfc_tensor *x, double alpha)
{
    return unary_params(g, &tfc_op_leaky_relu, x, alpha, 0);
}

tfc_tensor *tfc_hard_sigmoid(tfc_graph *g, tfc_tensor *x, double alpha, double beta)
{
    return unary_params(g, &tfc_op_hard_sigmoid, x, alpha, beta);
}

tfc_tensor *tfc_clip(tfc_graph *g, tfc_tensor *x, double min, double max)
{
    return unary_params(g, &tfc_op_clip, x, min, max);
}

tfc_tensor *tfc_cast(tfc_graph *g, tfc_tensor *x, enum tfc_dtype dtype)
{
    struct tfc_kattr a[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_cast, a);
    a[CAST_DTYPE].i = dtype;
    return tfc_build(g, &tfc_op_cast, 1, &x, a);
}

tfc_tensor *tfc_add(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_add, a, b); }
tfc_tensor *tfc_sub(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_sub, a, b); }
tfc_tensor *tfc_mul(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_mul, a, b); }
tfc_tensor *tfc_div(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_div, a, b); }
tfc_tensor *tfc_maximum(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_maximum, a, b); }
tfc_tensor *tfc_minimum(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_minimum, a, b); }
tfc_tensor *tfc_pow(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_pow, a, b); }
tfc_tensor *tfc_equal(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_equal, a, b); }
tfc_tensor *tfc_not_equal(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_not_equal, a, b); }
tfc_tensor *tfc_less(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_less, a, b); }
tfc_tensor *tfc_greater(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_greater, a, b); }
tfc_tensor *tfc_logical_and(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_logical_and, a, b); }
tfc_tensor *tfc_logical_or(tfc_graph *g, tfc_tensor *a, tfc_tensor *b) { return binary(g, &tfc_op_logical_or, a, b); }
tfc_tensor *tfc_bias_add(tfc_graph *g, tfc_tensor *v, tfc_tensor *b) { return binary(g, &tfc_op_bias_add, v, b); }

tfc_tensor *tfc_select(tfc_graph *g, tfc_tensor *cond, tfc_tensor *a, tfc_tensor *b)
{
    tfc_tensor *in[3] = {cond, a, b};
    return tfc_build(g, &tfc_op_select, 3, in, NULL);
}

tfc_tensor *tfc_add_n(tfc_graph *g, int n, tfc_tensor *const *inputs)
{
    return tfc_build(g, &tfc_op_add_n, n, inputs, NULL);
}

tfc_tensor *tfc_fill(tfc_graph *g, tfc_shape shape, enum tfc_dtype dtype, double value)
{
    struct tfc_kattr a[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_fill, a);
    if (shape.rank < 0 || shape.rank > TFC_MAX_RANK)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "fill: invalid rank %d", shape.rank);
    a[FILL_VALUE].f = value;
    a[FILL_DTYPE].i = dtype;
    a[FILL_SHAPE].n = shape.rank;
    memcpy(a[FILL_SHAPE].v, shape.dims, sizeof(int64_t) * (size_t)shape.rank);
    return tfc_build(g, &tfc_op_fill, 0, NULL, a);
}

tfc_tensor *tfc_zeros_like(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_zeros_like, x); }
tfc_tensor *tfc_ones_like(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_ones_like, x); }
