/* run.c: one run of a session: checking the caller's feeds and fetches, finding or building
 * the plan, submitting its tasks and fetch copy-outs under the session lock, and waiting for
 * exactly those. Kernel failures come back through the instance's error slot. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "host_keep.h"
#include "passes.h"
#include "testing.h"
#include "session_priv.h"
#include "chain_records.h"
#include "../codelets/fused.h"
#include "dist_place.h"
#include "../src/env.h"

/* TFC_ROW_SPLIT_MIN's default: 64 rows, the least batch that gained on 2 free cores (the
 * imported MLP at batch 128). Off by default while its blocks were pinned to workers (under
 * load the pinned block waited for a worker the OS had taken away: medians of 16-21 ms against
 * 0.73); unpinned, with its intermediates kept partitioned, it is the faster plan on free
 * cores and within 1.5x of one chain beside two busy processes (bench/RESULTS.md). */
#define ROW_SPLIT_MIN_DEFAULT 64

tfc_status tfc_run_set_msg(tfc_session *s, tfc_status st, const char *text)
{
    pthread_mutex_lock(&s->lock);
    snprintf(s->msg, sizeof s->msg, "%s", text);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static tfc_status check_tensor(tfc_session *s, tfc_tensor *t, const char *what, int i,
                               char *msg)
{
    if (!t) return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s %d is NULL", what, i);
    if (t->node->graph != s->g)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s %d ('%s') belongs to another graph",
                        what, i, t->name);
    return TFC_OK;
}

tfc_status tfc_run_check_args(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                                 tfc_value *const *feeds, int n_fetches,
                                 tfc_tensor *const *fetches, int n_targets,
                                 tfc_tensor *const *targets, char *msg)
{
    if (n_feeds < 0 || n_fetches < 0 || n_targets < 0)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "negative count");
    if ((n_feeds && (!feed_tensors || !feeds)) || (n_fetches && !fetches) ||
        (n_targets && !targets))
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "an array argument is NULL");
    if (!n_fetches && !n_targets)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "nothing to fetch and no target");
    tfc_status st;
    for (int i = 0; i < n_feeds; i++) {
        tfc_tensor *t = feed_tensors[i];
        if ((st = check_tensor(s, t, "feed", i, msg))) return st;
        if (!feeds[i])
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "feed %d ('%s'): value is NULL", i,
                            t->name);
        for (int j = 0; j < i; j++)
            if (feed_tensors[j] == t)
                return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "'%s' is fed twice", t->name);
        tfc_shape vs = tfc_value_shape(feeds[i]);
        const tfc_shape *ts = &t->desc.shape;
        int ok = vs.rank == ts->rank;
        for (int d = 0; ok && d < vs.rank; d++) ok = ts->dims[d] < 0 || ts->dims[d] == vs.dims[d];
        char a[96], b[96];
        if (tfc_value_dtype(feeds[i]) != t->desc.dtype)
            return tfc_fail(msg, TFC_ERR_DTYPE, "feed '%s' must be %s, got %s", t->name,
                            tfc_dtype_name(t->desc.dtype),
                            tfc_dtype_name(tfc_value_dtype(feeds[i])));
        if (!ok)
            return tfc_fail(msg, TFC_ERR_SHAPE, "feed '%s' must have shape %s, got %s", t->name,
                            tfc_shape_str(ts, a, sizeof a), tfc_shape_str(&vs, b, sizeof b));
    }
    for (int i = 0; i < n_fetches; i++)
        if ((st = check_tensor(s, fetches[i], "fetch", i, msg))) return st;
    for (int i = 0; i < n_targets; i++)
        if ((st = check_tensor(s, targets[i], "target", i, msg))) return st;
    return TFC_OK;
}

/* ---- plan lookup and instances (under the lock) --------------------------------------- */

struct plan *tfc_run_find_plan(tfc_session *s, int n_feeds, tfc_tensor *const *ft,
                                       tfc_value *const *fv, int n_fetches,
                                       tfc_tensor *const *fetches, int n_targets,
                                       tfc_tensor *const *targets, tfc_status *st, char *msg)
{
    uint64_t h = tfc_plan_key_hash(n_feeds, ft, fv, n_fetches, fetches, n_targets, targets);
    for (struct plan *p = s->mru; p; p = p->next) {
        if (!tfc_plan_key_equal(p, h, s->g->version, n_feeds, ft, fv, n_fetches, fetches,
                                n_targets, targets))
            continue;
        tfc_cache_unlink(s, p);
        tfc_cache_push_front(s, p);
        s->stats.plan_hits++;
        return p;
    }
    s->opt.mp_rank = tfc_dist_rank(s->ctx);
    s->opt.mp_split = tfc_mp_splits(s->g, tfc_dist_size(s->ctx));
    long long rows_min; /* checked at tfc_ctx_create; read per plan so tests can change it */
    if ((*st = tfc_env_int("TFC_ROW_SPLIT_MIN", ROW_SPLIT_MIN_DEFAULT, &rows_min, msg)))
        return NULL;
    s->opt.rows_min = rows_min;
    struct plan *p = tfc_plan_build(s->g, n_feeds, ft, fv, n_fetches, fetches, n_targets,
                                    targets, &s->opt, st, msg);
    if (!p) return NULL;
    tfc_pin_chain(p, &s->opt); /* after tiling, which plan_build ends with */
    if (tfc_dist_size(s->ctx) == 1) /* (a chain would hide the steps' rank hints) */
        tfc_chain_pinned(p, s->opt.fusion);
    /* split across ranks by the graph's "rank:R" hints (sched/dist_place.c) */
    if ((*st = tfc_mp_plan(p, s->g, s->opt.mp_rank, tfc_dist_size(s->ctx),
                           tfc_dist_size(s->ctx) > 1, msg))) {
        tfc_plan_free(p);
        return NULL;
    }
    tfc_fold_relax(p);
    s->stats.lowerings++;
    tfc_cache_push_front(s, p);
    while (s->n_plans > s->max_plans) tfc_cache_evict(s, s->lru);
    return p;
}

struct instance *tfc_plan_take_instance(struct plan *p)
{
    struct instance *in = p->free_instances;
    if (in) {
        p->free_instances = in->next_free;
        return in;
    }
    in = calloc(1, sizeof *in);
    if (!in) return NULL;
    in->plan = p;
    in->handles = calloc((size_t)p->n_slots + 1, sizeof *in->handles);
    in->bufs = calloc((size_t)p->n_slots + 1, sizeof *in->bufs);
    in->parts = calloc((size_t)p->n_parts + 1, sizeof *in->parts);
    in->args_off = malloc(sizeof(size_t) * (size_t)(p->n_steps + 1));
    size_t total = 0;
    for (int i = 0; i < p->n_steps; i++) total += (p->steps[i].args_size + 15) & ~(size_t)15;
    in->args = malloc(total + 16);
    if (!in->handles || !in->bufs || !in->parts || !in->args_off || !in->args) {
        free(in->handles); free(in->bufs); free(in->parts); free(in->args_off); free(in->args);
        free(in);
        return NULL;
    }
    size_t off = 0;
    for (int i = 0; i < p->n_steps; i++) {
        in->args_off[i] = off;
        struct tfc_kargs *a = (struct tfc_kargs *)(in->args + off);
        memcpy(a, p->steps[i].args, p->steps[i].args_size);
        tfc_kargs_set_err(a, &in->err);
        off += (p->steps[i].args_size + 15) & ~(size_t)15;
    }
#ifdef STARPU_USE_CUDA
    in->err.dev = tfc_cuda_kerr_dev_alloc(); /* CUDA kernels' range errors, no host round trip */
#endif
    for (int i = 0; i < p->n_slots; i++) {
        const struct slot *sl = &p->slots[i];
        if (sl->kind != SLOT_TEMP) continue;
        size_t es = tfc_dtype_size(sl->desc.dtype);
        /* a tiled node's operand: StarPU 1.3 partitions asynchronously only data with a home
         * buffer (a lazily allocated parent's children would get their own memory) */
        if (tfc_tiling_is_parent(p, i) && starpu_malloc(&in->bufs[i], (size_t)sl->numel * es)) {
            in->bufs[i] = NULL;
            tfc_instance_free(in, i);
            return NULL;
        }
        if (in->bufs[i]) /* home 0 */
            starpu_vector_data_register(&in->handles[i], STARPU_MAIN_RAM,
                                        (uintptr_t)in->bufs[i], (uint32_t)sl->numel, es);
        else /* home -1: StarPU allocates where the writer runs */
            starpu_vector_data_register(&in->handles[i], -1, 0, (uint32_t)sl->numel, es);
    }
    return in;
}

/* ---- completion ------------------------------------------------------------------------ */

const char *tfc_step_op_name(const struct plan *p, int i, const struct tfc_node *n)
{
    return p->steps[i].cl == &tfc_cl_hop     ? "hop"
           : p->steps[i].cl == &tfc_cl_fused ? "fused"
           : p->steps[i].cl == &tfc_cl_chain ? "chain" /* a block of rows through the plan */
                                             : n->op->name;
}

/* The last completion posts the run's semaphore. A condition variable signalled under its
 * mutex cost two context switches more per run: the waiter, woken on the worker's core (the
 * other one busy), preempted the worker, found the mutex still held and slept again until the
 * worker ran to its unlock. A post leaves the waiter nothing to take. (A stale post, when a
 * control-flow run's count reaches 0 between two segments, only costs the waiter a look.) */
static void finish_one(struct tfc_run *run)
{
    if (__atomic_sub_fetch(&run->pending, 1, __ATOMIC_ACQ_REL) == 0) sem_post(&run->done);
}

void tfc_run_wait_pending(struct tfc_run *run)
{
    while (__atomic_load_n(&run->pending, __ATOMIC_ACQUIRE) > 0)
        (void)sem_wait(&run->done); /* (EINTR: look again) */
}

/* A plain run's count goes down to 0 once, and whoever takes it there posts once (the last
 * completion, or a failed submission taking off what it did not send). Its waiter takes that
 * post even when it finds the count at 0 already: a completion preempted between its decrement
 * and its post must be done with the run before the run is freed. */
static void wait_final_post(struct tfc_run *run)
{
    if (!run->expects_post) return;
    while (sem_wait(&run->done)) continue; /* (EINTR) */
}

static void task_done(void *arg)
{
    struct task_cb *cb = arg;
    struct tfc_run *run = cb->run;
    /* StarPU releases the task's dependents before its callback, and a control-flow run
     * reuses a finished iteration's task_cb slots for a later iteration's tasks: the task is
     * StarPU's current one, not one kept in cb (which may already be a newer, freed task). */
    struct starpu_task *t = starpu_task_get_current();
    struct starpu_profiling_task_info *info = t ? t->profiling_info : NULL;
    if (run->records && info) {
        tfc_task_record *r = &run->records[cb->step];
        r->worker = info->workerid;
        starpu_worker_get_name(info->workerid, r->worker_name, sizeof r->worker_name);
        r->start_us = starpu_timing_timespec_to_us(&info->start_time);
        r->end_us = starpu_timing_timespec_to_us(&info->end_time);
        double pred = t->predicted; /* dm* schedulers fill it; others leave NaN */
        if (!(pred > 0) && t->cl && t->cl->model) {
            struct starpu_perfmodel_arch *arch =
                starpu_worker_get_perf_archtype(info->workerid, t->sched_ctx);
            pred = arch ? starpu_task_expected_length(t, arch, starpu_task_get_implementation(t))
                        : NAN;
        }
        r->predicted_us = pred > 0 && isfinite(pred) ? pred : NAN;
    }
    finish_one(run->counter ? run->counter : run); /* a segment counts on its run */
}

static void fetch_done(void *arg)
{
    struct fetch_cb *f = arg;
    /* the callback may run on a driver thread: name the node, do not use the "local" one */
    memcpy(f->dst, starpu_data_handle_to_pointer(f->h, STARPU_MAIN_RAM), f->bytes);
    starpu_data_release(f->h);
    finish_one(f->run);
}

static void run_free(struct tfc_run *run)
{
    if (!run) return;
    for (int i = 0; run->fetch_values && i < run->plan->n_fetches; i++)
        tfc_value_destroy(run->fetch_values[i]);
    free(run->fetch_values);
    free(run->feed_handles);
    free(run->cbs);
    free(run->fcbs);
    free(run->records);
    free(run->chain_times);
    free(run->parts);
    free(run->direct);
    tfc_snap_free(run->snap0);
    sem_destroy(&run->done);
    free(run);
}

/* ---- submission ----------------------------------------------------------------------- */

static starpu_data_handle_t slot_handle(struct tfc_run *run, int slot);

/* The handle of buffer j of step st: a tile (a child of one of the run's partitions) or the
 * slot's own. */
static starpu_data_handle_t buf_handle(struct tfc_run *run, const struct step *st, int j)
{
    if (st->buf_part && st->buf_part[j] >= 0)
        return run->parts[st->buf_part[j]][st->buf_child[j]];
    return slot_handle(run, st->buf_slot[j]);
}

static unsigned long tiles_in_place; /* tfc_testing_tiles_in_place */

unsigned long tfc_testing_tiles_in_place(void)
{
    return __atomic_load_n(&tiles_in_place, __ATOMIC_RELAXED);
}

/* Whether fetch i is written in place by its slot's tiles (DIRECT_FETCH): no copy out. */
static int fetched_in_place(const struct tfc_run *run, int i)
{
    return run->direct && run->plan->fetch_in_place && run->plan->fetch_in_place[i];
}

/* The tiles registered in place: unregistered once every task is over (StarPU waits for
 * them, and brings a tile a device wrote back to the host data), unless the instance keeps
 * them. */
static void unregister_direct(struct tfc_run *run)
{
    for (int q = 0; run->direct && q < run->plan->n_parts; q++)
        if (run->direct[q]) {
            tfc_host_tiles_end(run->inst, run->plan, q, run->direct[q]);
            run->direct[q] = NULL;
        }
}

/* Partition q for this run (registered in place where the plan marked it direct and the run
 * can: see tfc_run.direct). An intermediate's tiles are the instance's, planned by its first
 * run; a kept partition is submitted then too, and never ended by a run. Feeds and variables
 * (their handle is the run's, or shared by the instances) are planned per run. */
static starpu_data_handle_t *partition(struct tfc_run *run, int q)
{
    const struct plan *p = run->plan;
    int slot = p->parts[q].slot;
    starpu_data_handle_t parent = slot_handle(run, slot);
    if (run->direct && p->parts[q].direct) { /* tiles of their own on the host data */
        void *base = p->parts[q].direct == DIRECT_FEED
                         ? starpu_data_handle_to_pointer(parent, STARPU_MAIN_RAM)
                         : tfc_value_data(run->fetch_values[p->parts[q].fetch]);
        __atomic_add_fetch(&tiles_in_place, 1, __ATOMIC_RELAXED);
        return run->direct[q] = tfc_host_tiles(run->inst, p, q, base);
    }
    if (p->slots[slot].kind != SLOT_TEMP) return tfc_tiling_partition(p, q, parent);
    starpu_data_handle_t **tiles = &run->inst->parts[q];
    if (*tiles && tfc_part_kept(p, q)) return *tiles;
    if (!*tiles && !(*tiles = tfc_tiling_plan(p, q, parent))) return NULL;
    tfc_tiling_submit(p, q, parent, *tiles);
    return *tiles;
}

static void unpartition(struct tfc_run *run, int q)
{
    const struct plan *p = run->plan;
    if (run->direct && run->direct[q]) { /* unregistered when the run ends */
        run->parts[q] = NULL;
        return;
    }
    starpu_data_handle_t parent = slot_handle(run, p->parts[q].slot);
    if (run->parts[q] != run->inst->parts[q])
        tfc_tiling_unpartition(p, q, parent, run->parts[q]);
    else if (!tfc_part_kept(p, q)) /* the instance's tiles, planned once */
        tfc_tiling_end(p, q, parent, run->parts[q]);
    run->parts[q] = NULL;
}

/* Tiling around task i: the partitions it is the first tile task of before it, those it is
 * the last of after it (sched/tiling.c). Nonzero when out of memory. */
static int tile_before(struct tfc_run *run, int i)
{
    const struct plan *p = run->plan;
    if (!(p->steps[i].parts_when & TILE_PARTITION)) return 0;
    for (int q = 0; q < p->n_parts; q++) {
        if (p->parts[q].first != i) continue;
        if (!(run->parts[q] = partition(run, q))) return -1;
    }
    return 0;
}

static void tile_after(struct tfc_run *run, int i)
{
    const struct plan *p = run->plan;
    if (!(p->steps[i].parts_when & TILE_UNPARTITION)) return;
    for (int q = 0; q < p->n_parts; q++)
        if (p->parts[q].last == i) unpartition(run, q);
}

/* After a failed submission: unpartitions what is still partitioned, so the handles stay
 * usable by later runs. */
static void tile_abort(struct tfc_run *run)
{
    for (int q = 0; run->parts && q < run->plan->n_parts; q++)
        if (run->parts[q]) unpartition(run, q);
}

static starpu_data_handle_t slot_handle(struct tfc_run *run, int slot)
{
    const struct slot *sl = &run->plan->slots[slot];
    switch (sl->kind) {
    case SLOT_TEMP: return run->inst->handles[slot];
    case SLOT_FEED: return run->feed_handles[sl->ref];
    case SLOT_PERSIST: return run->s->pers[sl->ref].h;
    case SLOT_CONST: return sl->ch;
    default: return NULL;
    }
}

/* Split runs (sched/dist_place.c): a transfer's handle, and its completion counted like a
 * task's. */
static starpu_data_handle_t mp_handle(void *run, int slot)
{
    return slot_handle(run, slot);
}

static void comm_done(void *arg)
{
    struct tfc_run *run = arg;
    finish_one(run->counter ? run->counter : run);
}

/* A task that was never submitted (or that StarPU refused): starpu_task_create made it
 * detached and self-destroying, and starpu_task_destroy refuses such a task (an assertion in
 * StarPU's debug builds), so it is made ours first. */
static void discard_task(struct starpu_task *task)
{
    task->destroy = 0;
    starpu_task_destroy(task);
}

static struct starpu_task *make_task(struct tfc_run *run, int i)
{
    const struct step *st = &run->plan->steps[i];
    struct starpu_task *task = starpu_task_create();
    if (!task) return NULL;
    task->cl = st->cl;
    if (st->cl->nbuffers == STARPU_VARIABLE_NBUFFERS) task->nbuffers = st->n_buf;
    if (st->n_buf > STARPU_NMAXBUFS) { /* StarPU frees dyn_handles and dyn_modes */
        task->dyn_handles = malloc(sizeof(starpu_data_handle_t) * (size_t)st->n_buf);
        task->dyn_modes = malloc(sizeof(enum starpu_data_access_mode) * (size_t)st->n_buf);
        if (!task->dyn_handles || !task->dyn_modes) {
            discard_task(task);
            return NULL;
        }
        for (int j = 0; j < st->n_buf; j++) {
            task->dyn_handles[j] = buf_handle(run, st, j);
            task->dyn_modes[j] = st->modes[j];
        }
    } else {
        for (int j = 0; j < st->n_buf; j++) {
            task->handles[j] = buf_handle(run, st, j);
            task->modes[j] = st->modes[j];
        }
    }
    task->cl_arg = run->inst->args + run->inst->args_off[i];
    task->cl_arg_size = st->args_size;
    task->cl_arg_free = 0;
    if (st->signals || run->records || run->plan->mp) { /* the others end before a signalling
                                                         * one starts (not so across ranks) */
        task->callback_func = task_done;
        task->callback_arg = &run->cbs[i];
    }
    task->name = run->s->g->nodes[st->node]->name;
    if (st->where) task->where = st->where;
    if (st->workerids) { /* one device: the scheduler chooses among its workers */
        task->workerids = st->workerids; /* owned by the plan, which outlives the run */
        task->workerids_len = st->workerids_len;
    }
    task->priority = st->priority;
    if (st->on_worker) { /* a chain (sched/passes.c): no scheduler, no hand-offs */
        task->execute_on_a_specific_worker = 1; /* only CPU workers: ids 0 to count - 1 */
        task->workerid = (unsigned)(st->on_worker - 1 + run->pin_shift) % starpu_worker_get_count();
    }
    run->cbs[i] = (struct task_cb){run, i};
    return task;
}

/* Every variable the plan reads must be initialized, and every one it uses has its handle. */
tfc_status tfc_run_check_variables(tfc_session *s, const struct plan *p, char *msg)
{
    for (int i = 0; i < p->n_var_checks; i++) {
        struct tfc_node *v = s->g->nodes[p->var_checks[i]];
        if (v->id >= s->n_pers || !s->pers[v->id].initialized)
            return tfc_fail(msg, TFC_ERR_UNINITIALIZED,
                            "variable '%s' is read before it is initialized (call "
                            "tfc_session_init_variables or assign it first)", v->name);
    }
    for (int i = 0; i < p->n_slots; i++) {
        struct persist *pe;
        if (p->slots[i].kind == SLOT_PERSIST &&
            tfc_persist_get(s, s->g->nodes[p->slots[i].ref], &pe))
            return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "%s", s->msg);
    }
    return TFC_OK;
}

/* The run's instance of the plan, its bookkeeping arrays, the fetched values, and the feeds
 * registered with StarPU. */
static tfc_status prepare_run(tfc_session *s, struct tfc_run *run, tfc_value *const *feeds,
                              char *msg)
{
    struct plan *p = run->plan;
    run->inst = tfc_plan_take_instance(p);
    run->feed_handles = calloc((size_t)p->n_feeds + 1, sizeof *run->feed_handles);
    run->fetch_values = calloc((size_t)p->n_fetches + 1, sizeof *run->fetch_values);
    run->cbs = malloc(sizeof *run->cbs * (size_t)(p->n_steps + 1));
    run->fcbs = malloc(sizeof *run->fcbs * (size_t)(p->n_fetches + 1));
    int records_ok = !s->profiling || tfc_run_alloc_records(run);
    if (p->n_parts) run->parts = calloc((size_t)p->n_parts, sizeof *run->parts);
    int direct = 0; /* (a plan split over ranks transfers whole slots) */
    for (int q = 0; !p->mp && q < p->n_parts; q++) direct |= p->parts[q].direct != 0;
    if (direct) run->direct = calloc((size_t)p->n_parts, sizeof *run->direct);
    if (!run->inst || !run->feed_handles || !run->fetch_values || !run->cbs || !run->fcbs ||
        !records_ok || (p->n_parts && !run->parts) ||
        (direct && !run->direct))
        return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the run");
    for (int i = 0; i < p->n_fetches; i++) {
        const struct slot *sl = &p->slots[p->fetch_slot[i]];
        if (tfc_value_alloc(sl->desc.dtype, &sl->desc.shape, &run->fetch_values[i]))
            return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "fetch '%s': %s", p->fetches[i]->name,
                            tfc_errmsg());
    }
    for (int i = 0; i < p->n_feeds; i++)
        if (p->slots[i].kind == SLOT_FEED) /* registered on the caller's buffer: no copy */
            run->feed_handles[i] = tfc_host_feed(run->inst, p, i, tfc_value_data(feeds[i]));
    return TFC_OK;
}

int tfc_run_alloc_records(struct tfc_run *run)
{
    size_t n_times = tfc_chain_times_len(run->plan);
    run->records = calloc((size_t)run->plan->n_steps + 1, sizeof *run->records);
    if (n_times) run->chain_times = calloc(n_times, sizeof *run->chain_times);
    return run->records && (!n_times || run->chain_times);
}

void tfc_run_keep_step_records(tfc_session *s, struct tfc_run *const *runs, int n)
{
    size_t room = 0;
    for (int i = 0; i < n; i++)
        if (runs[i]->chain_times) room += tfc_chain_times_len(runs[i]->plan) / 2;
    free(s->step_records);
    s->step_records = room ? calloc(room, sizeof *s->step_records) : NULL;
    s->n_step_records = 0;
    for (int i = 0; s->step_records && i < n; i++)
        if (runs[i]->chain_times)
            s->n_step_records += tfc_chain_step_records(runs[i]->plan, s->g, runs[i]->records,
                                                        runs[i]->chain_times,
                                                        s->step_records + s->n_step_records);
}

/* Submits the plan's tasks in order. When StarPU refuses one, nothing more is submitted (later
 * tasks would read what it never wrote) and the completions the run waits for drop by the
 * unsent ones and the n_acquire fetch copies. */
tfc_status tfc_run_submit_tasks(tfc_session *s, struct tfc_run *run, int n_acquire, char *msg)
{
    struct plan *p = run->plan;
    tfc_chain_times_attach(p, run->inst, run->chain_times); /* NULL: a run not profiled */
    const struct mp_plan *mp = p->mp;
    int64_t seq = mp ? tfc_mp_next_run() : 0;
    for (int i = 0; i < p->n_steps; i++) {
        if (mp) { /* split across ranks: the transfers before step i, and only our steps */
            tfc_mp_post(mp, mp->comm_at[i], mp->comm_at[i + 1], seq, mp_handle, run, comm_done,
                        run);
            if (!mp->local[i]) continue;
        }
        struct starpu_task *task = tile_before(run, i) ? NULL : make_task(run, i);
        int ret = task ? starpu_task_submit(task) : -ENOMEM;
        if (!ret) {
            tile_after(run, i);
            continue;
        }
        if (task) discard_task(task);
        tile_abort(run);
        int unsent = 0;
        for (int k = i; k < p->n_steps; k++) unsent += run->records || p->steps[k].signals;
        if (mp) unsent = tfc_mp_unsent(mp, i);
        struct tfc_run *cnt = run->counter ? run->counter : run; /* who counts completions */
        if (unsent + n_acquire > 0 &&
            __atomic_sub_fetch(&cnt->pending, unsent + n_acquire, __ATOMIC_ACQ_REL) == 0)
            sem_post(&cnt->done); /* the post the waiter takes (wait_final_post) */
        struct tfc_node *n = s->g->nodes[p->steps[i].node];
        return tfc_fail(msg, ret == -ENODEV ? TFC_ERR_NO_DEVICE : TFC_ERR_RUNTIME,
                        "node '%s' (%s): %s", n->name, n->op->name,
                        ret == -ENODEV ? "no worker can run its task (check the placement "
                                         "and STARPU_NCPU/NCUDA/NOPENCL)"
                                       : "StarPU refused the task");
    }
    if (mp) /* values fetched, variables going back to their rank */
        tfc_mp_post(mp, mp->comm_at[p->n_steps], mp->n_comms, seq, mp_handle, run, comm_done, run);
    return TFC_OK;
}

/* The fetches: fed and folded values are copied now; the others are copied out by an
 * asynchronous acquire once their producer has run. */
static void queue_fetches(struct tfc_run *run, tfc_value *const *feeds)
{
    struct plan *p = run->plan;
    for (int i = 0; i < p->n_fetches; i++) {
        const struct slot *sl = &p->slots[p->fetch_slot[i]];
        tfc_value *v = run->fetch_values[i];
        if (sl->kind == SLOT_FEED) {
            memcpy(tfc_value_data(v), tfc_value_cdata(feeds[sl->ref]), tfc_value_nbytes(v));
        } else if (sl->kind == SLOT_CONST) { /* folded at plan time: read-only host data */
            memcpy(tfc_value_data(v), sl->cdata, tfc_value_nbytes(v));
        } else if ((sl->kind == SLOT_TEMP || sl->kind == SLOT_PERSIST) &&
                   !fetched_in_place(run, i)) {
            struct fetch_cb *f = &run->fcbs[i];
            *f = (struct fetch_cb){run, slot_handle(run, p->fetch_slot[i]), tfc_value_data(v),
                                   tfc_value_nbytes(v)};
            starpu_data_acquire_cb(f->h, STARPU_R, fetch_done, f);
        }
    }
}

/* Everything from here to the unlock happens under the session lock. */
static tfc_status submit_locked(tfc_session *s, struct tfc_run *run, tfc_value *const *feeds,
                                char *msg)
{
    struct plan *p = run->plan;
    tfc_status st = tfc_run_check_variables(s, p, msg);
    if (!st) st = prepare_run(s, run, feeds, msg);
    if (st) return st;
    int n_acquire = 0;
    for (int i = 0; i < p->n_fetches; i++) {
        enum slot_kind k = p->slots[p->fetch_slot[i]].kind;
        n_acquire += (k == SLOT_TEMP || k == SLOT_PERSIST) && !fetched_in_place(run, i);
    }
    if (run->records) run->snap0 = tfc_snap_take(); /* bus and worker counters before */
    int n_wait = run->records ? p->n_steps : p->n_signals; /* the tasks with a callback */
    if (p->mp) n_wait = p->mp->n_local_steps + p->mp->n_local_comms; /* and the transfers */
    run->pending = n_wait + n_acquire;
    run->expects_post = run->pending > 0;
    run->pin_shift = p->running; /* concurrent runs of a pinned chain spread over the workers */
    p->running++;
    run->submitted = 1;
    if ((st = tfc_run_submit_tasks(s, run, n_acquire, msg))) return st;
    s->stats.tasks += (uint64_t)p->n_steps;
    s->stats.soft_fallbacks += (uint64_t)p->n_soft_fallbacks;
    if (p->warning)
        snprintf(s->warning, sizeof s->warning, "%s", p->warning);
    else
        s->warning[0] = 0;
    queue_fetches(run, feeds);
    for (int i = 0; i < p->n_var_writes; i++) s->pers[p->var_writes[i]].initialized = 1;
    return TFC_OK;
}

tfc_status tfc_run_submit_plain(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                                tfc_value *const *feeds, int n_fetches,
                                tfc_tensor *const *fetches, int n_targets,
                                tfc_tensor *const *targets, tfc_run **out)
{
    char msg[TFC_MSG_LEN];
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "run: session is NULL");
    if (!out) return tfc_run_set_msg(s, TFC_ERR_INVALID_ARGUMENT, "run: out is NULL");
    *out = NULL;
    tfc_status st = tfc_run_check_args(s, n_feeds, feed_tensors, feeds, n_fetches, fetches,
                                   n_targets, targets, msg);
    if (st) return tfc_run_set_msg(s, st, msg);
    struct tfc_run *run = calloc(1, sizeof *run);
    if (!run) return tfc_run_set_msg(s, TFC_ERR_OUT_OF_MEMORY, "run: no memory");
    run->s = s;
    sem_init(&run->done, 0, 0);
    pthread_mutex_lock(&s->lock);
    run->plan = tfc_run_find_plan(s, n_feeds, feed_tensors, feeds, n_fetches, fetches,
                                   n_targets, targets, &st, msg);
    if (run->plan) st = submit_locked(s, run, feeds, msg);
    if (st && run->plan && !run->submitted) { /* nothing submitted: undo */
        if (run->inst) {
            run->inst->next_free = run->plan->free_instances;
            run->plan->free_instances = run->inst;
        }
        snprintf(s->msg, sizeof s->msg, "%s", msg);
        for (int i = 0; run->feed_handles && i < run->plan->n_feeds; i++)
            if (run->feed_handles[i]) tfc_host_feed_end(run->inst, i, run->feed_handles[i]);
        pthread_mutex_unlock(&s->lock);
        run_free(run);
        return st;
    }
    if (!run->plan) {
        snprintf(s->msg, sizeof s->msg, "%s", msg);
        pthread_mutex_unlock(&s->lock);
        free(run);
        return st;
    }
    tfc_session_track_run(s, run); /* tfc_session_destroy waits for it if the caller does not */
    pthread_mutex_unlock(&s->lock);
    run->status = st; /* a failure after some tasks were submitted: reported at wait */
    if (st) snprintf(run->msg, sizeof run->msg, "%s", msg);
    *out = run;
    return TFC_OK;
}

tfc_status tfc_run_wait_plain(tfc_run *run, tfc_value **fetch_values)
{
    if (!run) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "run_wait: run is NULL");
    tfc_session *s = run->s;
    struct plan *p = run->plan;
    wait_final_post(run);
    struct tfc_snap *snap1 = run->records ? tfc_snap_take() : NULL; /* and after */
    unregister_direct(run);
    for (int i = 0; i < p->n_feeds; i++)
        if (run->feed_handles[i]) tfc_host_feed_end(run->inst, i, run->feed_handles[i]);
    tfc_status st = run->status;
    struct tfc_kerr *e = &run->inst->err;
    tfc_kerr_take_device(e); /* every task has ended: a CUDA kernel's record is complete */
    if (!st && e->set) {
        struct tfc_node *n = s->g->nodes[e->node];
        st = (tfc_status)e->status;
        snprintf(run->msg, sizeof run->msg, "node '%s' (%s): %s", n->name, n->op->name, e->msg);
    }
    struct tfc_kerr_dev *dev = e->dev;
    memset(e, 0, sizeof *e);
    e->dev = dev;
    for (int i = 0; fetch_values && i < p->n_fetches; i++) {
        fetch_values[i] = st ? NULL : run->fetch_values[i];
        if (!st) run->fetch_values[i] = NULL;
    }
    for (int i = 0; i < p->n_fetches; i++) tfc_value_destroy(run->fetch_values[i]);
    free(run->fetch_values);
    run->fetch_values = NULL;
    pthread_mutex_lock(&s->lock);
    tfc_session_untrack_run(s, run);
    run->inst->next_free = p->free_instances;
    p->free_instances = run->inst;
    p->running--;
    s->stats.runs++;
    if (st) snprintf(s->msg, sizeof s->msg, "%s", run->msg);
    if (run->records) {
        for (int i = 0; i < p->n_steps; i++) {
            struct tfc_node *n = s->g->nodes[p->steps[i].node];
            run->records[i].node = n->name;
            run->records[i].op = tfc_step_op_name(p, i, n);
        }
        free(s->records);
        s->records = run->records;
        s->n_records = p->n_steps;
        tfc_run_keep_step_records(s, &run, 1);
        run->records = NULL;
        tfc_report_run_done(&s->rep, run->snap0, snap1, s->records, s->n_records,
                            s->step_records, s->n_step_records);
    }
    tfc_snap_free(snap1);
    if (p->evicted && !p->running) {
        tfc_plan_release_instances(p);
        tfc_plan_free(p);
    }
    pthread_mutex_unlock(&s->lock);
    run_free(run);
    return st;
}

const char *tfc_session_last_warning(const tfc_session *s)
{
    return s ? s->warning : "session is NULL";
}
