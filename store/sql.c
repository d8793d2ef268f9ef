/* sql.c: the SQLite helpers of the store's files: statements, translating SQLite's result codes
 * into TFC_ERR_STORE messages that name the file and the cause (and the process that holds a
 * lock on it), write transactions, and shapes as text. They depend on no other store file, so
 * store.c (opening) and schema.c (migrations) both use them without a circle. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* The file size limit (RLIMIT_FSIZE, `ulimit -f`) in bytes when the store or its WAL is within
 * 64 KiB of it (a write that crossed it), else 0. */
static unsigned long long fsize_limit_reached(const char *path)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY) return 0;
    size_t len = strlen(path);
    char *wal = malloc(len + 5);
    struct stat sb;
    int near = 0;
    if (!stat(path, &sb)) near = (unsigned long long)sb.st_size + 65536 >= rl.rlim_cur;
    if (wal && !near) {
        memcpy(wal, path, len);
        memcpy(wal + len, "-wal", 5);
        if (!stat(wal, &sb)) near = (unsigned long long)sb.st_size + 65536 >= rl.rlim_cur;
    }
    free(wal);
    return near ? (unsigned long long)rl.rlim_cur : 0;
}

/* A full disk, the file size limit or a quota, in words a user understands; 0 when the
 * failure is none of those. */
static int space_cause(const char *path, int prim, int err, const char *sqlmsg, char *cause,
                       size_t len)
{
    int io = prim == SQLITE_IOERR || prim == SQLITE_FULL;
    unsigned long long limit = io && (err == EFBIG || !err) ? fsize_limit_reached(path) : 0;
    const char *sys = err ? strerror(err) : "";
    if (err == EFBIG || limit)
        snprintf(cause, len, "file too large: the process's file size limit (RLIMIT_FSIZE, "
                 "ulimit -f) is %llu bytes (%s%s%s)", limit, sqlmsg, err ? ": " : "", sys);
    else if (prim == SQLITE_FULL || (io && err == ENOSPC))
        snprintf(cause, len, "disk full: no space left on the file system (%s%s%s)", sqlmsg,
                 err ? ": " : "", sys);
    else if (io && err == EDQUOT)
        snprintf(cause, len, "disk quota exceeded (%s: %s)", sqlmsg, sys);
    else
        return 0;
    return 1;
}

tfc_status tfc_store_sqlfail(const tfc_store *st, sqlite3 *db, int rc, char *msg,
                             const char *fmt, ...)
{
    int errno_at_entry = errno;
    char what[256], cause[TFC_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int prim = rc & 0xff, err = db ? sqlite3_system_errno(db) : 0;
    /* SQLite 3.40 can leave its system errno at 0 after a failed write (IOERR_WRITE under
     * RLIMIT_FSIZE): the write's errno is still this thread's, and these values are only ever
     * set by a failed write */
    if (!err && prim == SQLITE_IOERR &&
        (errno_at_entry == EFBIG || errno_at_entry == ENOSPC || errno_at_entry == EDQUOT ||
         errno_at_entry == EROFS))
        err = errno_at_entry;
    const char *sqlmsg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    const char *path = st && st->path ? st->path : "?";
    int io = prim == SQLITE_IOERR || prim == SQLITE_CANTOPEN;
    if (prim == SQLITE_NOTADB)
        snprintf(cause, sizeof cause, "not an SQLite database (%s)", sqlmsg);
    else if (prim == SQLITE_CORRUPT)
        snprintf(cause, sizeof cause, "the file is corrupted or truncated (%s)", sqlmsg);
    else if (space_cause(path, prim, err, sqlmsg, cause, sizeof cause)) {
        /* cause written */
    } else if (prim == SQLITE_READONLY || (io && (err == EROFS || err == EACCES || err == EPERM)))
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
