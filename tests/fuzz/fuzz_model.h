/* fuzz_model.h: the small model of the store seeds (tests/fuzz/make_seeds.c writes it with
 * checkpoints) and of fuzz_checkpoint (which restores those checkpoints into a session of it).
 * It holds a node of every kind the store writes: placeholders, variables of every dtype and
 * initializer, constants of every dtype (node_data rows), ops with int, float, dtype and list
 * attributes, an op with several outputs, control edges, and an SGD update with a global step. */
#ifndef TFC_FUZZ_MODEL_H
#define TFC_FUZZ_MODEL_H

#include <string.h>
#include "../../src/tfc.h"

#define FUZZ_SHAPE(...) \
    tfc_shape_of((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* The constant of dtype with n elements 1, 2, ... */
static tfc_tensor *fuzz_model_constant(tfc_graph *g, const char *name, enum tfc_dtype dtype,
                                       int64_t n)
{
    double x[8];
    tfc_value *v, *e;
    tfc_tensor *t = NULL;
    if (tfc_value_create(dtype, tfc_shape_of(1, &n), &v)) return NULL;
    for (int64_t i = 0; i < n && i < 8; i++) {
        x[i] = (double)(i + 1);
        if (tfc_value_scalar(dtype, x[i], &e)) break;
        memcpy((char *)tfc_value_data(v) + i * tfc_value_nbytes(e), tfc_value_cdata(e),
               tfc_value_nbytes(e));
        tfc_value_destroy(e);
    }
    t = tfc_constant(g, name, v);
    tfc_value_destroy(v);
    return t;
}

/* The graph; its error on g (tfc_graph_status) when a builder fails. */
static tfc_graph *fuzz_model_build(void)
{
    tfc_graph *g;
    if (tfc_graph_create(&g)) return NULL;
    tfc_graph_set_seed(g, 7);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, FUZZ_SHAPE(-1, 4));
    tfc_tensor *labels = tfc_placeholder(g, "labels", TFC_INT32, FUZZ_SHAPE(-1));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, FUZZ_SHAPE(4, 3), tfc_init_glorot_uniform(1));
    tfc_tensor *b = tfc_variable(g, "b", TFC_FLOAT32, FUZZ_SHAPE(3), tfc_init_uniform(-1, 1, 2));
    tfc_variable(g, "b_copy", TFC_FLOAT32, FUZZ_SHAPE(3), tfc_init_normal(0, 0.5, 5));
    tfc_variable(g, "scale", TFC_FLOAT64, FUZZ_SHAPE(2), tfc_init_truncated_normal(0, 1, 3));
    tfc_variable(g, "count", TFC_INT32, FUZZ_SHAPE(2, 2), tfc_init_ones());
    tfc_variable(g, "mask", TFC_UINT8, FUZZ_SHAPE(5), tfc_init_constant(3));
    tfc_variable(g, "flag", TFC_BOOL, FUZZ_SHAPE(1), tfc_init_zeros());
    tfc_tensor *step = tfc_global_step(g);
    fuzz_model_constant(g, "c_f64", TFC_FLOAT64, 2);
    fuzz_model_constant(g, "c_i32", TFC_INT32, 3);
    fuzz_model_constant(g, "c_i64", TFC_INT64, 2);
    fuzz_model_constant(g, "c_u8", TFC_UINT8, 4);
    fuzz_model_constant(g, "c_bool", TFC_BOOL, 2);
    tfc_tensor *half = fuzz_model_constant(g, "c_f32", TFC_FLOAT32, 3);

    tfc_tensor *logits = tfc_bias_add(g, tfc_matmul(g, x, w, 0, 0), b);
    tfc_tensor *act = tfc_op(g, "leaky_relu", 1, &logits, "alpha=0.125", NULL, 0);
    tfc_tensor *probs = tfc_op(g, "softmax", 1, &act, "axis=-1", NULL, 0);
    tfc_tensor_set_name(probs, "probabilities");
    tfc_tensor *parts[3];
    tfc_op(g, "split", 1, &probs, "num=3,axis=1", parts, 3);
    tfc_tensor *joined = tfc_op(g, "concat", 3, parts, "axis=1", NULL, 0);
    tfc_tensor *moved = tfc_op(g, "transpose", 1, &joined, "perm=[1,0]", NULL, 0);
    tfc_tensor *wide = tfc_op(g, "cast", 1, &moved, "dtype=float64", NULL, 0);
    tfc_op(g, "clip", 1, &wide, "min=-0.5,max=2.5", NULL, 0);
    tfc_tensor *ids = tfc_op(g, "argmax", 1, &probs, "axis=1", NULL, 0);
    tfc_tensor *hot = tfc_op(g, "one_hot", 1, &labels, "depth=3,dtype=float32,on=1,off=0",
                             NULL, 0);
    tfc_tensor *shifted = tfc_add(g, hot, half);
    tfc_tensor *xent = tfc_sparse_softmax_cross_entropy(g, logits, labels);
    tfc_tensor *loss = tfc_op(g, "reduce_mean", 1, &xent, "axes=[0],keepdims=0", NULL, 0);
    tfc_tensor_set_name(loss, "loss");
    tfc_tensor_add_control_input(loss, shifted);
    tfc_tensor_add_control_input(loss, ids);
    tfc_optimizer sgd = tfc_optimizer_default(TFC_OPT_SGD, 0.1);
    tfc_tensor *train = tfc_minimize(g, loss, 2, (tfc_tensor *[]){w, b}, &sgd, step);
    tfc_tensor_set_name(train, "train");
    return g;
}

#endif
