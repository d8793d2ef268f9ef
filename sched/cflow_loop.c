/* cflow_loop.c: the strategies of a forward while loop beyond the plain one (cflow_run.c's
 * exec_while: predicate, read back, body): a loop whose trip count follows from a counter
 * (sched/cflow_count.c) runs every iteration without a predicate, a body of one segment going
 * straight to its plan; with TFC_WHILE_SPECULATE=1 a pure loop runs one iteration ahead of its
 * predicate's read-back. Also the bookkeeping after each iteration that every strategy shares. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cflow_priv.h"
#include "cflow_count.h"

/* ---- iterations ------------------------------------------------------------------------ */

int tfc_cf_stack_push(struct stack *sk, const struct bound *vars)
{
    int nv = tfc_cflow_n_stacked(sk->cf);
    if (sk->n == sk->cap) {
        int cap = sk->cap ? sk->cap * 2 : 16;
        struct bound *v = realloc(sk->v, sizeof *v * (size_t)cap * (size_t)nv);
        if (!v) return -1;
        sk->v = v;
        sk->cap = cap;
    }
    memcpy(sk->v + (size_t)sk->n++ * (size_t)nv, vars, sizeof *vars * (size_t)nv);
    return 0;
}

/* After iteration it of forward loop cf (its submissions numbered from first, the iteration
 * before's from *prev): next becomes the loop variables, the ones the body read go on the
 * stack sk (if any), and what iteration it-1 submitted goes back to the pool. */
tfc_status tfc_cf_iteration_done(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                                 struct stack *sk, struct bound *vars, const struct bound *next,
                                 int64_t it, uint64_t first, uint64_t *prev, char *msg)
{
    /* kept alive: the new loop variables, and with a stack the ones this body read */
    struct bound keep[2 * TFC_MAX_OPERANDS];
    memcpy(keep, next, sizeof *keep * (size_t)cf->n_vars);
    memcpy(keep + cf->n_vars, vars, sizeof *keep * (size_t)cf->n_vars);
    if (sk && tfc_cf_stack_push(sk, vars))
        return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    cr->kept += sk != NULL;
    memcpy(vars, next, sizeof *vars * (size_t)cf->n_vars);
    cr->iterations++;
    if (it > 0) tfc_cf_recycle(cr, *prev, first, keep, sk ? 2 * cf->n_vars : cf->n_vars);
    *prev = first;
    return TFC_OK;
}

tfc_status tfc_cf_iteration_failed(const struct tfc_cflow *cf, int64_t it, tfc_status st,
                                   char *msg)
{
    char inner[TFC_MSG_LEN];
    snprintf(inner, sizeof inner, "%s", msg);
    return tfc_fail(msg, st, "while '%s', iteration %lld: %s", cf->name, (long long)it, inner);
}

/* ---- count-known loops ----------------------------------------------------------------- */

/* 1 and *count when forward loop cf, entered with inputs in, is count-known: its counter,
 * bound and step are read here, once (each acquire waits for its producer). 0 otherwise, with
 * *st set when a kernel that computed them failed. */
int tfc_cf_known_count(struct tfc_cf_run *cr, const struct tfc_cflow *cf, const struct bound *in,
                       int64_t *count, tfc_status *st, char *msg)
{
    struct tfc_cf_counter k;
    if (!cr->count_known_on || !tfc_cf_counter_find(cf, &k)) return 0;
    const struct tfc_cf_operand *ops[3] = {NULL, &k.bound, &k.step};
    const void *data[3];
    int64_t buf[3];
    for (int j = 0; j < 3; j++) {
        if (ops[j] && ops[j]->value) { /* a constant: its host data */
            data[j] = tfc_value_cdata(ops[j]->value);
            continue;
        }
        const struct bound *b = &in[ops[j] ? ops[j]->input : k.var];
        if (!b->h || b->desc.dtype != k.dtype || tfc_shape_numel(&b->desc.shape) != 1 ||
            starpu_data_acquire(b->h, STARPU_R))
            return 0;
        memcpy(&buf[j], starpu_data_handle_to_pointer(b->h, STARPU_MAIN_RAM),
               tfc_dtype_size(k.dtype));
        starpu_data_release(b->h);
        data[j] = &buf[j];
    }
    if ((*st = tfc_cf_recent_kernel_error(cr, INT_MAX, msg))) return 0; /* garbage in: no count */
    return tfc_cf_trip_count(&k, data[0], data[1], data[2], cf->max_iter, count);
}

/* A body of one segment, submitted again without cutting it or looking its plan up: the plan
 * of its first iteration, its feeds the body's env (loop variables, then captures), and where
 * each output comes from. */
struct fast_body {
    struct plan *p;          /* NULL: the body submits nothing (its outputs are its inputs) */
    int from[TFC_MAX_OPERANDS]; /* output j: >= 0 the env entry, < 0 the plan fetch -1-from */
};

/* Whether iteration 0 of loop cf (submissions from first; loop variables vars before it, next
 * after) lets the next iterations take the fast path; fills fb. */
static int fast_prepare(struct tfc_cf_run *cr, const struct tfc_cflow *cf, uint64_t first,
                        const struct bound *vars, const struct bound *in,
                        const struct bound *next, struct fast_body *fb)
{
    const struct tfc_cf_region *body = &cf->reg[1];
    tfc_graph *g = cr->s->g;
    if (cr->seq > first + 1) return 0; /* more than one segment */
    for (int id = body->lo; id <= body->hi; id++)
        if (tfc_is_cflow(g->nodes[id])) return 0;
    for (int k = 0; k < cf->n_vars; k++) /* the same plan key every iteration */
        if (next[k].desc.dtype != vars[k].desc.dtype ||
            !tfc_shape_equal(&next[k].desc.shape, &vars[k].desc.shape))
            return 0;
    fb->p = cr->seq == first + 1 ? cr->holds->sub->plan : NULL;
    struct bound local[16];
    struct env e = {0, 16, local, local};
    int ok = !tfc_cf_region_env(cf, 1, vars, in, &e), nf = 0;
    tfc_tensor *f[TFC_MAX_OPERANDS]; /* as segment_last lists them: outputs not in env, once */
    for (int j = 0; ok && j < body->n_out; j++) {
        const struct bound *b = tfc_cf_env_find(&e, body->out[j]);
        if (b) {
            fb->from[j] = (int)(b - e.b);
            continue;
        }
        int at = 0;
        while (at < nf && f[at] != body->out[j]) at++;
        if (at == nf) f[nf++] = body->out[j];
        fb->from[j] = -1 - at;
    }
    if (e.b != e.local) free(e.b);
    return ok && nf == (fb->p ? fb->p->n_fetches : 0);
}

/* One iteration of a fast body: its segment submitted on a pooled instance; next receives the
 * new loop variables. */
static tfc_status fast_submit(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                              const struct fast_body *fb, const struct bound *vars,
                              const struct bound *in, struct bound *next, char *msg)
{
    tfc_session *s = cr->s;
    struct bound local[16];
    struct env e = {0, 16, local, local};
    tfc_status st = tfc_cf_region_env(cf, 1, vars, in, &e)
                        ? tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run")
                        : TFC_OK;
    struct plan *p = fb->p;
    struct hold *hd = NULL;
    if (!st && p) {
        pthread_mutex_lock(&s->lock);
        hd = tfc_cf_hold_new(cr, p, &e);
        if (!hd) st = tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
        if (hd)
            __atomic_add_fetch(&cr->top->pending, cr->profiling ? p->n_steps : p->n_signals,
                               __ATOMIC_ACQ_REL);
        if (hd && !(st = tfc_run_submit_tasks(s, hd->sub, 0, msg)))
            s->stats.tasks += (uint64_t)p->n_steps;
        pthread_mutex_unlock(&s->lock);
    }
    for (int j = 0; !st && j < cf->reg[1].n_out; j++) {
        int f = -1 - fb->from[j];
        next[j] = fb->from[j] >= 0 ? e.b[fb->from[j]]
                                   : (struct bound){NULL, tfc_cf_fetch_handle(cr, hd, f),
                                                    p->slots[p->fetch_slot[f]].desc};
        next[j].t = cf->reg[1].out[j];
    }
    if (e.b != e.local) free(e.b);
    return st;
}

/* Forward loop cf with its count known: count bodies, no predicate. */
tfc_status tfc_cf_exec_counted(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                               const struct bound *in, struct bound *vars, struct stack *sk,
                               int64_t count, char *msg)
{
    struct fast_body fb;
    int fast = 0;
    uint64_t prev = cr->seq;
    cr->count_known++;
    for (int64_t it = 0; it < count; it++) {
        uint64_t first = cr->seq;
        struct bound next[TFC_MAX_OPERANDS];
        tfc_status st = fast ? fast_submit(cr, cf, &fb, vars, in, next, msg)
                             : cr->run_region(cr, cf, 1, vars, in, next, msg);
        if (st) return tfc_cf_iteration_failed(cf, it, st, msg);
        if (it == 0) fast = fast_prepare(cr, cf, first, vars, in, next, &fb);
        if ((st = tfc_cf_iteration_done(cr, cf, sk, vars, next, it, first, &prev, msg))) return st;
    }
    return TFC_OK;
}

/* ---- speculative iterations ------------------------------------------------------------ */

/* Whether running loop cf's regions once too often changes nothing but wasted work: no node
 * of either writes a variable or holds control flow (whose predicates would be read back). */
int tfc_cf_speculable(const struct tfc_cf_run *cr, const struct tfc_cflow *cf)
{
    if (!cr->speculate_on || cr->profiling) return 0; /* a report shows what ran, nothing more */
    tfc_graph *g = cr->s->g;
    for (int r = 0; r < 2; r++)
        for (int id = cf->reg[r].lo; id <= cf->reg[r].hi; id++) {
            const struct tfc_node *n = g->nodes[id];
            if (tfc_is_cflow(n) || n->op->var_access != TFC_VAR_NONE || n->op->n_state) return 0;
        }
    return 1;
}

/* Marks what was submitted from seq first on as not run (a speculative iteration). */
static void discard_from(struct tfc_cf_run *cr, uint64_t first)
{
    for (struct hold *hd = cr->holds; hd && hd->seq >= first; hd = hd->next) hd->discarded = 1;
}

/* Forward loop cf whose count is not known, one iteration ahead (TF's parallel_iterations):
 * iteration k's body and iteration k+1's predicate are submitted (into fresh handles) before
 * k's predicate is read back, so the workers run them during the round trip. When k's
 * predicate says stop, they are discarded: their values are never bound, their kernel errors
 * never reported. */
tfc_status tfc_cf_exec_speculative(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                                   const struct bound *in, struct bound *vars, struct stack *sk,
                                   char *msg)
{
    uint64_t prev = cr->seq;
    struct bound pred, next_pred;
    tfc_status st = cr->run_region(cr, cf, 0, vars, in, &pred, msg);
    if (st) return tfc_cf_iteration_failed(cf, 0, st, msg);
    for (int64_t it = 0; !cf->max_iter || it < cf->max_iter; it++) {
        uint64_t first = cr->seq;
        struct bound next[TFC_MAX_OPERANDS];
        int go = 0, ahead = !cf->max_iter || it + 1 < cf->max_iter;
        st = cr->run_region(cr, cf, 1, vars, in, next, msg); /* speculative until pred is read */
        if (!st && ahead) st = cr->run_region(cr, cf, 0, next, in, &next_pred, msg);
        if (!st) st = tfc_cf_read_pred_value(&pred, cf->name, &go, msg);
        if (!st && !go) discard_from(cr, first);
        if (!st) st = tfc_cf_recent_kernel_error(cr, 5, msg); /* this predicate's producers */
        if (st) return tfc_cf_iteration_failed(cf, it, st, msg);
        if (!go) break;
        if ((st = tfc_cf_iteration_done(cr, cf, sk, vars, next, it, first, &prev, msg))) return st;
        pred = next_pred;
    }
    return TFC_OK;
}
