/* run_entry.c: the run entry points. A graph without control flow runs as one plan
 * (sched/run.c); a graph with cond or while nodes runs segment by segment from the host
 * (sched/cflow_run.c). Both hand back a tfc_run that tfc_run_wait completes. */
#include <stdlib.h>
#include "session_priv.h"

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
    if (!run) return tfc_run_set_msg(s, TFC_ERR_OUT_OF_MEMORY, "run: no memory");
    run->s = s;
    pthread_mutex_init(&run->m, NULL);
    pthread_cond_init(&run->c, NULL);
    /* driven from this thread: complete when it returns, so tfc_run_wait only hands over */
    run->status = tfc_cf_run(s, run, n_feeds, feed_tensors, feeds, n_fetches, fetches,
                             n_targets, targets, msg);
    if (!run->status) {
        *out = run;
        return TFC_OK;
    }
    st = run->status;
    tfc_cf_run_wait(run, NULL);
    return tfc_run_set_msg(s, st, msg);
}

tfc_status tfc_run_wait(tfc_run *run, tfc_value **fetch_values)
{
    if (run && run->cf) return tfc_cf_run_wait(run, fetch_values);
    return tfc_run_wait_plain(run, fetch_values);
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
