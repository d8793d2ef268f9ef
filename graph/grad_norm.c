/* grad_norm.c: gradients of batch and layer normalization. The first-order gradient of y is
 * one fused op (batch_norm_grad, layer_norm_grad). Everything else (the gradients of the
 * statistics outputs, and the gradients of the gradient ops, i.e. second order) comes from a
 * "twin": the same formula written with differentiable element-wise and reduce ops, which
 * tfc_gradients then differentiates. The twins run only in higher-order or statistics paths. */
#include "norm.h"
#include "grad.h"

/* The reduced axes of batch norm (all but the channel axis 1) and of layer norm (the last k). */
static int batch_axes(int rank, int64_t *axes)
{
    int n = 0;
    for (int d = 0; d < rank; d++)
        if (d != 1) axes[n++] = d;
    return n;
}

static int layer_axes(int rank, int k, int64_t *axes)
{
    for (int i = 0; i < k; i++) axes[i] = rank - k + i;
    return k;
}

/* v of shape [C] as [1, C, 1, ...] for x of rank `rank` (broadcasts along axis 1). */
static tfc_tensor *per_channel(tfc_graph *g, tfc_tensor *v, int rank)
{
    int64_t dims[TFC_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = d == 1 ? -1 : 1;
    return rank == 2 ? v : tfc_reshape(g, v, tfc_shape_of(rank, dims));
}

/* 1 where the scalar `training` is nonzero, else 0, in dtype dt; and its complement. */
static void mode_masks(tfc_graph *g, tfc_tensor *training, enum tfc_dtype dt, tfc_tensor **on,
                       tfc_tensor **off)
{
    tfc_tensor *zero = tfc_scalar(g, training->desc.dtype, 0);
    *on = tfc_cast(g, tfc_not_equal(g, training, zero), dt);
    *off = tfc_sub(g, tfc_scalar(g, dt, 1), *on);
}

/* on * a + off * b */
static tfc_tensor *blend(tfc_graph *g, tfc_tensor *on, tfc_tensor *a, tfc_tensor *off,
                         tfc_tensor *b)
{
    return tfc_add(g, tfc_mul(g, on, a), tfc_mul(g, off, b));
}

/* Fresh handles on n's first n_x inputs (identities), so that differentiating a twin built on
 * them gives the local partial derivatives only: a pass from the twin back to n's own inputs
 * would also follow the paths between those inputs (an input computed from another one) and
 * count them twice, once here and once in the caller's pass. The rest are n's inputs. */
static void fresh_inputs(tfc_graph *g, struct tfc_node *n, int n_x, tfc_tensor **in)
{
    for (int i = 0; i < n->n_inputs; i++)
        in[i] = i < n_x ? tfc_identity(g, n->inputs[i]) : n->inputs[i];
}

/* dxs[i] = the gradient of sum_k ys[k] . dys[k] (only the ys with a dys) w.r.t. xs[i]. */
static tfc_status twin_vjp(tfc_graph *g, int n_ys, tfc_tensor *const *ys, tfc_tensor *const *dys,
                           int n_xs, tfc_tensor *const *xs, tfc_tensor **dxs)
{
    tfc_tensor *use_y[8], *use_dy[8];
    int m = 0;
    if (g->status) return g->status;
    for (int k = 0; k < n_ys; k++)
        if (dys[k]) use_y[m] = ys[k], use_dy[m++] = dys[k];
    if (!m) return TFC_OK;
    return tfc_gradients(g, m, use_y, use_dy, n_xs, xs, dxs);
}

/* The twin of batch_norm: y, mean, var from x, gamma, beta, moving mean and var, training. */
static void batch_norm_twin(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *in,
                            tfc_tensor **outs)
{
    tfc_tensor *x = in[0];
    int r = x->desc.shape.rank;
    int64_t axes[TFC_MAX_RANK];
    int na = batch_axes(r, axes);
    enum tfc_dtype dt = x->desc.dtype;
    tfc_tensor *on, *off;
    mode_masks(g, in[5], dt, &on, &off);
    tfc_tensor *bmean = tfc_reduce_mean(g, x, na, axes, 0);
    tfc_tensor *dev = tfc_sub(g, x, per_channel(g, bmean, r));
    tfc_tensor *bvar = tfc_reduce_mean(g, tfc_square(g, dev), na, axes, 0);
    outs[1] = blend(g, on, bmean, off, in[3]);
    outs[2] = blend(g, on, bvar, off, in[4]);
    tfc_tensor *eps = tfc_scalar(g, dt, n->attrs[BATCH_NORM_EPSILON].f);
    tfc_tensor *scale = tfc_mul(g, in[1], tfc_rsqrt(g, tfc_add(g, outs[2], eps)));
    tfc_tensor *xc = tfc_sub(g, x, per_channel(g, outs[1], r));
    outs[0] = tfc_add(g, tfc_mul(g, xc, per_channel(g, scale, r)), per_channel(g, in[2], r));
}

tfc_status tfc_grad_batch_norm(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                               tfc_tensor **dxs)
{
    if (dys[1] || dys[2]) { /* the statistics are used: differentiate the twin */
        tfc_tensor *in[6], *outs[3];
        fresh_inputs(g, n, 5, in);
        batch_norm_twin(g, n, in, outs);
        return twin_vjp(g, 3, outs, dys, 5, in, dxs);
    }
    struct tfc_node *gn = tfc_batch_norm_grad_node(g, dys[0], n->inputs[0], n->inputs[1],
                                                   &n->outputs[1], &n->outputs[2], n->inputs[5],
                                                   n->attrs[BATCH_NORM_EPSILON].f);
    if (!gn) return g->status;
    dxs[0] = &gn->outputs[0];
    dxs[1] = &gn->outputs[1];
    dxs[2] = &gn->outputs[2];
    dxs[3] = &gn->outputs[3];
    dxs[4] = &gn->outputs[4];
    return g->status;
}

/* The twin of batch_norm_grad: dx, dgamma, dbeta, dmean, dvar from dy, x, gamma, mean, var,
 * training (the kernel's formulas, codelets/norm.c). */
static void batch_norm_grad_twin(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *in,
                                 tfc_tensor **outs)
{
    tfc_tensor *dy = in[0], *x = in[1], *gamma = in[2];
    int r = x->desc.shape.rank;
    int64_t axes[TFC_MAX_RANK];
    int na = batch_axes(r, axes);
    enum tfc_dtype dt = x->desc.dtype;
    tfc_tensor *on, *off;
    mode_masks(g, in[5], dt, &on, &off);
    tfc_tensor *eps = tfc_scalar(g, dt, n->attrs[BATCH_NORM_EPSILON].f);
    tfc_tensor *invstd = tfc_rsqrt(g, tfc_add(g, in[4], eps));
    tfc_tensor *xhat = tfc_mul(g, tfc_sub(g, x, per_channel(g, in[3], r)),
                               per_channel(g, invstd, r));
    tfc_tensor *dyx = tfc_mul(g, dy, xhat);
    tfc_tensor *scale = per_channel(g, tfc_mul(g, gamma, invstd), r);
    tfc_tensor *centered = tfc_sub(g, tfc_sub(g, dy, tfc_reduce_mean(g, dy, na, axes, 1)),
                                   tfc_mul(g, xhat, tfc_reduce_mean(g, dyx, na, axes, 1)));
    outs[0] = tfc_mul(g, scale, blend(g, on, centered, off, dy));
    outs[1] = tfc_reduce_sum(g, dyx, na, axes, 0);
    outs[2] = tfc_reduce_sum(g, dy, na, axes, 0);
    tfc_tensor *gs = tfc_mul(g, gamma, invstd);
    outs[3] = tfc_mul(g, off, tfc_neg(g, tfc_mul(g, gs, outs[2])));
    outs[4] = tfc_mul(g, off, tfc_mul(g, tfc_scalar(g, dt, -0.5),
                                      tfc_mul(g, tfc_mul(g, gs, invstd), outs[1])));
}

tfc_status tfc_grad_batch_norm_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                    tfc_tensor **dxs)
{
    tfc_tensor *in[6], *outs[5];
    fresh_inputs(g, n, 5, in);
    batch_norm_grad_twin(g, n, in, outs);
    return twin_vjp(g, 5, outs, dys, 5, in, dxs);
}

/* The twin of layer_norm: y, mean, var from x. */
static void layer_norm_twin(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *in,
                            tfc_tensor **outs)
{
    tfc_tensor *x = in[0];
    int64_t axes[TFC_MAX_RANK];
    int na = layer_axes(x->desc.shape.rank, (int)n->attrs[LAYER_NORM_N_AXES].i, axes);
    tfc_tensor *dev = tfc_sub(g, x, tfc_reduce_mean(g, x, na, axes, 1));
    tfc_tensor *sq = tfc_square(g, dev);
    tfc_tensor *eps = tfc_scalar(g, x->desc.dtype, n->attrs[LAYER_NORM_EPSILON].f);
    outs[0] = tfc_mul(g, dev, tfc_rsqrt(g, tfc_add(g, tfc_reduce_mean(g, sq, na, axes, 1), eps)));
    outs[1] = tfc_reduce_mean(g, x, na, axes, 0);
    outs[2] = tfc_reduce_mean(g, sq, na, axes, 0);
}

tfc_status tfc_grad_layer_norm(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                               tfc_tensor **dxs)
{
    if (dys[1] || dys[2]) {
        tfc_tensor *in[1], *outs[3];
        fresh_inputs(g, n, 1, in);
        layer_norm_twin(g, n, in, outs);
        return twin_vjp(g, 3, outs, dys, 1, in, dxs);
    }
    dxs[0] = tfc_layer_norm_grad(g, dys[0], n->inputs[0], &n->outputs[1], &n->outputs[2],
                                 n->attrs);
    return g->status;
}

/* mean or var of layer norm ([leading dims]) with x's normalized dims put back as 1s (only
 * the leading dim of x may be unknown: reshape infers it). */
static tfc_tensor *keep_dims(tfc_graph *g, tfc_tensor *v, const tfc_shape *xs, int k)
{
    int64_t dims[TFC_MAX_RANK];
    for (int d = 0; d < xs->rank; d++) dims[d] = d < xs->rank - k ? xs->dims[d] : 1;
    return tfc_reshape(g, v, tfc_shape_of(xs->rank, dims));
}

/* The twin of layer_norm_grad: dx from dy, x, mean, var. */
static void layer_norm_grad_twin(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *in,
                                 tfc_tensor **outs)
{
    tfc_tensor *dy = in[0], *x = in[1];
    const tfc_shape *xs = &x->desc.shape;
    int k = (int)n->attrs[LAYER_NORM_N_AXES].i;
    int64_t axes[TFC_MAX_RANK];
    int na = layer_axes(xs->rank, k, axes);
    tfc_tensor *eps = tfc_scalar(g, x->desc.dtype, n->attrs[LAYER_NORM_EPSILON].f);
    tfc_tensor *invstd = tfc_rsqrt(g, tfc_add(g, keep_dims(g, in[3], xs, k), eps));
    tfc_tensor *xhat = tfc_mul(g, tfc_sub(g, x, keep_dims(g, in[2], xs, k)), invstd);
    tfc_tensor *dyx_mean = tfc_reduce_mean(g, tfc_mul(g, dy, xhat), na, axes, 1);
    tfc_tensor *c = tfc_sub(g, tfc_sub(g, dy, tfc_reduce_mean(g, dy, na, axes, 1)),
                            tfc_mul(g, xhat, dyx_mean));
    outs[0] = tfc_mul(g, invstd, c);
}

tfc_status tfc_grad_layer_norm_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                    tfc_tensor **dxs)
{
    tfc_tensor *in[4], *outs[1];
    fresh_inputs(g, n, 4, in);
    layer_norm_grad_twin(g, n, in, outs);
    return twin_vjp(g, 1, outs, dys, 4, in, dxs);
}
