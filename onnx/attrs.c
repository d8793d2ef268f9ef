/* attrs.c: reading ONNX node attributes with defaults, and the "unsupported" error that names
 * the node, its op type and what it asks that we do not do. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "onnx_import.h"

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_i ? a->i : dflt;
}

double onnx_attr_float(const Onnx__NodeProto *n, const char *name, double dflt)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a && a->has_f ? a->f : dflt;
}

const char *onnx_attr_str(const Onnx__NodeProto *n, const char *name, const char *dflt,
                          char *buf, size_t len)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a || !a->has_s) return dflt;
    size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
    memcpy(buf, a->s.data, k);
    buf[k] = 0;
    return buf;
}

int onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *vals, int max)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return -1;
    int k = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
    for (int i = 0; i < k; i++) vals[i] = a->ints[i];
    return a->n_ints > (size_t)max ? -2 : k;
}

tfc_status onnx_unsupported(struct onnx_import *im, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = im->node;
    return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT,
                           "ONNX node '%s' (%s, opset %lld): unsupported: %s",
                           n && n->name ? n->name : "", n ? n->op_type : "?",
                           (long long)im->opset, what);
}
