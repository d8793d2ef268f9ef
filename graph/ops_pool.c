/* ops_pool.c: descriptors, inference and builders of max and average pooling over 1-3 spatial
 * dims, their gradient ops (max_pool_grad scatters through the argmax, max_pool_gather is its
 * adjoint, avg_pool_grad spreads over the windows) and global average pooling (a reduce_mean).
 * The window geometry is codelets/pool_geom.h, shared with the kernels. */
#include <string.h>
#include "pool.h"
#include "../codelets/pool_geom.h"

extern struct starpu_codelet tfc_cl_pool; /* codelets/pool.c */

static tfc_status need_float(const struct tfc_infer *in, int i, const char *what)
{
    if (!tfc_dtype_is_float(in->in[i].dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "%s must be float32 or float64, got %s", what,
                        tfc_dtype_name(in->in[i].dtype));
    return TFC_OK;
}

/* The geometry of pooling input i with in->attrs, or a message naming what is wrong. */
static tfc_status pool_geom(const struct tfc_infer *in, int i, struct tfc_pool_geom *g)
{
    const tfc_shape *s = &in->in[i].shape;
    static const char *const attr_of[] = {"kernel", "strides", "dilations", "pads_begin",
                                          "pads_end"};
    switch (tfc_pool_geom_make(in->attrs, s->rank, s->dims, g)) {
    case 0:
        return TFC_OK;
    case 1:
        return tfc_fail(in->msg, TFC_ERR_SHAPE,
                        "input must be [N, C, d1..dk] with 1 to 3 spatial dims, got rank %d",
                        s->rank);
    case 2:
        for (int a = 0; a < 5; a++) {
            static const int slot[] = {POOL_KERNEL, POOL_STRIDES, POOL_DILATIONS,
                                       POOL_PADS_BEGIN, POOL_PADS_END};
            int n = in->attrs[slot[a]].n;
            if (n != s->rank - 2 && (a == 0 || n != 0))
                return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                                "%s has %d values, the input has %d spatial dims%s", attr_of[a],
                                n, s->rank - 2, a ? " (or give none)" : "");
        }
        break;
    case 3:
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "kernel, strides and dilations must be >= 1");
    case 4:
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "pads must be >= 0");
    case 5:
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                        "a pad is larger than half the (dilated) kernel");
    }
    return tfc_fail(in->msg, TFC_ERR_INTERNAL, "pool geometry");
}

static void pool_shape(const struct tfc_pool_geom *g, const tfc_shape *x, tfc_shape *o)
{
    *o = *x;
    for (int i = 0; i < g->nsp; i++) o->dims[2 + i] = g->out[3 - g->nsp + i];
}

static tfc_status infer_pool(const struct tfc_infer *in)
{
    struct tfc_pool_geom g;
    tfc_status st = need_float(in, 0, "input");
    if (!st) st = pool_geom(in, 0, &g);
    if (st) return st;
    in->out[0].dtype = in->in[0].dtype;
    pool_shape(&g, &in->in[0].shape, &in->out[0].shape);
    if (in->n_out == 2) {
        in->out[1].dtype = TFC_INT64;
        in->out[1].shape = in->out[0].shape;
    }
    return TFC_OK;
}

static tfc_status infer_avg_pool(const struct tfc_infer *in)
{
    for (int i = 0; i < in->attrs[POOL_DILATIONS].n; i++)
        if (in->attrs[POOL_DILATIONS].v[i] != 1)
            return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT,
                            "dilations must be 1 for avg_pool, got %lld in dim %d",
                            (long long)in->attrs[POOL_DILATIONS].v[i], i);
    if (in->attrs[POOL_WITH_INDICES].i)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "with_indices is for max_pool only");
    return infer_pool(in);
}

/* dy and the argmax indices (same shape) against x: ranks, planes. */
static tfc_status check_planes(const struct tfc_infer *in, int a, int b, const char *an,
                               const char *bn)
{
    const tfc_shape *sa = &in->in[a].shape, *sb = &in->in[b].shape;
    if (sa->rank != sb->rank || sa->rank < 3 || sa->rank > 5)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "%s (rank %d) and %s (rank %d) must both be "
                        "[N, C, 1 to 3 spatial dims]", an, sa->rank, bn, sb->rank);
    for (int d = 0; d < 2; d++)
        if (sa->dims[d] >= 0 && sb->dims[d] >= 0 && sa->dims[d] != sb->dims[d])
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "dim %d: %s has %lld, %s %lld", d, an,
                            (long long)sa->dims[d], bn, (long long)sb->dims[d]);
    return TFC_OK;
}

static tfc_status need_indices(const struct tfc_infer *in, int i, int like)
{
    const tfc_shape *s = &in->in[i].shape, *l = &in->in[like].shape;
    if (in->in[i].dtype != TFC_INT64)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "indices must be int64, got %s",
                        tfc_dtype_name(in->in[i].dtype));
    for (int d = 0; d < s->rank && like >= 0; d++)
        if (s->dims[d] >= 0 && l->dims[d] >= 0 && s->dims[d] != l->dims[d])
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "indices and the gradient differ in dim %d",
                            d);
    return TFC_OK;
}

/* max_pool_grad(dy, indices, x): x's shape, dy's dtype */
static tfc_status infer_max_pool_grad(const struct tfc_infer *in)
{
    tfc_status st = need_float(in, 0, "the gradient");
    if (!st) st = check_planes(in, 0, 1, "the gradient", "indices");
    if (!st) st = need_indices(in, 1, 0);
    if (!st) st = check_planes(in, 0, 2, "the gradient", "the pooled input");
    if (st) return st;
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = in->in[2].shape;
    return TFC_OK;
}

/* max_pool_gather(x, indices): indices' shape, x's dtype */
static tfc_status infer_max_pool_gather(const struct tfc_infer *in)
{
    tfc_status st = need_float(in, 0, "input");
    if (!st) st = check_planes(in, 0, 1, "input", "indices");
    if (!st) st = need_indices(in, 1, -1);
    if (st) return st;
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = in->in[1].shape;
    return TFC_OK;
}

/* avg_pool_grad(dy, x): pooling x must give dy's shape */
static tfc_status infer_avg_pool_grad(const struct tfc_infer *in)
{
    struct tfc_pool_geom g;
    tfc_shape o;
    tfc_status st = need_float(in, 0, "the gradient");
    if (!st) st = pool_geom(in, 1, &g);
    if (!st) st = check_planes(in, 0, 1, "the gradient", "the pooled input");
    if (st) return st;
    pool_shape(&g, &in->in[1].shape, &o);
    for (int d = 2; d < o.rank; d++)
        if (o.dims[d] >= 0 && in->in[0].shape.dims[d] >= 0 && o.dims[d] != in->in[0].shape.dims[d])
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "dim %d: pooling gives %lld, the gradient "
                            "has %lld", d, (long long)o.dims[d],
                            (long long)in->in[0].shape.dims[d]);
    in->out[0].dtype = in->in[0].dtype;
    in->out[0].shape = in->in[1].shape;
    return TFC_OK;
}

static int max_pool_outputs(const struct tfc_kattr *attrs)
{
    return attrs[POOL_WITH_INDICES].i ? 2 : 1;
}

static const struct tfc_attr_def pool_attrs[] = {
    [POOL_KERNEL] = {"kernel", TFC_ATTR_INTS, 0},
    [POOL_STRIDES] = {"strides", TFC_ATTR_INTS, 0},
    [POOL_PADS_BEGIN] = {"pads_begin", TFC_ATTR_INTS, 0},
    [POOL_PADS_END] = {"pads_end", TFC_ATTR_INTS, 0},
    [POOL_DILATIONS] = {"dilations", TFC_ATTR_INTS, 0},
    [POOL_CEIL_MODE] = {"ceil_mode", TFC_ATTR_INT, 0},
    [POOL_COUNT_INCLUDE_PAD] = {"count_include_pad", TFC_ATTR_INT, 0},
    [POOL_WITH_INDICES] = {"with_indices", TFC_ATTR_INT, 0},
};

const struct tfc_op tfc_op_max_pool = {
    .name = "max_pool", .n_inputs = 1, .kind = TFC_K_MAX_POOL,
    .attrs = pool_attrs, .n_attrs = TFC_ATTR_COUNT(pool_attrs), .n_outputs = max_pool_outputs,
    .infer = infer_pool, .codelet = &tfc_cl_pool, .grad = tfc_grad_max_pool,
};
const struct tfc_op tfc_op_avg_pool = {
    .name = "avg_pool", .n_inputs = 1, .kind = TFC_K_AVG_POOL,
    .attrs = pool_attrs, .n_attrs = TFC_ATTR_COUNT(pool_attrs),
    .infer = infer_avg_pool, .codelet = &tfc_cl_pool, .grad = tfc_grad_avg_pool,
};
/* shape_inputs: the pooled input x is read for its shape only (bit 2, bit 1) */
const struct tfc_op tfc_op_max_pool_grad = {
    .name = "max_pool_grad", .n_inputs = 3, .kind = TFC_K_MAX_POOL_GRAD,
    .infer = infer_max_pool_grad, .codelet = &tfc_cl_pool, .grad = tfc_grad_max_pool_grad,
    .shape_inputs = 1u << 2,
};
const struct tfc_op tfc_op_max_pool_gather = {
    .name = "max_pool_gather", .n_inputs = 2, .kind = TFC_K_MAX_POOL_GATHER,
    .infer = infer_max_pool_gather, .codelet = &tfc_cl_pool, .grad = tfc_grad_max_pool_gather,
};
const struct tfc_op tfc_op_avg_pool_grad = {
    .name = "avg_pool_grad", .n_inputs = 2, .kind = TFC_K_AVG_POOL_GRAD,
    .attrs = pool_attrs, .n_attrs = TFC_ATTR_COUNT(pool_attrs),
    .infer = infer_avg_pool_grad, .codelet = &tfc_cl_pool, .grad = tfc_grad_avg_pool_grad,
    .shape_inputs = 1u << 1,
};

/* The public parameters into attribute slots (lists of n_spatial values; all-zero strides
 * and dilations stay empty, i.e. 1; all-zero pads stay empty, i.e. 0). */
static int params_to_attrs(tfc_graph *g, const char *op, const tfc_pool_params *p,
                           struct tfc_kattr *at)
{
    if (!p || p->n_spatial < 1 || p->n_spatial > 3) {
        tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s: n_spatial is %d, must be 1 to 3", op,
                       p ? p->n_spatial : 0);
        return -1;
    }
    const int64_t *lists[] = {p->kernel, p->strides, p->pads_begin, p->pads_end, p->dilations};
    static const int slots[] = {POOL_KERNEL, POOL_STRIDES, POOL_PADS_BEGIN, POOL_PADS_END,
                                POOL_DILATIONS};
    for (int a = 0; a < 5; a++) {
        int any = 0;
        for (int i = 0; i < p->n_spatial; i++) any |= lists[a][i] != 0;
        at[slots[a]].n = a == 0 || any ? p->n_spatial : 0;
        for (int i = 0; i < at[slots[a]].n; i++) at[slots[a]].v[i] = lists[a][i];
    }
    at[POOL_CEIL_MODE].i = p->ceil_mode != 0;
    at[POOL_COUNT_INCLUDE_PAD].i = p->count_include_pad != 0;
    return 0;
}

struct tfc_node *tfc_max_pool_node(tfc_graph *g, tfc_tensor *x, const struct tfc_kattr *attrs)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    memcpy(at, attrs, sizeof at);
    at[POOL_WITH_INDICES].i = 1;
    return tfc_node_build(g, &tfc_op_max_pool, NULL, 1, &x, at);
}

tfc_tensor *tfc_max_pool(tfc_graph *g, tfc_tensor *x, const tfc_pool_params *p,
                         tfc_tensor **indices)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    if (indices) *indices = NULL;
    if (!g || !x) return NULL;
    tfc_attrs_default(&tfc_op_max_pool, at);
    if (params_to_attrs(g, "max_pool", p, at)) return NULL;
    at[POOL_WITH_INDICES].i = indices != NULL;
    struct tfc_node *n = tfc_node_build(g, &tfc_op_max_pool, NULL, 1, &x, at);
    if (!n) return NULL;
    if (indices) *indices = &n->outputs[1];
    return &n->outputs[0];
}

tfc_tensor *tfc_avg_pool_attrs(tfc_graph *g, tfc_tensor *x, const struct tfc_kattr *attrs)
{
    return tfc_build(g, &tfc_op_avg_pool, 1, &x, attrs);
}

tfc_tensor *tfc_avg_pool(tfc_graph *g, tfc_tensor *x, const tfc_pool_params *p)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    if (!g || !x) return NULL;
    tfc_attrs_default(&tfc_op_avg_pool, at);
    if (params_to_attrs(g, "avg_pool", p, at)) return NULL;
    return tfc_build(g, &tfc_op_avg_pool, 1, &x, at);
}

tfc_tensor *tfc_max_pool_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *indices, tfc_tensor *x)
{
    tfc_tensor *in[3] = {dy, indices, x};
    return tfc_build(g, &tfc_op_max_pool_grad, 3, in, NULL);
}

tfc_tensor *tfc_max_pool_gather(tfc_graph *g, tfc_tensor *x, tfc_tensor *indices)
{
    tfc_tensor *in[2] = {x, indices};
    return tfc_build(g, &tfc_op_max_pool_gather, 2, in, NULL);
}

tfc_tensor *tfc_avg_pool_grad(tfc_graph *g, tfc_tensor *dy, tfc_tensor *x,
                              const struct tfc_kattr *attrs)
{
    tfc_tensor *in[2] = {dy, x};
    return tfc_build(g, &tfc_op_avg_pool_grad, 2, in, attrs);
}

tfc_tensor *tfc_global_avg_pool(tfc_graph *g, tfc_tensor *x)
{
    if (!g || !x) return NULL;
    int rank = x->desc.shape.rank;
    if (rank < 3 || rank > 5)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "global_avg_pool: input '%s' must be [N, C, 1 "
                              "to 3 spatial dims], got rank %d", x->name, rank);
    int64_t axes[3] = {2, 3, 4};
    return tfc_reduce_mean(g, x, rank - 2, axes, 1);
}
