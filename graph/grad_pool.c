/* grad_pool.c: gradients of the pooling ops. Max pooling routes dy through its argmax (the
 * node's own indices output, or a recomputed one when it was built without); its gradient op's
 * adjoint in dy is a gather at the same argmax, and that gather's adjoint is the scatter again,
 * so gradients of gradients stay within these two ops. Average pooling is linear: its gradient
 * op's adjoint in dy is the same average pooling. */
#include "pool.h"

tfc_status tfc_grad_max_pool(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                             tfc_tensor **dxs)
{
    tfc_tensor *x = n->inputs[0], *indices;
    if (!dys[0]) return g->status; /* only the indices are used: no gradient */
    if (n->n_outputs == 2) {
        indices = &n->outputs[1];
    } else {
        struct tfc_node *with = tfc_max_pool_node(g, x, n->attrs);
        if (!with) return g->status;
        indices = &with->outputs[1];
    }
    dxs[0] = tfc_max_pool_grad(g, dys[0], indices, x);
    return g->status;
}

tfc_status tfc_grad_max_pool_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                  tfc_tensor **dxs)
{
    dxs[0] = tfc_max_pool_gather(g, dys[0], n->inputs[1]); /* indices, x: no gradient */
    return g->status;
}

tfc_status tfc_grad_max_pool_gather(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                    tfc_tensor **dxs)
{
    dxs[0] = tfc_max_pool_grad(g, dys[0], n->inputs[1], n->inputs[0]);
    return g->status;
}

tfc_status tfc_grad_avg_pool(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                             tfc_tensor **dxs)
{
    dxs[0] = tfc_avg_pool_grad(g, dys[0], n->inputs[0], n->attrs);
    return g->status;
}

tfc_status tfc_grad_avg_pool_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                  tfc_tensor **dxs)
{
    dxs[0] = tfc_avg_pool_attrs(g, dys[0], n->attrs);
    return g->status;
}
