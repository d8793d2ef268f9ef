/* control_flow_grad.c: gradients through cond and while_loop (issue 13, item 3). Both rebuild
 * (clone) the forward branch or body inside a region of a new control-flow node and
 * differentiate the clone there with tfc_gradients. A cond's gradient is a cond on the same
 * predicate (the branch that ran); a while's is a reverse loop (sched/cflow_run.c runs it) whose
 * body runs once per forward iteration, last first, from that iteration's loop variables, which
 * the forward loop keeps on its stack. Only loop variables are kept: a body's other values are
 * recomputed in the reverse body, so the gradient equals that of the unrolled graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control_flow.h"
#include "grad.h"

#define MAX_OP TFC_MAX_OPERANDS

static int is_global_source(const struct tfc_node *n)
{
    return (n->op->flags & TFC_OP_SOURCE) && n->op != &tfc_op_placeholder;
}

static int is_float(const tfc_tensor *t)
{
    return tfc_dtype_is_float(t->desc.dtype);
}

static const char *label_of(const struct tfc_cflow *cf, int r)
{
    static const char *const names[2][2] = {{"then", "else"}, {"cond", "body"}};
    return names[cf->kind == TFC_CF_WHILE][r];
}

static tfc_tensor *zeros_of(tfc_graph *g, tfc_tensor *t)
{
    return tfc_shape_numel(&t->desc.shape) >= 0 ? tfc_fill(g, t->desc.shape, t->desc.dtype, 0)
                                                : tfc_zeros_like(g, t);
}

int tfc_cflow_globals(const struct tfc_node *n, int max, tfc_tensor **out)
{
    const struct tfc_cflow *cf = n->cflow;
    const tfc_graph *g = n->graph;
    int cnt = 0;
    for (int r = 0; r < 2; r++)
        for (int id = cf->reg[r].lo; cf->reg[r].out && id <= cf->reg[r].hi; id++) {
            const struct tfc_node *m = g->nodes[id];
            for (int i = 0; i < m->n_inputs; i++) {
                tfc_tensor *t = m->inputs[i];
                if (!is_global_source(t->node) || !is_float(t)) continue;
                int seen = 0;
                for (int k = 0; k < cnt && k < max && !seen; k++) seen = out[k] == t;
                if (seen) continue;
                if (cnt < max) out[cnt] = t;
                cnt++;
            }
        }
    return cnt;
}

/* ---- cloning a region ------------------------------------------------------------------ */

struct clone {
    tfc_graph *g;
    const char *what;        /* the node whose gradient is built, for messages */
    int lo, hi;              /* the node ids the maps cover */
    tfc_tensor **ph;         /* per id - lo: what a region placeholder stands for */
    struct tfc_node **nn;    /* per id - lo: the clone of a node */
};

static tfc_status clone_init(struct clone *c, tfc_graph *g, const char *what, int lo, int hi)
{
    *c = (struct clone){g, what, lo, hi, calloc((size_t)(hi - lo + 1), sizeof *c->ph),
                        calloc((size_t)(hi - lo + 1), sizeof *c->nn)};
    if (!c->ph || !c->nn)
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "gradient of '%s': no memory", what);
    return TFC_OK;
}

static void clone_free(struct clone *c)
{
    free(c->ph);
    free(c->nn);
}

/* t as the clone sees it: outside the cloned ids, or a variable or constant, t itself. */
static tfc_tensor *map_tensor(const struct clone *c, tfc_tensor *t)
{
    int id = t->node->id;
    if (id < c->lo || id > c->hi) return t;
    if (c->ph[id - c->lo]) return c->ph[id - c->lo];
    if (c->nn[id - c->lo]) return &c->nn[id - c->lo]->outputs[t->index];
    return t;
}

static tfc_status clone_region(struct clone *c, const struct tfc_cflow *cf, int r,
                               const struct tfc_node *n, tfc_tensor *const *in, tfc_tensor **out);

/* The name of forward node m (under prefix) for its clone, relative to the open scope; NULL
 * (a generated one) when it is not under prefix or the clone's name is taken. */
static const char *clone_name(tfc_graph *g, const struct tfc_node *m, const char *prefix,
                              char *buf, size_t len)
{
    size_t pl = strlen(prefix);
    if (strncmp(m->name, prefix, pl)) return NULL;
    const char *scope = tfc_scope_current(g);
    snprintf(buf, len, "%s%s%s", scope, *scope ? "/" : "", m->name + pl);
    if (tfc_graph_find(g, buf)) return NULL;
    return m->name + pl;
}

/* A cond or while node inside the cloned region, rebuilt with its regions cloned. */
static tfc_status clone_cflow(struct clone *c, struct tfc_node *m, const char *rel)
{
    tfc_graph *g = c->g;
    const struct tfc_cflow *cf = m->cflow;
    if (cf->fwd)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "gradient of '%s': it holds '%s', the gradient loop of another "
                               "while_loop; gradients of gradients through a while_loop are "
                               "not supported yet", c->what, m->name);
    tfc_tensor *in[MAX_OP], *out[MAX_OP];
    for (int i = 0; i < cf->n_vars && cf->kind == TFC_CF_WHILE; i++)
        in[i] = map_tensor(c, m->inputs[i]);
    tfc_while_opts opts = {.maximum_iterations = cf->max_iter, .shape_invariants = cf->invariant};
    tfc_cflow *ncf = cf->kind == TFC_CF_WHILE
                         ? tfc_while_new(g, rel, cf->n_vars, in, &opts)
                         : tfc_cond_new(g, rel, map_tensor(c, m->inputs[0]), cf->n_vars);
    if (!ncf) return g->status;
    for (int r = 0; r < 2; r++) {
        memset(out, 0, sizeof out);
        if (!tfc_cflow_enter(ncf, r, in)) clone_region(c, cf, r, m, in, out);
        tfc_cflow_leave(ncf, cf->reg[r].n_out, out);
        if (g->status) return g->status;
    }
    if (tfc_cflow_finish(ncf, out)) return g->status;
    c->nn[m->id - c->lo] = ncf->node;
    return TFC_OK;
}

/* A copy of m on the mapped inputs, in the region entered now. */
static tfc_status clone_node(struct clone *c, struct tfc_node *m, const char *prefix)
{
    tfc_graph *g = c->g;
    char buf[600];
    const char *name = clone_name(g, m, prefix, buf, sizeof buf);
    if (m->cflow) return clone_cflow(c, m, name);
    if (m->op->n_state || m->op->var_access || m->op == &tfc_op_placeholder)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "gradient of '%s': node '%s' (%s) %s; the backward pass "
                               "recomputes the branch or body, so it may only hold pure ops",
                               c->what, m->name, m->op->name,
                               m->op == &tfc_op_placeholder ? "is a placeholder inside it"
                                                            : "updates a variable inside it");
    tfc_tensor *in[MAX_OP];
    for (int i = 0; i < m->n_inputs; i++) in[i] = map_tensor(c, m->inputs[i]);
    struct tfc_node *k = tfc_node_build(g, m->op, name, m->n_inputs, in, m->attrs);
    if (!k) return g->status;
    k->user_grad = m->user_grad;
    k->user_grad_arg = m->user_grad_arg;
    k->device = m->device;
    for (int i = 0; i < m->n_ctrl; i++) { /* control inputs inside the region: their clones */
        const struct tfc_node *d = m->ctrl[i];
        struct tfc_node *cd = d->id >= c->lo && d->id <= c->hi ? c->nn[d->id - c->lo] : NULL;
        if (cd && tfc_tensor_add_control_input(&k->outputs[0], &cd->outputs[0])) return g->status;
    }
    c->nn[m->id - c->lo] = k;
    return TFC_OK;
}

/* Rebuilds region r of cf (node n) in the region entered now: its inputs stand for in[], its
 * captures for n's inputs (as mapped); out receives the clones of its outputs. */
static tfc_status clone_region(struct clone *c, const struct tfc_cflow *cf, int r,
                               const struct tfc_node *n, tfc_tensor *const *in, tfc_tensor **out)
{
    tfc_graph *g = c->g;
    const struct tfc_cf_region *fr = &cf->reg[r];
    const struct tfc_region *reg = &g->regions[fr->id];
    for (int i = 0; i < fr->n_in; i++) c->ph[fr->in[i]->node->id - c->lo] = in[i];
    for (int k = 0; k < reg->n_caps; k++) { /* captured again, so the gradient's xs match */
        tfc_tensor *t = tfc_cflow_capture(g, map_tensor(c, n->inputs[fr->cap_base + k]),
                                          g->cur_region, NULL);
        if (!t) return g->status;
        c->ph[reg->cap_inner[k]->node->id - c->lo] = t;
    }
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/%s/", cf->name, label_of(cf, r));
    for (int id = fr->lo; id <= fr->hi; id++) {
        struct tfc_node *m = g->nodes[id];
        if (m->region != fr->id || c->ph[id - c->lo] || is_global_source(m)) continue;
        if (m->op == &tfc_op_region_enter || m->op == &tfc_op_region_leave) continue;
        if (clone_node(c, m, prefix)) return g->status;
    }
    for (int k = 0; k < fr->n_out; k++) out[k] = map_tensor(c, fr->out[k]);
    return TFC_OK;
}

/* ---- gradients ------------------------------------------------------------------------- */

/* In the region entered now: the gradients of the float ys[k] that have a gradient gys[k],
 * with respect to xs (zeros where none flows). */
static tfc_status vjp(tfc_graph *g, tfc_gradients_fn gradients, int n_y, tfc_tensor *const *ys, tfc_tensor *const *gys,
                      int n_x, tfc_tensor *const *xs, tfc_tensor **dxs)
{
    tfc_tensor *y[MAX_OP], *gy[MAX_OP];
    int m = 0;
    for (int k = 0; k < n_y; k++)
        if (gys[k] && is_float(ys[k])) {
            y[m] = ys[k];
            gy[m++] = gys[k];
        }
    if (!m) {
        for (int j = 0; j < n_x; j++) dxs[j] = zeros_of(g, xs[j]);
        return g->status;
    }
    return gradients(g, m, y, gy, n_x, xs, dxs);
}

struct wanted {              /* the gradients a control-flow node's gradient delivers */
    int n_idx, idx[MAX_OP];  /* float node inputs (cond: captures; while: body captures) */
    int n_glob;
    tfc_tensor *const *globs;
    tfc_gradients_fn gradients;
};

/* Branch r of cond n, differentiated in the gradient cond's branch entered now. */
static tfc_status branch_grad(tfc_graph *g, struct tfc_node *n, int r, tfc_tensor *const *dys,
                              const struct wanted *w, tfc_tensor **out)
{
    const struct tfc_cflow *cf = n->cflow;
    const struct tfc_cf_region *fr = &cf->reg[r];
    struct clone c;
    tfc_tensor *ys[MAX_OP], *xs[2 * MAX_OP], *d[2 * MAX_OP];
    int pos[MAX_OP], nx = 0;
    if (clone_init(&c, g, n->name, fr->lo, fr->hi) || clone_region(&c, cf, r, n, NULL, ys))
        goto done;
    int cap_lo = fr->cap_base, cap_hi = cap_lo + g->regions[fr->id].n_caps;
    for (int j = 0; j < w->n_idx; j++) {
        int i = w->idx[j], mine = i >= cap_lo && i < cap_hi;
        pos[j] = mine ? nx : -1;
        if (mine && !(xs[nx++] = tfc_cflow_capture(g, n->inputs[i], g->cur_region, NULL)))
            goto done;
    }
    for (int k = 0; k < w->n_glob; k++) xs[nx++] = w->globs[k];
    if (nx && vjp(g, w->gradients, cf->n_vars, ys, dys, nx, xs, d)) goto done;
    for (int j = 0; j < w->n_idx; j++)
        out[j] = pos[j] >= 0 ? d[pos[j]] : zeros_of(g, n->inputs[w->idx[j]]);
    for (int k = 0; k < w->n_glob; k++) out[w->n_idx + k] = d[nx - w->n_glob + k];
done:
    clone_free(&c);
    return g->status;
}

static tfc_status cond_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                            tfc_tensor **dxs, struct wanted *w, tfc_tensor **dglobs)
{
    const struct tfc_cflow *cf = n->cflow;
    for (int i = 1; i < n->n_inputs; i++)
        if (is_float(n->inputs[i])) w->idx[w->n_idx++] = i;
    int m = w->n_idx + w->n_glob;
    if (!m) return TFC_OK;
    if (m > MAX_OP)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "gradient of cond '%s': %d gradients, at most %d", n->name, m,
                               MAX_OP);
    char name[300];
    snprintf(name, sizeof name, "%s_grad_%d", cf->rel_name, g->n_nodes);
    tfc_cflow *gc = tfc_cond_new(g, name, n->inputs[0], m);
    if (!gc) return g->status;
    for (int r = 0; r < 2; r++) {
        tfc_tensor *out[MAX_OP] = {0};
        if (!tfc_cflow_enter(gc, r, NULL)) branch_grad(g, n, r, dys, w, out);
        tfc_cflow_leave(gc, m, out);
        if (g->status) return g->status;
    }
    tfc_tensor *res[MAX_OP];
    if (tfc_cflow_finish(gc, res)) return g->status;
    for (int j = 0; j < w->n_idx; j++) dxs[w->idx[j]] = res[j];
    for (int k = 0; k < w->n_glob; k++) dglobs[k] = res[w->n_idx + k];
    return TFC_OK;
}

/* The reverse body of while n (entered now, inputs in[]: the m carried gradients, then the
 * forward loop variables of the iteration): the body recomputed from them, its gradient given
 * the carried ones; out: the loop variables' gradients, the captures' and globals' sums. */
static tfc_status reverse_body(tfc_graph *g, struct tfc_node *n, int nf, const int *fv,
                               const struct wanted *w, tfc_tensor *const *in, tfc_tensor **out)
{
    const struct tfc_cflow *cf = n->cflow;
    int m = nf + w->n_idx + w->n_glob, V = cf->n_vars;
    struct clone c;
    tfc_tensor *ys[MAX_OP], *gys[MAX_OP] = {0}, *xs[2 * MAX_OP], *d[2 * MAX_OP];
    /* the forward loop must have run (and kept its stack) before this loop runs */
    if (!tfc_cflow_capture(g, &n->outputs[0], g->cur_region, "forward_done")) return g->status;
    if (clone_init(&c, g, n->name, cf->reg[1].lo, cf->reg[1].hi) ||
        clone_region(&c, cf, 1, n, in + m, ys))
        goto done;
    int nx = 0;
    for (int a = 0; a < nf; a++) {
        gys[fv[a]] = in[a];
        xs[nx++] = in[m + fv[a]];
    }
    for (int b = 0; b < w->n_idx; b++)
        if (!(xs[nx++] = tfc_cflow_capture(g, n->inputs[w->idx[b]], g->cur_region, NULL)))
            goto done;
    for (int k = 0; k < w->n_glob; k++) xs[nx++] = w->globs[k];
    if (vjp(g, w->gradients, V, ys, gys, nx, xs, d)) goto done;
    for (int a = 0; a < nf; a++) out[a] = d[a];
    for (int b = nf; b < m; b++) out[b] = tfc_add(g, in[b], d[b]); /* the sum over iterations */
done:
    clone_free(&c);
    return g->status;
}

static tfc_status while_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                             tfc_tensor **dxs, struct wanted *w, tfc_tensor **dglobs)
{
    struct tfc_cflow *cf = n->cflow;
    const struct tfc_cf_region *body = &cf->reg[1];
    int fv[MAX_OP], nf = 0;
    for (int k = 0; k < cf->n_vars; k++)
        if (is_float(cf->init[k])) fv[nf++] = k;
    for (int j = 0; j < g->regions[body->id].n_caps; j++)
        if (is_float(n->inputs[body->cap_base + j])) w->idx[w->n_idx++] = body->cap_base + j;
    int m = nf + w->n_idx + w->n_glob;
    if (!m) return TFC_OK;
    if (m > MAX_OP / 2) /* a while's loop variables */
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "gradient of while '%s': %d gradients to carry (its float loop "
                               "variables, float captures of its body and the xs read inside), "
                               "at most %d", n->name, m, MAX_OP / 2);
    tfc_tensor *init[MAX_OP], *in[2 * MAX_OP + 1], *out[MAX_OP] = {0}, *res[MAX_OP];
    tfc_shape inv[MAX_OP];
    for (int a = 0; a < nf; a++) {
        init[a] = dys[fv[a]] ? dys[fv[a]] : zeros_of(g, &n->outputs[fv[a]]);
        inv[a] = cf->invariant[fv[a]];
    }
    for (int b = 0; b < w->n_idx + w->n_glob; b++) {
        tfc_tensor *x = b < w->n_idx ? n->inputs[w->idx[b]] : w->globs[b - w->n_idx];
        init[nf + b] = zeros_of(g, x);
        inv[nf + b] = x->desc.shape;
    }
    if (g->status) return g->status;
    char name[300];
    snprintf(name, sizeof name, "%s_grad_%d", cf->rel_name, g->n_nodes);
    tfc_cflow *rc = tfc_while_reverse_new(g, name, cf, m, init, inv);
    if (!rc) return g->status;
    if (!tfc_cflow_enter(rc, 1, in)) reverse_body(g, n, nf, fv, w, in, out);
    tfc_cflow_leave(rc, m, out);
    if (g->status || tfc_cflow_finish(rc, res)) return g->status;
    for (int a = 0; a < nf; a++) dxs[fv[a]] = res[a];
    for (int b = 0; b < w->n_idx; b++) dxs[w->idx[b]] = res[nf + b];
    for (int k = 0; k < w->n_glob; k++) dglobs[k] = res[nf + w->n_idx + k];
    return TFC_OK;
}

tfc_status tfc_cflow_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                          tfc_tensor **dxs, int n_globs, tfc_tensor *const *globs,
                          tfc_tensor **dglobs, tfc_gradients_fn gradients)
{
    const struct tfc_cflow *cf = n->cflow;
    if (cf->fwd)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                               "gradients: node '%s' is the gradient loop of while '%s'; "
                               "gradients of gradients through a while_loop are not supported "
                               "yet", n->name, cf->fwd->name);
    struct wanted w = {.n_glob = n_globs, .globs = globs, .gradients = gradients};
    return cf->kind == TFC_CF_COND ? cond_grad(g, n, dys, dxs, &w, dglobs)
                                   : while_grad(g, n, dys, dxs, &w, dglobs);
}
