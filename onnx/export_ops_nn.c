/* export_ops_nn.c: the exporters of the network ops: matmul (MatMul, or Gemm with transposes),
 * batch_matmul, convolution and its transpose, pooling, padding, and the ops whose mode is a
 * tensor (batch norm, dropout), which export in inference mode when that tensor is known to
 * be 0 (an unfed training flag's default, a constant), and the softmax cross-entropies. */
#include <string.h>
#include "export.h"

#define NAME_LEN 256
#define OOM(ex) onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory")

ONNX_EXPORTER(onnx_ex_matmul)
{
    (void)e;
    int64_t ta = onnx_ex_attr(n, "transpose_a")->i, tb = onnx_ex_attr(n, "transpose_b")->i;
    const char *o = out[0];
    if (!ta && !tb) return onnx_emit(ex, "MatMul", 2, in, 1, &o) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    Onnx__NodeProto *nd = onnx_emit(ex, "Gemm", 2, in, 1, &o);
    return nd && !onnx_set_int(nd, "transA", ta) && !onnx_set_int(nd, "transB", tb) ? TFC_OK
                                                                                   : OOM(ex);
}

/* batch_matmul: each adjoint operand through a Transpose of its last two dims. */
ONNX_EXPORTER(onnx_ex_batch_matmul)
{
    const char *ops[2];
    char t[2][NAME_LEN];
    for (int i = 0; i < 2; i++) {
        ops[i] = in[i];
        if (!onnx_ex_attr(n, i ? "adj_b" : "adj_a")->i) continue;
        int r = n->inputs[i]->desc.shape.rank;
        int64_t perm[TFC_MAX_RANK];
        for (int d = 0; d < r; d++) perm[d] = d;
        perm[r - 1] = r - 2, perm[r - 2] = r - 1;
        const char *tn = onnx_fresh_name(ex, "adj", t[i], NAME_LEN);
        Onnx__NodeProto *nd = onnx_emit(ex, "Transpose", 1, &in[i], 1, &tn);
        if (!nd || onnx_set_ints(nd, "perm", r, perm)) return OOM(ex);
        ops[i] = t[i];
    }
    return onnx_emit(ex, e->onnx_op, 2, ops, 1, &out[0]) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

static int set_list(Onnx__NodeProto *nd, const char *name, const struct tfc_kattr *a)
{
    return a->n > 0 ? onnx_set_ints(nd, name, a->n, a->v) : 0;
}

/* conv and conv_transpose: our pads list holds the begins then the ends, as ONNX's; a set
 * auto_pad goes as ONNX's string (the pads are then computed from the input, as ONNX does). */
ONNX_EXPORTER(onnx_ex_conv)
{
    static const char *const auto_pads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, 2, in, 1, &out[0]);
    if (!nd) return TFC_ERR_OUT_OF_MEMORY;
    int64_t ap = onnx_ex_attr(n, "auto_pad")->i, groups = onnx_ex_attr(n, "groups")->i;
    if (ap < 0 || ap > 3)
        return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "auto_pad %lld is unknown",
                                (long long)ap);
    int bad = set_list(nd, "strides", onnx_ex_attr(n, "strides")) ||
              set_list(nd, "dilations", onnx_ex_attr(n, "dilations")) ||
              onnx_set_int(nd, "group", groups > 0 ? groups : 1);
    if (!bad && ap) bad = onnx_set_string(nd, "auto_pad", auto_pads[ap]);
    if (!bad && !ap) bad = set_list(nd, "pads", onnx_ex_attr(n, "pads"));
    if (!bad && !strcmp(n->op->name, "conv_transpose"))
        bad = set_list(nd, "output_padding", onnx_ex_attr(n, "output_padding"));
    return bad ? OOM(ex) : TFC_OK;
}

/* max_pool and avg_pool: pads as ONNX's begins then ends (missing ones 0). Our argmax output
 * indexes each plane, ONNX's Indices the whole tensor: it is not exported. */
ONNX_EXPORTER(onnx_ex_pool)
{
    if (n->n_outputs > 1 && out[1])
        return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "the argmax indices are used: "
                                "ours index each plane, ONNX MaxPool's Indices the whole tensor");
    const struct tfc_kattr *k = onnx_ex_attr(n, "kernel"), *pb = onnx_ex_attr(n, "pads_begin"),
                           *pe = onnx_ex_attr(n, "pads_end");
    int64_t pads[2 * TFC_MAX_RANK] = {0};
    for (int i = 0; i < k->n; i++) {
        pads[i] = i < pb->n ? pb->v[i] : 0;
        pads[k->n + i] = i < pe->n ? pe->v[i] : 0;
    }
    int is_max = !strcmp(n->op->name, "max_pool");
    Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, 1, in, 1, &out[0]);
    if (!nd) return TFC_ERR_OUT_OF_MEMORY;
    int bad = set_list(nd, "kernel_shape", k) || onnx_set_ints(nd, "pads", 2 * k->n, pads) ||
              set_list(nd, "strides", onnx_ex_attr(n, "strides")) ||
              onnx_set_int(nd, "ceil_mode", onnx_ex_attr(n, "ceil_mode")->i);
    if (!bad && is_max) bad = set_list(nd, "dilations", onnx_ex_attr(n, "dilations"));
    if (!bad && !is_max)
        bad = onnx_set_int(nd, "count_include_pad", onnx_ex_attr(n, "count_include_pad")->i);
    return bad ? OOM(ex) : TFC_OK;
}

ONNX_EXPORTER(onnx_ex_pad)
{
    static const char *const modes[] = {"constant", "reflect", "edge"};
    const struct tfc_kattr *b = onnx_ex_attr(n, "begin"), *en = onnx_ex_attr(n, "end");
    int64_t mode = onnx_ex_attr(n, "mode")->i, pads[2 * TFC_MAX_RANK];
    int r = n->inputs[0]->desc.shape.rank;
    if (mode < 0 || mode > 2)
        return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "pad mode %lld is unknown",
                                (long long)mode);
    for (int i = 0; i < r; i++) pads[i] = i < b->n ? b->v[i] : 0, pads[r + i] = i < en->n ? en->v[i] : 0;
    char pn[NAME_LEN], vn[NAME_LEN] = "";
    if (onnx_const_ints(ex, 2 * r, pads, pn, sizeof pn) ||
        (mode == 0 && onnx_const_fill(ex, n->outputs[0].desc.dtype, 0, NULL,
                                      onnx_ex_attr(n, "value")->f, vn, sizeof vn)))
        return TFC_ERR_OUT_OF_MEMORY;
    Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, mode == 0 ? 3 : 2,
                                    (const char *[]){in[0], pn, vn}, 1, &out[0]);
    return nd && !onnx_set_string(nd, "mode", modes[mode]) ? TFC_OK : OOM(ex);
}

/* The node's mode input (training) must be known and 0: ONNX's ops are inference-only here. */
static tfc_status inference_mode(struct onnx_export *ex, const struct tfc_node *n, int input)
{
    const tfc_tensor *t = n->inputs[input];
    const tfc_value *v = onnx_known_value(ex, t);
    if (!v)
        return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "its training input '%s' is fed "
                                "or computed at run time; the export writes inference mode "
                                "only (leave the training flag out of the signature's feeds, "
                                "so that its default 0 is exported)", t->name);
    for (int64_t i = 0; i < tfc_value_numel(v); i++)
        if (tfc_value_get(v, i) != 0)
            return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "its training input '%s' is "
                                    "%g: the export writes inference mode only", t->name,
                                    tfc_value_get(v, i));
    return TFC_OK;
}

static tfc_status first_output_only(struct onnx_export *ex, const struct tfc_node *n,
                                    const char *const *out)
{
    for (int k = 1; k < n->n_outputs; k++)
        if (out[k])
            return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "output %d ('%s') is used: "
                                    "only the normalized output is exported", k,
                                    n->outputs[k].name);
    return TFC_OK;
}

ONNX_EXPORTER(onnx_ex_batch_norm)
{
    tfc_status st = inference_mode(ex, n, 5);
    if (!st) st = first_output_only(ex, n, out);
    if (st) return st;
    Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, 5, in, 1, &out[0]);
    return nd && !onnx_set_float(nd, "epsilon", onnx_ex_attr(n, "epsilon")->f) ? TFC_OK
                                                                               : OOM(ex);
}

/* layer_norm over the last n_axes dims, without scale: LayerNormalization with a scale of
 * ones (ONNX requires one) of those dims, which must be known. */
ONNX_EXPORTER(onnx_ex_layer_norm)
{
    tfc_status st = first_output_only(ex, n, out);
    if (st) return st;
    const tfc_shape *s = &n->inputs[0]->desc.shape;
    int64_t k = onnx_ex_attr(n, "n_axes")->i;
    if (k < 1 || k > s->rank)
        return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "n_axes %lld for rank %d",
                                (long long)k, s->rank);
    for (int d = s->rank - (int)k; d < s->rank; d++)
        if (s->dims[d] < 0)
            return onnx_export_fail(ex, TFC_ERR_SHAPE, "normalized dim %d is unknown", d);
    char scale[NAME_LEN];
    if (onnx_const_fill(ex, n->outputs[0].desc.dtype, (int)k, s->dims + s->rank - k, 1.0, scale,
                        sizeof scale))
        return TFC_ERR_OUT_OF_MEMORY;
    Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, 2, (const char *[]){in[0], scale}, 1, &out[0]);
    return nd && !onnx_set_int(nd, "axis", -k) &&
                   !onnx_set_float(nd, "epsilon", onnx_ex_attr(n, "epsilon")->f)
               ? TFC_OK : OOM(ex);
}

/* In inference mode dropout is the identity. */
ONNX_EXPORTER(onnx_ex_dropout)
{
    (void)e;
    tfc_status st = inference_mode(ex, n, 2);
    if (st) return st;
    return onnx_emit(ex, "Identity", 1, in, 1, &out[0]) ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
}

/* The per-row losses over [batch, classes] logits: with class ids, SoftmaxCrossEntropyLoss
 * without reduction; with a distribution, -ReduceSum(labels * LogSoftmax(logits), last axis). */
ONNX_EXPORTER(onnx_ex_xent)
{
    if (e->onnx_op) {
        Onnx__NodeProto *nd = onnx_emit(ex, e->onnx_op, 2, in, 1, &out[0]);
        return nd && !onnx_set_string(nd, "reduction", "none") ? TFC_OK : OOM(ex);
    }
    char lp[NAME_LEN], prod[NAME_LEN], sum[NAME_LEN], axes[NAME_LEN];
    const char *t;
    int64_t last = -1;
    Onnx__NodeProto *nd = onnx_emit(ex, "LogSoftmax", 1, in, 1,
                                    (t = onnx_fresh_name(ex, "logp", lp, NAME_LEN), &t));
    if (!nd || onnx_set_int(nd, "axis", -1)) return OOM(ex);
    t = onnx_fresh_name(ex, "prod", prod, NAME_LEN);
    if (!onnx_emit(ex, "Mul", 2, (const char *[]){in[1], lp}, 1, &t) ||
        onnx_const_ints(ex, 1, &last, axes, sizeof axes))
        return TFC_ERR_OUT_OF_MEMORY;
    t = onnx_fresh_name(ex, "sum", sum, NAME_LEN);
    if (!(nd = onnx_emit(ex, "ReduceSum", 2, (const char *[]){prod, axes}, 1, &t)) ||
        onnx_set_int(nd, "keepdims", 0))
        return OOM(ex);
    return onnx_emit(ex, "Neg", 1, (const char *[]){sum}, 1, &out[0]) ? TFC_OK
                                                                      : TFC_ERR_OUT_OF_MEMORY;
}
