/* grad_math.c: gradients of the element-wise ops. Broadcast operands get their gradient summed
 * back to their own shape (sum_to_like). Formulas use the op's output where that is cheaper
 * (exp, sqrt, sigmoid, tanh); everything is built from differentiable ops. */
#include "grad.h"

static tfc_tensor *k(tfc_graph *g, tfc_tensor *like, double v)
{
    return tfc_scalar(g, like->desc.dtype, v);
}

/* dy reduced to x's shape; no node when the shapes are equal and fully known. */
static tfc_tensor *to_shape_of(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x)
{
    if (!dy) return NULL;
    if (tfc_shape_equal(&dy->desc.shape, &x->desc.shape) && tfc_shape_numel(&x->desc.shape) >= 0)
        return dy;
    return tfc_sum_to_like(g, dy, x);
}

tfc_status tfc_grad_identity(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    (void)g;
    (void)n;
    dxs[0] = dys[0];
    return TFC_OK;
}

tfc_status tfc_grad_unary(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *x = n->inputs[0], *y = &n->outputs[0], *dy = dys[0];
    switch (n->op->kind) {
    case TFC_K_NEG: dxs[0] = tfc_neg(g, dy); break;
    case TFC_K_ABS: dxs[0] = tfc_select(g, tfc_less(g, x, k(g, x, 0)), tfc_neg(g, dy), dy); break;
    case TFC_K_SQUARE: dxs[0] = tfc_mul(g, dy, tfc_mul(g, x, k(g, x, 2))); break;
    case TFC_K_SQRT: dxs[0] = tfc_div(g, dy, tfc_mul(g, y, k(g, y, 2))); break;
    case TFC_K_RSQRT: /* d x^-1/2 = -1/2 y^3 */
        dxs[0] = tfc_mul(g, dy, tfc_mul(g, k(g, y, -0.5), tfc_mul(g, y, tfc_square(g, y))));
        break;
    case TFC_K_EXP: dxs[0] = tfc_mul(g, dy, y); break;
    case TFC_K_LOG: dxs[0] = tfc_div(g, dy, x); break;
    case TFC_K_RELU: dxs[0] = tfc_relu_grad(g, dy, x); break;
    case TFC_K_SIGMOID: dxs[0] = tfc_mul(g, dy, tfc_mul(g, y, tfc_sub(g, k(g, y, 1), y))); break;
    case TFC_K_TANH: dxs[0] = tfc_mul(g, dy, tfc_sub(g, k(g, y, 1), tfc_square(g, y))); break;
    case TFC_K_SOFTPLUS: dxs[0] = tfc_mul(g, dy, tfc_sigmoid(g, x)); break;
    default: dxs[0] = dy; break; /* identity */
    }
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
        tfc_graph_fail(g, TFC_ERR_NOT_FOUND, "node '%s': op '%s' has no gradient", n->name,
                       n->op->name);
        return TFC_ERR_NOT_FOUND;
    }
    dxs[0] = to_shape_of(g, da, a);
    dxs[1] = to_shape_of(g, db, b);
    return g->status;
}

tfc_status tfc_grad_select(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *c = n->inputs[0], *dy = dys[0], *zero = tfc_zeros_like(g, dy);
    dxs[1] = to_shape_of(g, tfc_select(g, c, dy, zero), n->inputs[1]);
    dxs[2] = to_shape_of(g, tfc_select(g, c, zero, dy), n->inputs[2]);
    return g->status;
}

tfc_status tfc_grad_add_n(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    for (int i = 0; i < n->n_inputs; i++) dxs[i] = dys[0];
    return g->status;
}

tfc_status tfc_grad_bias_add(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    int rank = n->inputs[0]->desc.shape.rank, axes[TFC_MAX_RANK];
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
    dxs[0] = to_shape_of(g, tfc_relu_grad(g, dys[0], n->inputs[1]), n->inputs[0]);
    return g->status;
}
