/* layers_conv.c: convolution and pooling layers, built like tfc_dense (layers.c): a scope of
 * their own, variables seeded by their names. The kernel is [K, C/groups, kernel...] (the conv
 * op's layout, not TF's), so its initializer scale is computed here from that layout rather
 * than by the He and Glorot initializers, which read fans from TF's layout. */
#include <math.h>
#include <stdio.h>
#include "layers.h"

/* Checks x, n_spatial, the kernel sizes, groups and the activation; 0 after recording an error
 * on g (tfc_graph_fail returns NULL, so !! makes it that 0). */
static int conv_layer_args(tfc_graph *g, const char *label, tfc_tensor *x, int64_t filters,
                           int n_spatial, const int64_t *kernel, int64_t groups,
                           tfc_activation act)
{
    char sh[96];
    if (!x) return !!tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "conv_layer '%s': input is NULL", label);
    if (n_spatial < 1 || n_spatial > 3 || !kernel)
        return !!tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "conv_layer '%s': n_spatial is %d "
                                "(1 to 3, with that many kernel sizes)%s", label, n_spatial,
                                kernel ? "" : "; kernel is NULL");
    for (int d = 0; d < n_spatial; d++)
        if (kernel[d] < 1)
            return !!tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "conv_layer '%s': kernel size "
                                    "%lld in spatial dim %d (at least 1)", label,
                                    (long long)kernel[d], d);
    const tfc_shape *s = &x->desc.shape;
    if (s->rank != 2 + n_spatial || s->dims[1] < 1)
        return !!tfc_graph_fail(g, TFC_ERR_SHAPE, "conv_layer '%s': input '%s' has shape %s "
                                "(needs [N, C, %d spatial dims] with C known)", label, x->name,
                                tfc_shape_str(s, sh, sizeof sh), n_spatial);
    if (x->desc.dtype != TFC_FLOAT32 && x->desc.dtype != TFC_FLOAT64)
        return !!tfc_graph_fail(g, TFC_ERR_DTYPE, "conv_layer '%s': input '%s' is %s (float32 "
                                "or float64)", label, x->name, tfc_dtype_name(x->desc.dtype));
    if (filters < 1 || groups < 1 || s->dims[1] % groups || filters % groups)
        return !!tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "conv_layer '%s': %lld filters in "
                                "%lld groups over %lld input channels (filters >= 1, and both "
                                "channel counts divisible by groups)", label, (long long)filters,
                                (long long)groups, (long long)s->dims[1]);
    if (act < TFC_ACT_NONE || act > TFC_ACT_GELU)
        return !!tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "conv_layer '%s': unknown activation "
                                "%d (TFC_ACT_NONE to TFC_ACT_GELU)", label, (int)act);
    return 1;
}

/* He normal (ReLU) or Glorot uniform for a kernel [K, C/groups, kernel...]: fan_in is
 * C/groups times the kernel volume, fan_out K times it (as PyTorch counts them). */
static tfc_init conv_kernel_init(int64_t filters, int64_t in_per_group, int n_spatial,
                                 const int64_t *kernel, tfc_activation act)
{
    double volume = 1;
    for (int d = 0; d < n_spatial; d++) volume *= (double)kernel[d];
    double fan_in = (double)in_per_group * volume, fan_out = (double)filters * volume;
    if (act == TFC_ACT_RELU) return tfc_init_normal(0, sqrt(2.0 / fan_in), 0);
    double limit = sqrt(6.0 / (fan_in + fan_out));
    return tfc_init_uniform(-limit, limit, 0);
}

tfc_tensor *tfc_conv_layer(tfc_graph *g, tfc_tensor *x, int64_t filters, int n_spatial,
                           const int64_t *kernel, const tfc_conv_params *p,
                           tfc_activation activation, int use_bias, const char *name)
{
    if (!g || g->status) return NULL;
    const char *label = name ? name : "conv";
    tfc_conv_params same = {.auto_pad = TFC_CONV_PAD_SAME_UPPER};
    if (!p) p = &same;
    int64_t groups = p->groups ? p->groups : 1;
    if (!conv_layer_args(g, label, x, filters, n_spatial, kernel, groups, activation))
        return NULL;
    enum tfc_dtype dt = x->desc.dtype;
    int64_t in_per_group = x->desc.shape.dims[1] / groups;
    int64_t wdims[5] = {filters, in_per_group}, bdims[4] = {filters};
    for (int d = 0; d < n_spatial; d++) wdims[2 + d] = kernel[d], bdims[1 + d] = 1;
    if (tfc_layer_push_scope(g, label, "kernel")) return NULL;
    tfc_tensor *w = tfc_layer_variable(
        g, "kernel", dt, tfc_shape_of(2 + n_spatial, wdims),
        conv_kernel_init(filters, in_per_group, n_spatial, kernel, activation));
    tfc_tensor *y = tfc_conv(g, x, w, p);
    if (use_bias) { /* stored as [K], added as [K, 1, ...] to broadcast over the positions */
        tfc_tensor *b = tfc_layer_variable(g, "bias", dt, tfc_shape_of(1, &filters),
                                           tfc_init_zeros());
        y = tfc_add(g, y, tfc_reshape(g, b, tfc_shape_of(1 + n_spatial, bdims)));
    }
    y = tfc_layer_activate(g, y, activation);
    tfc_scope_pop(g);
    return y;
}

/* A pooling window of `size` in every spatial dim, moved by stride (0: size), no padding. */
static tfc_tensor *pool_layer(tfc_graph *g, tfc_tensor *x, int n_spatial, int64_t size,
                              int64_t stride, int max)
{
    if (!g || g->status) return NULL;
    const char *what = max ? "max_pool_layer" : "avg_pool_layer";
    if (n_spatial < 1 || n_spatial > 3 || size < 1 || stride < 0)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s: n_spatial %d, size %lld, stride "
                              "%lld (n_spatial 1 to 3, size >= 1, stride >= 0; 0 means size)",
                              what, n_spatial, (long long)size, (long long)stride);
    tfc_pool_params p = {.n_spatial = n_spatial};
    for (int d = 0; d < n_spatial; d++) p.kernel[d] = size, p.strides[d] = stride ? stride : size;
    return max ? tfc_max_pool(g, x, &p, NULL) : tfc_avg_pool(g, x, &p);
}

tfc_tensor *tfc_max_pool_layer(tfc_graph *g, tfc_tensor *x, int n_spatial, int64_t size,
                               int64_t stride)
{
    return pool_layer(g, x, n_spatial, size, stride, 1);
}

tfc_tensor *tfc_avg_pool_layer(tfc_graph *g, tfc_tensor *x, int n_spatial, int64_t size,
                               int64_t stride)
{
    return pool_layer(g, x, n_spatial, size, stride, 0);
}
