/* pool.h: the pooling ops' descriptors, gradient builders and the builders of their gradient
 * ops, shared by graph/ops_pool.c (descriptors, inference, builders) and graph/grad_pool.c. */
#ifndef TFC_POOL_H
#define TFC_POOL_H

#include "graph.h"

extern const struct tfc_op tfc_op_max_pool, tfc_op_avg_pool, tfc_op_max_pool_grad,
    tfc_op_avg_pool_grad, tfc_op_max_pool_gather;

/* max_pool of x with the attributes attrs (POOL_*) and argmax indices forced on: the node. */
struct tfc_node *tfc_max_pool_node(tfc_graph *g, tfc_tensor *x, const struct tfc_kattr *attrs);
/* Zeros of x's shape plus dy scattered at the argmax indices (per image-channel plane). */
tfc_tensor *tfc_max_pool_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *indices, tfc_tensor *x);
/* x at the argmax indices (the adjoint of max_pool_grad in dy): indices' shape. */
tfc_tensor *tfc_max_pool_gather(tfc_graph *g, tfc_tensor *x, tfc_tensor *indices);
/* dy of an avg_pool with attributes attrs spread back over its windows: x's shape. */
tfc_tensor *tfc_avg_pool_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x,
                              const struct tfc_kattr *attrs);
/* avg_pool with the given attributes (already in slots). */
tfc_tensor *tfc_avg_pool_attrs(tfc_graph *g, tfc_tensor *x, const struct tfc_kattr *attrs);

tfc_status tfc_grad_max_pool(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                             tfc_tensor **dxs);
tfc_status tfc_grad_avg_pool(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                             tfc_tensor **dxs);
tfc_status tfc_grad_max_pool_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                  tfc_tensor **dxs);
tfc_status tfc_grad_avg_pool_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                  tfc_tensor **dxs);
tfc_status tfc_grad_max_pool_gather(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                    tfc_tensor **dxs);

#endif
