/* grad_nn.c: gradients of matmul and batched matmul, the softmax family with cross-entropy,
 * and the reductions. */
#include "grad.h"

tfc_status tfc_grad_matmul(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *a = n->inputs[0], *b = n->inputs[1], *dy = dys[0];
    /* batch_matmul's adj_a, adj_b share these slots */
    int ta = n->attrs[MATMUL_TRANSPOSE_A].i != 0, tb = n->attrs[MATMUL_TRANSPOSE_B].i != 0;
    tfc_tensor *(*mm)(tfc_graph *, tfc_tensor *, tfc_tensor *, int, int) =
        n->op->kind == TFC_K_MATMUL ? tfc_matmul : tfc_batch_matmul;
    if (!ta && !tb) {        /* y = a b */
        dxs[0] = mm(g, dy, b, 0, 1);
        dxs[1] = mm(g, a, dy, 1, 0);
    } else if (!ta && tb) {  /* y = a b^T */
        dxs[0] = mm(g, dy, b, 0, 0);
        dxs[1] = mm(g, dy, a, 1, 0);
    } else if (ta && !tb) {  /* y = a^T b */
        dxs[0] = mm(g, b, dy, 0, 1);
        dxs[1] = mm(g, a, dy, 0, 0);
    } else {                 /* y = a^T b^T */
        dxs[0] = mm(g, b, dy, 1, 1);
        dxs[1] = mm(g, dy, a, 1, 1);
    }
    if (n->op->kind == TFC_K_BATCH_MATMUL) { /* broadcast batch dimensions sum back */
        if (!tfc_shape_equal(&dxs[0]->desc.shape, &a->desc.shape)) dxs[0] = tfc_sum_to_like(g, dxs[0], a);
        if (!tfc_shape_equal(&dxs[1]->desc.shape, &b->desc.shape)) dxs[1] = tfc_sum_to_like(g, dxs[1], b);
    }
    return g->status;
}

tfc_status tfc_grad_batch_matmul(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    return tfc_grad_matmul(g, n, dys, dxs);
}

tfc_status tfc_grad_softmax(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *y = &n->outputs[0], *dy = dys[0];
    int64_t axis = n->attrs[SOFTMAX_AXIS].i;
    tfc_tensor *dot = tfc_reduce_sum(g, tfc_mul(g, dy, y), 1, &axis, 1);
    dxs[0] = tfc_mul(g, y, tfc_sub(g, dy, dot)); /* y (dy - sum(dy y)) */
    return g->status;
}

tfc_status tfc_grad_log_softmax(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *y = &n->outputs[0], *dy = dys[0];
    int64_t axis = n->attrs[SOFTMAX_AXIS].i;
    tfc_tensor *total = tfc_reduce_sum(g, dy, 1, &axis, 1);
    dxs[0] = tfc_sub(g, dy, tfc_mul(g, tfc_exp(g, y), total)); /* dy - softmax sum(dy) */
    return g->status;
}

/* The per-row loss gradient as a column, to scale [batch, classes] terms. */
static tfc_tensor *column(tfc_graph *g, tfc_tensor *dy)
{
    return tfc_reshape(g, dy, tfc_shape_of(2, (int64_t[]){-1, 1}));
}

tfc_status tfc_grad_xent(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    /* loss = -sum_c l_c log_softmax(z)_c: dz = softmax(z) sum(l) - l, dl = -log_softmax(z) */
    tfc_tensor *z = n->inputs[0], *l = n->inputs[1], *dy = column(g, dys[0]);
    int64_t axis = 1;
    tfc_tensor *lsum = tfc_reduce_sum(g, l, 1, &axis, 1);
    dxs[0] = tfc_mul(g, dy, tfc_sub(g, tfc_mul(g, tfc_softmax(g, z, 1), lsum), l));
    dxs[1] = tfc_mul(g, dy, tfc_neg(g, tfc_log_softmax(g, z, 1)));
    return g->status;
}

tfc_status tfc_grad_sparse_xent(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *z = n->inputs[0], *labels = n->inputs[1];
    int64_t classes = z->desc.shape.dims[1];
    if (classes < 0)
        return tfc_graph_error(g, TFC_ERR_SHAPE,
                               "gradient of node '%s': the number of classes is unknown", n->name);
    tfc_tensor *onehot = tfc_one_hot(g, labels, classes, z->desc.dtype, 1.0, 0.0);
    dxs[0] = tfc_mul(g, column(g, dys[0]), tfc_sub(g, tfc_softmax(g, z, 1), onehot));
    return g->status;
}

tfc_status tfc_grad_reduce(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *x = n->inputs[0], *y = &n->outputs[0], *dy = dys[0];
    const tfc_shape *xs = &x->desc.shape;
    const struct tfc_kattr *axes = &n->attrs[REDUCE_AXES];
    int reduced[TFC_MAX_RANK] = {0}, n_ax = 0, unknown = 0;
    int64_t ax[TFC_MAX_RANK];
    for (int i = 0; i < axes->n; i++) {
        int a = tfc_axis_norm(axes->v[i], xs->rank); /* the node's inference checked it */
        if (TFC_CHECK(a >= 0, tfc_graph_error, g)) return TFC_ERR_INTERNAL;
        reduced[a] = 1;
    }
    /* the output's shape with the reduced axes kept as 1 */
    tfc_shape keep = *xs;
    int64_t count = 1;
    for (int i = 0; i < xs->rank; i++) {
        if (axes->n && !reduced[i]) continue;
        ax[n_ax++] = i;
        keep.dims[i] = 1;
        if (xs->dims[i] < 0) unknown = 1;
        count *= xs->dims[i];
    }
    int keepdims = n->attrs[REDUCE_KEEPDIMS].i != 0;
    tfc_tensor *dyk = keepdims ? dy : tfc_reshape(g, dy, keep);
    tfc_tensor *spread = tfc_broadcast_like(g, dyk, x);
    switch (n->op->kind) {
    case TFC_K_REDUCE_SUM:
        dxs[0] = spread;
        break;
    case TFC_K_REDUCE_MEAN: /* the count is known at run time only when a reduced dim is unknown */
        dxs[0] = unknown ? tfc_div(g, spread, tfc_reduce_sum(g, tfc_ones_like(g, x), n_ax, ax, 1))
                         : tfc_mul(g, spread, tfc_scalar(g, x->desc.dtype, count ? 1.0 / (double)count : 0));
        break;
    default: { /* max, min: shared equally among the elements equal to the result */
        tfc_tensor *yk = keepdims ? y : tfc_reshape(g, y, keep);
        tfc_tensor *mask = tfc_cast(g, tfc_equal(g, x, tfc_broadcast_like(g, yk, x)), x->desc.dtype);
        tfc_tensor *ties = tfc_reduce_sum(g, mask, n_ax, ax, 1);
        dxs[0] = tfc_div(g, tfc_mul(g, mask, spread), ties);
        break;
    }
    }
    return g->status;
}
