/* session_priv.h: the session and run structures shared by sched/session.c (sessions,
 * variables, the plan cache) and sched/run.c (submitting and waiting for runs). */
#ifndef TFC_SESSION_PRIV_H
#define TFC_SESSION_PRIV_H

#include "plan.h"

/* sched/report.c: what profiled runs report (bus bytes, worker times, tables, traces). */
struct tfc_snap;            /* StarPU's bus and worker counters, accumulated, at one time */

struct tfc_report {
    int on_stderr;          /* TFC_REPORT=1 */
    FILE *trace;            /* TFC_TRACE: open while the session lives */
    char *trace_path;
    int have;               /* a profiled run has completed */
    tfc_run_summary sum;    /* tasks = the session's records */
    tfc_link_record *links;
    tfc_worker_record *workers;
};

/* Reads the environment (TFC_REPORT, TFC_TRACE) and opens the trace; nonzero with msg. */
tfc_status tfc_report_init(struct tfc_report *r, char *msg);
void tfc_report_fini(struct tfc_report *r);
/* Counters now (NULL when out of memory). */
struct tfc_snap *tfc_snap_take(void);
void tfc_snap_free(struct tfc_snap *sn);
/* Forgets the accumulated totals (the StarPU they counted is going away). */
void tfc_snap_reset(void);
/* Completes a run's summary from the snapshots around it and the task records, then prints
 * and traces it as the environment asked. Under the session lock. */
void tfc_report_run_done(struct tfc_report *r, const struct tfc_snap *a, const struct tfc_snap *b,
                         const tfc_task_record *tasks, int n_tasks);

struct persist {        /* a variable's or constant's data, living across runs */
    starpu_data_handle_t h;
    void *ptr;          /* starpu_malloc'd host buffer (home of the handle) */
    int initialized;    /* variables: written at least once */
};

struct tfc_session {
    tfc_graph *g;
    tfc_ctx *ctx;
    pthread_mutex_t lock;   /* submissions, the plan cache, persistent handles, stats */
    struct persist *pers;   /* indexed by node id */
    int n_pers;
    struct plan *mru, *lru; /* the plan cache, most recently used first */
    int n_plans, max_plans;
    tfc_session_stats stats;
    int profiling;
    tfc_task_record *records;
    int n_records;
    struct tfc_report rep;  /* the last profiled run's summary; TFC_REPORT / TFC_TRACE */
    struct plan_options opt;
    char msg[TFC_MSG_LEN];
    char warning[TFC_MSG_LEN]; /* of the last run submitted (tfc_session_last_warning) */
};

struct task_cb {            /* one per submitted task of a run */
    struct tfc_run *run;
    struct starpu_task *task;
    int step;
};

struct fetch_cb {
    struct tfc_run *run;
    starpu_data_handle_t h;
    void *dst;
    size_t bytes;
};

struct tfc_run {
    tfc_session *s;
    struct plan *plan;
    struct instance *inst;
    starpu_data_handle_t *feed_handles;
    tfc_value **fetch_values;
    struct task_cb *cbs;
    struct fetch_cb *fcbs;
    tfc_task_record *records; /* when profiling */
    struct tfc_snap *snap0;   /* when profiling: counters at submission */
    starpu_data_handle_t **parts; /* tiling: per plan partition, its children while submitted */
    int pending;              /* tasks and fetch copies not finished */
    pthread_mutex_t m;
    pthread_cond_t c;
    int submitted;            /* counted in plan->running */
    tfc_status status;
    char msg[TFC_MSG_LEN];
};

/* Under the session lock. */
tfc_status tfc_persist_get(tfc_session *s, struct tfc_node *n, struct persist **out);
void tfc_cache_unlink(tfc_session *s, struct plan *p);
void tfc_cache_push_front(tfc_session *s, struct plan *p);
void tfc_cache_evict(tfc_session *s, struct plan *p);
void tfc_plan_release_instances(struct plan *p);
/* Unregisters an instance's handles (frees their home buffers) and frees it; the first
 * n_slots handles are looked at (fewer while the instance is being built). */
void tfc_instance_free(struct instance *in, int n_slots);

#endif
