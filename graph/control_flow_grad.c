/* control_flow_grad.c: gradients through cond and while_loop (issue 13, item 3). Both rebuild
 * (clone) the forward branch or body inside a region of a new control-flow node and
 * differentiate the clone there with tfc_gradients. A cond's gradient is a cond on the same
 * predicate (the branch that ran); a while's is a reverse loop (sched/cflow_run.c runs it) whose
 * body runs once per forward iteration, last first, from that iteration's loop variables, which
 * the forward loop keeps on its stack. Only loop variables are kept: a body's other values are
 * recomputed in the reverse body, so the gradient equals that of the unrolled graph. A reverse
 * loop has a gradient too (second order: see "gradients of gradient loops" below). */
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

/* A cond or while node inside the cloned region, rebuilt with its regions cloned; a reverse
 * loop (a gradient loop in a gradient's region) reads the stack of its forward loop's clone. */
static tfc_status clone_cflow(struct clone *c, struct tfc_node *m, const char *rel)
{
    tfc_graph *g = c->g;
    const struct tfc_cflow *cf = m->cflow;
    tfc_tensor *in[4 * MAX_OP], *out[MAX_OP];
    for (int i = 0; i < cf->n_vars && cf->kind == TFC_CF_WHILE; i++)
        in[i] = map_tensor(c, m->inputs[i]);
    tfc_while_opts opts = {.maximum_iterations = cf->max_iter, .shape_invariants = cf->invariant};
    tfc_cflow *ncf;
    if (cf->fwd) {
        struct tfc_node *f = map_tensor(c, &cf->fwd->node->outputs[0])->node;
        ncf = tfc_while_reverse_new(g, rel, f->cflow, cf->n_vars, in, cf->invariant);
    } else {
        ncf = cf->kind == TFC_CF_WHILE ? tfc_while_new(g, rel, cf->n_vars, in, &opts)
                                       : tfc_cond_new(g, rel, map_tensor(c, m->inputs[0]),
                                                      cf->n_vars);
    }
    if (!ncf) return g->status;
    for (int r = cf->fwd ? 1 : 0; r < 2; r++) { /* a reverse loop's cond region is built */
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

/* ---- gradients of gradient loops ------------------------------------------------------- */

/* Second order, the gradient of a reverse loop R of forward loop F. What a loop stacks is its
 * body's inputs, so R stacks its carried gradients with F's variables of the iteration, and R's
 * gradient RR is a reverse loop over R's stack: it runs F's iterations in their order, with R's
 * body recomputed and differentiated. R's body also read F's stacked variables; their gradient
 * goes into F's gradient F', built later in the same backward pass (R leaves RR on F): F' is a
 * reverse loop over RR's stack (which holds R's and so F's inputs too) whose body differentiates
 * F's body and R's recomputed body together, and whose capture sums start from RR's. A loop
 * nested in a loop or a cond is the same one level down: the clone of a region that holds F
 * and R holds clones of both, R's reading the stack of F's clone. RR and F' have no gradient:
 * a third order is a clear error. */

/* The reverse loop being built for the gradient of while n. */
struct rev {
    struct tfc_node *n;
    int nf, fv[MAX_OP];      /* n's float loop variables */
    const struct wanted *w;
    struct tfc_cflow *over;  /* the loop whose stack it reads: n, or for a second order the
                              * reverse loop of n's reverse loop (n->cflow->stack_grad) */
    int skip;                /* over's stacked values before n's body inputs */
};

/* Second order, in the reverse body of rv->over == RR (the reverse loop of n's reverse loop
 * R) entered now: the gradients of n's float loop variables xs of forward iteration i, from
 * both what n's body computes from them (ys, given the carried gradients gys) and what R's
 * body computes from them (R's body recomputed from its stacked inputs, given RR's carried
 * gradients of R's loop variables), in one pass: R's nodes, built after n's, are visited
 * first, as the unrolled graph visits its gradient nodes before its forward ones. */
static tfc_status stacked_vars_grad(tfc_graph *g, const struct rev *rv, tfc_tensor *const *in,
                                    tfc_tensor **ys, tfc_tensor **gys, tfc_tensor **xs,
                                    tfc_tensor **d)
{
    const struct tfc_cflow *rr = rv->over, *r = rr->fwd, *cf = rv->n->cflow;
    int m = rv->nf + rv->w->n_idx + rv->w->n_glob;
    if (cf->n_vars + r->n_vars > MAX_OP)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "gradient of '%s': %d loop variables and %d of its gradient loop "
                               "'%s', at most %d together for a second order", cf->name,
                               cf->n_vars, r->n_vars, r->name, MAX_OP);
    struct clone c;
    if (clone_init(&c, g, r->name, r->reg[1].lo, r->reg[1].hi) ||
        clone_region(&c, r, 1, r->node, in + m + rr->n_vars, ys + cf->n_vars))
        goto done;
    for (int k = 0; k < r->n_vars; k++) gys[cf->n_vars + k] = in[m + k]; /* RR carries them first */
    vjp(g, rv->w->gradients, cf->n_vars + r->n_vars, ys, gys, rv->nf, xs, d);
done:
    clone_free(&c);
    return g->status;
}

/* The reverse body of while n (entered now, inputs in[]: the m carried gradients, then the
 * stacked values of rv->over's iteration, n's body inputs among them): the body recomputed
 * from them, its gradient given the carried ones; out: the loop variables' gradients, the
 * captures' and globals' sums. */
static tfc_status reverse_body(tfc_graph *g, const struct rev *rv, tfc_tensor *const *in,
                               tfc_tensor **out)
{
    struct tfc_node *n = rv->n;
    const struct tfc_cflow *cf = n->cflow;
    const struct wanted *w = rv->w;
    int nf = rv->nf, m = nf + w->n_idx + w->n_glob, V = cf->n_vars;
    struct clone c;
    tfc_tensor *ys[2 * MAX_OP], *gys[2 * MAX_OP] = {0}, *xs[2 * MAX_OP], *d[2 * MAX_OP];
    /* the loop whose stack this one reads must have run (and kept it) before this one runs */
    if (!tfc_cflow_capture(g, &rv->over->node->outputs[0], g->cur_region, "forward_done"))
        return g->status;
    if (clone_init(&c, g, n->name, cf->reg[1].lo, cf->reg[1].hi) ||
        clone_region(&c, cf, 1, n, in + m + rv->skip, ys))
        goto done;
    int nx = 0;
    for (int a = 0; a < nf; a++) {
        gys[rv->fv[a]] = in[a];
        xs[nx++] = in[m + rv->skip + rv->fv[a]];
    }
    for (int b = 0; b < w->n_idx; b++)
        if (!(xs[nx++] = tfc_cflow_capture(g, n->inputs[w->idx[b]], g->cur_region, NULL)))
            goto done;
    for (int k = 0; k < w->n_glob; k++) xs[nx++] = w->globs[k];
    if (rv->over == cf) { /* first order: one pass */
        if (vjp(g, w->gradients, V, ys, gys, nx, xs, d)) goto done;
    } else if (stacked_vars_grad(g, rv, in, ys, gys, xs, d) ||
               (m > nf && vjp(g, w->gradients, V, ys, gys, m - nf, xs + nf, d + nf))) {
        goto done;
    }
    for (int a = 0; a < nf; a++) out[a] = d[a];
    for (int b = nf; b < m; b++) out[b] = tfc_add(g, in[b], d[b]); /* the sum over iterations */
done:
    clone_free(&c);
    return g->status;
}

/* The gradient's layout for while n: its float loop variables, its body's float captures
 * (not a gradient loop's capture of its forward loop, which only orders the two); the count
 * to carry, or -1 with an error on g. */
static int rev_layout(tfc_graph *g, struct tfc_node *n, struct rev *rv, struct wanted *w)
{
    const struct tfc_cflow *cf = n->cflow;
    const struct tfc_cf_region *body = &cf->reg[1];
    const tfc_tensor *order = cf->fwd ? &cf->fwd->node->outputs[0] : NULL;
    for (int k = 0; k < cf->n_vars; k++)
        if (is_float(cf->init[k])) rv->fv[rv->nf++] = k;
    for (int j = 0; j < g->regions[body->id].n_caps; j++) {
        tfc_tensor *t = n->inputs[body->cap_base + j];
        if (is_float(t) && t != order) w->idx[w->n_idx++] = body->cap_base + j;
    }
    int m = rv->nf + w->n_idx + w->n_glob;
    if (m > MAX_OP / 2) { /* a while's loop variables */
        tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                        "gradient of while '%s': %d gradients to carry (its float loop variables, "
                        "float captures of its body and the xs read inside), at most %d",
                        n->name, m, MAX_OP / 2);
        return -1;
    }
    return m;
}

/* The reverse loop rc (m carried, starting at init with shapes inv) of rv, built and
 * finished; res its outputs. */
static tfc_status build_reverse(tfc_graph *g, const struct rev *rv, int m, tfc_tensor **init,
                                const tfc_shape *inv, struct tfc_cflow **rc, tfc_tensor **res)
{
    char name[300];
    tfc_tensor *in[3 * MAX_OP + 1], *out[MAX_OP] = {0};
    snprintf(name, sizeof name, "%s_grad_%d", rv->n->cflow->rel_name, g->n_nodes);
    if (!(*rc = tfc_while_reverse_new(g, name, rv->over, m, init, inv))) return g->status;
    if (!tfc_cflow_enter(*rc, 1, in)) reverse_body(g, rv, in, out);
    tfc_cflow_leave(*rc, m, out);
    if (g->status || tfc_cflow_finish(*rc, res)) return g->status;
    return TFC_OK;
}

/* Whether while f's body reads t: a capture of it, or a variable or constant read inside. */
static int body_reads(const struct tfc_cflow *f, const tfc_tensor *t)
{
    const struct tfc_node *n = f->node;
    int lo = f->reg[1].cap_base, hi = lo + n->graph->regions[f->reg[1].id].n_caps;
    for (int i = lo; i < hi; i++)
        if (n->inputs[i] == t) return 1;
    for (int id = f->reg[1].lo; id <= f->reg[1].hi; id++) {
        const struct tfc_node *m = n->graph->nodes[id];
        for (int i = 0; i < m->n_inputs; i++)
            if (m->inputs[i] == t && is_global_source(t->node)) return 1;
    }
    return 0;
}

/* n is the gradient loop R of while f, and rc (outputs res) the gradient of R: f's gradient,
 * later in this pass, reads rc's stack (f->stack_grad), and goes on summing the gradients of
 * the captures and globals that f's body reads too from rc's sums (so each is one sum over
 * R's iterations then f's, as in the unrolled graph); R delivers the others itself. */
static tfc_status hand_to_forward(tfc_graph *g, const struct rev *rv, struct tfc_cflow *rc,
                                  tfc_tensor *const *res, tfc_tensor **dxs, tfc_tensor **dglobs,
                                  unsigned long pass)
{
    const struct wanted *w = rv->w;
    struct tfc_cflow *f = rv->n->cflow->fwd->node->cflow;
    int k = w->n_idx + w->n_glob;
    tfc_tensor **sums = realloc(f->stack_grad_sums, sizeof *sums * (size_t)(2 * k + 1));
    if (!sums) return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "gradients: no memory");
    f->stack_grad_sums = sums;
    f->n_stack_grad_sums = 0;
    f->stack_grad = rc;
    f->stack_grad_pass = pass;
    for (int b = 0; b < k; b++) {
        tfc_tensor *t = b < w->n_idx ? rv->n->inputs[w->idx[b]] : w->globs[b - w->n_idx];
        tfc_tensor **dst = b < w->n_idx ? &dxs[w->idx[b]] : &dglobs[b - w->n_idx];
        if (!body_reads(f, t)) {
            *dst = res[rv->nf + b];
            continue;
        }
        sums[2 * f->n_stack_grad_sums] = t;
        sums[2 * f->n_stack_grad_sums++ + 1] = res[rv->nf + b];
        *dst = NULL;
    }
    return TFC_OK;
}

/* The initial sum of the gradient of t (a capture or global of while cf's body): what the
 * gradient of cf's gradient loop summed (second order), else zeros. */
static tfc_tensor *sum_start(tfc_graph *g, const struct tfc_cflow *cf, int second,
                             tfc_tensor *t)
{
    for (int j = 0; second && j < cf->n_stack_grad_sums; j++)
        if (cf->stack_grad_sums[2 * j] == t) return cf->stack_grad_sums[2 * j + 1];
    return zeros_of(g, t);
}

static tfc_status while_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                             tfc_tensor **dxs, struct wanted *w, tfc_tensor **dglobs,
                             unsigned long pass)
{
    struct tfc_cflow *cf = n->cflow;
    struct rev rv = {.n = n, .w = w, .over = cf};
    int second = cf->stack_grad && cf->stack_grad_pass == pass;
    if (second) { /* the gradient of its gradient loop's gradient: that one's stack too */
        rv.over = cf->stack_grad;
        rv.skip = rv.over->n_vars + rv.over->fwd->n_vars;
        cf->stack_grad = NULL;
    }
    int m = rev_layout(g, n, &rv, w);
    if (m <= 0) return g->status;
    tfc_tensor *init[MAX_OP], *res[MAX_OP];
    tfc_shape inv[MAX_OP];
    for (int a = 0; a < rv.nf; a++) {
        init[a] = dys[rv.fv[a]] ? dys[rv.fv[a]] : zeros_of(g, &n->outputs[rv.fv[a]]);
        inv[a] = cf->invariant[rv.fv[a]];
    }
    for (int b = 0; b < w->n_idx + w->n_glob; b++) {
        tfc_tensor *x = b < w->n_idx ? n->inputs[w->idx[b]] : w->globs[b - w->n_idx];
        init[rv.nf + b] = sum_start(g, cf, second, x);
        inv[rv.nf + b] = x->desc.shape;
    }
    struct tfc_cflow *rc;
    if (g->status || build_reverse(g, &rv, m, init, inv, &rc, res)) return g->status;
    for (int a = 0; a < rv.nf; a++) dxs[rv.fv[a]] = res[a];
    if (cf->fwd) return hand_to_forward(g, &rv, rc, res, dxs, dglobs, pass);
    for (int b = 0; b < w->n_idx; b++) dxs[w->idx[b]] = res[rv.nf + b];
    for (int k = 0; k < w->n_glob; k++) dglobs[k] = res[rv.nf + w->n_idx + k];
    return TFC_OK;
}

/* Which gradient loops have a gradient of their own: the reverse loop R of a forward loop F
 * (its gradient RR runs F's iterations in order, and the gradient that reaches F's stack
 * through R goes into F's gradient loop), once per F in a pass. */
static tfc_status check_second_order(tfc_graph *g, struct tfc_node *n, unsigned long pass)
{
    const struct tfc_cflow *cf = n->cflow, *f = cf->fwd;
    if (!f) return TFC_OK;
    if (f->fwd)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                               "gradients: node '%s' is the gradient loop of while '%s', itself "
                               "a gradient loop; gradients of gradients through a while_loop "
                               "are not supported yet beyond the second order", n->name,
                               f->name);
    if (f->stack_grad && f->stack_grad_pass == pass)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                               "gradients: node '%s' and '%s' are both gradient loops of while "
                               "'%s' on the path to the xs; gradients of gradients through a "
                               "while_loop are not supported yet for two of them in one pass",
                               n->name, f->stack_grad->fwd->name, f->name);
    return TFC_OK;
}

tfc_status tfc_cflow_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                          tfc_tensor **dxs, int n_globs, tfc_tensor *const *globs,
                          tfc_tensor **dglobs, tfc_gradients_fn gradients, unsigned long pass)
{
    const struct tfc_cflow *cf = n->cflow;
    if (check_second_order(g, n, pass)) return g->status;
    struct wanted w = {.n_glob = n_globs, .globs = globs, .gradients = gradients};
    return cf->kind == TFC_CF_COND ? cond_grad(g, n, dys, dxs, &w, dglobs)
                                   : while_grad(g, n, dys, dxs, &w, dglobs, pass);
}

int tfc_cflow_stack_grad_pending(const struct tfc_node *n, unsigned long pass)
{
    return n->cflow && n->cflow->stack_grad && n->cflow->stack_grad_pass == pass;
}
