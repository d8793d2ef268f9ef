/* op_table.c: the ONNX op types we map, one entry per (op type, opset range): an op whose
 * meaning changed at some opset (Softmax's axis at 13, ReduceSum's axes from attribute to
 * input at 13, Split's sizes at 13, the broadcast attributes before 7, BatchNormalization's
 * is_test before 7, ...) has one entry per range, or a builder that branches on im->opset where
 * the change is small. The entry used is the last one whose `since` is at most the model's
 * opset. */
#include <string.h>
#include "onnx_import.h"

static const struct onnx_op_map table[] = {
    /* element-wise, one input */
    {"Abs", 1, onnx_unary}, {"Neg", 1, onnx_unary}, {"Sqrt", 1, onnx_unary},
    {"Exp", 1, onnx_unary}, {"Log", 1, onnx_unary}, {"Relu", 1, onnx_unary},
    {"Sigmoid", 1, onnx_unary}, {"Tanh", 1, onnx_unary}, {"Softplus", 1, onnx_unary},
    {"Softsign", 1, onnx_unary}, {"Not", 1, onnx_unary}, {"Erf", 9, onnx_unary},
    {"Sin", 7, onnx_unary}, {"Cos", 7, onnx_unary}, {"Floor", 1, onnx_unary},
    {"Ceil", 1, onnx_unary}, {"Round", 11, onnx_unary}, {"Sign", 9, onnx_unary},
    {"Reciprocal", 1, onnx_unary}, {"IsNaN", 9, onnx_unary}, {"IsInf", 10, onnx_unary},
    {"Identity", 1, onnx_identity},
    {"Elu", 1, onnx_activation}, {"Selu", 1, onnx_activation},
    {"LeakyRelu", 1, onnx_activation}, {"HardSigmoid", 1, onnx_activation},
    {"HardSwish", 14, onnx_activation}, {"ThresholdedRelu", 10, onnx_activation},
    {"Celu", 12, onnx_activation},
    {"PRelu", 1, onnx_prelu}, {"Shrink", 9, onnx_composite},
    {"Tan", 7, onnx_composite}, {"Sinh", 9, onnx_composite}, {"Cosh", 9, onnx_composite},
    {"Asinh", 9, onnx_composite}, {"Acosh", 9, onnx_composite}, {"Atanh", 9, onnx_composite},
    {"CastLike", 15, onnx_cast_like},
    {"Cast", 1, onnx_cast}, {"Clip", 1, onnx_clip}, {"Where", 9, onnx_where},
    /* element-wise, two inputs (the opset 1-6 broadcast attributes: onnx_binary) */
    {"Add", 1, onnx_binary}, {"Sub", 1, onnx_binary}, {"Mul", 1, onnx_binary},
    {"Div", 1, onnx_binary}, {"Pow", 1, onnx_binary}, {"Equal", 1, onnx_binary},
    {"Less", 1, onnx_binary}, {"Greater", 1, onnx_binary}, {"And", 1, onnx_binary},
    {"Or", 1, onnx_binary}, {"Xor", 1, onnx_binary}, {"LessOrEqual", 12, onnx_binary},
    {"GreaterOrEqual", 12, onnx_binary},
    {"Mod", 10, onnx_mod}, {"Sum", 1, onnx_variadic}, {"Mean", 1, onnx_variadic}, {"Max", 1, onnx_variadic},
    {"Min", 1, onnx_variadic},
    /* linear algebra, neural network */
    {"MatMul", 1, onnx_matmul}, {"Gemm", 1, onnx_gemm},
    {"Conv", 1, onnx_conv}, {"ConvTranspose", 1, onnx_conv_transpose},
    {"MaxPool", 1, onnx_pool}, {"AveragePool", 1, onnx_pool},
    {"GlobalAveragePool", 1, onnx_global_pool}, {"GlobalMaxPool", 1, onnx_global_pool},
    {"BatchNormalization", 1, onnx_batch_norm},
    {"InstanceNormalization", 1, onnx_instance_norm},
    {"LayerNormalization", 17, onnx_layer_norm},
    {"Softmax", 1, onnx_softmax}, {"LogSoftmax", 1, onnx_softmax},
    {"Dropout", 1, onnx_dropout}, {"LRN", 1, onnx_lrn},
    {"RNN", 7, onnx_rnn}, {"GRU", 7, onnx_rnn}, {"LSTM", 7, onnx_rnn},
    {"DepthToSpace", 1, onnx_depth_to_space}, {"SpaceToDepth", 1, onnx_depth_to_space},
    {"NegativeLogLikelihoodLoss", 12, onnx_nll_loss},
    {"SoftmaxCrossEntropyLoss", 12, onnx_softmax_cross_entropy},
    /* reductions */
    {"ReduceSum", 1, onnx_reduce}, {"ReduceMean", 1, onnx_reduce}, {"ReduceMax", 1, onnx_reduce},
    {"ReduceMin", 1, onnx_reduce}, {"ReduceL1", 1, onnx_reduce}, {"ReduceL2", 1, onnx_reduce},
    {"ReduceLogSum", 1, onnx_reduce}, {"ReduceLogSumExp", 1, onnx_reduce},
    {"ReduceSumSquare", 1, onnx_reduce}, {"ReduceProd", 1, onnx_reduce},
    {"ArgMax", 1, onnx_argmax}, {"ArgMin", 1, onnx_argmax}, {"Einsum", 12, onnx_einsum},
    /* shapes and data movement */
    {"Reshape", 1, onnx_reshape}, {"Flatten", 1, onnx_flatten}, {"Squeeze", 1, onnx_squeeze},
    {"Unsqueeze", 1, onnx_unsqueeze}, {"Transpose", 1, onnx_transpose},
    {"Concat", 1, onnx_concat}, {"Split", 1, onnx_split}, {"Slice", 1, onnx_slice},
    {"Gather", 1, onnx_gather}, {"Expand", 8, onnx_expand}, {"Pad", 1, onnx_pad},
    {"Resize", 10, onnx_resize}, {"Upsample", 9, onnx_resize},
    {"OneHot", 9, onnx_one_hot}, {"Tile", 6, onnx_tile},
    {"GatherElements", 11, onnx_gather_elements}, {"GatherND", 11, onnx_gather_nd},
    {"Compress", 9, onnx_compress}, {"ScatterElements", 11, onnx_scatter_elements},
    {"ScatterND", 11, onnx_scatter_nd}, {"Scatter", 9, onnx_scatter_elements}, /* deprecated at 11: ScatterElements under its old name */ {"Trilu", 14, onnx_trilu},
    {"CumSum", 11, onnx_cumsum}, {"EyeLike", 9, onnx_eye_like}, {"Hardmax", 1, onnx_hardmax},
    /* control flow: subgraphs in our cond and while regions */
    {"If", 1, onnx_if}, {"Loop", 1, onnx_loop},
    /* computed at import time */
    {"Constant", 1, onnx_constant}, {"Shape", 1, onnx_shape}, {"Size", 1, onnx_size},
    {"ConstantOfShape", 9, onnx_constant_of_shape}, {"Range", 11, onnx_range},
    {"HannWindow", 17, onnx_window}, {"HammingWindow", 17, onnx_window},
    {"BlackmanWindow", 17, onnx_window},
};

#define N_ENTRIES ((int)(sizeof table / sizeof table[0]))

const struct onnx_op_map *tfc_onnx_op_find(const char *op_type, int64_t opset)
{
    const struct onnx_op_map *found = NULL;
    for (int i = 0; i < N_ENTRIES; i++)
        if (!strcmp(table[i].op_type, op_type) && table[i].since <= opset) found = &table[i];
    return found;
}

int tfc_onnx_op_count(void)
{
    return N_ENTRIES;
}

const char *tfc_onnx_op_type(int i)
{
    return i >= 0 && i < N_ENTRIES ? table[i].op_type : NULL;
}
