/* serialize.h: a graph as a list of plain node records, written from the op descriptors'
 * attribute tables (no per-op code), so the store can save a graph and load it back without
 * the C code that built it. */
#ifndef TFC_SERIALIZE_H
#define TFC_SERIALIZE_H

#include "graph.h"

struct tfc_node_record {
    const char *name;
    const char *op;
    int n_inputs;
    const char **inputs;    /* tensor names: "node" or "node:k" */
    int n_ctrl;
    const char **ctrl;      /* node names */
    char attrs[1024];       /* "name=value,..." in the op's attribute order */
    const tfc_value *value; /* constants: the data */
    tfc_init init;          /* variables */
    int untrainable;        /* variables: 1 when left out of the trainable set */
};

/* Fills rec for node i (pointers borrow from the graph; inputs/ctrl arrays are allocated and
 * freed by tfc_node_record_clear). Fails, with its message in tfc_errmsg(), for a node inside a
 * cond or while_loop still being built (TFC_ERR_INVALID_ARGUMENT) or without memory. */
tfc_status tfc_graph_export_node(const tfc_graph *g, int i, struct tfc_node_record *rec);
void tfc_node_record_clear(struct tfc_node_record *rec);
/* Adds the node of rec (its inputs must exist; control inputs are added by
 * tfc_graph_import_ctrl once every node exists). Errors stay on g, naming the node. */
tfc_status tfc_graph_import_node(tfc_graph *g, const struct tfc_node_record *rec);
tfc_status tfc_graph_import_ctrl(tfc_graph *g, const struct tfc_node_record *rec);
/* Once every node and control edge is imported: TFC_ERR_CYCLE (on g, naming a node) when the
 * edges form a cycle, which only control edges can close. */
tfc_status tfc_graph_import_check(tfc_graph *g);
/* Writes node i's attributes as text (the form tfc_op and the store take). */
void tfc_attrs_format(const struct tfc_op *op, const struct tfc_kattr *attrs, char *buf, size_t len);

#endif
