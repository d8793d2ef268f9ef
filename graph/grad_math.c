/* grad_math.c: gradients of the element-wise ops. Broadcast operands get their gradient summed
 * back to their own shape (sum_to_like). Formulas use the op's output where that is cheaper
 * (exp, sqrt, sigmoid, tanh); everything is built from differentiable ops. */
#include "grad.h"

static tfc_tensor *k(tfc_graph *g, tfc_tensor *like, double v)
{
    return tfc_scalar(g, like->desc.dtype, v);
}

/* Whether x's dimension i, unknown until the graph runs, is also the dimension the broadcast
 * of node n's inputs has there: every other input has a 1 or no dimension at i (or is x). */
static int keeps_dim(const struct tfc_node *n, const tfc_tensor *x, int i)
{
    for (int k = 0; k < n->n_inputs; k++) {
        const tfc_tensor *in = n->inputs[k];
        int j = i - (x->desc.shape.rank - in->desc.shape.rank);
        if (in != x && j >= 0 && in->desc.shape.dims[j] != 1) return 0;
    }
    return 1;
}

/* dy, the gradient of node n's broadcast output (or a product of it), reduced to input x's
 * shape; no node when the shapes are equal when the graph runs: equal where known, and each
 * unknown dimension of x one that the broadcast keeps (a dynamic batch beside a bias). The
 * identity sum_to_like would copy the whole activation gradient every step. */
static tfc_tensor *to_shape_of(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x,
                               const struct tfc_node *n)
{
    if (!dy) return NULL;
    const tfc_shape *xs = &x->desc.shape;
    int same = tfc_shape_equal(&dy->desc.shape, xs);
    for (int i = 0; same && i < xs->rank; i++)
        if (xs->dims[i] < 0) same = keeps_dim(n, x, i);
    return same ? dy : tfc_sum_to_like(g, dy, x);
}

tfc_status tfc_grad_identity(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    (void)g;
    (void)n;
    dxs[0] = dys[0];
    return TFC_OK;
}

/* dy * f'(x) for the math kinds; NULL for the others (activation_dx). */
static tfc_tensor *math_dx(tfc_graph *g, struct tfc_node *n, tfc_tensor *dy)
{
    tfc_tensor *x = n->inputs[0], *y = &n->outputs[0];
    double lo = n->attrs[TFC_EW_ATTR_P0].f, hi = n->attrs[TFC_EW_ATTR_P1].f;
    switch (n->op->kind) {
    case TFC_K_NEG: return tfc_neg(g, dy);
    case TFC_K_ABS: return tfc_select(g, tfc_less(g, x, k(g, x, 0)), tfc_neg(g, dy), dy);
    case TFC_K_SQUARE: return tfc_mul(g, dy, tfc_mul(g, x, k(g, x, 2)));
    case TFC_K_SQRT: return tfc_div(g, dy, tfc_mul(g, y, k(g, y, 2)));
    case TFC_K_RSQRT: /* d x^-1/2 = -1/2 y^3 */
        return tfc_mul(g, dy, tfc_mul(g, k(g, y, -0.5), tfc_mul(g, y, tfc_square(g, y))));
    case TFC_K_EXP: return tfc_mul(g, dy, y);
    case TFC_K_LOG: return tfc_div(g, dy, x);
    case TFC_K_SIN: return tfc_mul(g, dy, tfc_cos(g, x));
    case TFC_K_COS: return tfc_neg(g, tfc_mul(g, dy, tfc_sin(g, x)));
    case TFC_K_RECIPROCAL: return tfc_neg(g, tfc_mul(g, dy, tfc_square(g, y)));
    case TFC_K_LOG1P: return tfc_div(g, dy, tfc_add(g, x, k(g, x, 1)));
    case TFC_K_EXPM1: return tfc_mul(g, dy, tfc_add(g, y, k(g, y, 1)));
    case TFC_K_FLOOR: /* piecewise constant: zero almost everywhere, as in PyTorch */
    case TFC_K_CEIL:
    case TFC_K_ROUND:
    case TFC_K_SIGN: return tfc_zeros_like(g, dy);
    case TFC_K_CLIP: { /* dy where min <= x <= max (x at a bound passes, as in TensorFlow) */
        tfc_tensor *in = tfc_logical_and(g, tfc_logical_not(g, tfc_less(g, x, k(g, x, lo))),
                                         tfc_logical_not(g, tfc_greater(g, x, k(g, x, hi))));
        return tfc_select(g, in, dy, tfc_zeros_like(g, dy));
    }
    default: return NULL;
    }
}

/* gelu: d/dx x Phi(x) = Phi(x) + x phi(x), Phi and phi the normal CDF and density. */
static tfc_tensor *gelu_dx(tfc_graph *g, tfc_tensor *x, tfc_tensor *dy)
{
    tfc_tensor *cdf = tfc_mul(g, k(g, x, 0.5),
                              tfc_add(g, k(g, x, 1),
                                      tfc_erf(g, tfc_mul(g, x, k(g, x, 0.70710678118654752440)))));
    tfc_tensor *pdf = tfc_mul(g, k(g, x, 0.39894228040143267794), /* 1/sqrt(2 pi) */
                              tfc_exp(g, tfc_mul(g, k(g, x, -0.5), tfc_square(g, x))));
    return tfc_mul(g, dy, tfc_add(g, cdf, tfc_mul(g, x, pdf)));
}

/* The tanh form of gelu: with u = c (x + a x^3), t = tanh(u),
 * d/dx = (1 + t)/2 + x (1 - t^2) c (1 + 3 a x^2) / 2. */
static tfc_tensor *gelu_tanh_dx(tfc_graph *g, tfc_tensor *x, tfc_tensor *dy)
{
    const double c = 0.79788456080286535588, a = 0.044715;
    tfc_tensor *x2 = tfc_square(g, x);
    tfc_tensor *t = tfc_tanh(g, tfc_mul(g, k(g, x, c),
                                        tfc_add(g, x, tfc_mul(g, k(g, x, a), tfc_mul(g, x, x2)))));
    tfc_tensor *half_one_plus_t = tfc_mul(g, k(g, x, 0.5), tfc_add(g, k(g, x, 1), t));
    tfc_tensor *du = tfc_mul(g, k(g, x, c),
                             tfc_add(g, k(g, x, 1), tfc_mul(g, k(g, x, 3 * a), x2)));
    tfc_tensor *rest = tfc_mul(g, tfc_mul(g, k(g, x, 0.5), x),
                               tfc_mul(g, tfc_sub(g, k(g, x, 1), tfc_square(g, t)), du));
    return tfc_mul(g, dy, tfc_add(g, half_one_plus_t, rest));
}

/* dy * f'(x) for the activations; NULL for kinds without a gradient. */
static tfc_tensor *activation_dx(tfc_graph *g, struct tfc_node *n, tfc_tensor *dy)
{
    tfc_tensor *x = n->inputs[0], *y = &n->outputs[0], *s;
    double p0 = n->attrs[TFC_EW_ATTR_P0].f, p1 = n->attrs[TFC_EW_ATTR_P1].f;
    const double selu_scale = 1.05070098735548049342, selu_alpha = 1.67326324235437728482;
    switch (n->op->kind) {
    case TFC_K_RELU: return tfc_relu_grad(g, dy, x);
    case TFC_K_SIGMOID: return tfc_mul(g, dy, tfc_mul(g, y, tfc_sub(g, k(g, y, 1), y)));
    case TFC_K_TANH: return tfc_mul(g, dy, tfc_sub(g, k(g, y, 1), tfc_square(g, y)));
    case TFC_K_SOFTPLUS: return tfc_mul(g, dy, tfc_sigmoid(g, x));
    case TFC_K_ERF: /* 2/sqrt(pi) exp(-x^2) */
        return tfc_mul(g, dy, tfc_mul(g, k(g, x, 1.12837916709551257390),
                                      tfc_exp(g, tfc_neg(g, tfc_square(g, x)))));
    case TFC_K_GELU: return gelu_dx(g, x, dy);
    case TFC_K_GELU_TANH: return gelu_tanh_dx(g, x, dy);
    case TFC_K_ELU: /* y + alpha below 0 */
        return tfc_select(g, tfc_greater(g, x, k(g, x, 0)), dy,
                          tfc_mul(g, dy, tfc_add(g, y, k(g, y, p0))));
    case TFC_K_SELU:
        return tfc_select(g, tfc_greater(g, x, k(g, x, 0)), tfc_mul(g, dy, k(g, dy, selu_scale)),
                          tfc_mul(g, dy, tfc_add(g, y, k(g, y, selu_scale * selu_alpha))));
    case TFC_K_LEAKY_RELU:
        return tfc_select(g, tfc_greater(g, x, k(g, x, 0)), dy, tfc_mul(g, dy, k(g, dy, p0)));
    case TFC_K_SILU: /* s (1 + x (1 - s)) */
        s = tfc_sigmoid(g, x);
        return tfc_mul(g, dy, tfc_mul(g, s, tfc_add(g, k(g, x, 1),
                                                    tfc_mul(g, x, tfc_sub(g, k(g, x, 1), s)))));
    case TFC_K_HARD_SIGMOID: { /* alpha where 0 < alpha x + beta < 1 */
        tfc_tensor *v = tfc_add(g, tfc_mul(g, x, k(g, x, p0)), k(g, x, p1));
        tfc_tensor *in = tfc_logical_and(g, tfc_greater(g, v, k(g, v, 0)),
                                         tfc_less(g, v, k(g, v, 1)));
        return tfc_select(g, in, tfc_mul(g, dy, k(g, dy, p0)), tfc_zeros_like(g, dy));
    }
    case TFC_K_SOFTSIGN: /* 1/(1 + |x|)^2 */
        return tfc_div(g, dy, tfc_square(g, tfc_add(g, k(g, x, 1), tfc_abs(g, x))));
    default: return NULL;
    }
}

tfc_status tfc_grad_unary(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *dx = math_dx(g, n, dys[0]);
    if (!dx) dx = activation_dx(g, n, dys[0]);
    if (!dx && g->status == TFC_OK)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': op '%s' has no gradient",
                               n->name, n->op->name);
    dxs[0] = dx;
    return g->status;
}

tfc_status tfc_grad_binary(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *a = n->inputs[0], *b = n->inputs[1], *y = &n->outputs[0], *dy = dys[0];
    tfc_tensor *da = NULL, *db = NULL, *mask;
    switch (n->op->kind) {
    case TFC_K_ADD: da = dy; db = dy; break;
    case TFC_K_SUB: da = dy; db = tfc_neg(g, dy); break;
    case TFC_K_MUL: da = tfc_mul(g, dy, b); db = tfc_mul(g, dy, a); break;
    case TFC_K_DIV:
        da = tfc_div(g, dy, b);
        db = tfc_neg(g, tfc_div(g, tfc_mul(g, dy, a), tfc_square(g, b)));
        break;
    case TFC_K_MAXIMUM: /* ties go to a, as in TensorFlow */
    case TFC_K_MINIMUM:
        mask = tfc_logical_not(g, n->op->kind == TFC_K_MAXIMUM ? tfc_less(g, a, b) : tfc_greater(g, a, b));
        da = tfc_select(g, mask, dy, tfc_zeros_like(g, dy));
        db = tfc_select(g, mask, tfc_zeros_like(g, dy), dy);
        break;
    case TFC_K_POW: /* d a^b = b a^(b-1) da + log(a) a^b db, log taken where a > 0 */
        da = tfc_mul(g, dy, tfc_mul(g, b, tfc_pow(g, a, tfc_sub(g, b, k(g, b, 1)))));
        db = tfc_mul(g, dy, tfc_mul(g, y, tfc_select(g, tfc_greater(g, a, k(g, a, 0)), tfc_log(g, a),
                                                     tfc_zeros_like(g, a))));
        break;
    default:
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': op '%s' has no gradient",
                               n->name, n->op->name);
    }
    dxs[0] = to_shape_of(g, da, a, n);
    dxs[1] = to_shape_of(g, db, b, n);
    return g->status;
}

tfc_status tfc_grad_select(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *c = n->inputs[0], *dy = dys[0], *zero = tfc_zeros_like(g, dy);
    dxs[1] = to_shape_of(g, tfc_select(g, c, dy, zero), n->inputs[1], n);
    dxs[2] = to_shape_of(g, tfc_select(g, c, zero, dy), n->inputs[2], n);
    return g->status;
}

tfc_status tfc_grad_add_n(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    for (int i = 0; i < n->n_inputs; i++) dxs[i] = dys[0];
    return g->status;
}

tfc_status tfc_grad_bias_add(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    int rank = n->inputs[0]->desc.shape.rank;
    int64_t axes[TFC_MAX_RANK];
    for (int i = 0; i < rank - 1; i++) axes[i] = i;
    dxs[0] = dys[0];
    dxs[1] = rank > 1 ? tfc_reduce_sum(g, dys[0], rank - 1, axes, 0) : dys[0];
    return g->status;
}

tfc_status tfc_grad_cast(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    enum tfc_dtype from = n->inputs[0]->desc.dtype;
    if (tfc_dtype_is_float(from) && tfc_dtype_is_float(n->outputs[0].desc.dtype))
        dxs[0] = tfc_cast(g, dys[0], from);
    return g->status;
}

tfc_status tfc_grad_broadcast_like(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_sum_to_like(g, dys[0], n->inputs[0]);
    return g->status;
}

tfc_status tfc_grad_sum_to_like(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_broadcast_like(g, dys[0], n->inputs[0]);
    return g->status;
}

tfc_status tfc_grad_relu_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    /* linear in dy (summed back to dy's shape when x broadcast it); zero a.e. in x */
    dxs[0] = to_shape_of(g, tfc_relu_grad(g, dys[0], n->inputs[1]), n->inputs[0], n);
    return g->status;
}
