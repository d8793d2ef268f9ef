/* import.c: `tfc import MODEL.onnx MODEL.db [--trainable]`: an ONNX model into a new model
 * store (its graph and a "predict" signature of the graph's inputs and outputs), so that
 * `tfc info` and `tfc run` work on it. With --trainable the float initializers become
 * trainable variables, whose values are stored as the checkpoint of step 0. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tool.h"

static const char import_usage[] =
    "usage: tfc import MODEL.onnx MODEL.db [--trainable]\n\n"
    "Imports an ONNX model (opsets up to 17; the op types of the README's list) into a new\n"
    "model store: graph inputs become placeholders, initializers constants, and the graph's\n"
    "inputs and outputs the \"predict\" signature that `tfc run` uses. Value-dependent\n"
    "arguments (Reshape's shape, Slice's bounds, ...) must be constants in the model.\n"
    "  --trainable   float initializers become trainable variables (stored as the\n"
    "                checkpoint of step 0) instead of constants\n"
    "MODEL.db must not exist yet.\n";

static int parse(int argc, char **argv, const char **onnx, const char **db, int *trainable)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(import_usage, stdout);
            return -1;
        }
        if (!strcmp(argv[i], "--trainable")) {
            *trainable = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "tfc import: unknown option '%s' (--trainable, --help)\n", argv[i]);
            return TOOL_USAGE;
        } else if (n_pos < 2) {
            *(n_pos++ ? db : onnx) = argv[i];
        } else {
            fprintf(stderr, "tfc import: one ONNX file and one store are expected, '%s' is a "
                            "third argument\n", argv[i]);
            return TOOL_USAGE;
        }
    }
    if (n_pos != 2) {
        fprintf(stderr, "tfc import: %s\n%s", n_pos ? "MODEL.db is missing" : "MODEL.onnx and "
                "MODEL.db are missing", import_usage);
        return TOOL_USAGE;
    }
    return 0;
}

/* With --trainable: the variables' initializer values as the checkpoint of step 0. */
static int store_variables(tfc_store *st, tfc_graph *g, const tfc_onnx_model *m)
{
    tfc_ctx *ctx = NULL;
    tfc_session *s = NULL;
    int rc = TOOL_FAIL;
    if (tfc_ctx_create(&ctx)) {
        tool_error("import", "starting the runtime: %s", tfc_errmsg());
    } else if (tfc_session_create(ctx, g, &s)) {
        tool_error("import", "session: %s", tfc_errmsg());
    } else if (tfc_session_init_variables(s) || tfc_onnx_init_variables(s, m)) {
        tool_error("import", "setting the variables: %s", tfc_session_errmsg(s));
    } else if (tfc_store_checkpoint(st, s, 0, NULL) || tfc_store_flush(st)) {
        tool_error("import", "checkpoint: %s", tfc_store_errmsg(st));
    } else {
        rc = TOOL_OK;
    }
    tfc_session_destroy(s);
    tfc_ctx_destroy(ctx);
    return rc;
}

int cmd_import(int argc, char **argv)
{
    const char *onnx = NULL, *db = NULL;
    int trainable = 0;
    int rc = parse(argc, argv, &onnx, &db, &trainable);
    if (rc) return rc;
    if (access(db, F_OK) == 0)
        return tool_error("import", "'%s' exists: importing writes a new store (remove it, or "
                                    "name another file)", db);
    tfc_graph *g = NULL;
    tfc_onnx_model *m = NULL;
    tfc_store *st = NULL;
    tfc_onnx_options o = {.trainable = trainable};
    if (tfc_graph_create(&g)) return tool_error("import", "%s", tfc_errmsg());
    rc = TOOL_FAIL;
    if (tfc_onnx_import(g, onnx, &o, &m)) {
        tool_error("import", "%s", tfc_graph_errmsg(g));
    } else if (tfc_store_open(db, TFC_STORE_CREATE, &st)) {
        tool_error("import", "%s", tfc_errmsg());
    } else if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "predict", m->predict)) {
        tool_error("import", "%s", tfc_store_errmsg(st));
    } else if (m->n_variables == 0 || store_variables(st, g, m) == TOOL_OK) {
        printf("imported %s (opset %lld) into %s: %d nodes, %d inputs, %d outputs, %d variables\n",
               onnx, (long long)m->opset, db, tfc_graph_num_nodes(g), m->predict->n_feeds,
               m->predict->n_outputs, m->n_variables);
        rc = TOOL_OK;
    }
    tfc_store_close(st);
    if (rc && st) unlink(db); /* no half-written store left behind */
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g);
    return rc;
}
