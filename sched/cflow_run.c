/* cflow_run.c: runs of graphs with cond and while nodes (ARCHITECTURE.md decision 9). The
 * needed nodes of a region are cut at its control-flow nodes into segments; a segment is an
 * ordinary cached plan whose feeds are the handles of values computed before it, submitted
 * under the session lock. At a cond or a loop test the run acquires the predicate's handle
 * without the lock and submits only the branch taken or the next iteration. Each segment takes
 * a plan instance of its own (handles no earlier iteration still uses), so iteration i+1
 * depends on iteration i through data only; once iteration i+1 is submitted, iteration i's
 * instances that no loop variable refers to are recycled within the run (memory stays bounded).
 * A loop whose gradient is built keeps each iteration's loop variables (their handles, not
 * copies) on a stack; its reverse loop runs its body once per entry, last first, with no
 * predicate to read back (the count is known); a reverse loop whose own gradient is built
 * stacks its body's inputs in turn (second order). A forward loop whose trip count follows from a
 * counter, or that may run ahead of its predicate, goes to sched/cflow_loop.c; the run's values
 * and held submissions are sched/cflow_hold.c's (the state of a run: cflow_priv.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cflow_priv.h"
#include "../src/env.h"

static const char shape_only; /* the data pointer of the shape carriers of plan keys */

/* ---- segments -------------------------------------------------------------------------- */

/* Plans (or finds) and submits the segment computing fetch[0..n_fetch) and running the
 * targets from the values in env; out[j] receives fetch j's handle and concrete description. */
static tfc_status submit_segment(struct tfc_cf_run *cr, const struct env *env, int n_fetch,
                                 tfc_tensor *const *fetch, int n_targets,
                                 tfc_tensor *const *targets, struct bound *out, char *msg)
{
    tfc_session *s = cr->s;
    tfc_tensor *ft_local[16]; /* the plan key's feeds: on the stack when few (every iteration) */
    tfc_value *fv_local[16] = {0};
    int small = env->n < 16;
    tfc_tensor **ft = small ? ft_local : malloc(sizeof *ft * (size_t)(env->n + 1));
    tfc_value **fv = small ? fv_local : calloc((size_t)env->n + 1, sizeof *fv);
    tfc_status st = ft && fv ? TFC_OK : tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory");
    for (int i = 0; !st && i < env->n; i++) { /* the plan key reads only dtypes and shapes */
        ft[i] = env->b[i].t;
        st = tfc_value_wrap(env->b[i].desc.dtype, env->b[i].desc.shape, (void *)&shape_only,
                            &fv[i]);
        if (st) tfc_fail(msg, st, "%s", tfc_errmsg());
    }
    struct plan *p = NULL;
    if (!st) {
        pthread_mutex_lock(&s->lock);
        p = tfc_run_find_plan(s, env->n, ft, fv, n_fetch, fetch, n_targets, targets, &st, msg);
        if (p && !(st = tfc_run_check_variables(s, p, msg))) {
            struct hold *hd = tfc_cf_hold_new(cr, p, env);
            if (!hd) st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
            if (hd) /* the tasks with a callback: all of them when profiling */
                __atomic_add_fetch(&cr->top->pending, cr->profiling ? p->n_steps : p->n_signals,
                                   __ATOMIC_ACQ_REL);
            if (hd && !(st = tfc_run_submit_tasks(s, hd->sub, 0, msg))) {
                s->stats.tasks += (uint64_t)p->n_steps;
                for (int i = 0; i < p->n_var_writes; i++) s->pers[p->var_writes[i]].initialized = 1;
                for (int j = 0; j < n_fetch; j++) {
                    const struct slot *sl = &p->slots[p->fetch_slot[j]];
                    out[j] = (struct bound){fetch[j], tfc_cf_fetch_handle(cr, hd, j), sl->desc};
                }
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    for (int i = 0; fv && i < env->n; i++) tfc_value_destroy(fv[i]);
    if (!small) {
        free(fv);
        free(ft);
    }
    return st;
}

/* ---- predicates ------------------------------------------------------------------------ */

/* A cond's or loop's predicate, and no kernel before it failed. */
static tfc_status read_pred(struct tfc_cf_run *cr, const struct bound *b, const char *node,
                            int *value, char *msg)
{
    tfc_status st = tfc_cf_read_pred_value(b, node, value, msg);
    return st ? st : tfc_cf_recent_kernel_error(cr, 3, msg);
}

/* ---- regions --------------------------------------------------------------------------- */

static tfc_status exec_region(struct tfc_cf_run *cr, struct env *env,
                              const struct tfc_cf_region *reg, int n_fetch,
                              tfc_tensor *const *fetch, int n_targets,
                              tfc_tensor *const *targets, struct bound *out, char *msg);

static int is_global_source(const struct tfc_node *n)
{
    return (n->op->flags & TFC_OP_SOURCE) && n->op != &tfc_op_placeholder;
}

/* Runs region r of cf from vars and in; out receives its outputs. */
static tfc_status run_region(struct tfc_cf_run *cr, const struct tfc_cflow *cf, int r,
                             const struct bound *vars, const struct bound *in,
                             struct bound *out, char *msg)
{
    struct bound local[16]; /* a loop iteration's region mostly fits: no malloc per iteration */
    struct env e = {0, 16, local, local};
    tfc_status st = tfc_cf_region_env(cf, r, vars, in, &e)
                        ? tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run")
                        : exec_region(cr, &e, &cf->reg[r], cf->reg[r].n_out, cf->reg[r].out, 0,
                                      NULL, out,
                                      msg);
    if (e.b != e.local) free(e.b);
    return st;
}

/* ---- stacks ---------------------------------------------------------------------------- */

static struct stack *stack_find(struct tfc_cf_run *cr, const struct tfc_cflow *cf)
{
    for (struct stack *sk = cr->stacks; sk; sk = sk->next)
        if (sk->cf == cf) return sk;
    return NULL;
}

/* cf's stack, emptied: a loop run again (inside an outer loop) starts a new one. */
static struct stack *stack_begin(struct tfc_cf_run *cr, const struct tfc_cflow *cf)
{
    struct stack *sk = stack_find(cr, cf);
    if (!sk && (sk = calloc(1, sizeof *sk))) {
        sk->cf = cf;
        sk->next = cr->stacks;
        cr->stacks = sk;
    }
    if (sk) sk->n = 0;
    return sk;
}

/* Whether a run of loop cf keeps a stack: a reverse loop of it runs in this run (inside a
 * region, where the run does not know, it always keeps one). */
static int stack_wanted(const struct tfc_cf_run *cr, const struct tfc_cflow *cf)
{
    if (!cf->keep_stack) return 0;
    if (cf->node->region || !cr->reached) return 1;
    for (const struct tfc_cflow *rc = cr->s->g->cflows; rc; rc = rc->next)
        if (rc->fwd == cf && rc->node && cr->reached[rc->node->id]) return 1;
    return 0;
}

/* Marks in cr->reached the nodes the fetches and targets need, through data and control
 * inputs (a loop's gradient needs its forward loop's stack only when the run reaches it). */
static void mark_reached(struct tfc_cf_run *cr, int n_fetches, tfc_tensor *const *fetches,
                         int n_targets, tfc_tensor *const *targets)
{
    tfc_graph *g = cr->s->g;
    int *stack = malloc(sizeof *stack * (size_t)(g->n_nodes + 1)), top = 0;
    cr->reached = calloc((size_t)g->n_nodes + 1, 1);
    if (!stack || !cr->reached) { /* then every stack is kept */
        free(stack);
        free(cr->reached);
        cr->reached = NULL;
        return;
    }
    for (int i = 0; i < n_fetches + n_targets; i++) {
        int id = (i < n_fetches ? fetches[i] : targets[i - n_fetches])->node->id;
        if (!cr->reached[id]) cr->reached[stack[top++] = id] = 1;
    }
    while (top) {
        const struct tfc_node *m = g->nodes[stack[--top]];
        for (int i = 0; i < m->n_inputs + m->n_ctrl; i++) {
            int id = i < m->n_inputs ? m->inputs[i]->node->id : m->ctrl[i - m->n_inputs]->id;
            if (!cr->reached[id]) cr->reached[stack[top++] = id] = 1;
        }
    }
    free(stack);
}

static void stacks_free(struct tfc_cf_run *cr)
{
    for (struct stack *sk = cr->stacks, *next; sk; sk = next) {
        next = sk->next;
        free(sk->v);
        free(sk);
    }
    cr->stacks = NULL;
}

/* The reverse loop cf (a gradient): its body once per iteration its forward loop ran, last
 * first, from the carried values in[0..n_vars) and what that iteration stacked. The count
 * is the stack's: nothing is read back between iterations. A reverse loop with a gradient of
 * its own (second order) stacks its body's inputs in turn, so that loop runs the forward
 * loop's iterations in their order. */
static tfc_status exec_reverse(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                               const struct bound *in, struct bound *vars, char *msg)
{
    int nc = cf->n_vars, nf = tfc_cflow_n_stacked(cf->fwd);
    const struct stack *sk = stack_find(cr, cf->fwd);
    if (!sk)
        return tfc_fail(msg, TFC_ERR_INTERNAL, "while '%s': its forward loop '%s' did not run "
                        "before it", cf->name, cf->fwd->name);
    if (nc + nf > 4 * TFC_MAX_OPERANDS)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "while '%s' (gradient): %d values per "
                        "iteration, at most %d", cf->name, nc + nf, 4 * TFC_MAX_OPERANDS);
    int keep = stack_wanted(cr, cf);
    struct stack *own = keep ? stack_begin(cr, cf) : NULL;
    if (keep && !own) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    memcpy(vars, in, sizeof *vars * (size_t)nc);
    uint64_t prev = cr->seq;
    for (int it = sk->n - 1; it >= 0; it--) {
        struct bound bv[4 * TFC_MAX_OPERANDS], next[2 * TFC_MAX_OPERANDS];
        memcpy(bv, vars, sizeof *bv * (size_t)nc);
        memcpy(bv + nc, sk->v + (size_t)it * (size_t)nf, sizeof *bv * (size_t)nf);
        uint64_t first = cr->seq;
        tfc_status st = run_region(cr, cf, 1, bv, in, next, msg);
        if (st) {
            char inner[TFC_MSG_LEN];
            snprintf(inner, sizeof inner, "%s", msg);
            return tfc_fail(msg, st, "while '%s' (gradient), iteration %d: %s", cf->name, it,
                            inner);
        }
        if (own && tfc_cf_stack_push(own, bv))
            return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
        cr->kept += own != NULL;
        /* kept alive: the new carried values, and with a stack the ones this body read */
        memcpy(next + nc, vars, sizeof *next * (size_t)nc);
        memcpy(vars, next, sizeof *vars * (size_t)nc);
        cr->iterations++;
        if (it < sk->n - 1) tfc_cf_recycle(cr, prev, first, next, own ? 2 * nc : nc);
        prev = first;
    }
    return TFC_OK;
}

static tfc_status exec_while(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                             const struct bound *in, struct bound *vars, char *msg)
{
    if (cf->fwd) return exec_reverse(cr, cf, in, vars, msg);
    memcpy(vars, in, sizeof *vars * (size_t)cf->n_vars); /* no iteration: the inputs */
    int keep = stack_wanted(cr, cf);
    struct stack *sk = keep ? stack_begin(cr, cf) : NULL;
    if (keep && !sk) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    int64_t count;
    tfc_status st = TFC_OK;
    if (tfc_cf_known_count(cr, cf, in, &count, &st, msg))
        return tfc_cf_exec_counted(cr, cf, in, vars, sk, count, msg);
    if (st) return tfc_cf_iteration_failed(cf, 0, st, msg);
    if (tfc_cf_speculable(cr, cf)) return tfc_cf_exec_speculative(cr, cf, in, vars, sk, msg);
    uint64_t prev = cr->seq; /* the first submission of the iteration before */
    for (int64_t it = 0; !cf->max_iter || it < cf->max_iter; it++) {
        uint64_t first = cr->seq;
        struct bound pred, next[TFC_MAX_OPERANDS];
        int go = 0;
        st = run_region(cr, cf, 0, vars, in, &pred, msg);
        if (!st) st = read_pred(cr, &pred, cf->name, &go, msg);
        if (!st && go) st = run_region(cr, cf, 1, vars, in, next, msg);
        if (st) return tfc_cf_iteration_failed(cf, it, st, msg);
        if (!go) break;
        if ((st = tfc_cf_iteration_done(cr, cf, sk, vars, next, it, first, &prev, msg))) return st;
    }
    return TFC_OK;
}

static tfc_status exec_cond(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                            const struct bound *in, struct bound *outs, char *msg)
{
    int taken = 0;
    tfc_status st = read_pred(cr, &in[0], cf->name, &taken, msg);
    int r = taken ? 0 : 1;
    if (!st) st = run_region(cr, cf, r, NULL, in, outs, msg);
    if (st) {
        char inner[TFC_MSG_LEN];
        snprintf(inner, sizeof inner, "%s", msg);
        return tfc_fail(msg, st, "cond '%s', %s branch: %s", cf->name, taken ? "then" : "else",
                        inner);
    }
    cr->branches[r]++;
    return TFC_OK;
}

/* Runs control-flow node n from the values in env and binds its outputs there. */
static tfc_status exec_cflow(struct tfc_cf_run *cr, struct tfc_node *n, struct env *env,
                             char *msg)
{
    struct bound in[TFC_MAX_OPERANDS], outs[TFC_MAX_OPERANDS];
    for (int i = 0; i < n->n_inputs; i++) {
        const struct bound *b = tfc_cf_env_find(env, n->inputs[i]);
        if (!b)
            return tfc_fail(msg, TFC_ERR_INTERNAL, "node '%s': input '%s' was not computed",
                            n->name, n->inputs[i]->name);
        in[i] = *b;
    }
    const struct tfc_cflow *cf = n->cflow;
    tfc_status st = cf->kind == TFC_CF_WHILE ? exec_while(cr, cf, in, outs, msg)
                                             : exec_cond(cr, cf, in, outs, msg);
    for (int k = 0; !st && k < n->n_outputs; k++)
        if (tfc_cf_env_bind(env, &n->outputs[k], &outs[k]))
            st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    return st;
}

/* ---- cutting a region into segments ---------------------------------------------------- */

struct cut {
    tfc_graph *g;
    const struct env *env;
    int lo, hi;              /* the region's node ids (every id at the top level) */
    char *needed;            /* per node id */
    char *done;              /* per node id: executed by an earlier segment */
    int *stack;
};

/* Marks in mark the nodes that computing t needs, not through values in env, nor through
 * control-flow nodes when stop_at_cflow (their outputs come from the runner); nodes already
 * done are left out. */
static void mark_from(struct cut *c, const tfc_tensor *t, int is_node, char *mark,
                      int stop_at_cflow)
{
    int top = 0;
    const struct tfc_node *first = t->node;
    if ((!is_node && tfc_cf_env_find(c->env, t)) || mark[first->id] || c->done[first->id]) return;
    mark[first->id] = 1;
    c->stack[top++] = first->id;
    while (top) {
        struct tfc_node *n = c->g->nodes[c->stack[--top]];
        if (stop_at_cflow && tfc_is_cflow(n)) continue;
        for (int i = 0; i < n->n_inputs + n->n_ctrl; i++) {
            struct tfc_node *m;
            if (i < n->n_inputs) {
                if (tfc_cf_env_find(c->env, n->inputs[i])) continue;
                m = n->inputs[i]->node;
            } else {
                m = n->ctrl[i - n->n_inputs];
            }
            if (mark[m->id] || c->done[m->id]) continue;
            mark[m->id] = 1;
            c->stack[top++] = m->id;
        }
    }
}

static int push_tensor(tfc_tensor ***arr, int *n, int *cap, tfc_tensor *t)
{
    for (int i = 0; i < *n; i++)
        if ((*arr)[i] == t) return 0;
    if (*n == *cap) {
        int c2 = *cap ? *cap * 2 : 8;
        tfc_tensor **a = realloc(*arr, sizeof *a * (size_t)c2);
        if (!a) return -1;
        *arr = a;
        *cap = c2;
    }
    (*arr)[(*n)++] = t;
    return 0;
}

/* The segment before control-flow node n: the values n needs that are not computed yet, and
 * every value of the segment that a later needed node or a fetch uses (computed once). */
static tfc_status segment_before(struct tfc_cf_run *cr, struct cut *c, struct env *env,
                                 const struct tfc_node *n, int n_fetch,
                                 tfc_tensor *const *fetch, char *msg)
{
    tfc_graph *g = c->g;
    char *seg = calloc((size_t)g->n_nodes + 1, 1);
    tfc_tensor **want = NULL;
    int nw = 0, cw = 0, oom = !seg;
    for (int i = 0; !oom && i < n->n_inputs; i++)
        if (!tfc_cf_env_find(env, n->inputs[i])) {
            mark_from(c, n->inputs[i], 0, seg, 1);
            oom = push_tensor(&want, &nw, &cw, n->inputs[i]);
        }
    for (int id = c->lo; !oom && nw && id <= c->hi; id++) { /* later users of its values */
        struct tfc_node *m = g->nodes[id];
        if (!c->needed[id] || seg[id] || c->done[id]) continue;
        for (int i = 0; !oom && i < m->n_inputs; i++) {
            tfc_tensor *t = m->inputs[i];
            if (seg[t->node->id] && !is_global_source(t->node) && !tfc_cf_env_find(env, t))
                oom = push_tensor(&want, &nw, &cw, t);
        }
    }
    for (int j = 0; !oom && nw && j < n_fetch; j++)
        if (seg[fetch[j]->node->id] && !tfc_cf_env_find(env, fetch[j]))
            oom = push_tensor(&want, &nw, &cw, fetch[j]);
    tfc_status st = oom ? tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run") : TFC_OK;
    struct bound *got = nw ? malloc(sizeof *got * (size_t)nw) : NULL;
    if (!st && nw && !got) st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    if (!st && nw) st = submit_segment(cr, env, nw, want, 0, NULL, got, msg);
    for (int j = 0; !st && j < nw; j++)
        if (tfc_cf_env_bind(env, want[j], &got[j]))
            st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    for (int id = c->lo; !st && id <= c->hi; id++) /* (a variable it reads may lie outside) */
        if (seg[id]) c->done[id] = 1;
    free(got);
    free(want);
    free(seg);
    return st;
}

/* The last segment: the fetches not computed yet and the targets not run yet. */
static tfc_status segment_last(struct tfc_cf_run *cr, struct cut *c, struct env *env,
                               int n_fetch, tfc_tensor *const *fetch, int n_targets,
                               tfc_tensor *const *targets, char *msg)
{
    tfc_tensor **f = NULL, **t = NULL;
    int nf = 0, cf = 0, nt = 0, ct = 0, oom = 0;
    for (int j = 0; !oom && j < n_fetch; j++)
        if (!tfc_cf_env_find(env, fetch[j])) oom = push_tensor(&f, &nf, &cf, fetch[j]);
    for (int j = 0; !oom && j < n_targets; j++)
        if (!c->done[targets[j]->node->id]) oom = push_tensor(&t, &nt, &ct, targets[j]);
    tfc_status st = oom ? tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run") : TFC_OK;
    struct bound *got = malloc(sizeof *got * (size_t)(nf + 1));
    if (!st && !got) st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    if (!st && (nf || nt)) st = submit_segment(cr, env, nf, f, nt, t, got, msg);
    for (int j = 0; !st && j < nf; j++)
        if (tfc_cf_env_bind(env, f[j], &got[j]))
            st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    free(got);
    free(f);
    free(t);
    return st;
}

/* Computes fetch[0..n_fetch) and runs the targets of one region (reg; NULL: the top level)
 * from the values in env (which it extends), segment by segment; out receives the fetches.
 * Only the region's own span of node ids is scanned, so an iteration costs what its region
 * holds, not what the graph does. */
static tfc_status exec_region(struct tfc_cf_run *cr, struct env *env,
                              const struct tfc_cf_region *reg, int n_fetch,
                              tfc_tensor *const *fetch, int n_targets,
                              tfc_tensor *const *targets, struct bound *out, char *msg)
{
    tfc_graph *g = cr->s->g;
    int N = g->n_nodes;
    /* the marks and the walk's stack in one block, on the stack for the small graphs whose
     * loop bodies run many times (a malloc and a memset per region run otherwise) */
    size_t n1 = (size_t)N + 1, size = n1 * sizeof(int) + 2 * n1;
    int local[256];
    char *blk = size <= sizeof local ? (char *)local : malloc(size);
    if (blk) memset(blk + n1 * sizeof(int), 0, 2 * n1);
    struct cut c = {g, env, reg ? reg->lo : 0, reg ? reg->hi : N - 1,
                    blk ? blk + n1 * sizeof(int) : NULL, blk ? blk + n1 * sizeof(int) + n1 : NULL,
                    blk ? (int *)blk : NULL};
    tfc_status st = blk ? TFC_OK : tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    for (int j = 0; !st && j < n_fetch + n_targets; j++)
        mark_from(&c, j < n_fetch ? fetch[j] : targets[j - n_fetch], j >= n_fetch, c.needed, 0);
    for (int id = c.lo; !st && id <= c.hi; id++) { /* node ids are a topological order */
        struct tfc_node *n = g->nodes[id];
        if (!c.needed[id] || !tfc_is_cflow(n) || c.done[id]) continue;
        st = segment_before(cr, &c, env, n, n_fetch, fetch, msg);
        if (!st) st = exec_cflow(cr, n, env, msg);
        c.done[id] = 1;
    }
    if (!st) st = segment_last(cr, &c, env, n_fetch, fetch, n_targets, targets, msg);
    for (int j = 0; !st && j < n_fetch; j++) out[j] = *tfc_cf_env_find(env, fetch[j]);
    if (blk != (char *)local) free(blk);
    return st;
}

/* ---- the run --------------------------------------------------------------------------- */

/* Feeds, fetches and targets must be values of the top level, not of a branch or body (a
 * region's values exist only while it runs). */
static tfc_status check_top_level(const tfc_graph *g, int n, tfc_tensor *const *t,
                                  const char *what, char *msg)
{
    for (int i = 0; i < n; i++)
        if (t[i]->node->region && !is_global_source(t[i]->node))
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "%s '%s' is inside a branch or body of '%s' (use that node's inputs "
                            "and outputs instead)", what, t[i]->name,
                            g->regions[t[i]->node->region].owner);
    return TFC_OK;
}

/* Registers the caller's feeds on their buffers (no copy) as the top level's first values. */
static tfc_status bind_feeds(struct tfc_cf_run *cr, int n_feeds, tfc_tensor *const *ft,
                             tfc_value *const *feeds, struct env *env, char *msg)
{
    cr->feed_h = calloc((size_t)n_feeds + 1, sizeof *cr->feed_h);
    if (!cr->feed_h) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    cr->n_feeds = n_feeds;
    for (int i = 0; i < n_feeds; i++) {
        struct bound b = {ft[i], NULL, {tfc_value_dtype(feeds[i]), tfc_value_shape(feeds[i])}};
        int64_t numel = tfc_shape_numel(&b.desc.shape);
        if (numel > 0)
            starpu_vector_data_register(&cr->feed_h[i], STARPU_MAIN_RAM,
                                        (uintptr_t)tfc_value_data(feeds[i]), (uint32_t)numel,
                                        tfc_dtype_size(b.desc.dtype));
        b.h = cr->feed_h[i];
        if (tfc_cf_env_bind(env, ft[i], &b))
            return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    }
    return TFC_OK;
}

/* Copies each fetched value back to the host (the acquire waits for its producers). */
static tfc_status copy_fetches(struct tfc_cf_run *cr, int n, const struct bound *b, char *msg)
{
    cr->fetch_values = calloc((size_t)n + 1, sizeof *cr->fetch_values);
    if (!cr->fetch_values) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    cr->n_fetches = n;
    for (int j = 0; j < n; j++) {
        if (tfc_value_alloc(b[j].desc.dtype, &b[j].desc.shape, &cr->fetch_values[j]))
            return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "fetch '%s': %s", b[j].t->name,
                            tfc_errmsg());
        if (!b[j].h) continue; /* zero elements */
        if (starpu_data_acquire(b[j].h, STARPU_R))
            return tfc_fail(msg, TFC_ERR_RUNTIME, "fetch '%s': StarPU could not acquire it",
                            b[j].t->name);
        memcpy(tfc_value_data(cr->fetch_values[j]),
               starpu_data_handle_to_pointer(b[j].h, STARPU_MAIN_RAM),
               tfc_value_nbytes(cr->fetch_values[j]));
        starpu_data_release(b[j].h);
    }
    return TFC_OK;
}

/* After every task ended: the first kernel failure of any segment, then the instances go back
 * to their plans (a plan evicted meanwhile is freed by its last user). Under the lock. */
static tfc_status release_holds(struct tfc_cf_run *cr, tfc_status st, char *msg)
{
    tfc_session *s = cr->s;
    while (cr->holds || cr->pool) {
        struct hold **list = cr->holds ? &cr->holds : &cr->pool, *hd = *list;
        *list = hd->next;
        struct tfc_run *sub = hd->sub;
        struct plan *p = sub->plan;
        struct tfc_kerr *e = &sub->inst->err;
        tfc_kerr_take_device(e);
        if (!st && e->set && !hd->discarded) {
            struct tfc_node *n = s->g->nodes[e->node];
            st = tfc_fail(msg, (tfc_status)e->status, "node '%s' (%s): %s", n->name,
                          n->op->name, e->msg);
        }
        struct tfc_kerr_dev *dev = e->dev;
        memset(e, 0, sizeof *e);
        e->dev = dev;
        for (int k = 0; k < p->n_fetches; k++)
            if (hd->extra[k]) starpu_data_unregister(hd->extra[k]);
        free(hd->extra);
        sub->inst->next_free = p->free_instances;
        p->free_instances = sub->inst;
        if (--p->running == 0 && p->evicted) {
            tfc_plan_release_instances(p);
            tfc_plan_free(p);
        }
        free(sub->feed_handles);
        free(sub->cbs);
        free(sub->parts);
        free(sub->records);
        free(sub->chain_times);
        free(sub);
        free(hd);
    }
    return st;
}

/* A profiled run's report: every segment's task records in submission order, as one run
 * (TFC_REPORT prints it, TFC_TRACE traces it), and what its control flow did. Under the lock,
 * after every task ended. */
static void report_run(struct tfc_cf_run *cr)
{
    tfc_session *s = cr->s;
    int n = 0, n_holds = 0;
    for (struct hold *hd = cr->holds; hd; hd = hd->next, n_holds++) n += hd->sub->plan->n_steps;
    tfc_task_record *all = calloc((size_t)n + 1, sizeof *all);
    struct hold **order = malloc(sizeof *order * (size_t)(n_holds + 1));
    if (all && order) {
        int k = n_holds, at = 0;
        for (struct hold *hd = cr->holds; hd; hd = hd->next) order[--k] = hd; /* oldest first */
        for (int h = 0; h < n_holds; h++) {
            const struct plan *p = order[h]->sub->plan;
            for (int i = 0; i < p->n_steps; i++, at++) {
                struct tfc_node *nd = s->g->nodes[p->steps[i].node];
                all[at] = order[h]->sub->records[i];
                all[at].node = nd->name;
                all[at].op = tfc_step_op_name(p, i, nd);
            }
        }
        struct tfc_run **subs = malloc(sizeof *subs * (size_t)(n_holds + 1));
        for (int h = 0; subs && h < n_holds; h++) subs[h] = order[h]->sub;
        tfc_run_keep_step_records(s, subs, subs ? n_holds : 0);
        free(subs);
        struct tfc_snap *snap1 = tfc_snap_take();
        free(s->records);
        s->records = all;
        s->n_records = n;
        all = NULL;
        tfc_report_run_done(&s->rep, cr->snap0, snap1, s->records, s->n_records,
                            s->step_records, s->n_step_records);
        tfc_snap_free(snap1);
        if (s->rep.on_stderr)
            fprintf(stderr, "  control flow: %lld loop iterations (%lld loops count-known), "
                            "cond branches then %lld, else %lld, %d segments\n",
                    (long long)cr->iterations, (long long)cr->count_known,
                    (long long)cr->branches[0], (long long)cr->branches[1], n_holds);
    }
    free(all);
    free(order);
}

tfc_status tfc_cf_run(tfc_session *s, struct tfc_run *run, int n_feeds,
                      tfc_tensor *const *feed_tensors, tfc_value *const *feeds, int n_fetches,
                      tfc_tensor *const *fetches, int n_targets, tfc_tensor *const *targets,
                      char *msg)
{
    struct tfc_cf_run *cr = calloc(1, sizeof *cr);
    if (!cr) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    cr->s = s;
    cr->top = run;
    cr->run_region = run_region;
    run->cf = cr;
    pthread_mutex_lock(&s->lock);
    cr->profiling = s->profiling;
    pthread_mutex_unlock(&s->lock);
    char env_msg[TFC_MSG_LEN]; /* a bad value was refused when the context was created */
    tfc_env_bool("TFC_WHILE_COUNT", 1, &cr->count_known_on, env_msg);
    tfc_env_bool("TFC_WHILE_SPECULATE", 0, &cr->speculate_on, env_msg);
    if (cr->profiling) cr->snap0 = tfc_snap_take(); /* bus and worker counters before */
    struct env env = {0};
    struct bound *got = malloc(sizeof *got * (size_t)(n_fetches + 1));
    tfc_status st = got ? TFC_OK : tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    if (!st) st = check_top_level(s->g, n_feeds, feed_tensors, "feed", msg);
    if (!st) st = check_top_level(s->g, n_fetches, fetches, "fetch", msg);
    if (!st) st = check_top_level(s->g, n_targets, targets, "target", msg);
    if (!st) st = bind_feeds(cr, n_feeds, feed_tensors, feeds, &env, msg);
    if (!st) mark_reached(cr, n_fetches, fetches, n_targets, targets);
    if (!st) st = exec_region(cr, &env, NULL, n_fetches, fetches, n_targets, targets, got, msg);
    if (!st) st = copy_fetches(cr, n_fetches, got, msg);
    tfc_run_wait_pending(run); /* what was submitted has ended, failed or not */
    pthread_mutex_lock(&s->lock);
    if (cr->profiling && !st) report_run(cr);
    tfc_snap_free(cr->snap0);
    cr->snap0 = NULL;
    st = release_holds(cr, st, msg);
    stacks_free(cr);
    free(cr->reached);
    s->stats.loop_iterations_kept += (uint64_t)cr->kept;
    s->stats.runs++;
    s->stats.loop_iterations += (uint64_t)cr->iterations;
    s->stats.loops_count_known += (uint64_t)cr->count_known;
    s->stats.cond_then += (uint64_t)cr->branches[0];
    s->stats.cond_else += (uint64_t)cr->branches[1];
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < cr->n_feeds; i++)
        if (cr->feed_h[i]) starpu_data_unregister(cr->feed_h[i]);
    free(env.b);
    free(got);
    return st;
}

tfc_status tfc_cf_run_wait(struct tfc_run *run, tfc_value **fetch_values)
{
    struct tfc_cf_run *cr = run->cf;
    tfc_status st = run->status;
    for (int i = 0; cr && i < cr->n_fetches; i++) {
        if (fetch_values) fetch_values[i] = st ? NULL : cr->fetch_values[i];
        if (st || !fetch_values) tfc_value_destroy(cr->fetch_values[i]);
    }
    if (cr) {
        free(cr->fetch_values);
        free(cr->feed_h);
        free(cr);
    }
    sem_destroy(&run->done);
    free(run);
    return st;
}
