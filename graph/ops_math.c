/* ops_math.c: descriptors, inference and builders of the element-wise ops: unary math, binary
 * ops with broadcasting, comparisons and logic, select, add_n, bias_add, cast, fill and the
 * *_like fills. All run in the element-wise codelet. */
#include <string.h>
#include "grad.h"

/* ---- inference ------------------------------------------------------------------------- */

static int kind_float_only(int kind)
{
    return kind != TFC_K_NEG && kind != TFC_K_ABS && kind != TFC_K_SQUARE &&
           kind != TFC_K_IDENTITY && kind != TFC_K_LOGICAL_NOT;
}

static tfc_status infer_unary(const struct tfc_infer *in, int kind)
{
    enum tfc_dtype dt = in->in[0].dtype;
    if (kind == TFC_K_LOGICAL_NOT && dt != TFC_BOOL)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "needs bool, got %s", tfc_dtype_name(dt));
    if (kind != TFC_K_LOGICAL_NOT && kind != TFC_K_IDENTITY) {
        if (kind_float_only(kind) ? !tfc_dtype_is_float(dt) : dt == TFC_BOOL)
            return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take %s", tfc_dtype_name(dt));
    }
    in->out[0] = in->in[0];
    return TFC_OK;
}

static tfc_status infer_neg(const struct tfc_infer *in) { return infer_unary(in, TFC_K_NEG); }
static tfc_status infer_abs(const struct tfc_infer *in) { return infer_unary(in, TFC_K_ABS); }
static tfc_status infer_square(const struct tfc_infer *in) { return infer_unary(in, TFC_K_SQUARE); }
static tfc_status infer_float_unary(const struct tfc_infer *in) { return infer_unary(in, TFC_K_EXP); }
static tfc_status infer_logical_not(const struct tfc_infer *in)
{
    return infer_unary(in, TFC_K_LOGICAL_NOT);
}
static tfc_status infer_identity(const struct tfc_infer *in) { return infer_unary(in, TFC_K_IDENTITY); }

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
    if (!tfc_dtype_valid((int)in->attrs[0].i))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid target dtype %lld",
                        (long long)in->attrs[0].i);
    in->out[0].dtype = (enum tfc_dtype)in->attrs[0].i;
    in->out[0].shape = in->in[0].shape;
    return TFC_OK;
}

/* fill: attrs value, dtype, shape */
static tfc_status infer_fill(const struct tfc_infer *in)
{
    const struct tfc_kattr *shape = &in->attrs[2];
    if (!tfc_dtype_valid((int)in->attrs[1].i))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid dtype");
    in->out[0].dtype = (enum tfc_dtype)in->attrs[1].i;
    in->out[0].shape.rank = shape->n;
    for (int i = 0; i < shape->n; i++) {
        if (shape->v[i] < 0)
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "dimension %d is negative", i);
        in->out[0].shape.dims[i] = shape->v[i];
    }
    return TFC_OK;
}

static tfc_status infer_like(const struct tfc_infer *in)
{
    in->out[0] = in->in[0];
    return TFC_OK;
}

/* ---- descriptors ----------------------------------------------------------------------- */

static const struct tfc_attr_def cast_attrs[] = {{"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32}};
static const struct tfc_attr_def fill_attrs[] = {
    {"value", TFC_ATTR_FLOAT, 0}, {"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32}, {"shape", TFC_ATTR_INTS, 0}};
static const struct tfc_attr_def zeros_attrs[] = {{"value", TFC_ATTR_FLOAT, 0}};
static const struct tfc_attr_def ones_attrs[] = {{"value", TFC_ATTR_FLOAT, 1}};

#define EW (TFC_OP_ELEMENTWISE)
const struct tfc_op tfc_op_neg = {"neg", 1, TFC_K_NEG, EW, 0, NULL, 0, NULL, infer_neg, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_abs = {"abs", 1, TFC_K_ABS, EW, 0, NULL, 0, NULL, infer_abs, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_square = {"square", 1, TFC_K_SQUARE, EW, 0, NULL, 0, NULL, infer_square, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_sqrt = {"sqrt", 1, TFC_K_SQRT, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_rsqrt = {"rsqrt", 1, TFC_K_RSQRT, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_exp = {"exp", 1, TFC_K_EXP, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_log = {"log", 1, TFC_K_LOG, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_relu = {"relu", 1, TFC_K_RELU, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_sigmoid = {"sigmoid", 1, TFC_K_SIGMOID, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_tanh = {"tanh", 1, TFC_K_TANH, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_softplus = {"softplus", 1, TFC_K_SOFTPLUS, EW, 0, NULL, 0, NULL, infer_float_unary, &tfc_cl_elementwise, tfc_grad_unary};
const struct tfc_op tfc_op_logical_not = {"logical_not", 1, TFC_K_LOGICAL_NOT, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_logical_not, &tfc_cl_elementwise};
const struct tfc_op tfc_op_identity = {"identity", 1, TFC_K_IDENTITY, EW, 0, NULL, 0, NULL, infer_identity, &tfc_cl_elementwise, tfc_grad_identity};
const struct tfc_op tfc_op_cast = {"cast", 1, TFC_K_CAST, EW, 0, cast_attrs, 1, NULL, infer_cast, &tfc_cl_elementwise, tfc_grad_cast};

const struct tfc_op tfc_op_add = {"add", 2, TFC_K_ADD, EW, 0, NULL, 0, NULL, infer_arith, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_sub = {"sub", 2, TFC_K_SUB, EW, 0, NULL, 0, NULL, infer_arith, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_mul = {"mul", 2, TFC_K_MUL, EW, 0, NULL, 0, NULL, infer_arith, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_div = {"div", 2, TFC_K_DIV, EW, 0, NULL, 0, NULL, infer_arith, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_maximum = {"maximum", 2, TFC_K_MAXIMUM, EW, 0, NULL, 0, NULL, infer_arith, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_minimum = {"minimum", 2, TFC_K_MINIMUM, EW, 0, NULL, 0, NULL, infer_arith, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_pow = {"pow", 2, TFC_K_POW, EW, 0, NULL, 0, NULL, infer_arith_float, &tfc_cl_elementwise, tfc_grad_binary};
const struct tfc_op tfc_op_equal = {"equal", 2, TFC_K_EQUAL, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_compare_any, &tfc_cl_elementwise};
const struct tfc_op tfc_op_not_equal = {"not_equal", 2, TFC_K_NOT_EQUAL, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_compare_any, &tfc_cl_elementwise};
const struct tfc_op tfc_op_less = {"less", 2, TFC_K_LESS, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_compare_ordered, &tfc_cl_elementwise};
const struct tfc_op tfc_op_greater = {"greater", 2, TFC_K_GREATER, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_compare_ordered, &tfc_cl_elementwise};
const struct tfc_op tfc_op_logical_and = {"logical_and", 2, TFC_K_LOGICAL_AND, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_logic, &tfc_cl_elementwise};
const struct tfc_op tfc_op_logical_or = {"logical_or", 2, TFC_K_LOGICAL_OR, EW | TFC_OP_NO_GRADIENT, 0, NULL, 0, NULL, infer_logic, &tfc_cl_elementwise};
const struct tfc_op tfc_op_select = {"select", 3, TFC_K_SELECT, EW, 0, NULL, 0, NULL, infer_select, &tfc_cl_elementwise, tfc_grad_select};
const struct tfc_op tfc_op_bias_add = {"bias_add", 2, TFC_K_ADD, EW, 0, NULL, 0, NULL, infer_bias_add, &tfc_cl_elementwise, tfc_grad_bias_add};
const struct tfc_op tfc_op_add_n = {"add_n", 0, TFC_K_ADD_N, EW | TFC_OP_VARIADIC, 0, NULL, 0, NULL, infer_add_n, &tfc_cl_elementwise, tfc_grad_add_n};
const struct tfc_op tfc_op_fill = {"fill", 0, TFC_K_FILL, TFC_OP_NO_GRADIENT, 0, fill_attrs, 3, NULL, infer_fill, &tfc_cl_elementwise};
const struct tfc_op tfc_op_zeros_like = {"zeros_like", 1, TFC_K_FILL, TFC_OP_NO_GRADIENT, 0, zeros_attrs, 1, NULL, infer_like, &tfc_cl_elementwise, NULL, 0, 1};
const struct tfc_op tfc_op_ones_like = {"ones_like", 1, TFC_K_FILL, TFC_OP_NO_GRADIENT, 0, ones_attrs, 1, NULL, infer_like, &tfc_cl_elementwise, NULL, 0, 1};
#undef EW

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

tfc_tensor *tfc_cast(tfc_graph *g, tfc_tensor *x, enum tfc_dtype dtype)
{
    struct tfc_kattr a[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_cast, a);
    a[0].i = dtype;
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
    a[0].f = value;
    a[1].i = dtype;
    a[2].n = shape.rank;
    memcpy(a[2].v, shape.dims, sizeof(int64_t) * (size_t)shape.rank);
    return tfc_build(g, &tfc_op_fill, 0, NULL, a);
}

tfc_tensor *tfc_zeros_like(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_zeros_like, x); }
tfc_tensor *tfc_ones_like(tfc_graph *g, tfc_tensor *x) { return unary(g, &tfc_op_ones_like, x); }
