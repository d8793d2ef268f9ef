/* rnn_model.h: the Fashion-MNIST RNN (issue 13, item 6): each image read as 28 rows of 28
 * pixels, an LSTM of 128 units over the rows, its last state through a dense layer of 10.
 * Built in one place for examples/fashion_rnn and bench/rnn_step, so both use one graph. */
#ifndef TFC_RNN_MODEL_H
#define TFC_RNN_MODEL_H

#include <tfc-starpu/tfc.h>

#define RNN_ROWS 28   /* steps: the image's rows */
#define RNN_COLS 28   /* features per step: a row's pixels */
#define RNN_UNITS 128
#define RNN_CLASSES 10

struct rnn_model {
    tfc_tensor *images;     /* placeholder "images", float32 [-1, 784] */
    tfc_tensor *labels;     /* placeholder "labels", [-1] of the dtype asked for */
    tfc_tensor *labels_i32; /* the labels as int32 (the placeholder itself when int32) */
    tfc_tensor *logits;     /* [-1, 10] */
    tfc_tensor *loss;       /* the mean sparse softmax cross-entropy, a float32 scalar */
};

/* Adds the network to g (tfc_lstm_layer "lstm" in `mode`, tfc_dense "logits") and its loss.
 * label_dtype is the labels placeholder's (uint8 for the idx files, int32 for synthetic
 * data). Build errors stay on g: check tfc_graph_status. */
void rnn_model_build(tfc_graph *g, enum tfc_dtype label_dtype, tfc_rnn_mode mode,
                     struct rnn_model *m);

/* Floating-point operations of one training step at batch `batch` (the matmuls: forward,
 * and backward at twice the forward), counting a multiply-add as two. */
double rnn_train_step_flops(int64_t batch);

#endif
