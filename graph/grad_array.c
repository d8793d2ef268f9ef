/* grad_array.c: gradients of the ops that move data: reshape, transpose, concat, split, slice,
 * gather (a scatter-add of rows), and of the adjoint ops slice_grad and scatter_add_rows. */
#include "grad.h"

tfc_status tfc_grad_reshape(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_reshape_like(g, dys[0], n->inputs[0]);
    return g->status;
}

tfc_status tfc_grad_transpose(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    int rank = n->inputs[0]->desc.shape.rank;
    int64_t inv[TFC_MAX_RANK];
    const struct tfc_kattr *perm = &n->attrs[TRANSPOSE_PERM];
    for (int i = 0; i < rank; i++) {
        int p = perm->n ? tfc_axis_norm(perm->v[i], rank) : rank - 1 - i;
        if (TFC_CHECK(p >= 0, tfc_graph_error, g)) return TFC_ERR_INTERNAL; /* inferred valid */
        inv[p] = i;
    }
    dxs[0] = tfc_transpose(g, dys[0], inv);
    return g->status;
}

tfc_status tfc_grad_concat(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    int rank = n->outputs[0].desc.shape.rank, axis = tfc_axis_norm(n->attrs[CONCAT_AXIS].i, rank);
    if (TFC_CHECK(axis >= 0, tfc_graph_error, g)) return TFC_ERR_INTERNAL; /* inferred valid */
    int64_t offset = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const tfc_shape *s = &n->inputs[i]->desc.shape;
        int64_t begin[TFC_MAX_RANK] = {0}, size[TFC_MAX_RANK];
        if (s->dims[axis] < 0)
            return tfc_graph_error(g, TFC_ERR_SHAPE, "gradient of node '%s' (concat): input %d "
                                   "has an unknown size along the axis", n->name, i);
        for (int d = 0; d < rank; d++) size[d] = -1;
        begin[axis] = offset;
        size[axis] = s->dims[axis];
        offset += s->dims[axis];
        dxs[i] = tfc_slice(g, dys[0], begin, size);
    }
    return g->status;
}

tfc_status tfc_grad_split(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    tfc_tensor *parts[TFC_MAX_OPERANDS];
    for (int k = 0; k < n->n_outputs; k++)
        parts[k] = dys[k] ? dys[k] : tfc_zeros_like(g, &n->outputs[k]);
    dxs[0] = tfc_concat(g, n->n_outputs, parts, (int)n->attrs[SPLIT_AXIS].i);
    return g->status;
}

tfc_status tfc_grad_slice(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_slice_grad(g, dys[0], n->inputs[0], &n->attrs[SLICE_BEGIN], &n->attrs[SLICE_SIZE]);
    return g->status;
}

tfc_status tfc_grad_slice_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_slice(g, dys[0], n->attrs[SLICE_GRAD_BEGIN].v, n->attrs[SLICE_GRAD_SIZE].v);
    return g->status;
}

tfc_status tfc_grad_gather(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_scatter_add_rows(g, dys[0], n->inputs[1], n->inputs[0]);
    return g->status;
}

tfc_status tfc_grad_scatter_add(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs)
{
    dxs[0] = tfc_gather(g, dys[0], n->inputs[1]);
    return g->status;
}
