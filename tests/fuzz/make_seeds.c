/* make_seeds.c: writes the store seeds of the fuzz targets (built by scripts/fuzz.sh, run by
 * hand when the model or the schema changes):
 *
 *   make_seeds OUT.db          the model of fuzz_model.h: graph, "train" and "predict"
 *                              signatures, checkpoints of steps 1 and 2, a metric
 *   make_seeds --compact DB    rewrites a store in place as small as SQLite makes it
 *                              (512-byte pages, rollback journal), e.g. examples/make_model's
 *   make_seeds --attrs DIR     one input of fuzz_attrs per op: the op, float32 [2, 3]
 *                              inputs, its default attributes as the store writes them
 *
 * tests/fuzz/corpus/fuzz_checkpoint/model.db is the first (scripts/fuzz.sh gives both store
 * targets the seeds of both), fuzz_store_graph/mlp.db is make_model's model.db compacted. */
#include <unistd.h>
#include "fuzz_common.h"
#include "fuzz_model.h"
#include "../../graph/serialize.h"
#include "../../store/store_testing.h"

static int fail(const char *what, const char *msg)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, msg);
    return 1;
}

/* Small files: every table takes at least one page, so the page size is what counts. */
static int compact(const char *path)
{
    tfc_store *st;
    if (tfc_store_open(path, TFC_STORE_EXCLUSIVE, &st)) return fail(path, tfc_errmsg());
    int rc = tfc_store_exec_sql(st, "PRAGMA journal_mode=DELETE") ||
             tfc_store_exec_sql(st, "PRAGMA page_size=512") || tfc_store_exec_sql(st, "VACUUM");
    if (rc) fail(path, tfc_store_errmsg(st));
    tfc_store_close(st);
    return rc;
}

/* One SGD step on a batch of 2, so that the second checkpoint differs from the first. */
static int train_step(tfc_session *s, tfc_graph *g)
{
    tfc_value *feeds[2];
    tfc_tensor *in[2] = {tfc_graph_find(g, "x"), tfc_graph_find(g, "labels")};
    tfc_tensor *train = tfc_graph_find(g, "train");
    float x[8] = {0.5f, -1, 2, 0.25f, 1, 1, -0.5f, 0};
    int32_t y[2] = {2, 0};
    tfc_value_from_data(TFC_FLOAT32, FUZZ_SHAPE(2, 4), x, &feeds[0]);
    tfc_value_from_data(TFC_INT32, FUZZ_SHAPE(2), y, &feeds[1]);
    tfc_status st = tfc_session_run(s, 2, in, feeds, 0, NULL, NULL, 1, &train);
    tfc_value_destroy(feeds[0]);
    tfc_value_destroy(feeds[1]);
    return st ? fail("train step", tfc_session_errmsg(s)) : 0;
}

static int save(tfc_store *st, tfc_ctx *ctx, tfc_graph *g)
{
    const char *feeds[2] = {"x", "labels"}, *outputs[1] = {"probabilities"};
    const char *metrics[1] = {"loss"};
    tfc_signature train = {.n_feeds = 2, .feeds = feeds, .n_metrics = 1, .metrics = metrics,
                           .loss = "loss", .train_op = "train"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 1, .outputs = outputs};
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "train", &train) ||
        tfc_store_set_signature(st, "predict", &predict))
        return fail("save", tfc_store_errmsg(st));
    tfc_session *s;
    if (tfc_session_create(ctx, g, &s)) return fail("session", tfc_errmsg());
    tfc_input_position pos = {.seed = 11, .epoch = 0, .step = 1};
    int rc = tfc_session_init_variables(s) ? fail("init", tfc_session_errmsg(s)) : 0;
    if (!rc && tfc_store_checkpoint(st, s, 1, &pos)) rc = fail("checkpoint", tfc_store_errmsg(st));
    if (!rc) rc = train_step(s, g);
    pos.step = 2;
    if (!rc && tfc_store_checkpoint(st, s, 2, &pos)) rc = fail("checkpoint", tfc_store_errmsg(st));
    if (!rc && tfc_store_log_metric(st, 2, "loss", 1.25)) rc = fail("metric", tfc_store_errmsg(st));
    if (!rc && tfc_store_flush(st)) rc = fail("flush", tfc_store_errmsg(st));
    tfc_session_destroy(s);
    return rc;
}

/* DIR/<op>: byte 0 the op's index, byte 1 two inputs for a variadic op, bytes 2..5 float32
 * [2, 3] (fuzz_attrs.c's shape 2), then the default attributes as text. */
static int attrs_seeds(const char *dir)
{
    for (int i = 0; i < tfc_op_table_size; i++) {
        const struct tfc_op *op = tfc_op_table[i];
        struct tfc_kattr attrs[TFC_MAX_ATTRS];
        uint8_t seed[6 + 1024] = {(uint8_t)i, 1, 2 << 3, 2 << 3, 2 << 3, 2 << 3};
        tfc_attrs_default(op, attrs);
        tfc_attrs_format(op, attrs, (char *)seed + 6, sizeof seed - 6);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, op->name);
        FILE *f = fopen(path, "wb");
        size_t n = 6 + strlen((char *)seed + 6);
        if (!f || fwrite(seed, 1, n, f) != n || fclose(f)) return fail(path, "cannot write");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--compact")) return compact(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--attrs")) return attrs_seeds(argv[2]);
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: make_seeds OUT.db | --compact DB | --attrs DIR\n");
        return 2;
    }
    tfc_graph *g = fuzz_model_build();
    if (!g || tfc_graph_status(g)) return fail("graph", g ? tfc_graph_errmsg(g) : tfc_errmsg());
    unlink(argv[1]);
    tfc_ctx *ctx;
    tfc_store *st;
    if (tfc_ctx_create(&ctx)) return fail("context", tfc_errmsg());
    if (tfc_store_open(argv[1], TFC_STORE_CREATE, &st)) return fail(argv[1], tfc_errmsg());
    int rc = save(st, ctx, g);
    tfc_store_close(st);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    return rc ? rc : compact(argv[1]);
}
