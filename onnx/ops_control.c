/* ops_control.c: ONNX If and Loop through our cond and while_loop (the two-step form). Each
 * subgraph is mapped into its region by the same node mapping as the main graph; names of the
 * enclosing graphs are visible inside (outer-scope values: our regions capture them), and the
 * names a subgraph defines are forgotten when it is left. A Loop is a while over
 * (iteration count, condition, loop-carried values..., scan accumulators...): its predicate is
 * `cond and i < M`, and each scan output grows by one row per iteration (a concat whose leading
 * dimension the shape invariant leaves free). */
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

#define ONNX_MAX_CF_VARS 32 /* our while's limit on loop variables */

static const Onnx__GraphProto *graph_attr(struct onnx_import *im, const char *name)
{
    const Onnx__AttributeProto *a = onnx_attr(im->node, name);
    return a && a->g ? a->g : NULL;
}

/* The node's name for our graph, or NULL (generated) when it has none or it is taken. */
static const char *cf_name(struct onnx_import *im, char *buf, size_t len)
{
    onnx_node_name(im->node->name ? im->node->name : "", buf, len);
    return buf[0] && !tfc_graph_find(im->g, buf) ? buf : NULL;
}

/* The tensor of subgraph output k (after the subgraph is mapped). */
static tfc_tensor *subgraph_output(struct onnx_import *im, const Onnx__GraphProto *gp, size_t k)
{
    struct onnx_sym *s = onnx_sym_find(im, gp->output[k]->name);
    if (!s)
        return tfc_graph_fail(im->g, TFC_ERR_NOT_FOUND, "ONNX node '%s' (%s): subgraph '%s' "
                              "output %zu '%s' is computed by no node", im->node->name,
                              im->node->op_type, gp->name ? gp->name : "", k, gp->output[k]->name);
    return onnx_sym_tensor(im, s);
}

/* Enters region r, binds the subgraph's inputs to the region's placeholders (in[i] for input i,
 * n_in of them), maps it (gp NULL: nothing to map, finish builds from in), and leaves with outputs built by finish (or the subgraph's outputs as
 * they are when finish is NULL). The name table and depth are restored whatever happens. */
typedef tfc_status (*region_outputs_fn)(struct onnx_import *im, const Onnx__GraphProto *gp,
                                        tfc_tensor *const *in, tfc_tensor **out, void *arg);

static tfc_status map_region(struct onnx_import *im, tfc_cflow *cf, int r,
                             const Onnx__GraphProto *gp, int n_in, int n_out,
                             region_outputs_fn finish, void *arg)
{
    tfc_tensor *in[ONNX_MAX_CF_VARS] = {0}, *out[ONNX_MAX_CF_VARS] = {0};
    int saved = im->n_syms;
    tfc_status st = tfc_cflow_enter(cf, r, in);
    if (st) return st;
    im->depth++;
    for (int i = 0; !st && i < n_in; i++) st = onnx_sym_add(im, gp->input[i]->name, in[i], NULL);
    if (!st && gp) st = onnx_map_subgraph(im, gp);
    if (!st && finish) st = finish(im, gp, in, out, arg);
    for (int k = 0; !st && !finish && k < n_out; k++)
        if (!(out[k] = subgraph_output(im, gp, (size_t)k))) st = tfc_graph_status(im->g);
    tfc_status left = tfc_cflow_leave(cf, n_out, out); /* leaves the region even on error */
    im->depth--;
    onnx_syms_truncate(im, saved);
    return st ? st : left;
}

ONNX_BUILDER(onnx_if)
{
    const Onnx__NodeProto *n = im->node;
    const Onnx__GraphProto *br[2] = {graph_attr(im, "then_branch"), graph_attr(im, "else_branch")};
    if (!br[0] || !br[1])
        return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (If): the graph "
                               "attribute %s is missing", n->name,
                               br[0] ? "else_branch" : "then_branch");
    if (n->n_output < 1 || n->n_output > ONNX_MAX_CF_VARS)
        return onnx_unsupported(im, "%zu outputs (1 to %d are)", n->n_output, ONNX_MAX_CF_VARS);
    for (int r = 0; r < 2; r++)
        if (br[r]->n_output != n->n_output)
            return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (If): %s has "
                                   "%zu outputs, the node %zu", n->name, r ? "else_branch"
                                   : "then_branch", br[r]->n_output, n->n_output);
    tfc_tensor *pred = onnx_input(im, 0);
    if (!pred) return tfc_graph_status(im->g);
    char name[256];
    tfc_cflow *cf = tfc_cond_new(im->g, cf_name(im, name, sizeof name), pred, (int)n->n_output);
    if (!cf) return tfc_graph_status(im->g);
    tfc_status st = TFC_OK;
    for (int r = 0; !st && r < 2; r++)
        st = map_region(im, cf, r, br[r], 0, (int)n->n_output, NULL, NULL);
    return st ? st : tfc_cflow_finish(cf, outs);
}

/* ---- Loop ------------------------------------------------------------------------------- */

struct loop_plan {
    int n_carried, n_scan;
    tfc_tensor *max_trips;   /* M, or NULL */
    tfc_shape scan_shape[ONNX_MAX_CF_VARS]; /* one iteration's scan output */
};

/* The while's cond: the carried condition, and the iteration count below M. */
static tfc_status loop_cond(struct onnx_import *im, const Onnx__GraphProto *gp,
                            tfc_tensor *const *in, tfc_tensor **out, void *arg)
{
    (void)gp;
    struct loop_plan *p = arg;
    out[0] = in[1];
    if (p->max_trips) out[0] = tfc_logical_and(im->g, in[1], tfc_less(im->g, in[0], p->max_trips));
    return tfc_graph_status(im->g);
}

/* The while's body: i + 1, the body's condition and carried values, each scan accumulator
 * with this iteration's row appended. */
static tfc_status loop_body(struct onnx_import *im, const Onnx__GraphProto *gp,
                            tfc_tensor *const *in, tfc_tensor **out, void *arg)
{
    struct loop_plan *p = arg;
    tfc_graph *g = im->g;
    out[0] = tfc_add(g, in[0], tfc_scalar(g, TFC_INT64, 1));
    for (int k = 0; k < 1 + p->n_carried + p->n_scan; k++) {
        tfc_tensor *t = subgraph_output(im, gp, (size_t)k);
        if (!t) return tfc_graph_status(g);
        if (k == 0 && tfc_tensor_dtype(t) != TFC_BOOL) t = tfc_cast(g, t, TFC_BOOL);
        if (k > p->n_carried) { /* a scan output: one more row */
            tfc_shape row = p->scan_shape[k - 1 - p->n_carried];
            memmove(row.dims + 1, row.dims, (size_t)row.rank * sizeof row.dims[0]);
            row.dims[0] = 1;
            row.rank++;
            tfc_tensor *parts[2] = {in[1 + k], tfc_reshape(g, t, row)};
            t = tfc_concat(g, 2, parts, 0);
        }
        out[1 + k] = t;
    }
    return tfc_graph_status(g);
}

/* A scan output's per-iteration shape and dtype from the body's declared output type; 0 when
 * it declares none fully (then the body is probed). */
static int scan_type(const Onnx__ValueInfoProto *vi, tfc_shape *s, enum tfc_dtype *dt)
{
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TypeProto__Tensor *tt =
        tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    int d = tt && tt->has_elem_type ? tfc_onnx_dtype(tt->elem_type) : -1;
    if (!tt || d < 0 || !tt->shape || tt->shape->n_dim >= TFC_MAX_RANK) return 0;
    *dt = (enum tfc_dtype)d;
    s->rank = (int)tt->shape->n_dim;
    for (int i = 0; i < s->rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            dim->dim_value < 0)
            return 0;
        s->dims[i] = dim->dim_value;
    }
    return 1;
}

/* The per-iteration shapes of the scan outputs when the body does not declare them: the body
 * is mapped once into a scratch graph (the names it can see as placeholders of their dtypes and
 * shapes, known values shared) and its scan outputs' shapes read there. */
static tfc_status probe_scan_shapes(struct onnx_import *im, const Onnx__GraphProto *body,
                                    struct loop_plan *p, tfc_tensor *const *init,
                                    enum tfc_dtype *dts)
{
    tfc_graph *g2;
    if (tfc_graph_create(&g2))
        return tfc_graph_error(im->g, TFC_ERR_OUT_OF_MEMORY, "ONNX import: %s", tfc_errmsg());
    struct onnx_import im2 = {.g = g2, .opset = im->opset, .model_dir = im->model_dir,
                              .node = im->node, .depth = im->depth + 1};
    tfc_status st = TFC_OK;
    int shared = 0;
    for (int i = 0; !st && i < im->n_syms; i++, shared++) {
        const struct onnx_sym *s = &im->syms[i];
        tfc_tensor *t = s->tensor ? tfc_placeholder(g2, NULL, tfc_tensor_dtype(s->tensor),
                                                    tfc_tensor_shape(s->tensor)) : NULL;
        st = tfc_graph_status(g2);
        if (!st) st = onnx_sym_add(&im2, s->name, t, NULL);
        if (!st) { /* borrowed: cleared below */
            im2.syms[im2.n_syms - 1].value = s->value;
            im2.syms[im2.n_syms - 1].value_borrowed = 1;
        }
    }
    for (int i = 0; !st && i < 2 + p->n_carried; i++) {
        tfc_tensor *t = tfc_placeholder(g2, NULL, tfc_tensor_dtype(init[i]),
                                        tfc_tensor_shape(init[i]));
        st = tfc_graph_status(g2);
        if (!st) st = onnx_sym_add(&im2, body->input[i]->name, t, NULL);
    }
    if (!st) st = onnx_map_subgraph(&im2, body);
    for (int k = 0; !st && k < p->n_scan; k++) {
        tfc_tensor *t = subgraph_output(&im2, body, (size_t)(1 + p->n_carried + k));
        if (!t) st = tfc_graph_status(g2);
        else p->scan_shape[k] = tfc_tensor_shape(t), dts[k] = tfc_tensor_dtype(t);
        for (int d = 0; !st && d < p->scan_shape[k].rank; d++)
            if (p->scan_shape[k].dims[d] < 0 || p->scan_shape[k].rank >= TFC_MAX_RANK)
                st = onnx_unsupported(im, "scan output '%s' whose shape is not static",
                                      body->output[1 + p->n_carried + k]->name);
    }
    if (st && !tfc_graph_status(im->g))
        tfc_graph_error(im->g, st, "%s", tfc_graph_errmsg(g2));
    for (int i = 0; i < shared && i < im2.n_syms; i++) im2.syms[i].value = NULL;
    onnx_syms_free(&im2);
    tfc_ctx_destroy(im2.ctx);
    tfc_graph_destroy(g2);
    return st ? tfc_graph_status(im->g) : TFC_OK;
}

/* The while's initial values: 0, the condition (true when absent), the carried values, and an
 * empty accumulator per scan output; the invariants let the accumulators grow. */
static tfc_status loop_init(struct onnx_import *im, const Onnx__GraphProto *body,
                            struct loop_plan *p, tfc_tensor **init, tfc_shape *inv)
{
    tfc_graph *g = im->g;
    init[0] = tfc_scalar(g, TFC_INT64, 0);
    init[1] = onnx_has_input(im, 1) ? onnx_input(im, 1) : tfc_scalar(g, TFC_BOOL, 1);
    if (init[1] && tfc_tensor_dtype(init[1]) != TFC_BOOL) init[1] = tfc_cast(g, init[1], TFC_BOOL);
    for (int j = 0; j < p->n_carried; j++) init[2 + j] = onnx_input(im, 2 + j);
    tfc_status st = tfc_graph_status(g);
    enum tfc_dtype dts[ONNX_MAX_CF_VARS];
    int declared = 1;
    for (int k = 0; !st && declared && k < p->n_scan; k++)
        declared = scan_type(body->output[1 + p->n_carried + k], &p->scan_shape[k], &dts[k]);
    if (!st && !declared) st = probe_scan_shapes(im, body, p, init, dts);
    for (int k = 0; !st && k < p->n_scan; k++) {
        tfc_shape *s = &p->scan_shape[k];
        tfc_shape empty = *s;
        memmove(empty.dims + 1, empty.dims, (size_t)empty.rank * sizeof empty.dims[0]);
        empty.dims[0] = 0;
        empty.rank++;
        init[2 + p->n_carried + k] = tfc_fill(g, empty, dts[k], 0);
    }
    if (!st) st = tfc_graph_status(g);
    int n = 2 + p->n_carried + p->n_scan;
    for (int i = 0; !st && i < n; i++) {
        inv[i] = tfc_tensor_shape(init[i]);
        if (i >= 2 + p->n_carried) inv[i].dims[0] = -1;
    }
    return st;
}

ONNX_BUILDER(onnx_loop)
{
    const Onnx__NodeProto *n = im->node;
    const Onnx__GraphProto *body = graph_attr(im, "body");
    if (!body)
        return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (Loop): the graph "
                               "attribute body is missing", n->name);
    struct loop_plan p = {.n_carried = n->n_input >= 2 ? (int)n->n_input - 2 : 0};
    p.n_scan = (int)n->n_output - p.n_carried;
    if (p.n_scan < 0 || body->n_input != (size_t)(2 + p.n_carried) ||
        body->n_output != (size_t)(1 + p.n_carried + p.n_scan))
        return tfc_graph_error(im->g, TFC_ERR_INVALID_ARGUMENT, "ONNX node '%s' (Loop): %zu "
                               "inputs and %zu outputs, so the body must take %d inputs and give "
                               "%d outputs, not %zu and %zu", n->name, n->n_input, n->n_output,
                               2 + p.n_carried, 1 + p.n_carried + p.n_scan, body->n_input,
                               body->n_output);
    int n_vars = 2 + p.n_carried + p.n_scan;
    if (n_vars > ONNX_MAX_CF_VARS)
        return onnx_unsupported(im, "%d loop-carried and scan values (at most %d)",
                                n_vars - 2, ONNX_MAX_CF_VARS - 2);
    if (onnx_has_input(im, 0) && !(p.max_trips = onnx_input(im, 0))) return tfc_graph_status(im->g);
    if (p.max_trips && tfc_tensor_dtype(p.max_trips) != TFC_INT64)
        p.max_trips = tfc_cast(im->g, p.max_trips, TFC_INT64);
    tfc_tensor *init[ONNX_MAX_CF_VARS], *res[ONNX_MAX_CF_VARS];
    tfc_shape inv[ONNX_MAX_CF_VARS];
    tfc_status st = loop_init(im, body, &p, init, inv);
    if (st) return st;
    tfc_while_opts o = {.shape_invariants = inv};
    char name[256];
    tfc_cflow *cf = tfc_while_new(im->g, cf_name(im, name, sizeof name), n_vars, init, &o);
    if (!cf) return tfc_graph_status(im->g);
    st = map_region(im, cf, 0, NULL, 0, 1, loop_cond, &p);
    if (!st) st = map_region(im, cf, 1, body, n_vars - p.n_scan, n_vars, loop_body, &p);
    if (!st) st = tfc_cflow_finish(cf, res);
    for (int k = 0; !st && k < p.n_carried + p.n_scan; k++) outs[k] = res[2 + k];
    return st;
}
