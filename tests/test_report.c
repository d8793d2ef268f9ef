/* test_report.c: seeing where things ran. A profiled run records each task's worker, measured
 * and predicted time; its summary has the bytes moved per bus link and each worker's times;
 * the report prints, the Chrome trace (API and TFC_TRACE) is valid JSON with one complete
 * event per task, and opens in Chrome while a session writes it and after its process was
 * killed; a trace file has one session (another is refused; %p and %s give each its own);
 * TFC_REPORT / TFC_TRACE values are checked at tfc_session_create; with the hop hook on the
 * OpenCL worker (PoCL), bytes move between RAM and the OpenCL node; StarPU started again with
 * fewer, then more workers reports exactly its own. */
#define _GNU_SOURCE /* dprintf, environ */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <starpu.h>
#include "testutil.h"
#include "../sched/testing.h"

/* ---- a small JSON syntax checker ------------------------------------------------------- */

static const char *js_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *js_value(const char *p, int depth);

static const char *js_string(const char *p)
{
    if (*p++ != '"') return NULL;
    for (; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
                p += 4;
            } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *js_number(const char *p)
{
    const char *q = p;
    if (*q == '-') q++;
    if (*q < '0' || *q > '9') return NULL;
    while ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' || *q == '+' ||
           *q == '-')
        q++;
    return q;
}

static const char *js_value(const char *p, int depth)
{
    if (depth > 64) return NULL;
    p = js_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = js_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                if (!(p = js_string(js_ws(p)))) return NULL;
                p = js_ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = js_value(p, depth + 1))) return NULL;
            p = js_ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (*p == '"') return js_string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    return js_number(p);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* Chrome's trace importer (catapult's trace_event_importer): text that starts with '[' may
 * lack its closing ']' (trailing newlines, then a trailing comma, are dropped and ']'
 * appended), then it must be JSON. 1 when it opens so. */
static int chrome_parses(const char *text)
{
    size_t n = strlen(text);
    char *t = malloc(n + 2);
    if (!t) return 0;
    memcpy(t, text, n + 1);
    if (t[0] == '[') {
        while (n && (t[n - 1] == '\n' || t[n - 1] == '\r')) t[--n] = 0;
        size_t k = n;
        while (k && strchr(" \t\r\n", t[k - 1])) k--;
        if (k && t[k - 1] == ',') {
            n = k - 1;
            while (n && strchr(" \t\r\n", t[n - 1])) n--;
            t[n] = 0;
        }
        if (!n || t[n - 1] != ']') strcpy(t + n, "]");
    }
    const char *end = js_value(t, 0);
    int ok = end && !*js_ws(end);
    free(t);
    return ok;
}

static int strict_parses(const char *text)
{
    const char *end = js_value(text, 0);
    return end && !*js_ws(end);
}

enum trace_state { CLOSED, UNTERMINATED };

/* Checks that path holds a Chrome trace in the JSON array format with n_events complete ("X")
 * events and a named row for each of n_workers workers (-1: not checked): strict JSON once
 * closed; while a session writes it, or after its process died, without the ']' that Chrome
 * adds. */
static void check_trace(const char *path, int n_events, int n_workers, enum trace_state state)
{
    char *j = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(j[0], '[');
    CU_ASSERT(chrome_parses(j));
    CU_ASSERT_EQUAL(strict_parses(j), state == CLOSED);
    CU_ASSERT_EQUAL(count(j, "\"ph\":\"X\""), n_events);
    if (n_workers >= 0) CU_ASSERT_EQUAL(count(j, "\"name\":\"thread_name\""), n_workers);
    CU_ASSERT_EQUAL(count(j, "\"name\":\"process_name\""), 1);
    free(j);
    if (access("/usr/bin/python3", X_OK) == 0) { /* a second opinion: catapult's Python side */
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 -c 'import json,re,sys; t=open(sys.argv[1]).read(); "
                 "closed=sys.argv[2]==\"1\"\n"
                 "if not closed: t=re.sub(r\"\\s*,\\s*$\", \"\", re.sub(r\"[\\r\\n]*$\", \"\", t)); "
                 "t=t if t.endswith(\"]\") else t+\"]\"\n"
                 "json.loads(t)' %s %d", path, state == CLOSED);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
}

/* ---- the graph ------------------------------------------------------------------------- */

struct small {
    tfc_graph *g;
    tfc_tensor *x, *y;
    tfc_value *xv;
};

/* y = exp(relu(x @ w)) * 0.5 with a "back\\slash" node, to check the JSON escaping */
static void small_build(struct small *m)
{
    static float xd[64 * 64];
    for (int i = 0; i < 64 * 64; i++) xd[i] = (float)(i % 5) * 0.01f;
    tfc_graph_create(&m->g);
    tfc_shape sh = tfc_shape_of(2, (int64_t[]){64, 64});
    m->x = tfc_placeholder(m->g, "x", TFC_FLOAT32, sh);
    m->xv = NULL; /* no CUnit assertion here: the traced child builds it too */
    tfc_value_from_data(TFC_FLOAT32, sh, xd, &m->xv);
    tfc_tensor *w = tfc_constant(m->g, "w", m->xv);
    tfc_tensor *h = tfc_relu(m->g, tfc_matmul(m->g, m->x, w, 0, 0));
    m->y = tfc_exp(m->g, h);
    tfc_tensor_set_name(m->y, "back\\slash");
}

static void small_free(struct small *m)
{
    tfc_graph_destroy(m->g);
    tfc_value_destroy(m->xv);
}

static tfc_status small_run(tfc_session *s, struct small *m)
{
    tfc_value *out = NULL;
    tfc_status st = tfc_session_run(s, 1, &m->x, &m->xv, 1, &m->y, &out, 0, NULL);
    tfc_value_destroy(out);
    return st;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_records_summary_trace(void)
{
    struct small m;
    small_build(&m);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(m.g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    tfc_session_set_where(s, STARPU_CPU); /* the ops' CPU codelets: this is not an op test */
    tfc_run_summary sm;
    /* profiling off: nothing is recorded, no summary */
    CU_ASSERT_EQUAL(small_run(s, &m), TFC_OK);
    const tfc_task_record *r;
    CU_ASSERT_EQUAL(tfc_session_last_records(s, &r), 0);
    CU_ASSERT_EQUAL(tfc_session_last_summary(s, &sm), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_write_report(s, stderr), TFC_ERR_INVALID_ARGUMENT);
    tfc_session_set_profiling(s, 1);
    for (int run = 0; run < 3; run++) CU_ASSERT_EQUAL_FATAL(small_run(s, &m), TFC_OK);
    int n = tfc_session_last_records(s, &r);
    CU_ASSERT_EQUAL(n, 3); /* matmul, relu, exp */
    CU_ASSERT_EQUAL_FATAL(tfc_session_last_summary(s, &sm), TFC_OK);
    CU_ASSERT_EQUAL(sm.n_tasks, n);
    CU_ASSERT_PTR_EQUAL(sm.tasks, r);
    CU_ASSERT(sm.end_us >= sm.start_us);
    int n_workers = (int)starpu_worker_get_count();
    for (int i = 0; i < n; i++) {
        CU_ASSERT(r[i].worker >= 0 && r[i].worker < n_workers);
        CU_ASSERT(r[i].worker_name[0] != 0);
        CU_ASSERT(r[i].end_us - r[i].start_us >= 0);
        CU_ASSERT(r[i].start_us >= sm.start_us && r[i].end_us <= sm.end_us);
        CU_ASSERT(isnan(r[i].predicted_us) || r[i].predicted_us > 0);
    }
    CU_ASSERT_EQUAL(sm.n_workers, n_workers);
    int tasks = 0;
    for (int i = 0; i < sm.n_workers; i++) {
        const tfc_worker_record *w = &sm.workers[i];
        CU_ASSERT_EQUAL(w->worker, i);
        CU_ASSERT(w->total_us > 0 && w->executing_us >= 0 && w->sleeping_us >= 0);
        CU_ASSERT(w->executing_us <= w->total_us * 1.01 + 10);
        CU_ASSERT_DOUBLE_EQUAL(w->idle_us, fmax(w->total_us - w->executing_us, 0), 1e-6);
        tasks += w->tasks;
    }
    CU_ASSERT(tasks >= n); /* the run's tasks (and whatever else ran meanwhile) */
    for (int i = 0; i < sm.n_links; i++) CU_ASSERT(sm.links[i].bytes > 0);
    /* the report */
    FILE *f = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(tfc_session_write_report(s, f), TFC_OK);
    long len = ftell(f);
    rewind(f);
    char *txt = calloc(1, (size_t)len + 1);
    CU_ASSERT_EQUAL(fread(txt, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "tfc run report: 3 tasks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "matmul"));
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "back\\slash"));
    CU_ASSERT_PTR_NOT_NULL(strstr(txt, "idle us"));
    free(txt);
    /* the trace of the last run */
    char path[] = "/tmp/tfc-report-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    CU_ASSERT_EQUAL(tfc_session_write_trace(s, path), TFC_OK);
    check_trace(path, n, (int)starpu_worker_get_count(), CLOSED);
    CU_ASSERT_EQUAL(tfc_session_write_trace(s, "/nonexistent-dir/t.json"),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(s), "/nonexistent-dir/t.json"));
    unlink(path);
    tfc_session_destroy(s);
    small_free(&m);
}

static void test_environment(void)
{
    struct small m;
    small_build(&m);
    tfc_session *s = NULL;
    setenv("TFC_REPORT", "bad", 1);
    CU_ASSERT_EQUAL(tfc_session_create(test_ctx, m.g, &s), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "TFC_REPORT"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "'bad'"));
    setenv("TFC_REPORT", "0", 1);
    setenv("TFC_TRACE", "", 1);
    CU_ASSERT_EQUAL(tfc_session_create(test_ctx, m.g, &s), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "TFC_TRACE"));
    setenv("TFC_TRACE", "/nonexistent-dir/t.json", 1);
    CU_ASSERT_EQUAL(tfc_session_create(test_ctx, m.g, &s), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "/nonexistent-dir/t.json"));
    /* TFC_REPORT=1 and TFC_TRACE=path: profiling on, every run reported and traced */
    char path[] = "/tmp/tfc-trace-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    setenv("TFC_REPORT", "1", 1);
    setenv("TFC_TRACE", path, 1);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    unsetenv("TFC_REPORT");
    unsetenv("TFC_TRACE");
    tfc_session_set_where(s, STARPU_CPU);
    check_trace(path, 0, (int)starpu_worker_get_count(), UNTERMINATED); /* the header */
    for (int run = 0; run < 2; run++) {
        CU_ASSERT_EQUAL(small_run(s, &m), TFC_OK);
        check_trace(path, 3 * (run + 1), -1, UNTERMINATED); /* on disk as each run ends */
    }
    const tfc_task_record *r;
    CU_ASSERT_EQUAL(tfc_session_last_records(s, &r), 3);
    tfc_session_destroy(s); /* closes the JSON */
    check_trace(path, 2 * 3, (int)starpu_worker_get_count(), CLOSED);
    unlink(path);
    small_free(&m);
}

static tfc_session *traced_session(struct small *m, const char *trace, tfc_status *st)
{
    tfc_session *s = NULL;
    setenv("TFC_TRACE", trace, 1);
    *st = tfc_session_create(test_ctx, m->g, &s);
    unsetenv("TFC_TRACE");
    if (s) tfc_session_set_where(s, STARPU_CPU);
    return s;
}

/* Two sessions on one TFC_TRACE path: the second is refused with a message naming the path
 * and the holder, and the holder's trace is untouched; tfc_session_write_trace is refused
 * there too. With %s (or %p) in the path each session has its own file. */
static void test_trace_one_session_per_file(void)
{
    struct small m;
    small_build(&m);
    char dir[] = "/tmp/tfc-trace-XXXXXX", path[64], pattern[64], mine[2][64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.json", dir);
    tfc_status st;
    tfc_session *a = traced_session(&m, path, &st), *b;
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    CU_ASSERT_EQUAL(small_run(a, &m), TFC_OK);
    b = traced_session(&m, path, &st);
    CU_ASSERT_EQUAL(st, TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "of this process"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "%s"));
    CU_ASSERT_EQUAL(tfc_session_write_trace(a, path), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(a), "is being written by session"));
    CU_ASSERT_EQUAL(small_run(a, &m), TFC_OK);
    check_trace(path, 2 * 3, -1, UNTERMINATED); /* a's two runs, nothing else */
    tfc_session_destroy(a);
    check_trace(path, 2 * 3, -1, CLOSED);
    /* released: a new session may take the path, and starts it afresh */
    a = traced_session(&m, path, &st);
    CU_ASSERT_EQUAL(st, TFC_OK);
    tfc_session_destroy(a);
    check_trace(path, 0, -1, CLOSED);
    unlink(path);
    /* a file per session */
    snprintf(pattern, sizeof pattern, "%s/t-%%p-%%s.json", dir);
    a = traced_session(&m, pattern, &st);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    b = traced_session(&m, pattern, &st);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    CU_ASSERT_EQUAL(small_run(a, &m), TFC_OK);
    CU_ASSERT_EQUAL(small_run(b, &m), TFC_OK);
    CU_ASSERT_EQUAL(small_run(b, &m), TFC_OK);
    tfc_session_destroy(a);
    tfc_session_destroy(b);
    int found = 0;
    for (unsigned id = 1; id < 1000 && found < 2; id++) { /* session numbers are process-wide */
        snprintf(mine[found], sizeof mine[found], "%s/t-%ld-%u.json", dir, (long)getpid(), id);
        if (access(mine[found], F_OK) == 0) found++;
    }
    CU_ASSERT_EQUAL_FATAL(found, 2);
    check_trace(mine[0], 3, -1, CLOSED);
    check_trace(mine[1], 2 * 3, -1, CLOSED);
    unlink(mine[0]);
    unlink(mine[1]);
    /* what is not a pattern */
    snprintf(pattern, sizeof pattern, "%s/t-%%d.json", dir);
    b = traced_session(&m, pattern, &st);
    CU_ASSERT_EQUAL(st, TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "'%d' is not a pattern"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), pattern));
    CU_ASSERT_EQUAL(rmdir(dir), 0); /* a refused session created no file */
    small_free(&m);
}

/* ---- a traced process killed with SIGKILL ---------------------------------------------- */

/* The child: this program again (--traced-child TRACE FD), its own StarPU with one CPU worker,
 * TFC_TRACE=TRACE. Two runs, then a third submitted and never waited for; it writes
 * "ready EVENTS\n" on FD and waits to be killed. */
static int traced_child(const char *trace, int fd)
{
    char home[PATH_MAX];
    const char *base = getenv("STARPU_HOME");
    snprintf(home, sizeof home, "%s/traced-child", base ? base : "/tmp");
    mkdir(home, 0700); /* its own: bus calibrations of one home must not overlap */
    setenv("STARPU_HOME", home, 1);
    setenv("STARPU_NCPU", "1", 1);
    setenv("STARPU_NCUDA", "0", 1);
    unsetenv("STARPU_OPENCL_ON_CPUS");
    setenv("TFC_TRACE", trace, 1);
    if (test_ctx_open()) return 2;
    struct small m;
    small_build(&m);
    tfc_session *s;
    if (tfc_session_create(test_ctx, m.g, &s)) return 3;
    tfc_session_set_where(s, STARPU_CPU);
    int events = 0;
    const tfc_task_record *r;
    for (int i = 0; i < 2; i++) {
        if (small_run(s, &m)) return 4;
        events += tfc_session_last_records(s, &r);
    }
    tfc_run *run;
    if (tfc_session_run_async(s, 1, &m.x, &m.xv, 1, &m.y, 0, NULL, &run)) return 5;
    dprintf(fd, "ready %d\n", events);
    for (;;) pause();
}

/* Starts the child; its pid, and the read end of its pipe in *rd. */
static pid_t spawn_traced_child(const char *trace, int *rd)
{
    char exe[PATH_MAX], fd_arg[16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int p[2];
    if (n <= 0 || pipe(p)) return -1;
    exe[n] = 0;
    snprintf(fd_arg, sizeof fd_arg, "%d", p[1]);
    char *argv[] = {exe, "--traced-child", (char *)trace, fd_arg, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, exe, NULL, NULL, argv, environ);
    close(p[1]);
    if (rc) {
        close(p[0]);
        return -1;
    }
    *rd = p[0];
    return pid;
}

/* A process killed with SIGKILL in the middle of a run leaves a trace that Chrome opens, with
 * every event of its completed runs; while it lived, its path was refused to this process
 * (the message names the child's pid), and once it died the path is free again. */
static void test_trace_survives_kill(void)
{
    char path[] = "/tmp/tfc-trace-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    int rd;
    pid_t pid = spawn_traced_child(path, &rd);
    CU_ASSERT_FATAL(pid > 0);
    char line[64] = {0};
    FILE *f = fdopen(rd, "r");
    int events = -1;
    if (!f || !fgets(line, sizeof line, f) || sscanf(line, "ready %d", &events) != 1)
        fprintf(stderr, "the traced child did not get ready: '%s' ", line);
    CU_ASSERT(events > 0);
    struct small m;
    small_build(&m);
    tfc_status st;
    tfc_session *s = traced_session(&m, path, &st);
    CU_ASSERT_EQUAL(st, TFC_ERR_INVALID_ARGUMENT);
    char holder[64];
    snprintf(holder, sizeof holder, "of process %ld", (long)pid);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), holder));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
    tfc_session_destroy(s);
    kill(pid, SIGKILL);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    if (f) fclose(f);
    check_trace(path, events, 1, UNTERMINATED);
    s = traced_session(&m, path, &st); /* the kernel dropped the dead process's lock */
    CU_ASSERT_EQUAL(st, TFC_OK);
    tfc_session_destroy(s);
    check_trace(path, 0, -1, CLOSED);
    unlink(path);
    small_free(&m);
}

/* Every value hops through a copy task on the OpenCL worker: bytes cross RAM <-> OpenCL. */
static void test_bus_bytes_opencl(void)
{
    if (!starpu_worker_get_count_by_type(STARPU_OPENCL_WORKER)) {
        fprintf(stderr, "(no OpenCL worker: skipped) ");
        return;
    }
    struct small m;
    small_build(&m);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    tfc_session_set_where(s, STARPU_CPU);
    tfc_session_set_hop(s, 1, STARPU_OPENCL);
    tfc_session_set_profiling(s, 1);
    CU_ASSERT_EQUAL_FATAL(small_run(s, &m), TFC_OK);
    tfc_run_summary sm;
    CU_ASSERT_EQUAL_FATAL(tfc_session_last_summary(s, &sm), TFC_OK);
    CU_ASSERT_EQUAL(sm.n_tasks, 6); /* 3 ops, 3 hops */
    int ocl_tasks = 0;
    for (int i = 0; i < sm.n_tasks; i++)
        if (!strcmp(sm.tasks[i].op, "hop")) {
            CU_ASSERT_EQUAL(starpu_worker_get_type(sm.tasks[i].worker), STARPU_OPENCL_WORKER);
            ocl_tasks++;
        }
    CU_ASSERT_EQUAL(ocl_tasks, 3);
    uint64_t to_ocl = 0, from_ocl = 0;
    for (int i = 0; i < sm.n_links; i++) {
        const tfc_link_record *l = &sm.links[i];
        enum starpu_node_kind sk = starpu_node_get_kind((unsigned)l->src_node),
                              dk = starpu_node_get_kind((unsigned)l->dst_node);
        if (sk == STARPU_CPU_RAM && dk == STARPU_OPENCL_RAM) to_ocl += l->bytes;
        if (sk == STARPU_OPENCL_RAM && dk == STARPU_CPU_RAM) from_ocl += l->bytes;
    }
    /* each op's output (64x64 float32) goes to the OpenCL node and its copy comes back */
    CU_ASSERT(to_ocl >= 64 * 64 * 4);
    CU_ASSERT(from_ocl >= 64 * 64 * 4);
    tfc_session_write_report(s, stderr);
    tfc_session_destroy(s);
    small_free(&m);
}

/* ---- StarPU started again with other workers ---------------------------------------------- */

/* A context started with STARPU_NCPU=ncpu (and no OpenCL or CUDA worker when nodev is "0"),
 * one profiled run on it: the summary covers exactly the workers StarPU has now. The number of
 * workers goes in *n_workers. */
static void profiled_context(const char *ncpu, const char *nodev, int *n_workers)
{
    setenv("STARPU_NCPU", ncpu, 1);
    if (nodev) {
        setenv("STARPU_NOPENCL", nodev, 1);
        setenv("STARPU_NCUDA", nodev, 1);
    } else {
        unsetenv("STARPU_NOPENCL");
        unsetenv("STARPU_NCUDA");
    }
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    *n_workers = (int)starpu_worker_get_count();
    struct small m;
    small_build(&m);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(ctx, m.g, &s), TFC_OK);
    tfc_session_set_where(s, STARPU_CPU);
    tfc_session_set_profiling(s, 1);
    CU_ASSERT_EQUAL(small_run(s, &m), TFC_OK);
    tfc_run_summary sm;
    CU_ASSERT_EQUAL_FATAL(tfc_session_last_summary(s, &sm), TFC_OK);
    CU_ASSERT_EQUAL(sm.n_workers, *n_workers);
    int tasks = 0;
    for (int i = 0; i < sm.n_workers; i++) tasks += sm.workers[i].tasks;
    CU_ASSERT(tasks >= 3); /* matmul, relu, exp */
    tfc_session_destroy(s);
    small_free(&m);
    tfc_ctx_destroy(ctx);
    CU_ASSERT_FALSE(starpu_is_initialized());
}

/* The profiling totals must not outlive the StarPU they counted: a second StarPU with fewer
 * workers was asked for a worker it does not have (an abort in _starpu_get_worker_struct),
 * and one with more reported only the first one's workers. */
static void test_second_starpu_other_workers(void)
{
    char *ncpu = getenv("STARPU_NCPU"), *nopencl = getenv("STARPU_NOPENCL");
    char *ncuda = getenv("STARPU_NCUDA");
    ncpu = ncpu ? strdup(ncpu) : NULL;
    nopencl = nopencl ? strdup(nopencl) : NULL;
    ncuda = ncuda ? strdup(ncuda) : NULL;
    int first, fewer, more;
    profiled_context("2", NULL, &first); /* 2 CPU workers, and the OpenCL one if any */
    profiled_context("1", "0", &fewer);
    CU_ASSERT_EQUAL(fewer, 1);
    CU_ASSERT(first > fewer);
    profiled_context("2", NULL, &more);
    CU_ASSERT_EQUAL(more, first);
    if (ncpu) setenv("STARPU_NCPU", ncpu, 1); else unsetenv("STARPU_NCPU");
    if (nopencl) setenv("STARPU_NOPENCL", nopencl, 1); else unsetenv("STARPU_NOPENCL");
    if (ncuda) setenv("STARPU_NCUDA", ncuda, 1); else unsetenv("STARPU_NCUDA");
    free(ncuda);
    free(ncpu);
    free(nopencl);
}

static int open_with_opencl(void)
{
    setenv("STARPU_OPENCL_ON_CPUS", "1", 0); /* PoCL's CPU device, unless the caller chose */
    unsetenv("TFC_REPORT");
    unsetenv("TFC_TRACE");
    return test_ctx_open();
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--traced-child")) return traced_child(argv[2], atoi(argv[3]));
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("report", open_with_opencl, test_ctx_close);
    TEST_ADD(test_records_summary_trace);
    TEST_ADD(test_environment);
    TEST_ADD(test_trace_one_session_per_file);
    TEST_ADD(test_trace_survives_kill);
    TEST_ADD(test_bus_bytes_opencl);
    {
        TEST_SUITE("second StarPU", NULL, NULL); /* after the first one's context is gone */
        TEST_ADD(test_second_starpu_other_workers);
    }
    return test_main();
}
