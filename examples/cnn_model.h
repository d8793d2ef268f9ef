/* cnn_model.h: the flagship CNN on Fashion-MNIST (the TensorFlow layers tutorial's network):
 * two 5x5 convolutions with 32 and 64 channels, each followed by ReLU and 2x2 max pooling, a
 * 1024-unit ReLU dense layer (with dropout), 10 outputs. Built in one place for
 * examples/fashion_cnn and bench/cnn_step, so that both use the same graph. */
#ifndef TFC_CNN_MODEL_H
#define TFC_CNN_MODEL_H

#include <tfc-starpu/tfc.h>

#define CNN_N_VARS 8 /* a kernel and a bias per layer: conv1, conv2, dense, logits */

struct cnn_config {
    double dropout;             /* the dense layer's dropout rate; 0: none */
    int batch_norm;             /* 1: batch norm after each convolution */
};

struct cnn_model {
    tfc_tensor *images;         /* placeholder "images", float32 [-1, 784] (28x28 rows) */
    tfc_tensor *labels;         /* placeholder "labels", [-1] of the dtype asked for */
    tfc_tensor *labels_i32;     /* the labels as int32 (the placeholder itself when int32) */
    tfc_tensor *training;       /* the graph's training flag (tfc_training_flag): feed 1 to train */
    tfc_tensor *logits;         /* [-1, 10] */
    tfc_tensor *loss;           /* the mean sparse softmax cross-entropy, a float32 scalar */
    tfc_tensor *vars[CNN_N_VARS]; /* conv1/kernel, conv1/bias, conv2/..., dense/..., logits/...
                                   * (the conv biases NULL under batch norm) */
};

/* Adds the network to g with tfc_conv_layer and tfc_dense (He normal for the ReLU layers,
 * Glorot uniform for the logits, each seeded by its scoped name; zero biases), and the loss.
 * label_dtype is the labels placeholder's (uint8 for the idx files, int32 for synthetic data).
 * With c->batch_norm, each convolution has no bias and a batch norm layer (conv1_bn,
 * conv2_bn: gamma and beta trainable, the moving statistics not) before its ReLU; with
 * c->dropout > 0, the dense layer's output goes through tfc_dropout keyed by the global step.
 * Returns 0; build errors stay on g: check tfc_graph_status. */
int cnn_model_build(tfc_graph *g, enum tfc_dtype label_dtype, const struct cnn_config *c,
                    struct cnn_model *m);

/* Floating-point operations of one training step at batch `batch` (forward, and backward at
 * twice the forward: the gradients of the inputs and the weights), counting a multiply-add as
 * two, for the convolutions and dense layers (element-wise ops, pooling and the optimizer
 * are left out: under 1% of it). */
double cnn_train_step_flops(int64_t batch);

#endif
