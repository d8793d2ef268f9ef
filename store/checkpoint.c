/* checkpoint.c: checkpoints of every variable of a session's graph. The snapshot is one
 * consistent cut between runs (tfc_session_read_variables queues every copy under the
 * session's submission lock); the writer thread then stores it in one transaction while
 * training goes on, with the metrics logged for its steps, and applies the retention policy
 * in the same transaction. Restores check every dtype and shape, and read every byte, before
 * the first variable is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lock.h"
#include "store_internal.h"

/* A snapshot for the writer: the variables' names and values at one step. */
struct store_ckpt {
    int64_t step;
    double time;
    tfc_input_position pos;
    int n;
    char **names;
    tfc_value **values;
    struct store_metric_batch *metrics; /* those of steps <= step, committed with it */
};

static void ckpt_free(void *arg)
{
    struct store_ckpt *c = arg;
    for (int i = 0; i < c->n; i++) {
        if (c->names) free(c->names[i]);
        if (c->values) tfc_value_destroy(c->values[i]);
    }
    free(c->names);
    free(c->values);
    tfc_store_metrics_free(c->metrics);
    free(c);
}

static tfc_status write_checkpoint(tfc_store *st, sqlite3 *db, void *arg, char *msg);

static int graph_variables(tfc_graph *g, tfc_tensor ***out)
{
    int n = 0;
    *out = NULL;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i]->op == &tfc_op_variable;
    tfc_tensor **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return -1;
    n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->op == &tfc_op_variable) v[n++] = &g->nodes[i]->outputs[0];
    *out = v;
    return n;
}

static tfc_status session_graph(tfc_store *st, tfc_session *s, const char *what, tfc_graph **g)
{
    if (!s) return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "%s: session is NULL", what);
    *g = tfc_session_graph(s);
    if (!*g) return tfc_fail(st->msg, TFC_ERR_RUNTIME, "%s: cannot find the session's graph", what);
    return TFC_OK;
}

/* ---- taking a checkpoint --------------------------------------------------------------------- */

/* A checkpoint job for the n variables vars (their names copied; values not read yet). */
static tfc_status new_ckpt_job(tfc_store *st, int64_t step, const tfc_input_position *pos,
                               int n, tfc_tensor **vars, struct store_job **out)
{
    struct store_ckpt *c = calloc(1, sizeof *c);
    struct store_job *job = c ? tfc_store_job_new(write_checkpoint, ckpt_free, c) : NULL;
    if (!job) {
        free(c);
        return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
    }
    job->checkpoint = 1;
    job->step = c->step = step;
    if (pos) c->pos = *pos;
    c->names = calloc((size_t)n + 1, sizeof *c->names);
    c->values = calloc((size_t)n + 1, sizeof *c->values);
    tfc_status status = c->names && c->values ? TFC_OK : TFC_ERR_OUT_OF_MEMORY;
    if (!status) c->n = n;
    for (int i = 0; i < n && !status; i++)
        if (!(c->names[i] = strdup(vars[i]->node->name))) status = TFC_ERR_OUT_OF_MEMORY;
    if (status) {
        tfc_store_job_free(job);
        return tfc_fail(st->msg, status, "checkpoint: no memory");
    }
    *out = job;
    return TFC_OK;
}

/* A graph split across ranks ("rank:R" hints, sched/dist_place.c) holds a variable's current
 * value only on its rank: the checkpoint gathers them by a run fetching every variable (each
 * rank sends its own, and a fetched value reaches every rank), so every rank of the job must
 * take the checkpoint, as it makes every other run. */
static int split_across_ranks(const tfc_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->device.has_rank && g->nodes[i]->device.rank > 0) return 1;
    return 0;
}

/* Reads the snapshot into the job, takes the metrics logged so far for steps up to the
 * checkpoint's (so that its transaction commits them too: a crash never leaves a checkpoint
 * whose steps lack their metrics), and queues the job. The job is freed on failure. */
static tfc_status take_and_queue(tfc_store *st, tfc_session *s, int n, tfc_tensor **vars,
                                 struct store_job *job)
{
    struct store_ckpt *c = job->arg;
    /* bounded memory: at most TFC_STORE_MAX_PENDING_CKPT snapshots wait for the disk */
    pthread_mutex_lock(&st->q_mu);
    while (st->n_ckpt_pending >= TFC_STORE_MAX_PENDING_CKPT)
        pthread_cond_wait(&st->q_cv, &st->q_mu);
    pthread_mutex_unlock(&st->q_mu);
    /* one of those it waited for may have failed */
    tfc_status status = tfc_store_writer_error(st, "checkpoint");
    if (status) {
        tfc_store_job_free(job);
        return status;
    }
    c->time = tfc_store_now();
    status = split_across_ranks(tfc_session_graph(s))
                 ? tfc_session_run(s, 0, NULL, NULL, n, vars, c->values, 0, NULL)
                 : tfc_session_read_variables(s, n, vars, c->values);
    if (status) {
        tfc_fail(st->msg, status, "checkpoint of step %lld: %s", (long long)c->step,
                 tfc_session_errmsg(s));
        tfc_store_job_free(job);
        return status;
    }
    int oom;
    pthread_mutex_lock(&st->q_mu);
    c->metrics = tfc_store_metrics_take_upto(st, c->step, &oom);
    pthread_mutex_unlock(&st->q_mu);
    if (oom) {
        tfc_store_job_free(job);
        return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "checkpoint of step %lld: no memory "
                        "for its metrics", (long long)c->step);
    }
    tfc_store_enqueue(st, job);
    return TFC_OK;
}

tfc_status tfc_store_checkpoint(tfc_store *st, tfc_session *s, int64_t step,
                                const tfc_input_position *pos)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "checkpoint: store is NULL");
    tfc_status status = tfc_store_check_writable(st, "checkpoint");
    if (!status) status = tfc_store_writer_error(st, "checkpoint");
    if (!status) status = tfc_store_train_lock(st); /* one training writer per store */
    tfc_graph *g = NULL;
    if (!status) status = session_graph(st, s, "checkpoint", &g);
    if (status) return status;
    tfc_tensor **vars;
    int n = graph_variables(g, &vars);
    if (n < 0) return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "checkpoint: no memory");
    /* variables never initialized hold nothing: they are not part of the checkpoint */
    int k = 0;
    for (int i = 0; i < n; i++)
        if (tfc_session_variable_initialized(s, vars[i])) vars[k++] = vars[i];
    n = k;
    struct store_job *job = NULL;
    status = new_ckpt_job(st, step, pos, n, vars, &job);
    if (!status) status = take_and_queue(st, s, n, vars, job);
    free(vars);
    return status;
}

int tfc_store_prune_locked(tfc_store *st, sqlite3 *db)
{
    pthread_mutex_lock(&st->q_mu);
    int keep_last = st->keep_last;
    int64_t keep_every = st->keep_every;
    pthread_mutex_unlock(&st->q_mu);
    if (keep_last <= 0) return SQLITE_OK; /* keep all */
    sqlite3_stmt *q;
    /* the newest keep_last (by step: never by arrival), plus the oldest checkpoint of each
     * window of keep_every steps */
    int rc = sqlite3_prepare_v2(
        db,
        "DELETE FROM checkpoints WHERE id NOT IN "
        "(SELECT id FROM checkpoints ORDER BY step DESC, id DESC LIMIT ?1) "
        "AND (?2 <= 0 OR id NOT IN (SELECT min(id) FROM checkpoints GROUP BY step / ?2))",
        -1, &q, NULL);
    if (rc) return rc;
    sqlite3_bind_int(q, 1, keep_last);
    sqlite3_bind_int64(q, 2, keep_every);
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The writer job of a snapshot: one transaction, with the metrics of its steps and the
 * retention DELETE. */
static tfc_status write_checkpoint(tfc_store *st, sqlite3 *db, void *arg, char *msg)
{
    const struct store_ckpt *c = arg;
    sqlite3_stmt *ck = NULL, *var = NULL, *chunk = NULL;
    struct store_metric_stmts mq = {0};
    int64_t bytes = 0;
    const char *failed = NULL;
    for (int i = 0; i < c->n; i++) bytes += (int64_t)tfc_value_nbytes(c->values[i]);
    int rc = tfc_store_write_begin(st, db);
    if (rc)
        return tfc_store_sqlfail(st, db, rc, msg, "checkpoint of step %lld", (long long)c->step);
    rc = sqlite3_prepare_v2(db, "INSERT INTO checkpoints(step, time, input_seed, input_epoch, "
                                "input_step, n_variables, bytes) VALUES (?,?,?,?,?,?,?)",
                            -1, &ck, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(ck, 1, c->step);
        sqlite3_bind_double(ck, 2, c->time);
        sqlite3_bind_int64(ck, 3, (int64_t)c->pos.seed);
        sqlite3_bind_int64(ck, 4, c->pos.epoch);
        sqlite3_bind_int64(ck, 5, c->pos.step);
        sqlite3_bind_int(ck, 6, c->n);
        sqlite3_bind_int64(ck, 7, bytes);
        rc = sqlite3_step(ck);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    int64_t id = sqlite3_last_insert_rowid(db);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT INTO variables(checkpoint, name, dtype, shape, nbytes) "
                                    "VALUES (?,?,?,?,?)", -1, &var, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "INSERT INTO variable_chunks(variable, seq, crc32, data) "
                                    "VALUES (?,?,?,?)", -1, &chunk, NULL);
    for (int i = 0; i < c->n && rc == SQLITE_OK; i++) {
        const tfc_value *v = c->values[i];
        tfc_shape shape = tfc_value_shape(v);
        char text[256];
        tfc_store_shape_text(&shape, text, sizeof text);
        sqlite3_reset(var);
        sqlite3_bind_int64(var, 1, id);
        sqlite3_bind_text(var, 2, c->names[i], -1, SQLITE_STATIC);
        sqlite3_bind_text(var, 3, tfc_dtype_name(tfc_value_dtype(v)), -1, SQLITE_STATIC);
        sqlite3_bind_text(var, 4, text, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(var, 5, (int64_t)tfc_value_nbytes(v));
        rc = sqlite3_step(var);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        if (rc == SQLITE_OK)
            rc = tfc_store_put_chunks(db, chunk, sqlite3_last_insert_rowid(db),
                                      tfc_value_cdata(v), tfc_value_nbytes(v),
                                      tfc_dtype_size(tfc_value_dtype(v)));
        if (rc) failed = c->names[i];
    }
    if (rc == SQLITE_OK && c->metrics) rc = tfc_store_metrics_insert(db, c->metrics, &mq);
    if (rc == SQLITE_OK) rc = tfc_store_prune_locked(st, db);
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, db);
    tfc_status status = TFC_OK;
    if (rc) { /* the message first: finalizing a statement resets the connection's error */
        status = tfc_store_sqlfail(st, db, rc, msg,
                                   "checkpoint of step %lld (%lld bytes)%s%s%s not written",
                                   (long long)c->step, (long long)bytes,
                                   failed ? ", at variable '" : "", failed ? failed : "",
                                   failed ? "'," : "");
        tfc_store_write_rollback(st, db);
    }
    sqlite3_finalize(ck);
    sqlite3_finalize(var);
    sqlite3_finalize(chunk);
    tfc_store_metrics_finalize(&mq);
    return status;
}

/* The writer job of set_retention. */
static tfc_status prune(tfc_store *st, sqlite3 *db, void *arg, char *msg)
{
    int rc = tfc_store_write_begin(st, db);
    if (rc) return tfc_store_sqlfail(st, db, rc, msg, "removing old checkpoints");
    rc = tfc_store_prune_locked(st, db);
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, db);
    if (rc) {
        tfc_status status = tfc_store_sqlfail(st, db, rc, msg, "removing old checkpoints");
        tfc_store_write_rollback(st, db);
        return status;
    }
    return TFC_OK;
}

tfc_status tfc_store_set_retention(tfc_store *st, int keep_last, int64_t keep_every)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_retention: store is NULL");
    if (keep_last < 0 || keep_every < 0)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT,
                        "set_retention: keep_last %d and keep_every %lld must be >= 0", keep_last,
                        (long long)keep_every);
    tfc_status status = tfc_store_check_writable(st, "set_retention");
    if (!status) status = tfc_store_writer_error(st, "set_retention");
    if (status) return status;
    struct store_job *job = tfc_store_job_new(prune, NULL, NULL);
    if (!job) return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "set_retention: no memory");
    pthread_mutex_lock(&st->q_mu);
    st->keep_last = keep_last;
    st->keep_every = keep_every;
    pthread_mutex_unlock(&st->q_mu);
    tfc_store_enqueue(st, job); /* applied now, and after every checkpoint */
    return TFC_OK;
}

/* ---- listing --------------------------------------------------------------------------------- */

static void info_from_row(sqlite3_stmt *q, tfc_checkpoint_info *c)
{
    c->id = sqlite3_column_int64(q, 0);
    c->step = sqlite3_column_int64(q, 1);
    c->time = sqlite3_column_double(q, 2);
    c->position.seed = (uint64_t)sqlite3_column_int64(q, 3);
    c->position.epoch = sqlite3_column_int64(q, 4);
    c->position.step = sqlite3_column_int64(q, 5);
    c->n_variables = sqlite3_column_int(q, 6);
    c->bytes = sqlite3_column_int64(q, 7);
}

#define CKPT_COLUMNS "id, step, time, input_seed, input_epoch, input_step, n_variables, bytes"

tfc_status tfc_store_list_checkpoints(tfc_store *st, int *n, tfc_checkpoint_info **out)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "list_checkpoints: store is NULL");
    if (!n || !out)
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "list_checkpoints: NULL argument");
    *n = 0;
    *out = NULL;
    tfc_store_drain(st);
    tfc_status status = TFC_OK;
    int cap = 0;
    sqlite3_stmt *q = NULL;
    pthread_mutex_lock(&st->db_mu);
    int rc = sqlite3_prepare_v2(st->db, "SELECT " CKPT_COLUMNS " FROM checkpoints "
                                         "ORDER BY step, id",
                                -1, &q, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            tfc_checkpoint_info *a = realloc(*out, (size_t)cap * sizeof *a);
            if (!a) {
                status = tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "list_checkpoints: no memory");
                break;
            }
            *out = a;
        }
        info_from_row(q, &(*out)[(*n)++]);
    }
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        status = tfc_store_sqlfail(st, st->db, rc, st->msg, "listing checkpoints");
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->db_mu);
    if (status) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return status;
}

/* ---- restoring ------------------------------------------------------------------------------- */

struct stored_var {
    int64_t id;
    char *name;
    int dtype;             /* -1 when the stored name is unknown */
    tfc_shape shape;
    int shape_ok;
    char dtype_text[40], shape_text[96]; /* as stored, quoted, for a message when unreadable */
    int64_t nbytes;
    int used;
};

struct target {
    tfc_tensor *var;
    const char *src;       /* the stored name */
    struct stored_var *sv; /* NULL: missing */
    tfc_value *value;
};

void tfc_restore_report_clear(tfc_restore_report *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_missing; i++) free(r->missing[i]);
    for (int i = 0; i < r->n_extra; i++) free(r->extra[i]);
    free(r->missing);
    free(r->extra);
    memset(r, 0, sizeof *r);
}

static tfc_tensor *graph_variable(tfc_graph *g, const char *name)
{
    tfc_tensor *t = tfc_graph_find(g, name);
    return t && t->node->op == &tfc_op_variable && t->index == 0 ? t : NULL;
}

/* "a, b, c" (at most len bytes). */
static void join_names(char *buf, size_t len, int n, const char *const *names)
{
    size_t pos = 0;
    buf[0] = 0;
    for (int i = 0; i < n && pos + 1 < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", i ? ", " : "", names[i]);
}

static int find_checkpoint(sqlite3 *db, int64_t step, tfc_checkpoint_info *c)
{
    sqlite3_stmt *q;
    /* the latest is the highest step (two writers, or a resume from an older checkpoint, can
     * store an older step after a newer one), then the last stored of that step */
    int rc = sqlite3_prepare_v2(db, step < 0 ? "SELECT " CKPT_COLUMNS " FROM checkpoints "
                                               "ORDER BY step DESC, id DESC LIMIT 1"
                                             : "SELECT " CKPT_COLUMNS " FROM checkpoints "
                                               "WHERE step = ?1 ORDER BY id DESC LIMIT 1",
                                -1, &q, NULL);
    if (rc) return rc;
    if (step >= 0) sqlite3_bind_int64(q, 1, step);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        info_from_row(q, c);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE)
        rc = SQLITE_NOTFOUND;
    sqlite3_finalize(q);
    return rc;
}

static int read_stored(sqlite3 *db, int64_t ckpt, struct stored_var **out, int *n)
{
    sqlite3_stmt *q;
    int cap = 0;
    *out = NULL;
    *n = 0;
    int rc = sqlite3_prepare_v2(db, "SELECT id, name, dtype, shape, nbytes FROM variables "
                                    "WHERE checkpoint = ? ORDER BY id", -1, &q, NULL);
    if (rc) return rc;
    sqlite3_bind_int64(q, 1, ckpt);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            struct stored_var *a = realloc(*out, (size_t)cap * sizeof *a);
            if (!a) {
                rc = SQLITE_NOMEM;
                break;
            }
            *out = a;
        }
        struct stored_var *v = &(*out)[*n];
        memset(v, 0, sizeof *v);
        const char *name = (const char *)sqlite3_column_text(q, 1);
        if (!(v->name = strdup(name ? name : ""))) {
            rc = SQLITE_NOMEM;
            break;
        }
        (*n)++;
        v->id = sqlite3_column_int64(q, 0);
        const char *dt = (const char *)sqlite3_column_text(q, 2);
        const char *sh = (const char *)sqlite3_column_text(q, 3);
        v->dtype = tfc_dtype_parse(dt);
        v->shape_ok = !tfc_store_shape_parse(sh, &v->shape);
        snprintf(v->dtype_text, sizeof v->dtype_text, "'%.32s' (unknown)", dt ? dt : "");
        snprintf(v->shape_text, sizeof v->shape_text, "'%.64s' (unreadable)", sh ? sh : "");
        v->nbytes = sqlite3_column_int64(q, 4);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static struct stored_var *stored_find(struct stored_var *sv, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(sv[i].name, name)) return &sv[i];
    return NULL;
}

/* One restore's state, shared by its steps: what to restore (targets), what the checkpoint
 * holds (stored), and the graph variables it lacks. */
struct restore {
    tfc_store *st;
    const tfc_restore_options *opt;
    tfc_graph *g;
    tfc_tensor **all;      /* the graph's variables */
    struct target *t;
    int n_t;
    tfc_checkpoint_info c;
    struct stored_var *sv;
    int n_sv;
    const char **missing;  /* node names, borrowed from the graph */
    int n_missing;
};

/* The variables to restore, and the stored name each takes. */
static tfc_status restore_targets(struct restore *r)
{
    const tfc_restore_options *opt = r->opt;
    int n_all = graph_variables(r->g, &r->all);
    r->n_t = opt->n_names ? opt->n_names : n_all;
    r->t = n_all >= 0 ? calloc((size_t)r->n_t + 1, sizeof *r->t) : NULL;
    if (!r->t) return tfc_fail(r->st->msg, TFC_ERR_OUT_OF_MEMORY, "restore: no memory");
    for (int i = 0; i < r->n_t; i++) {
        struct target *t = &r->t[i];
        if (!opt->n_names) {
            t->var = r->all[i];
            t->src = r->all[i]->node->name;
            continue;
        }
        const char *name = opt->names[i];
        t->var = name ? graph_variable(r->g, name) : NULL;
        t->src = opt->from && opt->from[i] ? opt->from[i] : name;
        if (!t->var)
            return tfc_fail(r->st->msg, TFC_ERR_NOT_FOUND,
                            "restore: '%s' is not a variable of the session's graph",
                            name ? name : "(null)");
    }
    return TFC_OK;
}

/* Matches every target with its stored variable and checks dtype and shape; lists the targets
 * the checkpoint lacks, which fail the restore unless allow_missing. */
static tfc_status restore_check(struct restore *r)
{
    for (int i = 0; i < r->n_t; i++) {
        struct tfc_tensor *v = r->t[i].var;
        const char *src = r->t[i].src;
        struct stored_var *x = stored_find(r->sv, r->n_sv, src);
        if (!x) {
            r->missing[r->n_missing++] = v->node->name;
            continue;
        }
        char a[128], b[128];
        const char *via = strcmp(src, v->node->name) ? " (from stored '" : "";
        if (x->dtype != (int)v->desc.dtype || !x->shape_ok ||
            !tfc_shape_equal(&x->shape, &v->desc.shape)) {
            tfc_store_shape_text(&v->desc.shape, a, sizeof a);
            if (x->shape_ok) tfc_store_shape_text(&x->shape, b, sizeof b);
            return tfc_fail(r->st->msg, TFC_ERR_SHAPE,
                            "restore: variable '%s'%s%s%s is %s %s in the graph but %s %s in "
                            "the checkpoint of step %lld (nothing was restored)",
                            v->node->name, via, *via ? src : "", *via ? "')" : "",
                            tfc_dtype_name(v->desc.dtype), a,
                            x->dtype >= 0 ? tfc_dtype_name((enum tfc_dtype)x->dtype)
                                          : x->dtype_text,
                            x->shape_ok ? b : x->shape_text, (long long)r->c.step);
        }
        r->t[i].sv = x;
        x->used = 1;
    }
    if (r->n_missing && !r->opt->allow_missing) {
        char list[TFC_MSG_LEN / 2];
        join_names(list, sizeof list, r->n_missing, r->missing);
        return tfc_fail(r->st->msg, TFC_ERR_NOT_FOUND,
                        "restore: the checkpoint of step %lld lacks %d variable%s of the graph: "
                        "%s (nothing was restored; allow_missing keeps their values)",
                        (long long)r->c.step, r->n_missing, r->n_missing > 1 ? "s" : "", list);
    }
    return TFC_OK;
}

/* Reads every matched variable into a new value (chunk CRCs checked) through cq, the chunk
 * query; *rc receives an SQLite failure, the status anything else. */
static tfc_status restore_read(struct restore *r, sqlite3_stmt *cq, int *rc)
{
    tfc_store *st = r->st;
    char why[TFC_MSG_LEN] = "";
    for (int i = 0; i < r->n_t; i++) {
        struct target *t = &r->t[i];
        if (!t->sv) continue;
        const struct tfc_desc *d = &t->var->desc;
        if (tfc_value_alloc(d->dtype, &d->shape, &t->value))
            return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "restore '%s': no memory",
                            t->var->node->name);
        size_t nbytes = tfc_value_nbytes(t->value);
        if ((int64_t)nbytes != t->sv->nbytes)
            return tfc_fail(st->msg, TFC_ERR_STORE,
                            "store '%s': variable '%s' of the checkpoint of step %lld: "
                            "%lld bytes recorded for %zu (corrupted; nothing was restored)",
                            st->path, t->src, (long long)r->c.step, (long long)t->sv->nbytes,
                            nbytes);
        sqlite3_reset(cq);
        sqlite3_bind_int64(cq, 1, t->sv->id);
        *rc = tfc_store_get_chunks(cq, tfc_value_data(t->value), nbytes,
                                   tfc_dtype_size(d->dtype), why, sizeof why);
        if (*rc == -1) {
            *rc = SQLITE_OK;
            return tfc_fail(st->msg, TFC_ERR_STORE,
                            "store '%s': variable '%s' of the checkpoint of step %lld: %s "
                            "(nothing was restored)", st->path, t->src, (long long)r->c.step, why);
        }
        if (*rc != SQLITE_OK) break;
    }
    return TFC_OK;
}

/* In one read transaction (retention may delete checkpoints meanwhile): finds the checkpoint,
 * checks every target against it and reads every byte, before anything is written. Called
 * with db_mu held. */
static tfc_status restore_load(struct restore *r)
{
    tfc_store *st = r->st;
    tfc_status status = TFC_OK;
    int rc = tfc_store_exec(st->db, "BEGIN");
    if (rc == SQLITE_OK) rc = find_checkpoint(st->db, r->opt->step, &r->c);
    if (rc == SQLITE_NOTFOUND) {
        rc = SQLITE_OK;
        status = r->opt->step < 0
                     ? tfc_fail(st->msg, TFC_ERR_NOT_FOUND, "store '%s' has no checkpoint",
                                st->path)
                     : tfc_fail(st->msg, TFC_ERR_NOT_FOUND,
                                "store '%s' has no checkpoint of step %lld", st->path,
                                (long long)r->opt->step);
    }
    if (rc == SQLITE_OK && !status) rc = read_stored(st->db, r->c.id, &r->sv, &r->n_sv);
    r->missing = calloc((size_t)r->n_t + 1, sizeof *r->missing);
    if (!r->missing && !status)
        status = tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "restore: no memory");
    if (rc == SQLITE_OK && !status) status = restore_check(r);
    sqlite3_stmt *cq = NULL;
    if (rc == SQLITE_OK && !status)
        rc = sqlite3_prepare_v2(st->db, "SELECT seq, crc32, data FROM variable_chunks "
                                        "WHERE variable = ? ORDER BY seq", -1, &cq, NULL);
    if (rc == SQLITE_OK && !status) status = restore_read(r, cq, &rc);
    if (rc) status = tfc_store_sqlfail(st, st->db, rc, st->msg, "restoring a checkpoint "
                                       "(nothing was restored)");
    sqlite3_finalize(cq);
    if (!sqlite3_get_autocommit(st->db)) tfc_store_exec(st->db, "COMMIT");
    return status;
}

/* The checkpoint's step and input position, the missing names, and the stored variables that
 * no graph variable has the name of and the name map does not use. */
static tfc_status restore_fill_report(struct restore *r, tfc_restore_report *report)
{
    tfc_status status = TFC_OK;
    report->step = r->c.step;
    report->position = r->c.position;
    report->missing = calloc((size_t)r->n_missing + 1, sizeof *report->missing);
    report->extra = calloc((size_t)r->n_sv + 1, sizeof *report->extra);
    if (!report->missing || !report->extra)
        status = tfc_fail(r->st->msg, TFC_ERR_OUT_OF_MEMORY, "restore: no memory for the report");
    for (int i = 0; i < r->n_missing && !status; i++)
        if ((report->missing[report->n_missing] = strdup(r->missing[i]))) report->n_missing++;
    for (int i = 0; i < r->n_sv && !status; i++)
        if (!r->sv[i].used && !graph_variable(r->g, r->sv[i].name) &&
            (report->extra[report->n_extra] = strdup(r->sv[i].name)))
            report->n_extra++;
    if (status) tfc_restore_report_clear(report);
    return status;
}

static void restore_free(struct restore *r)
{
    for (int i = 0; r->t && i < r->n_t; i++) tfc_value_destroy(r->t[i].value);
    for (int i = 0; i < r->n_sv; i++) free(r->sv[i].name);
    free(r->sv);
    free(r->missing);
    free(r->t);
    free(r->all);
}

tfc_status tfc_store_restore(tfc_store *st, tfc_session *s, const tfc_restore_options *opt,
                             tfc_restore_report *report)
{
    if (!st) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "restore: store is NULL");
    if (report) memset(report, 0, sizeof *report);
    static const tfc_restore_options def = {-1, 0, NULL, NULL, 0};
    struct restore r = {.st = st, .opt = opt ? opt : &def};
    tfc_status status = session_graph(st, s, "restore", &r.g);
    if (status) return status;
    if (r.opt->n_names < 0 || (r.opt->n_names && !r.opt->names))
        return tfc_fail(st->msg, TFC_ERR_INVALID_ARGUMENT, "restore: bad name list");
    status = restore_targets(&r);
    if (!status) {
        tfc_store_drain(st); /* "latest" includes the checkpoints taken so far */
        pthread_mutex_lock(&st->db_mu);
        status = restore_load(&r);
        pthread_mutex_unlock(&st->db_mu);
    }
    for (int i = 0; i < r.n_t && !status; i++)
        if (r.t[i].value && tfc_session_write_variable(s, r.t[i].var, r.t[i].value))
            status = tfc_fail(st->msg, TFC_ERR_RUNTIME, "restore: %s", tfc_session_errmsg(s));
    if (!status && report) status = restore_fill_report(&r, report);
    restore_free(&r);
    return status;
}
