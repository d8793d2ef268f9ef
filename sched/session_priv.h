/* session_priv.h: the session and run structures shared by sched/session.c (sessions,
 * variables, the plan cache) and sched/run.c (submitting and waiting for runs). */
#ifndef TFC_SESSION_PRIV_H
#define TFC_SESSION_PRIV_H

#include "plan.h"

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

#endif
