/* cflow_priv.h: the state of a run of a graph with control flow, shared by sched/cflow_run.c
 * (cutting regions into segments, conds, while loops, the run), sched/cflow_hold.c (the run's
 * values, held segment submissions, their recycling, predicate read-back) and sched/cflow_loop.c
 * (the while-loop strategies: iteration bookkeeping, count-known and speculative loops). */
#ifndef TFC_CFLOW_PRIV_H
#define TFC_CFLOW_PRIV_H

#include <stdint.h>
#include "session_priv.h"
#include "../graph/control_flow.h"

/* A value of the run: the handle holding a tensor's value. */
struct bound {
    tfc_tensor *t;
    starpu_data_handle_t h;  /* NULL: zero elements */
    struct tfc_desc desc;    /* concrete */
};

struct env {                 /* the values a region sees: its inputs and what it computed */
    int n, cap;
    struct bound *b;
    struct bound *local;     /* the caller's stack buffer b starts in (not ours to free) */
};

struct hold {                /* one segment submission, held until the run ends */
    struct tfc_run *sub;     /* its plan, instance and feed handles; counts on the run */
    starpu_data_handle_t *extra; /* per fetch of the plan: a handle registered on a fetched
                              * folded constant (NULL until fetched) */
    uint64_t seq;            /* submission number within the run */
    int discarded;           /* a speculative iteration that did not run: its results and
                              * kernel errors are never seen, its instance never reused */
    struct hold *next;
};

struct stack {               /* a loop's body inputs, iteration by iteration */
    const struct tfc_cflow *cf;
    int n, cap;              /* iterations kept */
    struct bound *v;         /* n * tfc_cflow_n_stacked(cf): the values iteration i's body read */
    struct stack *next;
};

struct tfc_cf_run {
    tfc_session *s;
    struct stack *stacks;    /* of the loops with a gradient, each from its latest run */
    char *reached;           /* per node id: a fetch or target needs it (top level) */
    int64_t kept;            /* loop iterations whose variables went on a stack */
    struct tfc_run *top;
    struct hold *holds;      /* newest first */
    struct hold *pool;       /* recycled: an instance no value of the run refers to any more */
    uint64_t seq;            /* submissions so far */
    int n_feeds;
    starpu_data_handle_t *feed_h; /* the caller's feeds, registered on their buffers */
    int n_fetches;
    tfc_value **fetch_values;
    int profiling;           /* the session profiles: task records, no recycling */
    struct tfc_snap *snap0;  /* when profiling: counters at the start */
    int64_t iterations;      /* loop bodies run */
    int count_known_on;      /* TFC_WHILE_COUNT: count-known loops skip their predicate */
    int64_t count_known;     /* loops run without a predicate (their count known) */
    int speculate_on;        /* TFC_WHILE_SPECULATE: other pure loops run one iteration ahead */
    int64_t branches[2];     /* conds: then, else taken */
    /* runs region r of loop cf (cflow_run.c's run_region, set at the start of the run): the
     * loop strategies of cflow_loop.c run bodies through it, so they never call back into
     * cflow_run.c (a job carries what it runs) */
    tfc_status (*run_region)(struct tfc_cf_run *cr, const struct tfc_cflow *cf, int r,
                             const struct bound *vars, const struct bound *in,
                             struct bound *out, char *msg);
};

/* ---- cflow_hold.c: values and held submissions ------------------------------------------- */

/* The newest value of t in e, or NULL. */
const struct bound *tfc_cf_env_find(const struct env *e, const tfc_tensor *t);
/* Binds t to v's handle in e; -1 when out of memory. */
int tfc_cf_env_bind(struct env *e, tfc_tensor *t, const struct bound *v);
/* The values region r of cf sees (loop variables vars, captures from in) bound in e; -1 when
 * out of memory. */
int tfc_cf_region_env(const struct tfc_cflow *cf, int r, const struct bound *vars,
                      const struct bound *in, struct env *e);
/* The handle of the plan's fetch j in submission hd (NULL for zero elements). */
starpu_data_handle_t tfc_cf_fetch_handle(struct tfc_cf_run *cr, struct hold *hd, int j);
/* A submission of plan p fed from env, held by the run; NULL when out of memory. Under the
 * session lock. */
struct hold *tfc_cf_hold_new(struct tfc_cf_run *cr, struct plan *p, const struct env *env);
/* Returns the holds numbered [from, to) that none of vars[0..n_vars) lives in to the pool. */
void tfc_cf_recycle(struct tfc_cf_run *cr, uint64_t from, uint64_t to, const struct bound *vars,
                    int n_vars);
/* The first kernel failure recorded in the newest n holds, as a status with msg. */
tfc_status tfc_cf_recent_kernel_error(struct tfc_cf_run *cr, int n, char *msg);
/* The predicate b's one element, read back without the session lock. */
tfc_status tfc_cf_read_pred_value(const struct bound *b, const char *node, int *value,
                                  char *msg);

/* ---- cflow_loop.c: while-loop strategies --------------------------------------------------- */

/* Pushes one iteration's body inputs (tfc_cflow_n_stacked(sk->cf) of them) on sk; -1 when out
 * of memory. */
int tfc_cf_stack_push(struct stack *sk, const struct bound *vars);
/* After iteration it of forward loop cf: next becomes vars, what the body read goes on sk. */
tfc_status tfc_cf_iteration_done(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                                 struct stack *sk, struct bound *vars, const struct bound *next,
                                 int64_t it, uint64_t first, uint64_t *prev, char *msg);
/* st with msg prefixed by the loop's name and iteration it. */
tfc_status tfc_cf_iteration_failed(const struct tfc_cflow *cf, int64_t it, tfc_status st,
                                   char *msg);
/* 1 and *count when loop cf entered with in is count-known; 0 otherwise (*st on failure). */
int tfc_cf_known_count(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                       const struct bound *in, int64_t *count, tfc_status *st, char *msg);
/* Loop cf run count times without reading its predicate. */
tfc_status tfc_cf_exec_counted(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                               const struct bound *in, struct bound *vars, struct stack *sk,
                               int64_t count, char *msg);
/* Whether loop cf may run one iteration ahead of its predicate (TFC_WHILE_SPECULATE). */
int tfc_cf_speculable(const struct tfc_cf_run *cr, const struct tfc_cflow *cf);
/* Loop cf run one iteration ahead of its predicate's read-back. */
tfc_status tfc_cf_exec_speculative(struct tfc_cf_run *cr, const struct tfc_cflow *cf,
                                   const struct bound *in, struct bound *vars,
                                   struct stack *sk, char *msg);

#endif
