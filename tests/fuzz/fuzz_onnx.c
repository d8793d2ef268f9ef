/* fuzz_onnx.c: libFuzzer target of the ONNX reader and importer (tfc_onnx_import: protobuf-c's
 * parse, the checks on the model, tensors read from raw_data and typed fields, every op
 * mapping, If and Loop subgraphs, folding at import time). A failure must be a status with a
 * message (the contract of fuzz_common.h) and give no model; a success must give a "predict"
 * signature whose feeds and outputs are tensors of the graph, and importing the same file with
 * trainable variables must succeed too. Seeds: small models of ONNX's node tests. */
#include "fuzz_common.h"
#include "../../onnx/onnx_import.h"

/* Imports path into a new graph; checks the contract; returns the status. */
static tfc_status import_once(const char *path, int trainable)
{
    tfc_graph *g;
    if (tfc_graph_create(&g)) fuzz_die("tfc_graph_create: %s", tfc_errmsg());
    tfc_onnx_options o = {.trainable = trainable};
    tfc_onnx_model *m = (tfc_onnx_model *)&m; /* must come back NULL on failure */
    fuzz_clear_errmsg();
    tfc_status st = tfc_onnx_import(g, path, &o, &m);
    if (st) {
        fuzz_check_failure("tfc_onnx_import", st, tfc_graph_errmsg(g), NULL);
        if (m) fuzz_die("tfc_onnx_import failed (%s) but *out is not NULL", tfc_graph_errmsg(g));
    } else {
        if (!m || !m->predict) fuzz_die("tfc_onnx_import succeeded without a model or signature");
        const tfc_signature *sig = m->predict;
        for (int i = 0; i < sig->n_feeds + sig->n_outputs; i++) {
            const char *name = i < sig->n_feeds ? sig->feeds[i] : sig->outputs[i - sig->n_feeds];
            if (!name || !tfc_graph_find(g, name))
                fuzz_die("signature name %d '%s' is not a tensor of the graph", i,
                         name ? name : "(null)");
        }
        for (int i = 0; i < m->n_variables; i++)
            if (!m->variables[i] || !m->values[i]) fuzz_die("variable %d without a value", i);
        if (tfc_graph_status(g)) fuzz_die("import succeeded, the graph has an error");
    }
    tfc_onnx_model_free(st ? NULL : m);
    tfc_graph_destroy(g);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("model.onnx", data, size);
    if (import_once(path, 0) == TFC_OK && import_once(path, 1) != TFC_OK)
        fuzz_die("the model imports with constants but not with trainable variables");
    return 0;
}
