/* session.c: sessions and runs. A session owns the variables' and constants' StarPU handles,
 * a bounded LRU cache of plans, and the submission lock: a run looks up (or builds) its plan,
 * takes a free instance of it, and submits every task and its fetch copy-outs under the lock
 * (unlocked concurrent submission over shared handles hangs StarPU 1.3); then it waits for
 * its own tasks only, never for all of StarPU's. */
#include <stdlib.h>
#include <string.h>
#include "host_keep.h"
#include "session_priv.h"
#include "../src/env.h"
#include "testing.h"

/* ---- plan options ---------------------------------------------------------------------- */

/* The session owns the options of lowering and of the plan passes (sched/passes.c,
 * priority.c, tiling.c): it reads them here, its setters change them, and since a cached plan
 * was built with the old values, each setter drops the cache itself. The passes only receive
 * the options, so they never call back into the session. */

/* Default tiling threshold: 2*512^3 flops, a gemm of about 1 ms on one core here; below it the
 * partition tasks and the task overhead (each a few us) eat the gain, and other nodes of a
 * graph usually keep the workers busy anyway. */
#define TILE_MIN_DEFAULT 268435456.0

/* The policies that place tasks from perfmodel predictions (dm*, *heft*): step costs then come
 * from calibrated history where it is loaded (sched/priority.c). */
static int policy_reads_models(const char *name)
{
    return name && (strncmp(name, "dm", 2) == 0 || strstr(name, "heft") != NULL);
}

/* The workers automatic tiling shares a step among: the CUDA workers when there are any, as a
 * GPU runs a tile in a small fraction of a CPU core's time, so tiles cut for the CPU cores too
 * pulled work onto them and across the bus (the CNN step on an H200 with 4 CPU workers: 18 ms
 * tiled for all 5 workers, 2.3 ms with each step whole on the GPU). Otherwise all workers. */
int tfc_tile_sharing_workers(int n_workers, int n_cuda_workers)
{
    return n_cuda_workers > 0 ? n_cuda_workers : n_workers;
}

/* TFC_PRIORITIES (0/1, default 1), the scheduler's priority range and whether it reads
 * perfmodels; TFC_TILE_MIN and TFC_TILE_SIZE; TFC_CSE, TFC_CONST_FOLD, TFC_FUSION (0/1, default
 * 1). A bad value is an error with a message. */
static tfc_status read_options(struct plan_options *opt, char *msg)
{
    tfc_status st = tfc_env_bool("TFC_PRIORITIES", 1, &opt->priorities, msg);
    if (st) return st;
    opt->prio_min = opt->prio_max = 0;
    opt->model_lookup = 0;
    if (starpu_is_initialized()) {
        opt->prio_min = starpu_sched_get_min_priority();
        opt->prio_max = starpu_sched_get_max_priority();
        struct starpu_sched_policy *pol = starpu_sched_ctx_get_sched_policy(0);
        opt->model_lookup = pol && policy_reads_models(pol->policy_name);
    }
    opt->tile_min = TILE_MIN_DEFAULT;
    opt->tile_size = 0;
    opt->tile_workers = starpu_is_initialized()
                            ? tfc_tile_sharing_workers((int)starpu_worker_get_count(),
                                                       (int)starpu_cuda_worker_get_count())
                            : 1;
    long long min, size;
    st = tfc_env_int("TFC_TILE_MIN", (long long)TILE_MIN_DEFAULT, &min, msg);
    if (!st) st = tfc_env_int("TFC_TILE_SIZE", 0, &size, msg); /* 0: auto */
    if (st) return st;
    opt->tile_min = (double)min;
    opt->tile_size = (int)size;
    st = tfc_env_bool("TFC_CSE", 1, &opt->cse, msg);
    if (!st) st = tfc_env_bool("TFC_CONST_FOLD", 1, &opt->const_fold, msg);
    if (!st) st = tfc_env_bool("TFC_FUSION", 1, &opt->fusion, msg);
    opt->pin_chains = 1;
    return st;
}

/* ---- sessions ------------------------------------------------------------------------- */

tfc_status tfc_session_create(tfc_ctx *ctx, tfc_graph *g, tfc_session **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "session_create: out is NULL");
    *out = NULL;
    if (!ctx || !g)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "session_create: %s is NULL",
                               !ctx ? "ctx" : "graph");
    if (tfc_graph_status(g))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT,
                               "session_create: the graph has a build error: %s",
                               tfc_graph_errmsg(g));
    tfc_session *s = calloc(1, sizeof *s);
    if (!s) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "session_create: no memory");
    char msg[TFC_MSG_LEN];
    tfc_status st = read_options(&s->opt, msg);
    if (st) {
        free(s);
        return tfc_fail_global(st, "session_create: %s", msg);
    }
    static unsigned n_sessions; /* numbers sessions in messages and trace files */
    s->id = __atomic_add_fetch(&n_sessions, 1, __ATOMIC_RELAXED);
    st = tfc_report_init(&s->rep, s->id, msg); /* TFC_REPORT, TFC_TRACE */
    if (st) {
        free(s);
        return tfc_fail_global(st, "session_create: %s", msg);
    }
    long long cache;
    st = tfc_env_int("TFC_PLAN_CACHE", 32, &cache, msg);
    if (st) {
        tfc_report_fini(&s->rep);
        free(s);
        return tfc_fail_global(st, "session_create: %s", msg);
    }
    s->g = g;
    s->ctx = ctx;
    s->max_plans = (int)cache;
    pthread_mutex_init(&s->lock, NULL);
    if (s->rep.on_stderr || s->rep.trace.fd >= 0) tfc_session_set_profiling(s, 1);
    *out = s;
    return TFC_OK;
}

void tfc_instance_free(struct instance *in, int n_slots)
{
    const struct plan *p = in->plan;
    tfc_host_keep_release(in);
    for (int q = 0; q < p->n_parts; q++) { /* the instance's tiles, before their parents go */
        if (!in->parts[q]) continue;
        starpu_data_handle_t parent = in->handles[p->parts[q].slot];
        if (tfc_part_kept(p, q)) tfc_tiling_end(p, q, parent, in->parts[q]);
        tfc_tiling_clean(p, q, parent, in->parts[q]);
    }
    for (int i = 0; i < n_slots; i++) {
        if (in->bufs[i]) { /* a home buffer (tiling): free it once StarPU lets go */
            if (in->handles[i]) starpu_data_unregister(in->handles[i]);
            starpu_free(in->bufs[i]);
        } else if (in->handles[i]) {
            starpu_data_unregister_submit(in->handles[i]);
        }
    }
#ifdef STARPU_USE_CUDA
    tfc_cuda_kerr_dev_free(in->err.dev);
#endif
    free(in->handles);
    free(in->bufs);
    free(in->parts);
    free(in->args);
    free(in->args_off);
    free(in);
}

void tfc_plan_release_instances(struct plan *p)
{
    for (struct instance *in = p->free_instances, *next; in; in = next) {
        next = in->next_free;
        tfc_instance_free(in, p->n_slots);
    }
    p->free_instances = NULL;
}

void tfc_cache_unlink(tfc_session *s, struct plan *p)
{
    if (p->prev) p->prev->next = p->next; else s->mru = p->next;
    if (p->next) p->next->prev = p->prev; else s->lru = p->prev;
    p->prev = p->next = NULL;
    s->n_plans--;
}

void tfc_cache_push_front(tfc_session *s, struct plan *p)
{
    p->prev = NULL;
    p->next = s->mru;
    if (s->mru) s->mru->prev = p; else s->lru = p;
    s->mru = p;
    s->n_plans++;
}

/* Drops a plan from the cache; it is freed now or when its last run ends. */
void tfc_cache_evict(tfc_session *s, struct plan *p)
{
    tfc_cache_unlink(s, p);
    p->evicted = 1;
    if (!p->running) {
        tfc_plan_release_instances(p);
        tfc_plan_free(p);
    }
}

void tfc_session_track_run(tfc_session *s, struct tfc_run *run)
{
    run->id = ++s->n_submitted;
    run->prev_in_flight = NULL;
    run->next_in_flight = s->in_flight;
    if (s->in_flight) s->in_flight->prev_in_flight = run;
    s->in_flight = run;
}

void tfc_session_untrack_run(tfc_session *s, struct tfc_run *run)
{
    if (run->prev_in_flight)
        run->prev_in_flight->next_in_flight = run->next_in_flight;
    else if (s->in_flight == run)
        s->in_flight = run->next_in_flight;
    if (run->next_in_flight) run->next_in_flight->prev_in_flight = run->prev_in_flight;
    run->prev_in_flight = run->next_in_flight = NULL;
}

tfc_graph *tfc_session_graph(const tfc_session *s)
{
    return s ? s->g : NULL;
}

const char *tfc_session_errmsg(const tfc_session *s)
{
    return s ? s->msg : "session is NULL";
}

void tfc_session_get_stats(tfc_session *s, tfc_session_stats *out)
{
    if (!s || !out) return;
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    out->cached_plans = s->n_plans;
    pthread_mutex_unlock(&s->lock);
}

void tfc_session_set_plan_cache_size(tfc_session *s, int n)
{
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    s->max_plans = n < 1 ? 1 : n;
    while (s->n_plans > s->max_plans) tfc_cache_evict(s, s->lru);
    pthread_mutex_unlock(&s->lock);
}

tfc_status tfc_session_set_profiling(tfc_session *s, int on)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_profiling: session is NULL");
    pthread_mutex_lock(&s->lock);
    s->profiling = on != 0;
    /* enabling resets StarPU's counters: only when it is off (sched/report.c accumulates) */
    if (on && starpu_profiling_status_get() != STARPU_PROFILING_ENABLE)
        starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    pthread_mutex_unlock(&s->lock);
    return TFC_OK;
}

int tfc_session_last_records(tfc_session *s, const tfc_task_record **out)
{
    if (!s || !out) return 0;
    *out = s->records;
    return s->n_records;
}

void tfc_session_set_hop(tfc_session *s, int on, uint32_t where)
{
    pthread_mutex_lock(&s->lock);
    s->opt.hop = on;
    s->opt.hop_where = where;
    while (s->mru) tfc_cache_evict(s, s->mru); /* plans built without the hook are stale */
    pthread_mutex_unlock(&s->lock);
}

void tfc_session_set_where(tfc_session *s, uint32_t where)
{
    pthread_mutex_lock(&s->lock);
    s->opt.where = where;
    while (s->mru) tfc_cache_evict(s, s->mru);
    pthread_mutex_unlock(&s->lock);
}

void tfc_session_set_priorities(tfc_session *s, int on)
{
    pthread_mutex_lock(&s->lock);
    s->opt.priorities = on != 0;
    while (s->mru) tfc_cache_evict(s, s->mru); /* plans built with the other setting are stale */
    pthread_mutex_unlock(&s->lock);
}

tfc_status tfc_session_set_passes(tfc_session *s, unsigned passes)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_passes: session is NULL");
    if (passes & ~(unsigned)TFC_PASS_ALL)
        return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT,
                        "set_passes: unknown pass bits 0x%x (TFC_PASS_CSE, TFC_PASS_CONST_FOLD, "
                        "TFC_PASS_FUSION, TFC_PASS_PIN_CHAINS)",
                        passes & ~(unsigned)TFC_PASS_ALL);
    pthread_mutex_lock(&s->lock);
    s->opt.cse = (passes & TFC_PASS_CSE) != 0;
    s->opt.const_fold = (passes & TFC_PASS_CONST_FOLD) != 0;
    s->opt.fusion = (passes & TFC_PASS_FUSION) != 0;
    s->opt.pin_chains = (passes & TFC_PASS_PIN_CHAINS) != 0;
    while (s->mru) tfc_cache_evict(s, s->mru); /* plans built with other passes are stale */
    pthread_mutex_unlock(&s->lock);
    return TFC_OK;
}

unsigned tfc_session_get_passes(tfc_session *s)
{
    if (!s) return 0;
    pthread_mutex_lock(&s->lock);
    unsigned f = (s->opt.cse ? TFC_PASS_CSE : 0) | (s->opt.const_fold ? TFC_PASS_CONST_FOLD : 0) |
                 (s->opt.fusion ? TFC_PASS_FUSION : 0) |
                 (s->opt.pin_chains ? TFC_PASS_PIN_CHAINS : 0);
    pthread_mutex_unlock(&s->lock);
    return f;
}

tfc_status tfc_session_set_tiling(tfc_session *s, double min_flops, int tile_size)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_tiling: session is NULL");
    if (!(min_flops >= 0) || tile_size < 0 || tile_size > 65536) {
        pthread_mutex_lock(&s->lock); /* s->msg: a run may be writing it too */
        tfc_status st = tfc_sched_fail(NULL, s->msg, TFC_ERR_INVALID_ARGUMENT,
                                       "set_tiling: min_flops must be >= 0 (0: off) and "
                                       "tile_size in [0, 65536] (0: auto); got %g and %d",
                                       min_flops, tile_size);
        pthread_mutex_unlock(&s->lock);
        return st;
    }
    pthread_mutex_lock(&s->lock);
    s->opt.tile_min = min_flops;
    s->opt.tile_size = tile_size;
    while (s->mru) tfc_cache_evict(s, s->mru); /* plans built with the old values are stale */
    pthread_mutex_unlock(&s->lock);
    return TFC_OK;
}

/* ---- persistent data (variables and constants) --------------------------------------- */

/* The handle of a variable or constant node, created on first use. Under the lock. */
tfc_status tfc_persist_get(tfc_session *s, struct tfc_node *n, struct persist **out)
{
    if (n->id >= s->n_pers) {
        int cap = s->g->n_nodes > n->id ? s->g->n_nodes : n->id + 1;
        struct persist *p = realloc(s->pers, sizeof *p * (size_t)cap);
        if (!p) return tfc_fail(s->msg, TFC_ERR_OUT_OF_MEMORY, "no memory for variables");
        memset(p + s->n_pers, 0, sizeof *p * (size_t)(cap - s->n_pers));
        s->pers = p;
        s->n_pers = cap;
    }
    struct persist *p = &s->pers[n->id];
    *out = p;
    const struct tfc_desc *d = &n->outputs[0].desc;
    int64_t numel = tfc_shape_numel(&d->shape);
    if (p->h || numel == 0) return TFC_OK;
    if (numel > (int64_t)UINT32_MAX) /* StarPU 1.3's vector interface counts in 32 bits */
        return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT,
                        "variable '%s' has %lld elements: StarPU 1.3's data interfaces hold at "
                        "most %u elements per tensor",
                        n->name, (long long)numel, UINT32_MAX);
    size_t bytes = (size_t)numel * tfc_dtype_size(d->dtype);
    if (starpu_malloc(&p->ptr, bytes) != 0)
        return tfc_fail(s->msg, TFC_ERR_OUT_OF_MEMORY, "variable '%s': no memory for %zu bytes",
                        n->name, bytes);
    if (n->value)
        memcpy(p->ptr, tfc_value_cdata(n->value), bytes);
    else
        memset(p->ptr, 0, bytes);
    starpu_vector_data_register(&p->h, STARPU_MAIN_RAM, (uintptr_t)p->ptr, (uint32_t)numel,
                                tfc_dtype_size(d->dtype));
    return TFC_OK;
}

static tfc_status check_variable(tfc_session *s, tfc_tensor *var, const char *what)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "%s: session is NULL", what);
    if (!var) return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT, "%s: tensor is NULL", what);
    if (var->node->graph != s->g)
        return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT, "%s: '%s' belongs to another graph",
                        what, var->name);
    if (var->node->op != &tfc_op_variable)
        return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT, "%s: '%s' is not a variable (%s)",
                        what, var->name, var->node->op->name);
    return TFC_OK;
}

struct host_copy {
    starpu_data_handle_t h;
    void *dst;
    const void *src;
    size_t bytes;
    int done;
    pthread_mutex_t m;
    pthread_cond_t c;
};

static void host_copy_cb(void *arg)
{
    struct host_copy *hc = arg;
    void *local = starpu_data_handle_to_pointer(hc->h, STARPU_MAIN_RAM); /* any thread */
    if (hc->dst)
        memcpy(hc->dst, local, hc->bytes);
    else
        memcpy(local, hc->src, hc->bytes);
    starpu_data_release(hc->h);
    pthread_mutex_lock(&hc->m);
    hc->done = 1;
    pthread_cond_signal(&hc->c);
    pthread_mutex_unlock(&hc->m);
}

/* Copies between a host buffer and a handle in StarPU's order of accesses: submitted under
 * the lock (the caller holds it), waited for after the caller unlocks. */
static void host_copy_submit(struct host_copy *hc, starpu_data_handle_t h, void *dst,
                             const void *src, size_t bytes)
{
    hc->h = h;
    hc->dst = dst;
    hc->src = src;
    hc->bytes = bytes;
    hc->done = 0;
    pthread_mutex_init(&hc->m, NULL);
    pthread_cond_init(&hc->c, NULL);
    starpu_data_acquire_cb(h, dst ? STARPU_R : STARPU_W, host_copy_cb, hc);
}

static void host_copy_wait(struct host_copy *hc)
{
    pthread_mutex_lock(&hc->m);
    while (!hc->done) pthread_cond_wait(&hc->c, &hc->m);
    pthread_mutex_unlock(&hc->m);
    pthread_mutex_destroy(&hc->m);
    pthread_cond_destroy(&hc->c);
}

static tfc_status write_variable(tfc_session *s, struct tfc_node *n, const void *data)
{
    struct persist *p;
    struct host_copy hc;
    const struct tfc_desc *d = &n->outputs[0].desc;
    pthread_mutex_lock(&s->lock);
    tfc_status st = tfc_persist_get(s, n, &p);
    if (st || !p->h) {
        if (!st) p->initialized = 1;
        pthread_mutex_unlock(&s->lock);
        return st;
    }
    host_copy_submit(&hc, p->h, NULL, data,
                     (size_t)tfc_shape_numel(&d->shape) * tfc_dtype_size(d->dtype));
    p->initialized = 1;
    pthread_mutex_unlock(&s->lock);
    host_copy_wait(&hc);
    return TFC_OK;
}

tfc_status tfc_session_init_variable(tfc_session *s, tfc_tensor *var)
{
    tfc_status st = check_variable(s, var, "init_variable");
    if (st) return st;
    struct tfc_node *n = var->node;
    const struct tfc_desc *d = &var->desc;
    size_t bytes = (size_t)tfc_shape_numel(&d->shape) * tfc_dtype_size(d->dtype);
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) return tfc_fail(s->msg, TFC_ERR_OUT_OF_MEMORY, "variable '%s': no memory", n->name);
    char msg[TFC_MSG_LEN];
    st = tfc_init_fill(&n->init, s->g->seed, d->dtype, &d->shape, buf, msg);
    if (st) {
        free(buf);
        return tfc_fail(s->msg, st, "variable '%s': %s", n->name, msg);
    }
    st = write_variable(s, n, buf);
    free(buf);
    return st;
}

tfc_status tfc_session_init_variables(tfc_session *s)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "init_variables: session is NULL");
    for (int i = 0; i < s->g->n_nodes; i++) {
        struct tfc_node *n = s->g->nodes[i];
        if (n->op != &tfc_op_variable) continue;
        tfc_status st = tfc_session_init_variable(s, &n->outputs[0]);
        if (st) return st;
    }
    return TFC_OK;
}

int tfc_session_variable_initialized(tfc_session *s, tfc_tensor *var)
{
    if (!s || !var || var->node->graph != s->g) return 0;
    pthread_mutex_lock(&s->lock);
    int id = var->node->id, init = id < s->n_pers && s->pers[id].initialized;
    pthread_mutex_unlock(&s->lock);
    return init;
}

tfc_status tfc_session_write_variable(tfc_session *s, tfc_tensor *var, const tfc_value *value)
{
    tfc_status st = check_variable(s, var, "write_variable");
    if (st) return st;
    char a[96], b[96];
    tfc_shape vs = tfc_value_shape(value);
    if (!value) return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT, "write_variable: value is NULL");
    if (tfc_value_dtype(value) != var->desc.dtype)
        return tfc_fail(s->msg, TFC_ERR_DTYPE, "variable '%s' is %s, the value %s", var->name,
                        tfc_dtype_name(var->desc.dtype), tfc_dtype_name(tfc_value_dtype(value)));
    if (!tfc_shape_equal(&vs, &var->desc.shape))
        return tfc_fail(s->msg, TFC_ERR_SHAPE, "variable '%s' has shape %s, the value %s",
                        var->name, tfc_shape_str(&var->desc.shape, a, sizeof a),
                        tfc_shape_str(&vs, b, sizeof b));
    return write_variable(s, var->node, tfc_value_cdata(value));
}

tfc_status tfc_session_read_variables(tfc_session *s, int n, tfc_tensor *const *vars,
                                      tfc_value **out)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "read_variables: session is NULL");
    if (n < 0 || (n && (!vars || !out)))
        return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT, "read_variables: bad arguments");
    tfc_status st = TFC_OK;
    for (int i = 0; i < n && !st; i++) st = check_variable(s, vars[i], "read_variables");
    if (st) return st;
    struct host_copy *hc = calloc((size_t)n + 1, sizeof *hc);
    if (!hc) return tfc_fail(s->msg, TFC_ERR_OUT_OF_MEMORY, "read_variables: no memory");
    for (int i = 0; i < n; i++) out[i] = NULL;
    int submitted = 0;
    /* one consistent cut: every copy is queued under the lock, between two runs' tasks */
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < n && !st; i++) {
        struct tfc_node *v = vars[i]->node;
        struct persist *p;
        if (v->id >= s->n_pers || !s->pers[v->id].initialized) {
            st = tfc_fail(s->msg, TFC_ERR_UNINITIALIZED, "variable '%s' is not initialized", v->name);
            break;
        }
        st = tfc_persist_get(s, v, &p);
        if (!st && tfc_value_alloc(vars[i]->desc.dtype, &vars[i]->desc.shape, &out[i]))
            st = tfc_fail(s->msg, TFC_ERR_OUT_OF_MEMORY, "read_variables: %s", tfc_errmsg());
        if (!st && p->h) {
            host_copy_submit(&hc[i], p->h, tfc_value_data(out[i]), NULL, tfc_value_nbytes(out[i]));
            submitted = i + 1;
        }
    }
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < submitted; i++)
        if (hc[i].h) host_copy_wait(&hc[i]);
    free(hc);
    if (st)
        for (int i = 0; i < n; i++) {
            tfc_value_destroy(out[i]);
            out[i] = NULL;
        }
    return st;
}

tfc_status tfc_session_read_variable(tfc_session *s, tfc_tensor *var, tfc_value **out)
{
    tfc_status st = check_variable(s, var, "read_variable");
    if (st) return st;
    if (!out) return tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT, "read_variable: out is NULL");
    *out = NULL;
    struct persist *p;
    struct host_copy hc;
    tfc_value *v;
    pthread_mutex_lock(&s->lock);
    int id = var->node->id;
    if (id >= s->n_pers || !s->pers[id].initialized) {
        pthread_mutex_unlock(&s->lock);
        return tfc_fail(s->msg, TFC_ERR_UNINITIALIZED, "variable '%s' is not initialized",
                        var->name);
    }
    st = tfc_persist_get(s, var->node, &p);
    if (!st && tfc_value_alloc(var->desc.dtype, &var->desc.shape, &v))
        st = tfc_fail(s->msg, TFC_ERR_OUT_OF_MEMORY, "read_variable: %s", tfc_errmsg());
    if (st || !p->h) {
        pthread_mutex_unlock(&s->lock);
        if (!st) *out = v;
        return st;
    }
    host_copy_submit(&hc, p->h, tfc_value_data(v), NULL, tfc_value_nbytes(v));
    pthread_mutex_unlock(&s->lock);
    host_copy_wait(&hc);
    *out = v;
    return TFC_OK;
}
