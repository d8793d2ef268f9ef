/* test_bad_flags.c: the `tfc` tool's misuse, one table row each, run as a child process
 * (posix_spawn of build/src/tfc on a model made by examples/make_model): unknown commands and
 * options, missing values, numbers that are no number, negative or overflow, --data without
 * '=' or file, feeds that name no feed, an output 'node:index' out of range. Each row asserts
 * the exit status (1 or 2, never a signal or a hang), a message on stderr naming the flag or
 * value, and that the model's bytes and SQLite's integrity check are unchanged (every row
 * fails before writing); for the read-only commands (info, eval, run, plot, dot) also that no
 * -wal/-shm file is left beside it. Run from the build directory (make check). */
#define _GNU_SOURCE /* nftw in bad_input.h */
#include "testutil.h"
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include "bad_input.h"
#include "../store/store_testing.h"

extern char **environ;

#define LIMIT_S 60 /* per command: a hang fails the row instead of blocking make check */

struct flag_case {
    const char *what;
    const char *model;      /* the store {M} copies (in the scratch directory), or NULL */
    const char *args;       /* after "tfc", split at blanks: {M} is the copy, @ the scratch
                             * directory, '' an empty argument */
    int want_rc;            /* 1 failure, 2 misuse */
    const char *msg, *msg2; /* substrings of stderr (msg2 may be NULL) */
    int pending;
};

#define TRAIN_DATA "--data images=@train-images.idx --data labels=@train-labels.idx"
#define TEST_DATA "--data images=@test-x.npy --data labels=@test-y.npy"

static const struct flag_case cases[] = {
    /* ---- commands ---- */
    {"no command", NULL, "", 2, "usage: tfc COMMAND", NULL},
    {"unknown command", "model.db", "frobnicate {M}", 2, "unknown command 'frobnicate'", NULL},
    {"a command in another case", "model.db", "Info {M}", 2, "unknown command 'Info'", NULL},
    {"an option for a command", "model.db", "--epochs 3 info {M}", 2, "unknown command '--epochs'",
     NULL},
    /* ---- the model argument ---- */
    {"no model", NULL, "info", 2, "missing MODEL", NULL},
    {"two models", "model.db", "info {M} {M}", 2, "unexpected argument", "case-"},
    {"a missing model", NULL, "info @missing.db", 1, "missing.db", "No such file"},
    {"a directory as the model", NULL, "info @", 1, "is a directory", NULL},
    {"a text file as the model", "junk.txt", "info {M}", 1, "not an SQLite database", "case-"},
    {"an empty file as the model", "empty.db", "dot {M}", 1, "empty file (0 bytes)", "case-"},
    {"an idx file as the model", "train-labels.idx", "eval {M} " TEST_DATA, 1,
     "not an SQLite database", NULL},
    /* ---- options ---- */
    {"unknown option", "model.db", "info {M} --bogus", 2, "unknown option '--bogus'", NULL},
    {"an option of another command", "model.db", "info {M} --epochs 3", 2,
     "unknown option '--epochs'", NULL},
    {"--lr (no such flag)", "model.db", "train {M} " TRAIN_DATA " --lr 0.1", 2,
     "unknown option '--lr'", NULL},
    {"--steps (no such flag)", "model.db", "train {M} " TRAIN_DATA " --steps 10", 2,
     "unknown option '--steps'", NULL},
    {"a single-dash long option", "model.db", "train {M} -epochs 2", 2, "unknown option '-epochs'",
     NULL},
    {"a flag given a value", "model.db", "train {M} --quiet=1", 2,
     "option --quiet takes no value", NULL},
    {"a value missing at the end", "model.db", "train {M} --epochs", 2,
     "option --epochs needs a value", NULL},
    {"a value missing before the next option", "model.db", "eval {M} --batch --data x=y", 2,
     "--batch needs an integer", "'--data'"},
    /* ---- numbers ---- */
    {"--epochs 0", "model.db", "train {M} --epochs 0", 2, "--epochs needs an integer >= 1",
     "'0'"},
    {"--epochs negative", "model.db", "train {M} --epochs -1", 2, "--epochs", "'-1'"},
    {"--epochs a word", "model.db", "train {M} --epochs ten", 2, "--epochs", "'ten'"},
    {"--epochs a fraction", "model.db", "train {M} --epochs 1.5", 2, "--epochs", "'1.5'"},
    {"--epochs empty", "model.db", "train {M} --epochs=", 2, "--epochs", "''"},
    {"--epochs beyond int64", "model.db", "train {M} --epochs 99999999999999999999", 2,
     "--epochs", "'99999999999999999999'"},
    {"--epochs with a blank", "model.db", "train {M} --epochs=' 3'", 2, "--epochs", "' 3'"},
    {"--batch 0", "model.db", "eval {M} " TEST_DATA " --batch 0", 2,
     "--batch needs an integer >= 1", "'0'"},
    {"--batch negative", "model.db", "run {M} --data images=@test-x.npy --batch -5", 2, "--batch",
     "'-5'"},
    {"--batch in exponent form", "model.db", "train {M} --batch 1e3", 2, "--batch", "'1e3'"},
    {"--batch in hex", "model.db", "train {M} --batch 0x10", 2, "--batch", "'0x10'"},
    {"--checkpoint-every negative", "model.db", "train {M} --checkpoint-every -1", 2,
     "--checkpoint-every needs an integer >= 0", "'-1'"},
    {"--keep negative", "model.db", "train {M} --keep -2", 2, "--keep", "'-2'"},
    {"--keep beyond int", "model.db", "train {M} " TRAIN_DATA " --keep 4294967296", 2,
     "--keep needs an integer in [0, 2147483647]", "'4294967296'"},
    {"--seed negative", "model.db", "train {M} --seed -1", 2, "--seed", "'-1'"},
    {"--seed beyond uint64", "model.db", "train {M} --seed 18446744073709551616", 2, "--seed",
     "'18446744073709551616'"},
    {"--rows negative", "model.db", "run {M} --data images=@test-x.npy --rows -1", 2, "--rows",
     "'-1'"},
    {"--rows a word", "model.db", "run {M} --data images=@test-x.npy --rows all", 2, "--rows",
     "'all'"},
    /* ---- --data ---- */
    {"--data without '='", "model.db", "train {M} --data images", 2, "--data needs NAME=FILE",
     "'images'"},
    {"--data without a name", "model.db", "train {M} --data =@train-images.idx", 2,
     "--data needs NAME=FILE", "not '="},
    {"--data without a file", "model.db", "eval {M} --data images=", 2, "--data needs NAME=FILE",
     "'images='"},
    {"--data with a name of 300 characters", "model.db",
     "eval {M} --data "
     "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
     "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
     "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
     "=x.npy", 2, "--data: feed name too long", NULL},
    {"--data naming no feed", "model.db", "eval {M} " TEST_DATA " --data pixels=@test-x.npy", 1,
     "'pixels' is not a feed of the signature", "feeds: images, labels"},
    {"--data naming a variable", "model.db",
     "run {M} --data images=@test-x.npy --data hidden/kernel=@test-x.npy", 1,
     "'hidden/kernel' is not a feed", NULL},
    {"--data given twice", "model.db", "eval {M} " TEST_DATA " --data images=@test-x.npy", 1,
     "--data images given twice", NULL},
    {"a feed without --data", "model.db", "eval {M} --data images=@test-x.npy", 1,
     "no --data labels=FILE", "'labels'"},
    {"--data of a missing file", "model.db",
     "eval {M} --data images=@missing.npy --data labels=@test-y.npy", 1, "feed 'images'",
     "missing.npy"},
    {"--data of a directory", "model.db", "run {M} --data images=@", 1, "feed 'images'",
     "not a regular file"},
    {"--data of a text file", "model.db", "run {M} --data images=@junk.txt", 1, "feed 'images'",
     "wrong magic"},
    {"--data of rows of another shape", "model.db",
     "eval {M} --data images=@test-y.npy --data labels=@test-y.npy", 1, "feed 'images'",
     "rows of shape"},
    {"--data of another row count", "model.db",
     "eval {M} --data images=@test-x.npy --data labels=@train-labels.idx", 1, "rows",
     "'labels'"},
    {"--data values an integer feed cannot hold", "model.db",
     "eval {M} --data images=@test-x.npy --data labels=@test-x-col.npy", 1, "feed 'labels'",
     "int32 cannot hold"},
    /* ---- outputs, signatures ---- */
    {"no 'train' signature", "predict-only.db", "eval {M} " TEST_DATA, 1,
     "no 'train' signature", NULL},
    {"an output 'node:index' out of range", "bad-output.db", "run {M} --data images=@test-x.npy",
     1, "output 'probabilities:3'", "not in the graph"},
    {"an output index that is no number", "bad-index.db", "run {M} --data images=@test-x.npy", 1,
     "output 'probabilities:one'", "not in the graph"},
    {"a 'predict' signature without feeds", "no-feeds.db", "run {M} --data images=@test-x.npy",
     1, "the signature has no feeds", NULL},
    {"a 'train' signature without feeds", "no-feeds.db", "eval {M} " TEST_DATA, 1,
     "the signature has no feeds", NULL},
    /* ---- output files ---- */
    {"--out empty", "model.db", "run {M} --data images=@test-x.npy --out=", 2,
     "option --out needs a non-empty value", NULL},
    {"--out under a file", "model.db", "run {M} --data images=@test-x.npy --out @junk.txt/pred",
     1, "--out", "junk.txt/pred"},
    {"plot without -o", "model.db", "plot {M}", 2, "missing -o FILE", NULL},
    {"plot -o empty", "model.db", "plot {M} -o ''", 2, "option -o needs a non-empty value", NULL},
    {"plot of an unknown metric", "model.db", "plot {M} -o @x.svg --metric nosuch", 1,
     "no metric 'nosuch'", NULL},
    {"plot into a missing directory", "trained.db", "plot {M} -o @nodir/x.svg", 1, "nodir/x.svg",
     NULL},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static char tfc_path[PATH_MAX + 32], make_model_path[PATH_MAX + 32];

/* Runs argv with stdout and stderr into files; the wait status, or -1 after LIMIT_S (the
 * child is killed) or when it cannot start. */
static int spawn_wait(char *const *argv, const char *out, const char *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return -1;
    int status = 0;
    for (int ms = 0; ms < LIMIT_S * 1000; ms += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid) return status;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* The case's arguments: split at blanks, {M} -> model, '@' -> the scratch directory + '/',
 * '' -> an empty argument, ' 3' (quoted) -> " 3". argv[0] is the tool; NULL-terminated. */
static int build_argv(const char *args, const char *model, char **argv, int cap)
{
    int n = 0;
    argv[n++] = strdup(tfc_path);
    const char *p = args;
    while (*p && n < cap - 1) {
        while (*p == ' ') p++;
        if (!*p) break;
        char tok[3 * PATH_MAX];
        size_t k = 0;
        int quoted = 0;
        for (; *p && (quoted || *p != ' ') && k + PATH_MAX + 8 < sizeof tok; p++) {
            if (*p == '\'') {
                quoted = !quoted;
            } else if (!strncmp(p, "{M}", 3)) {
                k += (size_t)snprintf(tok + k, sizeof tok - k, "%s", model);
                p += 2;
            } else if (*p == '@') {
                k += (size_t)snprintf(tok + k, sizeof tok - k, "%s/", bad_dir);
            } else {
                tok[k++] = *p;
            }
        }
        tok[k] = 0;
        argv[n++] = strdup(tok);
    }
    argv[n] = NULL;
    return n;
}

static int read_only_command(const char *args)
{
    static const char *const ro[] = {"info ", "eval ", "run ", "plot ", "dot "};
    for (int i = 0; i < 5; i++)
        if (!strncmp(args, ro[i], strlen(ro[i]))) return 1;
    return 0;
}

/* SQLite's integrity check through the library (1: passes, or not a store to check). */
static int integrity_ok(const char *path)
{
    tfc_store *st;
    if (tfc_store_open(path, TFC_STORE_READONLY, &st)) return 1; /* not a store: bytes cover it */
    int64_t bad = -1;
    tfc_status s = tfc_store_query_int(st, "SELECT count(*) FROM pragma_integrity_check "
                                           "WHERE integrity_check <> 'ok'", &bad);
    tfc_store_close(st);
    return s == TFC_OK && bad == 0;
}

/* Runs case i; 1 when it counts as a failure. */
static int run_case(int i, const struct flag_case *c)
{
    char name[64], out[PATH_MAX], err[PATH_MAX];
    snprintf(name, sizeof name, "case-%03d.db", i);
    const char *model = bad_path(name);
    snprintf(out, sizeof out, "%s", bad_path("out"));
    snprintf(err, sizeof err, "%s", bad_path("err"));
    bad_remove_store(model);
    if (c->model && bad_copy_file(bad_path(c->model), model))
        return bad_verdict("flags", i, c->what, 0, 0, "could not copy %s", c->model);
    size_t n = 0;
    unsigned char *before = c->model ? bad_read_file(model, &n) : NULL;
    char *argv[64];
    int argc = build_argv(c->args, model, argv, 64);
    int status = spawn_wait(argv, out, err);
    for (int k = 0; k < argc; k++) free(argv[k]);
    size_t elen;
    char *stderr_text = (char *)bad_read_file(err, &elen);
    if (stderr_text && elen && stderr_text[elen - 1] == '\n') stderr_text[elen - 1] = 0;
    const char *e = stderr_text ? stderr_text : "";
    int exited = status != -1 && WIFEXITED(status), rc = exited ? WEXITSTATUS(status) : -1;
    int wal_ok = !c->model || !read_only_command(c->args) || bad_check_wal_shm(model);
    int same = !c->model || (before && bad_same_bytes(model, before, n));
    int intact = !c->model || integrity_ok(model);
    bad_check_wal_shm(model); /* the integrity check's own open */
    int msg_ok = strstr(e, c->msg) && (!c->msg2 || strstr(e, c->msg2));
    int passed = exited && rc == c->want_rc && msg_ok && same && intact && wal_ok;
    char how[64];
    if (status == -1) snprintf(how, sizeof how, "HUNG OR DID NOT START");
    else if (WIFSIGNALED(status)) snprintf(how, sizeof how, "KILLED BY SIGNAL %d", WTERMSIG(status));
    else snprintf(how, sizeof how, "exit %d", rc);
    int failed = bad_verdict("flags", i, c->what, c->pending, passed, "%s%s%s%s%s[%s] %s",
                             rc != c->want_rc ? "WRONG EXIT STATUS " : "",
                             !msg_ok ? "MESSAGE LACKS THE PROBLEM " : "",
                             !same ? "MODEL BYTES CHANGED " : "",
                             !intact ? "INTEGRITY CHECK FAILS " : "",
                             !wal_ok ? "-wal/-shm LEFT " : "", how, e);
    free(stderr_text);
    free(before);
    bad_remove_store(model);
    return failed;
}

/* ---- the models and data --------------------------------------------------------------------- */

static int run_tool(const char *what, char *const *argv)
{
    int status = spawn_wait(argv, bad_path("setup.out"), bad_path("setup.err"));
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        size_t n;
        char *e = (char *)bad_read_file(bad_path("setup.err"), &n);
        fprintf(stderr, "%s failed: %.*s\n", what, (int)n, e ? e : "");
        free(e);
        return -1;
    }
    return 0;
}

/* A copy of model.db with sql applied. */
static int tampered_copy(const char *name, const char *sql)
{
    tfc_store *st;
    if (bad_copy_file(bad_path("model.db"), bad_path(name)) ||
        tfc_store_open(bad_path(name), 0, &st))
        return -1;
    int rc = tfc_store_exec_sql(st, sql) ? -1 : 0;
    tfc_store_close(st);
    return rc;
}

/* float32 [256, 1] holding 0.5: a labels file whose values int32 cannot hold. */
static int write_fraction_labels(const char *path)
{
    static float half[256];
    for (int i = 0; i < 256; i++) half[i] = 0.5f;
    tfc_value *v;
    if (tfc_value_wrap(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){256, 1}), half, &v)) return -1;
    int rc = tfc_npy_write(path, v) ? -1 : 0;
    tfc_value_destroy(v);
    return rc;
}

/* make_model's model.db, predict-only.db and data; trained.db (one epoch: checkpoints and
 * metrics); the tampered signatures; a text file and an empty file. */
static int suite_init(void)
{
    char build[PATH_MAX];
    if (!getcwd(build, sizeof build)) return -1;
    snprintf(tfc_path, sizeof tfc_path, "%s/src/tfc", build);
    snprintf(make_model_path, sizeof make_model_path, "%s/examples/make_model", build);
    if (access(tfc_path, X_OK) || access(make_model_path, X_OK)) {
        fprintf(stderr, "%s or %s is not built (run from the build directory)\n", tfc_path,
                make_model_path);
        return -1;
    }
    if (bad_dir_create("tfc-bad-flags")) return -1;
    char *mk[] = {make_model_path, bad_dir, NULL};
    if (run_tool("make_model", mk)) return -1;
    if (bad_copy_file(bad_path("model.db"), bad_path("trained.db"))) return -1;
    char images[PATH_MAX + 16], labels[PATH_MAX + 16];
    snprintf(images, sizeof images, "images=%s", bad_path("train-images.idx"));
    snprintf(labels, sizeof labels, "labels=%s", bad_path("train-labels.idx"));
    char *train[] = {tfc_path, "train", (char *)bad_path("trained.db"), "--data", images,
                     "--data", labels, "--batch", "256", "--quiet", NULL};
    if (run_tool("tfc train", train)) return -1;
    if (tampered_copy("bad-output.db", "UPDATE signature_tensors SET tensor = 'probabilities:3' "
                                       "WHERE tensor = 'probabilities'") ||
        tampered_copy("bad-index.db", "UPDATE signature_tensors SET tensor = "
                                      "'probabilities:one' WHERE tensor = 'probabilities'") ||
        tampered_copy("no-feeds.db", "DELETE FROM signature_tensors WHERE role = 'feed'"))
        return -1;
    static const char junk[] = "not a database, just text, long enough to be read as a header\n";
    if (bad_write_file(bad_path("junk.txt"), junk, sizeof junk - 1) ||
        bad_write_file(bad_path("empty.db"), "", 0) ||
        write_fraction_labels(bad_path("test-x-col.npy")))
        return -1;
    return 0;
}

static int suite_clean(void)
{
    bad_dir_remove();
    return 0;
}

/* The harness: the same commands, given good flags, succeed on the same models. */
static void test_good_flags(void)
{
    static const struct flag_case good[] = {
        {"info", "model.db", "info {M}", 0, "", NULL},
        {"dot", "trained.db", "dot {M}", 0, "", NULL},
        {"plot", "trained.db", "plot {M} -o @x.svg", 0, "", NULL},
    };
    for (int i = 0; i < 3; i++) {
        char *argv[64];
        int argc = build_argv(good[i].args, bad_path(good[i].model), argv, 64);
        int status = spawn_wait(argv, bad_path("out"), bad_path("err"));
        for (int k = 0; k < argc; k++) free(argv[k]);
        CU_ASSERT(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        bad_check_wal_shm(bad_path(good[i].model));
    }
}

static void test_bad_flags(void)
{
    int failed = 0;
    printf("\n");
    for (int i = 0; i < N_CASES; i++) failed += run_case(i, &cases[i]);
    bad_summary("test_bad_flags");
    CU_ASSERT_EQUAL(failed, 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("bad flags", suite_init, suite_clean);
    TEST_ADD(test_good_flags);
    TEST_ADD(test_bad_flags);
    return test_main();
}
