/* store.c: opening and closing a model store (one SQLite file in WAL mode, its schema checked
 * and upgraded on open), and the store's test hooks. The SQLite helpers every store file uses
 * are in sql.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>
#include "lock.h"
#include "store_internal.h"
#include "../src/env.h"

static int default_busy_ms = TFC_STORE_BUSY_TIMEOUT_MS; /* tfc_store_set_busy_timeout */

/* ---- the session's graph --------------------------------------------------------------------- */

/* The session keeps its graph as the first member of struct tfc_session (sched/session_priv.h),
 * which store/ cannot include (it pulls in <starpu.h>). C guarantees that a pointer to a struct
 * points to its first member. To be replaced by an accessor exported from sched/. */

/* ---- open and close -------------------------------------------------------------------------- */

/* "file:<path>?immutable=1" with the path percent-encoded where URIs need it. */
static char *immutable_uri(const char *path)
{
    size_t len = strlen(path);
    char *uri = malloc(3 * len + 32), *q = uri;
    if (!uri) return NULL;
    q += sprintf(q, "file:");
    for (const char *p = path; *p; p++) {
        if (*p == '%' || *p == '?' || *p == '#')
            q += sprintf(q, "%%%02X", (unsigned char)*p);
        else
            *q++ = *p;
    }
    strcpy(q, "?immutable=1");
    return uri;
}

static int open_connection(tfc_store *st, const char *name, int flags, sqlite3 **out)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(name, &db, flags, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, st->busy_ms);
        if (st->flags & TFC_STORE_EXCLUSIVE)
            rc = tfc_store_exec(db, "PRAGMA locking_mode=EXCLUSIVE");
    }
    if (rc != SQLITE_OK) {
        tfc_store_sqlfail(st, db, rc, st->msg, "cannot open");
        sqlite3_close(db);
        return rc;
    }
    *out = db;
    return SQLITE_OK;
}

/* Settings of every read-write connection: WAL journal (exclusive locking mode keeps the
 * WAL index in heap memory: no shared memory, fit for NFS and Lustre), full fsync at commit,
 * foreign keys (deleting a checkpoint deletes its variables and chunks), a bounded WAL. */
static int configure_rw(tfc_store *st, sqlite3 *db)
{
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &q, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) {
            const char *mode = (const char *)sqlite3_column_text(q, 0);
            rc = mode && !strcmp(mode, "wal") ? SQLITE_OK : SQLITE_ERROR;
            if (rc) tfc_fail(st->msg, TFC_ERR_STORE,
                             "store '%s': cannot switch to WAL mode (journal mode stays '%s')",
                             st->path, mode ? mode : "?");
        } else
            tfc_store_sqlfail(st, db, rc, st->msg, "cannot switch to WAL mode");
        sqlite3_finalize(q);
        if (rc) return rc;
    } else
        return tfc_store_sqlfail(st, db, rc, st->msg, "cannot switch to WAL mode"), rc;
    rc = tfc_store_exec(db, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; "
                            "PRAGMA journal_size_limit=67108864");
    if (rc) tfc_store_sqlfail(st, db, rc, st->msg, "cannot configure the connection");
    return rc;
}

static int file_exists(const char *path, off_t *size)
{
    struct stat sb;
    if (stat(path, &sb)) return 0;
    if (size) *size = sb.st_size;
    return S_ISDIR(sb.st_mode) ? -1 : 1;
}

static void store_free(tfc_store *st)
{
    if (!st) return;
    if (st->wdb && st->wdb != st->db) sqlite3_close(st->wdb);
    if (st->db) sqlite3_close(st->db);
    tfc_store_lock_detach(st); /* after the connections: it may close descriptors on the file */
    pthread_mutex_destroy(&st->db_mu);
    pthread_mutex_destroy(&st->write_mu);
    pthread_mutex_destroy(&st->q_mu);
    pthread_cond_destroy(&st->q_cv);
    for (int i = 0; i < st->n_mbuf; i++) free(st->mbuf[i].name); /* a failed hand-over */
    free(st->mbuf);
    free(st->path);
    free(st);
}

/* "<path><suffix>" (malloc'ed; NULL when out of memory). */
static char *side_path(const char *path, const char *suffix)
{
    size_t len = strlen(path), slen = strlen(suffix);
    char *p = malloc(len + slen + 1);
    if (p) {
        memcpy(p, path, len);
        memcpy(p + len, suffix, slen + 1);
    }
    return p;
}

/* A reader's connection that leaves the store one file. A read-only SQLite connection to a
 * WAL database creates -wal and -shm files and, unable to checkpoint, never removes them; a
 * read-write one with query_only set writes nothing, and when it is the last connection to
 * close it removes them, as any writer's last close does (SQLite's own test: it can lock the
 * file exclusively, so no trainer or other reader is left). Used only when the WAL holds no
 * frame (missing or empty): then closing it copies nothing into the database file, unless a
 * writer that came meanwhile committed frames and left first, which is its data to move.
 * 0 with *out set, or -1 (no write permission, read-only media: the caller reads read-only). */
static int open_reader(tfc_store *st, sqlite3 **out)
{
    char *wal = side_path(st->path, "-wal"), *journal = side_path(st->path, "-journal");
    off_t wsize = 0;
    /* a rollback journal beside it may be hot: a read-write connection would play it back */
    int ok = wal && journal && (!file_exists(wal, &wsize) || wsize == 0) &&
             !file_exists(journal, NULL);
    free(wal);
    free(journal);
    sqlite3 *db = NULL;
    if (!ok || sqlite3_open_v2(st->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_db_readonly(db, "main") != 0 || tfc_store_exec(db, "PRAGMA query_only=1") ||
        ((st->flags & TFC_STORE_EXCLUSIVE) &&
         tfc_store_exec(db, "PRAGMA locking_mode=EXCLUSIVE"))) {
        sqlite3_close(db);
        return -1;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, st->busy_ms);
    *out = db;
    return 0;
}

/* Opens the caller's connection and reads the schema version (the first read: a file that is
 * not a database or is truncated fails here, before anything is written). */
static tfc_status open_main(tfc_store *st)
{
    int create = (st->flags & TFC_STORE_CREATE) && !st->readonly;
    int flags = st->readonly ? SQLITE_OPEN_READONLY
                             : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    if ((!st->readonly || open_reader(st, &st->db)) &&
        open_connection(st, st->path, flags, &st->db))
        return TFC_ERR_STORE;
    if (!st->readonly && sqlite3_db_readonly(st->db, "main") == 1)
        return tfc_fail(st->msg, TFC_ERR_STORE,
                        "store '%s': the file or its file system is read-only (no write "
                        "permission, or a read-only mount): open it with TFC_STORE_READONLY",
                        st->path);
    int rc = tfc_store_exec(st->db, "SELECT count(*) FROM sqlite_schema");
    if (rc != SQLITE_OK && st->readonly && ((rc & 0xff) == SQLITE_CANTOPEN ||
                                            (rc & 0xff) == SQLITE_READONLY)) {
        /* A WAL database on read-only media without its -shm file: SQLite cannot create
         * the index. With no -wal file either, nobody is writing it: read it as immutable. */
        char *wal = side_path(st->path, "-wal");
        off_t wsize = 0;
        int has_wal = 1;
        if (wal) {
            has_wal = file_exists(wal, &wsize) && wsize > 0;
            free(wal);
        }
        char *uri = has_wal ? NULL : immutable_uri(st->path);
        if (uri) {
            sqlite3 *db;
            if (!open_connection(st, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, &db)) {
                sqlite3_close(st->db);
                st->db = db;
                rc = tfc_store_exec(st->db, "SELECT count(*) FROM sqlite_schema");
            }
            free(uri);
        }
    }
    if (rc != SQLITE_OK) return tfc_store_sqlfail(st, st->db, rc, st->msg, "cannot read");
    return TFC_OK;
}

/* After an open that found the file locked (exclusive locking mode: nobody else may even
 * read): appends the training writer the file records, read from the main file without any
 * lock, so that the message names the holder on another host too, where /proc/locks cannot
 * (a trainer checkpoints its record into the main file when it takes the lock). */
static void note_trainer(tfc_store *st)
{
    char *uri = immutable_uri(st->path), who[512];
    sqlite3 *db = NULL;
    if (uri && sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) ==
                   SQLITE_OK && !tfc_store_train_holder(db, who, sizeof who)) {
        size_t n = strlen(st->msg);
        snprintf(st->msg + n, sizeof st->msg - n, "; the store records %s as its training "
                 "writer", who);
    }
    sqlite3_close(db);
    free(uri);
}

/* The checks before anything is opened: the arguments, the flags (TFC_STORE_EXCLUSIVE added
 * from the environment into *flags) and the file. Sets the global error. */
static tfc_status check_open(const char *path, unsigned *flags)
{
    if (!path || !*path)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "store_open: path is NULL or empty");
    if (*flags & ~(unsigned)(TFC_STORE_READONLY | TFC_STORE_CREATE | TFC_STORE_EXCLUSIVE |
                             TFC_STORE_TRAINER))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "store_open '%s': unknown flags 0x%x",
                               path, *flags);
    int env_exclusive;
    char emsg[TFC_MSG_LEN];
    if (tfc_env_bool("TFC_STORE_EXCLUSIVE", 0, &env_exclusive, emsg))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "store_open '%s': %s", path, emsg);
    if (env_exclusive) *flags |= TFC_STORE_EXCLUSIVE;
    if ((*flags & TFC_STORE_READONLY) && (*flags & (TFC_STORE_CREATE | TFC_STORE_TRAINER)))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT,
                               "store_open '%s': TFC_STORE_READONLY and TFC_STORE_%s together",
                               path, *flags & TFC_STORE_CREATE ? "CREATE" : "TRAINER");
    off_t size = 0;
    int exists = file_exists(path, &size);
    if (exists < 0)
        return tfc_fail_global(TFC_ERR_STORE, "store '%s': is a directory", path);
    if (!exists && !(*flags & TFC_STORE_CREATE))
        return tfc_fail_global(TFC_ERR_NOT_FOUND,
                               "store '%s' does not exist (TFC_STORE_CREATE creates it)", path);
    /* SQLite takes an empty file for an empty database and would write a schema into it */
    if (exists && size == 0 && !(*flags & TFC_STORE_CREATE))
        return tfc_fail_global(TFC_ERR_STORE,
                               "store '%s': an empty file (0 bytes), not a model store; it was "
                               "left unchanged (TFC_STORE_CREATE makes a new store in it)", path);
    if (sqlite3_threadsafe() == 0)
        return tfc_fail_global(TFC_ERR_STORE, "store '%s': SQLite was built without threads",
                               path);
    return TFC_OK;
}

tfc_status tfc_store_open(const char *path, unsigned flags, tfc_store **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "store_open: out is NULL");
    *out = NULL;
    tfc_status checked = check_open(path, &flags);
    if (checked) return checked;

    tfc_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "store '%s': no memory", path);
    }
    st->flags = flags;
    st->readonly = (flags & TFC_STORE_READONLY) != 0;
    st->busy_ms = __atomic_load_n(&default_busy_ms, __ATOMIC_RELAXED);
    pthread_mutex_init(&st->db_mu, NULL);
    pthread_mutex_init(&st->write_mu, NULL);
    pthread_mutex_init(&st->q_mu, NULL);
    pthread_cond_init(&st->q_cv, NULL);

    /* read and check first: nothing is written to a file that is not ours or too new */
    int version = 0;
    tfc_status status = open_main(st);
    if (!status) status = tfc_store_lock_attach(st);
    if (!status) status = tfc_store_schema_inspect(st, &version);
    if (!status && !st->readonly && configure_rw(st, st->db)) status = TFC_ERR_STORE;
    if (!status && !st->readonly) status = tfc_store_schema_upgrade(st, version);
    if (!status && !st->readonly) {
        if (flags & TFC_STORE_EXCLUSIVE) {
            /* take the exclusive lock now, and keep it until close: one process at a time */
            int rc = tfc_store_exec(st->db, "BEGIN IMMEDIATE; COMMIT");
            if (rc) status = tfc_store_sqlfail(st, st->db, rc, st->msg, "cannot lock");
            st->wdb = st->db; /* a second connection would be locked out by the first */
        } else if (open_connection(st, st->path, SQLITE_OPEN_READWRITE, &st->wdb) ||
                   configure_rw(st, st->wdb))
            status = TFC_ERR_STORE;
    }
    if (!status && (flags & TFC_STORE_TRAINER)) status = tfc_store_train_lock(st);
    if (!status && !st->readonly) status = tfc_store_writer_start(st);
    if (status) {
        if (st->db && (sqlite3_errcode(st->db) & 0xff) == SQLITE_BUSY) note_trainer(st);
        tfc_store_train_unlock(st);
        tfc_fail_global(status, "%s", st->msg);
        store_free(st);
        return status;
    }
    *out = st;
    return TFC_OK;
}

void tfc_store_close(tfc_store *st)
{
    if (!st) return;
    if (!st->readonly) {
        tfc_store_writer_stop(st);
        tfc_store_train_unlock(st); /* after the last checkpoint is written */
        if (st->wdb != st->db) sqlite3_close(st->wdb);
        st->wdb = NULL;
        /* a closed model is one file: move the WAL into it and truncate it (SQLite removes
         * the -wal and -shm files when the last connection closes) */
        sqlite3_busy_timeout(st->db, st->busy_ms < 1000 ? st->busy_ms : 1000); /* readers */
        tfc_store_exec(st->db, "PRAGMA wal_checkpoint(TRUNCATE)");
    }
    store_free(st);
}

const char *tfc_store_errmsg(const tfc_store *st)
{
    return st ? st->msg : tfc_errmsg();
}

/* ---- hooks ----------------------------------------------------------------------------------- */

void tfc_store_set_busy_timeout(tfc_store *st, int ms)
{
    if (!st) {
        __atomic_store_n(&default_busy_ms, ms > 0 ? ms : TFC_STORE_BUSY_TIMEOUT_MS,
                         __ATOMIC_RELAXED);
        return;
    }
    st->busy_ms = ms < 0 ? 0 : ms;
    pthread_mutex_lock(&st->db_mu);
    sqlite3_busy_timeout(st->db, st->busy_ms);
    pthread_mutex_unlock(&st->db_mu);
    /* the writer's connection: only the writer thread uses it, between jobs it is idle */
    pthread_mutex_lock(&st->write_mu);
    if (st->wdb && st->wdb != st->db) sqlite3_busy_timeout(st->wdb, st->busy_ms);
    pthread_mutex_unlock(&st->write_mu);
}

tfc_status tfc_store_exec_sql(tfc_store *st, const char *sql)
{
    if (!st || !sql) return TFC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&st->db_mu);
    int rc = tfc_store_exec(st->db, sql);
    tfc_status status = rc ? tfc_store_sqlfail(st, st->db, rc, st->msg, "%s", sql) : TFC_OK;
    pthread_mutex_unlock(&st->db_mu);
    return status;
}

tfc_status tfc_store_query_int(tfc_store *st, const char *sql, int64_t *out)
{
    if (!st || !sql || !out) return TFC_ERR_INVALID_ARGUMENT;
    tfc_store_drain(st);
    pthread_mutex_lock(&st->db_mu);
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, &q, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(q);
    tfc_status status = TFC_OK;
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(q, 0);
    else if (rc == SQLITE_DONE)
        status = tfc_fail(st->msg, TFC_ERR_NOT_FOUND, "store '%s': %s: no row", st->path, sql);
    else
        status = tfc_store_sqlfail(st, st->db, rc, st->msg, "%s", sql);
    sqlite3_finalize(q);
    pthread_mutex_unlock(&st->db_mu);
    return status;
}

uint64_t tfc_store_write_transactions(tfc_store *st)
{
    return st ? __atomic_load_n(&st->write_txns, __ATOMIC_RELAXED) : 0;
}
