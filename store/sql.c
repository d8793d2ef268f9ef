/* sql.c: the SQLite helpers of the store's files: statements, translating SQLite's result codes
 * into TFC_ERR_STORE messages that name the file and the cause (and the process that holds a
 * lock on it), write transactions, and shapes as text. They depend on no other store file, so
 * store.c (opening) and schema.c (migrations) both use them without a circle. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>
#include "store_internal.h"

double tfc_store_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

int tfc_store_exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* ---- who holds the lock ---------------------------------------------------------------------- */

/* A POSIX lock in /proc/locks on (dev, ino) that covers byte `at` (any byte when at < 0). */
static int proc_locks_holder(dev_t dev, ino_t ino, long long at, int want_write, int exclude)
{
    FILE *f = fopen("/proc/locks", "r");
    if (!f) return 0;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char kind[16], mode[16], type[16], end[32];
        unsigned maj, min;
        unsigned long long inode;
        long long start;
        int pid;
        if (strstr(line, "->")) continue; /* a waiter, not a holder */
        if (sscanf(line, "%*d: %15s %15s %15s %d %x:%x:%llu %lld %31s", kind, mode, type, &pid,
                   &maj, &min, &inode, &start, end) != 9)
            continue;
        if (maj != major(dev) || min != minor(dev) || inode != (unsigned long long)ino) continue;
        if (pid <= 0 || pid == exclude) continue; /* OFD locks show -1 */
        if (want_write && strcmp(type, "WRITE")) continue;
        long long last = strcmp(end, "EOF") ? atoll(end) : -1;
        if (at >= 0 && (at < start || (last >= 0 && at > last))) continue;
        found = pid;
    }
    fclose(f);
    return found;
}

int tfc_store_lock_holder(const char *path, int exclude_pid)
{
    struct stat sd, ss;
    size_t len = strlen(path);
    char *shm = malloc(len + 5);
    int pid = 0;
    if (!shm) return 0;
    memcpy(shm, path, len);
    memcpy(shm + len, "-shm", 5);
    /* WAL mode: the write lock is byte 120 of the -shm file (SQLite's WAL_WRITE_LOCK) */
    if (stat(shm, &ss) == 0) pid = proc_locks_holder(ss.st_dev, ss.st_ino, 120, 1, exclude_pid);
    /* exclusive locking mode, or a rollback journal: a write lock on the database file */
    if (!pid && stat(path, &sd) == 0)
        pid = proc_locks_holder(sd.st_dev, sd.st_ino, -1, 1, exclude_pid);
    /* anyone writing the -shm file (recovery, checkpoint) */
    if (!pid && stat(shm, &ss) == 0)
        pid = proc_locks_holder(ss.st_dev, ss.st_ino, -1, 1, exclude_pid);
    free(shm);
    return pid;
}

/* ---- errors ---------------------------------------------------------------------------------- */

tfc_status tfc_store_sqlfail(const tfc_store *st, sqlite3 *db, int rc, char *msg,
                             const char *fmt, ...)
{
    char what[256], cause[TFC_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int prim = rc & 0xff, err = db ? sqlite3_system_errno(db) : 0;
    const char *sqlmsg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    const char *path = st && st->path ? st->path : "?";
    int io = prim == SQLITE_IOERR || prim == SQLITE_CANTOPEN;
    if (prim == SQLITE_NOTADB)
        snprintf(cause, sizeof cause, "not an SQLite database (%s)", sqlmsg);
    else if (prim == SQLITE_CORRUPT)
        snprintf(cause, sizeof cause, "the file is corrupted or truncated (%s)", sqlmsg);
    else if (prim == SQLITE_FULL || (io && (err == ENOSPC || err == EFBIG || err == EDQUOT)))
        snprintf(cause, sizeof cause, "disk full or file size limit reached (%s%s%s)", sqlmsg,
                 err ? ": " : "", err ? strerror(err) : "");
    else if (prim == SQLITE_READONLY || (io && (err == EROFS || err == EACCES || err == EPERM)))
        snprintf(cause, sizeof cause,
                 "read-only: the file or its file system cannot be written (%s%s%s)", sqlmsg,
                 err ? ": " : "", err ? strerror(err) : "");
    else if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED) {
        int pid = tfc_store_lock_holder(path, (int)getpid());
        if (pid)
            snprintf(cause, sizeof cause, "locked by process %d (%s, after waiting %d ms)", pid,
                     sqlmsg, st ? st->busy_ms : 0);
        else
            snprintf(cause, sizeof cause,
                     "locked by another process, whose pid could not be found (on another host?) "
                     "(%s, after waiting %d ms)", sqlmsg, st ? st->busy_ms : 0);
    } else if (prim == SQLITE_CANTOPEN)
        snprintf(cause, sizeof cause, "cannot open the file (%s%s%s)", sqlmsg, err ? ": " : "",
                 err ? strerror(err) : "");
    else if (prim == SQLITE_IOERR)
        snprintf(cause, sizeof cause, "I/O error (%s%s%s)", sqlmsg, err ? ": " : "",
                 err ? strerror(err) : "");
    else if (prim == SQLITE_NOMEM)
        snprintf(cause, sizeof cause, "out of memory (%s)", sqlmsg);
    else
        snprintf(cause, sizeof cause, "%s", sqlmsg);
    return tfc_fail(msg, TFC_ERR_STORE, "store '%s': %s: %s", path, what, cause);
}

tfc_status tfc_store_check_writable(tfc_store *st, const char *what)
{
    if (st->readonly)
        return tfc_fail(st->msg, TFC_ERR_STORE,
                        "store '%s': %s: the store was opened read-only (TFC_STORE_READONLY)",
                        st->path, what);
    return TFC_OK;
}

/* ---- write transactions ---------------------------------------------------------------------- */

int tfc_store_write_begin(tfc_store *st, sqlite3 *db)
{
    pthread_mutex_lock(&st->write_mu);
    if (db == st->db) pthread_mutex_lock(&st->db_mu);
    int rc = tfc_store_exec(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) {
        if (db == st->db) pthread_mutex_unlock(&st->db_mu);
        pthread_mutex_unlock(&st->write_mu);
    }
    return rc;
}

int tfc_store_write_commit(tfc_store *st, sqlite3 *db)
{
    int rc = tfc_store_exec(db, "COMMIT");
    if (rc != SQLITE_OK) return rc; /* still in the transaction: the caller rolls back */
    __atomic_add_fetch(&st->write_txns, 1, __ATOMIC_RELAXED);
    if (db == st->db) pthread_mutex_unlock(&st->db_mu);
    pthread_mutex_unlock(&st->write_mu);
    return rc;
}

void tfc_store_write_rollback(tfc_store *st, sqlite3 *db)
{
    if (!sqlite3_get_autocommit(db)) tfc_store_exec(db, "ROLLBACK");
    if (db == st->db) pthread_mutex_unlock(&st->db_mu);
    pthread_mutex_unlock(&st->write_mu);
}

/* ---- shapes as text -------------------------------------------------------------------------- */

void tfc_store_shape_text(const tfc_shape *s, char *buf, size_t len)
{
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s->rank && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ",%lld" : "%lld", (long long)s->dims[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
}

int tfc_store_shape_parse(const char *text, tfc_shape *s)
{
    const char *p = text;
    memset(s, 0, sizeof *s);
    if (!p || *p++ != '[') return -1;
    while (*p == ' ') p++;
    if (*p == ']') return p[1] ? -1 : 0;
    for (;;) {
        char *end;
        errno = 0;
        long long d = strtoll(p, &end, 10);
        if (end == p || errno || s->rank >= TFC_MAX_RANK || d < -1) return -1;
        s->dims[s->rank++] = d;
        p = end;
        while (*p == ' ') p++;
        if (*p == ']') return p[1] ? -1 : 0;
        if (*p++ != ',') return -1;
    }
}
