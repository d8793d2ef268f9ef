/* layers.h: what the layer builders (layers.c, layers_conv.c) share: a scope per layer, a
 * variable seeded by its full name, the activation. */
#ifndef TFC_LAYERS_H
#define TFC_LAYERS_H

#include "graph.h"

/* Opens the layer's scope: base, else base_1, base_2, ... when a layer already used it (its
 * variable `probe` exists). Returns the status of the push. */
tfc_status tfc_layer_push_scope(tfc_graph *g, const char *base, const char *probe);
/* A variable of the open scope; a random init's seed is replaced by a hash of the variable's
 * full name, so a layer's weights depend on its name only. */
tfc_tensor *tfc_layer_variable(tfc_graph *g, const char *name, enum tfc_dtype dtype,
                               tfc_shape shape, tfc_init init);
/* activation(y); TFC_ACT_NONE gives y. */
tfc_tensor *tfc_layer_activate(tfc_graph *g, tfc_tensor *y, tfc_activation activation);

#endif
