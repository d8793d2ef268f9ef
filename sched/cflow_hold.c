/* cflow_hold.c: the values and submissions of a run of a graph with control flow: the
 * environments of values a region sees, the held segment submissions (each on a plan instance
 * of its own), their recycling once no loop variable refers to them, and the read-back of a
 * predicate with the check of the kernels that computed it. */
#include <stdlib.h>
#include <string.h>
#include "cflow_priv.h"

/* ---- environments ---------------------------------------------------------------------- */

const struct bound *tfc_cf_env_find(const struct env *e, const tfc_tensor *t)
{
    for (int i = e->n - 1; i >= 0; i--)
        if (e->b[i].t == t) return &e->b[i];
    return NULL;
}

int tfc_cf_env_bind(struct env *e, tfc_tensor *t, const struct bound *v)
{
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 16;
        int grow_local = e->b == e->local; /* leaving the stack buffer: copy, not realloc */
        struct bound *b = grow_local ? malloc(sizeof *b * (size_t)cap)
                                     : realloc(e->b, sizeof *b * (size_t)cap);
        if (!b) return -1;
        if (grow_local && e->n) memcpy(b, e->b, sizeof *b * (size_t)e->n);
        e->b = b;
        e->cap = cap;
    }
    e->b[e->n] = *v;
    e->b[e->n++].t = t;
    return 0;
}

/* The values region r of cf sees: its input placeholders bound to vars (a while's loop
 * variables), its captures to the node's inputs in. */
int tfc_cf_region_env(const struct tfc_cflow *cf, int r, const struct bound *vars,
                      const struct bound *in, struct env *e)
{
    const struct tfc_region *reg = &cf->g->regions[cf->reg[r].id];
    for (int i = 0; i < cf->reg[r].n_in; i++)
        if (tfc_cf_env_bind(e, cf->reg[r].in[i], &vars[i])) return -1;
    for (int k = 0; k < reg->n_caps; k++)
        if (tfc_cf_env_bind(e, reg->cap_inner[k], &in[cf->reg[r].cap_base + k])) return -1;
    return 0;
}

/* ---- held submissions ------------------------------------------------------------------ */

/* The handle of the plan's fetch j in submission sub (NULL for zero elements). */
starpu_data_handle_t tfc_cf_fetch_handle(struct tfc_cf_run *cr, struct hold *hd, int j)
{
    struct tfc_run *sub = hd->sub;
    const struct plan *p = sub->plan;
    const struct slot *sl = &p->slots[p->fetch_slot[j]];
    switch (sl->kind) {
    case SLOT_TEMP: return sub->inst->handles[p->fetch_slot[j]];
    case SLOT_FEED: return sub->feed_handles[sl->ref];
    case SLOT_PERSIST: return cr->s->pers[sl->ref].h;
    case SLOT_CONST:
        if (sl->ch) return sl->ch;
        if (!hd->extra[j]) /* read-only: later segments only read it */
            starpu_vector_data_register(&hd->extra[j], STARPU_MAIN_RAM, (uintptr_t)sl->cdata,
                                        (uint32_t)sl->numel, tfc_dtype_size(sl->desc.dtype));
        return hd->extra[j];
    default: return NULL;
    }
}

/* A recycled submission of plan p, if the run has one. */
static struct hold *pool_take(struct tfc_cf_run *cr, const struct plan *p)
{
    for (struct hold **pp = &cr->pool; *pp; pp = &(*pp)->next)
        if ((*pp)->sub->plan == p) {
            struct hold *hd = *pp;
            *pp = hd->next;
            return hd;
        }
    return NULL;
}

/* A submission of plan p on a fresh or recycled instance, fed from env; held by the run. Under
 * the lock. */
struct hold *tfc_cf_hold_new(struct tfc_cf_run *cr, struct plan *p, const struct env *env)
{
    struct hold *hd = pool_take(cr, p);
    if (hd) { /* the same key: as many feeds */
        for (int i = 0; i < env->n; i++) hd->sub->feed_handles[i] = env->b[i].h;
        hd->seq = cr->seq++;
        hd->next = cr->holds;
        cr->holds = hd;
        return hd;
    }
    hd = calloc(1, sizeof *hd);
    struct tfc_run *sub = calloc(1, sizeof *sub);
    if (!hd || !sub) {
        free(hd);
        free(sub);
        return NULL;
    }
    hd->sub = sub;
    sub->s = cr->s;
    sub->plan = p;
    sub->counter = cr->top;
    sub->feed_handles = malloc(sizeof *sub->feed_handles * (size_t)(env->n + 1));
    sub->cbs = malloc(sizeof *sub->cbs * (size_t)(p->n_steps + 1));
    hd->extra = calloc((size_t)p->n_fetches + 1, sizeof *hd->extra);
    if (p->n_parts) sub->parts = calloc((size_t)p->n_parts, sizeof *sub->parts);
    int records_ok = !cr->profiling || tfc_run_alloc_records(sub);
    sub->inst = sub->feed_handles && sub->cbs && hd->extra && (!p->n_parts || sub->parts) &&
                        records_ok
                    ? tfc_plan_take_instance(p) : NULL;
    if (!sub->inst) {
        free(sub->feed_handles); free(sub->cbs); free(sub->parts); free(sub->records);
        free(sub->chain_times);
        free(hd->extra); free(sub); free(hd);
        return NULL;
    }
    for (int i = 0; i < env->n; i++) sub->feed_handles[i] = env->b[i].h;
    p->running++;
    hd->seq = cr->seq++;
    hd->next = cr->holds;
    cr->holds = hd;
    return hd;
}

/* ---- recycling ----------------------------------------------------------------------- */

/* Whether one of the n values lives in a handle of hd's instance. */
static int hold_refers(const struct hold *hd, const struct bound *v, int n)
{
    const struct plan *p = hd->sub->plan;
    for (int j = 0; j < n; j++) {
        if (!v[j].h) continue;
        for (int k = 0; k < p->n_fetches; k++)
            if (v[j].h == hd->extra[k]) return 1;
        for (int k = 0; k < p->n_slots; k++)
            if (p->slots[k].kind == SLOT_TEMP && hd->sub->inst->handles[k] == v[j].h) return 1;
    }
    return 0;
}

/* Once iteration k+1 is submitted, what iteration k submitted (holds numbered [from, to)) is
 * read by nothing later but the loop variables: the other instances go to the pool, and their
 * next writer is ordered after their readers by StarPU (sequential consistency). Memory stays
 * bounded however long the loop runs. A backward loop will keep them instead (its stack). */
void tfc_cf_recycle(struct tfc_cf_run *cr, uint64_t from, uint64_t to, const struct bound *vars,
                    int n_vars)
{
    if (cr->profiling) return; /* each submission keeps its task records */
    pthread_mutex_lock(&cr->s->lock); /* the pool is shared with this run's submissions only,
                                       * but hold_new reads it under the lock */
    for (struct hold **pp = &cr->holds; *pp && (*pp)->seq >= from;) {
        struct hold *hd = *pp;
        if (hd->seq >= to || hd->discarded || hold_refers(hd, vars, n_vars)) {
            pp = &hd->next;
            continue;
        }
        *pp = hd->next;
        hd->next = cr->pool;
        cr->pool = hd;
    }
    pthread_mutex_unlock(&cr->s->lock);
}

/* ---- predicates ------------------------------------------------------------------------ */

/* A kernel failure recorded in one of the newest n holds (the predicate's producers): a loop
 * must not go on from a value a failed kernel left. */
tfc_status tfc_cf_recent_kernel_error(struct tfc_cf_run *cr, int n, char *msg)
{
    for (struct hold *hd = cr->holds; hd && n-- > 0; hd = hd->next) {
        struct tfc_kerr *e = &hd->sub->inst->err;
        if (!__atomic_load_n(&e->set, __ATOMIC_ACQUIRE) || hd->discarded) continue;
        struct tfc_node *nd = cr->s->g->nodes[e->node];
        return tfc_fail(msg, (tfc_status)e->status, "node '%s' (%s): %s", nd->name,
                        nd->op->name, e->msg);
    }
    return TFC_OK;
}

/* The predicate's one element, read back without the session lock (ARCHITECTURE.md 9); no
 * check of the kernels before it. */
tfc_status tfc_cf_read_pred_value(const struct bound *b, const char *node, int *value, char *msg)
{
    if (!b->h)
        return tfc_fail(msg, TFC_ERR_INTERNAL, "node '%s': predicate '%s' has no data", node,
                        b->t->name);
    if (starpu_data_acquire(b->h, STARPU_R))
        return tfc_fail(msg, TFC_ERR_RUNTIME, "node '%s': StarPU could not acquire predicate "
                        "'%s'", node, b->t->name);
    *value = tfc_cf_pred_value(b->desc.dtype, starpu_data_handle_to_pointer(b->h, STARPU_MAIN_RAM));
    starpu_data_release(b->h);
    return TFC_OK;
}
