/* session_close.c: the end of a session. Runs submitted with tfc_session_run_async and not
 * waited for are waited for here, with a warning on stderr that names the session and the run,
 * because their tasks still read the instance, feed and variable buffers the session is about
 * to free (StarPU 1.3 cannot withdraw a submitted task); then the plan cache, the variables'
 * handles and the trace are released. Its own file: it calls tfc_run_wait (sched/run.c), which
 * calls back into sched/session.c. */
#include <stdlib.h>
#include <string.h>
#include "session_priv.h"

/* "run 3 (fetches 'loss', 'acc')" or "run 4 (targets 'train')"; under the session lock. */
static void describe_run(const struct tfc_run *run, char *out, size_t size)
{
    const struct plan *p = run->plan;
    if (!p) { /* a control-flow run is driven segment by segment: no plan of its own */
        snprintf(out, size, "run %llu (control flow)", (unsigned long long)run->id);
        return;
    }
    int n = p->n_fetches ? p->n_fetches : p->n_targets;
    tfc_tensor *const *t = p->n_fetches ? p->fetches : p->targets;
    int len = snprintf(out, size, "run %llu (%s", (unsigned long long)run->id,
                       p->n_fetches ? "fetches" : "targets");
    for (int i = 0; i < n && i < 3 && len > 0 && (size_t)len < size; i++)
        len += snprintf(out + len, size - (size_t)len, "%s '%s'", i ? "," : "", t[i]->name);
    if (len > 0 && (size_t)len < size)
        snprintf(out + len, size - (size_t)len, "%s)", n > 3 ? ", ..." : "");
}

/* Waits for every run still in flight, oldest first, each reported on stderr. */
static void finish_runs_in_flight(tfc_session *s)
{
    for (;;) {
        char what[256];
        pthread_mutex_lock(&s->lock);
        struct tfc_run *run = s->in_flight;
        while (run && run->next_in_flight) run = run->next_in_flight;
        if (run) describe_run(run, what, sizeof what);
        pthread_mutex_unlock(&s->lock);
        if (!run) return;
        fprintf(stderr, "tfc: warning: tfc_session_destroy: session %u still has %s in flight "
                        "(submitted by tfc_session_run_async, never passed to tfc_run_wait); "
                        "waiting for it to finish, its fetched values are dropped\n",
                s->id, what);
        if (tfc_run_wait(run, NULL))
            fprintf(stderr, "tfc: warning: tfc_session_destroy: session %u, %s failed: %s\n",
                    s->id, what, s->msg);
    }
}

void tfc_session_destroy(tfc_session *s)
{
    if (!s) return;
    finish_runs_in_flight(s);
    while (s->mru) tfc_cache_evict(s, s->mru);
    for (int i = 0; i < s->n_pers; i++) {
        if (s->pers[i].h) starpu_data_unregister(s->pers[i].h);
        if (s->pers[i].ptr) starpu_free(s->pers[i].ptr);
    }
    free(s->pers);
    free(s->records);
    free(s->step_records);
    tfc_report_fini(&s->rep);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
