/* lock.c: one training writer per store, across processes and hosts. A training writer (a
 * store opened with TFC_STORE_TRAINER, or one that takes a checkpoint) holds an OS lock that
 * dies with its process, an open-file-description fcntl lock on a byte of the database file
 * that SQLite never locks, and records itself in the store's meta table (trainer_pid,
 * trainer_host, trainer_boot, trainer_since) in one write transaction. The record names the
 * holder in every refusal; the OS lock tells a live holder from a killed one. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lock.h"
#include "store_internal.h"

/* SQLite locks bytes 0x40000000 to 0x400001FF of a database file (its pending, reserved and
 * shared bytes). The training lock is one byte 1 KiB above them: no SQLite lock, in any
 * locking mode or page size, ever covers it, and fcntl locks beyond the end of a file are
 * allowed (locally, over NFS and on Lustre). */
#define TRAIN_LOCK_BYTE ((off_t)0x40000000 + 1024)

/* ---- the process's open store files ---------------------------------------------------------- */

/* A database file that stores of this process have open. POSIX locks belong to the process
 * and close() of any descriptor on the file drops them all, SQLite's included (SQLite's own
 * "close() problem"), so our descriptors wait here until the last store on the file closes. */
struct lock_file {
    dev_t dev;
    ino_t ino;
    int refs;                /* stores of this process open on the file */
    int trainer;             /* 1: one of them holds the training lock */
    int n_fds, cap_fds;
    int *fds;                /* descriptors of closed stores, unlocked, kept until refs is 0 */
    struct lock_file *next;
};

struct store_lock {
    pthread_mutex_t mu;      /* one take or release at a time (checkpoints from threads) */
    struct lock_file *file;  /* NULL when the file could not be registered */
    int fd;                  /* our descriptor on the database file; -1 until a lock is tried */
    int held;                /* 1: this store holds the training lock */
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct lock_file *table;
static int os_locks_off;     /* tfc_store_set_os_locks(0): as on a file system without locks */

void tfc_store_set_os_locks(int on)
{
    __atomic_store_n(&os_locks_off, !on, __ATOMIC_RELAXED);
}

tfc_status tfc_store_lock_attach(tfc_store *st)
{
    struct store_lock *l = calloc(1, sizeof *l);
    if (!l) return tfc_fail(st->msg, TFC_ERR_OUT_OF_MEMORY, "store '%s': no memory", st->path);
    pthread_mutex_init(&l->mu, NULL);
    l->fd = -1;
    st->lock = l;
    struct stat sb;
    if (stat(st->path, &sb)) return TFC_OK; /* unregistered: a descriptor is closed at detach */
    pthread_mutex_lock(&table_mu);
    struct lock_file *f = table;
    while (f && (f->dev != sb.st_dev || f->ino != sb.st_ino)) f = f->next;
    if (!f && (f = calloc(1, sizeof *f))) {
        f->dev = sb.st_dev;
        f->ino = sb.st_ino;
        f->next = table;
        table = f;
    }
    if (f) f->refs++;
    l->file = f;
    pthread_mutex_unlock(&table_mu);
    return TFC_OK;
}

static void os_unlock(int fd)
{
    struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = TRAIN_LOCK_BYTE,
                       .l_len = 1};
    if (fcntl(fd, F_OFD_SETLK, &fl) && errno == EINVAL) fcntl(fd, F_SETLK, &fl);
}

/* Under table_mu: parks fd with the file's entry (1), or says it could not (0). */
static int park_locked(struct lock_file *f, int fd)
{
    if (f->n_fds == f->cap_fds) {
        int cap = f->cap_fds ? 2 * f->cap_fds : 4;
        int *a = realloc(f->fds, (size_t)cap * sizeof *a);
        if (!a) return 0;
        f->fds = a;
        f->cap_fds = cap;
    }
    f->fds[f->n_fds++] = fd;
    return 1;
}

void tfc_store_lock_detach(tfc_store *st)
{
    struct store_lock *l = st->lock;
    if (!l) return;
    st->lock = NULL;
    if (l->held && l->fd >= 0) os_unlock(l->fd); /* a parked descriptor holds nothing */
    pthread_mutex_lock(&table_mu);
    struct lock_file *f = l->file;
    if (f && l->held) f->trainer = 0;
    if (f && l->fd >= 0 && park_locked(f, l->fd)) l->fd = -1;
    if (f && --f->refs == 0) { /* no store of ours uses the file: nothing of SQLite's to drop */
        for (int i = 0; i < f->n_fds; i++) close(f->fds[i]);
        struct lock_file **p = &table;
        while (*p != f) p = &(*p)->next;
        *p = f->next;
        free(f->fds);
        free(f);
    }
    pthread_mutex_unlock(&table_mu);
    if (l->fd >= 0) close(l->fd); /* unregistered, or no memory to park it */
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* ---- the OS lock ----------------------------------------------------------------------------- */

enum os_lock { OS_TAKEN, OS_BUSY, OS_UNKNOWN };

/* Tries the OS lock without waiting. An OFD lock conflicts with every other open of the file,
 * in this process too; where the kernel has none (EINVAL) a process-wide POSIX lock stands
 * in, and the table's trainer flag covers this process. *err: errno of an OS_UNKNOWN. */
static enum os_lock os_lock_take(tfc_store *st, struct store_lock *l, int *err)
{
    *err = 0;
    if (__atomic_load_n(&os_locks_off, __ATOMIC_RELAXED)) return OS_UNKNOWN;
    if (l->fd < 0 && l->file) { /* reuse a parked descriptor of a closed store */
        pthread_mutex_lock(&table_mu);
        if (l->file->n_fds > 0) l->fd = l->file->fds[--l->file->n_fds];
        pthread_mutex_unlock(&table_mu);
    }
    if (l->fd < 0) l->fd = open(st->path, O_RDWR | O_CLOEXEC);
    if (l->fd < 0) {
        *err = errno;
        return OS_UNKNOWN;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = TRAIN_LOCK_BYTE,
                       .l_len = 1};
    int rc = fcntl(l->fd, F_OFD_SETLK, &fl);
    if (rc && errno == EINVAL) rc = fcntl(l->fd, F_SETLK, &fl);
    if (!rc) return OS_TAKEN;
    if (errno == EAGAIN || errno == EACCES) return OS_BUSY;
    *err = errno; /* ENOLCK: NFS without a lock manager, ... */
    return OS_UNKNOWN;
}

/* ---- the record ------------------------------------------------------------------------------ */

struct holder {
    int present;             /* a trainer_pid row exists */
    long long pid;
    char host[256];
    char boot[64];           /* the host's boot id when it was taken ("" unknown) */
    double since;            /* seconds since the epoch */
};

static void this_host(char *host, size_t len)
{
    if (gethostname(host, len)) snprintf(host, len, "?");
    host[len - 1] = 0;
}

/* /proc/sys/kernel/random/boot_id: a record from before the host's last start is stale. */
static void this_boot(char *boot, size_t len)
{
    boot[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (!fgets(boot, (int)len, f)) boot[0] = 0;
    fclose(f);
    boot[strcspn(boot, "\n")] = 0;
}

static int holder_read(sqlite3 *db, struct holder *h)
{
    memset(h, 0, sizeof *h);
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(db, "SELECT key, value FROM meta WHERE key GLOB 'trainer_*'",
                                -1, &q, NULL);
    if (rc) return rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(q, 0);
        const char *v = (const char *)sqlite3_column_text(q, 1);
        if (!k) continue;
        if (!strcmp(k, "trainer_pid")) {
            h->pid = sqlite3_column_int64(q, 1);
            h->present = 1;
        } else if (!strcmp(k, "trainer_host"))
            snprintf(h->host, sizeof h->host, "%s", v ? v : "");
        else if (!strcmp(k, "trainer_boot"))
            snprintf(h->boot, sizeof h->boot, "%s", v ? v : "");
        else if (!strcmp(k, "trainer_since"))
            h->since = sqlite3_column_double(q, 1);
    }
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void holder_text(const struct holder *h, char *buf, size_t len)
{
    char when[64] = "";
    time_t t = (time_t)h->since;
    struct tm tm;
    if (h->since > 0 && gmtime_r(&t, &tm))
        strftime(when, sizeof when, " since %Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(buf, len, "process %lld on host '%s'%s", h->pid, h->host, when);
}

int tfc_store_train_holder(sqlite3 *db, char *who, size_t len)
{
    struct holder h;
    if (holder_read(db, &h) != SQLITE_OK || !h.present) return -1;
    holder_text(&h, who, len);
    return 0;
}

/* Whether a recorded holder may still run, judged without the OS lock: on this host (same
 * name and boot) a process that exists; on another host we cannot tell, so yes. */
static int holder_may_run(const struct holder *h, int *other_host)
{
    char host[256], boot[64];
    this_host(host, sizeof host);
    this_boot(boot, sizeof boot);
    *other_host = strcmp(h->host, host) != 0;
    if (*other_host) return 1;
    if (*h->boot && *boot && strcmp(h->boot, boot)) return 0; /* recorded before a restart */
    if (h->pid <= 0 || h->pid == (long long)getpid()) return 0; /* ours: the table says not held */
    return kill((pid_t)h->pid, 0) == 0 || errno == EPERM;
}

static int holder_write(sqlite3 *db)
{
    char host[256], boot[64];
    this_host(host, sizeof host);
    this_boot(boot, sizeof boot);
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES "
                                    "('trainer_pid', ?1), ('trainer_host', ?2), "
                                    "('trainer_boot', ?3), ('trainer_since', ?4)",
                                -1, &q, NULL);
    if (rc) return rc;
    sqlite3_bind_int64(q, 1, (sqlite3_int64)getpid());
    sqlite3_bind_text(q, 2, host, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 3, boot, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(q, 4, tfc_store_now());
    rc = sqlite3_step(q);
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ---- taking and releasing -------------------------------------------------------------------- */

static tfc_status refuse(tfc_store *st, const struct holder *h, const char *why)
{
    char who[512];
    if (!h->present)
        return tfc_fail(st->msg, TFC_ERR_STORE,
                        "store '%s': already being trained by another process (it holds the "
                        "store's training lock and has not recorded itself yet): one training "
                        "writer per store; reading needs no lock", st->path);
    holder_text(h, who, sizeof who);
    return tfc_fail(st->msg, TFC_ERR_STORE,
                    "store '%s': already being trained by %s: one training writer per store%s",
                    st->path, who, why);
}

/* The record, read on the caller's connection. */
static int holder_read_locked(tfc_store *st, struct holder *h)
{
    pthread_mutex_lock(&st->db_mu);
    int rc = holder_read(st->db, h);
    pthread_mutex_unlock(&st->db_mu);
    return rc;
}

/* With the OS lock taken (or unknown): in one write transaction, reads the record, refuses a
 * holder that may still run when no OS lock could say otherwise, and writes ours. */
static tfc_status record_take(tfc_store *st, enum os_lock os, int err)
{
    struct holder h;
    int rc = tfc_store_write_begin(st, st->db);
    if (rc) return tfc_store_sqlfail(st, st->db, rc, st->msg, "taking the training lock");
    rc = holder_read(st->db, &h);
    int other_host = 0;
    if (rc == SQLITE_OK && os == OS_UNKNOWN && h.present && holder_may_run(&h, &other_host)) {
        tfc_store_write_rollback(st, st->db);
        char why[TFC_MSG_LEN / 2];
        if (other_host)
            snprintf(why, sizeof why,
                     "; the file system gives no lock to tell whether it still runs (%s): if it "
                     "has ended, remove its record: sqlite3 \"%s\" \"DELETE FROM meta WHERE "
                     "key GLOB 'trainer_*'\"", err ? strerror(err) : "OS locks off", st->path);
        else
            snprintf(why, sizeof why, " (it is still running on this host)");
        return refuse(st, &h, why);
    }
    if (rc == SQLITE_OK) rc = holder_write(st->db);
    if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, st->db);
    if (rc) {
        tfc_status status = tfc_store_sqlfail(st, st->db, rc, st->msg, "taking the training lock");
        tfc_store_write_rollback(st, st->db);
        return status;
    }
    /* into the main file: a process that cannot open the store (exclusive locking mode) reads
     * the record there, without locks, to name the holder */
    pthread_mutex_lock(&st->db_mu);
    tfc_store_exec(st->db, "PRAGMA wal_checkpoint(PASSIVE)");
    pthread_mutex_unlock(&st->db_mu);
    return TFC_OK;
}

tfc_status tfc_store_train_lock(tfc_store *st)
{
    struct store_lock *l = st->lock;
    tfc_status status = tfc_store_check_writable(st, "taking the training lock");
    if (status || !l) return status;
    pthread_mutex_lock(&l->mu);
    if (l->held) {
        pthread_mutex_unlock(&l->mu);
        return TFC_OK;
    }
    int mine = 0; /* another store of this process trains the file */
    pthread_mutex_lock(&table_mu);
    if (l->file) mine = l->file->trainer;
    pthread_mutex_unlock(&table_mu);
    int err = 0;
    enum os_lock os = mine ? OS_BUSY : os_lock_take(st, l, &err);
    if (mine)
        status = tfc_fail(st->msg, TFC_ERR_STORE,
                          "store '%s': already being trained by this process (pid %d), through "
                          "another open store: one training writer per store", st->path,
                          (int)getpid());
    else if (os == OS_BUSY) {
        struct holder h;
        int rc = holder_read_locked(st, &h), other_host = 0;
        /* a record left by a killed writer on this host is not the one holding the lock */
        if (!rc && h.present && !holder_may_run(&h, &other_host)) h.present = 0;
        status = rc ? tfc_store_sqlfail(st, st->db, rc, st->msg, "reading the training lock")
                    : refuse(st, &h, "; reading needs no lock");
    } else {
        status = record_take(st, os, err);
        if (status && os == OS_TAKEN) os_unlock(l->fd);
    }
    if (!status) {
        l->held = 1;
        pthread_mutex_lock(&table_mu);
        if (l->file) l->file->trainer = 1;
        pthread_mutex_unlock(&table_mu);
    }
    pthread_mutex_unlock(&l->mu);
    return status;
}

void tfc_store_train_unlock(tfc_store *st)
{
    struct store_lock *l = st->lock;
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    if (!l->held) {
        pthread_mutex_unlock(&l->mu);
        return;
    }
    /* the record goes first, while the OS lock still keeps others out; when it cannot be
     * deleted (disk full) the next writer finds the OS lock free and takes it over */
    char host[256];
    this_host(host, sizeof host);
    sqlite3_stmt *q = NULL;
    int rc = tfc_store_write_begin(st, st->db);
    if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v2(st->db, "DELETE FROM meta WHERE key GLOB 'trainer_*' AND "
                                        "(SELECT value FROM meta WHERE key = 'trainer_pid') = ?1 "
                                        "AND (SELECT value FROM meta WHERE key = 'trainer_host') "
                                        "= ?2", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(q, 1, (sqlite3_int64)getpid());
            sqlite3_bind_text(q, 2, host, -1, SQLITE_TRANSIENT);
            rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        }
        sqlite3_finalize(q);
        if (rc == SQLITE_OK) rc = tfc_store_write_commit(st, st->db);
        if (rc) tfc_store_write_rollback(st, st->db);
    }
    if (l->fd >= 0) os_unlock(l->fd);
    l->held = 0;
    pthread_mutex_lock(&table_mu);
    if (l->file) l->file->trainer = 0;
    pthread_mutex_unlock(&table_mu);
    pthread_mutex_unlock(&l->mu);
}
