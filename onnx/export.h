/* export.h: the ONNX exporter's private declarations: the state of one export (the ONNX graph
 * being filled, which of our nodes it needs and which tensors are fed), the helpers that add
 * ONNX nodes, attributes and initializers, and the table that maps each of our ops to ONNX
 * nodes at opset 17. */
#ifndef TFC_ONNX_EXPORT_H
#define TFC_ONNX_EXPORT_H

#include <stdint.h>
#include "tfc.h"
#include "../graph/graph.h"
#include "onnx/onnx.pb-c.h"

#define TFC_ONNX_EXPORT_OPSET 17
#define TFC_ONNX_EXPORT_IR_VERSION 8 /* the IR version of ONNX 1.12 (opset 17) */

struct onnx_export {
    tfc_graph *g;
    Onnx__GraphProto *gp;        /* the graph being filled (owned by the model message) */
    size_t cap_node, cap_init;   /* allocated entries of gp->node and gp->initializer */
    const struct tfc_node *node; /* the node being mapped (for messages and fresh names) */
    unsigned char *fed;          /* per node id: 1 when its output 0 is a feed */
    int n_fresh;                 /* fresh value names made so far */
};

/* ---- tensors and value infos (export_tensors.c) ---------------------------------------- */
/* ONNX's TensorProto data type of our dtype. */
int32_t tfc_onnx_elem_type(enum tfc_dtype dt);
/* A TensorProto named name holding v (raw_data, little-endian); NULL when out of memory. */
Onnx__TensorProto *tfc_onnx_tensor_proto(const char *name, const tfc_value *v);
/* A ValueInfoProto for a graph input or output; a -1 dim becomes the symbolic dim "N". */
Onnx__ValueInfoProto *tfc_onnx_value_info(const char *name, enum tfc_dtype dt,
                                          const tfc_shape *shape);

/* ---- nodes, attributes, initializers (export_emit.c) ----------------------------------- */
/* Fails the export with a message on tfc_errmsg() naming the node being mapped. */
tfc_status onnx_export_fail(struct onnx_export *ex, tfc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A fresh value name derived from the node being mapped, into buf (len >= 256). */
const char *onnx_fresh_name(struct onnx_export *ex, const char *what, char *buf, size_t len);
/* Appends a node op_type(inputs) -> outputs (input names may be "" for an absent optional
 * input); NULL after an out-of-memory error. */
Onnx__NodeProto *onnx_emit(struct onnx_export *ex, const char *op_type, int n_in,
                           const char *const *in, int n_out, const char *const *out);
/* Attributes on a node made by onnx_emit (each returns non-zero when out of memory). */
int onnx_set_int(Onnx__NodeProto *n, const char *name, int64_t v);
int onnx_set_float(Onnx__NodeProto *n, const char *name, double v);
int onnx_set_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *v);
int onnx_set_string(Onnx__NodeProto *n, const char *name, const char *v);
int onnx_set_tensor(Onnx__NodeProto *n, const char *name, const tfc_value *v);
/* Adds an initializer named name holding a copy of v. */
tfc_status onnx_add_initializer(struct onnx_export *ex, const char *name, const tfc_value *v);
/* An int64 vector initializer of a fresh name (written into buf, len >= 256). */
tfc_status onnx_const_ints(struct onnx_export *ex, int n, const int64_t *v, char *buf,
                           size_t len);
/* Element i of v set to x converted to v's dtype. */
void onnx_value_set(tfc_value *v, int64_t i, double x);
/* A scalar (rank 0), or a tensor of the given dims filled, of dtype dt holding x. */
tfc_status onnx_const_fill(struct onnx_export *ex, enum tfc_dtype dt, int rank,
                           const int64_t *dims, double x, char *buf, size_t len);

/* ---- the op table (export_ops.c, export_ops_nn.c) -------------------------------------- */
/* An exporter maps one node of ours: in[i] is the ONNX name of input i, out[k] the name its
 * output k must have (NULL when nothing needs that output). */
struct onnx_export_map;
typedef tfc_status (*onnx_exporter)(struct onnx_export *ex, const struct onnx_export_map *e,
                                    const struct tfc_node *n, const char *const *in,
                                    const char *const *out);
struct onnx_export_map {
    const char *op;       /* our op's name */
    onnx_exporter fn;
    const char *onnx_op;  /* the ONNX op type, for the simple exporters */
    unsigned mode_inputs; /* bit i: input i is read at export time only (a mode flag that
                           * must be known, see onnx_known_value) or not at all: what
                           * computes it is left out of the model */
};
/* The entry for our op `op`; NULL when it has no ONNX form. */
const struct onnx_export_map *tfc_onnx_export_find(const char *op);
/* Every op we export, for listing. */
int tfc_onnx_export_count(void);
const char *tfc_onnx_export_op(int i);

/* The value of a tensor known at export time: a constant, or an unfed placeholder with a
 * default (through identities); NULL otherwise. */
const tfc_value *onnx_known_value(const struct onnx_export *ex, const tfc_tensor *t);

/* Our attribute `name` of n (every exporter names attributes its op has; a zero one else). */
static inline const struct tfc_kattr *onnx_ex_attr(const struct tfc_node *n, const char *name)
{
    static const struct tfc_kattr none;
    int i = tfc_attr_index(n->op, name);
    return i >= 0 ? &n->attrs[i] : &none;
}

#define ONNX_EXPORTER(fn)                                                                     \
    tfc_status fn(struct onnx_export *ex, const struct onnx_export_map *e,                    \
                  const struct tfc_node *n, const char *const *in, const char *const *out)
/* export_ops.c: element-wise and array ops */
ONNX_EXPORTER(onnx_ex_simple); ONNX_EXPORTER(onnx_ex_unary_composite);
ONNX_EXPORTER(onnx_ex_not_equal); ONNX_EXPORTER(onnx_ex_cast); ONNX_EXPORTER(onnx_ex_clip);
ONNX_EXPORTER(onnx_ex_alpha); ONNX_EXPORTER(onnx_ex_hard_sigmoid);
ONNX_EXPORTER(onnx_ex_fill_like); ONNX_EXPORTER(onnx_ex_fill);
ONNX_EXPORTER(onnx_ex_reduce); ONNX_EXPORTER(onnx_ex_axis); ONNX_EXPORTER(onnx_ex_argmax);
ONNX_EXPORTER(onnx_ex_reshape); ONNX_EXPORTER(onnx_ex_transpose); ONNX_EXPORTER(onnx_ex_split);
ONNX_EXPORTER(onnx_ex_slice); ONNX_EXPORTER(onnx_ex_one_hot); ONNX_EXPORTER(onnx_ex_like);
/* export_ops_nn.c: matmul, convolution, pooling, padding, normalization, dropout, losses */
ONNX_EXPORTER(onnx_ex_matmul); ONNX_EXPORTER(onnx_ex_batch_matmul); ONNX_EXPORTER(onnx_ex_conv);
ONNX_EXPORTER(onnx_ex_pool); ONNX_EXPORTER(onnx_ex_pad); ONNX_EXPORTER(onnx_ex_batch_norm);
ONNX_EXPORTER(onnx_ex_layer_norm); ONNX_EXPORTER(onnx_ex_dropout); ONNX_EXPORTER(onnx_ex_xent);

#endif
