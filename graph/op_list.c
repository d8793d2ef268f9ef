/* op_list.c: the op table. Adding an op means one line here, its descriptor in graph/ and its
 * kernel in the codelet of its family. Everything that walks ops (the generic builder, the
 * store, the op sweep test) walks this table. */
#include "graph.h"

extern const struct tfc_op tfc_op_neg, tfc_op_abs, tfc_op_square, tfc_op_sqrt, tfc_op_rsqrt,
    tfc_op_exp, tfc_op_log, tfc_op_relu, tfc_op_sigmoid, tfc_op_tanh, tfc_op_softplus,
    tfc_op_logical_not, tfc_op_identity, tfc_op_cast, tfc_op_add, tfc_op_sub, tfc_op_mul,
    tfc_op_div, tfc_op_maximum, tfc_op_minimum, tfc_op_pow, tfc_op_equal, tfc_op_not_equal,
    tfc_op_less, tfc_op_greater, tfc_op_logical_and, tfc_op_logical_or, tfc_op_select,
    tfc_op_bias_add, tfc_op_add_n, tfc_op_fill, tfc_op_zeros_like, tfc_op_ones_like,
    tfc_op_matmul, tfc_op_batch_matmul, tfc_op_softmax, tfc_op_log_softmax,
    tfc_op_softmax_cross_entropy, tfc_op_sparse_softmax_cross_entropy, tfc_op_reduce_sum,
    tfc_op_reduce_mean, tfc_op_reduce_max, tfc_op_reduce_min, tfc_op_argmax, tfc_op_reshape,
    tfc_op_transpose, tfc_op_concat, tfc_op_split, tfc_op_slice, tfc_op_gather, tfc_op_one_hot,
    tfc_op_assign, tfc_op_assign_add, tfc_op_assign_sub, tfc_op_group, tfc_op_stop_gradient,
    tfc_op_reshape_like, tfc_op_broadcast_like, tfc_op_sum_to_like, tfc_op_relu_grad,
    tfc_op_slice_grad, tfc_op_scatter_add_rows, tfc_op_apply_sgd, tfc_op_apply_momentum,
    tfc_op_apply_adagrad, tfc_op_apply_rmsprop, tfc_op_apply_adam, tfc_op_lr_schedule,
    tfc_op_erf, tfc_op_gelu, tfc_op_gelu_tanh, tfc_op_elu, tfc_op_selu, tfc_op_leaky_relu,
    tfc_op_silu, tfc_op_hard_sigmoid, tfc_op_softsign, tfc_op_sin, tfc_op_cos, tfc_op_floor,
    tfc_op_ceil, tfc_op_round, tfc_op_sign, tfc_op_reciprocal, tfc_op_log1p, tfc_op_expm1,
    tfc_op_clip, tfc_op_is_nan, tfc_op_is_inf;
extern const struct tfc_op tfc_op_conv, tfc_op_conv_backprop_input, tfc_op_conv_backprop_filter;
extern const struct tfc_op tfc_op_conv_transpose; /* graph/ops_conv.c */
extern const struct tfc_op tfc_op_max_pool, tfc_op_avg_pool, tfc_op_max_pool_grad,
    tfc_op_max_pool_gather, tfc_op_avg_pool_grad; /* graph/ops_pool.c */
extern const struct tfc_op tfc_op_pad, tfc_op_pad_grad; /* graph/ops_pad.c */
extern const struct tfc_op tfc_op_dropout, tfc_op_dropout_grad; /* graph/ops_dropout.c */
extern const struct tfc_op tfc_op_batch_norm, tfc_op_batch_norm_grad, tfc_op_batch_norm_update,
    tfc_op_layer_norm, tfc_op_layer_norm_grad; /* graph/ops_norm.c */
extern const struct tfc_op tfc_op_placeholder_with_default; /* graph/placeholder_default.c */

const struct tfc_op *const tfc_op_table[] = {
    &tfc_op_placeholder, &tfc_op_constant, &tfc_op_variable,
    &tfc_op_neg, &tfc_op_abs, &tfc_op_square, &tfc_op_sqrt, &tfc_op_rsqrt, &tfc_op_exp,
    &tfc_op_log, &tfc_op_relu, &tfc_op_sigmoid, &tfc_op_tanh, &tfc_op_softplus,
    &tfc_op_logical_not, &tfc_op_identity, &tfc_op_cast,
    &tfc_op_erf, &tfc_op_gelu, &tfc_op_gelu_tanh, &tfc_op_elu, &tfc_op_selu, &tfc_op_leaky_relu,
    &tfc_op_silu, &tfc_op_hard_sigmoid, &tfc_op_softsign, &tfc_op_sin, &tfc_op_cos,
    &tfc_op_floor, &tfc_op_ceil, &tfc_op_round, &tfc_op_sign, &tfc_op_reciprocal,
    &tfc_op_log1p, &tfc_op_expm1, &tfc_op_clip, &tfc_op_is_nan, &tfc_op_is_inf,
    &tfc_op_add, &tfc_op_sub, &tfc_op_mul, &tfc_op_div, &tfc_op_maximum, &tfc_op_minimum,
    &tfc_op_pow, &tfc_op_equal, &tfc_op_not_equal, &tfc_op_less, &tfc_op_greater,
    &tfc_op_logical_and, &tfc_op_logical_or, &tfc_op_select, &tfc_op_bias_add, &tfc_op_add_n,
    &tfc_op_fill, &tfc_op_zeros_like, &tfc_op_ones_like,
    &tfc_op_matmul, &tfc_op_batch_matmul,
    &tfc_op_softmax, &tfc_op_log_softmax, &tfc_op_softmax_cross_entropy,
    &tfc_op_sparse_softmax_cross_entropy,
    &tfc_op_reduce_sum, &tfc_op_reduce_mean, &tfc_op_reduce_max, &tfc_op_reduce_min,
    &tfc_op_argmax,
    &tfc_op_reshape, &tfc_op_transpose, &tfc_op_concat, &tfc_op_split, &tfc_op_slice,
    &tfc_op_gather, &tfc_op_one_hot,
    &tfc_op_assign, &tfc_op_assign_add, &tfc_op_assign_sub,
    &tfc_op_group, &tfc_op_stop_gradient,
    &tfc_op_reshape_like, &tfc_op_broadcast_like, &tfc_op_sum_to_like, &tfc_op_relu_grad,
    &tfc_op_slice_grad, &tfc_op_scatter_add_rows,
    &tfc_op_apply_sgd, &tfc_op_apply_momentum, &tfc_op_apply_adagrad, &tfc_op_apply_rmsprop,
    &tfc_op_apply_adam, &tfc_op_lr_schedule,
    &tfc_op_conv, &tfc_op_conv_backprop_input, &tfc_op_conv_backprop_filter,
    &tfc_op_conv_transpose,
    &tfc_op_max_pool, &tfc_op_avg_pool, &tfc_op_max_pool_grad, &tfc_op_max_pool_gather,
    &tfc_op_avg_pool_grad,
    &tfc_op_pad, &tfc_op_pad_grad,
    &tfc_op_dropout, &tfc_op_dropout_grad,
    &tfc_op_batch_norm, &tfc_op_batch_norm_grad, &tfc_op_batch_norm_update, &tfc_op_layer_norm,
    &tfc_op_layer_norm_grad,
    &tfc_op_placeholder_with_default,
};

const int tfc_op_table_size = (int)(sizeof tfc_op_table / sizeof tfc_op_table[0]);
