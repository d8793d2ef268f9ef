/* report.c: seeing where things ran. For profiled runs: the bytes moved on each bus link and
 * each worker's executing/sleeping/idle time (differences of StarPU's profiling counters
 * around the run), a table on a FILE (TFC_REPORT=1: stderr, every run) and Chrome-trace JSON
 * (TFC_TRACE=path: every run of the session; tfc_session_write_trace: the last run; written
 * by sched/trace.c).
 *
 * StarPU 1.3's starpu_bus_get_profiling_info and starpu_profiling_worker_get_info return the
 * counters since the last call and reset them, so every read goes through tfc_snap_take,
 * which adds them into process-wide totals under one mutex; a run's figures are the
 * difference of two snapshots of those totals. Nothing here runs unless profiling is on.
 * The totals belong to one StarPU lifetime (sched/runtime.c resets them when the library lets
 * StarPU go): a later StarPU may have other workers and buses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "session_priv.h"
#include "../src/env.h"

struct tfc_snap {
    double t_us;
    int n_bus, n_workers;
    long long *bytes, *count;       /* per bus id */
    double *total, *exec, *sleep;   /* per worker, us */
    long long *tasks;
};

static pthread_mutex_t acc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tfc_snap acc;         /* the process-wide totals */

void tfc_snap_free(struct tfc_snap *sn)
{
    if (!sn) return;
    free(sn->bytes);
    free(sn->count);
    free(sn->total);
    free(sn->exec);
    free(sn->sleep);
    free(sn->tasks);
    if (sn != &acc) free(sn);
}

static int snap_alloc(struct tfc_snap *sn, int n_bus, int n_workers)
{
    size_t b = (size_t)n_bus + 1, w = (size_t)n_workers + 1;
    sn->n_bus = n_bus;
    sn->n_workers = n_workers;
    sn->bytes = calloc(b, sizeof *sn->bytes);
    sn->count = calloc(b, sizeof *sn->count);
    sn->total = calloc(w, sizeof *sn->total);
    sn->exec = calloc(w, sizeof *sn->exec);
    sn->sleep = calloc(w, sizeof *sn->sleep);
    sn->tasks = calloc(w, sizeof *sn->tasks);
    return sn->bytes && sn->count && sn->total && sn->exec && sn->sleep && sn->tasks;
}

static double ts_us(struct timespec *t) { return starpu_timing_timespec_to_us(t); }

struct tfc_snap *tfc_snap_take(void)
{
    struct tfc_snap *sn = calloc(1, sizeof *sn);
    if (!sn) return NULL;
    pthread_mutex_lock(&acc_lock);
    int n_bus = starpu_bus_get_count(), n_workers = (int)starpu_worker_get_count();
    if (acc.bytes && (acc.n_bus != n_bus || acc.n_workers != n_workers)) {
        /* totals of an earlier StarPU, with other workers: asking this one for a worker it
         * does not have aborts the process (_starpu_get_worker_struct) */
        tfc_snap_free(&acc);
        memset(&acc, 0, sizeof acc);
    }
    if (!acc.bytes && !snap_alloc(&acc, n_bus, n_workers)) {
        tfc_snap_free(&acc);
        memset(&acc, 0, sizeof acc);
        pthread_mutex_unlock(&acc_lock);
        free(sn);
        return NULL;
    }
    if (!snap_alloc(sn, acc.n_bus, acc.n_workers)) {
        pthread_mutex_unlock(&acc_lock);
        tfc_snap_free(sn);
        return NULL;
    }
    if (starpu_profiling_status_get() == STARPU_PROFILING_ENABLE) {
        for (int b = 0; b < acc.n_bus; b++) {
            struct starpu_profiling_bus_info bi;
            if (starpu_bus_get_profiling_info(b, &bi)) continue;
            acc.bytes[b] += bi.transferred_bytes;
            acc.count[b] += bi.transfer_count;
        }
        for (int w = 0; w < acc.n_workers; w++) {
            struct starpu_profiling_worker_info wi;
            if (starpu_profiling_worker_get_info(w, &wi)) continue;
            acc.total[w] += ts_us(&wi.total_time);
            acc.exec[w] += ts_us(&wi.executing_time);
            acc.sleep[w] += ts_us(&wi.sleeping_time);
            acc.tasks[w] += wi.executed_tasks;
        }
    }
    sn->t_us = starpu_timing_now();
    size_t b = (size_t)acc.n_bus, w = (size_t)acc.n_workers;
    memcpy(sn->bytes, acc.bytes, b * sizeof *sn->bytes);
    memcpy(sn->count, acc.count, b * sizeof *sn->count);
    memcpy(sn->total, acc.total, w * sizeof *sn->total);
    memcpy(sn->exec, acc.exec, w * sizeof *sn->exec);
    memcpy(sn->sleep, acc.sleep, w * sizeof *sn->sleep);
    memcpy(sn->tasks, acc.tasks, w * sizeof *sn->tasks);
    pthread_mutex_unlock(&acc_lock);
    return sn;
}

void tfc_snap_reset(void)
{
    pthread_mutex_lock(&acc_lock);
    tfc_snap_free(&acc);
    memset(&acc, 0, sizeof acc);
    pthread_mutex_unlock(&acc_lock);
}

/* ---- environment ----------------------------------------------------------------------- */

tfc_status tfc_report_init(struct tfc_report *r, unsigned session, char *msg)
{
    memset(r, 0, sizeof *r);
    r->trace.fd = -1;
    const char *tr = getenv("TFC_TRACE");
    tfc_status st = tfc_env_bool("TFC_REPORT", 0, &r->on_stderr, msg);
    if (st) return st;
    if (tr && !*tr)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "TFC_TRACE is empty: set it to the path of a JSON file to write "
                        "(or unset it)");
    return tr ? tfc_trace_open(&r->trace, tr, session, msg) : TFC_OK; /* sched/trace.c */
}

void tfc_report_fini(struct tfc_report *r)
{
    tfc_trace_close(&r->trace);
    free(r->links);
    free(r->workers);
    memset(r, 0, sizeof *r);
    r->trace.fd = -1;
}

/* ---- the run's summary ---------------------------------------------------------------- */

/* A table of task records: the tasks, or the steps inside chain tasks. */
static void print_records(FILE *f, const tfc_run_summary *sm, const tfc_task_record *recs, int n)
{
    fprintf(f, "  %-28s %-16s %-20s %12s %12s %12s\n", "node", "op", "worker", "start us",
            "measured us", "predicted us");
    for (int i = 0; i < n; i++) {
        const tfc_task_record *t = &recs[i];
        char pred[32];
        if (isfinite(t->predicted_us))
            snprintf(pred, sizeof pred, "%.1f", t->predicted_us);
        else
            snprintf(pred, sizeof pred, "-");
        fprintf(f, "  %-28s %-16s %-20s %12.1f %12.1f %12s\n", t->node, t->op, t->worker_name,
                t->start_us - sm->start_us, t->end_us - t->start_us, pred);
    }
}

static void print_report(FILE *f, const tfc_run_summary *sm)
{
    fprintf(f, "tfc run report: %d tasks, %.1f us from submission to completion\n",
            sm->n_tasks, sm->end_us - sm->start_us);
    print_records(f, sm, sm->tasks, sm->n_tasks);
    if (sm->n_steps) {
        fprintf(f, "  the %d steps inside the chain tasks:\n", sm->n_steps);
        print_records(f, sm, sm->steps, sm->n_steps);
    }
    fprintf(f, "  %-28s %16s %12s\n", "link", "bytes", "transfers");
    if (!sm->n_links) fprintf(f, "  (no transfers)\n");
    for (int i = 0; i < sm->n_links; i++) {
        const tfc_link_record *l = &sm->links[i];
        char name[80];
        snprintf(name, sizeof name, "%s -> %s", l->src, l->dst);
        fprintf(f, "  %-28s %16llu %12llu\n", name, (unsigned long long)l->bytes,
                (unsigned long long)l->transfers);
    }
    fprintf(f, "  %-28s %12s %12s %12s %12s %6s\n", "worker", "total us", "executing us",
            "sleeping us", "idle us", "tasks");
    for (int i = 0; i < sm->n_workers; i++) {
        const tfc_worker_record *w = &sm->workers[i];
        fprintf(f, "  %-28s %12.1f %12.1f %12.1f %12.1f %6d\n", w->name, w->total_us,
                w->executing_us, w->sleeping_us, w->idle_us, w->tasks);
    }
}

static double pos(double x) { return x > 0 ? x : 0; }

void tfc_report_run_done(struct tfc_report *r, const struct tfc_snap *a, const struct tfc_snap *b,
                         const tfc_task_record *tasks, int n_tasks,
                         const tfc_task_record *steps, int n_steps)
{
    tfc_run_summary *sm = &r->sum;
    memset(sm, 0, sizeof *sm);
    sm->tasks = tasks;
    sm->n_tasks = n_tasks;
    sm->steps = steps;
    sm->n_steps = n_steps;
    free(r->links);
    free(r->workers);
    r->links = NULL;
    r->workers = NULL;
    r->have = 1;
    if (a && b && a->n_bus == b->n_bus && a->n_workers == b->n_workers) {
        sm->start_us = a->t_us;
        sm->end_us = b->t_us;
        r->links = calloc((size_t)b->n_bus + 1, sizeof *r->links);
        r->workers = calloc((size_t)b->n_workers + 1, sizeof *r->workers);
    }
    if (r->links)
        for (int i = 0; i < b->n_bus; i++) {
            long long bytes = b->bytes[i] - a->bytes[i], n = b->count[i] - a->count[i];
            if (bytes <= 0) continue; /* (a reset by someone else also reads as nothing) */
            tfc_link_record *l = &r->links[sm->n_links++];
            l->src_node = starpu_bus_get_src(i);
            l->dst_node = starpu_bus_get_dst(i);
            starpu_memory_node_get_name((unsigned)l->src_node, l->src, sizeof l->src);
            starpu_memory_node_get_name((unsigned)l->dst_node, l->dst, sizeof l->dst);
            l->bytes = (uint64_t)bytes;
            l->transfers = n > 0 ? (uint64_t)n : 0;
        }
    if (r->workers)
        for (int i = 0; i < b->n_workers; i++) {
            tfc_worker_record *w = &r->workers[sm->n_workers++];
            w->worker = i;
            starpu_worker_get_name(i, w->name, sizeof w->name);
            w->total_us = pos(b->total[i] - a->total[i]);
            w->executing_us = pos(b->exec[i] - a->exec[i]);
            w->sleeping_us = pos(b->sleep[i] - a->sleep[i]);
            w->idle_us = pos(w->total_us - w->executing_us);
            w->tasks = (int)pos((double)(b->tasks[i] - a->tasks[i]));
        }
    sm->links = r->links;
    sm->workers = r->workers;
    if (r->on_stderr) print_report(stderr, sm);
    tfc_trace_run(&r->trace, sm);
}

/* ---- the public getters ------------------------------------------------------------- */

tfc_status tfc_session_last_summary(tfc_session *s, tfc_run_summary *out)
{
    if (!s || !out)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "last_summary: %s is NULL",
                               !s ? "session" : "out");
    pthread_mutex_lock(&s->lock);
    tfc_status st = TFC_OK;
    if (s->rep.have)
        *out = s->rep.sum;
    else
        st = tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT,
                      "no profiled run has completed (tfc_session_set_profiling(s, 1))");
    pthread_mutex_unlock(&s->lock);
    return st;
}

tfc_status tfc_session_write_report(tfc_session *s, FILE *out)
{
    if (!s || !out)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "write_report: %s is NULL",
                               !s ? "session" : "out");
    pthread_mutex_lock(&s->lock);
    tfc_status st = TFC_OK;
    if (s->rep.have)
        print_report(out, &s->rep.sum);
    else
        st = tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT,
                      "write_report: no profiled run has completed");
    pthread_mutex_unlock(&s->lock);
    return st;
}

tfc_status tfc_session_write_trace(tfc_session *s, const char *path)
{
    if (!s || !path)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "write_trace: %s is NULL",
                               !s ? "session" : "path");
    pthread_mutex_lock(&s->lock);
    tfc_status st;
    if (!s->rep.have)
        st = tfc_fail(s->msg, TFC_ERR_INVALID_ARGUMENT,
                      "write_trace: no profiled run has completed");
    else
        st = tfc_trace_write_file(path, s->id, &s->rep.sum, s->msg); /* sched/trace.c */
    pthread_mutex_unlock(&s->lock);
    return st;
}
