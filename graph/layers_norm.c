/* layers_norm.c: the normalization layers, built like tfc_dense (graph/layers.c): each opens a
 * name scope of its own (name, else name_1, name_2, ... when taken) and creates its variables
 * there. Batch norm's moving statistics are variables left out of the trainable set: the
 * batch_norm op's update moves them, never an optimizer. */
#include <stdio.h>
#include "graph.h"

/* Opens the layer's scope: base, else base_1, base_2, ... when a layer already holds its
 * variable `probe` there. Returns the status of the push. */
static tfc_status push_scope(tfc_graph *g, const char *base, const char *probe)
{
    const char *outer = tfc_scope_current(g);
    char scope[256], full[512];
    snprintf(scope, sizeof scope, "%s", base);
    for (int k = 1;; k++) {
        snprintf(full, sizeof full, "%s%s%s/%s", outer, *outer ? "/" : "", scope, probe);
        if (!tfc_graph_find(g, full)) break;
        snprintf(scope, sizeof scope, "%s_%d", base, k);
    }
    return tfc_scope_push(g, scope);
}

static int float_input(tfc_graph *g, tfc_tensor *x, const char *layer, const char *label)
{
    if (!x) {
        tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': input is NULL", layer, label);
        return 0;
    }
    if (!tfc_dtype_is_float(x->desc.dtype)) {
        tfc_graph_fail(g, TFC_ERR_DTYPE, "%s '%s': input '%s' is %s (float32 or float64)", layer,
                       label, x->name, tfc_dtype_name(x->desc.dtype));
        return 0;
    }
    return 1;
}

tfc_tensor *tfc_batch_norm_layer(tfc_graph *g, tfc_tensor *x, tfc_tensor *training,
                                 double momentum, double epsilon, const char *name)
{
    if (!g || g->status) return NULL;
    const char *label = name ? name : "batch_norm";
    char sh[96];
    if (!float_input(g, x, "batch_norm", label)) return NULL;
    const tfc_shape *s = &x->desc.shape;
    if (s->rank < 2 || s->dims[1] < 1)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "batch_norm '%s': input '%s' has shape %s "
                              "(needs [N, C] or [N, C, spatial...] with C known)", label,
                              x->name, tfc_shape_str(s, sh, sizeof sh));
    if (!training)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "batch_norm '%s': training is NULL "
                              "(a scalar float tensor: nonzero trains)", label);
    if (push_scope(g, label, "gamma")) return NULL;
    enum tfc_dtype dt = x->desc.dtype;
    tfc_shape cs = tfc_shape_of(1, &s->dims[1]);
    tfc_tensor *gamma = tfc_variable(g, "gamma", dt, cs, tfc_init_ones());
    tfc_tensor *beta = tfc_variable(g, "beta", dt, cs, tfc_init_zeros());
    tfc_tensor *mm = tfc_variable(g, "moving_mean", dt, cs, tfc_init_zeros());
    tfc_tensor *mv = tfc_variable(g, "moving_variance", dt, cs, tfc_init_ones());
    tfc_tensor *y = NULL;
    if (mm && mv && !tfc_variable_set_trainable(mm, 0) && !tfc_variable_set_trainable(mv, 0)) {
        tfc_batch_norm_params p = {epsilon, momentum};
        y = tfc_batch_norm(g, x, gamma, beta, mm, mv, training, &p);
    }
    tfc_scope_pop(g);
    return y;
}

tfc_tensor *tfc_layer_norm_layer(tfc_graph *g, tfc_tensor *x, int n_axes, double epsilon,
                                 const char *name)
{
    if (!g || g->status) return NULL;
    const char *label = name ? name : "layer_norm";
    char sh[96];
    if (!float_input(g, x, "layer_norm", label)) return NULL;
    const tfc_shape *s = &x->desc.shape;
    if (n_axes < 1 || n_axes > s->rank)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "layer_norm '%s': n_axes is %d, must "
                              "be 1 to the rank of '%s' (%d)", label, n_axes, x->name, s->rank);
    tfc_shape ns = tfc_shape_of(n_axes, &s->dims[s->rank - n_axes]);
    for (int d = 0; d < n_axes; d++)
        if (ns.dims[d] < 0)
            return tfc_graph_fail(g, TFC_ERR_SHAPE, "layer_norm '%s': input '%s' has shape %s; "
                                  "its last %d dims must be known", label, x->name,
                                  tfc_shape_str(s, sh, sizeof sh), n_axes);
    if (push_scope(g, label, "gamma")) return NULL;
    tfc_tensor *gamma = tfc_variable(g, "gamma", x->desc.dtype, ns, tfc_init_ones());
    tfc_tensor *beta = tfc_variable(g, "beta", x->desc.dtype, ns, tfc_init_zeros());
    tfc_tensor *y = tfc_layer_norm(g, x, gamma, beta, n_axes, epsilon);
    tfc_scope_pop(g);
    return y;
}
