/* writer.c: the store's writer thread. Checkpoint snapshots, metric batches and retention
 * passes are queued and written one transaction each on the thread's own SQLite connection,
 * so that training goes on while a checkpoint is written. The first error is kept for
 * tfc_store_flush. */
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

void tfc_store_job_free(struct store_job *job)
{
    if (!job) return;
    for (int i = 0; i < job->ckpt.n; i++) {
        if (job->ckpt.names) free(job->ckpt.names[i]);
        if (job->ckpt.values) tfc_value_destroy(job->ckpt.values[i]);
    }
    free(job->ckpt.names);
    free(job->ckpt.values);
    for (int i = 0; i < job->n_metrics; i++) free(job->metrics[i].name);
    free(job->metrics);
    free(job);
}

struct store_job *tfc_store_take_metrics_locked(tfc_store *st)
{
    if (!st->n_mbuf) return NULL;
    struct store_job *job = calloc(1, sizeof *job);
    if (!job) return NULL; /* kept in the buffer; tried again at the next hand-over */
    job->kind = JOB_METRICS;
    job->n_metrics = st->n_mbuf;
    job->metrics = st->mbuf;
    st->mbuf = NULL;
    st->n_mbuf = st->cap_mbuf = 0;
    return job;
}

static void push_locked(tfc_store *st, struct store_job *job)
{
    job->next = NULL;
    if (st->tail)
        st->tail->next = job;
    else
        st->head = job;
    st->tail = job;
    if (job->kind == JOB_CHECKPOINT) st->n_ckpt_pending++;
    pthread_cond_broadcast(&st->q_cv);
}

void tfc_store_enqueue(tfc_store *st, struct store_job *job)
{
    pthread_mutex_lock(&st->q_mu);
    push_locked(st, job);
    pthread_mutex_unlock(&st->q_mu);
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
        pthread_mutex_unlock(&st->q_mu);

        tfc_status status = TFC_OK;
        switch (job->kind) {
        case JOB_CHECKPOINT:
            status = tfc_store_write_checkpoint(st, st->wdb, &job->ckpt, msg);
            break;
        case JOB_METRICS:
            status = tfc_store_write_metrics(st, st->wdb, job->n_metrics, job->metrics, msg);
            break;
        case JOB_PRUNE: status = tfc_store_prune(st, st->wdb, msg); break;
        }
        int was_ckpt = job->kind == JOB_CHECKPOINT;
        tfc_store_job_free(job);

        pthread_mutex_lock(&st->q_mu);
        if (status && !st->werr) {
            st->werr = status;
            memcpy(st->wmsg, msg, sizeof st->wmsg);
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
    struct store_job *m = tfc_store_take_metrics_locked(st);
    if (m) push_locked(st, m);
    st->stop = 1;
    pthread_cond_broadcast(&st->q_cv);
    pthread_mutex_unlock(&st->q_mu);
    pthread_join(st->thread, NULL);
    st->has_thread = 0;
    for (int i = 0; i < st->n_mbuf; i++) free(st->mbuf[i].name); /* a failed hand-over */
    st->n_mbuf = 0;
}

void tfc_store_drain(tfc_store *st)
{
    if (!st->has_thread) return;
    pthread_mutex_lock(&st->q_mu);
    struct store_job *m = tfc_store_take_metrics_locked(st);
    if (m) push_locked(st, m);
    while (st->head || st->busy) pthread_cond_wait(&st->q_cv, &st->q_mu);
    pthread_mutex_unlock(&st->q_mu);
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
