/* cnn_model.c: the flagship CNN (see cnn_model.h). The graph's node order is part of what the
 * losses depend on (generated names, plan order), so callers add their own nodes only after
 * cnn_model_build. */
#include <stdio.h>
#include "cnn_model.h"

/* Input 28x28, SAME convolutions, 2x2 pools: 28 -> 14 -> 7. */
#define SIDE 28
#define C1 32
#define C2 64
#define KSIZE 5
#define DENSE 1024
#define CLASSES 10

/* The variables a layer made, kernel then bias. */
static void layer_vars(tfc_graph *g, const char *name, tfc_tensor **vars)
{
    char path[64];
    snprintf(path, sizeof path, "%s/kernel", name);
    vars[0] = tfc_graph_find(g, path);
    snprintf(path, sizeof path, "%s/bias", name);
    vars[1] = tfc_graph_find(g, path);
}

/* conv 5x5 (SAME) + ReLU + 2x2 max pool. */
static tfc_tensor *conv_block(tfc_graph *g, tfc_tensor *x, int64_t filters, const char *name,
                              const struct cnn_config *c, tfc_tensor *training)
{
    static const int64_t kernel[2] = {KSIZE, KSIZE};
    tfc_tensor *y;
    if (c->batch_norm) { /* conv (no bias: beta plays its part), batch norm, then the ReLU */
        char bn[64];
        snprintf(bn, sizeof bn, "%s_bn", name);
        y = tfc_conv_layer(g, x, filters, 2, kernel, NULL, TFC_ACT_NONE, 0, name);
        y = tfc_relu(g, tfc_batch_norm_layer(g, y, training, 0.1, 1e-3, bn)); /* PyTorch's momentum */
    } else {
        y = tfc_conv_layer(g, x, filters, 2, kernel, NULL, TFC_ACT_RELU, 1, name);
    }
    return tfc_max_pool_layer(g, y, 2, 2, 0);
}

int cnn_model_build(tfc_graph *g, enum tfc_dtype label_dtype, const struct cnn_config *c,
                    struct cnn_model *m)
{
    m->images = tfc_placeholder(g, "images", TFC_FLOAT32,
                                tfc_shape_of(2, (int64_t[]){-1, SIDE * SIDE}));
    m->labels = tfc_placeholder(g, "labels", label_dtype, tfc_shape_of(1, (int64_t[]){-1}));
    m->training = tfc_training_flag(g);
    tfc_tensor *x = tfc_reshape(g, m->images, tfc_shape_of(4, (int64_t[]){-1, 1, SIDE, SIDE}));
    tfc_tensor *h1 = conv_block(g, x, C1, "conv1", c, m->training);
    tfc_tensor *h2 = conv_block(g, h1, C2, "conv2", c, m->training);
    tfc_tensor *h3 = tfc_dense(g, tfc_flatten(g, h2, 1), DENSE, TFC_ACT_RELU, "dense");
    if (c->dropout > 0) /* keyed by the global step: a resumed run drops the same units */
        h3 = tfc_dropout(g, h3, c->dropout, m->training, NULL, 0);
    m->logits = tfc_dense(g, h3, CLASSES, TFC_ACT_NONE, "logits");
    layer_vars(g, "conv1", &m->vars[0]);
    layer_vars(g, "conv2", &m->vars[2]);
    layer_vars(g, "dense", &m->vars[4]);
    layer_vars(g, "logits", &m->vars[6]);
    m->labels_i32 = label_dtype == TFC_INT32 ? m->labels : tfc_cast(g, m->labels, TFC_INT32);
    m->loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, m->logits, m->labels_i32),
                              0, NULL, 0);
    return 0;
}

double cnn_train_step_flops(int64_t batch)
{
    const double kvol = KSIZE * KSIZE, s1 = SIDE * SIDE, s2 = (SIDE / 2) * (SIDE / 2);
    const double flat = C2 * (SIDE / 4) * (SIDE / 4);
    double forward = 2.0 * (double)batch *
                     (C1 * 1 * kvol * s1 + C2 * C1 * kvol * s2 + flat * DENSE + DENSE * CLASSES);
    /* conv1's input gradient is not needed (the images are no variable): 1x less of conv1 */
    double conv1 = 2.0 * (double)batch * C1 * kvol * s1;
    return 3.0 * forward - conv1;
}
