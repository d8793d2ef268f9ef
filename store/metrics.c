/* metrics.c: run metrics (loss, accuracy, ...), buffered in memory and written by the writer
 * thread one transaction per batch (TFC_STORE_METRIC_BATCH values, or every
 * TFC_STORE_METRIC_SECONDS), never one per step; a checkpoint commits those of its steps with
 * it (checkpoint.c). One value per (step, metric). NaN is stored as NULL (SQLite has no NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

static int metric_batch = TFC_STORE_METRIC_BATCH; /* tfc_store_set_metric_batch */

void tfc_store_set_metric_batch(int n)
{
    __atomic_store_n(&metric_batch, n > 0 ? n : TFC_STORE_METRIC_BATCH, __ATOMIC_RELAXED);
}

void tfc_store_metrics_free(void *arg)
{
    struct store_metric_batch *b = arg;
    if (!b) return;
    for (int i = 0; i < b->n; i++) free(b->m[i].name);
    free(b->m);
    free(b);
}

static tfc_status write_metrics(tfc_store *st, sqlite3 *db, void *arg, char *msg);

/* The buffered metrics as one writer job (under q_mu); NULL when none, or when out of memory:
 * they stay buffered and go at the next hand-over. */
static struct store_job *take_metrics_locked(tfc_store *st)
{
    if (!st->n_mbuf) return NULL;
    struct store_metric_batch *b = malloc(sizeof *b);
    struct store_job *job = b ? tfc_store_job_new(write_metrics, tfc_store_metrics_free, b) : NULL;
    if (!job) {
        free(b);
        return NULL;
    }
    b->n = st->n_mbuf;
    b->m = st->mbuf;
    st->mbuf = NULL;
    st->n_mbuf = st->cap_mbuf = 0;
    return job;
}

struct store_metric_batch *tfc_store_metrics_take_upto(tfc_store *st, int64_t step, int *oom)
{
    *oom = 0;
    int k = 0;
    for (int i = 0; i < st->n_mbuf; i++) k += st->mbuf[i].step <= step;
    if (!k) return NULL;
    struct store_metric_batch *b = malloc(sizeof *b);
    struct store_metric *m = malloc((size_t)k * sizeof *m);
    if (!b || !m) {
        free(b);
        free(m);
        *oom = 1;
        return NULL;
    }
    int kept = 0;
    b->n = 0;
    b->m = m;
    for (int i = 0; i < st->n_mbuf; i++) {
        if (st->mbuf[i].step <= step)
            b->m[b->n++] = st->mbuf[i];
        else
            st->mbuf[kept++] = st->mbuf[i];
    }
    st->n_mbuf = kept;
    return b;
}

tfc_status tfc_store_log_metric(tfc_store *st, int64_t step, const char *name, double value)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "log_metric: store is NULL");
    if (!name || !*name)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "log_metric: name is NULL or empty");
    tfc_status status = tfc_store_check_writable(st, "log_metric");
    if (!status) status = tfc_store_writer_error(st, "log_metric");
    if (status) return status;
    char *copy = strdup(name);
    if (!copy) return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "log_metric: no memory");
    pthread_mutex_lock(&st->q_mu);
    if (st->n_mbuf == st->cap_mbuf) {
        int cap = st->cap_mbuf ? 2 * st->cap_mbuf : 64;
        struct store_metric *m = realloc(st->mbuf, (size_t)cap * sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&st->q_mu);
            free(copy);
            return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "log_metric: no memory");
        }
        st->mbuf = m;
        st->cap_mbuf = cap;
    }
    double now = tfc_store_now();
    if (!st->n_mbuf) st->mbuf_since = now;
    st->mbuf[st->n_mbuf++] = (struct store_metric){step, value, now, copy};
    st->take_metrics = take_metrics_locked; /* the writer's drain and stop hand them over too */
    struct store_job *job = NULL;
    if (st->n_mbuf >= __atomic_load_n(&metric_batch, __ATOMIC_RELAXED) ||
        now - st->mbuf_since >= TFC_STORE_METRIC_SECONDS)
        job = take_metrics_locked(st);
    pthread_mutex_unlock(&st->q_mu);
    if (job) tfc_store_enqueue(st, job);
    return TFC_OK;
}

int tfc_store_metrics_insert(sqlite3 *db, const struct store_metric_batch *b,
                             struct store_metric_stmts *q)
{
    /* one value per (step, metric): a step trained again replaces what it logged before */
    int rc = SQLITE_OK;
    if (!q->del)
        rc = sqlite3_prepare_v2(db, "DELETE FROM metrics WHERE name = ?1 AND step = ?2", -1,
                                &q->del, NULL);
    if (rc == SQLITE_OK && !q->ins)
        rc = sqlite3_prepare_v2(db, "INSERT INTO metrics(step, name, value, time) "
                                    "VALUES (?,?,?,?)", -1, &q->ins, NULL);
    for (int i = 0; b && i < b->n && rc == SQLITE_OK; i++) {
        const struct store_metric *m = &b->m[i];
        sqlite3_reset(q->del);
        sqlite3_bind_text(q->del, 1, m->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q->del, 2, m->step);
        rc = sqlite3_step(q->del);
        if (rc != SQLITE_DONE) break;
        sqlite3_reset(q->ins);
        sqlite3_bind_int64(q->ins, 1, m->step);
        sqlite3_bind_text(q->ins, 2, m->name, -1, SQLITE_STATIC);
        if (isnan(m->value))
            sqlite3_bind_null(q->ins, 3);
        else
            sqlite3_bind_double(q->ins, 3, m->value);
        sqlite3_bind_double(q->ins, 4, m->time);
        rc = sqlite3_step(q->ins);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    return rc;
}

void tfc_store_metrics_finalize(struct store_metric_stmts *q)
{
    sqlite3_finalize(q->del);
    sqlite3_finalize(q->ins);
    q->del = q->ins = NULL;
}

/* The writer job of a batch: one transaction. */
static tfc_status write_metrics(tfc_store *st, sqlite3 *db, void *arg, char *msg)
{
    const struct store_metric_batch *b = arg;
    struct store_metric_stmts q = {0};
    int rc = tfc_store_write_begin(st, db);
    if (rc) return tfc_store_sqlfail(st, db, rc, msg, "writing %d metrics", b->n);
    rc = tfc_store_metrics_insert(db, b, &q);
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, db);
    tfc_status status = TFC_OK;
    if (rc) { /* the message first: finalizing a statement resets the connection's error */
        status = tfc_store_sqlfail(st, db, rc, msg, "writing %d metrics", b->n);
        tfc_store_write_rollback(st, db);
    }
    tfc_store_metrics_finalize(&q);
    return status;
}

/* The writer job of tfc_store_truncate_metrics: arg is the step (int64_t). */
static tfc_status delete_metrics_after(tfc_store *st, sqlite3 *db, void *arg, char *msg)
{
    int64_t after = *(const int64_t *)arg;
    sqlite3_stmt *del = NULL;
    int rc = tfc_store_write_begin(st, db);
    if (rc) return tfc_store_sqlfail(st, db, rc, msg, "deleting metrics after step %lld",
                                     (long long)after);
    rc = sqlite3_prepare_v2(db, "DELETE FROM metrics WHERE step > ?1", -1, &del, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(del, 1, after);
        rc = sqlite3_step(del);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, db);
    tfc_status status = TFC_OK;
    if (rc) {
        status = tfc_store_sqlfail(st, db, rc, msg, "deleting metrics after step %lld",
                                   (long long)after);
        tfc_store_write_rollback(st, db);
    }
    sqlite3_finalize(del);
    return status;
}

tfc_status tfc_store_truncate_metrics(tfc_store *st, int64_t after_step)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "truncate_metrics: store is NULL");
    tfc_status status = tfc_store_check_writable(st, "truncate_metrics");
    if (!status) status = tfc_store_writer_error(st, "truncate_metrics");
    if (status) return status;
    int64_t *arg = malloc(sizeof *arg);
    struct store_job *job = arg ? tfc_store_job_new(delete_metrics_after, free, arg) : NULL;
    if (!job) {
        free(arg);
        return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "truncate_metrics: no memory");
    }
    *arg = after_step;
    /* the buffered ones go now; those already handed over are written, then deleted */
    pthread_mutex_lock(&st->q_mu);
    int kept = 0;
    for (int i = 0; i < st->n_mbuf; i++) {
        if (st->mbuf[i].step > after_step)
            free(st->mbuf[i].name);
        else
            st->mbuf[kept++] = st->mbuf[i];
    }
    st->n_mbuf = kept;
    pthread_mutex_unlock(&st->q_mu);
    tfc_store_enqueue(st, job);
    return TFC_OK;
}

tfc_status tfc_store_read_metric(tfc_store *st, const char *name, int *n, int64_t **steps,
                                 double **values)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "read_metric: store is NULL");
    if (!name || !n || !steps || !values)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "read_metric: NULL argument");
    *n = 0;
    *steps = NULL;
    *values = NULL;
    tfc_store_drain(st); /* what was logged before is visible */
    pthread_mutex_lock(&st->db_mu);
    sqlite3_stmt *q = NULL;
    int64_t count = 0;
    int rc = sqlite3_prepare_v2(st->db, "SELECT count(*) FROM metrics WHERE name = ?1", -1, &q,
                                NULL);
    tfc_status status = TFC_OK;
    if (rc == SQLITE_OK) {
        /* one read transaction: the count and the rows agree */
        rc = tfc_store_exec(st->db, "BEGIN");
        sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK) rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            count = sqlite3_column_int64(q, 0);
            rc = SQLITE_OK;
        }
        sqlite3_finalize(q);
        q = NULL;
    }
    if (rc == SQLITE_OK && count > INT32_MAX) {
        status = tfc_fail(st->msg, TFC_ERR_OUT_OF_RANGE, "read_metric '%s': %lld values",
                          name, (long long)count);
        count = 0;
    }
    if (rc == SQLITE_OK && count && !status) {
        *steps = malloc((size_t)count * sizeof **steps);
        *values = malloc((size_t)count * sizeof **values);
        if (!*steps || !*values)
            status = tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "read_metric: no memory");
        else
            rc = sqlite3_prepare_v2(st->db, "SELECT step, value FROM metrics WHERE name = ?1 "
                                            "ORDER BY step, id", -1, &q, NULL);
        if (q) sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
        int i = 0;
        while (!status && rc == SQLITE_OK && i < count) {
            rc = sqlite3_step(q);
            if (rc != SQLITE_ROW) break;
            rc = SQLITE_OK;
            (*steps)[i] = sqlite3_column_int64(q, 0);
            (*values)[i] = sqlite3_column_type(q, 1) == SQLITE_NULL ? NAN
                                                                   : sqlite3_column_double(q, 1);
            i++;
        }
        if (rc == SQLITE_DONE) rc = SQLITE_OK;
        *n = i;
    }
    if (rc) status = tfc_store_sqlfail(st, st->db, rc, st->msg, "reading metric '%s'", name);
    sqlite3_finalize(q);
    if (!sqlite3_get_autocommit(st->db)) tfc_store_exec(st->db, "COMMIT");
    pthread_mutex_unlock(&st->db_mu);
    if (status) {
        free(*steps);
        free(*values);
        *steps = NULL;
        *values = NULL;
        *n = 0;
    }
    return status;
}

/* ---- listing the metrics (read side) ------------------------------------------------- */

/* Rows of the listing before packing: names owned here. */
struct metric_rows {
    int n, cap;
    tfc_metric_info *info;
};

static void rows_free(struct metric_rows *r)
{
    for (int i = 0; i < r->n; i++) free((char *)r->info[i].name);
    free(r->info);
}

/* Appends the row q stands on; -1 when out of memory. */
static int rows_add(struct metric_rows *r, sqlite3_stmt *q)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        tfc_metric_info *a = realloc(r->info, (size_t)cap * sizeof *a);
        if (!a) return -1;
        r->info = a;
        r->cap = cap;
    }
    const char *name = (const char *)sqlite3_column_text(q, 0);
    char *copy = strdup(name ? name : "");
    if (!copy) return -1;
    r->info[r->n++] = (tfc_metric_info){
        .name = copy,
        .count = sqlite3_column_int64(q, 1),
        .first_step = sqlite3_column_int64(q, 2),
        .last_step = sqlite3_column_int64(q, 3),
        .last_value = sqlite3_column_type(q, 4) == SQLITE_NULL ? NAN : sqlite3_column_double(q, 4),
    };
    return 0;
}

/* The rows as one allocation, the names after the array, so that free() releases all. */
static tfc_metric_info *rows_pack(const struct metric_rows *r)
{
    size_t bytes = (size_t)r->n * sizeof(tfc_metric_info);
    for (int i = 0; i < r->n; i++) bytes += strlen(r->info[i].name) + 1;
    tfc_metric_info *out = malloc(bytes);
    if (!out) return NULL;
    char *names = (char *)(out + r->n);
    for (int i = 0; i < r->n; i++) {
        size_t len = strlen(r->info[i].name) + 1;
        out[i] = r->info[i];
        out[i].name = memcpy(names, r->info[i].name, len);
        names += len;
    }
    return out;
}

/* One row per name, in the order first logged; the last value is the one read_metric gives
 * last (greatest step, then latest logged). */
static const char list_sql[] =
    "SELECT name, count(*), min(step), max(step),"
    " (SELECT value FROM metrics AS l WHERE l.name = m.name ORDER BY step DESC, id DESC LIMIT 1)"
    " FROM metrics AS m GROUP BY name ORDER BY min(id)";

tfc_status tfc_store_list_metrics(tfc_store *st, int *n, tfc_metric_info **out)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "list_metrics: store is NULL");
    if (!n || !out)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "list_metrics: NULL argument");
    *n = 0;
    *out = NULL;
    tfc_store_drain(st); /* what was logged before is listed */
    struct metric_rows rows = {0};
    tfc_status status = TFC_OK;
    sqlite3_stmt *q = NULL;
    pthread_mutex_lock(&st->db_mu);
    int rc = sqlite3_prepare_v2(st->db, list_sql, -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (rows_add(&rows, q)) {
            status = tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "list_metrics: no memory");
            break;
        }
    }
    if (!status && rc != SQLITE_DONE)
        status = tfc_store_sqlfail(st, st->db, rc, st->msg, "listing the metrics");
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->db_mu);
    if (!status && rows.n && !(*out = rows_pack(&rows)))
        status = tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "list_metrics: no memory");
    if (!status) *n = rows.n;
    rows_free(&rows);
    return status;
}
