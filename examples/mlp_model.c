/* mlp_model.c: the flagship network and its data (see mlp_model.h). The graph's node order
 * is part of what the flagship's losses depend on (generated names, plan order), so callers
 * add their own nodes only after mlp_model_build. */
#include <stdio.h>
#include "mlp_model.h"

/* The variables tfc_dense made for layer `name`, kernel then bias, for the callers that list
 * them (checkpoint benchmarks; an explicit tfc_minimize list). */
static void layer_vars(tfc_graph *g, const char *name, tfc_tensor **vars)
{
    char path[64];
    snprintf(path, sizeof path, "%s/kernel", name);
    vars[0] = tfc_graph_find(g, path);
    snprintf(path, sizeof path, "%s/bias", name);
    vars[1] = tfc_graph_find(g, path);
}

void mlp_model_build(tfc_graph *g, enum tfc_dtype label_dtype, struct mlp_model *m)
{
    m->images = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 784}));
    m->labels = tfc_placeholder(g, "labels", label_dtype, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h1 = tfc_dense(g, m->images, 256, TFC_ACT_RELU, "dense1");
    tfc_tensor *h2 = tfc_dense(g, h1, 128, TFC_ACT_RELU, "dense2");
    m->logits = tfc_dense(g, h2, 10, TFC_ACT_NONE, "logits");
    layer_vars(g, "dense1", &m->vars[0]);
    layer_vars(g, "dense2", &m->vars[2]);
    layer_vars(g, "logits", &m->vars[4]);
    m->labels_i32 = label_dtype == TFC_INT32 ? m->labels : tfc_cast(g, m->labels, TFC_INT32);
    m->loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, m->logits, m->labels_i32),
                              0, NULL, 0);
}

tfc_status mlp_load_fashion_mnist(const char *dir, const char *split, tfc_value **images,
                                  tfc_value **labels)
{
    char path[1024];
    tfc_value *raw;
    *images = *labels = NULL;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, split);
    tfc_status st = tfc_idx_read(path, &raw);
    if (st) return st;
    int64_t n = tfc_value_shape(raw).dims[0];
    st = tfc_value_normalize_u8(raw, 1.0f / 255.0f, 0.0f, images);
    tfc_value_destroy(raw);
    if (!st) st = tfc_value_reshape(*images, tfc_shape_of(2, (int64_t[]){n, 784}));
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    if (!st) st = tfc_idx_read(path, labels);
    if (st) {
        tfc_value_destroy(*images);
        *images = NULL;
    }
    return st;
}
