/* control_flow.c: cond and while_loop as graph builders. A control-flow node owns two regions
 * of the graph (cond: then, else; while: cond, body) built through callbacks or in the two-step
 * form (create, enter a region, build into its input placeholders, leave with its outputs,
 * finish). Outer tensors used inside are captured (graph/graph.c); sched/cflow_run.c runs it. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "control_flow.h"

enum { CF_N_OUT };
static const struct tfc_attr_def cf_attrs[] = {[CF_N_OUT] = {"n_out", TFC_ATTR_INT, 1}};

static int cf_n_outputs(const struct tfc_kattr *attrs)
{
    return (int)attrs[CF_N_OUT].i;
}

/* Placeholder descriptions: tfc_cflow_finish sets the outputs from the regions (a while's
 * outputs have the loop variables' invariant shapes, a cond's what both branches allow). */
static tfc_status infer_cf(const struct tfc_infer *in)
{
    for (int k = 0; k < in->n_out; k++) in->out[k] = in->in[0];
    return TFC_OK;
}

const struct tfc_op tfc_op_while = {
    .name = "while", .flags = TFC_OP_VARIADIC, .attrs = cf_attrs,
    .n_attrs = TFC_ATTR_COUNT(cf_attrs), .n_outputs = cf_n_outputs, .infer = infer_cf,
};
const struct tfc_op tfc_op_cond = {
    .name = "cond", .flags = TFC_OP_VARIADIC, .attrs = cf_attrs,
    .n_attrs = TFC_ATTR_COUNT(cf_attrs), .n_outputs = cf_n_outputs, .infer = infer_cf,
};

/* Markers: a region_enter node (in the parent region, named "<node>/<region>", inputs the loop
 * variables' initial values or the predicate) opens each region, a region_leave node (its
 * last, inputs the region's outputs) closes it. They never run (nothing consumes them); they
 * let a stored graph be rebuilt in order by tfc_cflow_import_* (graph/serialize.c). */
static const struct tfc_attr_def mark_attrs[] = {
    [MARK_KIND] = {"kind", TFC_ATTR_INT, 0},
    [MARK_REGION] = {"region", TFC_ATTR_INT, 0},
    [MARK_N] = {"n", TFC_ATTR_INT, 1},
    [MARK_MAX_ITER] = {"maximum_iterations", TFC_ATTR_INT, 0},
};

static tfc_status infer_mark(const struct tfc_infer *in)
{
    in->out[0] = (struct tfc_desc){TFC_BOOL, tfc_shape_of(0, NULL)};
    return TFC_OK;
}

const struct tfc_op tfc_op_region_enter = {
    .name = "region_enter", .flags = TFC_OP_VARIADIC | TFC_OP_NO_GRADIENT, .attrs = mark_attrs,
    .n_attrs = TFC_ATTR_COUNT(mark_attrs), .infer = infer_mark,
};
const struct tfc_op tfc_op_region_leave = {
    .name = "region_leave", .flags = TFC_OP_VARIADIC | TFC_OP_NO_GRADIENT, .attrs = mark_attrs,
    .n_attrs = TFC_ATTR_COUNT(mark_attrs), .infer = infer_mark,
};

static tfc_status build_marker(struct tfc_cflow *cf, int r, const char *name, int enter,
                               int n_in, tfc_tensor *const *in)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_region_enter, at);
    at[MARK_KIND].i = cf->fwd ? TFC_CF_MARK_REVERSE : cf->kind;
    at[MARK_REGION].i = r;
    at[MARK_N].i = cf->n_vars;
    at[MARK_MAX_ITER].i = cf->max_iter;
    struct tfc_node *n = tfc_node_build(cf->g, enter ? &tfc_op_region_enter : &tfc_op_region_leave,
                                        name, n_in, in, at);
    return n ? TFC_OK : cf->g->status;
}

int tfc_cf_pred_value(enum tfc_dtype dtype, const void *data)
{
    switch (dtype) {
    case TFC_BOOL: return *(const uint8_t *)data != 0;
    case TFC_INT32: return *(const int32_t *)data != 0;
    case TFC_INT64: return *(const int64_t *)data != 0;
    default: return 0; /* the builders accept no other predicate */
    }
}

static const char *region_label(const struct tfc_cflow *cf, int r)
{
    static const char *const names[2][2] = {{"then", "else"}, {"cond", "body"}};
    return names[cf->kind == TFC_CF_WHILE][r];
}

static const char *kind_name(const struct tfc_cflow *cf)
{
    return cf->kind == TFC_CF_WHILE ? "while" : "cond";
}

/* ---- captures --------------------------------------------------------------------- */

int tfc_region_within(const tfc_graph *g, int inner, int outer)
{
    for (int r = inner;; r = g->regions[r].parent) {
        if (r == outer) return 1;
        if (r == 0) return 0;
    }
}

/* Variables and constants are the session's state, never copied into a region. */
static int is_global_source(const struct tfc_node *n)
{
    return (n->op->flags & TFC_OP_SOURCE) && n->op != &tfc_op_placeholder;
}

/* t (of a region enclosing r) as seen inside region r, the current one: the placeholder
 * "capture_<k>" that captures it, created on first use. A tensor of a grandparent region is
 * captured directly; the control-flow node captures it into its own region when it is built,
 * so each region's nodes are built (and stored) in one run. NULL on error. */
tfc_tensor *tfc_cflow_capture(tfc_graph *g, tfc_tensor *t, int r, const char *name)
{
    if (t->node->region == r || is_global_source(t->node)) return t;
    struct tfc_region *reg = &g->regions[r];
    for (int i = 0; i < reg->n_caps; i++)
        if (reg->cap_outer[i] == t) return reg->cap_inner[i];
    if (reg->n_caps == reg->cap_caps) {
        int cap = reg->cap_caps ? reg->cap_caps * 2 : 4;
        tfc_tensor **o = realloc(reg->cap_outer, sizeof *o * (size_t)cap);
        if (o) reg->cap_outer = o;
        tfc_tensor **in = o ? realloc(reg->cap_inner, sizeof *in * (size_t)cap) : NULL;
        if (!in) return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "capture: no memory");
        reg->cap_inner = in;
        reg->cap_caps = cap;
    }
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_placeholder, at);
    at[SOURCE_DTYPE].i = t->desc.dtype;
    at[SOURCE_SHAPE].n = t->desc.shape.rank;
    for (int i = 0; i < t->desc.shape.rank; i++) at[SOURCE_SHAPE].v[i] = t->desc.shape.dims[i];
    char gen[32];
    if (!name) {
        snprintf(gen, sizeof gen, "capture_%d", reg->n_caps);
        name = gen;
    }
    struct tfc_node *p = tfc_node_build(g, &tfc_op_placeholder, name, 0, NULL, at);
    if (!p) return NULL;
    reg = &g->regions[r];
    reg->cap_outer[reg->n_caps] = t;
    reg->cap_inner[reg->n_caps++] = &p->outputs[0];
    return &p->outputs[0];
}

/* Inside a region, inputs from enclosing regions become captures; a tensor of a region that
 * does not enclose the current one cannot be used (the branch or body may not run). */
static tfc_status region_inputs(tfc_graph *g, const char *label, const struct tfc_op *op,
                                int n_inputs, tfc_tensor *const *inputs, tfc_tensor **out)
{
    for (int i = 0; i < n_inputs; i++) {
        tfc_tensor *t = inputs[i];
        out[i] = t;
        if (t->node->region == g->cur_region || is_global_source(t->node)) continue;
        if (!tfc_region_within(g, g->cur_region, t->node->region))
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "node '%s' (%s): input %d ('%s') is inside a branch or body of "
                                   "'%s' and cannot be used outside it (use that node's outputs)",
                                   label, op->name, i, t->name,
                                   g->regions[t->node->region].owner);
        if (!(out[i] = tfc_cflow_capture(g, t, g->cur_region, NULL))) return g->status;
    }
    return TFC_OK;
}

/* ---- ownership ------------------------------------------------------------------------- */

static void cflow_free(struct tfc_cflow *cf)
{
    for (int r = 0; r < 2; r++) {
        free(cf->reg[r].in);
        free(cf->reg[r].out);
    }
    free(cf->init);
    free(cf->invariant);
    free(cf->stack_grad_sums);
    free(cf->name);
    free(cf->rel_name);
    free(cf);
}

static void cflows_free(tfc_graph *g)
{
    for (struct tfc_cflow *cf = g->cflows, *next; cf; cf = next) {
        next = cf->next;
        cflow_free(cf);
    }
    g->cflows = NULL;
}

/* Appends region r of cf to g->regions (index 0 stands for the top level). */
static int region_new(tfc_graph *g, struct tfc_cflow *cf, int r)
{
    int need = (g->n_regions ? g->n_regions : 1) + 1;
    if (need > g->cap_regions) {
        int cap = g->cap_regions ? g->cap_regions * 2 : 8;
        struct tfc_region *regs = realloc(g->regions, sizeof *regs * (size_t)cap);
        if (!regs) return -1;
        memset(regs + g->cap_regions, 0, sizeof *regs * (size_t)(cap - g->cap_regions));
        g->regions = regs;
        g->cap_regions = cap;
    }
    if (!g->n_regions) g->n_regions = 1;
    struct tfc_region *reg = &g->regions[g->n_regions];
    memset(reg, 0, sizeof *reg);
    reg->parent = cf->parent_region;
    reg->cf = cf;
    reg->owner = cf->name;
    cf->reg[r].id = g->n_regions++;
    return 0;
}

/* A builder for a node of kind named name (NULL: generated) in g's current region. */
static struct tfc_cflow *cflow_new(tfc_graph *g, enum tfc_cflow_kind kind, const char *name,
                                   int n_vars)
{
    struct tfc_cflow *cf = calloc(1, sizeof *cf);
    char gen[64], full[512];
    if (!name) {
        snprintf(gen, sizeof gen, "%s_%d", kind == TFC_CF_WHILE ? "while" : "cond", g->n_nodes);
        name = gen;
    }
    const char *scope = tfc_scope_current(g);
    snprintf(full, sizeof full, "%s%s%s", scope, *scope ? "/" : "", name);
    if (!cf) return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "%s: no memory", name);
    cf->g = g;
    cf->kind = kind;
    cf->cur = -1;
    cf->n_vars = n_vars;
    cf->parent_region = g->cur_region;
    cf->name = strdup(full);
    cf->rel_name = strdup(name);
    cf->init = calloc((size_t)n_vars + 1, sizeof *cf->init);
    cf->invariant = calloc((size_t)n_vars + 1, sizeof *cf->invariant);
    if (!cf->name || !cf->rel_name || !cf->init || !cf->invariant || region_new(g, cf, 0) ||
        region_new(g, cf, 1)) {
        cflow_free(cf);
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "%s: no memory", name);
    }
    for (int r = 0; r < 2; r++) g->regions[cf->reg[r].id].owner = cf->name;
    cf->next = g->cflows;
    g->cflows = cf;
    g->cflows_free = cflows_free;
    g->region_inputs = region_inputs;
    return cf;
}

/* ---- checks ---------------------------------------------------------------------------- */

/* Whether a value of shape s fits shape invariant inv (same rank; -1 dims take any size). */
static int shape_fits(const tfc_shape *inv, const tfc_shape *s)
{
    if (inv->rank != s->rank) return 0;
    for (int d = 0; d < s->rank; d++)
        if (inv->dims[d] >= 0 && inv->dims[d] != s->dims[d]) return 0;
    return 1;
}

static tfc_status check_pred(tfc_graph *g, const struct tfc_cflow *cf, const tfc_tensor *p,
                             const char *what)
{
    char sh[96];
    if (!p)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': %s is NULL",
                               kind_name(cf), cf->name, what);
    if (p->desc.dtype != TFC_BOOL && p->desc.dtype != TFC_INT32 && p->desc.dtype != TFC_INT64)
        return tfc_graph_error(g, TFC_ERR_DTYPE,
                               "%s '%s': %s '%s' must be bool, int32 or int64, got %s",
                               kind_name(cf), cf->name, what, p->name,
                               tfc_dtype_name(p->desc.dtype));
    if (tfc_shape_numel(&p->desc.shape) != 1)
        return tfc_graph_error(g, TFC_ERR_SHAPE,
                               "%s '%s': %s '%s' must be a scalar (one element), got shape %s",
                               kind_name(cf), cf->name, what, p->name,
                               tfc_shape_str(&p->desc.shape, sh, sizeof sh));
    return TFC_OK;
}

tfc_cflow *tfc_while_new(tfc_graph *g, const char *name, int n_loop_vars,
                         tfc_tensor *const *loop_vars, const tfc_while_opts *opts)
{
    if (!g || g->status) return NULL;
    const char *label = name ? name : "while";
    if (n_loop_vars < 1 || n_loop_vars > TFC_MAX_OPERANDS / 2)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "while '%s': %d loop variables is outside [1, %d]", label,
                              n_loop_vars, TFC_MAX_OPERANDS / 2);
    for (int i = 0; i < n_loop_vars; i++)
        if (!loop_vars || !loop_vars[i])
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                                  "while '%s': loop variable %d is NULL", label, i);
    if (opts && opts->maximum_iterations < 0)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "while '%s': maximum_iterations is %lld (0: no limit, or a "
                              "positive count)", label, (long long)opts->maximum_iterations);
    for (int i = 0; opts && opts->shape_invariants && i < n_loop_vars; i++) {
        const tfc_shape *inv = &opts->shape_invariants[i], *s = &loop_vars[i]->desc.shape;
        char a[96], b[96];
        if (inv->rank < 0 || inv->rank > TFC_MAX_RANK || !shape_fits(inv, s))
            return tfc_graph_fail(g, TFC_ERR_SHAPE,
                                  "while '%s': loop variable %d ('%s') has shape %s, which its "
                                  "shape invariant %s does not allow", label, i,
                                  loop_vars[i]->name, tfc_shape_str(s, a, sizeof a),
                                  tfc_shape_str(inv, b, sizeof b));
    }
    struct tfc_cflow *cf = cflow_new(g, TFC_CF_WHILE, name, n_loop_vars);
    if (!cf) return NULL;
    cf->max_iter = opts ? opts->maximum_iterations : 0;
    for (int i = 0; i < n_loop_vars; i++) {
        cf->init[i] = loop_vars[i];
        cf->invariant[i] = opts && opts->shape_invariants ? opts->shape_invariants[i]
                                                          : loop_vars[i]->desc.shape;
    }
    return cf;
}

tfc_cflow *tfc_cond_new(tfc_graph *g, const char *name, tfc_tensor *pred, int n_outputs)
{
    if (!g || g->status) return NULL;
    const char *label = name ? name : "cond";
    if (n_outputs < 1 || n_outputs > TFC_MAX_OPERANDS)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "cond '%s': %d outputs is outside [1, %d]", label, n_outputs,
                              TFC_MAX_OPERANDS);
    struct tfc_cflow *cf = cflow_new(g, TFC_CF_COND, name, n_outputs);
    if (!cf || check_pred(g, cf, pred, "predicate")) return NULL;
    cf->pred = pred;
    return cf;
}

/* ---- regions --------------------------------------------------------------------------- */

/* Leaves the region entered now: name scopes and the current region as before. */
static void region_exit(struct tfc_cflow *cf)
{
    if (cf->cur < 0) return;
    tfc_graph *g = cf->g;
    tfc_status st = g->status; /* popping what enter pushed cannot fail: keep the status */
    g->status = TFC_OK;
    tfc_scope_pop(g);
    tfc_scope_pop(g);
    g->status = st;
    g->cur_region = cf->saved_region;
    cf->cur = -1;
}

/* The placeholders of the loop variables in region r. */
static tfc_status make_inputs(struct tfc_cflow *cf, struct tfc_cf_region *reg)
{
    tfc_graph *g = cf->g;
    reg->n_in = cf->kind == TFC_CF_WHILE ? cf->n_vars : 0;
    int n_stacked = cf->fwd && reg == &cf->reg[1] ? tfc_cflow_n_stacked(cf->fwd) : 0;
    reg->in = calloc((size_t)(reg->n_in + n_stacked) + 1, sizeof *reg->in);
    if (!reg->in) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "%s: no memory", cf->name);
    for (int i = 0; i < reg->n_in + n_stacked; i++) {
        struct tfc_kattr at[TFC_MAX_ATTRS];
        char nm[32];
        /* a reverse body's inputs after the carried ones: its forward loop's stacked values
         * (that loop's variables, then, for a reverse loop, what it stacked in turn) */
        const struct tfc_cflow *of = cf;
        int k = i;
        while (k >= of->n_vars && of->fwd) {
            k -= of->n_vars;
            of = of->fwd;
        }
        tfc_attrs_default(&tfc_op_placeholder, at);
        at[SOURCE_DTYPE].i = of->init[k]->desc.dtype;
        at[SOURCE_SHAPE].n = of->invariant[k].rank;
        for (int d = 0; d < of->invariant[k].rank; d++)
            at[SOURCE_SHAPE].v[d] = of->invariant[k].dims[d];
        snprintf(nm, sizeof nm, i < reg->n_in ? "var_%d" : "stacked_%d",
                 i < reg->n_in ? i : i - reg->n_in);
        struct tfc_node *n = tfc_node_build(g, &tfc_op_placeholder, nm, 0, NULL, at);
        if (!n) return g->status;
        reg->in[i] = &n->outputs[0];
    }
    reg->n_in += n_stacked;
    return TFC_OK;
}

tfc_status tfc_cflow_enter(tfc_cflow *cf, int region, tfc_tensor **inputs)
{
    if (!cf) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "cflow_enter: cf is NULL");
    tfc_graph *g = cf->g;
    if (g->status) return g->status;
    if (cf->node)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': already finished",
                               kind_name(cf), cf->name);
    if (region != 0 && region != 1)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "%s '%s': region %d is not 0 (%s) or 1 (%s)", kind_name(cf),
                               cf->name, region, region_label(cf, 0), region_label(cf, 1));
    if (cf->cur >= 0 || cf->reg[region].entered)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "%s '%s': region %s is %s", kind_name(cf), cf->name,
                               region_label(cf, cf->cur >= 0 ? cf->cur : region),
                               cf->cur >= 0 ? "still entered (leave it first)" : "already built");
    if (g->cur_region != cf->parent_region)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "%s '%s': enter it from the region it was created in", kind_name(cf),
                               cf->name);
    char mark[512];
    snprintf(mark, sizeof mark, "%s/%s", cf->rel_name, region_label(cf, region));
    /* a reverse loop's markers also name its forward loop (init[n_vars]), for the store */
    if (build_marker(cf, region, mark, 1,
                     cf->kind == TFC_CF_WHILE ? cf->n_vars + (cf->fwd != NULL) : 1,
                     cf->kind == TFC_CF_WHILE ? cf->init : &cf->pred))
        return g->status;
    if (tfc_scope_push(g, cf->rel_name)) return g->status;
    if (tfc_scope_push(g, region_label(cf, region))) {
        tfc_status st = g->status;
        g->status = TFC_OK;
        tfc_scope_pop(g);
        g->status = st;
        return st;
    }
    cf->saved_region = g->cur_region;
    g->cur_region = cf->reg[region].id;
    cf->reg[region].lo = g->n_nodes; /* a region's nodes are built in one run of ids */
    cf->cur = region;
    cf->reg[region].entered = 1;
    tfc_status st = make_inputs(cf, &cf->reg[region]);
    if (st) {
        region_exit(cf);
        return st;
    }
    for (int i = 0; inputs && i < cf->reg[region].n_in; i++) inputs[i] = cf->reg[region].in[i];
    return TFC_OK;
}

/* Output i of a region as a tensor of the region: an outer one goes through an identity inside,
 * so each region's outputs are its own values (a region placeholder stays as it is). */
static tfc_tensor *region_output(struct tfc_cflow *cf, tfc_tensor *t)
{
    if (t->node->region == cf->reg[cf->cur].id) return t;
    return tfc_identity(cf->g, t);
}

/* A body's output i against loop variable i: same dtype, a shape its invariant allows. */
static tfc_status check_body_output(struct tfc_cflow *cf, int i, const tfc_tensor *t)
{
    tfc_graph *g = cf->g;
    const tfc_tensor *v = cf->init[i];
    char a[96], b[96];
    if (t->desc.dtype != v->desc.dtype)
        return tfc_graph_error(g, TFC_ERR_DTYPE,
                               "while '%s': body output %d ('%s') is %s, but loop variable %d "
                               "('%s') is %s", cf->name, i, t->name,
                               tfc_dtype_name(t->desc.dtype), i, v->name,
                               tfc_dtype_name(v->desc.dtype));
    if (!shape_fits(&cf->invariant[i], &t->desc.shape))
        return tfc_graph_error(g, TFC_ERR_SHAPE,
                               "while '%s': body output %d ('%s') has shape %s, but loop "
                               "variable %d ('%s') keeps shape %s (a shape invariant with -1 "
                               "dims lets it change)", cf->name, i, t->name,
                               tfc_shape_str(&t->desc.shape, a, sizeof a), i, v->name,
                               tfc_shape_str(&cf->invariant[i], b, sizeof b));
    return TFC_OK;
}

static tfc_status leave_checked(struct tfc_cflow *cf, int n_outputs, tfc_tensor *const *outputs)
{
    tfc_graph *g = cf->g;
    struct tfc_cf_region *reg = &cf->reg[cf->cur];
    int want = cf->kind == TFC_CF_WHILE && cf->cur == 0 ? 1 : cf->n_vars;
    if (g->status) return g->status; /* a builder inside failed: that is the error */
    if (n_outputs != want)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "%s '%s': the %s returns %d tensors, %d expected%s",
                               kind_name(cf), cf->name, region_label(cf, cf->cur), n_outputs,
                               want, cf->kind == TFC_CF_WHILE && cf->cur == 1
                                         ? " (one per loop variable)" : "");
    reg->out = calloc((size_t)want + 1, sizeof *reg->out);
    if (!reg->out) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "%s: no memory", cf->name);
    for (int i = 0; i < want; i++) {
        if (!outputs || !outputs[i])
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': %s output %d is NULL",
                                   kind_name(cf), cf->name, region_label(cf, cf->cur), i);
        if (!(reg->out[i] = region_output(cf, outputs[i]))) return g->status;
    }
    reg->n_out = want;
    if (cf->kind == TFC_CF_WHILE && cf->cur == 0)
        return check_pred(g, cf, reg->out[0], "the cond function's predicate");
    for (int i = 0; cf->kind == TFC_CF_WHILE && i < want; i++)
        if (check_body_output(cf, i, reg->out[i])) return g->status;
    return TFC_OK;
}

tfc_status tfc_cflow_leave(tfc_cflow *cf, int n_outputs, tfc_tensor *const *outputs)
{
    if (!cf) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "cflow_leave: cf is NULL");
    if (cf->cur < 0)
        return tfc_graph_error(cf->g, TFC_ERR_INVALID_ARGUMENT,
                               "%s '%s': no region is entered", kind_name(cf), cf->name);
    tfc_status st = leave_checked(cf, n_outputs, outputs);
    if (!st) st = build_marker(cf, cf->cur, "leave", 0, cf->reg[cf->cur].n_out,
                               cf->reg[cf->cur].out);
    if (!st) cf->reg[cf->cur].hi = cf->g->n_nodes - 1;
    region_exit(cf);
    return st;
}

/* A cond's output k: both branches' dtype and rank; dims that differ become -1. */
static tfc_status merge_branches(struct tfc_cflow *cf, int k, struct tfc_desc *d)
{
    const tfc_tensor *a = cf->reg[0].out[k], *b = cf->reg[1].out[k];
    char sa[96], sb[96];
    if (a->desc.dtype != b->desc.dtype || a->desc.shape.rank != b->desc.shape.rank)
        return tfc_graph_error(cf->g, a->desc.dtype != b->desc.dtype ? TFC_ERR_DTYPE
                                                                     : TFC_ERR_SHAPE,
                               "cond '%s': output %d is %s %s in then ('%s') but %s %s in "
                               "else ('%s')", cf->name, k, tfc_dtype_name(a->desc.dtype),
                               tfc_shape_str(&a->desc.shape, sa, sizeof sa), a->name,
                               tfc_dtype_name(b->desc.dtype),
                               tfc_shape_str(&b->desc.shape, sb, sizeof sb), b->name);
    *d = a->desc;
    for (int i = 0; i < d->shape.rank; i++)
        if (a->desc.shape.dims[i] != b->desc.shape.dims[i]) d->shape.dims[i] = -1;
    return TFC_OK;
}

/* The node's inputs: the predicate or the loop variables, then each region's captures. */
static int node_inputs(struct tfc_cflow *cf, tfc_tensor **ins)
{
    tfc_graph *g = cf->g;
    int n = 0;
    if (cf->kind == TFC_CF_COND)
        ins[n++] = cf->pred;
    else
        for (int i = 0; i < cf->n_vars; i++) ins[n++] = cf->init[i];
    for (int r = 0; r < 2; r++) {
        const struct tfc_region *reg = &g->regions[cf->reg[r].id];
        cf->reg[r].cap_base = n;
        if (n + reg->n_caps > TFC_MAX_OPERANDS) {
            tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                            "%s '%s': %d inputs with its captured tensors, at most %d",
                            kind_name(cf), cf->name, n + reg->n_caps, TFC_MAX_OPERANDS);
            return -1;
        }
        for (int i = 0; i < reg->n_caps; i++) ins[n++] = reg->cap_outer[i];
    }
    return n;
}

tfc_status tfc_cflow_finish(tfc_cflow *cf, tfc_tensor **outputs)
{
    if (!cf) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "cflow_finish: cf is NULL");
    tfc_graph *g = cf->g;
    if (cf->cur >= 0) {
        region_exit(cf);
        tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': finished with a region entered",
                        kind_name(cf), cf->name);
    }
    if (g->status) return g->status;
    if (cf->node)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': already finished",
                               kind_name(cf), cf->name);
    for (int r = 0; r < 2; r++)
        if (!cf->reg[r].out)
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': its %s was not built",
                                   kind_name(cf), cf->name, region_label(cf, r));
    struct tfc_desc out[TFC_MAX_OPERANDS];
    for (int k = 0; k < cf->n_vars; k++) {
        if (cf->kind == TFC_CF_WHILE)
            out[k] = (struct tfc_desc){cf->init[k]->desc.dtype, cf->invariant[k]};
        else if (merge_branches(cf, k, &out[k]))
            return g->status;
    }
    tfc_tensor *ins[TFC_MAX_OPERANDS];
    int n_in = node_inputs(cf, ins);
    if (n_in < 0) return g->status;
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_while, at);
    at[CF_N_OUT].i = cf->n_vars;
    struct tfc_node *n = tfc_node_build(g, cf->kind == TFC_CF_WHILE ? &tfc_op_while
                                                                    : &tfc_op_cond,
                                        cf->rel_name, n_in, ins, at);
    if (!n) return g->status;
    n->cflow = cf;
    cf->node = n;
    for (int k = 0; k < cf->n_vars; k++) n->outputs[k].desc = out[k];
    g->n_cflow_nodes++;
    for (int k = 0; outputs && k < cf->n_vars; k++) outputs[k] = &n->outputs[k];
    return TFC_OK;
}

/* ---- the callback forms ---------------------------------------------------------------- */

/* Builds region r of cf with fn; its n_out outputs end the region. */
static tfc_status build_region(struct tfc_cflow *cf, int r, tfc_region_fn fn, void *arg,
                               int n_out)
{
    tfc_graph *g = cf->g;
    tfc_tensor *in[TFC_MAX_OPERANDS], *out[TFC_MAX_OPERANDS];
    memset(out, 0, sizeof out);
    if (!fn)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': the %s function is NULL",
                               kind_name(cf), cf->name, region_label(cf, r));
    if (tfc_cflow_enter(cf, r, in)) return g->status;
    tfc_status st = fn(g, arg, in, out);
    if (st && !g->status)
        tfc_graph_error(g, st, "%s '%s': the %s function failed (status %d)", kind_name(cf),
                        cf->name, region_label(cf, r), (int)st);
    return tfc_cflow_leave(cf, n_out, out);
}

tfc_status tfc_while_loop(tfc_graph *g, const char *name, tfc_region_fn cond_fn,
                          tfc_region_fn body_fn, void *arg, int n_loop_vars,
                          tfc_tensor *const *loop_vars, const tfc_while_opts *opts,
                          tfc_tensor **outputs)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "while_loop: graph is NULL");
    struct tfc_cflow *cf = tfc_while_new(g, name, n_loop_vars, loop_vars, opts);
    if (!cf) return g->status;
    if (build_region(cf, 0, cond_fn, arg, 1) || build_region(cf, 1, body_fn, arg, n_loop_vars))
        return g->status;
    return tfc_cflow_finish(cf, outputs);
}

tfc_status tfc_cond(tfc_graph *g, const char *name, tfc_tensor *pred, tfc_region_fn then_fn,
                    tfc_region_fn else_fn, void *arg, int n_outputs, tfc_tensor **outputs)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "cond: graph is NULL");
    struct tfc_cflow *cf = tfc_cond_new(g, name, pred, n_outputs);
    if (!cf) return g->status;
    if (build_region(cf, 0, then_fn, arg, n_outputs) ||
        build_region(cf, 1, else_fn, arg, n_outputs))
        return g->status;
    return tfc_cflow_finish(cf, outputs);
}

/* ---- reverse loops (gradients of while loops) ------------------------------------------ */

int tfc_cflow_n_stacked(const struct tfc_cflow *cf)
{
    return cf->n_vars + (cf->fwd ? tfc_cflow_n_stacked(cf->fwd) : 0);
}

void tfc_cflow_set_forward(struct tfc_cflow *cf, struct tfc_cflow *fwd)
{
    cf->fwd = fwd;
    cf->init[cf->n_vars] = &fwd->node->outputs[0]; /* init has room for one more */
    fwd->keep_stack = 1;
}

struct tfc_cflow *tfc_while_reverse_new(tfc_graph *g, const char *name, struct tfc_cflow *fwd,
                                        int n_vars, tfc_tensor *const *init,
                                        const tfc_shape *invariant)
{
    tfc_while_opts opts = {.shape_invariants = invariant};
    struct tfc_cflow *cf = tfc_while_new(g, name, n_vars, init, &opts);
    if (!cf) return NULL;
    tfc_cflow_set_forward(cf, fwd);
    /* The runner counts the iterations from the stack and never runs this predicate; it is
     * built so that the node is an ordinary while for everything else (markers, checks). */
    tfc_tensor *pred = NULL;
    if (tfc_cflow_enter(cf, 0, NULL)) return NULL;
    pred = tfc_scalar(g, TFC_BOOL, 1);
    if (tfc_cflow_leave(cf, 1, &pred)) return NULL;
    return cf;
}
