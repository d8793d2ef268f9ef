/* mlp_model.c: the flagship network and its data (see mlp_model.h). The graph's node order
 * is part of what the flagship's losses depend on (generated names, plan order), so callers
 * add their own nodes only after mlp_model_build. */
#include <stdio.h>
#include "mlp_model.h"

static tfc_tensor *dense(tfc_graph *g, const char *name, tfc_tensor *x, int64_t in, int64_t out,
                         uint64_t seed, int relu, tfc_tensor **vars)
{
    char w[64], b[64];
    snprintf(w, sizeof w, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    vars[0] = tfc_variable(g, w, TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){in, out}),
                           tfc_init_glorot_uniform(seed));
    vars[1] = tfc_variable(g, b, TFC_FLOAT32, tfc_shape_of(1, &out), tfc_init_zeros());
    tfc_tensor *y = tfc_bias_add(g, tfc_matmul(g, x, vars[0], 0, 0), vars[1]);
    return relu ? tfc_relu(g, y) : y;
}

void mlp_model_build(tfc_graph *g, enum tfc_dtype label_dtype, struct mlp_model *m)
{
    m->images = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 784}));
    m->labels = tfc_placeholder(g, "labels", label_dtype, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h1 = dense(g, "dense1", m->images, 784, 256, 1, 1, &m->vars[0]);
    tfc_tensor *h2 = dense(g, "dense2", h1, 256, 128, 2, 1, &m->vars[2]);
    m->logits = dense(g, "logits", h2, 128, 10, 3, 0, &m->vars[4]);
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
