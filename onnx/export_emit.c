/* export_emit.c: what the op exporters build with: ONNX nodes appended to the graph being
 * written, their attributes, initializers (constants the mapping needs: shapes, axes, scalars),
 * fresh value names, and the export's error path (messages on tfc_errmsg() naming our node). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"

tfc_status onnx_export_fail(struct onnx_export *ex, tfc_status st, const char *fmt, ...)
{
    char what[TFC_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (ex->node)
        return tfc_fail_global(st, "ONNX export: node '%.150s' (op %s): %s", ex->node->name,
                               ex->node->op->name, what);
    return tfc_fail_global(st, "ONNX export: %s", what);
}

static tfc_status oom(struct onnx_export *ex)
{
    return onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
}

const char *onnx_fresh_name(struct onnx_export *ex, const char *what, char *buf, size_t len)
{
    /* '#' never appears in the names our graph gives (nor in the importer's) */
    snprintf(buf, len, "%.180s#%s%d", ex->node ? ex->node->name : "export", what,
             ex->n_fresh++);
    return buf;
}

/* Grows an array of pointers by one slot. */
static int push(void ***arr, size_t *n, size_t *cap, void *item)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void **p = realloc(*arr, c * sizeof *p);
        if (!p) return -1;
        *arr = p, *cap = c;
    }
    (*arr)[(*n)++] = item;
    return 0;
}

static char **dup_names(int n, const char *const *names)
{
    char **a = calloc((size_t)(n ? n : 1), sizeof *a);
    for (int i = 0; a && i < n; i++)
        if (!(a[i] = strdup(names[i] ? names[i] : ""))) {
            while (i--) free(a[i]);
            free(a);
            return NULL;
        }
    return a;
}

Onnx__NodeProto *onnx_emit(struct onnx_export *ex, const char *op_type, int n_in,
                           const char *const *in, int n_out, const char *const *out)
{
    Onnx__NodeProto *nd = malloc(sizeof *nd);
    if (!nd) return oom(ex), NULL;
    onnx__node_proto__init(nd);
    char name[256];
    nd->op_type = strdup(op_type);
    nd->name = strdup(onnx_fresh_name(ex, op_type, name, sizeof name));
    nd->input = dup_names(n_in, in);
    nd->output = dup_names(n_out, out);
    if (nd->input) nd->n_input = (size_t)n_in;
    if (nd->output) nd->n_output = (size_t)n_out;
    if (!nd->op_type || !nd->name || !nd->input || !nd->output ||
        push((void ***)&ex->gp->node, &ex->gp->n_node, &ex->cap_node, nd)) {
        onnx__node_proto__free_unpacked(nd, NULL);
        return oom(ex), NULL;
    }
    return nd;
}

/* A new attribute on n (NULL when out of memory). */
static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name,
                                  Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = malloc(sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    Onnx__AttributeProto **p = realloc(n->attribute, (n->n_attribute + 1) * sizeof *p);
    if (p) n->attribute = p;
    if (!p || !(a->name = strdup(name))) {
        free(a);
        return NULL;
    }
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

int onnx_set_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a) return -1;
    a->has_i = 1;
    a->i = v;
    return 0;
}

int onnx_set_float(Onnx__NodeProto *n, const char *name, double v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a) return -1;
    a->has_f = 1;
    a->f = (float)v;
    return 0;
}

int onnx_set_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    if (!a || !(a->ints = malloc(sizeof *a->ints * (size_t)(count ? count : 1)))) return -1;
    a->n_ints = (size_t)count;
    memcpy(a->ints, v, sizeof *a->ints * (size_t)count);
    return 0;
}

int onnx_set_string(Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a || !(a->s.data = (uint8_t *)strdup(v))) return -1;
    a->has_s = 1;
    a->s.len = strlen(v);
    return 0;
}

int onnx_set_tensor(Onnx__NodeProto *n, const char *name, const tfc_value *v)
{
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    return a && (a->t = tfc_onnx_tensor_proto("value", v)) ? 0 : -1;
}

tfc_status onnx_add_initializer(struct onnx_export *ex, const char *name, const tfc_value *v)
{
    Onnx__TensorProto *t = tfc_onnx_tensor_proto(name, v);
    if (!t) return oom(ex);
    if (push((void ***)&ex->gp->initializer, &ex->gp->n_initializer, &ex->cap_init, t)) {
        onnx__tensor_proto__free_unpacked(t, NULL);
        return oom(ex);
    }
    return TFC_OK;
}

tfc_status onnx_const_ints(struct onnx_export *ex, int n, const int64_t *v, char *buf,
                           size_t len)
{
    tfc_value *val;
    int64_t dim = n;
    if (tfc_value_from_data(TFC_INT64, tfc_shape_of(1, &dim), v, &val)) return oom(ex);
    tfc_status st = onnx_add_initializer(ex, onnx_fresh_name(ex, "ints", buf, len), val);
    tfc_value_destroy(val);
    return st;
}

void onnx_value_set(tfc_value *v, int64_t i, double x)
{
    void *p = tfc_value_data(v);
    switch (tfc_value_dtype(v)) {
    case TFC_FLOAT32: ((float *)p)[i] = (float)x; break;
    case TFC_FLOAT64: ((double *)p)[i] = x; break;
    case TFC_INT32: ((int32_t *)p)[i] = (int32_t)x; break;
    case TFC_INT64: ((int64_t *)p)[i] = (int64_t)x; break;
    case TFC_UINT8: case TFC_BOOL: ((uint8_t *)p)[i] = (uint8_t)x; break;
    default: break; /* no other dtype reaches here */
    }
}

tfc_status onnx_const_fill(struct onnx_export *ex, enum tfc_dtype dt, int rank,
                           const int64_t *dims, double x, char *buf, size_t len)
{
    tfc_value *val;
    if (tfc_value_create(dt, tfc_shape_of(rank, dims), &val)) return oom(ex);
    for (int64_t i = 0; i < tfc_value_numel(val); i++) onnx_value_set(val, i, x);
    tfc_status st = onnx_add_initializer(ex, onnx_fresh_name(ex, "const", buf, len), val);
    tfc_value_destroy(val);
    return st;
}

const tfc_value *onnx_known_value(const struct onnx_export *ex, const tfc_tensor *t)
{
    while (t && !ex->fed[t->node->id]) {
        const char *op = t->node->op->name;
        if (!strcmp(op, "constant")) return t->node->value;
        if (strcmp(op, "placeholder_with_default") && strcmp(op, "identity") &&
            strcmp(op, "stop_gradient"))
            return NULL;
        t = t->node->inputs[0];
    }
    return NULL;
}
