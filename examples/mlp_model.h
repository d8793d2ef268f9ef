/* mlp_model.h: the flagship network, a 784-256-128-10 ReLU MLP on Fashion-MNIST, built in one
 * place for examples/mnist_mlp and the benchmarks that time it (bench/mlp_step,
 * bench/checkpoint_step), so that all three measure the same graph. */
#ifndef TFC_MLP_MODEL_H
#define TFC_MLP_MODEL_H

#include <tfc-starpu/tfc.h>

#define MLP_N_VARS 6 /* a kernel and a bias per layer */

struct mlp_model {
    tfc_tensor *images;         /* placeholder "images", float32 [-1, 784] */
    tfc_tensor *labels;         /* placeholder "labels", [-1] of the dtype asked for */
    tfc_tensor *labels_i32;     /* the labels as int32 (the placeholder itself when int32) */
    tfc_tensor *logits;         /* [-1, 10] */
    tfc_tensor *loss;           /* the mean sparse softmax cross-entropy, a float32 scalar */
    tfc_tensor *vars[MLP_N_VARS]; /* dense1/kernel, dense1/bias, dense2/..., logits/... */
};

/* Adds the network to g with tfc_dense: He-normal kernels on the ReLU hidden layers,
 * Glorot-uniform on the logits (each seeded by its scoped name), zero biases, and the loss. label_dtype is the labels placeholder's (uint8 for the idx
 * files, int32 for synthetic data). Build errors stay on g: check tfc_graph_status. */
void mlp_model_build(tfc_graph *g, enum tfc_dtype label_dtype, struct mlp_model *m);

/* Reads split "train" or "t10k" of Fashion-MNIST from dir (the gzipped idx files): images as
 * float32 [n, 784] in [0, 1], labels as uint8 [n], both owned by the caller. On failure the
 * message is on tfc_errmsg() and nothing is left allocated. */
tfc_status mlp_load_fashion_mnist(const char *dir, const char *split, tfc_value **images,
                                  tfc_value **labels);

#endif
