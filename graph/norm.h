/* norm.h: the normalization ops' descriptors, the builders of their gradient ops and their
 * gradient builders, shared by graph/ops_norm.c (descriptors, inference, builders),
 * graph/grad_norm.c (gradients) and graph/layers_norm.c (layers). */
#ifndef TFC_NORM_H
#define TFC_NORM_H

#include "graph.h"

extern const struct tfc_op tfc_op_batch_norm, tfc_op_batch_norm_grad, tfc_op_batch_norm_update,
    tfc_op_layer_norm, tfc_op_layer_norm_grad;

/* batch_norm_grad(dy, x, gamma, mean, var, training) with batch_norm's epsilon: the node, whose
 * outputs are dx, dgamma, dbeta, and the gradients of the moving mean and variance (nonzero in
 * inference mode only). mean and var are batch_norm's outputs 1 and 2. */
struct tfc_node *tfc_batch_norm_grad_node(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x,
                                          tfc_tensor *gamma, tfc_tensor *mean, tfc_tensor *var,
                                          tfc_tensor *training, double epsilon);
/* layer_norm_grad(dy, x, mean, var) with layer_norm's attributes: dx. */
tfc_tensor *tfc_layer_norm_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x, tfc_tensor *mean,
                                tfc_tensor *var, const struct tfc_kattr *attrs);

tfc_status tfc_grad_batch_norm(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                               tfc_tensor **dxs);
tfc_status tfc_grad_batch_norm_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                    tfc_tensor **dxs);
tfc_status tfc_grad_layer_norm(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                               tfc_tensor **dxs);
tfc_status tfc_grad_layer_norm_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                    tfc_tensor **dxs);

#endif
