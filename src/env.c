/* env.c: every TFC_ environment variable, in one table: its name, what it takes and what it
 * does (README.md's table says the same). Each knob also has an API call; the variable sets
 * the default that call overrides. Values are checked when the context is created, so a bad
 * value or a misspelt name is an error at start, never a silent default. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "env.h"

extern char **environ;

enum knob_kind {
    KNOB_BOOL,     /* 0 or 1 */
    KNOB_INT,      /* a decimal integer in [lo, hi] */
    KNOB_PATH,     /* a non-empty path */
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
    {"TFC_PLAN_CACHE", KNOB_INT, 1, 1 << 20,
     "plans a session keeps cached (tfc_session_set_plan_cache_size; default 32)"},
    {"TFC_STORE_EXCLUSIVE", KNOB_BOOL, 0, 1,
     "1: open model stores in SQLite's exclusive locking mode (TFC_STORE_EXCLUSIVE flag)"},
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
