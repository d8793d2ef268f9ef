/* test_bad_env.c: environments a user may have exported, one row each: the variables, the
 * status tfc_ctx_create must give and a phrase its message must hold (for a context that
 * starts, a phrase of its warning on stderr, if any). Each row runs in a child process, so a
 * row that makes StarPU abort fails alone (as STARPU_NCPU=abc, STARPU_CALIBRATE=junk or an
 * unwritable home did) and the others still run. Every row also checks that a failed create
 * leaves no context and no StarPU behind, and that only an unusable StarPU home gives a
 * warning: one, with a private directory that is gone after tfc_ctx_destroy, and
 * STARPU_HOME back as it was. */
#include <errno.h>
#include <limits.h>
#include <starpu.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "../codelets/opencl_common.h"

enum {
    FALLBACK = 1,    /* the StarPU home cannot be written: one warning, a private directory */
    NEEDS_OPENCL = 2 /* the row's error needs an OpenCL device; without one the context starts */
};

struct env_case {
    const char *vars[4]; /* "NAME=VALUE" ("@file": a regular file, "@long": a 245-byte path,
                          * "@tmp": the row's own temporary directory), or "NAME": unset */
    tfc_status status;
    const char *phrase, *phrase2; /* in the message (or the warning when status is TFC_OK) */
    int flags;
};

#define BAD TFC_ERR_INVALID_ARGUMENT
static const struct env_case cases[] = {
    /* worker counts */
    {{"STARPU_NCPU=abc"}, BAD, "STARPU_NCPU must be an integer in [0, ", "not 'abc'"},
    {{"STARPU_NCPU=-1"}, BAD, "STARPU_NCPU must be an integer", "not '-1'"},
    {{"STARPU_NCPU="}, BAD, "STARPU_NCPU is empty: set it or unset it"},
    {{"STARPU_NCPU=99999999999"}, BAD, "STARPU_NCPU must be", "most CPU workers"},
    {{"STARPU_NCPU=1x"}, BAD, "STARPU_NCPU must be", "not '1x'"},
    {{"STARPU_NCPU=+1"}, BAD, "STARPU_NCPU must be", "not '+1'"},
    {{"STARPU_NCPUS=two"}, BAD, "STARPU_NCPUS must be an integer", "not 'two'"},
    {{"STARPU_NCUDA=-2"}, BAD, "STARPU_NCUDA must be an integer in [0, ", "CUDA workers"},
    {{"STARPU_NOPENCL=x"}, BAD, "STARPU_NOPENCL must be an integer in [0, ", "not 'x'"},
    {{"STARPU_NOPENCL=1000"}, BAD, "STARPU_NOPENCL must be", "not '1000'"},
    {{"STARPU_NCPU=0", "STARPU_NOPENCL=0", "STARPU_NCUDA=0"}, TFC_ERR_NO_DEVICE, "no worker"},
    /* calibration and scheduling */
    {{"STARPU_CALIBRATE=junk"}, BAD, "STARPU_CALIBRATE must be an integer in [0, 2], not 'junk'"},
    {{"STARPU_CALIBRATE=3"}, BAD, "STARPU_CALIBRATE must be an integer in [0, 2], not '3'"},
    {{"STARPU_CALIBRATE=-1"}, BAD, "STARPU_CALIBRATE must be", "2 resets them"},
    {{"STARPU_SCHED=bogus"}, BAD, "STARPU_SCHED 'bogus' is not a scheduling policy",
     "eager, prio, random, lws, ws, dm, dmda, dmdap, dmdar, dmdas, dmdasd"},
    {{"STARPU_SCHED=bogus"}, BAD, "modular-{eager, eager-prefetching", "heteroprio-heft, pheft}"},
    {{"STARPU_SCHED="}, BAD, "STARPU_SCHED is empty"},
    {{"STARPU_SCHED=DMDA"}, BAD, "STARPU_SCHED 'DMDA' is not a scheduling policy"},
    {{"STARPU_SCHED=heft-x"}, BAD, "STARPU_SCHED 'heft-x'"},
    /* worker placement */
    {{"STARPU_WORKERS_CPUID="}, BAD, "STARPU_WORKERS_CPUID is empty"},
    {{"STARPU_WORKERS_CPUID=a"}, BAD, "STARPU_WORKERS_CPUID must list CPU ids", "not 'a'"},
    {{"STARPU_WORKERS_CPUID=-1"}, BAD, "STARPU_WORKERS_CPUID must list", "not '-1'"},
    {{"STARPU_WORKERS_CPUID=0 x"}, BAD, "STARPU_WORKERS_CPUID must list", "not '0 x'"},
    {{"STARPU_WORKERS_CPUID=3-1"}, BAD, "ranges N-M (M at least N)", "not '3-1'"},
    {{"STARPU_WORKERS_CPUID=,0"}, BAD, "STARPU_WORKERS_CPUID must list", "not ',0'"},
    {{"STARPU_WORKERS_CPUID=0;1"}, BAD, "separated by spaces or commas", "not '0;1'"},
    {{"STARPU_WORKERS_COREID=x"}, BAD, "STARPU_WORKERS_COREID must list CPU ids"},
    {{"STARPU_WORKERS_CUDAID=a"}, BAD, "STARPU_WORKERS_CUDAID must be CUDA device ids"},
    {{"STARPU_WORKERS_CUDAID=0 -1"}, BAD, "STARPU_WORKERS_CUDAID must be", "not '0 -1'"},
    {{"STARPU_WORKERS_CUDAID=0,1"}, BAD, "separated by spaces, not '0,1'"},
    {{"STARPU_WORKERS_OPENCLID=x"}, BAD, "STARPU_WORKERS_OPENCLID must be OpenCL device ids"},
    {{"STARPU_WORKERS_OPENCLID=  "}, BAD, "STARPU_WORKERS_OPENCLID names no device"},
    {{"STARPU_WORKERS_OPENCLID=99"}, BAD, "device 99 is beyond this StarPU's"},
    {{"STARPU_OPENCL_ON_CPUS=1", "STARPU_WORKERS_OPENCLID=0 5"}, BAD,
     "STARPU_WORKERS_OPENCLID: OpenCL device 5 does not exist", "in '0 5'", NEEDS_OPENCL},
    {{"STARPU_WORKERS_NOBIND=yes"}, BAD, "STARPU_WORKERS_NOBIND must be 0 (off) or a positive "
     "integer (on), not 'yes'"},
    {{"STARPU_WORKERS_GETBIND=-1"}, BAD, "STARPU_WORKERS_GETBIND must be 0 (off)"},
    /* flags and limits */
    {{"STARPU_OPENCL_ON_CPUS=x"}, BAD, "STARPU_OPENCL_ON_CPUS must be 0 (off)"},
    {{"STARPU_OPENCL_ONLY_ON_CPUS=true"}, BAD, "STARPU_OPENCL_ONLY_ON_CPUS must be 0 (off)"},
    {{"STARPU_SILENT=on"}, BAD, "STARPU_SILENT must be 0 (off) or a positive integer"},
    {{"STARPU_WORKER_STATS=x"}, BAD, "STARPU_WORKER_STATS must be"},
    {{"STARPU_BUS_STATS=1.5"}, BAD, "STARPU_BUS_STATS must be", "not '1.5'"},
    {{"STARPU_LIMIT_CUDA_MEM=lots"}, BAD, "STARPU_LIMIT_CUDA_MEM must be an integer in [0, "
     "2147483647], not 'lots'"},
    {{"STARPU_LIMIT_CPU_MEM=-5"}, BAD, "STARPU_LIMIT_CPU_MEM must be an integer"},
    {{"STARPU_LIMIT_OPENCL_MEM=3000000000"}, BAD, "STARPU_LIMIT_OPENCL_MEM must be"},
    /* where the models go */
    {{"STARPU_HOME="}, BAD, "STARPU_HOME is empty"},
    {{"STARPU_PERF_MODEL_DIR="}, BAD, "STARPU_PERF_MODEL_DIR is empty"},
    {{"STARPU_PERF_MODEL_DIR=@file"}, BAD, "STARPU_PERF_MODEL_DIR '", "cannot hold StarPU's "
     "performance models: Not a directory"},
    {{"STARPU_PERF_MODEL_DIR=@long"}, BAD, "File name too long", "at most 241 characters"},
    {{"STARPU_PERF_MODEL_DIR=/proc/tfc-none"}, BAD, "'/proc/tfc-none' cannot hold"},
    {{"STARPU_HOME=@file"}, TFC_OK, "tfc: warning: StarPU cannot write its performance models",
     "(from STARPU_HOME): Not a directory", FALLBACK},
    {{"STARPU_HOME=/proc/tfc-none"}, TFC_OK, "under '/proc/tfc-none' (from STARPU_HOME)",
     "removed when StarPU stops", FALLBACK},
    {{"STARPU_HOME=@long"}, TFC_OK, "(from STARPU_HOME): File name too long", NULL, FALLBACK},
    {{"STARPU_HOME", "HOME=@file"}, TFC_OK, "(from HOME): Not a directory", NULL, FALLBACK},
    {{"XDG_CACHE_HOME=@file"}, TFC_OK, "(from XDG_CACHE_HOME)", "(STARPU_HOME and "
     "XDG_CACHE_HOME set to it)", FALLBACK},
    {{"STARPU_HOME=@file", "STARPU_NCPU=abc"}, BAD, "STARPU_NCPU must be"}, /* no fallback */
    {{"STARPU_HOME=@file", "TMPDIR=/proc/tfc-none"}, TFC_OK, "(from STARPU_HOME)", NULL,
     FALLBACK}, /* $TMPDIR unusable too: /tmp */
    /* the library's own */
    {{"TFC_PRIORITIES=2"}, BAD, "TFC_PRIORITIES must be 0 or 1, not '2'"},
    {{"TFC_TILE_SIZE=0"}, BAD, "TFC_TILE_SIZE must be an integer in [1, 65536] or 'auto'"},
    {{"TFC_TILE_MIN=-1"}, BAD, "TFC_TILE_MIN must be an integer in [0, "},
    {{"TFC_PLAN_CACHE=abc"}, BAD, "TFC_PLAN_CACHE must be", "not 'abc'"},
    {{"TFC_FUSION="}, BAD, "TFC_FUSION must be 0 or 1, not ''"},
    {{"TFC_TRACE="}, BAD, "TFC_TRACE is empty"},
    {{"TFC_SCHED=dmda"}, BAD, "unknown environment variable TFC_SCHED"},
    {{"TFC_CONV_BACKEND=cudnn"}, BAD, "TFC_CONV_BACKEND must be one of auto|dnnl|im2col|winograd, "
     "not 'cudnn'"},
    {{"TFC_CONV_BACKEND="}, BAD, "TFC_CONV_BACKEND must be one of", "not ''"},
    {{"TFC_MATMUL_BACKEND=mkl"}, BAD, "TFC_MATMUL_BACKEND must be one of auto|dnnl|blas",
     "not 'mkl'"},
    {{"TFC_ROW_SPLIT_MIN=-3"}, BAD, "TFC_ROW_SPLIT_MIN must be"},
    /* good values start */
    {{"STARPU_NCPU=1", "STARPU_SCHED=eager"}, TFC_OK},
    {{"TFC_CONV_BACKEND=im2col"}, TFC_OK},
    {{"TFC_MATMUL_BACKEND=blas", "TFC_ROW_SPLIT_MIN=off"}, TFC_OK},
    {{"STARPU_SCHED=modular-heft", "STARPU_CALIBRATE=0"}, TFC_OK},
    {{"STARPU_SCHED=heft"}, TFC_OK}, /* StarPU's old name of dmda */
    {{"STARPU_WORKERS_CPUID=0-1,0 1-", "STARPU_WORKERS_NOBIND=0"}, TFC_OK},
    {{"STARPU_HOME=@tmp", "STARPU_BUS_STATS=0", "STARPU_LIMIT_CPU_MEM=4096"}, TFC_OK},
    {{"STARPU_PERF_MODEL_DIR=@tmp", "STARPU_HOME=@file"}, TFC_OK}, /* the home is not used */
};

static char g_tmpdir[PATH_MAX - 64], g_file[PATH_MAX], g_long[PATH_MAX];

/* The row's value with its placeholder replaced. */
static const char *value_of(const char *v, const char *row_tmp)
{
    if (!strcmp(v, "@file")) return g_file;
    if (!strcmp(v, "@long")) return g_long;
    if (!strcmp(v, "@tmp")) return row_tmp;
    return v;
}

static void apply(const struct env_case *c, const char *row_tmp)
{
    for (int i = 0; i < 4 && c->vars[i]; i++) {
        char name[64];
        const char *eq = strchr(c->vars[i], '=');
        size_t len = eq ? (size_t)(eq - c->vars[i]) : strlen(c->vars[i]);
        snprintf(name, sizeof name, "%.*s", (int)len, c->vars[i]);
        if (eq)
            setenv(name, value_of(eq + 1, row_tmp), 1);
        else
            unsetenv(name);
    }
}

static int count(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

static char *read_all(FILE *f)
{
    fflush(f);
    long len = ftell(f);
    char *s = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
    rewind(f);
    if (s && len > 0 && fread(s, 1, (size_t)len, f) != (size_t)len) s[0] = 0;
    return s;
}

static char *dup_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

#define EXPECT(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "row %d: %s fails; status %d, message '%s', stderr '%s'\n",  \
                    row, #cond, (int)st, msg, text ? text : "");                         \
            ok = 0;                                                                      \
        }                                                                                \
    } while (0)

/* The private home while the context lives: a directory under $TMPDIR (or /tmp). */
static int private_home_ok(const char *home, const char *before)
{
    struct stat sb;
    return home && !same(home, before) && strstr(home, "/tfc-starpu-home-") &&
           stat(home, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* In the child: one row. 0 when every check holds. */
static int run_row(int row, const struct env_case *c, const char *row_tmp)
{
    unsetenv("STARPU_PERF_MODEL_DIR"); /* both would move StarPU's home: rows set them */
    unsetenv("XDG_CACHE_HOME");
    apply(c, row_tmp);
    char *home_before = dup_env("STARPU_HOME"), *xdg_before = dup_env("XDG_CACHE_HOME");
    tfc_status want = c->status;
    if ((c->flags & NEEDS_OPENCL) && tfc_opencl_device_count() <= 0) want = TFC_OK;
    FILE *cap = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    dup2(fileno(cap), 2);
    tfc_ctx *ctx = (tfc_ctx *)1;
    tfc_status st = tfc_ctx_create(&ctx);
    char msg[TFC_MSG_LEN];
    snprintf(msg, sizeof msg, "%s", st ? tfc_errmsg() : "");
    char *home_during = dup_env("STARPU_HOME");
    int private_ok = private_home_ok(home_during, home_before);
    int running = starpu_is_initialized();
    if (!st) tfc_ctx_destroy(ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *text = read_all(cap);
    fclose(cap);
    const char *where = st ? msg : text ? text : "";
    int ok = 1, fallback = want == TFC_OK && (c->flags & FALLBACK);
    EXPECT(st == want);
    EXPECT(!c->phrase || want != c->status || strstr(where, c->phrase));
    EXPECT(!c->phrase2 || want != c->status || strstr(where, c->phrase2));
    EXPECT(st ? ctx == NULL && !running : running);
    EXPECT(count(text ? text : "", "tfc: warning:") == (fallback ? 1 : 0));
    EXPECT(fallback ? private_ok : same(home_during, home_before));
    struct stat sb;
    EXPECT(!fallback || (home_during && stat(home_during, &sb) != 0)); /* removed */
    EXPECT(same(getenv("STARPU_HOME"), home_before) && same(getenv("XDG_CACHE_HOME"), xdg_before));
    EXPECT(!starpu_is_initialized());
    free(text);
    free(home_before);
    free(xdg_before);
    free(home_during);
    return ok ? 0 : 1;
}

static int tmp_empty(const char *dir)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    return system(cmd) == 0;
}

static void test_environment_table(void)
{
    int n = (int)(sizeof cases / sizeof *cases), passed = 0;
    for (int row = 0; row < n; row++) {
        char row_tmp[PATH_MAX];
        snprintf(row_tmp, sizeof row_tmp, "%s/row-XXXXXX", g_tmpdir);
        CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(row_tmp));
        fflush(NULL);
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
            setenv("TMPDIR", g_tmpdir, 1); /* private homes go there: checked empty below */
            /* When starpu_init fails (the no-worker row), hwloc unloads its PCI plugin, whose
             * libpciaccess state is then reachable from nothing: a leak report with no frames
             * (<unknown module>) that no suppression can name, in a process that ends there.
             * These rows test what happens before StarPU runs; they do without PCI devices. */
            setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_pci", 0);
            exit(run_row(row, &cases[row], row_tmp));
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok)
            fprintf(stderr, "row %d (%s%s%s): %s %d\n", row, cases[row].vars[0],
                    cases[row].vars[1] ? " " : "", cases[row].vars[1] ? cases[row].vars[1] : "",
                    WIFSIGNALED(status) ? "killed by signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        CU_ASSERT(ok);
        passed += ok;
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", row_tmp);
        CU_ASSERT_EQUAL(system(cmd), 0);
        CU_ASSERT(tmp_empty(g_tmpdir)); /* no private home left behind */
    }
    fprintf(stderr, "(%d of %d rows pass) ", passed, n);
    CU_ASSERT(n >= 30);
}

static int make_paths(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/tfc-bad-env-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_tmpdir)) return -1;
    snprintf(g_file, sizeof g_file, "%s-file", g_tmpdir); /* a file where a directory should be */
    FILE *f = fopen(g_file, "w");
    if (!f) return -1;
    fclose(f);
    /* longer than StarPU 1.3's 256-byte model paths allow, below PATH_MAX */
    int n = snprintf(g_long, sizeof g_long, "%s-", g_tmpdir);
    while (n < 245) g_long[n++] = 'l';
    g_long[n] = 0;
    return 0;
}

static int remove_paths(void)
{
    char cmd[3 * PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", g_tmpdir, g_file, g_long);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("environment table", make_paths, remove_paths);
    TEST_ADD(test_environment_table);
    return test_main();
}
