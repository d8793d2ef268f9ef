/* export.c: tfc_onnx_export: the part of our graph that a signature's outputs need, from its
 * feeds, as an ONNX model file (opset 17). Feeds become graph inputs, constants initializers,
 * variables graph inputs or (given a session) initializers holding their values; every other
 * node is mapped by the export table, in creation order (a topological order, as ONNX needs);
 * the outputs keep their names, so a model imported back has the same signature. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"

/* ONNX models are protobuf messages, which cannot exceed 2 GiB. */
#define ONNX_MAX_MODEL_BYTES ((size_t)2147483647)

struct selection {
    int n_nodes;
    unsigned char *needed;  /* per node id */
    uint64_t *used;         /* per node id: bit k when output k is read (bit 63: k >= 63) */
};

static tfc_tensor *find_tensor(struct onnx_export *ex, const char *role, const char *name)
{
    tfc_tensor *t = name ? tfc_graph_find(ex->g, name) : NULL;
    if (!t)
        onnx_export_fail(ex, TFC_ERR_NOT_FOUND, "the signature's %s '%s' is no tensor of the "
                         "graph", role, name ? name : "(null)");
    return t;
}

static void mark_used(struct selection *s, const tfc_tensor *t)
{
    s->used[t->node->id] |= 1ull << (t->index < 63 ? t->index : 63);
}

/* Marks every node the outputs need, walking inputs back to the feeds. Control inputs are
 * left out: they order side effects (a training-mode update), which inference has none of. */
static tfc_status select_nodes(struct onnx_export *ex, const tfc_signature *sig,
                               struct selection *s)
{
    int *stack = malloc(sizeof *stack * (size_t)(s->n_nodes + 1));
    if (!stack) return onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
    int top = 0;
    for (int i = 0; i < sig->n_outputs; i++) {
        tfc_tensor *t = find_tensor(ex, "output", sig->outputs[i]);
        if (!t) return free(stack), TFC_ERR_NOT_FOUND;
        mark_used(s, t);
        if (!s->needed[t->node->id]) s->needed[t->node->id] = 1, stack[top++] = t->node->id;
    }
    while (top > 0) {
        const struct tfc_node *n = ex->g->nodes[stack[--top]];
        if (ex->fed[n->id]) continue;
        const struct onnx_export_map *e = tfc_onnx_export_find(n->op->name);
        for (int i = 0; i < n->n_inputs; i++) {
            if (e && i < 32 && (e->mode_inputs >> i & 1)) continue;
            const tfc_tensor *in = n->inputs[i];
            mark_used(s, in);
            if (!s->needed[in->node->id]) s->needed[in->node->id] = 1, stack[top++] = in->node->id;
        }
    }
    free(stack);
    return TFC_OK;
}

/* A source node: a constant is an initializer; a variable an initializer holding its value in
 * the session, or without one a graph input; a placeholder must be fed. */
static tfc_status export_source(struct onnx_export *ex, const struct tfc_node *n,
                                tfc_session *vars, size_t *n_inputs)
{
    const tfc_tensor *t = &n->outputs[0];
    if (!strcmp(n->op->name, "constant")) return onnx_add_initializer(ex, t->name, n->value);
    if (!strcmp(n->op->name, "placeholder"))
        return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "the outputs need this placeholder, "
                                "but it is not a feed of the signature");
    if (!vars) {
        Onnx__ValueInfoProto *vi = tfc_onnx_value_info(t->name, t->desc.dtype, &t->desc.shape);
        if (!vi) return onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
        ex->gp->input[(*n_inputs)++] = vi;
        return TFC_OK;
    }
    tfc_tensor *var = (tfc_tensor *)t;
    if (!tfc_session_variable_initialized(vars, var))
        return onnx_export_fail(ex, TFC_ERR_UNINITIALIZED, "the variable holds no value in the "
                                "session (initialize it or restore a checkpoint first)");
    tfc_value *v;
    if (tfc_session_read_variable(vars, var, &v))
        return onnx_export_fail(ex, TFC_ERR_RUNTIME, "reading the variable: %s",
                                tfc_session_errmsg(vars));
    tfc_status st = onnx_add_initializer(ex, t->name, v);
    tfc_value_destroy(v);
    return st;
}

/* One node of ours through the export table. */
static tfc_status export_node(struct onnx_export *ex, const struct tfc_node *n, uint64_t used)
{
    const struct onnx_export_map *e = tfc_onnx_export_find(n->op->name);
    if (!e || n->cflow)
        return onnx_export_fail(ex, TFC_ERR_NOT_FOUND, "op '%s' has no ONNX form in this "
                                "exporter (see tfc_onnx_export in tfc.h for the ops it maps)",
                                n->op->name);
    const char *in[TFC_MAX_OPERANDS], *out[TFC_MAX_OPERANDS];
    for (int i = 0; i < n->n_inputs && i < TFC_MAX_OPERANDS; i++) in[i] = n->inputs[i]->name;
    for (int k = 0; k < n->n_outputs && k < TFC_MAX_OPERANDS; k++)
        out[k] = used & (1ull << (k < 63 ? k : 63)) ? n->outputs[k].name : NULL;
    return e->fn(ex, e, n, in, out);
}

static tfc_status add_io(struct onnx_export *ex, const tfc_signature *sig)
{
    Onnx__GraphProto *gp = ex->gp;
    int n_vars = 0;
    for (int i = 0; i < ex->g->n_nodes; i++) n_vars += ex->g->nodes[i]->op == &tfc_op_variable;
    gp->input = calloc((size_t)(sig->n_feeds + n_vars + 1), sizeof *gp->input);
    gp->output = calloc((size_t)(sig->n_outputs + 1), sizeof *gp->output);
    if (!gp->input || !gp->output)
        return onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < sig->n_feeds; i++) {
        tfc_tensor *t = find_tensor(ex, "feed", sig->feeds[i]);
        if (!t) return TFC_ERR_NOT_FOUND;
        if (t->index != 0)
            return onnx_export_fail(ex, TFC_ERR_INVALID_ARGUMENT, "feed '%s' is output %d of its "
                                    "node: only a node's first output can be exported as a "
                                    "graph input", t->name, t->index);
        ex->fed[t->node->id] = 1;
        if (!(gp->input[gp->n_input++] = tfc_onnx_value_info(t->name, t->desc.dtype,
                                                              &t->desc.shape)))
            return onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int i = 0; i < sig->n_outputs; i++) {
        tfc_tensor *t = find_tensor(ex, "output", sig->outputs[i]);
        if (!t) return TFC_ERR_NOT_FOUND;
        if (!(gp->output[gp->n_output++] = tfc_onnx_value_info(t->name, t->desc.dtype,
                                                                &t->desc.shape)))
            return onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return TFC_OK;
}

static tfc_status export_graph(struct onnx_export *ex, const tfc_signature *sig,
                               tfc_session *vars)
{
    struct selection s = {.n_nodes = ex->g->n_nodes};
    s.needed = calloc((size_t)s.n_nodes + 1, 1);
    s.used = calloc((size_t)s.n_nodes + 1, sizeof *s.used);
    tfc_status st = s.needed && s.used ? add_io(ex, sig)
                                       : onnx_export_fail(ex, TFC_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = select_nodes(ex, sig, &s);
    for (int i = 0; !st && i < s.n_nodes; i++) {
        const struct tfc_node *n = ex->g->nodes[i];
        if (!s.needed[i] || ex->fed[i]) continue;
        ex->node = n;
        st = n->op->flags & TFC_OP_SOURCE ? export_source(ex, n, vars, &ex->gp->n_input)
                                           : export_node(ex, n, s.used[i]);
    }
    ex->node = NULL;
    free(s.needed);
    free(s.used);
    return st;
}

static Onnx__ModelProto *model_new(void)
{
    Onnx__ModelProto *m = malloc(sizeof *m);
    Onnx__GraphProto *gp = malloc(sizeof *gp);
    Onnx__OperatorSetIdProto *op = malloc(sizeof *op);
    Onnx__OperatorSetIdProto **ops = malloc(sizeof *ops);
    if (!m || !gp || !op || !ops) {
        free(m), free(gp), free(op), free(ops);
        return NULL;
    }
    onnx__model_proto__init(m);
    onnx__graph_proto__init(gp);
    onnx__operator_set_id_proto__init(op);
    m->graph = gp;
    m->opset_import = ops;
    ops[0] = op;
    m->n_opset_import = 1;
    op->has_version = 1;
    op->version = TFC_ONNX_EXPORT_OPSET;
    m->has_ir_version = 1;
    m->ir_version = TFC_ONNX_EXPORT_IR_VERSION;
    op->domain = strdup("");
    m->producer_name = strdup("tfc-starpu");
    m->producer_version = strdup(PACKAGE_VERSION);
    gp->name = strdup("predict");
    if (!op->domain || !m->producer_name || !m->producer_version || !gp->name) {
        onnx__model_proto__free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

static tfc_status write_model(const Onnx__ModelProto *m, const char *path)
{
    size_t size = onnx__model_proto__get_packed_size(m);
    if (size > ONNX_MAX_MODEL_BYTES)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "ONNX export '%s': the model needs %zu "
                               "bytes, above protobuf's 2 GiB limit (external data files are "
                               "not written yet)", path, size);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "ONNX export '%s': out of memory "
                                     "for %zu bytes", path, size);
    onnx__model_proto__pack(m, buf);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, size, f) == size;
    int err = errno;
    if (f && fclose(f)) ok = 0, err = errno;
    free(buf);
    if (ok) return TFC_OK;
    if (f) remove(path); /* no truncated model left behind */
    return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "ONNX export: writing '%s': %s", path, strerror(err));
}

tfc_status tfc_onnx_export(tfc_graph *g, const tfc_signature *sig,
                           const tfc_onnx_export_options *options, const char *path)
{
    if (!g || !sig || !path)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_export: %s is NULL",
                               !g ? "the graph" : !sig ? "the signature" : "the path");
    if (tfc_graph_status(g))
        return tfc_fail_global(tfc_graph_status(g), "tfc_onnx_export: the graph holds an error: "
                               "%s", tfc_graph_errmsg(g));
    if (sig->n_outputs < 1)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_export: the signature has no "
                               "outputs (a \"predict\" signature names what the model computes)");
    Onnx__ModelProto *m = model_new();
    struct onnx_export ex = {.g = g, .fed = calloc((size_t)g->n_nodes + 1, 1)};
    tfc_status st;
    if (!m || !ex.fed) {
        st = tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "ONNX export: out of memory");
    } else {
        ex.gp = m->graph;
        st = export_graph(&ex, sig, options ? options->variables : NULL);
        if (!st) st = write_model(m, path);
    }
    free(ex.fed);
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return st;
}
