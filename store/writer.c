/* writer.c: the store's writer thread. Checkpoint snapshots, metric batches and retention
 * passes are queued and written one transaction each on the thread's own SQLite connection,
 * so that training goes on while a checkpoint is written. Each job carries the function that
 * writes it. The first error is sticky: the jobs queued behind it are dropped, and every
 * later write call returns it (so that training stops at its next step, not at exit) until
 * tfc_store_flush reports it. */
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

struct store_job *tfc_store_job_new(tfc_status (*run)(tfc_store *, sqlite3 *, void *, char *),
                                    void (*free_arg)(void *), void *arg)
{
    struct store_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    job->run = run;
    job->free_arg = free_arg;
    job->arg = arg;
    return job;
}

void tfc_store_job_free(struct store_job *job)
{
    if (!job) return;
    if (job->free_arg) job->free_arg(job->arg);
    free(job);
}

/* Hands the buffered metrics, if any, to the writer (under q_mu). */
static struct store_job *take_metrics_locked(tfc_store *st)
{
    return st->take_metrics ? st->take_metrics(st) : NULL;
}

static void push_locked(tfc_store *st, struct store_job *job)
{
    job->next = NULL;
    if (st->tail)
        st->tail->next = job;
    else
        st->head = job;
    st->tail = job;
    if (job->checkpoint) st->n_ckpt_pending++;
    pthread_cond_broadcast(&st->q_cv);
}

void tfc_store_enqueue(tfc_store *st, struct store_job *job)
{
    pthread_mutex_lock(&st->q_mu);
    push_locked(st, job);
    pthread_mutex_unlock(&st->q_mu);
}

/* ---- the test hook around checkpoint transactions (store_testing.h) ------------------------ */

/* One hooked store per process (a test hook). The writer thread marks the checkpoint it is
 * writing in thread-local state, so that SQLite's update and commit hooks on its connection
 * (which also sees metrics and prune transactions, and in exclusive mode the caller's) fire
 * for that checkpoint only: 1 writing, 2 its row inserted (BEGUN), 3 COMMIT started. */
static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static tfc_store *hook_store;
static tfc_store_txn_hook hook_fn;
static void *hook_arg;
static __thread int hook_state;
static __thread int64_t hook_step;

static void hook_call(int phase)
{
    pthread_mutex_lock(&hook_mu);
    tfc_store_txn_hook fn = hook_fn;
    void *arg = hook_arg;
    pthread_mutex_unlock(&hook_mu);
    if (fn) fn(arg, hook_step, phase);
}

static void on_update(void *unused, int op, const char *db, const char *table, sqlite3_int64 row)
{
    if (hook_state == 1 && op == SQLITE_INSERT && !strcmp(table, "checkpoints")) {
        hook_state = 2;
        hook_call(TFC_STORE_TXN_BEGUN);
    }
}

static int on_commit(void *unused)
{
    if (hook_state == 2) {
        hook_state = 3;
        hook_call(TFC_STORE_TXN_COMMITTING);
    }
    return 0; /* go on with the commit */
}

void tfc_store_set_txn_hook(tfc_store *st, tfc_store_txn_hook fn, void *arg)
{
    if (!st || !st->wdb) return;
    pthread_mutex_lock(&hook_mu);
    hook_store = fn ? st : NULL;
    hook_fn = fn;
    hook_arg = arg;
    pthread_mutex_unlock(&hook_mu);
    sqlite3_update_hook(st->wdb, fn ? on_update : NULL, NULL);
    sqlite3_commit_hook(st->wdb, fn ? on_commit : NULL, NULL);
}

static int hooked(tfc_store *st)
{
    pthread_mutex_lock(&hook_mu);
    int yes = hook_store == st;
    pthread_mutex_unlock(&hook_mu);
    return yes;
}

/* Runs one job (on the writer thread, without q_mu), with the test hook around a checkpoint. */
static tfc_status run_job(tfc_store *st, struct store_job *job, char *msg)
{
    int was_ckpt = job->checkpoint;
    if (was_ckpt && hooked(st)) {
        hook_state = 1;
        hook_step = job->step;
    }
    tfc_status status = job->run(st, st->wdb, job->arg, msg);
    if (was_ckpt) {
        if (hook_state == 3 && !status) hook_call(TFC_STORE_TXN_COMMITTED);
        hook_state = 0;
    }
    return status;
}

static void *writer_main(void *arg)
{
    tfc_store *st = arg;
    char msg[TFC_MSG_LEN];
    pthread_mutex_lock(&st->q_mu);
    for (;;) {
        while (!st->head && !st->stop) pthread_cond_wait(&st->q_cv, &st->q_mu);
        if (!st->head) break; /* stopping, and nothing left */
        struct store_job *job = st->head;
        st->head = job->next;
        if (!st->head) st->tail = NULL;
        st->busy = 1;
        /* after a failed write, what was queued behind it is dropped, not written out of
         * order (a later checkpoint committed after an earlier one failed) */
        int skip = st->werr != TFC_OK;
        pthread_mutex_unlock(&st->q_mu);

        int was_ckpt = job->checkpoint;
        int64_t job_step = job->step;
        tfc_status status = skip ? TFC_OK : run_job(st, job, msg);
        tfc_store_job_free(job);

        pthread_mutex_lock(&st->q_mu);
        if (status && !st->werr) {
            st->werr = status;
            memcpy(st->wmsg, msg, sizeof st->wmsg);
        }
        if (was_ckpt && !status && !skip) {
            st->n_committed++;
            st->committed_step = job_step;
        }
        if (was_ckpt) st->n_ckpt_pending--;
        st->busy = 0;
        pthread_cond_broadcast(&st->q_cv);
    }
    pthread_mutex_unlock(&st->q_mu);
    return NULL;
}

tfc_status tfc_store_writer_start(tfc_store *st)
{
    if (pthread_create(&st->thread, NULL, writer_main, st))
        return tfc_fail(st->msg, TFC_ERR_RUNTIME, "store '%s': cannot start the writer thread",
                        st->path);
    st->has_thread = 1;
    return TFC_OK;
}

void tfc_store_writer_stop(tfc_store *st)
{
    if (!st->has_thread) return;
    pthread_mutex_lock(&st->q_mu);
    struct store_job *m = take_metrics_locked(st);
    if (m) push_locked(st, m);
    st->stop = 1;
    pthread_cond_broadcast(&st->q_cv);
    pthread_mutex_unlock(&st->q_mu);
    pthread_join(st->thread, NULL);
    st->has_thread = 0;
    if (hooked(st)) tfc_store_set_txn_hook(st, NULL, NULL);
}

void tfc_store_drain(tfc_store *st)
{
    if (!st->has_thread) return;
    pthread_mutex_lock(&st->q_mu);
    struct store_job *m = take_metrics_locked(st);
    if (m) push_locked(st, m);
    while (st->head || st->busy) pthread_cond_wait(&st->q_cv, &st->q_mu);
    pthread_mutex_unlock(&st->q_mu);
}

tfc_status tfc_store_writer_error(tfc_store *st, const char *what)
{
    pthread_mutex_lock(&st->q_mu);
    tfc_status status = st->werr;
    if (status)
        tfc_fail(st->msg, status, "%s refused: a write failed before (tfc_store_flush reports "
                 "it): %s", what, st->wmsg);
    pthread_mutex_unlock(&st->q_mu);
    return status;
}

tfc_status tfc_store_committed_checkpoints(tfc_store *st, int64_t *count, int64_t *step)
{
    if (!st)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "committed_checkpoints: store is NULL");
    pthread_mutex_lock(&st->q_mu);
    if (count) *count = st->n_committed;
    if (step) *step = st->n_committed ? st->committed_step : -1;
    tfc_status status = st->werr;
    if (status) memcpy(st->msg, st->wmsg, sizeof st->msg);
    pthread_mutex_unlock(&st->q_mu);
    return status;
}

tfc_status tfc_store_flush(tfc_store *st)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "store_flush: store is NULL");
    tfc_store_drain(st);
    pthread_mutex_lock(&st->q_mu);
    tfc_status status = st->werr;
    if (status) memcpy(st->msg, st->wmsg, sizeof st->msg);
    st->werr = TFC_OK;
    st->wmsg[0] = 0;
    pthread_mutex_unlock(&st->q_mu);
    return status;
}
