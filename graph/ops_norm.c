/* ops_norm.c: descriptors, inference and builders of batch normalization (per channel, axis 1;
 * training or inference mode chosen at run time by a scalar input), of its gradient op and of
 * the op that moves its moving statistics toward the batch's, and of layer normalization over
 * the last axes with its gradient op. The kernels are codelets/norm.c (and its device twins). */
#include <string.h>
#include "norm.h"

extern struct starpu_codelet tfc_cl_norm; /* codelets/norm.c */

static tfc_status need_float(const struct tfc_infer *in, int i, const char *what)
{
    if (!tfc_dtype_is_float(in->in[i].dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "%s must be float32 or float64, got %s", what,
                        tfc_dtype_name(in->in[i].dtype));
    return TFC_OK;
}

/* Input i has the dtype and shape of input `like` (dims unknown on one side pass). */
static tfc_status need_like(const struct tfc_infer *in, int i, int like, const char *what,
                            const char *like_what)
{
    const struct tfc_desc *a = &in->in[i], *b = &in->in[like];
    char sa[96], sb[96];
    int ok = a->dtype == b->dtype && a->shape.rank == b->shape.rank;
    for (int d = 0; ok && d < a->shape.rank; d++)
        ok = a->shape.dims[d] < 0 || b->shape.dims[d] < 0 || a->shape.dims[d] == b->shape.dims[d];
    if (!ok)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "%s is %s %s, %s is %s %s (they must match)",
                        what, tfc_dtype_name(a->dtype), tfc_shape_str(&a->shape, sa, sizeof sa),
                        like_what, tfc_dtype_name(b->dtype),
                        tfc_shape_str(&b->shape, sb, sizeof sb));
    return TFC_OK;
}

/* Input i is one value per channel: [C] of x's dtype (x is input `xi`). */
static tfc_status need_channels(const struct tfc_infer *in, int i, int xi, const char *what)
{
    const struct tfc_desc *v = &in->in[i], *x = &in->in[xi];
    int64_t c = x->shape.dims[1];
    char sv[96];
    if (v->dtype != x->dtype || v->shape.rank != 1 ||
        (c >= 0 && v->shape.dims[0] >= 0 && v->shape.dims[0] != c))
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "%s is %s %s, must be %s [%lld] (one value per "
                        "channel of x, axis 1)", what, tfc_dtype_name(v->dtype),
                        tfc_shape_str(&v->shape, sv, sizeof sv), tfc_dtype_name(x->dtype),
                        (long long)c);
    return TFC_OK;
}

static tfc_status need_flag(const struct tfc_infer *in, int i)
{
    const struct tfc_desc *t = &in->in[i];
    char st[96];
    if (!tfc_dtype_is_float(t->dtype) || tfc_shape_numel(&t->shape) != 1)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "training must be one float value (nonzero: "
                        "training mode), got %s %s", tfc_dtype_name(t->dtype),
                        tfc_shape_str(&t->shape, st, sizeof st));
    return TFC_OK;
}

static tfc_status need_nc(const struct tfc_infer *in, int xi)
{
    char sx[96];
    tfc_status st = need_float(in, xi, "x");
    if (!st && in->in[xi].shape.rank < 2)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "x is %s, must be [N, C] or [N, C, spatial...]",
                        tfc_shape_str(&in->in[xi].shape, sx, sizeof sx));
    return st;
}

static tfc_status need_epsilon(const struct tfc_infer *in, double eps)
{
    if (!(eps > 0))
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "epsilon is %g, must be > 0", eps);
    return TFC_OK;
}

/* The outputs from `first` on: [C] of x's dtype. */
static void channel_outputs(const struct tfc_infer *in, int first, int xi)
{
    for (int k = first; k < in->n_out; k++) {
        in->out[k].dtype = in->in[xi].dtype;
        in->out[k].shape = tfc_shape_of(1, &in->in[xi].shape.dims[1]);
    }
}

/* batch_norm(x, gamma, beta, moving_mean, moving_var, training) -> y, mean, var */
static tfc_status infer_batch_norm(const struct tfc_infer *in)
{
    static const char *const names[] = {"x", "gamma", "beta", "moving_mean", "moving_var"};
    tfc_status st = need_epsilon(in, in->attrs[BATCH_NORM_EPSILON].f);
    if (!st) st = need_nc(in, 0);
    for (int i = 1; i < 5 && !st; i++) st = need_channels(in, i, 0, names[i]);
    if (!st) st = need_flag(in, 5);
    if (st) return st;
    in->out[0] = in->in[0];
    channel_outputs(in, 1, 0);
    return TFC_OK;
}

/* batch_norm_grad(dy, x, gamma, mean, var, training) -> dx, dgamma, dbeta, dmean, dvar */
static tfc_status infer_batch_norm_grad(const struct tfc_infer *in)
{
    static const char *const names[] = {"dy", "x", "gamma", "mean", "var"};
    tfc_status st = need_epsilon(in, in->attrs[BATCH_NORM_EPSILON].f);
    if (!st) st = need_nc(in, 1);
    if (!st) st = need_like(in, 0, 1, "dy", "x");
    for (int i = 2; i < 5 && !st; i++) st = need_channels(in, i, 1, names[i]);
    if (!st) st = need_flag(in, 5);
    if (st) return st;
    in->out[0] = in->in[1];
    channel_outputs(in, 1, 1);
    return TFC_OK;
}

/* batch_norm_update(moving_mean, moving_var, mean, var, training, x): the moving statistics in
 * place; x gives the count per channel (its shape only) */
static tfc_status infer_batch_norm_update(const struct tfc_infer *in)
{
    static const char *const names[] = {"moving_mean", "moving_var", "mean", "var"};
    double m = in->attrs[BATCH_NORM_UPDATE_MOMENTUM].f;
    if (!(m >= 0 && m <= 1))
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "momentum is %g, must be in [0, 1]",
                        m);
    tfc_status st = need_nc(in, 5);
    for (int i = 0; i < 4 && !st; i++) st = need_channels(in, i, 5, names[i]);
    if (!st) st = need_flag(in, 4);
    if (st) return st;
    in->out[0] = in->in[0];
    return TFC_OK;
}

/* The leading dims that layer norm keeps: x's shape without its last n_axes dims. */
static tfc_status layer_norm_outer(const struct tfc_infer *in, int xi, tfc_shape *outer)
{
    const tfc_shape *s = &in->in[xi].shape;
    int64_t k = in->attrs[LAYER_NORM_N_AXES].i;
    tfc_status st = need_float(in, xi, "x");
    if (!st) st = need_epsilon(in, in->attrs[LAYER_NORM_EPSILON].f);
    if (st) return st;
    if (k < 1 || k > s->rank)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "n_axes is %lld, must be 1 to the "
                        "rank of x (%d)", (long long)k, s->rank);
    *outer = tfc_shape_of(s->rank - (int)k, s->dims);
    return TFC_OK;
}

/* layer_norm(x) -> y, mean, var (mean and var: the leading dims) */
static tfc_status infer_layer_norm(const struct tfc_infer *in)
{
    tfc_shape outer;
    tfc_status st = layer_norm_outer(in, 0, &outer);
    if (st) return st;
    in->out[0] = in->in[0];
    for (int k = 1; k < 3; k++) in->out[k] = (struct tfc_desc){in->in[0].dtype, outer};
    return TFC_OK;
}

/* layer_norm_grad(dy, x, mean, var) -> dx */
static tfc_status infer_layer_norm_grad(const struct tfc_infer *in)
{
    tfc_shape outer;
    tfc_status st = layer_norm_outer(in, 1, &outer);
    if (!st) st = need_like(in, 0, 1, "dy", "x");
    for (int i = 2; i < 4 && !st; i++) {
        struct tfc_desc want = {in->in[1].dtype, outer};
        struct tfc_infer sub = *in;
        struct tfc_desc pair[2] = {in->in[i], want};
        sub.in = pair;
        st = need_like(&sub, 0, 1, i == 2 ? "mean" : "var", "x without its normalized dims");
    }
    if (st) return st;
    in->out[0] = in->in[1];
    return TFC_OK;
}

static int three_outputs(const struct tfc_kattr *attrs) { (void)attrs; return 3; }
static int five_outputs(const struct tfc_kattr *attrs) { (void)attrs; return 5; }

static const struct tfc_attr_def batch_norm_attrs[] = {
    [BATCH_NORM_EPSILON] = {"epsilon", TFC_ATTR_FLOAT, 1e-5},
};
static const struct tfc_attr_def update_attrs[] = {
    [BATCH_NORM_UPDATE_MOMENTUM] = {"momentum", TFC_ATTR_FLOAT, 0.1},
};
static const struct tfc_attr_def layer_norm_attrs[] = {
    [LAYER_NORM_EPSILON] = {"epsilon", TFC_ATTR_FLOAT, 1e-5},
    [LAYER_NORM_N_AXES] = {"n_axes", TFC_ATTR_INT, 1},
};

const struct tfc_op tfc_op_batch_norm = {
    .name = "batch_norm", .n_inputs = 6, .kind = TFC_K_BATCH_NORM,
    .attrs = batch_norm_attrs, .n_attrs = TFC_ATTR_COUNT(batch_norm_attrs),
    .n_outputs = three_outputs, .infer = infer_batch_norm, .codelet = &tfc_cl_norm,
    .grad = tfc_grad_batch_norm,
};
const struct tfc_op tfc_op_batch_norm_grad = {
    .name = "batch_norm_grad", .n_inputs = 6, .kind = TFC_K_BATCH_NORM_GRAD,
    .attrs = batch_norm_attrs, .n_attrs = TFC_ATTR_COUNT(batch_norm_attrs),
    .n_outputs = five_outputs, .infer = infer_batch_norm_grad, .codelet = &tfc_cl_norm,
    .grad = tfc_grad_batch_norm_grad,
};
/* state: the moving mean and variance, read and written; x: its shape only */
const struct tfc_op tfc_op_batch_norm_update = {
    .name = "batch_norm_update", .n_inputs = 6, .kind = TFC_K_BATCH_NORM_UPDATE,
    .flags = TFC_OP_NO_GRADIENT, .var_access = TFC_VAR_UPDATE,
    .attrs = update_attrs, .n_attrs = TFC_ATTR_COUNT(update_attrs),
    .infer = infer_batch_norm_update, .codelet = &tfc_cl_norm, .n_state = 2,
    .shape_inputs = 1u << 5,
};
const struct tfc_op tfc_op_layer_norm = {
    .name = "layer_norm", .n_inputs = 1, .kind = TFC_K_LAYER_NORM,
    .attrs = layer_norm_attrs, .n_attrs = TFC_ATTR_COUNT(layer_norm_attrs),
    .n_outputs = three_outputs, .infer = infer_layer_norm, .codelet = &tfc_cl_norm,
    .grad = tfc_grad_layer_norm,
};
const struct tfc_op tfc_op_layer_norm_grad = {
    .name = "layer_norm_grad", .n_inputs = 4, .kind = TFC_K_LAYER_NORM_GRAD,
    .attrs = layer_norm_attrs, .n_attrs = TFC_ATTR_COUNT(layer_norm_attrs),
    .infer = infer_layer_norm_grad, .codelet = &tfc_cl_norm, .grad = tfc_grad_layer_norm_grad,
};

struct tfc_node *tfc_batch_norm_grad_node(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x,
                                          tfc_tensor *gamma, tfc_tensor *mean, tfc_tensor *var,
                                          tfc_tensor *training, double epsilon)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_tensor *in[6] = {dy, x, gamma, mean, var, training};
    tfc_attrs_default(&tfc_op_batch_norm_grad, at);
    at[BATCH_NORM_EPSILON].f = epsilon;
    return tfc_node_build(g, &tfc_op_batch_norm_grad, NULL, 6, in, at);
}

tfc_tensor *tfc_layer_norm_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x, tfc_tensor *mean,
                                tfc_tensor *var, const struct tfc_kattr *attrs)
{
    tfc_tensor *in[4] = {dy, x, mean, var};
    return tfc_build(g, &tfc_op_layer_norm_grad, 4, in, attrs);
}

static int is_variable(const tfc_tensor *t)
{
    return (t->node->op->flags & TFC_OP_VARIABLE) != 0;
}

/* y of batch_norm, run after the update of the moving statistics when they are variables (the
 * update is a control input of an identity of y, so a run fetching y updates them once). */
tfc_tensor *tfc_batch_norm(tfc_graph *g, tfc_tensor *x, tfc_tensor *gamma, tfc_tensor *beta,
                           tfc_tensor *moving_mean, tfc_tensor *moving_var, tfc_tensor *training,
                           const tfc_batch_norm_params *p)
{
    static const char *const names[] = {"x", "gamma", "beta", "moving_mean", "moving_var",
                                        "training"};
    tfc_tensor *in[6] = {x, gamma, beta, moving_mean, moving_var, training};
    tfc_batch_norm_params def = {1e-5, 0.1};
    if (!g || g->status) return NULL;
    for (int i = 0; i < 6; i++)
        if (!in[i])
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "batch_norm: %s is NULL",
                                  names[i]);
    if (!p) p = &def;
    if (!(p->momentum >= 0 && p->momentum <= 1))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "batch_norm of '%s': momentum is %g, "
                              "must be in [0, 1]", x->name, p->momentum);
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_batch_norm, at);
    at[BATCH_NORM_EPSILON].f = p->epsilon;
    struct tfc_node *n = tfc_node_build(g, &tfc_op_batch_norm, NULL, 6, in, at);
    if (!n) return NULL;
    if (!is_variable(moving_mean) || !is_variable(moving_var)) return &n->outputs[0];
    tfc_tensor *up_in[6] = {moving_mean, moving_var, &n->outputs[1], &n->outputs[2], training, x};
    tfc_attrs_default(&tfc_op_batch_norm_update, at);
    at[BATCH_NORM_UPDATE_MOMENTUM].f = p->momentum;
    tfc_tensor *update = tfc_build(g, &tfc_op_batch_norm_update, 6, up_in, at);
    tfc_tensor *y = tfc_identity(g, &n->outputs[0]);
    if (!update || !y || tfc_tensor_add_control_input(y, update)) return NULL;
    return y;
}

/* gamma or beta of layer norm: the shape of x's last n_axes dims. */
static int affine_ok(tfc_graph *g, tfc_tensor *x, tfc_tensor *v, int n_axes, const char *what)
{
    const tfc_shape *xs = &x->desc.shape, *vs = &v->desc.shape;
    char a[96], b[96];
    int ok = v->desc.dtype == x->desc.dtype && vs->rank == n_axes;
    for (int d = 0; ok && d < n_axes; d++) {
        int64_t want = xs->dims[xs->rank - n_axes + d];
        ok = want < 0 || vs->dims[d] < 0 || vs->dims[d] == want;
    }
    if (!ok)
        tfc_graph_fail(g, TFC_ERR_SHAPE, "layer_norm of '%s' %s over its last %d dims: %s '%s' "
                       "is %s %s, must be %s with those dims", x->name,
                       tfc_shape_str(xs, a, sizeof a), n_axes, what, v->name,
                       tfc_dtype_name(v->desc.dtype), tfc_shape_str(vs, b, sizeof b),
                       tfc_dtype_name(x->desc.dtype));
    return ok;
}

tfc_tensor *tfc_layer_norm(tfc_graph *g, tfc_tensor *x, tfc_tensor *gamma, tfc_tensor *beta,
                           int n_axes, double epsilon)
{
    if (!g || g->status) return NULL;
    if (!x) return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "layer_norm: x is NULL");
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_layer_norm, at);
    at[LAYER_NORM_EPSILON].f = epsilon;
    at[LAYER_NORM_N_AXES].i = n_axes;
    tfc_tensor *y = tfc_build(g, &tfc_op_layer_norm, 1, &x, at);
    if (!y) return NULL;
    if (gamma && !affine_ok(g, x, gamma, n_axes, "gamma")) return NULL;
    if (beta && !affine_ok(g, x, beta, n_axes, "beta")) return NULL;
    if (gamma) y = tfc_mul(g, y, gamma); /* broadcasting over the leading dims */
    if (beta) y = tfc_add(g, y, beta);
    return y;
}
