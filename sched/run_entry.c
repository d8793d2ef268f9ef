/* run_entry.c: the run entry points. A graph without control flow runs as one plan
 * (sched/run.c); a graph with cond or while nodes runs segment by segment from the host
 * (sched/cflow_run.c), on a driver thread of its own so the call returns at once. Both hand
 * back a tfc_run that tfc_run_wait completes. */
#include <stdio.h>
#include <stdlib.h>
#include "session_priv.h"

/* What a control-flow run's driver thread needs: copies of the caller's arrays (the values
 * themselves must stay alive until tfc_run_wait, as for every asynchronous run). */
struct cf_args {
    tfc_session *s;
    struct tfc_run *run;
    int n_feeds, n_fetches, n_targets;
    tfc_tensor **tensors;    /* feed tensors, fetches, targets */
    tfc_value **feeds;
};

static void *cf_drive(void *arg)
{
    struct cf_args *a = arg;
    char msg[TFC_MSG_LEN];
    struct tfc_run *run = a->run;
    run->status = tfc_cf_run(a->s, run, a->n_feeds, a->tensors, a->feeds, a->n_fetches,
                             a->tensors + a->n_feeds, a->n_targets,
                             a->tensors + a->n_feeds + a->n_fetches, msg);
    if (run->status) snprintf(run->msg, sizeof run->msg, "%s", msg);
    return NULL;
}

static struct cf_args *cf_args_new(tfc_session *s, struct tfc_run *run, int n_feeds,
                                   tfc_tensor *const *ft, tfc_value *const *feeds, int n_fetches,
                                   tfc_tensor *const *fetches, int n_targets,
                                   tfc_tensor *const *targets)
{
    struct cf_args *a = calloc(1, sizeof *a);
    int n = n_feeds + n_fetches + n_targets;
    if (!a) return NULL;
    *a = (struct cf_args){s, run, n_feeds, n_fetches, n_targets,
                          malloc(sizeof(tfc_tensor *) * (size_t)(n + 1)),
                          malloc(sizeof(tfc_value *) * (size_t)(n_feeds + 1))};
    if (!a->tensors || !a->feeds) {
        free(a->tensors);
        free(a->feeds);
        free(a);
        return NULL;
    }
    for (int i = 0; i < n_feeds; i++) {
        a->tensors[i] = ft[i];
        a->feeds[i] = feeds[i];
    }
    for (int i = 0; i < n_fetches; i++) a->tensors[n_feeds + i] = fetches[i];
    for (int i = 0; i < n_targets; i++) a->tensors[n_feeds + n_fetches + i] = targets[i];
    return a;
}

tfc_status tfc_session_run_async(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                                 tfc_value *const *feeds, int n_fetches,
                                 tfc_tensor *const *fetches, int n_targets,
                                 tfc_tensor *const *targets, tfc_run **out)
{
    if (!s || !s->g->n_cflow_nodes || !out)
        return tfc_run_submit_plain(s, n_feeds, feed_tensors, feeds, n_fetches, fetches,
                                    n_targets, targets, out);
    char msg[TFC_MSG_LEN];
    *out = NULL;
    tfc_status st = tfc_run_check_args(s, n_feeds, feed_tensors, feeds, n_fetches, fetches,
                                       n_targets, targets, msg);
    if (st) return tfc_run_set_msg(s, st, msg);
    struct tfc_run *run = calloc(1, sizeof *run);
    struct cf_args *a = run ? cf_args_new(s, run, n_feeds, feed_tensors, feeds, n_fetches,
                                          fetches, n_targets, targets) : NULL;
    if (!a) {
        free(run);
        return tfc_run_set_msg(s, TFC_ERR_OUT_OF_MEMORY, "run: no memory");
    }
    run->s = s;
    sem_init(&run->done, 0, 0);
    run->cf_args = a;
    pthread_mutex_lock(&s->lock);
    tfc_session_track_run(s, run); /* tfc_session_destroy waits for it if the caller does not */
    pthread_mutex_unlock(&s->lock);
    /* the host drives the segments on its own thread, so this call returns at once as a plain
     * run's does; without a thread, it drives them here */
    if (pthread_create(&run->driver, NULL, cf_drive, a))
        cf_drive(a);
    else
        run->has_driver = 1;
    *out = run;
    return TFC_OK;
}

tfc_status tfc_run_wait(tfc_run *run, tfc_value **fetch_values)
{
    if (!run || !run->cf_args) return tfc_run_wait_plain(run, fetch_values);
    tfc_session *s = run->s;
    if (run->has_driver) pthread_join(run->driver, NULL);
    free(((struct cf_args *)run->cf_args)->tensors);
    free(((struct cf_args *)run->cf_args)->feeds);
    free(run->cf_args);
    pthread_mutex_lock(&s->lock);
    tfc_session_untrack_run(s, run);
    if (run->status) snprintf(s->msg, sizeof s->msg, "%s", run->msg);
    pthread_mutex_unlock(&s->lock);
    return tfc_cf_run_wait(run, fetch_values);
}

tfc_status tfc_session_run(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                           tfc_value *const *feeds, int n_fetches, tfc_tensor *const *fetches,
                           tfc_value **fetch_values, int n_targets, tfc_tensor *const *targets)
{
    tfc_run *run;
    if (fetch_values)
        for (int i = 0; i < n_fetches; i++) fetch_values[i] = NULL;
    tfc_status st = tfc_session_run_async(s, n_feeds, feed_tensors, feeds, n_fetches, fetches,
                                          n_targets, targets, &run);
    if (st) return st;
    return tfc_run_wait(run, fetch_values);
}
