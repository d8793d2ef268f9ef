/* placeholder_default.c: placeholders that need no feed (TF's placeholder_with_default) and the
 * graph's "training" flag built on one. The default is an ordinary constant input, so a saved
 * graph keeps it with no store code of its own; unfed, the plan folds it like any constant, and
 * fed, the plan never reaches it. */
#include <stdio.h>
#include "graph.h"

static tfc_status infer_with_default(const struct tfc_infer *in)
{
    in->out[0] = in->in[0];
    return TFC_OK;
}

/* The identity of its default; a feed of its output replaces it (the shape check of fed
 * tensors applies, against the default's shape). A switch between modes, not a value to
 * differentiate: no gradient flows through it. */
const struct tfc_op tfc_op_placeholder_with_default = {
    .name = "placeholder_with_default", .n_inputs = 1, .kind = TFC_K_IDENTITY,
    .flags = TFC_OP_NO_GRADIENT, .infer = infer_with_default, .codelet = &tfc_cl_elementwise,
};

tfc_tensor *tfc_placeholder_with_default(tfc_graph *g, const char *name,
                                         const tfc_value *default_value)
{
    if (!g || g->status) return NULL;
    if (!default_value)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "placeholder_with_default '%s': the default value is NULL",
                              name ? name : "?");
    char cname[300];
    if (name) snprintf(cname, sizeof cname, "%s/default", name);
    tfc_tensor *c = tfc_constant(g, name ? cname : NULL, default_value);
    if (!c) return NULL;
    struct tfc_kattr attrs[TFC_MAX_ATTRS]; /* it has none; tfc_node_build copies a table */
    tfc_attrs_default(&tfc_op_placeholder_with_default, attrs);
    struct tfc_node *n = tfc_node_build(g, &tfc_op_placeholder_with_default, name, 1, &c, attrs);
    return n ? &n->outputs[0] : NULL;
}

tfc_tensor *tfc_training_flag(tfc_graph *g)
{
    if (!g || g->status) return NULL;
    tfc_tensor *t = tfc_graph_find(g, "training");
    if (t) {
        char sh[96];
        if (t->node->op != &tfc_op_placeholder_with_default || t->desc.dtype != TFC_FLOAT32 ||
            t->desc.shape.rank != 0)
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                                  "training_flag: node 'training' is a %s %s of shape %s, not "
                                  "the float32 scalar placeholder_with_default the flag is",
                                  tfc_dtype_name(t->desc.dtype), t->node->op->name,
                                  tfc_shape_str(&t->desc.shape, sh, sizeof sh));
        return t;
    }
    tfc_value *zero;
    if (tfc_value_scalar(TFC_FLOAT32, 0.0, &zero))
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "training_flag: %s", tfc_errmsg());
    int depth = tfc_scope_hide(g); /* one flag per graph, found by its absolute name */
    t = tfc_placeholder_with_default(g, "training", zero);
    tfc_scope_restore(g, depth);
    tfc_value_destroy(zero);
    return t;
}
