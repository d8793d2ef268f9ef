/* kinds.h: every kernel kind, and the tables of element-wise kinds that each device's kernels
 * expand (X-macros: X(KIND, name) for TFC_K_KIND, whose formula is tfc_ew_<name> in
 * ew_scalar.h). Plain enums and macros only, valid C, CUDA C++ and OpenCL C: the OpenCL
 * programs are built from this very text (codelets/ew_math_cl.c is generated from it).
 * Adding an element-wise op: one line in its table here, its formula in ew_scalar.h. */
#ifndef TFC_KINDS_H
#define TFC_KINDS_H

/* Unary, on floats and on integers (ew_math.h has the integer forms). */
#define TFC_EW_UNARY_ANY(X)                                                                     \
    X(NEG, neg) X(ABS, abs) X(SQUARE, square) X(SIGN, sign) X(CLIP, clip) X(FLOOR, floor)       \
    X(CEIL, ceil) X(ROUND, round)

/* Unary, on floats only. */
#define TFC_EW_UNARY_FLOAT(X)                                                                   \
    X(SQRT, sqrt) X(RSQRT, rsqrt) X(EXP, exp) X(LOG, log) X(RELU, relu) X(SIGMOID, sigmoid)     \
    X(TANH, tanh) X(SOFTPLUS, softplus) X(ERF, erf) X(GELU, gelu) X(GELU_TANH, gelu_tanh)      \
    X(ELU, elu) X(SELU, selu) X(LEAKY_RELU, leaky_relu) X(SILU, silu)                          \
    X(HARD_SIGMOID, hard_sigmoid) X(SOFTSIGN, softsign) X(SIN, sin) X(COS, cos)                \
    X(RECIPROCAL, reciprocal) X(LOG1P, log1p) X(EXPM1, expm1)

/* Unary predicates: a float in, a bool out. */
#define TFC_EW_PREDICATE(X) X(IS_NAN, is_nan) X(IS_INF, is_inf)

/* Binary arithmetic with broadcasting (relu_grad: x is dy, y the relu input). */
#define TFC_EW_BINARY(X)                                                                        \
    X(ADD, add) X(SUB, sub) X(MUL, mul) X(DIV, div) X(MAXIMUM, maximum) X(MINIMUM, minimum)     \
    X(POW, pow) X(RELU_GRAD, relu_grad)

/* Binary comparisons and logic: a bool out. */
#define TFC_EW_COMPARE(X)                                                                       \
    X(EQUAL, equal) X(NOT_EQUAL, not_equal) X(LESS, less) X(GREATER, greater)                  \
    X(LOGICAL_AND, logical_and) X(LOGICAL_OR, logical_or)

#define TFC_K_ENUM_(K, name) TFC_K_##K,

/* Every kernel kind; an op descriptor names one, its codelet switches on it. */
enum tfc_kernel_kind {
    TFC_K_NONE = 0,
    /* element-wise (codelet: elementwise; the unary and binary arithmetic kinds also fuse) */
    TFC_EW_UNARY_ANY(TFC_K_ENUM_) TFC_EW_UNARY_FLOAT(TFC_K_ENUM_) TFC_EW_PREDICATE(TFC_K_ENUM_)
    TFC_EW_BINARY(TFC_K_ENUM_) TFC_EW_COMPARE(TFC_K_ENUM_)
    TFC_K_LOGICAL_NOT, TFC_K_IDENTITY, TFC_K_CAST,
    TFC_K_BROADCAST, /* x broadcast to the shape of y */
    TFC_K_SELECT, TFC_K_ADD_N, TFC_K_FILL,
    /* codelet: matmul */
    TFC_K_MATMUL, TFC_K_BATCH_MATMUL,
    /* codelet: softmax */
    TFC_K_SOFTMAX, TFC_K_LOG_SOFTMAX, TFC_K_XENT, TFC_K_SPARSE_XENT,
    /* codelet: conv (im2col + GEMM; codelets/conv.c) */
    TFC_K_CONV, TFC_K_CONV_BP_INPUT, TFC_K_CONV_BP_FILTER,
    /* codelet: reduce */
    TFC_K_REDUCE_SUM, TFC_K_REDUCE_MEAN, TFC_K_REDUCE_MAX, TFC_K_REDUCE_MIN, TFC_K_ARGMAX,
    TFC_K_SUM_TO, /* sum over the axes broadcasting added: to the shape of output 0 */
    /* codelet: layout */
    TFC_K_RESHAPE, TFC_K_TRANSPOSE, TFC_K_CONCAT, TFC_K_SPLIT, TFC_K_SLICE, TFC_K_GATHER,
    TFC_K_ONE_HOT,
    TFC_K_SLICE_GRAD,  /* zeros of the output's shape with input 0 at attribute begin */
    TFC_K_SCATTER_ADD, /* zeros of the output's shape plus rows of input 0 at indices input 1 */
    /* codelet: assign (buffer 0 is the variable, RW or W) */
    TFC_K_ASSIGN, TFC_K_ASSIGN_ADD, TFC_K_ASSIGN_SUB,
    /* codelet: optimizer (leading buffers are the variable and its slots, updated in place) */
    TFC_K_APPLY_SGD, TFC_K_APPLY_MOMENTUM, TFC_K_APPLY_ADAGRAD, TFC_K_APPLY_RMSPROP,
    TFC_K_APPLY_ADAM, TFC_K_LR_SCHEDULE,
    /* codelet: hop (a test-only copy between memory nodes) */
    TFC_K_COPY,
    /* codelet: fused (an op list of element-wise kinds, codelets/fused.h) */
    TFC_K_FUSED,
    /* codelet: pool (codelets/pool.c); max_pool_gather takes x at max_pool's argmax */
    TFC_K_MAX_POOL, TFC_K_AVG_POOL, TFC_K_MAX_POOL_GRAD, TFC_K_AVG_POOL_GRAD,
    TFC_K_MAX_POOL_GATHER,
    /* codelet: pad (codelets/pad.c); pad_grad adds dy back onto the source of each element */
    TFC_K_PAD, TFC_K_PAD_GRAD,
    /* codelet: dropout (codelets/dropout.c); both multiply by the mask of (seed, step, i) */
    TFC_K_DROPOUT, TFC_K_DROPOUT_GRAD,
    /* codelet: norm (codelets/norm.c); batch_norm_update writes the moving statistics */
    TFC_K_BATCH_NORM, TFC_K_BATCH_NORM_GRAD, TFC_K_BATCH_NORM_UPDATE, TFC_K_LAYER_NORM,
    TFC_K_LAYER_NORM_GRAD,
    /* codelet: chain (codelets/chain.h): other steps' kernels in turn on one block of rows */
    TFC_K_CHAIN,
    TFC_K_NUM_KINDS
};

/* The float parameters of a parametric element-wise kind (leaky_relu's alpha, clip's min and
 * max, ...) are its op's attributes in these slots; the kernels pass them to the formula. */
enum { TFC_EW_ATTR_P0 = 0, TFC_EW_ATTR_P1 = 1 };
/* The value of fill, zeros_like and ones_like (TFC_K_FILL). */
enum { TFC_FILL_ATTR_VALUE = 0 };

#endif
