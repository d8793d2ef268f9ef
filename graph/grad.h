/* grad.h: the ops that gradients are built from (also usable directly), and the gradient
 * builders of every differentiable op, referenced from the op descriptors. */
#ifndef TFC_GRAD_H
#define TFC_GRAD_H

#include "graph.h"

/* x reshaped to like's shape (known at run time). */
tfc_tensor *tfc_reshape_like(tfc_graph *g, tfc_tensor *x, tfc_tensor *like);
/* x broadcast to broadcast(x, like) (NumPy rules). */
tfc_tensor *tfc_broadcast_like(tfc_graph *g, tfc_tensor *x, tfc_tensor *like);
/* x summed over the axes that broadcasting added or stretched, back to like's shape. */
tfc_tensor *tfc_sum_to_like(tfc_graph *g, tfc_tensor *x, tfc_tensor *like);
/* dy where x > 0, else 0. */
tfc_tensor *tfc_relu_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x);
/* Zeros of like's shape holding dy at begin (the adjoint of slice). */
tfc_tensor *tfc_slice_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *like, const struct tfc_kattr *begin,
                           const struct tfc_kattr *size);
/* Zeros of like's shape plus the rows of updates added at indices (the adjoint of gather). */
tfc_tensor *tfc_scatter_add_rows(tfc_graph *g, tfc_tensor *updates, tfc_tensor *indices,
                                 tfc_tensor *like);

/* Gradient builders (graph/grad_*.c). */
tfc_status tfc_grad_identity(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_unary(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_binary(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_select(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_add_n(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_bias_add(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_cast(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_matmul(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_batch_matmul(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_softmax(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_log_softmax(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_xent(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_sparse_xent(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_reduce(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_reshape(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_transpose(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_concat(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_split(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_slice(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_gather(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
/* conv and its adjoints (graph/grad_conv.c) */
tfc_status tfc_grad_conv(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_conv_backprop_input(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_conv_backprop_filter(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
/* for the gradient ops themselves */
tfc_status tfc_grad_broadcast_like(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_sum_to_like(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_relu_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_slice_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);
tfc_status tfc_grad_scatter_add(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys, tfc_tensor **dxs);

#endif
