/* reshape_builders.c: squeeze, unsqueeze and flatten, builders that compute a target shape and
 * build a reshape (no op of their own: reshape's kernel and gradient serve). An unknown leading
 * dim stays -1 in the target, which reshape infers. */
#include "graph.h"

tfc_tensor *tfc_squeeze(tfc_graph *g, tfc_tensor *x, int n_axes, const int64_t *axes)
{
    if (!g || !x) return NULL;
    const tfc_shape *s = &x->desc.shape;
    int drop[TFC_MAX_RANK] = {0};
    if (n_axes < 0 || n_axes > s->rank || (n_axes && !axes))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "squeeze of '%s': %d axes for rank "
                              "%d", x->name, n_axes, s->rank);
    for (int i = 0; i < n_axes; i++) {
        int a = tfc_axis_norm(axes[i], s->rank);
        if (a < 0)
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "squeeze of '%s': axis %lld is "
                                  "invalid for rank %d", x->name, (long long)axes[i], s->rank);
        if (s->dims[a] != 1)
            return tfc_graph_fail(g, TFC_ERR_SHAPE, "squeeze of '%s': dim %d has size %lld, "
                                  "not 1", x->name, a, (long long)s->dims[a]);
        drop[a] = 1;
    }
    tfc_shape o = {0};
    for (int d = 0; d < s->rank; d++)
        if (!(n_axes ? drop[d] : s->dims[d] == 1)) o.dims[o.rank++] = s->dims[d];
    return tfc_reshape(g, x, o);
}

tfc_tensor *tfc_unsqueeze(tfc_graph *g, tfc_tensor *x, int64_t axis)
{
    if (!g || !x) return NULL;
    const tfc_shape *s = &x->desc.shape;
    int a = tfc_axis_norm(axis, s->rank + 1);
    if (a < 0 || s->rank == TFC_MAX_RANK)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "unsqueeze of '%s': axis %lld is "
                              "invalid for rank %d (at most %d)", x->name, (long long)axis,
                              s->rank, TFC_MAX_RANK - 1);
    tfc_shape o = {.rank = s->rank + 1};
    for (int d = 0, k = 0; d < o.rank; d++) o.dims[d] = d == a ? 1 : s->dims[k++];
    return tfc_reshape(g, x, o);
}

tfc_tensor *tfc_flatten(tfc_graph *g, tfc_tensor *x, int64_t axis)
{
    if (!g || !x) return NULL;
    const tfc_shape *s = &x->desc.shape;
    if (axis < -s->rank || axis > s->rank)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "flatten of '%s': axis %lld is "
                              "outside [-%d, %d]", x->name, (long long)axis, s->rank, s->rank);
    if (axis < 0) axis += s->rank;
    int64_t outer = 1, inner = 1; /* -1 once an unknown dim is in it */
    for (int d = 0; d < s->rank; d++) {
        int64_t *p = d < axis ? &outer : &inner;
        *p = *p < 0 || s->dims[d] < 0 ? -1 : *p * s->dims[d];
    }
    tfc_shape o = {.rank = 2, .dims = {outer, inner}};
    return tfc_reshape(g, x, o);
}
