/* fuzz_store_graph.c: libFuzzer target of loading a model from a store file, without StarPU:
 * the input is the SQLite file, opened read-only as a program that predicts opens it
 * (tfc_store_open), then the graph (tfc_store_load_graph: nodes, attributes, inputs, control
 * edges, constants' chunks), the signatures and the list of checkpoints. Every failure must be
 * a status with a message (naming the file, for the open and the graph), and a loaded graph
 * must be whole: every node exports to a record again. The custom mutator of store_mutator.h
 * changes rows as well as bytes. */
#include "fuzz_common.h"
#include "store_mutator.h"
#include "../../graph/serialize.h"

/* What the custom mutator changes: every column the load path reads (attrs three times as
 * often: it is the richest). */
static const struct fuzz_column columns[] = {
    {"nodes", "id"}, {"nodes", "name"}, {"nodes", "op"}, {"nodes", "attrs"}, {"nodes", "attrs"},
    {"nodes", "attrs"}, {"nodes", "init"}, {"nodes", "init_a"}, {"nodes", "init_b"},
    {"nodes", "init_seed"}, {"node_inputs", "node"}, {"node_inputs", "pos"},
    {"node_inputs", "tensor"}, {"node_controls", "node"}, {"node_controls", "control"},
    {"node_data", "node"}, {"node_data", "seq"}, {"node_data", "data"}, {"graph", "seed"},
    {"graph", "n_nodes"}, {"signatures", "name"}, {"signatures", "loss"},
    {"signatures", "train_op"}, {"signature_tensors", "tensor"}, {"signature_tensors", "pos"},
    {"signature_tensors", "role"}, {"checkpoints", "step"}, {"checkpoints", "n_variables"},
    {"meta", "value"},
};

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    return fuzz_store_mutate(data, size, max_size, seed, columns,
                             sizeof columns / sizeof *columns);
}

/* A loaded graph: every node exports (the store's save path) and names its inputs. */
static void check_graph(tfc_graph *g)
{
    int n = tfc_graph_num_nodes(g);
    for (int i = 0; i < n; i++) {
        struct tfc_node_record rec;
        if (tfc_graph_export_node(g, i, &rec)) fuzz_die("export of loaded node %d", i);
        for (int k = 0; k < rec.n_inputs; k++)
            if (!tfc_graph_find(g, rec.inputs[k]))
                fuzz_die("loaded node '%s': input '%s' is not in the graph", rec.name,
                         rec.inputs[k]);
        tfc_node_record_clear(&rec);
    }
}

static void load_signature(tfc_store *st, const char *name)
{
    tfc_signature *sig = (tfc_signature *)&sig;
    tfc_status rc = tfc_store_get_signature(st, name, &sig);
    if (rc) {
        fuzz_check_failure("tfc_store_get_signature", rc, tfc_store_errmsg(st), NULL);
        return;
    }
    if (!sig) fuzz_die("tfc_store_get_signature succeeded with *out NULL");
    tfc_signature_free(sig);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("model.db", data, size);
    tfc_store *st = (tfc_store *)&st;
    fuzz_clear_errmsg();
    tfc_status rc = tfc_store_open(path, TFC_STORE_READONLY, &st);
    if (rc) {
        fuzz_check_failure("tfc_store_open", rc, tfc_errmsg(), path);
        if (st) fuzz_die("tfc_store_open failed (%s) but *out is not NULL", tfc_errmsg());
        fuzz_remove_files(path);
        return 0;
    }
    tfc_graph *g = (tfc_graph *)&g;
    rc = tfc_store_load_graph(st, &g);
    if (rc) {
        fuzz_check_failure("tfc_store_load_graph", rc, tfc_store_errmsg(st), path);
        if (g) fuzz_die("tfc_store_load_graph failed (%s) but *out is not NULL",
                        tfc_store_errmsg(st));
    } else {
        if (!g) fuzz_die("tfc_store_load_graph succeeded with *out NULL");
        check_graph(g);
        tfc_graph_destroy(g);
    }
    load_signature(st, "train");
    load_signature(st, "predict");
    int n = -1;
    tfc_checkpoint_info *list = NULL;
    rc = tfc_store_list_checkpoints(st, &n, &list);
    if (rc) fuzz_check_failure("tfc_store_list_checkpoints", rc, tfc_store_errmsg(st), NULL);
    else if (n < 0 || (n > 0 && !list)) fuzz_die("list_checkpoints: %d and %p", n, (void *)list);
    free(list);
    tfc_store_close(st);
    fuzz_remove_files(path);
    return 0;
}
