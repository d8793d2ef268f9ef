/* trace.c: Chrome traces of profiled runs, for TFC_TRACE (a file per session, every run) and
 * tfc_session_write_trace (the last run). The file is Chrome's "JSON array format": '[', then
 * one event per line, each written with the ",\n" that separates it from the one before, and
 * "\n]\n" when the session ends. Between two writes the file is the whole array but its ']',
 * which chrome://tracing and ui.perfetto.dev open as it is (the catapult importer appends the
 * missing ']'), so a process that crashes or is killed leaves a trace that opens.
 *
 * A session's trace file is held under an open-file-description lock (F_OFD_SETLK) while the
 * session lives: a second session, in this process or another, is refused with the holder's
 * process and session (read from the file's first event) instead of the two interleaving.
 * The kernel drops the lock when the holder dies, so a crash leaves no stale lock. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "session_priv.h"

#ifdef F_OFD_SETLK
#define TRACE_LOCK F_OFD_SETLK /* per open file: two sessions of one process conflict too */
#else
#define TRACE_LOCK F_SETLK     /* per process: only other processes are seen */
#endif

/* ---- the path: %p and %s --------------------------------------------------------------- */

/* TFC_TRACE with %p replaced by the process id, %s by the session number and %% by '%'. */
static tfc_status expand_path(const char *pattern, unsigned session, char **out, char *msg)
{
    size_t n_pct = 0, len = strlen(pattern);
    for (const char *p = pattern; *p; p++) n_pct += *p == '%';
    char *path = malloc(len + 24 * n_pct + 1); /* each %x grows by at most 20 digits */
    if (!path) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "TFC_TRACE: no memory");
    char *q = path;
    for (const char *p = pattern; *p; p++) {
        if (*p != '%') {
            *q++ = *p;
            continue;
        }
        char c = *++p;
        if (c == 'p') {
            q += sprintf(q, "%ld", (long)getpid());
        } else if (c == 's') {
            q += sprintf(q, "%u", session);
        } else if (c == '%') {
            *q++ = '%';
        } else {
            free(path);
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "TFC_TRACE '%s': '%%%.1s' is not a pattern (%%p: the process id, "
                            "%%s: the session number, %%%%: a percent sign)", pattern, p);
        }
    }
    *q = 0;
    *out = path;
    return TFC_OK;
}

/* ---- claiming a file ------------------------------------------------------------------- */

/* Who holds path, from its first event (trace_header): "session 2 of process 4321". */
static void describe_holder(const char *path, char *out, size_t size)
{
    char head[1024] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, head, sizeof head - 1) : -1;
    if (fd >= 0) close(fd);
    const char *p = n > 0 ? strstr(head, "\"tfc_pid\":") : NULL;
    const char *s = n > 0 ? strstr(head, "\"tfc_session\":") : NULL;
    long pid = p ? strtol(p + 10, NULL, 10) : 0;
    unsigned long session = s ? strtoul(s + 14, NULL, 10) : 0;
    if (!pid || !session)
        snprintf(out, size, "another session (it has not written its first event yet)");
    else if (pid == (long)getpid())
        snprintf(out, size, "session %lu of this process", session);
    else
        snprintf(out, size, "session %lu of process %ld", session, pid);
}

/* Opens path for writing under an exclusive lock, then empties it (only once the lock is
 * ours: a refused session must not truncate the holder's trace). what names the caller in
 * messages. Files that take no lock (some NFS mounts, pipes) are written unlocked. */
static tfc_status claim(const char *path, const char *what, int *out, char *msg)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s: cannot create '%s': %s", what,
                        path, strerror(errno));
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET}; /* the whole file */
    if (fcntl(fd, TRACE_LOCK, &lk) == -1 && (errno == EAGAIN || errno == EACCES)) {
        char holder[96];
        describe_holder(path, holder, sizeof holder);
        close(fd);
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "%s: '%s' is being written by %s; give each session its own file "
                        "(in TFC_TRACE, %%s stands for the session number, %%p for the "
                        "process id)", what, path, holder);
    }
    struct stat sb; /* a regular file is emptied; a pipe or a terminal is written as it is */
    if (!fstat(fd, &sb) && S_ISREG(sb.st_mode) && ftruncate(fd, 0)) {
        tfc_status st = tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s: cannot empty '%s': %s",
                                 what, path, strerror(errno));
        close(fd);
        return st;
    }
    *out = fd;
    return TFC_OK;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- the events ------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* '[', the process (its pid and session number also tell a refused session who holds the
 * file) and one named row per StarPU worker. */
static void trace_header(FILE *f, unsigned session)
{
    long pid = (long)getpid();
    fprintf(f, "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":0,\"args\":"
               "{\"name\":\"tfc-starpu session %u\",\"tfc_pid\":%ld,\"tfc_session\":%u}}",
            pid, session, pid, session);
    int n = (int)starpu_worker_get_count();
    for (int w = 0; w < n; w++) {
        char name[64];
        starpu_worker_get_name(w, name, sizeof name);
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%d,\"args\":"
                   "{\"name\":", pid, w);
        json_str(f, name);
        fputs("}}", f);
    }
}

/* Complete events of category cat ("task", or "step": one inside a chain task, nested in its
 * event on the same thread). */
static void record_events(FILE *f, const tfc_task_record *recs, int n, const char *cat)
{
    long pid = (long)getpid();
    for (int i = 0; i < n; i++) {
        const tfc_task_record *t = &recs[i];
        fputs(",\n{\"name\":", f);
        json_str(f, t->node);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%ld,\"tid\":%d,\"ts\":%.3f,"
                   "\"dur\":%.3f,\"args\":{\"op\":", cat, pid, t->worker, t->start_us,
                t->end_us - t->start_us);
        json_str(f, t->op);
        if (isfinite(t->predicted_us))
            fprintf(f, ",\"predicted_us\":%.3f}}", t->predicted_us);
        else
            fputs(",\"predicted_us\":null}}", f);
    }
}

static void trace_events(FILE *f, const tfc_run_summary *sm)
{
    record_events(f, sm->tasks, sm->n_tasks, "task");
    record_events(f, sm->steps, sm->n_steps, "step");
}

static const char trace_end[] = "\n]\n";

/* Appends text to the session's trace in one write, so a process killed between runs leaves
 * whole events only. A failed write is cut off again and ends the trace (one line on stderr:
 * the run itself did not fail). */
static void trace_append(struct tfc_trace *t, const char *text, size_t n)
{
    if (t->fd < 0) return;
    if (text && !write_all(t->fd, text, n)) {
        t->len += (off_t)n;
        return;
    }
    int err = text ? errno : ENOMEM;
    if (ftruncate(t->fd, t->len)) { /* nothing more to do: the file keeps a partial event */ }
    fprintf(stderr, "tfc: TFC_TRACE '%s': %s; session %u traces no more runs\n", t->path,
            strerror(err), t->session);
    close(t->fd);
    t->fd = -1;
}

/* ---- what sched/report.c calls ---------------------------------------------------------- */

tfc_status tfc_trace_open(struct tfc_trace *t, const char *pattern, unsigned session, char *msg)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    t->session = session;
    tfc_status st = expand_path(pattern, session, &t->path, msg);
    if (!st) st = claim(t->path, "TFC_TRACE", &t->fd, msg);
    if (st) {
        free(t->path);
        t->path = NULL;
        return st;
    }
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (f) {
        trace_header(f, session);
        fclose(f);
    }
    trace_append(t, f ? text : NULL, n);
    free(text);
    return TFC_OK;
}

void tfc_trace_run(struct tfc_trace *t, const tfc_run_summary *sm)
{
    if (t->fd < 0) return;
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (f) {
        trace_events(f, sm);
        fclose(f);
    }
    trace_append(t, f ? text : NULL, n);
    free(text);
}

void tfc_trace_close(struct tfc_trace *t)
{
    if (t->fd >= 0) {
        trace_append(t, trace_end, sizeof trace_end - 1);
        if (t->fd >= 0) close(t->fd); /* drops the lock */
    }
    free(t->path);
    memset(t, 0, sizeof *t);
    t->fd = -1;
}

tfc_status tfc_trace_write_file(const char *path, unsigned session, const tfc_run_summary *sm,
                                char *msg)
{
    int fd;
    tfc_status st = claim(path, "write_trace", &fd, msg);
    if (st) return st;
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) {
        close(fd);
        return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "write_trace: no memory for '%s'", path);
    }
    trace_header(f, session);
    trace_events(f, sm);
    fputs(trace_end, f);
    fclose(f);
    int bad = write_all(fd, text, n);
    bad = close(fd) || bad;
    if (bad)
        st = tfc_fail(msg, TFC_ERR_RUNTIME, "write_trace: writing '%s': %s", path,
                      strerror(errno));
    free(text);
    return st;
}
