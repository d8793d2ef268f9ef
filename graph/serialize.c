/* serialize.c: graph <-> node records, driven by each op's attribute table. Floats are
 * written with 17 significant digits so that a saved graph loads back bit for bit. */
#include <stdlib.h>
#include <string.h>
#include "serialize.h"
#include "control_flow.h"

void tfc_attrs_format(const struct tfc_op *op, const struct tfc_kattr *attrs, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = 0;
    for (int i = 0; i < op->n_attrs && pos < len; i++) {
        const struct tfc_kattr *a = &attrs[i];
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%s=", i ? "," : "", op->attrs[i].name);
        if (pos >= len) break;
        switch (op->attrs[i].type) {
        case TFC_ATTR_INT: pos += (size_t)snprintf(buf + pos, len - pos, "%lld", (long long)a->i); break;
        case TFC_ATTR_FLOAT: pos += (size_t)snprintf(buf + pos, len - pos, "%.17g", a->f); break;
        case TFC_ATTR_DTYPE:
            pos += (size_t)snprintf(buf + pos, len - pos, "%s", tfc_dtype_name((enum tfc_dtype)a->i));
            break;
        case TFC_ATTR_INTS:
            pos += (size_t)snprintf(buf + pos, len - pos, "[");
            for (int k = 0; k < a->n && pos < len; k++)
                pos += (size_t)snprintf(buf + pos, len - pos, k ? ",%lld" : "%lld", (long long)a->v[k]);
            if (pos < len) pos += (size_t)snprintf(buf + pos, len - pos, "]");
            break;
        }
    }
}

tfc_status tfc_graph_export_node(const tfc_graph *g, int i, struct tfc_node_record *rec)
{
    memset(rec, 0, sizeof *rec);
    if (!g || i < 0 || i >= g->n_nodes)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "export: no node %d", i);
    const struct tfc_node *n = g->nodes[i];
    const struct tfc_cflow *open = n->region ? g->regions[n->region].cf : NULL;
    if (open && !open->node) /* its records would stop inside the region: they never load */
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "node '%s' is inside %s '%s', whose "
                               "building is not finished (tfc_cflow_finish): a graph is "
                               "exported whole", n->name,
                               open->kind == TFC_CF_WHILE ? "while_loop" : "cond", open->name);
    rec->name = n->name;
    rec->op = n->op->name;
    rec->n_inputs = n->n_inputs;
    rec->n_ctrl = n->n_ctrl;
    rec->inputs = calloc((size_t)n->n_inputs + 2, sizeof *rec->inputs);
    rec->ctrl = calloc((size_t)n->n_ctrl + 1, sizeof *rec->ctrl);
    if (!rec->inputs || !rec->ctrl) {
        tfc_node_record_clear(rec);
        return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "export: no memory");
    }
    for (int k = 0; k < n->n_inputs; k++) rec->inputs[k] = n->inputs[k]->name;
    const tfc_tensor *outer;
    if (tfc_cflow_captured(n, &outer)) { /* its one input: the tensor it captures */
        rec->inputs[0] = outer->name;
        rec->n_inputs = 1;
    }
    for (int k = 0; k < n->n_ctrl; k++) rec->ctrl[k] = n->ctrl[k]->name;
    tfc_attrs_format(n->op, n->attrs, rec->attrs, sizeof rec->attrs);
    rec->value = n->value;
    rec->init = n->init;
    rec->untrainable = n->untrainable;
    return TFC_OK;
}

void tfc_node_record_clear(struct tfc_node_record *rec)
{
    free(rec->inputs);
    free(rec->ctrl);
    rec->inputs = rec->ctrl = NULL;
}

/* The ops of control flow, which the op table leaves out (graph/control_flow.h). */
static const struct tfc_op *cflow_op(const char *name)
{
    static const struct tfc_op *const ops[] = {&tfc_op_while, &tfc_op_cond, &tfc_op_region_enter,
                                               &tfc_op_region_leave};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i]->name, name)) return ops[i];
    return NULL;
}

/* A control-flow record (graph/control_flow.h says the order), or a placeholder of a region
 * being rebuilt: 1 when handled (g's status says how), 0 for an ordinary record. */
static int import_cflow(tfc_graph *g, const struct tfc_node_record *rec, const struct tfc_op *op,
                        const struct tfc_kattr *attrs, tfc_tensor *const *in)
{
    if (op == &tfc_op_region_enter)
        tfc_cflow_import_enter(g, rec->name, attrs, rec->n_inputs, in);
    else if (op == &tfc_op_region_leave)
        tfc_cflow_import_leave(g, rec->n_inputs, in);
    else if (op == &tfc_op_while || op == &tfc_op_cond)
        tfc_cflow_import_finish(g, rec->name);
    else if (op == &tfc_op_placeholder && g->cur_region && rec->n_inputs == 1)
        tfc_cflow_import_capture(g, rec->name, in[0]);
    else if (op == &tfc_op_placeholder && !rec->n_inputs) {
        tfc_shape s = tfc_shape_of(attrs[SOURCE_SHAPE].n, attrs[SOURCE_SHAPE].v);
        return tfc_cflow_import_input(g, rec->name, &s);
    } else
        return 0;
    return 1;
}

static tfc_status import_plain(tfc_graph *g, const struct tfc_node_record *rec,
                               const struct tfc_op *op, const struct tfc_kattr *attrs,
                               tfc_tensor *const *in);

tfc_status tfc_graph_import_node(tfc_graph *g, const struct tfc_node_record *rec)
{
    if (!g) return TFC_ERR_INVALID_ARGUMENT;
    if (g->status) return g->status;
    const struct tfc_op *op = tfc_op_lookup(rec->op);
    if (!op) op = cflow_op(rec->op);
    if (!op)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': unknown op '%s'", rec->name,
                               rec->op);
    struct tfc_kattr attrs[TFC_MAX_ATTRS];
    char msg[TFC_MSG_LEN];
    tfc_status parsed = tfc_attrs_parse(op, rec->attrs, attrs, msg);
    if (parsed) /* TFC_ERR_DTYPE for an unknown dtype name, as tfc_op gives */
        return tfc_graph_error(g, parsed, "node '%s': %s", rec->name, msg);
    if (rec->n_inputs < 0 || rec->n_inputs > TFC_MAX_OPERANDS)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "node '%s' (%s): %d inputs (at most "
                               "%d)", rec->name, op->name, rec->n_inputs, TFC_MAX_OPERANDS);
    tfc_tensor *in[TFC_MAX_OPERANDS];
    for (int k = 0; k < rec->n_inputs; k++) {
        in[k] = tfc_graph_find(g, rec->inputs[k]);
        if (!in[k])
            return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': input '%s' does not exist",
                                   rec->name, rec->inputs[k]);
    }
    if ((g->cflows || cflow_op(rec->op)) && import_cflow(g, rec, op, attrs, in)) return g->status;
    int source = op == &tfc_op_constant || op == &tfc_op_placeholder || op == &tfc_op_variable;
    if (source && rec->n_inputs) /* their builders take no inputs: they would be dropped */
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "node '%s' (%s): takes 0 inputs, "
                               "got %d", rec->name, op->name, rec->n_inputs);
    int depth = tfc_scope_hide(g); /* stored names are absolute; regions rebuilt push scopes */
    tfc_status st = import_plain(g, rec, op, attrs, in);
    tfc_scope_restore(g, depth);
    return st;
}

/* A record of an ordinary node: its builder, with the stored name. */
static tfc_status import_plain(tfc_graph *g, const struct tfc_node_record *rec,
                               const struct tfc_op *op, const struct tfc_kattr *attrs,
                               tfc_tensor *const *in)
{
    if (op == &tfc_op_constant) {
        tfc_tensor *t = tfc_constant(g, rec->name, rec->value);
        if (t && (tfc_value_dtype(rec->value) != (enum tfc_dtype)attrs[SOURCE_DTYPE].i ||
                  tfc_value_shape(rec->value).rank != attrs[SOURCE_SHAPE].n))
            tfc_graph_error(g, TFC_ERR_SHAPE,
                            "constant '%s': the data does not match its attributes", rec->name);
        return g->status;
    }
    if (op == &tfc_op_placeholder || op == &tfc_op_variable) {
        enum tfc_dtype dtype = (enum tfc_dtype)attrs[SOURCE_DTYPE].i;
        tfc_shape s = tfc_shape_of(attrs[SOURCE_SHAPE].n, attrs[SOURCE_SHAPE].v);
        tfc_tensor *t;
        if (op == &tfc_op_placeholder)
            tfc_placeholder(g, rec->name, dtype, s);
        else if ((t = tfc_variable(g, rec->name, dtype, s, rec->init)) && rec->untrainable)
            tfc_variable_set_trainable(t, 0);
        return g->status;
    }
    tfc_node_build(g, op, rec->name, rec->n_inputs, in, attrs);
    return g->status;
}

tfc_status tfc_graph_import_ctrl(tfc_graph *g, const struct tfc_node_record *rec)
{
    if (!g) return TFC_ERR_INVALID_ARGUMENT;
    tfc_tensor *t = tfc_graph_find(g, rec->name);
    for (int k = 0; t && k < rec->n_ctrl && !g->status; k++) {
        tfc_tensor *dep = tfc_graph_find(g, rec->ctrl[k]);
        if (!dep)
            tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': control input '%s' does not exist",
                            rec->name, rec->ctrl[k]);
        else
            tfc_tensor_add_control_input(t, dep);
    }
    if (!t && !g->status)
        tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s' does not exist", rec->name);
    return g->status;
}

/* Kahn's algorithm over data and control edges: the nodes left with unmet inputs lie on a
 * cycle or after one. Data edges of an imported graph point backwards only, so a cycle always
 * goes through a control edge. */
tfc_status tfc_graph_import_check(tfc_graph *g)
{
    if (!g) return TFC_ERR_INVALID_ARGUMENT;
    if (g->status) return g->status;
    if (tfc_cflow_import_unfinished(g)) return g->status; /* records cut inside a region */
    int n = g->n_nodes, n_edges = 0;
    for (int i = 0; i < n; i++) n_edges += g->nodes[i]->n_inputs + g->nodes[i]->n_ctrl;
    int *indeg = calloc((size_t)n + 1, sizeof *indeg), *start = calloc((size_t)n + 2, sizeof *start);
    int *users = malloc(((size_t)n_edges + 1) * sizeof *users), *ready = malloc(((size_t)n + 1) * sizeof *ready);
    if (!indeg || !start || !users || !ready) {
        free(indeg), free(start), free(users), free(ready);
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "checking the graph for cycles: no memory");
    }
    /* users of node p: users[start[p] .. start[p + 1]) */
    for (int i = 0; i < n; i++) {
        const struct tfc_node *x = g->nodes[i];
        for (int k = 0; k < x->n_inputs; k++) start[x->inputs[k]->node->id + 1]++;
        for (int k = 0; k < x->n_ctrl; k++) start[x->ctrl[k]->id + 1]++;
        indeg[i] = x->n_inputs + x->n_ctrl;
    }
    for (int p = 0; p < n; p++) start[p + 1] += start[p];
    int *fill = ready; /* borrowed as a cursor per node before the queue needs it */
    for (int p = 0; p < n; p++) fill[p] = start[p];
    for (int i = 0; i < n; i++) {
        const struct tfc_node *x = g->nodes[i];
        for (int k = 0; k < x->n_inputs; k++) users[fill[x->inputs[k]->node->id]++] = i;
        for (int k = 0; k < x->n_ctrl; k++) users[fill[x->ctrl[k]->id]++] = i;
    }
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (!indeg[i]) ready[tail++] = i;
    while (head < tail) {
        int p = ready[head++];
        for (int e = start[p]; e < start[p + 1]; e++)
            if (--indeg[users[e]] == 0) ready[tail++] = users[e];
    }
    int culprit = -1;
    for (int i = 0; i < n && culprit < 0 && tail < n; i++)
        if (indeg[i]) culprit = i;
    /* every node left has an input left: n steps back along those lands on the cycle */
    for (int step = 0; culprit >= 0 && step < n; step++) {
        const struct tfc_node *x = g->nodes[culprit];
        int prev = -1;
        for (int k = 0; k < x->n_inputs && prev < 0; k++)
            if (indeg[x->inputs[k]->node->id]) prev = x->inputs[k]->node->id;
        for (int k = 0; k < x->n_ctrl && prev < 0; k++)
            if (indeg[x->ctrl[k]->id]) prev = x->ctrl[k]->id;
        culprit = prev;
    }
    free(indeg), free(start), free(users), free(ready);
    if (tail < n) {
        const struct tfc_node *x = culprit >= 0 ? g->nodes[culprit] : NULL;
        return tfc_graph_error(g, TFC_ERR_CYCLE, "the graph has a cycle through node '%s' (%s): "
                               "a control input that depends on the node it guards",
                               x ? x->name : "?", x ? x->op->name : "?");
    }
    return TFC_OK;
}
