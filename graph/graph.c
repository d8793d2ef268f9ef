/* graph.c: the graph arena. A graph owns its nodes and tensors; nodes are built through one
 * function that checks inputs, parses attributes from the op's table, names the node and infers
 * its outputs. Build errors are sticky on the graph and name the node. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "graph.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static struct tfc_node *name_lookup(const tfc_graph *g, const char *name)
{
    if (!g->names_cap) return NULL;
    size_t mask = (size_t)g->names_cap - 1;
    for (size_t i = hash_str(name) & mask;; i = (i + 1) & mask) {
        struct tfc_node *n = g->names[i];
        if (!n) return NULL;
        if (strcmp(n->name, name) == 0) return n;
    }
}

/* Room in the name table for one name more than the graph has nodes; nonzero when out of
 * memory. */
static int name_reserve(tfc_graph *g)
{
    if ((g->n_nodes + 1) * 2 <= g->names_cap) return 0; /* keep the load under one half */
    int cap = g->names_cap ? g->names_cap * 2 : 64;
    struct tfc_node **t = calloc((size_t)cap, sizeof *t);
    if (!t) return -1;
    for (int i = 0; i < g->names_cap; i++) {
        struct tfc_node *n = g->names[i];
        if (!n) continue;
        size_t j = hash_str(n->name) & (size_t)(cap - 1);
        while (t[j]) j = (j + 1) & (size_t)(cap - 1);
        t[j] = n;
    }
    free(g->names);
    g->names = t;
    g->names_cap = cap;
    return 0;
}

static int name_insert(tfc_graph *g, struct tfc_node *node)
{
    if (name_reserve(g)) return -1;
    size_t mask = (size_t)g->names_cap - 1, i = hash_str(node->name) & mask;
    while (g->names[i]) i = (i + 1) & mask;
    g->names[i] = node;
    return 0;
}

static void name_remove(tfc_graph *g, struct tfc_node *node)
{
    /* rebuild-free deletion for linear probing: re-insert the cluster after the slot */
    size_t mask = (size_t)g->names_cap - 1, i = hash_str(node->name) & mask;
    while (g->names[i] != node) i = (i + 1) & mask;
    g->names[i] = NULL;
    for (size_t j = (i + 1) & mask; g->names[j]; j = (j + 1) & mask) {
        struct tfc_node *n = g->names[j];
        g->names[j] = NULL;
        size_t k = hash_str(n->name) & mask;
        while (g->names[k]) k = (k + 1) & mask;
        g->names[k] = n;
    }
}

tfc_status tfc_graph_create(tfc_graph **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "graph_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "graph_create: no memory");
    return TFC_OK;
}

static void node_free(struct tfc_node *n)
{
    for (int i = 0; i < n->n_outputs; i++) free(n->outputs[i].name);
    free(n->outputs);
    free(n->inputs);
    free(n->ctrl);
    free(n->name);
    tfc_value_destroy(n->value);
    free(n);
}

void tfc_graph_destroy(tfc_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) node_free(g->nodes[i]);
    free(g->nodes);
    free(g->names);
    free(g->dev_scope);
    for (int i = 0; i < g->n_scope; i++) free(g->scopes[i]);
    free(g->scopes);
    if (g->cflows_free) g->cflows_free(g);
    for (int i = 0; i < g->n_regions; i++) {
        free(g->regions[i].cap_outer);
        free(g->regions[i].cap_inner);
    }
    free(g->regions);
    free(g);
}

tfc_status tfc_graph_status(const tfc_graph *g)
{
    return g ? g->status : TFC_ERR_INVALID_ARGUMENT;
}

const char *tfc_graph_errmsg(const tfc_graph *g)
{
    return g ? g->msg : "graph is NULL";
}

void tfc_graph_clear_error(tfc_graph *g)
{
    if (!g) return;
    g->status = TFC_OK;
    g->msg[0] = 0;
}

void tfc_graph_set_seed(tfc_graph *g, uint64_t seed)
{
    if (g) g->seed = seed;
}

int tfc_graph_num_nodes(const tfc_graph *g)
{
    return g ? g->n_nodes : 0;
}

/* The first error stays on g: later ones are mostly its consequences. */
static void record(tfc_graph *g, tfc_status status, const char *fmt, va_list ap)
{
    if (g && !g->status) g->status = tfc_vfail(g->msg, status, fmt, ap);
}

tfc_status tfc_graph_error(tfc_graph *g, tfc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(g, status, fmt, ap);
    va_end(ap);
    return status;
}

void *tfc_graph_fail(tfc_graph *g, tfc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(g, status, fmt, ap);
    va_end(ap);
    return NULL;
}

tfc_tensor *tfc_graph_find(tfc_graph *g, const char *name)
{
    if (!g || !name) return NULL;
    char base[256];
    const char *colon = strrchr(name, ':');
    int index = 0;
    if (colon) {
        /* digits only: "x:", "x:+1", "x: 1" and "x:4294967296" (0 in 32 bits) name nothing */
        if (colon == name || !colon[1] || (size_t)(colon - name) >= sizeof base) return NULL;
        for (const char *d = colon + 1; *d; d++) {
            if (*d < '0' || *d > '9' || index > TFC_MAX_OPERANDS) return NULL;
            index = index * 10 + (*d - '0');
        }
        memcpy(base, name, (size_t)(colon - name));
        base[colon - name] = 0;
        name = base;
    }
    struct tfc_node *n = name_lookup(g, name);
    if (!n || index < 0 || index >= n->n_outputs) return NULL;
    return &n->outputs[index];
}

/* ---- tensors --------------------------------------------------------------------------- */

enum tfc_dtype tfc_tensor_dtype(const tfc_tensor *t) { return t ? t->desc.dtype : TFC_FLOAT32; }

tfc_shape tfc_tensor_shape(const tfc_tensor *t)
{
    return t ? t->desc.shape : tfc_shape_of(0, NULL);
}

const char *tfc_tensor_name(const tfc_tensor *t) { return t ? t->name : "(null)"; }

const char *tfc_tensor_op(const tfc_tensor *t) { return t ? t->node->op->name : "(null)"; }

static char *output_name(const char *node, int index)
{
    size_t len = strlen(node) + 16;
    char *s = malloc(len);
    if (!s) return NULL;
    if (index == 0)
        snprintf(s, len, "%s", node);
    else
        snprintf(s, len, "%s:%d", node, index);
    return s;
}

static int valid_name(const char *name)
{
    if (!*name || strlen(name) > 200) return 0;
    for (const char *p = name; *p; p++)
        if (*p == ':' || *p == ',' || *p == '\n' || *p == '"') return 0;
    return 1;
}

tfc_status tfc_tensor_set_name(tfc_tensor *t, const char *name)
{
    if (!t || !name)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_name: tensor or name is NULL");
    struct tfc_node *n = t->node;
    tfc_graph *g = n->graph;
    if (!valid_name(name))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s': invalid name '%s' (1-200 characters, no ':' ',' '\"')",
                               n->name, name);
    struct tfc_node *other = name_lookup(g, name);
    if (other == n) return TFC_OK;
    if (other)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s': name '%s' is already used", n->name, name);
    /* everything that can fail comes before the node changes */
    char *copy = strdup(name);
    char **onames = calloc((size_t)n->n_outputs, sizeof *onames);
    int ok = copy && onames && !name_reserve(g);
    for (int i = 0; ok && i < n->n_outputs; i++) ok = (onames[i] = output_name(name, i)) != NULL;
    if (!ok) {
        for (int i = 0; onames && i < n->n_outputs; i++) free(onames[i]);
        free(onames);
        free(copy);
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "node '%s': no memory to rename",
                               n->name);
    }
    name_remove(g, n);
    free(n->name);
    n->name = copy;
    for (int i = 0; i < n->n_outputs; i++) {
        free(n->outputs[i].name);
        n->outputs[i].name = onames[i];
    }
    free(onames);
    if (TFC_CHECK(name_insert(g, n) == 0, tfc_graph_error, g)) /* it has room: reserved */
        return TFC_ERR_INTERNAL;
    return TFC_OK;
}

tfc_status tfc_tensor_add_control_input(tfc_tensor *t, tfc_tensor *dep)
{
    if (!t || !dep)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "add_control_input: NULL tensor");
    struct tfc_node *n = t->node;
    tfc_graph *g = n->graph;
    if (dep->node->graph != g)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s': control input '%s' belongs to another graph", n->name,
                               dep->name);
    if (n->n_ctrl == n->cap_ctrl) {
        int cap = n->cap_ctrl ? n->cap_ctrl * 2 : 4;
        struct tfc_node **c = realloc(n->ctrl, (size_t)cap * sizeof *c);
        if (!c) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "node '%s': no memory", n->name);
        n->ctrl = c;
        n->cap_ctrl = cap;
    }
    n->ctrl[n->n_ctrl++] = dep->node;
    g->version++; /* plans built before no longer match */
    return TFC_OK;
}

/* ---- attributes ------------------------------------------------------------------------ */

int tfc_attr_index(const struct tfc_op *op, const char *name)
{
    for (int i = 0; i < op->n_attrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0) return i;
    return -1;
}

void tfc_attrs_default(const struct tfc_op *op, struct tfc_kattr *attrs)
{
    memset(attrs, 0, sizeof(struct tfc_kattr) * TFC_MAX_ATTRS);
    for (int i = 0; i < op->n_attrs; i++) {
        double d = op->attrs[i].def;
        /* the integer view of a float default; clip's -inf and inf bounds have none (their
         * conversion is undefined behaviour) */
        attrs[i].i = d > -0x1p63 && d < 0x1p63 ? (int64_t)d : 0;
        attrs[i].f = d;
    }
}

/* An integer at *p: 0, -1 when there is none, -2 when it is outside int64 (strtoll would
 * clamp it silently). */
static int parse_int(const char **p, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(*p, &end, 10);
    if (end == *p) return -1;
    if (errno == ERANGE) return -2;
    *p = end;
    *out = v;
    return 0;
}

/* The text of the number at p, for a message (up to the next ',', ']' or blank). */
static int number_len(const char *p)
{
    int n = 0;
    while (p[n] && p[n] != ',' && p[n] != ']' && p[n] != ' ' && n < 40) n++;
    return n;
}

/* The name before the '=' at *p (trailing blanks dropped) and its index in op's table; *p moves
 * past the '=' and the blanks after it. */
static tfc_status parse_name(const struct tfc_op *op, const char *text, const char **p,
                             char *name, size_t name_size, int *idx, char *msg)
{
    const char *eq = strchr(*p, '=');
    if (!eq || eq == *p)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "attributes \"%s\": expected name=value at \"%s\"", text, *p);
    size_t len = (size_t)(eq - *p);
    while (len && (*p)[len - 1] == ' ') len--;
    if (len >= name_size)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "attribute name too long");
    memcpy(name, *p, len);
    name[len] = 0;
    *idx = tfc_attr_index(op, name);
    if (*idx < 0)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "op '%s' has no attribute '%s'",
                        op->name, name);
    *p = eq + 1;
    while (**p == ' ') (*p)++;
    return TFC_OK;
}

/* A dtype name, up to the next ',' or blank. */
static tfc_status parse_dtype_attr(const char **p, struct tfc_kattr *a, const char *name,
                                   char *msg)
{
    char word[32];
    size_t n = 0;
    while ((*p)[n] && (*p)[n] != ',' && (*p)[n] != ' ' && n + 1 < sizeof word) {
        word[n] = (*p)[n];
        n++;
    }
    word[n] = 0;
    int dt = tfc_dtype_parse(word);
    if (dt < 0)
        return tfc_fail(msg, TFC_ERR_DTYPE, "attribute '%s': unknown dtype '%s'", name, word);
    a->i = dt;
    *p += n;
    return TFC_OK;
}

/* A list like [0, 1, 2] of at most TFC_MAX_RANK integers. */
static tfc_status parse_ints_attr(const struct tfc_op *op, const char **p, struct tfc_kattr *a,
                                  const char *name, char *msg)
{
    if (**p != '[')
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "attribute '%s' of op '%s' needs a list like [0,1]", name, op->name);
    (*p)++;
    a->n = 0;
    while (**p == ' ') (*p)++;
    while (**p != ']') {
        if (a->n == TFC_MAX_RANK)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s': bad list (at most %d integers)", name, TFC_MAX_RANK);
        int rc = parse_int(p, &a->v[a->n]);
        if (rc == -2)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s': %.*s is outside int64", name, number_len(*p), *p);
        if (rc)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s': bad list at \"%s\" (integers in [], at most %d)",
                            name, *p, TFC_MAX_RANK);
        a->n++;
        while (**p == ' ' || **p == ',') (*p)++;
        if (!**p)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "attribute '%s': missing ']'", name);
    }
    (*p)++;
    return TFC_OK;
}

/* The value at *p of attribute idx (called name), as its type in op's table reads it. */
static tfc_status parse_value(const struct tfc_op *op, int idx, const char *name, const char **p,
                              struct tfc_kattr *a, char *msg)
{
    switch (op->attrs[idx].type) {
    case TFC_ATTR_INT: {
        int rc = parse_int(p, &a->i);
        if (rc == -2)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s' of op '%s': %.*s is outside int64", name, op->name,
                            number_len(*p), *p);
        if (rc)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s' of op '%s' needs an integer", name, op->name);
        a->f = (double)a->i;
        return TFC_OK;
    }
    case TFC_ATTR_FLOAT: {
        char *end;
        a->f = strtod(*p, &end);
        if (end == *p)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s' of op '%s' needs a number", name, op->name);
        *p = end;
        return TFC_OK;
    }
    case TFC_ATTR_DTYPE: return parse_dtype_attr(p, a, name, msg);
    case TFC_ATTR_INTS: return parse_ints_attr(op, p, a, name, msg);
    }
    return TFC_OK;
}

tfc_status tfc_attrs_parse(const struct tfc_op *op, const char *text, struct tfc_kattr *attrs,
                           char *msg)
{
    tfc_attrs_default(op, attrs);
    if (!text) return TFC_OK;
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        char name[64];
        int idx;
        tfc_status st = parse_name(op, text, &p, name, sizeof name, &idx, msg);
        if (!st) st = parse_value(op, idx, name, &p, &attrs[idx], msg);
        if (st) return st;
        while (*p == ' ') p++;
        if (*p && *p != ',')
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "attribute '%s' of op '%s': unexpected \"%s\"", name, op->name, p);
    }
    return TFC_OK;
}

/* ---- nodes ----------------------------------------------------------------------------- */

/* Checks a node's inputs and name before anything is allocated, and copies the inputs'
 * descriptions into in. label names the node in messages (its name, else its op's). */
static tfc_status check_inputs(tfc_graph *g, const struct tfc_op *op, const char *label,
                               const char *name, int n_inputs, tfc_tensor *const *inputs,
                               struct tfc_desc *in)
{
    if (op->flags & TFC_OP_VARIADIC) {
        if (n_inputs < 1 || n_inputs > TFC_MAX_OPERANDS)
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "node '%s' (%s): takes 1 to %d inputs, got %d", label,
                                   op->name, TFC_MAX_OPERANDS, n_inputs);
    } else if (n_inputs != op->n_inputs) {
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s' (%s): takes %d inputs, got %d", label, op->name,
                               op->n_inputs, n_inputs);
    }
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs || !inputs[i])
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "node '%s' (%s): input %d is NULL", label, op->name, i);
        if (inputs[i]->node->graph != g)
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "node '%s' (%s): input %d ('%s') belongs to another graph",
                                   label, op->name, i, inputs[i]->name);
        in[i] = inputs[i]->desc;
    }
    for (int i = 0; i < op->n_state; i++)
        if (!(inputs[i]->node->op->flags & TFC_OP_VARIABLE))
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "node '%s' (%s): input %d ('%s') must be a variable", label,
                                   op->name, i, inputs[i]->name);
    if (name && !valid_name(name))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "node '%s' (%s): invalid name",
                               label, op->name);
    if (name && name_lookup(g, name))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s' (%s): name is already used", name, op->name);
    return TFC_OK;
}

/* The node's outputs: how many (*n_out) and their descriptions (out), from the op. */
static tfc_status infer_outputs(tfc_graph *g, const struct tfc_op *op, const char *label,
                                int n_inputs, const struct tfc_desc *in,
                                const struct tfc_kattr *attrs, struct tfc_desc *out, int *n_out)
{
    int n = op->n_outputs ? op->n_outputs(attrs) : 1;
    if (n < 1 || n > TFC_MAX_OPERANDS)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "node '%s' (%s): %d outputs is outside [1, %d]", label, op->name,
                               n, TFC_MAX_OPERANDS);
    memset(out, 0, sizeof(struct tfc_desc) * (size_t)n);
    char msg[TFC_MSG_LEN] = "";
    struct tfc_infer inf = {n_inputs, in, attrs, n, out, msg};
    tfc_status st = op->infer(&inf);
    if (st) return tfc_graph_error(g, st, "node '%s' (%s): %s", label, op->name, msg);
    for (int k = 0; k < n; k++) {
        char sh[160];
        if (tfc_shape_too_large(&out[k].shape, out[k].dtype))
            return tfc_graph_error(g, TFC_ERR_SHAPE,
                                   "node '%s' (%s): output %d of shape %s and dtype %s is more "
                                   "bytes than 64 bits count", label, op->name, k,
                                   tfc_shape_str(&out[k].shape, sh, sizeof sh),
                                   tfc_dtype_name(out[k].dtype));
    }
    *n_out = n;
    return TFC_OK;
}

/* The open name scope's prefix with its '/' ("" outside every scope). */
static const char *scope_prefix(const tfc_graph *g, char *buf, size_t len)
{
    if (!g->n_scope) return "";
    snprintf(buf, len, "%s/", g->scopes[g->n_scope - 1]);
    return buf;
}

/* The name of an unnamed node: its op's (inside the open scope), else op_k with the first free
 * k from the node count on; NULL when out of memory. */
static char *generated_name(const tfc_graph *g, const struct tfc_op *op)
{
    char gen[512], pre[300];
    const char *prefix = scope_prefix(g, pre, sizeof pre);
    snprintf(gen, sizeof gen, "%s%s", prefix, op->name);
    for (int k = g->n_nodes; name_lookup(g, gen); k++)
        snprintf(gen, sizeof gen, "%s%s_%d", prefix, op->name, k);
    return strdup(gen);
}

/* A node of op with its name and arrays, and its outputs named and described, not yet in g
 * (inputs and attributes unset); NULL when out of memory. */
static struct tfc_node *node_new(tfc_graph *g, const struct tfc_op *op, const char *name,
                                 int n_inputs, int n_out, const struct tfc_desc *out)
{
    struct tfc_node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->graph = g;
    n->op = op;
    n->id = g->n_nodes;
    n->region = g->cur_region;
    n->name = name ? strdup(name) : generated_name(g, op);
    n->n_inputs = n_inputs;
    n->inputs = n_inputs ? malloc(sizeof(tfc_tensor *) * (size_t)n_inputs) : NULL;
    n->outputs = calloc((size_t)n_out, sizeof *n->outputs);
    n->n_outputs = n->outputs ? n_out : 0; /* what node_free may walk */
    int ok = n->name && (!n_inputs || n->inputs) && n->outputs;
    for (int i = 0; ok && i < n_out; i++) {
        n->outputs[i].node = n;
        n->outputs[i].index = i;
        n->outputs[i].desc = out[i];
        ok = (n->outputs[i].name = output_name(n->name, i)) != NULL;
    }
    if (!ok) {
        node_free(n);
        return NULL;
    }
    return n;
}

/* Appends n to g's nodes and its name table; nonzero when out of memory (n is not in g). */
static int node_add(tfc_graph *g, struct tfc_node *n)
{
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        struct tfc_node **nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) return -1;
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    if (name_insert(g, n)) return -1;
    g->nodes[g->n_nodes++] = n;
    return 0;
}

struct tfc_node *tfc_node_build(tfc_graph *g, const struct tfc_op *op, const char *name,
                                int n_inputs, tfc_tensor *const *inputs,
                                const struct tfc_kattr *attrs)
{
    if (!g) return NULL;
    if (g->status) return NULL; /* the first error stays; building on stops */
    char label[512], scoped[512], pre[300];
    if (name && g->n_scope) { /* a given name is relative to the open scope */
        snprintf(scoped, sizeof scoped, "%s%s", scope_prefix(g, pre, sizeof pre), name);
        name = scoped;
    }
    snprintf(label, sizeof label, "%s", name ? name : op->name);
    struct tfc_desc in[TFC_MAX_OPERANDS], out[TFC_MAX_OPERANDS];
    int n_out = 0;
    tfc_tensor *captured[TFC_MAX_OPERANDS];
    if (check_inputs(g, op, label, name, n_inputs, inputs, in)) return NULL;
    if (g->region_inputs) { /* control flow: captures (graph/control_flow.c) */
        if (g->region_inputs(g, label, op, n_inputs, inputs, captured)) return NULL;
        inputs = captured;
    }
    if (infer_outputs(g, op, label, n_inputs, in, attrs, out, &n_out)) return NULL;
    struct tfc_node *n = node_new(g, op, name, n_inputs, n_out, out);
    if (!n || node_add(g, n)) {
        if (n) node_free(n);
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "node '%s': no memory", label);
    }
    memcpy(n->attrs, attrs, sizeof n->attrs);
    for (int i = 0; i < n_inputs; i++) n->inputs[i] = inputs[i];
    if (g->n_dev_scope) n->device = g->dev_scope[g->n_dev_scope - 1];
    return n;
}

tfc_tensor *tfc_build(tfc_graph *g, const struct tfc_op *op, int n_inputs,
                      tfc_tensor *const *inputs, const struct tfc_kattr *attrs)
{
    struct tfc_kattr def[TFC_MAX_ATTRS];
    if (!attrs) {
        tfc_attrs_default(op, def);
        attrs = def;
    }
    struct tfc_node *n = tfc_node_build(g, op, NULL, n_inputs, inputs, attrs);
    return n ? &n->outputs[0] : NULL;
}

tfc_tensor *tfc_op(tfc_graph *g, const char *opname, int n_inputs, tfc_tensor *const *inputs,
                   const char *attrs, tfc_tensor **out, int out_capacity)
{
    if (!g) return NULL;
    if (!opname) return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "tfc_op: op name is NULL");
    const struct tfc_op *op = tfc_op_lookup(opname);
    if (!op) return tfc_graph_fail(g, TFC_ERR_NOT_FOUND, "unknown op '%s'", opname);
    if (op->flags & TFC_OP_SOURCE)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "op '%s' is built with its own function (tfc_%s)", opname, opname);
    struct tfc_kattr a[TFC_MAX_ATTRS];
    char msg[TFC_MSG_LEN];
    if (tfc_attrs_parse(op, attrs, a, msg))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s", msg);
    struct tfc_node *n = tfc_node_build(g, op, NULL, n_inputs, inputs, a);
    if (!n) return NULL;
    for (int i = 0; out && i < out_capacity && i < n->n_outputs; i++) out[i] = &n->outputs[i];
    return &n->outputs[0];
}

int tfc_op_count(void) { return tfc_op_table_size; }

const char *tfc_op_name(int i)
{
    return i >= 0 && i < tfc_op_table_size ? tfc_op_table[i]->name : NULL;
}

const struct tfc_op *tfc_op_lookup(const char *name)
{
    for (int i = 0; i < tfc_op_table_size; i++)
        if (strcmp(tfc_op_table[i]->name, name) == 0) return tfc_op_table[i];
    return NULL;
}

/* ---- placement hints ------------------------------------------------------------------- */

static const char *const device_kinds[] = {"", "cpu", "cuda", "opencl"};

/* "rank:R" or "rank:R/device": the rank, then the device as without it. */
static tfc_status rank_parse(const char *device, int hard, struct tfc_device_hint *h, char *msg)
{
    const char *p = device + 5;
    long v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && v <= 100000; p++, digits++) v = v * 10 + (*p - '0');
    if (!digits || v > 100000 || (*p && *p != '/') || (*p == '/' && !p[1]))
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "device '%.64s': expected rank:R or rank:R/DEVICE (R a number >= 0, "
                        "DEVICE cpu, cuda, cuda:N, opencl or opencl:N)", device);
    char why[TFC_MSG_LEN];
    tfc_status st = *p ? tfc_device_parse(p + 1, hard, h, why) : TFC_OK;
    if (st) return tfc_fail(msg, st, "device '%.64s': after the rank: %.200s", device, why);
    if (!*p) *h = (struct tfc_device_hint){TFC_DEVICE_ANY, -1, hard != 0, 0, 0};
    if (h->has_rank)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "device '%.64s': names a rank twice", device);
    h->has_rank = 1;
    h->rank = (int)v;
    return TFC_OK;
}

tfc_status tfc_device_parse(const char *device, int hard, struct tfc_device_hint *h, char *msg)
{
    *h = (struct tfc_device_hint){TFC_DEVICE_ANY, -1, 0, 0, 0};
    if (!device || !*device) return TFC_OK;
    if (strncmp(device, "rank:", 5) == 0) return rank_parse(device, hard, h, msg);
    const char *colon = strchr(device, ':');
    size_t klen = colon ? (size_t)(colon - device) : strlen(device);
    int kind = TFC_DEVICE_ANY;
    for (int k = TFC_DEVICE_CPU; k <= TFC_DEVICE_OPENCL; k++)
        if (strlen(device_kinds[k]) == klen && strncmp(device, device_kinds[k], klen) == 0)
            kind = k;
    if (kind == TFC_DEVICE_ANY)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "unknown device '%.64s' (expected cpu, cuda, cuda:N, opencl, opencl:N, "
                        "rank:R or rank:R/DEVICE)",
                        device);
    int index = -1;
    if (colon) {
        const char *p = colon + 1;
        long v = 0;
        int digits = 0;
        for (; *p >= '0' && *p <= '9' && v <= 100000; p++, digits++) v = v * 10 + (*p - '0');
        if (kind == TFC_DEVICE_CPU)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "device '%.64s': cpu takes no index (all CPU workers are one device)",
                            device);
        if (!digits || *p || v > 100000)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "device '%.64s': the index after ':' must be a number >= 0", device);
        index = (int)v;
    }
    *h = (struct tfc_device_hint){kind, index, hard != 0, 0, 0};
    return TFC_OK;
}

const char *tfc_device_str(const struct tfc_device_hint *h, char *buf, size_t len)
{
    if (h->has_rank && len > 0) { /* "rank:R", then "/device" when there is one */
        int k = snprintf(buf, len, "rank:%d", h->rank);
        if (h->kind <= TFC_DEVICE_ANY || h->kind > TFC_DEVICE_OPENCL || k < 0 || (size_t)k + 1 >= len)
            return buf;
        struct tfc_device_hint d = *h;
        d.has_rank = 0;
        buf[k] = '/';
        tfc_device_str(&d, buf + k + 1, len - (size_t)k - 1);
        return buf;
    }
    if (h->kind <= TFC_DEVICE_ANY || h->kind > TFC_DEVICE_OPENCL)
        snprintf(buf, len, "any");
    else if (h->index >= 0)
        snprintf(buf, len, "%s:%d", device_kinds[h->kind], h->index);
    else
        snprintf(buf, len, "%s", device_kinds[h->kind]);
    return buf;
}

tfc_status tfc_tensor_set_device(tfc_tensor *t, const char *device, int hard)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_device: tensor is NULL");
    struct tfc_node *n = t->node;
    tfc_graph *g = n->graph;
    struct tfc_device_hint h;
    char msg[TFC_MSG_LEN];
    tfc_status st = tfc_device_parse(device, hard, &h, msg);
    if (st) return tfc_graph_error(g, st, "node '%s': %s", n->name, msg);
    if (memcmp(&h, &n->device, sizeof h) != 0) {
        n->device = h;
        g->version++; /* plans built before placed the node otherwise */
    }
    return TFC_OK;
}

tfc_status tfc_graph_push_device(tfc_graph *g, const char *device, int hard)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "push_device: graph is NULL");
    struct tfc_device_hint h;
    char msg[TFC_MSG_LEN];
    tfc_status st = tfc_device_parse(device, hard, &h, msg);
    if (st) return tfc_graph_error(g, st, "push_device: %s", msg);
    if (g->n_dev_scope == g->cap_dev_scope) {
        int cap = g->cap_dev_scope ? g->cap_dev_scope * 2 : 4;
        struct tfc_device_hint *d = realloc(g->dev_scope, sizeof *d * (size_t)cap);
        if (!d) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "push_device: no memory");
        g->dev_scope = d;
        g->cap_dev_scope = cap;
    }
    g->dev_scope[g->n_dev_scope++] = h;
    return TFC_OK;
}

tfc_status tfc_graph_pop_device(tfc_graph *g)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "pop_device: graph is NULL");
    if (!g->n_dev_scope)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "pop_device: no device scope is open (more pops than pushes)");
    g->n_dev_scope--;
    return TFC_OK;
}

/* ---- name scopes ----------------------------------------------------------------------- */

tfc_status tfc_scope_push(tfc_graph *g, const char *name)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "scope_push: graph is NULL");
    if (!name || !valid_name(name) || name[strlen(name) - 1] == '/')
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "scope_push: invalid scope name '%s' (1-200 characters, no ':' "
                               "',' '\"', not ending in '/')",
                               name ? name : "(null)");
    char full[512];
    if (g->n_scope)
        snprintf(full, sizeof full, "%s/%s", g->scopes[g->n_scope - 1], name);
    else
        snprintf(full, sizeof full, "%s", name);
    if (!valid_name(full)) /* names built inside would all be too long */
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "scope_push: scope '%.64s...' is longer than 200 characters", full);
    if (g->n_scope == g->cap_scope) {
        int cap = g->cap_scope ? g->cap_scope * 2 : 4;
        char **s = realloc(g->scopes, sizeof *s * (size_t)cap);
        if (!s) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "scope_push: no memory");
        g->scopes = s;
        g->cap_scope = cap;
    }
    if (!(g->scopes[g->n_scope] = strdup(full)))
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "scope_push: no memory");
    g->n_scope++;
    return TFC_OK;
}

tfc_status tfc_scope_pop(tfc_graph *g)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "scope_pop: graph is NULL");
    if (!g->n_scope)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "scope_pop: no name scope is open (more pops than pushes)");
    free(g->scopes[--g->n_scope]);
    return TFC_OK;
}

const char *tfc_scope_current(const tfc_graph *g)
{
    return g && g->n_scope ? g->scopes[g->n_scope - 1] : "";
}

int tfc_scope_hide(tfc_graph *g)
{
    int depth = g->n_scope;
    g->n_scope = 0; /* the entries stay allocated: restore only moves the top back */
    return depth;
}

void tfc_scope_restore(tfc_graph *g, int depth)
{
    g->n_scope = depth;
}

/* ---- trainable variables --------------------------------------------------------------- */

tfc_status tfc_variable_set_trainable(tfc_tensor *var, int trainable)
{
    if (!var) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_trainable: tensor is NULL");
    struct tfc_node *n = var->node;
    if (!(n->op->flags & TFC_OP_VARIABLE))
        return tfc_graph_error(n->graph, TFC_ERR_INVALID_ARGUMENT,
                               "set_trainable: node '%s' is a %s, not a variable", n->name,
                               n->op->name);
    n->untrainable = !trainable;
    return TFC_OK;
}

int tfc_variable_trainable(const tfc_tensor *var)
{
    return var && (var->node->op->flags & TFC_OP_VARIABLE) && !var->node->untrainable;
}

int tfc_trainable_variables(const tfc_graph *g, tfc_tensor **vars, int capacity)
{
    int n = 0;
    for (int i = 0; g && i < g->n_nodes; i++) {
        struct tfc_node *x = g->nodes[i];
        if (!(x->op->flags & TFC_OP_VARIABLE) || x->untrainable) continue;
        if (vars && n < capacity) vars[n] = &x->outputs[0];
        n++;
    }
    return n;
}
