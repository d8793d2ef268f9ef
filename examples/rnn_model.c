/* rnn_model.c: the Fashion-MNIST RNN (see rnn_model.h). */
#include "rnn_model.h"

void rnn_model_build(tfc_graph *g, enum tfc_dtype label_dtype, tfc_rnn_mode mode,
                     struct rnn_model *m)
{
    m->images = tfc_placeholder(g, "images", TFC_FLOAT32,
                                tfc_shape_of(2, (int64_t[]){-1, RNN_ROWS * RNN_COLS}));
    m->labels = tfc_placeholder(g, "labels", label_dtype, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *rows = tfc_reshape(g, m->images,
                                   tfc_shape_of(3, (int64_t[]){-1, RNN_ROWS, RNN_COLS}));
    tfc_rnn_opts opts = {.mode = mode};
    tfc_tensor *h = tfc_lstm_layer(g, rows, RNN_UNITS, &opts, "lstm");
    m->logits = tfc_dense(g, h, RNN_CLASSES, TFC_ACT_NONE, "logits");
    m->labels_i32 = label_dtype == TFC_INT32 ? m->labels : tfc_cast(g, m->labels, TFC_INT32);
    m->loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, m->logits, m->labels_i32),
                              0, NULL, 0);
}

double rnn_train_step_flops(int64_t batch)
{
    const double b = (double)batch, gates = 4.0 * RNN_UNITS;
    double forward = 2.0 * b * RNN_ROWS * (RNN_COLS * gates + RNN_UNITS * gates) +
                     2.0 * b * RNN_UNITS * RNN_CLASSES;
    /* the input projection's input gradient is not needed (the images are no variable) */
    return 3.0 * forward - 2.0 * b * RNN_ROWS * RNN_COLS * gates;
}
