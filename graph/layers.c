/* layers.c: layer builders that create their own variables (with the initializer their
 * activation wants) under a name scope of their own, so model code neither writes a dense()
 * helper nor lists variables. The conv layers are in layers_conv.c. */
#include <stdio.h>
#include "layers.h"

static uint64_t name_seed(const char *s) /* FNV-1a: a layer's weights depend on its name only */
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

tfc_status tfc_layer_push_scope(tfc_graph *g, const char *base, const char *probe)
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

tfc_tensor *tfc_layer_variable(tfc_graph *g, const char *name, enum tfc_dtype dtype,
                               tfc_shape shape, tfc_init init)
{
    char full[512];
    snprintf(full, sizeof full, "%s/%s", tfc_scope_current(g), name);
    if (init.kind >= TFC_INIT_UNIFORM) init.seed = name_seed(full); /* the random kinds */
    return tfc_variable(g, name, dtype, shape, init);
}

tfc_tensor *tfc_layer_activate(tfc_graph *g, tfc_tensor *y, tfc_activation activation)
{
    switch (activation) {
    case TFC_ACT_RELU: return tfc_relu(g, y);
    case TFC_ACT_TANH: return tfc_tanh(g, y);
    case TFC_ACT_SIGMOID: return tfc_sigmoid(g, y);
    case TFC_ACT_GELU: return tfc_gelu(g, y);
    default: return y;
    }
}

tfc_tensor *tfc_dense(tfc_graph *g, tfc_tensor *x, int64_t units, tfc_activation activation,
                      const char *name)
{
    if (!g || g->status) return NULL;
    const char *label = name ? name : "dense";
    char sh[96];
    if (!x) return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "dense '%s': input is NULL", label);
    if (units < 1)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "dense '%s': units is %lld (at least 1)", label, (long long)units);
    if (activation < TFC_ACT_NONE || activation > TFC_ACT_GELU)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "dense '%s': unknown activation %d (TFC_ACT_NONE to TFC_ACT_GELU)",
                              label, (int)activation);
    const tfc_shape *s = &x->desc.shape;
    if (s->rank != 2 || s->dims[1] < 1)
        return tfc_graph_fail(g, TFC_ERR_SHAPE,
                              "dense '%s': input '%s' has shape %s (needs [batch, in] with in "
                              "known)", label, x->name, tfc_shape_str(s, sh, sizeof sh));
    enum tfc_dtype dt = x->desc.dtype;
    if (dt != TFC_FLOAT32 && dt != TFC_FLOAT64)
        return tfc_graph_fail(g, TFC_ERR_DTYPE, "dense '%s': input '%s' is %s (float32 or "
                              "float64)", label, x->name, tfc_dtype_name(dt));
    if (tfc_layer_push_scope(g, label, "kernel")) return NULL;
    tfc_init kernel_init =
        activation == TFC_ACT_RELU ? tfc_init_he_normal(0) : tfc_init_glorot_uniform(0);
    tfc_tensor *w = tfc_layer_variable(g, "kernel", dt,
                                       tfc_shape_of(2, (int64_t[]){s->dims[1], units}), kernel_init);
    tfc_tensor *b = tfc_layer_variable(g, "bias", dt, tfc_shape_of(1, &units), tfc_init_zeros());
    tfc_tensor *y = tfc_layer_activate(g, tfc_bias_add(g, tfc_matmul(g, x, w, 0, 0), b), activation);
    tfc_scope_pop(g);
    return y;
}
