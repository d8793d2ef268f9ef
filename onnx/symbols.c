/* symbols.c: the import's name table: each ONNX value name maps to our tensor and, when it is
 * known at import time, to its value, which value-dependent arguments (shapes, axes, bounds)
 * are read from. A known value gets its constant node only when an op needs it as a tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

struct onnx_sym *onnx_sym_find(struct onnx_import *im, const char *name)
{
    for (int i = im->n_syms - 1; i >= 0; i--) /* later definitions shadow (subgraphs later) */
        if (!strcmp(im->syms[i].name, name)) return &im->syms[i];
    return NULL;
}

tfc_status onnx_sym_add(struct onnx_import *im, const char *name, tfc_tensor *t, tfc_value *v)
{
    if (im->n_syms == im->cap_syms) {
        int cap = im->cap_syms ? 2 * im->cap_syms : 64;
        struct onnx_sym *p = realloc(im->syms, (size_t)cap * sizeof *p);
        if (!p) {
            tfc_value_destroy(v);
            return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
        }
        im->syms = p;
        im->cap_syms = cap;
    }
    char *copy = strdup(name);
    if (!copy) {
        tfc_value_destroy(v);
        return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    }
    im->syms[im->n_syms++] = (struct onnx_sym){copy, t, v};
    return TFC_OK;
}

void onnx_syms_truncate(struct onnx_import *im, int n)
{
    for (int i = n; i < im->n_syms; i++) {
        free(im->syms[i].name);
        if (!im->syms[i].value_borrowed) tfc_value_destroy(im->syms[i].value);
    }
    if (n < im->n_syms) im->n_syms = n;
}

void onnx_syms_free(struct onnx_import *im)
{
    onnx_syms_truncate(im, 0);
    free(im->syms);
    im->syms = NULL;
    im->n_syms = im->cap_syms = 0;
}

int onnx_has_input(struct onnx_import *im, int i)
{
    const Onnx__NodeProto *n = im->node;
    return i >= 0 && (size_t)i < n->n_input && n->input[i] && n->input[i][0];
}

void onnx_node_name(const char *onnx_name, char *buf, size_t len)
{
    snprintf(buf, len < 201 ? len : 201, "%s", onnx_name); /* our names: 1-200 characters */
    for (char *p = buf; *p; p++)
        if (*p == ':' || *p == ',' || *p == '"') *p = '_'; /* not allowed in ours */
}

tfc_tensor *onnx_input(struct onnx_import *im, int i)
{
    const Onnx__NodeProto *n = im->node;
    if (!onnx_has_input(im, i))
        return tfc_graph_fail(im->g, TFC_ERR_INVALID_ARGUMENT,
                              "ONNX node '%s' (%s): input %d is missing", n->name, n->op_type, i);
    struct onnx_sym *s = onnx_sym_find(im, n->input[i]);
    if (!s)
        return tfc_graph_fail(im->g, TFC_ERR_NOT_FOUND,
                              "ONNX node '%s' (%s): input %d '%s' is no graph input, initializer "
                              "or output of an earlier node", n->name, n->op_type, i,
                              n->input[i]);
    return onnx_sym_tensor(im, s);
}

/* A known value's constant is made where it is first needed, even inside a region: constants
 * are the session's state, usable in every region. The node takes the value (a large model's
 * weights are not copied again) and the symbol keeps reading it; a borrowed one is copied. */
tfc_tensor *onnx_sym_tensor(struct onnx_import *im, struct onnx_sym *s)
{
    if (!s) return NULL;
    if (!s->tensor && s->value) {
        char name[256];
        onnx_node_name(s->name, name, sizeof name);
        const char *use = tfc_graph_find(im->g, name) ? NULL : name; /* taken: a generated one */
        if (s->value_borrowed)
            s->tensor = tfc_constant(im->g, use, s->value);
        else if ((s->tensor = tfc_constant_take(im->g, use, s->value)))
            s->value_borrowed = 1;
    }
    return s->tensor;
}

const tfc_value *onnx_input_value(struct onnx_import *im, int i)
{
    if (!onnx_has_input(im, i)) return NULL;
    struct onnx_sym *s = onnx_sym_find(im, im->node->input[i]);
    return s ? s->value : NULL;
}

tfc_status onnx_input_ints(struct onnx_import *im, int i, const char *what, int64_t *vals,
                           int max, int *n)
{
    const Onnx__NodeProto *nd = im->node;
    const tfc_value *v = onnx_input_value(im, i);
    if (!v)
        return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX node '%s' (%s): input %d '%s' (%s) must be known at import "
                               "time (an initializer, a Constant, or a shape computed from "
                               "static shapes), but it is computed when the graph runs%s",
                               nd->name, nd->op_type, i, onnx_has_input(im, i) ? nd->input[i] : "",
                               what, im->depth ? " (unsupported inside an If or Loop subgraph, "
                               "where nothing is folded: only constants are known there)" : "");
    enum tfc_dtype dt = tfc_value_dtype(v);
    if (dt != TFC_INT64 && dt != TFC_INT32)
        return tfc_graph_error(im->g, TFC_ERR_DTYPE, "ONNX node '%s' (%s): input %d (%s) must be "
                               "int64 or int32, not %s", nd->name, nd->op_type, i, what,
                               tfc_dtype_name(dt));
    int64_t cnt = tfc_value_numel(v);
    if (cnt > max)
        return tfc_graph_error(im->g, TFC_ERR_SHAPE, "ONNX node '%s' (%s): input %d (%s) has %lld "
                               "values, at most %d are allowed", nd->name, nd->op_type, i, what,
                               (long long)cnt, max);
    for (int64_t k = 0; k < cnt; k++) vals[k] = (int64_t)tfc_value_get(v, k);
    if (dt == TFC_INT64 && cnt > 0) memcpy(vals, tfc_value_cdata(v), (size_t)cnt * sizeof *vals);
    *n = (int)cnt;
    return TFC_OK;
}
