/* session_priv.h: the session and run structures shared by sched/session.c (sessions,
 * variables, the plan cache), sched/run.c (submitting and waiting for runs),
 * sched/session_close.c (the end of a session), sched/report.c and sched/trace.c. */
#ifndef TFC_SESSION_PRIV_H
#define TFC_SESSION_PRIV_H

#include <semaphore.h>
#include <sys/types.h>
#include "plan.h"

/* sched/trace.c: a session's TFC_TRACE file (Chrome's JSON array format, valid without its
 * closing ']', so a crash leaves a trace that opens). */
struct tfc_trace {
    int fd;                 /* open and locked while the session lives; -1: no trace */
    char *path;             /* TFC_TRACE with %p and %s expanded */
    off_t len;              /* bytes of whole events written (a failed write is cut back) */
    unsigned session;
};

/* Expands pattern, claims the file (refused while another session holds it: the message
 * names the path and the holder), empties it and writes the header; nonzero with msg. */
tfc_status tfc_trace_open(struct tfc_trace *t, const char *pattern, unsigned session, char *msg);
/* Appends a completed run's events in one write. */
void tfc_trace_run(struct tfc_trace *t, const tfc_run_summary *sm);
/* Writes the closing ']' and releases the file. */
void tfc_trace_close(struct tfc_trace *t);
/* A whole trace of one run into path (claimed like TFC_TRACE's file, then released). */
tfc_status tfc_trace_write_file(const char *path, unsigned session, const tfc_run_summary *sm,
                                char *msg);

/* sched/report.c: what profiled runs report (bus bytes, worker times, tables, traces). */
struct tfc_snap;            /* StarPU's bus and worker counters, accumulated, at one time */

struct tfc_report {
    int on_stderr;          /* TFC_REPORT=1 */
    struct tfc_trace trace; /* TFC_TRACE */
    int have;               /* a profiled run has completed */
    tfc_run_summary sum;    /* tasks = the session's records */
    tfc_link_record *links;
    tfc_worker_record *workers;
};

/* Reads the environment (TFC_REPORT, TFC_TRACE) and opens the trace of session number
 * session; nonzero with msg. */
tfc_status tfc_report_init(struct tfc_report *r, unsigned session, char *msg);
void tfc_report_fini(struct tfc_report *r);
/* Counters now (NULL when out of memory). */
struct tfc_snap *tfc_snap_take(void);
void tfc_snap_free(struct tfc_snap *sn);
/* Forgets the accumulated totals (the StarPU they counted is going away). */
void tfc_snap_reset(void);
/* Completes a run's summary from the snapshots around it and the task records, then prints
 * and traces it as the environment asked. Under the session lock. */
void tfc_report_run_done(struct tfc_report *r, const struct tfc_snap *a, const struct tfc_snap *b,
                         const tfc_task_record *tasks, int n_tasks,
                         const tfc_task_record *steps, int n_steps);

struct persist {        /* a variable's or constant's data, living across runs */
    starpu_data_handle_t h;
    void *ptr;          /* starpu_malloc'd host buffer (home of the handle) */
    int initialized;    /* variables: written at least once */
};

struct tfc_session {
    unsigned id;            /* the n-th session of the process, from 1 (messages, traces) */
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
    tfc_task_record *step_records; /* the steps inside the chain tasks of those records */
    int n_step_records;
    struct tfc_report rep;  /* the last profiled run's summary; TFC_REPORT / TFC_TRACE */
    struct plan_options opt;
    struct tfc_run *in_flight; /* runs submitted, not yet waited for (newest first) */
    uint64_t n_submitted;      /* runs submitted so far: numbers them from 1 */
    char msg[TFC_MSG_LEN];
    char warning[TFC_MSG_LEN]; /* of the last run submitted (tfc_session_last_warning) */
};

struct task_cb {            /* one per submitted task of a run */
    struct tfc_run *run;
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
    uint64_t id;              /* the n-th run submitted to the session */
    struct tfc_run *prev_in_flight, *next_in_flight;
    struct plan *plan;
    struct instance *inst;
    starpu_data_handle_t *feed_handles;
    tfc_value **fetch_values;
    struct task_cb *cbs;
    struct fetch_cb *fcbs;
    tfc_task_record *records; /* when profiling */
    double *chain_times;      /* when profiling a plan with chain tasks: their steps' times */
    struct tfc_snap *snap0;   /* when profiling: counters at submission */
    starpu_data_handle_t **parts; /* tiling: per plan partition, its children while submitted */
    starpu_data_handle_t **direct; /* a plain run: per plan partition registered in place
                                    * (plan_part.direct), its tiles until the run ends; NULL in a
                                    * segment of a control-flow run and a plan split over ranks */
    int pending;              /* tasks and fetch copies not finished */
    sem_t done;               /* posted each time pending reaches 0 (tfc_run_wait_pending) */
    int expects_post;         /* a plain run whose count started above 0: one post will come */
    int submitted;            /* counted in plan->running */
    int pin_shift;            /* a pinned chain (tfc_pin_chain): runs this one's tasks this many
                               * workers after the plan's, for the runs of it still in flight */
    struct tfc_run *counter;  /* NULL, or the run whose pending count this one's tasks count
                               * down (a segment of a control-flow run, sched/cflow_run.c) */
    struct tfc_cf_run *cf;    /* a run of a graph with control flow: its state (cflow_run.c) */
    void *cf_args;            /* such a run's arguments, for its driver (sched/run_entry.c) */
    pthread_t driver;         /* the thread driving it */
    int has_driver;           /* 0: it was driven on the caller's thread */
    tfc_status status;
    char msg[TFC_MSG_LEN];
};

/* sched/run.c: a run of one plan (no control flow), the checks of a run's arguments (msg:
 * TFC_MSG_LEN bytes), and the session's message set to text (returns st). */
tfc_status tfc_run_submit_plain(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                                tfc_value *const *feeds, int n_fetches,
                                tfc_tensor *const *fetches, int n_targets,
                                tfc_tensor *const *targets, tfc_run **out);
tfc_status tfc_run_wait_plain(tfc_run *run, tfc_value **fetch_values);
tfc_status tfc_run_check_args(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                              tfc_value *const *feeds, int n_fetches, tfc_tensor *const *fetches,
                              int n_targets, tfc_tensor *const *targets, char *msg);
tfc_status tfc_run_set_msg(tfc_session *s, tfc_status st, const char *text);

/* Under the session lock (sched/run.c, for sched/cflow_run.c's segments): the cached plan of a
 * key (built on a miss), a free or new instance of a plan, the variables check, and the
 * submission of run->plan's tasks on run->inst. */
struct plan *tfc_run_find_plan(tfc_session *s, int n_feeds, tfc_tensor *const *ft,
                               tfc_value *const *fv, int n_fetches, tfc_tensor *const *fetches,
                               int n_targets, tfc_tensor *const *targets, tfc_status *st,
                               char *msg);
struct instance *tfc_plan_take_instance(struct plan *p);
/* The op a task record names for step i of p (node n's op, or "hop", "fused"). */
const char *tfc_step_op_name(const struct plan *p, int i, const struct tfc_node *n);
tfc_status tfc_run_check_variables(tfc_session *s, const struct plan *p, char *msg);
tfc_status tfc_run_submit_tasks(tfc_session *s, struct tfc_run *run, int n_acquire, char *msg);
/* Returns once every task and fetch copy run counts (run->pending) has finished. */
void tfc_run_wait_pending(struct tfc_run *run);
/* A profiled run's records, one per task, and room for its chain tasks' steps' times; 0 when
 * out of memory. */
int tfc_run_alloc_records(struct tfc_run *run);
/* Keeps the records of the steps inside the chain tasks of runs[0..n) (completed, profiled;
 * in that order) as the session's step records. Under the session lock. */
void tfc_run_keep_step_records(tfc_session *s, struct tfc_run *const *runs, int n);

/* sched/cflow_run.c: a run of a graph with cond or while nodes, driven from the host segment by
 * segment; complete (tasks ended, fetches copied) when it returns. Not under the lock; msg:
 * TFC_MSG_LEN bytes. */
tfc_status tfc_cf_run(tfc_session *s, struct tfc_run *run, int n_feeds,
                      tfc_tensor *const *feed_tensors, tfc_value *const *feeds, int n_fetches,
                      tfc_tensor *const *fetches, int n_targets, tfc_tensor *const *targets,
                      char *msg);
/* Hands a finished control-flow run's fetches to the caller (none on failure) and frees it;
 * its status. */
tfc_status tfc_cf_run_wait(struct tfc_run *run, tfc_value **fetch_values);

/* Under the session lock. */
/* A submitted run joins the session's runs in flight (and gets its number); tfc_run_wait
 * takes it out. tfc_session_destroy waits for those left (sched/session_close.c). */
void tfc_session_track_run(tfc_session *s, struct tfc_run *run);
void tfc_session_untrack_run(tfc_session *s, struct tfc_run *run);
tfc_status tfc_persist_get(tfc_session *s, struct tfc_node *n, struct persist **out);
void tfc_cache_unlink(tfc_session *s, struct plan *p);
void tfc_cache_push_front(tfc_session *s, struct plan *p);
void tfc_cache_evict(tfc_session *s, struct plan *p);
void tfc_plan_release_instances(struct plan *p);
/* Unregisters an instance's handles (frees their home buffers) and frees it; the first
 * n_slots handles are looked at (fewer while the instance is being built). */
void tfc_instance_free(struct instance *in, int n_slots);

#endif
