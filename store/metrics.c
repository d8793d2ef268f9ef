/* metrics.c: run metrics (loss, accuracy, ...), buffered in memory and written by the writer
 * thread one transaction per batch (TFC_STORE_METRIC_BATCH values, or every
 * TFC_STORE_METRIC_SECONDS), never one per step. NaN is stored as NULL (SQLite has no NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "store_internal.h"

/* A batch of metrics for the writer: the buffer handed over whole. */
struct metric_batch {
    int n;
    struct store_metric *m;
};

static void batch_free(void *arg)
{
    struct metric_batch *b = arg;
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
    struct metric_batch *b = malloc(sizeof *b);
    struct store_job *job = b ? tfc_store_job_new(write_metrics, batch_free, b) : NULL;
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

tfc_status tfc_store_log_metric(tfc_store *st, int64_t step, const char *name, double value)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "log_metric: store is NULL");
    if (!name || !*name)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "log_metric: name is NULL or empty");
    tfc_status status = tfc_store_check_writable(st, "log_metric");
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
    if (st->n_mbuf >= TFC_STORE_METRIC_BATCH || now - st->mbuf_since >= TFC_STORE_METRIC_SECONDS)
        job = take_metrics_locked(st);
    pthread_mutex_unlock(&st->q_mu);
    if (job) tfc_store_enqueue(st, job);
    return TFC_OK;
}

/* The writer job of a batch: one transaction. */
static tfc_status write_metrics(tfc_store *st, sqlite3 *db, void *arg, char *msg)
{
    const struct metric_batch *b = arg;
    int n = b->n;
    const struct store_metric *m = b->m;
    sqlite3_stmt *ins = NULL;
    int rc = tfc_store_write_begin(st, db);
    if (rc) return tfc_store_sqlfail(st, db, rc, msg, "writing %d metrics", n);
    rc = sqlite3_prepare_v2(db, "INSERT INTO metrics(step, name, value, time) VALUES (?,?,?,?)",
                            -1, &ins, NULL);
    for (int i = 0; i < n && rc == SQLITE_OK; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, m[i].step);
        sqlite3_bind_text(ins, 2, m[i].name, -1, SQLITE_STATIC);
        if (isnan(m[i].value))
            sqlite3_bind_null(ins, 3);
        else
            sqlite3_bind_double(ins, 3, m[i].value);
        sqlite3_bind_double(ins, 4, m[i].time);
        rc = sqlite3_step(ins);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, db);
    tfc_status status = TFC_OK;
    if (rc) { /* the message first: finalizing a statement resets the connection's error */
        status = tfc_store_sqlfail(st, db, rc, msg, "writing %d metrics", n);
        tfc_store_write_rollback(st, db);
    }
    sqlite3_finalize(ins);
    return status;
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
