/* serialize.c: graph <-> node records, driven by each op's attribute table. Floats are
 * written with 17 significant digits so that a saved graph loads back bit for bit. */
#include <stdlib.h>
#include <string.h>
#include "serialize.h"

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
    rec->name = n->name;
    rec->op = n->op->name;
    rec->n_inputs = n->n_inputs;
    rec->n_ctrl = n->n_ctrl;
    rec->inputs = calloc((size_t)n->n_inputs + 1, sizeof *rec->inputs);
    rec->ctrl = calloc((size_t)n->n_ctrl + 1, sizeof *rec->ctrl);
    if (!rec->inputs || !rec->ctrl) {
        tfc_node_record_clear(rec);
        return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "export: no memory");
    }
    for (int k = 0; k < n->n_inputs; k++) rec->inputs[k] = n->inputs[k]->name;
    for (int k = 0; k < n->n_ctrl; k++) rec->ctrl[k] = n->ctrl[k]->name;
    tfc_attrs_format(n->op, n->attrs, rec->attrs, sizeof rec->attrs);
    rec->value = n->value;
    rec->init = n->init;
    return TFC_OK;
}

void tfc_node_record_clear(struct tfc_node_record *rec)
{
    free(rec->inputs);
    free(rec->ctrl);
    rec->inputs = rec->ctrl = NULL;
}

tfc_status tfc_graph_import_node(tfc_graph *g, const struct tfc_node_record *rec)
{
    if (!g) return TFC_ERR_INVALID_ARGUMENT;
    if (g->status) return g->status;
    const struct tfc_op *op = tfc_op_lookup(rec->op);
    if (!op)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': unknown op '%s'", rec->name,
                               rec->op);
    struct tfc_kattr attrs[TFC_MAX_ATTRS];
    char msg[TFC_MSG_LEN];
    if (tfc_attrs_parse(op, rec->attrs, attrs, msg))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "node '%s': %s", rec->name, msg);
    if (rec->n_inputs < 0 || rec->n_inputs > TFC_MAX_OPERANDS)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "node '%s': %d inputs", rec->name,
                               rec->n_inputs);
    tfc_tensor *in[TFC_MAX_OPERANDS];
    for (int k = 0; k < rec->n_inputs; k++) {
        in[k] = tfc_graph_find(g, rec->inputs[k]);
        if (!in[k])
            return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "node '%s': input '%s' does not exist",
                                   rec->name, rec->inputs[k]);
    }
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
        if (op == &tfc_op_placeholder)
            tfc_placeholder(g, rec->name, dtype, s);
        else
            tfc_variable(g, rec->name, dtype, s, rec->init);
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
