/* ops_loss.c: ONNX's NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12 on) over
 * [N, C] or [N, C, d1, ...] inputs with class ids [N (, d1, ...)], written with our ops: the
 * picked log-probabilities are a one-hot product summed over C; class weights are gathered;
 * ignore_index masks elements out of the loss and of the mean's divisor. */
#include <string.h>
#include "onnx_import.h"

/* The loss of log-probabilities lp against the ids of input `target_in` (weights input
 * `weight_in`, -1: none), reduced as the node's reduction attribute says. */
static tfc_tensor *nll(struct onnx_import *im, tfc_tensor *lp, int target_in, int weight_in,
                       tfc_status *st)
{
    tfc_graph *g = im->g;
    const Onnx__NodeProto *n = im->node;
    char buf[16];
    const char *red = onnx_attr_str(n, "reduction", "mean", buf, sizeof buf);
    if (strcmp(red, "mean") && strcmp(red, "sum") && strcmp(red, "none")) {
        *st = onnx_unsupported(im, "reduction '%s' (mean, sum, none are)", red);
        return NULL;
    }
    tfc_tensor *t = onnx_input(im, target_in);
    if (!lp || !t) return NULL;
    enum tfc_dtype dt = tfc_tensor_dtype(lp);
    int r = onnx_rank(lp);
    int64_t classes = tfc_tensor_shape(lp).dims[1];
    tfc_tensor *keep = NULL;
    if (onnx_attr(n, "ignore_index")) {
        tfc_tensor *ii = tfc_scalar(g, tfc_tensor_dtype(t), (double)onnx_attr_int(n, "ignore_index", 0));
        keep = tfc_not_equal(g, t, ii);
        t = tfc_select(g, keep, t, tfc_zeros_like(g, t)); /* any valid id where ignored */
    }
    tfc_tensor *oh = tfc_one_hot(g, t, classes, dt, 1, 0); /* [N, d..., C] */
    if (oh && r > 2) {
        int64_t perm[TFC_MAX_RANK] = {0, r - 1};
        for (int i = 2; i < r; i++) perm[i] = i - 1;
        oh = tfc_transpose(g, oh, perm);
    }
    tfc_tensor *picked = tfc_reduce_sum(g, tfc_mul(g, lp, oh), 1, (int64_t[]){1}, 0);
    tfc_tensor *w = weight_in >= 0 && onnx_has_input(im, weight_in)
                        ? tfc_gather(g, onnx_input(im, weight_in), t) : tfc_ones_like(g, picked);
    if (keep) w = tfc_mul(g, w, tfc_cast(g, keep, dt));
    tfc_tensor *loss = tfc_neg(g, tfc_mul(g, picked, w));
    if (!strcmp(red, "none")) return loss;
    tfc_tensor *sum = tfc_reduce_sum(g, loss, 0, NULL, 0);
    return !strcmp(red, "sum") ? sum : tfc_div(g, sum, tfc_reduce_sum(g, w, 0, NULL, 0));
}

ONNX_BUILDER(onnx_nll_loss)
{
    tfc_status st = TFC_OK;
    outs[0] = nll(im, onnx_input(im, 0), 1, 2, &st);
    return st ? st : tfc_graph_status(im->g);
}

ONNX_BUILDER(onnx_softmax_cross_entropy)
{
    tfc_status st = TFC_OK;
    tfc_tensor *x = onnx_input(im, 0);
    tfc_tensor *lp = x ? tfc_log_softmax(im->g, x, 1) : NULL;
    outs[0] = nll(im, lp, 1, 2, &st);
    if (im->node->n_output > 1) outs[1] = lp;
    return st ? st : tfc_graph_status(im->g);
}
