/* control_flow_store.c: rebuilding cond and while nodes from a stored graph, record by record
 * in node order (graph/serialize.c calls it): the region markers re-enter and leave the
 * regions through the two-step builder, capture records capture, and the loop-variable
 * placeholders take their stored shapes. */
#include <string.h>
#include "control_flow.h"

int tfc_cflow_captured(const struct tfc_node *n, const tfc_tensor **outer)
{
    if (!n->region || n->op != &tfc_op_placeholder) return 0;
    const struct tfc_region *reg = &n->graph->regions[n->region];
    for (int i = 0; i < reg->n_caps; i++)
        if (reg->cap_inner[i]->node == n) {
            *outer = reg->cap_outer[i];
            return 1;
        }
    return 0;
}

/* abs relative to the open name scope ("" when none); NULL when it is not inside it. */
static const char *scope_relative(tfc_graph *g, const char *abs)
{
    const char *scope = tfc_scope_current(g);
    size_t n = strlen(scope);
    if (!n) return abs;
    if (strncmp(abs, scope, n) || abs[n] != '/') return NULL;
    return abs + n + 1;
}

static struct tfc_cflow *find_builder(tfc_graph *g, const char *name)
{
    for (struct tfc_cflow *cf = g->cflows; cf; cf = cf->next)
        if (!cf->node && !strcmp(cf->name, name)) return cf;
    return NULL;
}

tfc_status tfc_cflow_import_enter(tfc_graph *g, const char *name, const struct tfc_kattr *attrs,
                                  int n_in, tfc_tensor *const *in)
{
    if (g->status) return g->status;
    int kind = (int)attrs[MARK_KIND].i, r = (int)attrs[MARK_REGION].i;
    static const char *const labels[2][2] = {{"then", "else"}, {"cond", "body"}};
    int reverse = kind == TFC_CF_MARK_REVERSE; /* a gradient loop: a while */
    struct tfc_cflow *fwd = reverse && n_in > 1 ? in[n_in - 1]->node->cflow : NULL;
    if (reverse && (!fwd || fwd->kind != TFC_CF_WHILE || !fwd->node))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s' (region_enter): a gradient loop whose last input is "
                               "not the output of a while_loop", name);
    if (reverse) {
        kind = TFC_CF_WHILE;
        n_in--;
    }
    if ((kind != TFC_CF_COND && kind != TFC_CF_WHILE) || (r != 0 && r != 1))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s' (region_enter): kind %d region %d is not a region",
                               name, kind, r);
    const char *label = labels[kind == TFC_CF_WHILE][r];
    size_t len = strlen(name), ll = strlen(label);
    char full[512], *rel;
    if (len <= ll + 1 || len >= sizeof full || strcmp(name + len - ll, label) ||
        name[len - ll - 1] != '/')
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s' (region_enter): the name does not end in '/%s'", name,
                               label);
    memcpy(full, name, len - ll - 1);
    full[len - ll - 1] = 0;
    struct tfc_cflow *cf = r ? find_builder(g, full) : NULL;
    if (!r) {
        if (!(rel = (char *)scope_relative(g, full)))
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "node '%s' (region_enter): not inside the region '%s' being "
                                   "rebuilt", name, tfc_scope_current(g));
        tfc_while_opts o = {.maximum_iterations = attrs[MARK_MAX_ITER].i};
        cf = kind == TFC_CF_WHILE ? tfc_while_new(g, rel, n_in, in, &o)
                                  : tfc_cond_new(g, rel, n_in ? in[0] : NULL, (int)attrs[MARK_N].i);
        if (cf && fwd) tfc_cflow_set_forward(cf, fwd);
    }
    if (!cf)
        return g->status ? g->status
                         : tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                                           "node '%s' (region_enter): no '%s' is being rebuilt",
                                           name, full);
    return tfc_cflow_enter(cf, r, NULL);
}

tfc_status tfc_cflow_import_leave(tfc_graph *g, int n_in, tfc_tensor *const *in)
{
    if (g->status) return g->status;
    if (!g->cur_region)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "region_leave outside every region of the stored graph");
    return tfc_cflow_leave(g->regions[g->cur_region].cf, n_in, in);
}

tfc_status tfc_cflow_import_finish(tfc_graph *g, const char *name)
{
    if (g->status) return g->status;
    struct tfc_cflow *cf = find_builder(g, name);
    if (!cf)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                               "node '%s': its regions are not in the stored graph", name);
    return tfc_cflow_finish(cf, NULL);
}

tfc_status tfc_cflow_import_capture(tfc_graph *g, const char *name, tfc_tensor *outer)
{
    if (g->status) return g->status;
    const char *rel = scope_relative(g, name);
    if (!g->cur_region || !rel || !tfc_region_within(g, g->cur_region, outer->node->region))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s': a capture of '%s' outside a region that sees it",
                               name, outer->name);
    return tfc_cflow_capture(g, outer, g->cur_region, rel) ? TFC_OK : g->status;
}

int tfc_cflow_import_input(tfc_graph *g, const char *name, const tfc_shape *shape)
{
    tfc_tensor *t = g->cur_region ? tfc_graph_find(g, name) : NULL;
    if (!t || t->node->region != g->cur_region) return 0;
    struct tfc_cflow *cf = g->regions[g->cur_region].cf;
    struct tfc_cf_region *reg = cf->cur >= 0 ? &cf->reg[cf->cur] : NULL;
    for (int k = 0; reg && k < reg->n_in; k++)
        if (reg->in[k] == t) {
            t->desc.shape = *shape;
            t->node->attrs[SOURCE_SHAPE].n = shape->rank;
            for (int d = 0; d < shape->rank; d++) t->node->attrs[SOURCE_SHAPE].v[d] = shape->dims[d];
            if (cf->cur == 0) cf->invariant[k] = *shape; /* the body's inputs take them too */
            return 1;
        }
    return 0;
}

int tfc_cflow_import_unfinished(tfc_graph *g)
{
    for (struct tfc_cflow *cf = g->cflows; cf; cf = cf->next) {
        if (cf->node) continue;
        const char *kind = cf->kind == TFC_CF_WHILE ? "while" : "cond";
        if (cf->cur >= 0) { /* leave the region, so that nothing built later goes into it */
            g->cur_region = cf->saved_region;
            tfc_scope_pop(g); /* the two scopes entering pushed: the node's, the region's */
            tfc_scope_pop(g);
            cf->cur = -1;
        }
        tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                        "%s '%s': the stored graph ends before its node (its regions' records are "
                        "cut short)", kind, cf->name);
        return 1;
    }
    return 0;
}
