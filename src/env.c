/* env.c: every TFC_ environment variable, in one table: its name, what it takes and what it
 * does (README.md's table says the same). Each knob also has an API call; the variable sets
 * the default that call overrides. Values are checked when the context is created, so a bad
 * value or a misspelt name is an error at start, never a silent default. The STARPU_ variables
 * the README documents have a second table, checked before StarPU starts (see below). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "env.h"

extern char **environ;

enum knob_kind {
    KNOB_BOOL,     /* 0 or 1 */
    KNOB_INT,      /* a decimal integer in [lo, hi] */
    KNOB_PATH,     /* a non-empty path */
    KNOB_CHOICE,   /* one of the words of `word`, separated by '|' (its index is the value) */
    KNOB_EXTERNAL, /* read by the test programs and scripts, not by the library */
};

struct knob {
    const char *name;
    enum knob_kind kind;
    long long lo, hi;
    const char *what;
    const char *word;      /* KNOB_INT: a word also taken ("off", "auto"), or NULL */
    long long word_value;  /* ... and the value it stands for */
};

static const struct knob knobs[] = {
    {"TFC_PRIORITIES", KNOB_BOOL, 0, 1,
     "task priorities from each plan's critical path (tfc_session_set_priorities)"},
    {"TFC_REPORT", KNOB_BOOL, 0, 1,
     "print each run's report on stderr (tfc_session_set_profiling, tfc_session_write_report)"},
    {"TFC_TRACE", KNOB_PATH, 0, 0,
     "write a Chrome trace of the profiled runs to this file (tfc_session_write_trace)"},
    {"TFC_FUSION", KNOB_BOOL, 0, 1,
     "fuse chains and trees of element-wise ops into one task (tfc_session_set_passes)"},
    {"TFC_CSE", KNOB_BOOL, 0, 1,
     "common-subexpression elimination at plan time (tfc_session_set_passes)"},
    {"TFC_CONST_FOLD", KNOB_BOOL, 0, 1,
     "constant folding at plan time (tfc_session_set_passes)"},
    {"TFC_TILE_MIN", KNOB_INT, 0, 1LL << 53,
     "least flops (2*m*n*k) of a matmul split into tiles; 0 or off: no tiling "
     "(tfc_session_set_tiling)", "off", 0},
    {"TFC_TILE_SIZE", KNOB_INT, 1, 65536,
     "tile edge in elements, or auto (tfc_session_set_tiling)", "auto", 0},
    {"TFC_ROW_SPLIT_MIN", KNOB_INT, 0, 1LL << 40,
     "least batch rows of an inference plan of row-wise steps split into one chain of rows "
     "per CPU worker (64 gains where the cores are free); 0 or off (default): never", "off", 0},
    {"TFC_PLAN_CACHE", KNOB_INT, 1, 1 << 20,
     "plans a session keeps cached (tfc_session_set_plan_cache_size; default 32)"},
    {"TFC_STORE_EXCLUSIVE", KNOB_BOOL, 0, 1,
     "1: open model stores in SQLite's exclusive locking mode (TFC_STORE_EXCLUSIVE flag)"},
    {"TFC_CONV_BACKEND", KNOB_CHOICE, 0, 0,
     "convolution kernels: auto (Winograd for 5x5 float32 layers where it wins, else oneDNN "
     "on CPUs when built with it, cuDNN on CUDA), dnnl, im2col (own kernels only) or "
     "winograd (Winograd on CPUs wherever it fits)",
     "auto|dnnl|im2col|winograd"},
    {"TFC_MATMUL_BACKEND", KNOB_CHOICE, 0, 0,
     "float32 CPU matmuls: auto (oneDNN's matmul for outputs at least 16 wide with m n k >= "
     "163840, and k <= 1024 on CPUs without AVX-512, when built with it, else OpenBLAS), dnnl "
     "(oneDNN for every float32 product) or blas (OpenBLAS only)",
     "auto|dnnl|blas"},
    {"TFC_DIST_TIMEOUT", KNOB_INT, 0, 86400,
     "seconds a distributed rank may wait for another before it ends the job naming that rank "
     "and the step; 0 or off: wait forever", "off", 0},
    {"TFC_DIST_TILE_BYTES", KNOB_INT, 0, 1LL << 53,
     "data-parallel training splits a variable of more than this many bytes into row tiles "
     "owned by different ranks (tfc_dist_train_set_tiling); 0 or off: none; unset: above the "
     "model's bytes / ranks", "off", 0},
    {"TFC_DIST_BIND", KNOB_BOOL, 0, 1,
     "1 (default): each distributed rank binds its StarPU workers, the MPI thread and the input "
     "loader to cores of its own from hwloc; 0: leave binding to StarPU"},
    {"TFC_WHILE_COUNT", KNOB_BOOL, 0, 1,
     "1 (default): a while loop counting a loop variable to a loop-invariant bound runs its "
     "computed number of iterations without reading its predicate back; 0: tests it each time"},
    {"TFC_WHILE_SPECULATE", KNOB_BOOL, 0, 1,
     "1: a while loop whose count is not known and whose regions write no variable submits "
     "each body and the next predicate before reading the predicate back; 0 (default): not"},
    {"TFC_DIST_OWNERS_RANK0", KNOB_BOOL, 0, 1,
     "1: `mpirun tfc train` (tfc_dist_op_step) sums every gradient and updates every variable on "
     "rank 0, which sends them all back; 0 (default): owners chosen by size, large ones tiled"},
    /* test programs and scripts (tests/, scripts/) */
    {"TFC_TEST_WHERE", KNOB_EXTERNAL, 0, 0, "tests: pin op tasks to cuda, opencl or alternate"},
    {"TFC_TEST_HOP", KNOB_EXTERNAL, 0, 0, "tests: copy every value through another worker"},
    {"TFC_TEST_SCHEDS", KNOB_EXTERNAL, 0, 0, "tests: schedulers of the op sweep"},
    {"TFC_TEST_SRCDIR", KNOB_EXTERNAL, 0, 0, "tests: the source tree's tests/ folder"},
    {"TFC_KILL_SEED", KNOB_EXTERNAL, 0, 0, "tests: replay test_killnine's kill times"},
    {"TFC_SKIP_CUDA", KNOB_EXTERNAL, 0, 0, "scripts/test.sh: skip the CUDA build"},
    {"TFC_SKIP_SANITIZERS", KNOB_EXTERNAL, 0, 0, "scripts/test.sh: skip the sanitizer run"},
    {"TFC_SKIP_FUZZ", KNOB_EXTERNAL, 0, 0, "scripts/test.sh: skip the fuzz targets"},
};

static const struct knob *find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++)
        if (strlen(knobs[i].name) == len && !strncmp(knobs[i].name, name, len)) return &knobs[i];
    return NULL;
}

/* KNOB_CHOICE: the index of v among the words of k->word. */
static tfc_status parse_choice(const struct knob *k, const char *v, long long *out, char *msg)
{
    long long i = 0;
    for (const char *w = k->word; *w; i++) {
        size_t len = strcspn(w, "|");
        if (strlen(v) == len && !strncmp(v, w, len)) {
            *out = i;
            return TFC_OK;
        }
        w += len + (w[len] == '|');
    }
    return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s must be one of %s, not '%.64s' (%s)",
                    k->name, k->word, v, k->what);
}

static tfc_status parse(const struct knob *k, const char *v, long long *out, char *msg)
{
    switch (k->kind) {
    case KNOB_BOOL:
        if (!strcmp(v, "0") || !strcmp(v, "1")) {
            *out = v[0] == '1';
            return TFC_OK;
        }
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s must be 0 or 1, not '%.64s' (%s)",
                        k->name, v, k->what);
    case KNOB_INT: {
        if (k->word && !strcmp(v, k->word)) {
            *out = k->word_value;
            return TFC_OK;
        }
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno || x < k->lo || x > k->hi)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "%s must be an integer in [%lld, %lld]%s%s%s, not '%.64s' (%s)",
                            k->name, k->lo, k->hi, k->word ? " or '" : "",
                            k->word ? k->word : "", k->word ? "'" : "", v, k->what);
        *out = x;
        return TFC_OK;
    }
    case KNOB_PATH:
        if (!*v)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s is empty: set it to a path or "
                            "unset it (%s)", k->name, k->what);
        return TFC_OK;
    case KNOB_EXTERNAL:
        return TFC_OK;
    case KNOB_CHOICE:
        return parse_choice(k, v, out, msg);
    }
    return TFC_OK;
}

tfc_status tfc_env_check(char *msg)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "TFC_", 4)) continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        const struct knob *k = find(*e, len);
        if (!k) {
            char names[768] = "";
            for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++)
                if (knobs[i].kind != KNOB_EXTERNAL)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             names[0] ? ", " : "", knobs[i].name);
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "unknown environment variable %.*s (the library reads %s)",
                            (int)(len > 64 ? 64 : len), *e, names);
        }
        long long v;
        tfc_status st = parse(k, eq ? eq + 1 : "", &v, msg);
        if (st) return st;
    }
    return TFC_OK;
}

static tfc_status get(const char *name, enum knob_kind kind, long long def, long long *out,
                      char *msg)
{
    const struct knob *k = find(name, strlen(name));
    *out = def;
    if (!k || k->kind != kind)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "%s is not a known knob of that kind", name);
    const char *v = getenv(name);
    return v ? parse(k, v, out, msg) : TFC_OK;
}

tfc_status tfc_env_bool(const char *name, int def, int *out, char *msg)
{
    long long v;
    tfc_status st = get(name, KNOB_BOOL, def, &v, msg);
    *out = st ? def : (int)v;
    return st;
}

tfc_status tfc_env_int(const char *name, long long def, long long *out, char *msg)
{
    return get(name, KNOB_INT, def, out, msg);
}

tfc_status tfc_env_choice(const char *name, int *out, char *msg)
{
    long long v;
    tfc_status st = get(name, KNOB_CHOICE, 0, &v, msg);
    *out = st ? 0 : (int)v;
    return st;
}

/* ---- StarPU's variables ---------------------------------------------------------------------
 * StarPU 1.3.10 reads its numbers with starpu_get_env_number (strtol: anything after the
 * digits aborts the process, a negative value fails an assertion, an empty one counts as 0, a
 * large one wraps around as an int), takes lws after printing a warning (twice) for a
 * STARPU_SCHED it does not know, and asserts or crashes on a CPU or device list it cannot read.
 * So the ones the README documents are checked here, before starpu_init, against what the
 * linked StarPU allows (struct tfc_starpu_facts). Others are StarPU's business. */

enum sp_kind {
    SP_WORKERS, /* a worker count, 0 to the build's maximum for `dev` */
    SP_NUMBER,  /* an integer in [lo, hi] */
    SP_FLAG,    /* 0 (off) or a positive integer (on) */
    SP_SCHED,   /* a policy of this StarPU */
    SP_PATH,    /* a non-empty path (where StarPU writes is checked in starpu_home.c) */
    SP_CPUS,    /* CPU ids and ranges: "0 1 4-7", "0,2", "2-" */
    SP_DEVICES, /* device ids: "0 1" */
};
enum sp_dev { DEV_NONE, DEV_CPU, DEV_CUDA, DEV_OPENCL };

struct starpu_var {
    const char *name;
    enum sp_kind kind;
    enum sp_dev dev;
    long long lo, hi; /* SP_NUMBER */
    const char *what;
};

static const struct starpu_var starpu_vars[] = {
    {"STARPU_SCHED", SP_SCHED, DEV_NONE, 0, 0, "the scheduling policy"},
    {"STARPU_NCPU", SP_WORKERS, DEV_CPU, 0, 0, "the number of CPU workers"},
    {"STARPU_NCPUS", SP_WORKERS, DEV_CPU, 0, 0, "the number of CPU workers, old name"},
    {"STARPU_NCUDA", SP_WORKERS, DEV_CUDA, 0, 0, "the number of CUDA workers"},
    {"STARPU_NOPENCL", SP_WORKERS, DEV_OPENCL, 0, 0, "the number of OpenCL workers"},
    {"STARPU_WORKERS_CPUID", SP_CPUS, DEV_CPU, 0, 0, "the CPUs the workers are bound to"},
    {"STARPU_WORKERS_COREID", SP_CPUS, DEV_CPU, 0, 0, "the cores the workers are bound to"},
    {"STARPU_WORKERS_CUDAID", SP_DEVICES, DEV_CUDA, 0, 0, "the devices of the CUDA workers"},
    {"STARPU_WORKERS_OPENCLID", SP_DEVICES, DEV_OPENCL, 0, 0,
     "the devices of the OpenCL workers"},
    {"STARPU_WORKERS_NOBIND", SP_FLAG, DEV_NONE, 0, 0, "do not bind workers to cores"},
    {"STARPU_WORKERS_GETBIND", SP_FLAG, DEV_NONE, 0, 0, "bind within the process's binding"},
    {"STARPU_CALIBRATE", SP_NUMBER, DEV_NONE, 0, 2,
     "0 uses the performance models, 1 calibrates them further, 2 resets them"},
    {"STARPU_HOME", SP_PATH, DEV_NONE, 0, 0, "StarPU's performance models go to "
     "$STARPU_HOME/.starpu/sampling"},
    {"STARPU_PERF_MODEL_DIR", SP_PATH, DEV_NONE, 0, 0, "where the performance models go"},
    {"STARPU_LIMIT_CUDA_MEM", SP_NUMBER, DEV_NONE, 0, INT_MAX,
     "MB of memory StarPU may use on each CUDA device"},
    {"STARPU_LIMIT_OPENCL_MEM", SP_NUMBER, DEV_NONE, 0, INT_MAX,
     "MB of memory StarPU may use on each OpenCL device"},
    {"STARPU_LIMIT_CPU_MEM", SP_NUMBER, DEV_NONE, 0, INT_MAX,
     "MB of main memory StarPU may use"},
    {"STARPU_OPENCL_ON_CPUS", SP_FLAG, DEV_NONE, 0, 0, "CPU OpenCL devices become workers"},
    {"STARPU_OPENCL_ONLY_ON_CPUS", SP_FLAG, DEV_NONE, 0, 0, "only CPU OpenCL devices"},
    {"STARPU_WORKER_STATS", SP_FLAG, DEV_NONE, 0, 0, "per-worker statistics at shutdown"},
    {"STARPU_BUS_STATS", SP_FLAG, DEV_NONE, 0, 0, "bus statistics at shutdown"},
    {"STARPU_SILENT", SP_FLAG, DEV_NONE, 0, 0, "silences StarPU's messages"},
};

/* Digits only (no sign, no space: StarPU would abort on some of what strtol takes), at most
 * hi; advances *p past them. -1 when there is no digit or the number is above hi. */
static long long read_digits(const char **p, long long hi)
{
    const char *s = *p;
    long long x = 0;
    if (*s < '0' || *s > '9') return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        x = x * 10 + (*s - '0');
        if (x > hi) return -1;
    }
    *p = s;
    return x;
}

static long long device_max(const struct tfc_starpu_facts *f, enum sp_dev dev)
{
    return dev == DEV_CPU ? f->max_cpus : dev == DEV_CUDA ? f->max_cuda : f->max_opencl;
}

static const char *dev_word(enum sp_dev dev)
{
    return dev == DEV_CPU ? "CPU" : dev == DEV_CUDA ? "CUDA" : "OpenCL";
}

/* The policies, with the modular ones as "modular-{eager, ...}" so that all of them fit in
 * one message. */
static void policy_list(const char *const *names, char *out, size_t size)
{
    static const char mod[] = "modular-";
    size_t pos = 0;
    out[0] = 0;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (const char *const *p = names; *p && pos < size; p++) {
            int modular = !strncmp(*p, mod, sizeof mod - 1);
            if (modular != pass) continue;
            const char *sep = n++ ? ", " : pass && pos ? ", modular-{" : pass ? "modular-{" : "";
            pos += (size_t)snprintf(out + pos, size - pos, "%s%s", sep,
                                    *p + (pass ? sizeof mod - 1 : 0));
        }
        if (pass && n && pos < size) pos += (size_t)snprintf(out + pos, size - pos, "}");
    }
}

static tfc_status check_sched(const struct starpu_var *v, const char *val,
                              const struct tfc_starpu_facts *f, char *msg)
{
    /* "heft": StarPU's old name of dmda; "help": StarPU prints the policies and takes lws */
    if (!strcmp(val, "heft") || !strcmp(val, "help")) return TFC_OK;
    for (const char *const *p = f->policies; p && *p; p++)
        if (!strcmp(*p, val)) return TFC_OK;
    char list[400];
    policy_list(f->policies, list, sizeof list);
    return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                    "%s '%.32s' is not a scheduling policy of this StarPU; it takes %s",
                    v->name, val, list);
}

/* STARPU_WORKERS_CPUID as StarPU 1.3 reads it: ids (N) and ranges (N-M; N- runs to the last
 * CPU) separated by spaces, or by a comma right after one. Anything else silently ends
 * StarPU's list, or asserts (nothing before it), or crashes it (a negative id): 1 when s is
 * such a list. A range running backwards binds only its first CPU: refused too. */
static int cpu_list_ok(const char *s)
{
    int items = 0;
    while (*s == ' ') s++;
    while (*s) {
        long long a = read_digits(&s, INT_MAX);
        if (a < 0) return 0;
        if (*s == '-' && s[1] >= '0' && s[1] <= '9') {
            s++;
            if (read_digits(&s, INT_MAX) < a) return 0;
        } else if (*s == '-') {
            s++;
        }
        items++;
        if (*s == ',') s++;
        else if (*s && *s != ' ') return 0;
        while (*s == ' ') s++;
    }
    return items > 0;
}

static tfc_status check_devices(const struct starpu_var *v, const char *val,
                                const struct tfc_starpu_facts *f, char *msg)
{
    long long hi = device_max(f, v->dev) - 1;
    int found = -2; /* OpenCL devices StarPU would find; asked once, only when needed */
    const char *s = val;
    int items = 0;
    while (*s == ' ') s++;
    while (*s) {
        const char *at = s;
        long long id = read_digits(&s, INT_MAX);
        if (id < 0 || (*s && *s != ' '))
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s must be %s device ids (0 to %lld) "
                            "separated by spaces, not '%.64s' (%s)", v->name, dev_word(v->dev),
                            hi, val, v->what);
        if (id > hi)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s: device %lld is beyond this "
                            "StarPU's %lld %s devices (ids 0 to %lld), in '%.64s'", v->name, id,
                            hi + 1, dev_word(v->dev), hi, val);
        if (v->dev == DEV_OPENCL && found == -2)
            found = f->opencl_devices ? f->opencl_devices() : -1;
        /* with no device there is no worker to place, and StarPU reads no id */
        if (v->dev == DEV_OPENCL && found > 0 && id >= found)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s: OpenCL device %.*s does not "
                            "exist: StarPU finds %d (ids 0 to %d), in '%.64s'", v->name,
                            (int)(s - at), at, found, found - 1, val);
        items++;
        while (*s == ' ') s++;
    }
    if (!items)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s names no device: set it to %s device "
                        "ids separated by spaces, or unset it (%s)", v->name, dev_word(v->dev),
                        v->what);
    return TFC_OK;
}

static tfc_status check_starpu_var(const struct starpu_var *v, const char *val,
                                   const struct tfc_starpu_facts *f, char *msg)
{
    if (!*val)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                        "%s is empty: set it or unset it (%s)", v->name, v->what);
    const char *s = val;
    long long x;
    switch (v->kind) {
    case SP_WORKERS:
        x = read_digits(&s, device_max(f, v->dev));
        if (x < 0 || *s)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "%s must be an integer in [0, %lld] (this StarPU's most %s workers), "
                            "not '%.64s' (%s)", v->name, device_max(f, v->dev), dev_word(v->dev),
                            val, v->what);
        return TFC_OK;
    case SP_NUMBER:
        x = read_digits(&s, v->hi);
        if (x < v->lo || *s)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "%s must be an integer in [%lld, %lld], not '%.64s' (%s)", v->name,
                            v->lo, v->hi, val, v->what);
        return TFC_OK;
    case SP_FLAG:
        if (read_digits(&s, INT_MAX) < 0 || *s)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s must be 0 (off) or a positive "
                            "integer (on), not '%.64s' (%s)", v->name, val, v->what);
        return TFC_OK;
    case SP_SCHED: return check_sched(v, val, f, msg);
    case SP_PATH: return TFC_OK;
    case SP_CPUS:
        if (!cpu_list_ok(val))
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "%s must list CPU ids (0 or more) and "
                            "ranges N-M (M at least N) or N-, separated by spaces or commas, "
                            "not '%.64s' (%s)", v->name, val, v->what);
        return TFC_OK;
    case SP_DEVICES: return check_devices(v, val, f, msg);
    }
    return TFC_OK;
}

tfc_status tfc_env_check_starpu(const struct tfc_starpu_facts *facts, char *msg)
{
    for (size_t i = 0; i < sizeof starpu_vars / sizeof *starpu_vars; i++) {
        const char *val = getenv(starpu_vars[i].name);
        if (!val) continue;
        tfc_status st = check_starpu_var(&starpu_vars[i], val, facts, msg);
        if (st) return st;
    }
    return TFC_OK;
}
