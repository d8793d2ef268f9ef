/* import.c: tfc_onnx_import: an ONNX model's graph into ours. Initializers become constants
 * (or trainable variables), graph inputs placeholders, each node is mapped by the op table in
 * the order the model lists them (ONNX requires a topological order), and the graph's inputs
 * and outputs become the "predict" signature. Declared output types and shapes are checked
 * against what our ops infer, so a model that does not fit is an error at import, not a run. */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

/* An initializer, graph input or graph output whose name is "" (model_read.c makes unset
 * names ""; to a node, "" is an absent input): ONNX requires their names. */
static tfc_status unnamed(struct onnx_import *im, const Onnx__GraphProto *gp, const char *what,
                          size_t i)
{
    int named = *gp->name != 0;
    return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX %s %zu%s%s%s has no name (ONNX "
                           "requires one: nodes and callers refer to it by name)", what, i,
                           named ? " of graph '" : "", gp->name, named ? "'" : "");
}

/* A graph's inputs and outputs all named (subgraphs too: a body's unnamed output would meet
 * an unnamed input of the same body by name). */
static tfc_status check_value_names(struct onnx_import *im, const Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_input; i++)
        if (!*gp->input[i]->name) return unnamed(im, gp, "graph input", i);
    for (size_t i = 0; i < gp->n_output; i++)
        if (!*gp->output[i]->name) return unnamed(im, gp, "graph output", i);
    return TFC_OK;
}

static tfc_status add_initializers(struct onnx_import *im, const Onnx__GraphProto *gp,
                                   int trainable, tfc_onnx_model *m)
{
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!*t->name) return unnamed(im, gp, "initializer", i);
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", t->name);
        tfc_value *v;
        tfc_status st = tfc_onnx_tensor_value(im->g, t, im->model_dir, what, &v);
        if (st) return st;
        enum tfc_dtype dt = tfc_value_dtype(v);
        if (!trainable || (dt != TFC_FLOAT32 && dt != TFC_FLOAT64) || tfc_value_numel(v) == 0) {
            if ((st = onnx_sym_add(im, t->name, NULL, v))) return st;
            continue;
        }
        char name[256];
        onnx_node_name(t->name, name, sizeof name);
        tfc_tensor *var = tfc_variable(im->g, name, dt, tfc_value_shape(v), tfc_init_zeros());
        if (!var) {
            tfc_value_destroy(v);
            return tfc_graph_status(im->g);
        }
        void *pv = realloc(m->variables, (size_t)(m->n_variables + 1) * sizeof *m->variables);
        if (pv) m->variables = pv;
        void *pw = realloc(m->values, (size_t)(m->n_variables + 1) * sizeof *m->values);
        if (pw) m->values = pw;
        if (!pv || !pw) {
            tfc_value_destroy(v);
            return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
        }
        m->variables[m->n_variables] = var;
        m->values[m->n_variables++] = v;
        if ((st = onnx_sym_add(im, t->name, var, NULL))) return st;
    }
    return TFC_OK;
}

/* The declared type of a graph input or output: dtype and shape (-1 for symbolic dims). */
static tfc_status declared_type(struct onnx_import *im, const Onnx__ValueInfoProto *vi,
                                const char *role, int *dtype, tfc_shape *shape, int *has_shape)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return tfc_graph_error(im->g, TFC_ERR_DTYPE, "ONNX graph %s '%s': only tensors are "
                               "supported (not sequences, maps or optionals)", role, vi->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int32_t ot = tt->has_elem_type ? tt->elem_type : 0;
    *dtype = tfc_onnx_dtype(ot);
    if (*dtype < 0)
        return tfc_graph_error(im->g, TFC_ERR_DTYPE, "ONNX graph %s '%s': element type %s is not "
                               "supported (float, double, int32, int64, uint8, bool are)", role,
                               vi->name, tfc_onnx_dtype_name(ot));
    *has_shape = tt->shape != NULL;
    *shape = tfc_shape_of(0, NULL);
    if (!tt->shape) return TFC_OK;
    if (tt->shape->n_dim > TFC_MAX_RANK)
        return tfc_graph_error(im->g, TFC_ERR_SHAPE, "ONNX graph %s '%s': rank %zu is above %d",
                               role, vi->name, tt->shape->n_dim, TFC_MAX_RANK);
    shape->rank = (int)tt->shape->n_dim;
    for (int d = 0; d < shape->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        shape->dims[d] = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                             ? dim->dim_value : -1;
    }
    return TFC_OK;
}

static int shapes_fit(const tfc_shape *declared, const tfc_shape *ours)
{
    if (declared->rank != ours->rank) return 0;
    for (int d = 0; d < ours->rank; d++)
        if (declared->dims[d] >= 0 && ours->dims[d] >= 0 && declared->dims[d] != ours->dims[d])
            return 0;
    return 1;
}

static const char *shape_str(const tfc_shape *s, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < s->rank && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

static const tfc_value *frozen_value(const tfc_onnx_options *o, const char *name)
{
    for (int i = 0; o && i < o->n_frozen; i++)
        if (o->frozen_names[i] && !strcmp(o->frozen_names[i], name)) return o->frozen_values[i];
    return NULL;
}

/* One graph input: a frozen value (checked against the declared type), else a placeholder. */
static tfc_status add_input(struct onnx_import *im, const Onnx__ValueInfoProto *vi,
                            const tfc_onnx_options *o, tfc_signature *sig)
{
    int dt, has_shape;
    tfc_shape shape;
    char b1[160], b2[160];
    tfc_status st = declared_type(im, vi, "input", &dt, &shape, &has_shape);
    if (st) return st;
    const tfc_value *fv = frozen_value(o, vi->name);
    if (fv) {
        tfc_shape vs = tfc_value_shape(fv);
        if (tfc_value_dtype(fv) != (enum tfc_dtype)dt || (has_shape && !shapes_fit(&shape, &vs)))
            return tfc_graph_error(im->g, TFC_ERR_SHAPE, "ONNX graph input '%s': the frozen value "
                                   "is %s %s, the model declares %s %s", vi->name,
                                   tfc_dtype_name(tfc_value_dtype(fv)), shape_str(&vs, b1, 160),
                                   tfc_dtype_name((enum tfc_dtype)dt), shape_str(&shape, b2, 160));
        tfc_value *copy;
        if (tfc_value_from_data(tfc_value_dtype(fv), vs, tfc_value_cdata(fv), &copy))
            return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
        return onnx_sym_add(im, vi->name, NULL, copy);
    }
    if (!has_shape)
        return tfc_graph_error(im->g, TFC_ERR_SHAPE, "ONNX graph input '%s' has no shape (we "
                               "need its rank and every dimension but the first)", vi->name);
    for (int d = 1; d < shape.rank; d++)
        if (shape.dims[d] < 0)
            return tfc_graph_error(im->g, TFC_ERR_SHAPE, "ONNX graph input '%s': dimension %d of "
                                   "%s is symbolic; only the first (the batch) may be", vi->name,
                                   d, shape_str(&shape, b1, 160));
    char name[256];
    onnx_node_name(vi->name, name, sizeof name);
    tfc_tensor *t = tfc_placeholder(im->g, name, (enum tfc_dtype)dt, shape);
    if (!t) return tfc_graph_status(im->g);
    sig->feeds[sig->n_feeds++] = strdup(tfc_tensor_name(t));
    return onnx_sym_add(im, vi->name, t, NULL);
}

/* Prefixes a build error from our ops with the ONNX node it came from. */
static void name_node_in_error(tfc_graph *g, const Onnx__NodeProto *n)
{
    if (!strncmp(g->msg, "ONNX", 4)) return;
    char msg[2 * TFC_MSG_LEN];
    snprintf(msg, sizeof msg, "ONNX node '%.100s' (%.60s): %.300s", n->name, n->op_type, g->msg);
    size_t k = strlen(msg) < sizeof g->msg ? strlen(msg) : sizeof g->msg - 1;
    memcpy(g->msg, msg, k);
    g->msg[k] = 0;
}

/* Records the outputs of one mapped node; a fresh node takes its ONNX output's name. Each
 * value it records is taken (vals[k] set to NULL); the caller frees what is left. */
static tfc_status bind_outputs(struct onnx_import *im, int first_new, tfc_tensor **outs,
                               tfc_value **vals)
{
    const Onnx__NodeProto *n = im->node;
    for (size_t k = 0; k < n->n_output; k++) {
        const char *oname = n->output[k];
        if (!oname || !oname[0]) continue;
        if (!outs[k] && !vals[k])
            return onnx_unsupported(im, "output %zu '%s' (we do not compute it)", k, oname);
        if (outs[k] && outs[k]->index == 0 && outs[k]->node->id >= first_new) {
            char name[256];
            onnx_node_name(oname, name, sizeof name);
            if (!tfc_graph_find(im->g, name) && tfc_tensor_set_name(outs[k], name))
                return tfc_graph_status(im->g);
        }
        tfc_value *v = vals[k];
        vals[k] = NULL;
        tfc_status st = onnx_sym_add(im, oname, outs[k], v);
        if (st) return st;
    }
    return TFC_OK;
}

#define ONNX_MAX_OUTPUTS 64

static tfc_status map_node(struct onnx_import *im, const Onnx__NodeProto *n)
{
    im->node = n;
    const char *domain = n->domain ? n->domain : "";
    if (*domain && strcmp(domain, "ai.onnx"))
        return tfc_graph_error(im->g, TFC_ERR_NOT_FOUND, "ONNX node '%s': op '%s' of domain '%s' "
                               "is not supported (only the default domain is)", n->name,
                               n->op_type, domain);
    const struct onnx_op_map *e = tfc_onnx_op_find(n->op_type, im->opset);
    if (!e)
        return tfc_graph_error(im->g, TFC_ERR_NOT_FOUND, "ONNX node '%s': unknown op '%s' at opset "
                               "%lld (no mapping to our ops)", n->name, n->op_type,
                               (long long)im->opset);
    if (n->n_output > ONNX_MAX_OUTPUTS)
        return onnx_unsupported(im, "%zu outputs (at most %d)", n->n_output, ONNX_MAX_OUTPUTS);
    tfc_tensor *outs[ONNX_MAX_OUTPUTS] = {0};
    tfc_value *vals[ONNX_MAX_OUTPUTS] = {0};
    int first_new = tfc_graph_num_nodes(im->g);
    /* folding runs a session: not inside a region, nor on a region's own node */
    int known = !im->depth && strcmp(n->op_type, "If") && strcmp(n->op_type, "Loop") &&
                onnx_inputs_known(im);
    tfc_status st = e->build(im, outs, vals);
    if (!st) st = tfc_graph_status(im->g);
    if (!st && known) st = onnx_fold_outputs(im, outs, vals);
    if (!st) st = bind_outputs(im, first_new, outs, vals);
    /* every slot: a builder may set values for outputs the node does not list (none listed) */
    for (int k = 0; k < ONNX_MAX_OUTPUTS; k++) tfc_value_destroy(vals[k]);
    if (st) name_node_in_error(im->g, n);
    return st;
}

tfc_status onnx_map_subgraph(struct onnx_import *im, const Onnx__GraphProto *gp)
{
    const Onnx__NodeProto *outer = im->node;
    tfc_status st = check_value_names(im, gp);
    if (!st) st = add_initializers(im, gp, 0, NULL);
    for (size_t i = 0; !st && i < gp->n_node; i++) st = map_node(im, gp->node[i]);
    im->node = outer;
    return st;
}

/* A graph output: its tensor, checked against the declared type and shape. */
static tfc_status add_output(struct onnx_import *im, const Onnx__ValueInfoProto *vi,
                             tfc_signature *sig)
{
    struct onnx_sym *s = onnx_sym_find(im, vi->name);
    if (!s)
        return tfc_graph_error(im->g, TFC_ERR_NOT_FOUND, "ONNX graph output '%s' is computed by "
                               "no node", vi->name);
    if (!s->tensor && !onnx_sym_tensor(im, s)) return tfc_graph_status(im->g);
    int dt, has_shape;
    tfc_shape shape, ours = tfc_tensor_shape(s->tensor);
    tfc_status st = declared_type(im, vi, "output", &dt, &shape, &has_shape);
    if (st) return st;
    char b1[160], b2[160];
    if ((enum tfc_dtype)dt != tfc_tensor_dtype(s->tensor) || (has_shape && !shapes_fit(&shape, &ours)))
        return tfc_graph_error(im->g, TFC_ERR_SHAPE, "ONNX graph output '%s': the model declares "
                               "%s %s, the graph computes %s %s", vi->name,
                               tfc_dtype_name((enum tfc_dtype)dt), shape_str(&shape, b1, 160),
                               tfc_dtype_name(tfc_tensor_dtype(s->tensor)),
                               shape_str(&ours, b2, 160));
    sig->outputs[sig->n_outputs++] = strdup(tfc_tensor_name(s->tensor));
    return TFC_OK;
}

static tfc_status import_graph(struct onnx_import *im, const Onnx__GraphProto *gp,
                               const tfc_onnx_options *o, tfc_onnx_model *m)
{
    tfc_signature *sig = calloc(1, sizeof *sig);
    if (!sig) return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    m->predict = sig;
    sig->feeds = calloc(gp->n_input + 1, sizeof *sig->feeds);
    sig->outputs = calloc(gp->n_output + 1, sizeof *sig->outputs);
    if (!sig->feeds || !sig->outputs)
        return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    tfc_status st = check_value_names(im, gp);
    if (!st) st = add_initializers(im, gp, o && o->trainable, m);
    for (size_t i = 0; !st && i < gp->n_input; i++)
        if (!onnx_sym_find(im, gp->input[i]->name)) /* old models list initializers as inputs */
            st = add_input(im, gp->input[i], o, sig);
    for (size_t i = 0; !st && i < gp->n_node; i++) st = map_node(im, gp->node[i]);
    im->node = NULL;
    for (size_t i = 0; !st && i < gp->n_output; i++) st = add_output(im, gp->output[i], sig);
    for (int i = 0; !st && i < sig->n_feeds + sig->n_outputs; i++)
        if (!(i < sig->n_feeds ? sig->feeds[i] : sig->outputs[i - sig->n_feeds]))
            st = tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    return st;
}

tfc_status tfc_onnx_import(tfc_graph *g, const char *path, const tfc_onnx_options *options,
                           tfc_onnx_model **out)
{
    if (out) *out = NULL;
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_import: graph is NULL");
    if (!path) return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_import: path is NULL");
    if (tfc_graph_status(g)) return tfc_graph_status(g);
    Onnx__ModelProto *mp;
    tfc_status st = tfc_onnx_model_read(g, path, &mp);
    if (st) return st;
    struct onnx_import im = {.g = g};
    char *dir_copy = strdup(path);
    tfc_onnx_model *m = calloc(1, sizeof *m);
    if (!dir_copy || !m) {
        st = tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: out of memory");
    } else {
        im.model_dir = dirname(dir_copy);
        st = tfc_onnx_model_opset(g, mp, &im.opset);
        m->opset = im.opset;
        if (!st) st = import_graph(&im, mp->graph, options, m);
    }
    onnx_syms_free(&im);
    tfc_ctx_destroy(im.ctx);
    free(dir_copy);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (st || !out) {
        tfc_onnx_model_free(m);
        return st;
    }
    *out = m;
    return TFC_OK;
}

tfc_status tfc_onnx_init_variables(tfc_session *s, const tfc_onnx_model *m)
{
    if (!s || !m)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "tfc_onnx_init_variables: %s is NULL",
                               s ? "model" : "session");
    for (int i = 0; i < m->n_variables; i++) {
        tfc_status st = tfc_session_write_variable(s, m->variables[i], m->values[i]);
        if (st) return st;
    }
    return TFC_OK;
}

void tfc_onnx_model_free(tfc_onnx_model *m)
{
    if (!m) return;
    tfc_signature_free(m->predict);
    for (int i = 0; i < m->n_variables; i++) tfc_value_destroy(m->values[i]);
    free(m->values);
    free(m->variables);
    free(m);
}
