/* export.c: `tfc export MODEL.db MODEL.onnx [--with-variables]`: the "predict" signature's
 * graph as an ONNX model (opset 17) that ONNX Runtime and other frameworks run. Variables
 * become graph inputs, or with --with-variables initializers holding the values of the
 * store's latest checkpoint. */
#include <stdlib.h>
#include <string.h>
#include "tool.h"

static const char export_usage[] =
    "usage: tfc export MODEL.db MODEL.onnx [--with-variables]\n\n"
    "Writes the \"predict\" signature of a model store (its feeds, the part of the graph its\n"
    "outputs need) as an ONNX model, opset 17: feeds become graph inputs, constants\n"
    "initializers; an unfed training flag is its default (dropout and batch norm export in\n"
    "inference mode). An op with no ONNX form (optimizer updates, gradients, control flow)\n"
    "is an error naming it.\n"
    "  --with-variables   variables become initializers holding the latest checkpoint's\n"
    "                     values (the store needs one); without it they are graph inputs\n"
    "MODEL.onnx is overwritten.\n";

static int parse(int argc, char **argv, const char **db, const char **onnx, int *with_vars)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(export_usage, stdout);
            return -1;
        }
        if (!strcmp(argv[i], "--with-variables")) {
            *with_vars = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "tfc export: unknown option '%s' (--with-variables, --help)\n",
                    argv[i]);
            return TOOL_USAGE;
        } else if (n_pos < 2) {
            *(n_pos++ ? onnx : db) = argv[i];
        } else {
            fprintf(stderr, "tfc export: one store and one ONNX file are expected, '%s' is a "
                            "third argument\n", argv[i]);
            return TOOL_USAGE;
        }
    }
    if (n_pos != 2) {
        fprintf(stderr, "tfc export: %s\n%s", n_pos ? "MODEL.onnx is missing" : "MODEL.db and "
                "MODEL.onnx are missing", export_usage);
        return TOOL_USAGE;
    }
    return 0;
}

/* The store has a checkpoint (--with-variables exports its values); prints why not. */
static int has_checkpoint(struct tool_model *m, const char *db)
{
    int n = 0;
    tfc_checkpoint_info *list = NULL;
    if (tfc_store_list_checkpoints(m->store, &n, &list))
        return tool_error("export", "%s: %s", db, tfc_store_errmsg(m->store)), 0;
    free(list);
    if (n == 0)
        tool_error("export", "%s has no checkpoint: --with-variables exports the latest "
                             "checkpoint's values (train the model first, or export without "
                             "the option: variables then become graph inputs)", db);
    return n > 0;
}

int cmd_export(int argc, char **argv)
{
    const char *db = NULL, *onnx = NULL;
    int with_vars = 0;
    int rc = parse(argc, argv, &db, &onnx, &with_vars);
    if (rc) return rc;
    struct tool_model m;
    if (tool_model_open("export", db, 0, 0, &m)) return TOOL_FAIL;
    tfc_signature *sig = NULL;
    tfc_restore_report report = {0};
    rc = TOOL_FAIL;
    if (tool_signature("export", &m, db, "predict", &sig)) {
        /* printed */
    } else if (with_vars && !has_checkpoint(&m, db)) {
        /* printed */
    } else if (with_vars && tfc_ctx_create(&m.ctx)) {
        m.ctx = NULL;
        tool_error("export", "cannot start the runtime: %s", tfc_errmsg());
    } else if (with_vars && tfc_session_create(m.ctx, m.graph, &m.session)) {
        m.session = NULL;
        tool_error("export", "%s: %s", db, tfc_errmsg());
    } else if (with_vars && tool_restore_or_init("export", &m, &report) < 0) {
        /* printed */
    } else {
        tfc_onnx_export_options o = {.variables = m.session};
        if (tfc_onnx_export(m.graph, sig, &o, onnx)) {
            tool_error("export", "%s", tfc_errmsg());
        } else {
            printf("exported the \"predict\" signature of %s to %s (opset 17): %d inputs, "
                   "%d outputs, variables as %s\n", db, onnx, sig->n_feeds, sig->n_outputs,
                   with_vars ? "initializers" : "graph inputs");
            if (with_vars) printf("variables from the checkpoint of step %lld\n",
                                  (long long)report.step);
            rc = TOOL_OK;
        }
    }
    tfc_restore_report_clear(&report);
    tfc_signature_free(sig);
    tool_model_close(&m);
    return rc;
}
