/* onnx_import.h: the ONNX importer's private declarations: the state of one import (the
 * model's opset, the name table from ONNX value names to our tensors and, where known at import
 * time, their values), attribute readers, the op mapping table and the per-family builders. */
#ifndef TFC_ONNX_IMPORT_H
#define TFC_ONNX_IMPORT_H

#include <stdint.h>
#include "tfc.h"
#include "../graph/graph.h"
#include "onnx/onnx.pb-c.h"

/* One ONNX value name: its tensor, and its data when it is known at import time (initializers,
 * Constant nodes, frozen inputs, folded shapes). */
struct onnx_sym {
    char *name;
    tfc_tensor *tensor;  /* NULL while only the value is known (made on first use) */
    tfc_value *value;    /* NULL: known only when the graph runs */
    int value_borrowed;  /* value is its constant node's (or a parent graph's): not freed here */
};

struct onnx_import {
    tfc_graph *g;
    int64_t opset;            /* the default domain's opset */
    const char *model_dir;    /* external data files are relative to it */
    int n_syms, cap_syms;
    struct onnx_sym *syms;
    const Onnx__NodeProto *node; /* the node being mapped (for messages) */
    tfc_ctx *ctx;             /* made on first need, to fold nodes of known inputs */
    int depth;                /* subgraphs (If/Loop bodies) entered: no folding inside */
};

/* ---- model and tensors (model_read.c, tensor_read.c) ---------------------------------- */
/* Reads and parses path into *out (free with onnx__model_proto__free_unpacked); the message
 * names the file and the cause. */
tfc_status tfc_onnx_model_read(tfc_graph *g, const char *path, Onnx__ModelProto **out);
/* The default-domain opset of m, checked against TFC_ONNX_MAX_OPSET. */
tfc_status tfc_onnx_model_opset(tfc_graph *g, const Onnx__ModelProto *m, int64_t *opset);
/* Our dtype for an ONNX TensorProto data type; -1 when we have none. */
int tfc_onnx_dtype(int32_t onnx_type);
const char *tfc_onnx_dtype_name(int32_t onnx_type);
/* A value from a TensorProto (raw_data, typed fields or an external file under model_dir),
 * sizes checked against the dims before any data is read. what names it in messages. */
tfc_status tfc_onnx_tensor_value(tfc_graph *g, const Onnx__TensorProto *t, const char *model_dir,
                                 const char *what, tfc_value **out);

/* ---- names (symbols.c) ------------------------------------------------------------------ */
struct onnx_sym *onnx_sym_find(struct onnx_import *im, const char *name);
/* Adds name -> (tensor, value); value is taken over. */
tfc_status onnx_sym_add(struct onnx_import *im, const char *name, tfc_tensor *t, tfc_value *v);
/* The tensor of a name (a constant node is made for a known value on first use); NULL after an
 * error naming the node and the input. */
tfc_tensor *onnx_input(struct onnx_import *im, int i);
/* The tensor of entry s (a constant is made for a known value on first use); NULL for NULL. */
tfc_tensor *onnx_sym_tensor(struct onnx_import *im, struct onnx_sym *s);
/* The known value of input i, or NULL when it is absent or not constant. */
const tfc_value *onnx_input_value(struct onnx_import *im, int i);
/* Input i is present (ONNX leaves optional inputs out or names them ""). */
int onnx_has_input(struct onnx_import *im, int i);
/* Integers of a value-dependent input i (axes, shapes, bounds): an error naming the node, the
 * input and the op when it is not constant. *n receives the count (at most max). */
tfc_status onnx_input_ints(struct onnx_import *im, int i, const char *what, int64_t *vals,
                           int max, int *n);
void onnx_syms_free(struct onnx_import *im);
/* A name our graph accepts for an ONNX value name (no ':', ',' or '"'; at most 200 chars). */
void onnx_node_name(const char *onnx_name, char *buf, size_t len);

/* ---- attributes (attrs.c) ---------------------------------------------------------------- */
const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name);
int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt);
double onnx_attr_float(const Onnx__NodeProto *n, const char *name, double dflt);
/* The string attribute, or dflt. */
const char *onnx_attr_str(const Onnx__NodeProto *n, const char *name, const char *dflt,
                          char *buf, size_t len);
/* An ints attribute into vals (at most max); returns the count, -1 when absent. */
int onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *vals, int max);
/* Fails the import with an "unsupported" message naming the node, op and what. */
tfc_status onnx_unsupported(struct onnx_import *im, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- subgraphs (import.c) ------------------------------------------------------------- */
/* Maps a subgraph's initializers (as constants) and nodes into the graph's current region;
 * the names they define stay in im's table until onnx_syms_truncate. im->node is kept. */
tfc_status onnx_map_subgraph(struct onnx_import *im, const Onnx__GraphProto *gp);
/* Forgets the names added after the first n (a subgraph's, when it is left). */
void onnx_syms_truncate(struct onnx_import *im, int n);

/* ---- the op table (op_table.c) and builders ---------------------------------------------- */
/* A builder maps one node: reads its inputs and attributes, builds our ops and sets
 * outs[k] for each ONNX output k it produces (NULL: not produced), or out_values[k] for a
 * value computed at import time (taken over). */
typedef tfc_status (*onnx_builder)(struct onnx_import *im, tfc_tensor **outs,
                                   tfc_value **out_values);
struct onnx_op_map {
    const char *op_type;
    int64_t since;        /* the first opset this entry covers */
    onnx_builder build;
};
/* The entry for op_type at the model's opset; NULL when we map no such op. */
const struct onnx_op_map *tfc_onnx_op_find(const char *op_type, int64_t opset);
/* Every op type we map, for listing (the README and tests). */
int tfc_onnx_op_count(void);
const char *tfc_onnx_op_type(int i);

#define ONNX_BUILDER(fn) \
    tfc_status fn(struct onnx_import *im, tfc_tensor **outs, tfc_value **out_values)
/* ops_math.c */
ONNX_BUILDER(onnx_unary); ONNX_BUILDER(onnx_binary); ONNX_BUILDER(onnx_variadic);
ONNX_BUILDER(onnx_cast); ONNX_BUILDER(onnx_clip); ONNX_BUILDER(onnx_where);
ONNX_BUILDER(onnx_activation); ONNX_BUILDER(onnx_prelu);
ONNX_BUILDER(onnx_cast_like); ONNX_BUILDER(onnx_composite);
/* ops_nn.c */
ONNX_BUILDER(onnx_conv); ONNX_BUILDER(onnx_conv_transpose); ONNX_BUILDER(onnx_pool);
ONNX_BUILDER(onnx_global_pool); ONNX_BUILDER(onnx_batch_norm); ONNX_BUILDER(onnx_softmax);
ONNX_BUILDER(onnx_dropout); ONNX_BUILDER(onnx_gemm); ONNX_BUILDER(onnx_matmul);
ONNX_BUILDER(onnx_layer_norm); ONNX_BUILDER(onnx_instance_norm); ONNX_BUILDER(onnx_lrn);
ONNX_BUILDER(onnx_depth_to_space);
/* ops_shape.c and ops_index.c */
ONNX_BUILDER(onnx_reshape); ONNX_BUILDER(onnx_flatten); ONNX_BUILDER(onnx_squeeze);
ONNX_BUILDER(onnx_unsqueeze); ONNX_BUILDER(onnx_transpose); ONNX_BUILDER(onnx_concat);
ONNX_BUILDER(onnx_split); ONNX_BUILDER(onnx_slice); ONNX_BUILDER(onnx_gather);
ONNX_BUILDER(onnx_expand); ONNX_BUILDER(onnx_pad); ONNX_BUILDER(onnx_one_hot);
ONNX_BUILDER(onnx_identity); ONNX_BUILDER(onnx_tile); ONNX_BUILDER(onnx_hardmax);
ONNX_BUILDER(onnx_gather_elements); ONNX_BUILDER(onnx_trilu); ONNX_BUILDER(onnx_compress);
ONNX_BUILDER(onnx_gather_nd); ONNX_BUILDER(onnx_scatter_elements);
ONNX_BUILDER(onnx_scatter_nd);
ONNX_BUILDER(onnx_cumsum); ONNX_BUILDER(onnx_mod); ONNX_BUILDER(onnx_eye_like);
/* ops_control.c */
ONNX_BUILDER(onnx_if); ONNX_BUILDER(onnx_loop);
/* ops_rnn.c */
ONNX_BUILDER(onnx_rnn);
/* ops_resize.c */
ONNX_BUILDER(onnx_resize);
/* ops_loss.c */
ONNX_BUILDER(onnx_nll_loss); ONNX_BUILDER(onnx_softmax_cross_entropy);
/* ops_reduce.c */
ONNX_BUILDER(onnx_reduce); ONNX_BUILDER(onnx_argmax); ONNX_BUILDER(onnx_einsum);
/* fold.c: ops computed at import time from static shapes or constant inputs */
ONNX_BUILDER(onnx_constant); ONNX_BUILDER(onnx_shape); ONNX_BUILDER(onnx_size);
ONNX_BUILDER(onnx_constant_of_shape); ONNX_BUILDER(onnx_range); ONNX_BUILDER(onnx_window);
/* Every present input of the node being mapped is known (and there is one at least). */
int onnx_inputs_known(struct onnx_import *im);
/* Computes the node's built outputs (outs[k] without vals[k]) into vals now. */
tfc_status onnx_fold_outputs(struct onnx_import *im, tfc_tensor **outs, tfc_value **vals);

/* x with a dim of size 1 inserted at each of the axes (of the result; ops_shape.c). */
tfc_tensor *onnx_unsqueeze_axes(tfc_graph *g, tfc_tensor *x, int n, const int64_t *axes);
/* x gathered along axis at idx (ONNX Gather's result shape; ops_index.c). */
tfc_tensor *onnx_gather_axis(tfc_graph *g, tfc_tensor *x, tfc_tensor *idx, int axis);
/* The rank of a tensor. */
static inline int onnx_rank(const tfc_tensor *t) { return tfc_tensor_shape(t).rank; }

#endif
