/* test_killnine.c: fault tolerance, proven. Real training runs in a separate program
 * (tests/ft_trainer, started with posix_spawn: this process never starts StarPU, and no fork
 * of a StarPU process ever runs), which this test kills with SIGKILL at least MIN_KILLS times
 * at moments drawn from a logged seed (TFC_KILL_SEED=N replays the schedule; the timing of
 * the machine still varies), at least MIN_TXN_KILLS of them while a checkpoint transaction is
 * open. ft_trainer announces on a pipe when its writer thread has begun a checkpoint's
 * transaction (B), is about to commit it (W) and has committed it (C) (the store's test hook,
 * tfc_store_set_txn_hook), so that kills can be aimed at those moments.
 *
 * After each kill, on a copy of the store's files as the killed process left them (the
 * original goes on to the next run untouched, so that it recovers the hot WAL itself):
 *   - the store opens and passes PRAGMA integrity_check and foreign_key_check;
 *   - the latest checkpoint is the last one announced as committed, or the one whose
 *     transaction was open at the kill when the kill came after its COMMIT but before the
 *     announcement (the hook runs after COMMIT returns), and no other: a committed checkpoint
 *     is never lost, an uncommitted one never appears; retention kept at most KEEP;
 *   - training from that copy to the target without kills (the uninterrupted run from that
 *     checkpoint) gives final variables identical, bit for bit, to an uninterrupted run from
 *     scratch.
 *   - metrics are in step with checkpoints: every step up to the latest checkpoint has its
 *     metrics (a checkpoint commits those of its steps), no step has a metric twice, and the
 *     rows after the step the killed run resumed from are all that run's (a resume discards
 *     what a crashed run logged past its checkpoint; ft_trainer's metric batches of 7 values
 *     also commit between checkpoints, so there is something to discard).
 * The next run on the killed store must resume from that same checkpoint (its R line), and
 * when a chain of killed-and-resumed runs reaches the target its final variables must equal,
 * bit for bit, those of every uninterrupted run from a checkpoint the chain passed through,
 * and its store must hold each metric of steps 1 to the target exactly once.
 * One CPU worker (STARPU_NCPU=1) and fixed seeds make training deterministic.
 *
 * Then the same for a stored CNN with dropout (ft_trainer --model dropout: a convolution with
 * ReLU and max pooling, then dense layers with dropout keyed by the global step, trained from
 * the graph stored in its model store): killed with
 * SIGKILL up to DROPOUT_KILLS times at drawn moments and resumed each time, it ends with variables
 * and per-step dropout masks (ft_trainer's probes) identical, bit for bit, to an uninterrupted
 * run; and the masks of consecutive steps differ (a mask that ignored the step would pass the
 * bit-exact comparison but not this).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"
#include "../store/store_testing.h"

extern char **environ;

#define TARGET 1500        /* training steps of a complete run (about 0.75 s on one core) */
#define EVERY 10           /* a checkpoint every EVERY steps */
#define KEEP 3             /* retention: the newest KEEP checkpoints */
#define MIN_KILLS 20
#define MIN_TXN_KILLS 5
#define MAX_ATTEMPTS 120
#define CHILD_FD 3         /* the announcement pipe in the child */
#define RUN_TIMEOUT_S 60.0 /* a run that takes longer has hung */
#define MAX_CHAIN 256
#define DROPOUT_KILLS 4    /* kills of the dropout model's chain (at least 2 land) */
#define METRIC_BATCH "7"   /* ft_trainer's metric batches: commits between checkpoints too */

static char tmpdir[PATH_MAX / 2];
static char trainer[PATH_MAX];
static char ref_out[PATH_MAX]; /* final variables of an uninterrupted run from scratch */
static int have_ref;
static const char *model; /* ft_trainer's --model, or NULL for its plain MLP */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t rng_range(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1));
}

/* buf (PATH_MAX) = tmpdir/name, or tmpdir/name<k> when k >= 0 */
static char *tpath(char *buf, const char *name, int k)
{
    if (k >= 0)
        snprintf(buf, PATH_MAX, "%s/%s%d", tmpdir, name, k);
    else
        snprintf(buf, PATH_MAX, "%s/%s", tmpdir, name);
    return buf;
}

static void remove_store(const char *path)
{
    char p[PATH_MAX + 8];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-journal", path);
    unlink(p);
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in) return errno == ENOENT ? 1 : -1;
    FILE *out = fopen(to, "wb");
    if (!out) {
        fclose(in);
        return -1;
    }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (ferror(in)) rc = -1;
    fclose(in);
    if (fclose(out)) rc = -1;
    return rc;
}

/* Copies the database and its -wal and -shm files as they are (those that exist). 1 when
 * the database does not exist. */
static int copy_store(const char *from, const char *to)
{
    remove_store(to);
    int rc = copy_file(from, to);
    if (rc) return rc;
    const char *suffix[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        char a[PATH_MAX + 16], b[PATH_MAX + 16];
        snprintf(a, sizeof a, "%s%s", from, suffix[i]);
        snprintf(b, sizeof b, "%s%s", to, suffix[i]);
        if (copy_file(a, b) < 0) return -1;
    }
    return 0;
}

/* ---- a run of ft_trainer ---------------------------------------------------------------- */

struct run {
    pid_t pid;
    int fd;          /* our end of the announcement pipe */
    char buf[4096];
    size_t len;
    int eof, bad;    /* bad: a line out of protocol (described in why) */
    char why[256];
    int have_r, have_c, open, done;
    int64_t r_step, last_c, open_step, done_step;
    int n_b, n_w;    /* B and W lines so far */
    int exit_code;   /* after reap: the exit status, or 128 + signal */
};

static int spawn_trainer(struct run *r, const char *store, const char *out, long hold_us)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    int p[2];
    if (pipe2(p, O_CLOEXEC)) return -1;
    /* the child's end must not already be CHILD_FD (adddup2 onto itself keeps O_CLOEXEC) */
    int w = fcntl(p[1], F_DUPFD_CLOEXEC, CHILD_FD + 1);
    close(p[1]);
    if (w < 0) {
        close(p[0]);
        return -1;
    }
    char target[32], fd[16], hold[32];
    snprintf(target, sizeof target, "%d", TARGET);
    snprintf(fd, sizeof fd, "%d", CHILD_FD);
    snprintf(hold, sizeof hold, "%ld", hold_us);
    char every[16], keep[16];
    snprintf(every, sizeof every, "%d", EVERY);
    snprintf(keep, sizeof keep, "%d", KEEP);
    char *argv[] = {"ft_trainer", (char *)store, target, (char *)out, "--fd", fd,
                    "--every", every, "--keep", keep, "--hold-us", hold,
                    "--metric-batch", METRIC_BATCH, model ? "--model" : NULL,
                    (char *)model, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, w, CHILD_FD);
    /* posix_spawn execs at once: nothing of this process runs in the child */
    int rc = posix_spawn(&r->pid, trainer, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(w);
    if (rc) {
        close(p[0]);
        errno = rc;
        return -1;
    }
    r->fd = p[0];
    return 0;
}

static void protocol_error(struct run *r, const char *line, const char *what)
{
    if (!r->bad) snprintf(r->why, sizeof r->why, "'%.64s': %s", line, what);
    r->bad = 1;
}

static void on_line(struct run *r, char *line)
{
    char kind;
    long long step;
    if (sscanf(line, "%c %lld", &kind, &step) != 2) return protocol_error(r, line, "unparsable");
    switch (kind) {
    case 'R':
        if (r->have_r) protocol_error(r, line, "a second R");
        r->have_r = 1;
        r->r_step = step;
        break;
    case 'B':
        if (r->open) protocol_error(r, line, "B while another transaction is open");
        if (r->have_c && step <= r->last_c) protocol_error(r, line, "steps go back");
        r->open = 1;
        r->open_step = step;
        r->n_b++;
        break;
    case 'W':
        if (!r->open || step != r->open_step) protocol_error(r, line, "W without its B");
        r->n_w++;
        break;
    case 'C':
        if (!r->open || step != r->open_step) protocol_error(r, line, "C without its B");
        r->open = 0;
        r->have_c = 1;
        r->last_c = step;
        break;
    case 'D':
        r->done = 1;
        r->done_step = step;
        break;
    default: protocol_error(r, line, "unknown announcement");
    }
}

/* Waits up to timeout seconds (< 0: no limit) for announcements and handles the complete
 * lines read, calling stop(r, arg) after each: a nonzero return stops at once (the other lines
 * of that read are handled too, they were announced before any kill). 1 when lines came, 0 on
 * a timeout, -1 at EOF (the child's end closed: it died or exited). */
static int read_lines(struct run *r, double timeout, int (*stop)(struct run *, void *), void *arg)
{
    if (r->eof) return -1;
    struct pollfd pfd = {r->fd, POLLIN, 0};
    struct timespec ts, *tsp = NULL;
    if (timeout >= 0) {
        ts.tv_sec = (time_t)timeout;
        ts.tv_nsec = (long)((timeout - (double)ts.tv_sec) * 1e9);
        tsp = &ts;
    }
    int n = ppoll(&pfd, 1, tsp, NULL);
    if (n < 0 && errno == EINTR) return 0;
    if (n <= 0) return 0;
    ssize_t got = read(r->fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
    if (got < 0 && errno == EINTR) return 0;
    if (got <= 0) {
        r->eof = 1;
        return -1;
    }
    r->len += (size_t)got;
    r->buf[r->len] = 0;
    int stopped = 0;
    char *start = r->buf, *nl;
    while ((nl = strchr(start, '\n'))) {
        *nl = 0;
        on_line(r, start);
        if (stop && !stopped) stopped = stop(r, arg);
        start = nl + 1;
    }
    r->len -= (size_t)(start - r->buf);
    memmove(r->buf, start, r->len);
    return 1;
}

/* Reads to EOF and reaps the child. */
static void finish(struct run *r)
{
    while (read_lines(r, RUN_TIMEOUT_S, NULL, NULL) >= 0) {}
    int status = 0;
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {}
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
}

/* ---- metrics in step with checkpoints --------------------------------------------------------- */

/* Checks the metrics of an open store: "loss" and "run_start" for every step 1..upto, no
 * (step, metric) twice, and (run_start >= 0) every row after run_start logged by the run that
 * started there. 0, or -1 with the problem in msg. */
static int check_metrics(tfc_store *st, int64_t upto, int64_t run_start, char *msg, size_t len)
{
    static const char *names[] = {"loss", "run_start"};
    char sql[256];
    int64_t n = -1;
    for (int i = 0; i < 2 && upto > 0; i++) {
        snprintf(sql, sizeof sql, "SELECT count(DISTINCT step) FROM metrics WHERE name = '%s' "
                 "AND step BETWEEN 1 AND %lld", names[i], (long long)upto);
        if (tfc_store_query_int(st, sql, &n) || n != upto) {
            snprintf(msg, len, "%lld of the %lld steps up to the latest checkpoint have '%s'",
                     (long long)n, (long long)upto, names[i]);
            return -1;
        }
    }
    if (tfc_store_query_int(st, "SELECT count(*) FROM (SELECT 1 FROM metrics "
                                "GROUP BY step, name HAVING count(*) > 1)", &n) || n) {
        snprintf(msg, len, "%lld (step, metric) pairs are stored more than once", (long long)n);
        return -1;
    }
    if (run_start < 0) return 0;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM metrics WHERE name = 'run_start' AND "
             "step > %lld AND value <> %lld", (long long)run_start, (long long)run_start);
    if (tfc_store_query_int(st, sql, &n) || n) {
        snprintf(msg, len, "%lld steps after %lld keep metrics of an earlier run (not discarded "
                 "at the resume)", (long long)n, (long long)run_start);
        return -1;
    }
    return 0;
}

/* The store at path after a run that reached the target from run_start: each metric of steps
 * 1..TARGET exactly once. 0, or -1 with a message. */
static int complete_metrics(const char *path, int64_t run_start, const char *what)
{
    tfc_store *st;
    char msg[256] = "";
    int64_t n = -1;
    if (tfc_store_open(path, 0, &st)) {
        fprintf(stderr, "%s: open: %s\n", what, tfc_errmsg());
        return -1;
    }
    int rc = check_metrics(st, TARGET, run_start, msg, sizeof msg);
    int per_step = model ? 3 : 2; /* the dropout model also logs its probe */
    if (!rc && (tfc_store_query_int(st, "SELECT count(*) FROM metrics", &n) ||
                n != per_step * TARGET)) {
        snprintf(msg, sizeof msg, "%lld metric rows for %d steps of %d metrics", (long long)n,
                 TARGET, per_step);
        rc = -1;
    }
    if (rc) fprintf(stderr, "%s: %s\n", what, msg);
    tfc_store_close(st);
    return rc;
}

/* A run without kills, to the target: 0 when it exits 0 having announced R and D. */
static int run_to_target(const char *store, const char *out, int64_t *r_step)
{
    struct run r;
    if (spawn_trainer(&r, store, out, 0)) {
        fprintf(stderr, "cannot start %s: %s\n", trainer, strerror(errno));
        return -1;
    }
    double t0 = now_s();
    while (read_lines(&r, 1.0, NULL, NULL) >= 0)
        if (now_s() - t0 > RUN_TIMEOUT_S) kill(r.pid, SIGKILL);
    finish(&r);
    if (r_step) *r_step = r.have_r ? r.r_step : -1;
    if (r.exit_code || !r.have_r || !r.done || r.done_step != TARGET || r.bad) {
        fprintf(stderr, "ft_trainer %s: exit %d, R %d, D %d (step %lld)%s%s\n", store,
                r.exit_code, r.have_r, r.done, (long long)r.done_step, r.bad ? ", " : "",
                r.bad ? r.why : "");
        return -1;
    }
    return complete_metrics(store, r.r_step, "metrics after a run to the target");
}

/* ---- comparing final variables ------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* 0 when the two files of variables are identical; else prints the first variable that
 * differs (with the largest difference for float32) and returns -1. */
static int same_variables(const char *a_path, const char *b_path, const char *what)
{
    size_t na = 0, nb = 0;
    char *a = slurp(a_path, &na), *b = slurp(b_path, &nb);
    int rc = 0;
    if (!a || !b) {
        fprintf(stderr, "%s: cannot read %s\n", what, !a ? a_path : b_path);
        rc = -1;
    } else if (na != nb || memcmp(a, b, na)) {
        rc = -1;
        size_t off = 0;
        while (off < na && off < nb) {
            char name[128], dtype[16];
            size_t bytes;
            int hdr = 0;
            if (sscanf(a + off, "%127s %15s %zu%n", name, dtype, &bytes, &hdr) != 3) break;
            size_t data = off + (size_t)hdr + 1;
            if (data + bytes > na || data + bytes > nb) break;
            if (memcmp(a + off, b + off, (size_t)hdr) || memcmp(a + data, b + data, bytes)) {
                double maxdiff = 0;
                if (!strcmp(dtype, "float32"))
                    for (size_t i = 0; i + 4 <= bytes; i += 4) {
                        float x, y;
                        memcpy(&x, a + data + i, 4);
                        memcpy(&y, b + data + i, 4);
                        double d = x > y ? (double)x - y : (double)y - x;
                        if (d > maxdiff) maxdiff = d;
                    }
                fprintf(stderr, "%s: variable %s differs (largest difference %g)\n", what, name,
                        maxdiff);
                break;
            }
            off = data + bytes;
        }
        fprintf(stderr, "%s: %s and %s differ\n", what, a_path, b_path);
    }
    free(a);
    free(b);
    return rc;
}

/* ---- checks on a store --------------------------------------------------------------------- */

struct store_state {
    int opened, integrity_ok, metrics_ok, n;
    int64_t latest;  /* -1: no checkpoint */
    int64_t steps[16];
    char msg[512];
};

/* Opens the store at path (a copy of the killed one) and reads what the checks need; the
 * killed run started from run_start (-1: killed before it said). */
static void inspect(const char *path, int64_t run_start, struct store_state *s)
{
    memset(s, 0, sizeof *s);
    s->latest = -1;
    tfc_store *st = NULL;
    if (tfc_store_open(path, 0, &st)) {
        snprintf(s->msg, sizeof s->msg, "open: %s", tfc_errmsg());
        return;
    }
    s->opened = 1;
    int64_t bad = -1, fk = -1;
    if (tfc_store_query_int(st, "SELECT count(*) FROM pragma_integrity_check "
                                "WHERE integrity_check <> 'ok'", &bad) ||
        tfc_store_query_int(st, "SELECT count(*) FROM pragma_foreign_key_check", &fk))
        snprintf(s->msg, sizeof s->msg, "integrity_check: %s", tfc_store_errmsg(st));
    else if (bad || fk)
        snprintf(s->msg, sizeof s->msg, "integrity_check: %lld problems, foreign_key_check: %lld",
                 (long long)bad, (long long)fk);
    else
        s->integrity_ok = 1;
    tfc_checkpoint_info *list = NULL;
    int n = 0;
    if (tfc_store_list_checkpoints(st, &n, &list)) {
        snprintf(s->msg, sizeof s->msg, "list_checkpoints: %s", tfc_store_errmsg(st));
        s->integrity_ok = 0;
    } else {
        s->n = n;
        for (int i = 0; i < n && i < 16; i++) s->steps[i] = list[i].step;
        if (n) s->latest = list[n - 1].step;
    }
    free(list);
    if (s->integrity_ok)
        s->metrics_ok = !check_metrics(st, s->latest, run_start, s->msg, sizeof s->msg);
    tfc_store_close(st);
}

/* ---- the tests ----------------------------------------------------------------------------- */

static void test_uninterrupted(void)
{
    char store[PATH_MAX], store2[PATH_MAX], out2[PATH_MAX], out3[PATH_MAX];
    tpath(ref_out, "reference.vars", -1);
    tpath(store, "reference.db", -1);
    tpath(store2, "reference2.db", -1);
    tpath(out2, "reference2.vars", -1);
    tpath(out3, "reference3.vars", -1);
    /* the reference: from scratch to the target, without kills */
    remove_store(store);
    double t0 = now_s();
    int64_t r = -2;
    CU_ASSERT_EQUAL_FATAL(run_to_target(store, ref_out, &r), 0);
    CU_ASSERT_EQUAL(r, 0);
    printf("\n    an uninterrupted run of %d steps: %.2f s\n", TARGET, now_s() - t0);
    have_ref = 1;
    /* deterministic: a second run from scratch gives the same bits */
    remove_store(store2);
    CU_ASSERT_EQUAL_FATAL(run_to_target(store2, out2, &r), 0);
    CU_ASSERT_EQUAL(same_variables(ref_out, out2, "second run"), 0);
    /* a store already at the target restores its last checkpoint and ends there */
    CU_ASSERT_EQUAL_FATAL(run_to_target(store, out3, &r), 0);
    CU_ASSERT_EQUAL(r, TARGET);
    CU_ASSERT_EQUAL(same_variables(ref_out, out3, "restored at the target"), 0);
    remove_store(store2);
    remove_store(store);
    unlink(out2);
    unlink(out3);
}

enum kill_mode { KILL_EARLY, KILL_TIMED, KILL_BEGUN, KILL_COMMITTING };
static const char *mode_names[] = {"early", "timed", "begun", "committing"};

struct plan {
    enum kill_mode mode;
    double delay;  /* s: after the spawn (early), R (timed), or the n-th B or W */
    int nth;       /* begun, committing */
    long hold_us;  /* committing: the child holds the transaction open this long after W */
    double armed;  /* when the trigger was seen (0: not yet) */
};

static int trigger(struct run *r, void *arg)
{
    struct plan *p = arg;
    if (p->armed) return 1;
    if ((p->mode == KILL_BEGUN && r->n_b >= p->nth) ||
        (p->mode == KILL_COMMITTING && r->n_w >= p->nth) || (p->mode == KILL_TIMED && r->have_r))
        p->armed = now_s();
    return p->armed != 0;
}

static void test_kill_nine(void)
{
    CU_ASSERT_FATAL(have_ref);
    uint64_t seed;
    const char *env = getenv("TFC_KILL_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    else
        seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)(now_s() * 1e6);
    rng_state = seed;
    printf("\n    kill seed %" PRIu64 " (replay the schedule with TFC_KILL_SEED=%" PRIu64 ")\n",
           seed, seed);
    fflush(stdout);

    char store[PATH_MAX], out[PATH_MAX], copy[PATH_MAX], vars[PATH_MAX];
    tpath(store, "killed.db", -1);
    tpath(out, "chain.vars", -1);
    tpath(copy, "copy.db", -1);
    remove_store(store);
    int64_t prev = -1; /* the store's latest checkpoint before the run (-1: none) */
    int kills = 0, txn_kills = 0, after_commit = 0, chains = 0, refs = 0, attempts = 0;
    int chain_refs[MAX_CHAIN], n_chain = 0, chain_kills = 0;
    double t_start = now_s();

    for (;;) {
        int quota = kills >= MIN_KILLS && txn_kills >= MIN_TXN_KILLS;
        if (quota && prev < 0) break; /* the last chain is complete */
        if (attempts >= MAX_ATTEMPTS) break;

        struct plan p = {0};
        if (!quota) {
            uint64_t m = rng() % 20;
            p.mode = m < 2 ? KILL_EARLY : m < 10 ? KILL_TIMED : m < 15 ? KILL_BEGUN
                                                                      : KILL_COMMITTING;
            switch (p.mode) {
            case KILL_EARLY: p.delay = (double)rng_range(0, 200000) * 1e-6; break;
            case KILL_TIMED: p.delay = (double)rng_range(2000, 300000) * 1e-6; break;
            case KILL_BEGUN:
                p.nth = (int)rng_range(1, 8);
                p.delay = (double)rng_range(0, 1000) * 1e-6;
                break;
            case KILL_COMMITTING:
                p.nth = (int)rng_range(1, 8);
                p.hold_us = (long)rng_range(1000, 10000);
                p.delay = (double)rng_range(0, p.hold_us * 3 / 4) * 1e-6;
                break;
            }
        }
        attempts++;

        /* a run on the killed store: killed per the plan, or to the end once the quota is met */
        unlink(out);
        struct run r;
        CU_ASSERT_EQUAL_FATAL(spawn_trainer(&r, store, out, p.hold_us), 0);
        double t_spawn = now_s();
        int killed = 0, open_at_kill = 0;
        int64_t open_step_at_kill = -1;
        for (;;) {
            double deadline = -1;
            if (!quota) {
                if (p.mode == KILL_EARLY) deadline = t_spawn + p.delay;
                else if (p.armed) deadline = p.armed + p.delay;
            }
            double wait = deadline < 0 ? 1.0 : deadline - now_s();
            /* never after D: the child is shutting StarPU down (and writing its files) */
            if (deadline >= 0 && wait <= 0 && !r.done) {
                /* what was announced before the kill */
                open_at_kill = r.open;
                open_step_at_kill = r.open_step;
                kill(r.pid, SIGKILL);
                killed = 1;
                break;
            }
            if (now_s() - t_spawn > RUN_TIMEOUT_S) {
                kill(r.pid, SIGKILL);
                CU_FAIL("ft_trainer hung");
                break;
            }
            if (r.done) wait = 1.0;
            if (read_lines(&r, wait, quota ? NULL : trigger, &p) < 0) break; /* it ended */
        }
        finish(&r);
        if (r.bad) fprintf(stderr, "announcements out of protocol: %s\n", r.why);
        CU_ASSERT(!r.bad);
        /* it resumed from the checkpoint the last check found (or started from scratch) */
        if (r.have_r) CU_ASSERT_EQUAL(r.r_step, prev < 0 ? 0 : prev);

        if (!killed || r.exit_code != 128 + SIGKILL) {
            /* it ran to the end (the kill came too late, or none was planned) */
            if (r.exit_code || !r.done) {
                fprintf(stderr, "ft_trainer ended with status %d (D %d)\n", r.exit_code, r.done);
                CU_FAIL("ft_trainer failed");
                break;
            }
            CU_ASSERT_EQUAL(r.done_step, TARGET);
            /* killed and resumed to the end: the same bits as every uninterrupted run from a
             * checkpoint the chain passed through (each of which matched the reference) */
            int bad = same_variables(ref_out, out, "killed and resumed") != 0;
            bad |= complete_metrics(store, r.r_step, "metrics of the killed and resumed chain");
            for (int i = 0; i < n_chain; i++)
                bad |= same_variables(tpath(vars, "uninterrupted.vars", chain_refs[i]), out,
                                      "killed and resumed vs uninterrupted from a checkpoint") != 0;
            CU_ASSERT(!bad);
            printf("    chain %d: %d kill%s, resumed to step %d: final variables identical to "
                   "the %d uninterrupted run%s from its checkpoints and from scratch\n",
                   chains + 1, chain_kills, chain_kills == 1 ? "" : "s", TARGET, n_chain,
                   n_chain == 1 ? "" : "s");
            for (int i = 0; i < n_chain; i++)
                unlink(tpath(vars, "uninterrupted.vars", chain_refs[i]));
            n_chain = chain_kills = 0;
            chains++;
            remove_store(store);
            prev = -1;
            continue;
        }
        kills++;
        chain_kills++;

        /* the store as the killed process left it, copied: checked and trained on */
        int copied = copy_store(store, copy);
        CU_ASSERT(copied >= 0);
        struct store_state s = {0};
        s.latest = -1;
        if (copied == 0) {
            inspect(copy, r.have_r ? r.r_step : -1, &s);
            if (!s.opened || !s.integrity_ok || !s.metrics_ok)
                fprintf(stderr, "kill %d: %s\n", kills, s.msg);
            CU_ASSERT(s.opened);
            CU_ASSERT(s.integrity_ok);
            CU_ASSERT(s.metrics_ok);
        } /* else: killed before the store was created */

        /* the latest checkpoint: the last announced as committed (or the one the store had),
         * or the one open at the kill if it committed before its announcement */
        int64_t committed = r.have_c ? r.last_c : prev;
        int ok = s.latest == committed || (r.open && s.latest == r.open_step);
        if (!ok)
            fprintf(stderr, "kill %d: latest checkpoint %lld, expected %lld%s\n", kills,
                    (long long)s.latest, (long long)committed,
                    r.open ? " or the open one" : "");
        CU_ASSERT(ok);
        CU_ASSERT(s.n <= KEEP);
        for (int i = 0; i < s.n && i < 16; i++) {
            CU_ASSERT(s.steps[i] % EVERY == 0 || s.steps[i] == TARGET);
            if (i) CU_ASSERT(s.steps[i] > s.steps[i - 1]);
        }
        int in_txn = open_at_kill && s.latest != open_step_at_kill;
        if (r.open && s.latest == r.open_step) after_commit++;
        txn_kills += in_txn;

        char desc[64], where[64] = "";
        if (p.mode == KILL_EARLY || p.mode == KILL_TIMED)
            snprintf(desc, sizeof desc, "%s +%.1f ms", mode_names[p.mode], p.delay * 1e3);
        else
            snprintf(desc, sizeof desc, "%s #%d +%.0f us%s", mode_names[p.mode], p.nth,
                     p.delay * 1e6, p.mode == KILL_COMMITTING ? " (held)" : "");
        if (in_txn)
            snprintf(where, sizeof where, ", in the transaction of step %lld",
                     (long long)open_step_at_kill);
        else if (r.open && s.latest == r.open_step)
            snprintf(where, sizeof where, ", in or after the COMMIT of step %lld",
                     (long long)s.latest);
        printf("    kill %2d (run %2d, %-27s): resumed at %5lld, latest %5lld (%d kept)%s\n",
               kills, attempts, desc, r.have_r ? (long long)r.r_step : -1LL,
               (long long)s.latest, s.n, where);

        /* the uninterrupted run from that checkpoint (on the copy), unless the run committed
         * nothing new and the last one of this chain started from that same checkpoint */
        int same = n_chain && s.latest == prev;
        if (s.latest >= 0 && n_chain < MAX_CHAIN && !same) {
            tpath(vars, "uninterrupted.vars", refs);
            int64_t rs = -2;
            CU_ASSERT_EQUAL(run_to_target(copy, vars, &rs), 0);
            CU_ASSERT_EQUAL(rs, s.latest);
            CU_ASSERT_EQUAL(same_variables(ref_out, vars, "uninterrupted from a checkpoint"), 0);
            chain_refs[n_chain++] = refs++;
        }
        fflush(stdout);
        remove_store(copy);
        prev = s.latest;
    }
    double dt = now_s() - t_start;
    printf("    %d kills (%d in an open checkpoint transaction, %d during or after its COMMIT "
           "but before the announcement) in %d runs, %d chains resumed to the end, %d "
           "uninterrupted runs from checkpoints: %.1f s\n",
           kills, txn_kills, after_commit, attempts, chains, refs, dt);
    CU_ASSERT(kills >= MIN_KILLS);
    CU_ASSERT(txn_kills >= MIN_TXN_KILLS);
    CU_ASSERT(prev < 0); /* the last chain was completed and compared */
    remove_store(store);
}

/* ---- dropout: the same units drop after a resume ------------------------------------------ */

/* The probes record of a variables file: each step's mask hash, consecutive ones different. */
static int probes_vary(const char *path)
{
    size_t len = 0;
    char *a = slurp(path, &len), *rec = a ? memmem(a, len, "probes int64 ", 13) : NULL;
    size_t bytes = 0;
    int hdr = 0, rc = -1;
    if (!rec || sscanf(rec, "probes int64 %zu%n", &bytes, &hdr) != 1 ||
        bytes != TARGET * sizeof(int64_t) || (size_t)(rec + 1 + hdr - a) + bytes > len) {
        fprintf(stderr, "%s: no probes record of %d steps\n", path, TARGET);
    } else {
        const char *p = rec + 1 + hdr; /* after the header's newline */
        int64_t prev = -1, v, same = 0;
        for (int k = 0; k < TARGET; k++, prev = v) {
            memcpy(&v, p + (size_t)k * sizeof v, sizeof v);
            same += v == prev || v < 0;
        }
        if (same) fprintf(stderr, "%s: %lld steps drop the units of the step before\n", path,
                          (long long)same);
        rc = same ? -1 : 0;
    }
    free(a);
    return rc;
}

/* One run on store, killed with SIGKILL `delay` s after it announced R (unless it ends first);
 * *resumed_from is its R step. 1 when the kill ended it, 0 when it ran to the end, -1 on a
 * failure. */
static int killed_run(const char *store, const char *out, double delay, int64_t *resumed_from)
{
    struct run r;
    if (spawn_trainer(&r, store, out, 0)) return -1;
    double t0 = now_s(), t_r = -1;
    int killed = 0;
    while (!killed) {
        if (t_r < 0 && r.have_r) t_r = now_s();
        double wait = t_r < 0 ? 1.0 : t_r + delay - now_s();
        if (t_r >= 0 && wait <= 0 && !r.done) {
            kill(r.pid, SIGKILL);
            killed = 1;
        } else if (now_s() - t0 > RUN_TIMEOUT_S) {
            kill(r.pid, SIGKILL);
            fprintf(stderr, "ft_trainer --model dropout hung\n");
            killed = -1;
        } else if (read_lines(&r, wait > 0 ? wait : 0.01, NULL, NULL) < 0) {
            break; /* it ended by itself */
        }
    }
    finish(&r);
    *resumed_from = r.have_r ? r.r_step : -1;
    if (killed < 0 || r.bad) return -1;
    if (r.exit_code == 128 + SIGKILL) return 1;
    return r.exit_code == 0 && r.done && r.done_step == TARGET ? 0 : -1;
}

static void test_dropout_resume(void)
{
    char store[PATH_MAX], ref[PATH_MAX], out[PATH_MAX];
    model = "dropout";
    tpath(store, "dropout-reference.db", -1);
    tpath(ref, "dropout-reference.vars", -1);
    tpath(out, "dropout-chain.vars", -1);
    remove_store(store);
    int64_t rs = -2;
    double t_ref = now_s();
    CU_ASSERT_EQUAL_FATAL(run_to_target(store, ref, &rs), 0);
    t_ref = now_s() - t_ref; /* kills land at 5-35% of this: a fast machine still gets them */
    CU_ASSERT_EQUAL(probes_vary(ref), 0);
    remove_store(store);
    tpath(store, "dropout-chain.db", -1);
    int kills = 0;
    double t0 = now_s();
    /* A chain that went fast reached the target between kills (the reference run was slowed
     * by load, so the delays were too long): it starts again with delays a third as long. */
    for (int chain = 0; chain < 3 && kills < 2; chain++, t_ref /= 3) {
        remove_store(store);
        kills = 0;
        int ended = 0, last_r = -1;
        for (int attempt = 0; attempt < 4 * DROPOUT_KILLS && kills < DROPOUT_KILLS && !ended;
             attempt++) {
            int64_t from = -1;
            int rc = killed_run(store, out, t_ref * (double)rng_range(5, 35) * 1e-2, &from);
            CU_ASSERT_FATAL(rc >= 0);
            CU_ASSERT(from >= last_r); /* a resume never goes back past a committed checkpoint */
            last_r = (int)from;
            kills += rc == 1;
            ended = rc == 0;
        }
    }
    CU_ASSERT(kills >= 2);
    /* the end of the chain: resumed from the last checkpoint, to the target, without kills */
    unlink(out);
    CU_ASSERT_EQUAL_FATAL(run_to_target(store, out, &rs), 0);
    CU_ASSERT(rs > 0);
    int same = same_variables(ref, out, "dropout model killed and resumed") == 0;
    CU_ASSERT(same);
    printf("\n    dropout model: %d kills, the last resume from step %lld, final variables and "
           "masks %s the uninterrupted run's: %.1f s\n", kills, (long long)rs,
           same ? "identical to" : "DIFFERENT from", now_s() - t0);
    remove_store(store);
    model = NULL;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int suite_init(void)
{
    /* one CPU worker and no GPU: training is deterministic bit for bit (no OpenCL worker
     * either: the ops have no OpenCL codelets, and CPU OpenCL devices stay off without
     * STARPU_OPENCL_ON_CPUS; STARPU_NOPENCL=0 makes StarPU 1.3.10 leak under LeakSanitizer) */
    setenv("STARPU_NCPU", "1", 1);
    setenv("STARPU_NCUDA", "0", 1);
    unsetenv("STARPU_OPENCL_ON_CPUS");
    char exe[PATH_MAX / 2];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    snprintf(trainer, sizeof trainer, "%s/ft_trainer", exe);
    if (access(trainer, X_OK)) {
        fprintf(stderr, "tests/ft_trainer not found next to the test program\n");
        return -1;
    }
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tfc-killnine-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) return -1;
    /* StarPU's files (bus calibration, performance models) in a home of the children's own,
     * so that a kill never leaves a half-written one where other tests read them; the first
     * run, never killed, fills it */
    char home[PATH_MAX];
    setenv("STARPU_HOME", tpath(home, "starpu-home", -1), 1);
    return mkdir(home, 0700);
}

static int suite_clean(void)
{
    if (CU_get_number_of_failures() == 0) {
        nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    } else {
        fprintf(stderr, "test_killnine: files kept in %s\n", tmpdir);
    }
    return 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("killnine", suite_init, suite_clean);
    TEST_ADD(test_uninterrupted);
    TEST_ADD(test_kill_nine);
    TEST_ADD(test_dropout_resume);
    return test_main();
}
