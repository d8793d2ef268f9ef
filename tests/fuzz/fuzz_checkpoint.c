/* fuzz_checkpoint.c: libFuzzer target of restoring a checkpoint from a store file into a
 * session (tfc_store_restore: the checkpoint row, the variables' dtypes, shapes and byte
 * counts, the chunks and their CRCs). The context, the graph (fuzz_model.h, the model of the
 * seed store) and the session are made once; each input is opened read-only and restored
 * twice: the latest checkpoint, all variables; then the oldest listed, a subset through a
 * name map with allow_missing.
 * Checked: a failure is a status with a message and leaves every variable as it was (the
 * contract of tfc_store_restore: everything is read and checked before the first write); a
 * success reports the restored step, and no missing variable unless allowed. The custom
 * mutator of store_mutator.h changes rows as well as bytes. */
#include "fuzz_common.h"
#include "fuzz_model.h"
#include "store_mutator.h"

/* What the custom mutator changes: every column a restore reads. */
static const struct fuzz_column columns[] = {
    {"checkpoints", "id"}, {"checkpoints", "step"}, {"checkpoints", "n_variables"},
    {"checkpoints", "bytes"}, {"checkpoints", "input_seed"}, {"variables", "id"},
    {"variables", "checkpoint"}, {"variables", "name"}, {"variables", "dtype"},
    {"variables", "shape"}, {"variables", "shape"}, {"variables", "nbytes"},
    {"variable_chunks", "variable"}, {"variable_chunks", "seq"}, {"variable_chunks", "data"},
    {"variable_chunks", "data"},
};

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return fuzz_store_mutate(data, size, max_size, seed, columns,
                             sizeof columns / sizeof *columns);
}

static tfc_ctx *ctx;
static tfc_graph *graph;
static tfc_session *session;
static tfc_tensor *vars[16];
static int n_vars;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("STARPU_SILENT", "1", 0);
    setenv("STARPU_WORKERS_NOBIND", "1", 0);
    setenv("STARPU_NCPU", "1", 0);
    graph = fuzz_model_build();
    if (!graph || tfc_graph_status(graph))
        fuzz_die("the model: %s", graph ? tfc_graph_errmsg(graph) : tfc_errmsg());
    if (tfc_ctx_create(&ctx) || tfc_session_create(ctx, graph, &session))
        fuzz_die("the session: %s", tfc_errmsg());
    if (tfc_session_init_variables(session))
        fuzz_die("init: %s", tfc_session_errmsg(session));
    static const char *const names[] = {"w", "b", "b_copy", "scale", "count", "mask", "flag",
                                         "global_step"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(vars[n_vars++] = tfc_graph_find(graph, names[i])))
            fuzz_die("the model has no variable '%s'", names[i]);
    return 0;
}

/* Every variable's value now (to compare after a failed restore). */
static void snapshot(tfc_value **values)
{
    if (tfc_session_read_variables(session, n_vars, vars, values))
        fuzz_die("read_variables: %s", tfc_session_errmsg(session));
}

static void check_unchanged(tfc_value **before, const char *what, const char *msg)
{
    tfc_value *after[16];
    snapshot(after);
    for (int i = 0; i < n_vars; i++) {
        if (memcmp(tfc_value_cdata(before[i]), tfc_value_cdata(after[i]),
                   tfc_value_nbytes(before[i])))
            fuzz_die("%s failed (%s) but changed variable '%s'", what, msg,
                     tfc_tensor_name(vars[i]));
        tfc_value_destroy(after[i]);
    }
}

/* One restore with opt; the contract checked either way. */
static void restore(tfc_store *st, const tfc_restore_options *opt, const char *what)
{
    tfc_value *before[16];
    snapshot(before);
    tfc_restore_report report;
    tfc_status rc = tfc_store_restore(st, session, opt, &report);
    if (rc) {
        fuzz_check_failure(what, rc, tfc_store_errmsg(st), NULL);
        check_unchanged(before, what, tfc_store_errmsg(st));
        if (report.n_missing || report.n_extra || report.missing || report.extra)
            fuzz_die("%s failed (%s) with a report", what, tfc_store_errmsg(st));
    } else {
        if (opt && opt->step >= 0 && report.step != opt->step)
            fuzz_die("%s of step %lld restored step %lld", what, (long long)opt->step,
                     (long long)report.step);
        if (report.n_missing && !(opt && opt->allow_missing))
            fuzz_die("%s succeeded with %d missing variables", what, report.n_missing);
        tfc_restore_report_clear(&report);
    }
    for (int i = 0; i < n_vars; i++) tfc_value_destroy(before[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("model.db", data, size);
    tfc_store *st;
    fuzz_clear_errmsg();
    tfc_status rc = tfc_store_open(path, TFC_STORE_READONLY, &st);
    if (rc) {
        fuzz_check_failure("tfc_store_open", rc, tfc_errmsg(), path);
        fuzz_remove_files(path);
        return 0;
    }
    restore(st, NULL, "restore of the latest checkpoint");
    int n = 0;
    tfc_checkpoint_info *list = NULL;
    if (!tfc_store_list_checkpoints(st, &n, &list) && n > 0) {
        static const char *const names[] = {"w", "b_copy", "flag", "global_step"};
        static const char *const from[] = {NULL, "b", "mask", NULL};
        tfc_restore_options opt = {.step = list[0].step, .n_names = 4, .names = names,
                                   .from = from, .allow_missing = 1};
        restore(st, &opt, "restore of the oldest checkpoint through a name map");
    }
    free(list);
    tfc_store_close(st);
    fuzz_remove_files(path);
    return 0;
}
