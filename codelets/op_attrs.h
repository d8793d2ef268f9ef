/* op_attrs.h: the names of the attribute slots that more than the op's own file reads: kernels,
 * plan time (sched/), the store. A node's and a task's attrs[] are indexed like the op's
 * attribute table (graph/ops_*.c builds each table in this order). Plain C enums with no
 * includes, so codelets/ (C, CUDA, OpenCL hosts), sched/, graph/ and store/ all share them. */
#ifndef TFC_OP_ATTRS_H
#define TFC_OP_ATTRS_H

/* placeholder, constant, variable (graph/ops_state.c) */
enum { SOURCE_DTYPE, SOURCE_SHAPE };

/* cast, fill and the other element-wise ops name their slots with the element-wise code
 * (graph/ops_math.c and the element-wise codelet's headers). */

/* matmul; batch_matmul keeps its adjoint flags in the same slots, so that one kernel reads
 * both ops (graph/ops_nn.c). MATMUL_EPILOGUE_ACT and MATMUL_EPILOGUE_P1 are no attributes of
 * the ops: a chain task's product with its bias add (codelets/matmul_epilogue.h) carries in
 * MATMUL_EPILOGUE_ACT the unary kind applied after the add (.i, 0: none) and its p0 (.f), in
 * MATMUL_EPILOGUE_P1 its p1 (.f). */
enum { MATMUL_TRANSPOSE_A, MATMUL_TRANSPOSE_B, MATMUL_EPILOGUE_ACT, MATMUL_EPILOGUE_P1 };
enum { BATCH_MATMUL_ADJ_A = MATMUL_TRANSPOSE_A, BATCH_MATMUL_ADJ_B = MATMUL_TRANSPOSE_B };

/* softmax and log_softmax; argmax (graph/ops_nn.c) */
enum { SOFTMAX_AXIS };
enum { ARGMAX_AXIS };

/* reduce_sum, reduce_mean, reduce_max, reduce_min (graph/ops_nn.c). REDUCE_MEAN_COUNT is no
 * attribute of the ops (their nodes leave it 0): sched/tiling.c sets it on the last step of a
 * tiled mean, which adds partial sums and divides by the whole reduction's element count. */
enum { REDUCE_AXES, REDUCE_KEEPDIMS, REDUCE_MEAN_COUNT };

/* transpose, concat, split, slice, one_hot (graph/ops_array.c); slice_grad takes the begin and
 * size of the slice it undoes, in the same slots (graph/ops_grad.c) */
enum { TRANSPOSE_PERM };
enum { CONCAT_AXIS };
enum { SPLIT_NUM, SPLIT_AXIS };
enum { SLICE_BEGIN, SLICE_SIZE };
enum { SLICE_GRAD_BEGIN = SLICE_BEGIN, SLICE_GRAD_SIZE = SLICE_SIZE };
enum { ONE_HOT_DEPTH, ONE_HOT_DTYPE, ONE_HOT_ON, ONE_HOT_OFF };

/* max_pool, avg_pool and avg_pool_grad (graph/ops_pool.c): lists of one value per spatial dim
 * (strides, dilations and pads may be empty: 1, 1 and 0); dilations other than 1 are for
 * max_pool only, count_include_pad for avg_pool, with_indices gives max_pool its argmax output */
enum {
    POOL_KERNEL, POOL_STRIDES, POOL_PADS_BEGIN, POOL_PADS_END, POOL_DILATIONS, POOL_CEIL_MODE,
    POOL_COUNT_INCLUDE_PAD, POOL_WITH_INDICES
};

/* pad and pad_grad (graph/ops_pad.c): begin and end per dim, the mode (enum tfc_pad_mode:
 * constant, reflect, edge) and the constant's value */
enum { PAD_BEGIN, PAD_END, PAD_MODE, PAD_VALUE };

/* dropout and dropout_grad (graph/ops_dropout.c): the drop probability in [0, 1) and the
 * seed that keys the op's random stream (codelets/philox.h) */
enum { DROPOUT_RATE, DROPOUT_SEED };

/* Every apply_* op (sgd, momentum, adagrad, rmsprop, adam) has this one table; rmsprop's
 * smoothing constant alpha is APPLY_BETA1 (graph/ops_optim.c). */
enum {
    APPLY_WEIGHT_DECAY, APPLY_DECOUPLED, APPLY_MOMENTUM, APPLY_NESTEROV, APPLY_BETA1,
    APPLY_BETA2, APPLY_EPS, APPLY_CENTERED
};

/* lr_schedule (graph/ops_optim.c), and the values of its LR_SCHEDULE_KIND */
enum {
    LR_SCHEDULE_KIND, LR_SCHEDULE_BASE, LR_SCHEDULE_GAMMA, LR_SCHEDULE_PERIOD, LR_SCHEDULE_FLOOR
};
enum { LR_STEP_DECAY, LR_EXPONENTIAL, LR_COSINE };

/* conv, conv_backprop_input, conv_backprop_filter: one table (graph/ops_conv.c); pads are the
 * begins of every spatial dim, then the ends (ONNX's order); CONV_AUTO_PAD takes these values */
enum { CONV_STRIDES, CONV_PADS, CONV_DILATIONS, CONV_GROUPS, CONV_AUTO_PAD };
enum { TFC_CONV_NOTSET, TFC_CONV_SAME_UPPER, TFC_CONV_SAME_LOWER, TFC_CONV_VALID };

/* batch_norm and batch_norm_grad; batch_norm_update; layer_norm and layer_norm_grad over the
 * last n_axes dims (graph/ops_norm.c, codelets/norm.c) */
enum { BATCH_NORM_EPSILON };
enum { BATCH_NORM_UPDATE_MOMENTUM };
enum { LAYER_NORM_EPSILON, LAYER_NORM_N_AXES };

#endif
