/* ops_dropout.c: dropout and its gradient op dropout_grad: descriptors, inference, the builder
 * and the gradients. Which units drop is a pure function of (seed, step, element index)
 * (codelets/philox.h), so dropout_grad recomputes the mask instead of storing it, and a run
 * resumed from a checkpoint of the step drops the same units. */
#include "graph.h"

extern struct starpu_codelet tfc_cl_dropout; /* codelets/dropout.c */
extern const struct tfc_op tfc_op_dropout, tfc_op_dropout_grad;

/* dropout(x, step, training) and dropout_grad(dy, step, training): the same checks. */
static tfc_status infer_dropout(const struct tfc_infer *in)
{
    double rate = in->attrs[DROPOUT_RATE].f;
    if (!(rate >= 0 && rate < 1))
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "rate %g is outside [0, 1): it is the probability of dropping a unit",
                        rate);
    if (!tfc_dtype_is_float(in->in[0].dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "the input must be float32 or float64, got %s",
                        tfc_dtype_name(in->in[0].dtype));
    if (in->in[1].dtype != TFC_INT64 || in->in[1].shape.rank != 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "the step (input 1) must be an int64 scalar such as tfc_global_step, "
                        "got %s of rank %d", tfc_dtype_name(in->in[1].dtype),
                        in->in[1].shape.rank);
    if (in->in[2].dtype != TFC_FLOAT32 || in->in[2].shape.rank != 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "training (input 2) must be a float32 scalar (nonzero: drop), got %s "
                        "of rank %d", tfc_dtype_name(in->in[2].dtype), in->in[2].shape.rank);
    in->out[0] = in->in[0];
    return TFC_OK;
}

/* Both ops multiply their input 0 by the same mask, so each one's gradient in input 0 is
 * dropout_grad with the same step, training and attributes; step and training get none. */
static tfc_status grad_dropout(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                               tfc_tensor **dxs)
{
    tfc_tensor *in[3] = {dys[0], n->inputs[1], n->inputs[2]};
    dxs[0] = tfc_build(g, &tfc_op_dropout_grad, 3, in, n->attrs);
    return g->status;
}

static const struct tfc_attr_def dropout_attrs[] = {
    [DROPOUT_RATE] = {"rate", TFC_ATTR_FLOAT, 0.5},
    [DROPOUT_SEED] = {"seed", TFC_ATTR_INT, 0},
};

const struct tfc_op tfc_op_dropout = {
    .name = "dropout", .n_inputs = 3, .kind = TFC_K_DROPOUT,
    .attrs = dropout_attrs, .n_attrs = TFC_ATTR_COUNT(dropout_attrs),
    .infer = infer_dropout, .codelet = &tfc_cl_dropout, .grad = grad_dropout,
};
const struct tfc_op tfc_op_dropout_grad = {
    .name = "dropout_grad", .n_inputs = 3, .kind = TFC_K_DROPOUT_GRAD,
    .attrs = dropout_attrs, .n_attrs = TFC_ATTR_COUNT(dropout_attrs),
    .infer = infer_dropout, .codelet = &tfc_cl_dropout, .grad = grad_dropout,
};

static uint64_t mix64(uint64_t x) /* splitmix64's finalizer */
{
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A seed from the graph seed and the node's name (FNV-1a), so that two dropout layers drop
 * different units and a graph rebuilt the same way drops the same ones. Never 0. */
static uint64_t derived_seed(uint64_t graph_seed, const char *name)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    uint64_t s = mix64(graph_seed * 0x9E3779B97F4A7C15ull ^ mix64(h));
    return s ? s : 1;
}

tfc_tensor *tfc_dropout(tfc_graph *g, tfc_tensor *x, double rate, tfc_tensor *training,
                        tfc_tensor *step, uint64_t seed)
{
    if (!g || !x || !training) return NULL;
    if (!(rate >= 0 && rate < 1))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "dropout of '%s': rate %g is outside "
                              "[0, 1): it is the probability of dropping a unit", x->name, rate);
    if (!step && !(step = tfc_global_step(g))) return NULL;
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_dropout, at);
    at[DROPOUT_RATE].f = rate;
    at[DROPOUT_SEED].i = (int64_t)seed;
    tfc_tensor *in[3] = {x, step, training};
    struct tfc_node *n = tfc_node_build(g, &tfc_op_dropout, NULL, 3, in, at);
    if (!n) return NULL;
    /* the name exists only once the node does; nothing has read the attribute yet */
    if (!seed) n->attrs[DROPOUT_SEED].i = (int64_t)derived_seed(g->seed, n->name);
    return &n->outputs[0];
}
