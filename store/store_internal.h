/* store_internal.h: what the store's files share (never installed). The store object, its
 * writer thread and queue, SQLite error translation, tensor data in chunks, and the hooks the
 * tests use. Only store/ includes <sqlite3.h>. */
#ifndef TFC_STORE_INTERNAL_H
#define TFC_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include "store_api.h"
#include "store_testing.h"
#include "../src/internal.h"
#include "../graph/graph.h"

/* Tensor data is stored in rows of at most this many bytes (SQLite caps one value at 1e9
 * bytes). A test lowers it with tfc_store_set_chunk_bytes. */
#ifndef TFC_STORE_CHUNK_BYTES
#define TFC_STORE_CHUNK_BYTES ((size_t)64 << 20)
#endif
#define TFC_STORE_METRIC_BATCH 1024     /* metrics handed to the writer per transaction */
#define TFC_STORE_METRIC_SECONDS 10.0   /* ... or when the oldest buffered one is this old */
#define TFC_STORE_BUSY_TIMEOUT_MS 5000  /* how long a write waits for another process */
#define TFC_STORE_MAX_PENDING_CKPT 2    /* snapshots queued or being written at once */

struct store_metric {
    int64_t step;
    double value, time; /* time: seconds since the epoch */
    char *name;
};

/* A job of the writer thread. It carries what it runs, so that writer.c knows nothing of the
 * files that make jobs (checkpoint.c, metrics.c): run gets the writer's connection, and an
 * SQLite failure becomes TFC_ERR_STORE with the message in msg. */
struct store_job {
    struct store_job *next;
    tfc_status (*run)(tfc_store *st, sqlite3 *db, void *arg, char *msg);
    void (*free_arg)(void *arg);    /* NULL: arg is not freed with the job */
    void *arg;
    int checkpoint;                 /* 1: a checkpoint snapshot: counted in n_ckpt_pending
                                     * while queued or written, followed by the txn test hook */
    int64_t step;                   /* the checkpoint's step (the txn test hook's) */
};

struct tfc_store {
    char *path;
    unsigned flags;
    int readonly;
    struct store_lock *lock;    /* lock.c: the training lock, this file in the process's table */
    sqlite3 *db;                /* the caller's connection */
    sqlite3 *wdb;               /* the writer thread's own connection (db in exclusive mode) */
    pthread_mutex_t db_mu;      /* one thread at a time on db */
    pthread_mutex_t write_mu;   /* one write transaction at a time in this process */
    int busy_ms;
    /* the writer thread and its queue, under q_mu */
    pthread_mutex_t q_mu;
    pthread_cond_t q_cv;
    pthread_t thread;
    int has_thread, stop, busy, n_ckpt_pending;
    struct store_job *head, *tail;
    struct store_metric *mbuf;  /* metrics not yet handed to the writer */
    int n_mbuf, cap_mbuf;
    /* under q_mu: takes the buffered metrics as a job (NULL when none, or out of memory: they
     * stay buffered); set by metrics.c when it buffers one, called by every hand-over */
    struct store_job *(*take_metrics)(tfc_store *st);
    double mbuf_since;          /* when the oldest buffered metric was logged (s) */
    int keep_last;
    int64_t keep_every;
    tfc_status werr;            /* the first write error since the last flush: sticky, every
                                 * write call returns it until tfc_store_flush reports it */
    char wmsg[TFC_MSG_LEN];
    int64_t n_committed;        /* checkpoints the writer has committed since open */
    int64_t committed_step;     /* the step of the newest of them (-1: none) */
    uint64_t write_txns;        /* write transactions committed (tests check batching) */
    char msg[TFC_MSG_LEN];
};

/* ---- store.c ---------------------------------------------------------------------------- */

/* Formats "store '<path>': <what>: <cause> (<sqlite3_errmsg>)" into msg, naming the cause (not
 * a database, corrupted, disk full, read-only, locked by process N) and returns
 * TFC_ERR_STORE. Call it right after the failing SQLite call, before any other on db. */
tfc_status tfc_store_sqlfail(const tfc_store *st, sqlite3 *db, int rc, char *msg,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The process holding a lock on the store's database or its -shm file (from /proc/locks,
 * which opens no descriptor: closing one would drop SQLite's POSIX locks), 0 when unknown. */
int tfc_store_lock_holder(const char *path, int exclude_pid);
/* Runs sql (no results); SQLite's result code. */
int tfc_store_exec(sqlite3 *db, const char *sql);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK with the in-process write lock (write_mu, and db_mu
 * when db is the caller's connection). */
int tfc_store_write_begin(tfc_store *st, sqlite3 *db);
int tfc_store_write_commit(tfc_store *st, sqlite3 *db);
void tfc_store_write_rollback(tfc_store *st, sqlite3 *db);
/* TFC_ERR_STORE with a message when st was opened read-only. */
tfc_status tfc_store_check_writable(tfc_store *st, const char *what);
double tfc_store_now(void);
/* "[2,3]" for a shape; parsing gives -1 on a malformed text. */
void tfc_store_shape_text(const tfc_shape *s, char *buf, size_t len);
int tfc_store_shape_parse(const char *text, tfc_shape *s);

/* ---- schema.c ----------------------------------------------------------------------------- */

/* Reads the schema version of an open store without writing anything: a newer version, a
 * foreign database, and a read-only store that would need a migration are errors
 * (TFC_ERR_STORE, message in st->msg). */
tfc_status tfc_store_schema_inspect(tfc_store *st, int *version);
/* Migrates a read-write store forward from version to the current one, in one transaction. */
tfc_status tfc_store_schema_upgrade(tfc_store *st, int version);

/* ---- chunks.c ------------------------------------------------------------------------------ */

size_t tfc_store_chunk_bytes(void);
/* Inserts data (little-endian) as rows of ins = "INSERT ... VALUES (owner, seq, crc32, data)"
 * of at most tfc_store_chunk_bytes() each. */
int tfc_store_put_chunks(sqlite3 *db, sqlite3_stmt *ins, int64_t owner, const void *data,
                         size_t nbytes, size_t elem_size);
/* Reads the rows of sel (bound to the owner; columns seq, crc32, data in seq order) into
 * dst (nbytes), checking order, lengths and CRCs. An SQLite code, or -1 for a mismatch (what
 * is described in why). */
int tfc_store_get_chunks(sqlite3_stmt *sel, void *dst, size_t nbytes, size_t elem_size,
                         char *why, size_t why_len);

/* ---- writer.c ------------------------------------------------------------------------------ */

tfc_status tfc_store_writer_start(tfc_store *st);
/* Hands buffered metrics to the writer, stops it after the queue is done, joins it. */
void tfc_store_writer_stop(tfc_store *st);
/* A job that runs run(st, db, arg, msg) and then frees arg with free_arg (may be NULL); NULL
 * when out of memory (arg is not freed then). */
struct store_job *tfc_store_job_new(tfc_status (*run)(tfc_store *, sqlite3 *, void *, char *),
                                    void (*free_arg)(void *), void *arg);
/* Queues a job (owned by the queue from now on). */
void tfc_store_enqueue(tfc_store *st, struct store_job *job);
/* Hands buffered metrics to the writer and waits until the queue is empty and idle. */
void tfc_store_drain(tfc_store *st);
/* Frees a job and its argument (NULL: nothing). */
void tfc_store_job_free(struct store_job *job);
/* The writer's sticky error, if any (TFC_OK otherwise): a write call (named by what) refuses
 * to queue more work once a write has failed, until tfc_store_flush reports the failure. The
 * message, in st->msg, is the failed write's. */
tfc_status tfc_store_writer_error(tfc_store *st, const char *what);

/* ---- metrics.c (the write path) ---------------------------------------------------------- */

/* Metrics handed to a transaction: a batch job's, or those a checkpoint commits with it. */
struct store_metric_batch {
    int n;
    struct store_metric *m;
};
/* Takes the buffered metrics of steps <= step out of the buffer (under q_mu); NULL when there
 * are none. The rest stay buffered, in order. On no memory *oom is set and they all stay
 * buffered. */
struct store_metric_batch *tfc_store_metrics_take_upto(tfc_store *st, int64_t step, int *oom);
struct store_metric_stmts {
    sqlite3_stmt *del, *ins;
};
/* Inserts a batch (NULL: none) inside the caller's write transaction, each (step, name)
 * replacing the value stored before it; an SQLite code. The statements stay in q for the
 * caller to finalize (tfc_store_metrics_finalize) after it has read the error message. */
int tfc_store_metrics_insert(sqlite3 *db, const struct store_metric_batch *b,
                             struct store_metric_stmts *q);
void tfc_store_metrics_finalize(struct store_metric_stmts *q);
void tfc_store_metrics_free(void *batch);

/* ---- checkpoint.c -------------------------------------------------------------------------- */

/* The retention DELETE, inside a write transaction. */
int tfc_store_prune_locked(tfc_store *st, sqlite3 *db);

#endif
