/* ops_pad.c: pad (constant, reflect, edge; any rank) and its gradient op pad_grad (each padded
 * element summed back onto its source): descriptors, inference, builders and gradients. Both
 * are linear in their data input, so each one's gradient is the other. */
#include <string.h>
#include "graph.h"

extern struct starpu_codelet tfc_cl_pad; /* codelets/pad.c */
extern const struct tfc_op tfc_op_pad, tfc_op_pad_grad;

static const char *const mode_names[] = {"constant", "reflect", "edge"};

/* The padding attributes against a tensor of shape s: counts, signs, and what each mode needs. */
static tfc_status check_pads(const struct tfc_infer *in, const tfc_shape *s)
{
    const struct tfc_kattr *b = &in->attrs[PAD_BEGIN], *e = &in->attrs[PAD_END];
    int64_t mode = in->attrs[PAD_MODE].i;
    if (mode < 0 || mode > 2)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "mode %lld is unknown: 0 constant, 1 reflect, 2 edge", (long long)mode);
    if (b->n != s->rank || e->n != s->rank)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "begin has %d values and end %d, the input has rank %d", b->n, e->n,
                        s->rank);
    for (int d = 0; d < s->rank; d++) {
        int64_t pb = b->v[d], pe = e->v[d], n = s->dims[d];
        if (pb < 0 || pe < 0)
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                            "dim %d: pads %lld and %lld must be >= 0", d, (long long)pb,
                            (long long)pe);
        if (n < 0) continue; /* checked again at plan time, with the concrete shape */
        if (mode == TFC_PAD_REFLECT && (pb >= n || pe >= n) && (pb || pe))
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                            "dim %d of size %lld: reflect pads %lld and %lld must be smaller "
                            "than the dim", d, (long long)n, (long long)pb, (long long)pe);
        if (mode == TFC_PAD_EDGE && n == 0 && (pb || pe))
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                            "dim %d is empty: edge padding has nothing to repeat", d);
    }
    return TFC_OK;
}

static void padded(const struct tfc_kattr *attrs, const tfc_shape *s, tfc_shape *o)
{
    *o = *s;
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] >= 0) o->dims[d] = s->dims[d] + attrs[PAD_BEGIN].v[d] + attrs[PAD_END].v[d];
}

static tfc_status infer_pad(const struct tfc_infer *in)
{
    tfc_status st = check_pads(in, &in->in[0].shape);
    if (st) return st;
    in->out[0].dtype = in->in[0].dtype;
    padded(in->attrs, &in->in[0].shape, &in->out[0].shape);
    return TFC_OK;
}

/* pad_grad(dy, x): x's shape (input 1 is read for its shape only), dy's dtype */
static tfc_status infer_pad_grad(const struct tfc_infer *in)
{
    const tfc_shape *x = &in->in[1].shape, *dy = &in->in[0].shape;
    tfc_shape want;
    if (!tfc_dtype_is_float(in->in[0].dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "the gradient must be float32 or float64, got %s",
                        tfc_dtype_name(in->in[0].dtype));
    tfc_status st = check_pads(in, x);
    if (st) return st;
    padded(in->attrs, x, &want);
    for (int d = 0; d < x->rank; d++)
        if (dy->rank != x->rank ||
            (want.dims[d] >= 0 && dy->dims[d] >= 0 && want.dims[d] != dy->dims[d]))
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "the gradient's shape does not match the "
                            "padded input at dim %d", d);
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = *x;
    return TFC_OK;
}

/* d(pad)/dx: pad_grad with the same attributes; d(pad_grad)/d(dy): pad with value 0. */
static tfc_status grad_pad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                           tfc_tensor **dxs)
{
    tfc_tensor *in[2] = {dys[0], n->inputs[0]};
    dxs[0] = tfc_build(g, &tfc_op_pad_grad, 2, in, n->attrs);
    return g->status;
}

static tfc_status grad_pad_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                tfc_tensor **dxs)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    memcpy(at, n->attrs, sizeof at);
    at[PAD_VALUE].f = 0;
    tfc_tensor *in[1] = {dys[0]};
    dxs[0] = tfc_build(g, &tfc_op_pad, 1, in, at);
    return g->status;
}

static const struct tfc_attr_def pad_attrs[] = {
    [PAD_BEGIN] = {"begin", TFC_ATTR_INTS, 0},
    [PAD_END] = {"end", TFC_ATTR_INTS, 0},
    [PAD_MODE] = {"mode", TFC_ATTR_INT, TFC_PAD_CONSTANT},
    [PAD_VALUE] = {"value", TFC_ATTR_FLOAT, 0},
};

const struct tfc_op tfc_op_pad = {
    .name = "pad", .n_inputs = 1, .kind = TFC_K_PAD,
    .attrs = pad_attrs, .n_attrs = TFC_ATTR_COUNT(pad_attrs),
    .infer = infer_pad, .codelet = &tfc_cl_pad, .grad = grad_pad,
};
const struct tfc_op tfc_op_pad_grad = {
    .name = "pad_grad", .n_inputs = 2, .kind = TFC_K_PAD_GRAD,
    .attrs = pad_attrs, .n_attrs = TFC_ATTR_COUNT(pad_attrs),
    .infer = infer_pad_grad, .codelet = &tfc_cl_pad, .grad = grad_pad_grad,
    .shape_inputs = 1u << 1,
};

tfc_tensor *tfc_pad(tfc_graph *g, tfc_tensor *x, const int64_t *begin, const int64_t *end,
                    enum tfc_pad_mode mode, double value)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    if (!g || !x) return NULL;
    int rank = x->desc.shape.rank;
    if (rank && (!begin || !end))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "pad of '%s': begin and end must "
                              "give %d values each", x->name, rank);
    if ((int)mode < 0 || (int)mode > 2)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "pad of '%s': mode %d is unknown: "
                              "%s, %s or %s", x->name, (int)mode, mode_names[0], mode_names[1],
                              mode_names[2]);
    tfc_attrs_default(&tfc_op_pad, at);
    at[PAD_BEGIN].n = at[PAD_END].n = rank;
    for (int d = 0; d < rank; d++) at[PAD_BEGIN].v[d] = begin[d], at[PAD_END].v[d] = end[d];
    at[PAD_MODE].i = mode;
    at[PAD_VALUE].f = value;
    return tfc_build(g, &tfc_op_pad, 1, &x, at);
}
