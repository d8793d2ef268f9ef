/* ft_trainer.c: the training program that tests/test_killnine starts and kills with SIGKILL
 * (it is started with posix_spawn, so no fork of a StarPU process ever runs).
 *
 *   ft_trainer STORE TARGET OUT [--fd N] [--every K] [--keep K] [--hold-us U]
 *              [--metric-batch M] [--model dropout]
 *
 * A small deterministic model: a 32-48-48-4 ReLU MLP with Adam (learning rate on a cosine of
 * the global step) trained on synthetic data made from a fixed seed, in batches of 32 from a
 * shuffling batcher (64 batches per epoch). It resumes from STORE's latest checkpoint
 * (variables, Adam's slots, the global step, the batcher's position), or starts from the
 * initializers with a checkpoint at step 0 when the store has none; trains to step TARGET with
 * a checkpoint every K steps (10) and one at TARGET, keeping the newest K checkpoints (3); then
 * writes every variable to OUT (through OUT.tmp and a rename), one record each:
 * "name dtype nbytes\n" followed by the raw bytes. Every step logs two metrics: "loss" and
 * "run_start", the step this run started from (so a test can tell which run logged a row);
 * a resume first discards the metrics of the steps after its checkpoint. --metric-batch M
 * hands metrics to the writer every M values (tfc_store_set_metric_batch), so that batches
 * also commit between checkpoints.
 *
 * With --fd N it announces on file descriptor N, one line each (small writes to a pipe are
 * atomic):
 *   R s   the checkpoint of step s is restored (or s = 0 from the initializers): training
 *         starts from step s
 *   B s   the writer thread has begun the transaction of the checkpoint of step s (open)
 *   W s   that transaction has written every row and its COMMIT starts
 *   C s   that transaction has committed
 *   D s   done: trained to step s, OUT written
 * --hold-us U makes the writer thread sleep U microseconds after announcing W, holding the
 * transaction open so that a kill lands inside it. Exit status 0, or 1 with a message.
 *
 * --model dropout trains a small CNN: its first layer a 3x3 convolution with ReLU and 2x2 max
 * pooling (conv_block) instead of the first dense layer, then dropout after each hidden layer (rates 0.3 and 0.2,
 * on the global step, training fed 1) from a model store: the first start builds the graph and
 * saves it with a "train" signature; every start then trains the graph loaded from the store.
 * Each step also logs "probe", 52 bits of a hash of a dropout mask over 256 ones keyed by the
 * global step, and OUT ends with a record "probes int64" holding the probe of every step 1 to
 * TARGET read back from the store, so that a test sees which units each step dropped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../src/tfc.h"
#include "../store/store_testing.h"

#define N_ROWS 2048
#define N_IN 32
#define N_HID 48
#define N_OUT 4
#define BATCH 32
#define DATA_SEED 20240607ull

static int announce_fd = -1;
static long hold_us;

static void announce(char what, int64_t step)
{
    if (announce_fd < 0) return;
    char line[64];
    int n = snprintf(line, sizeof line, "%c %lld\n", what, (long long)step);
    while (write(announce_fd, line, (size_t)n) < 0 && errno == EINTR) {}
}

static void on_txn(void *arg, int64_t step, int phase)
{
    (void)arg;
    if (phase == TFC_STORE_TXN_BEGUN) announce('B', step);
    if (phase == TFC_STORE_TXN_COMMITTING) {
        announce('W', step);
        if (hold_us > 0) {
            struct timespec ts = {hold_us / 1000000, (hold_us % 1000000) * 1000};
            while (nanosleep(&ts, &ts) && errno == EINTR) {}
        }
    }
    if (phase == TFC_STORE_TXN_COMMITTED) announce('C', step);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(splitmix(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* Rows x in [-1, 1)^32 labelled by a random linear teacher plus noise. */
static int make_data(tfc_value **x, tfc_value **y)
{
    uint64_t s = DATA_SEED;
    static float teacher[N_IN * N_OUT];
    for (int i = 0; i < N_IN * N_OUT; i++) teacher[i] = uniform(&s);
    if (tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){N_ROWS, N_IN}), x) ||
        tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){N_ROWS}), y))
        return -1;
    float *xd = tfc_value_data(*x);
    int32_t *yd = tfc_value_data(*y);
    for (int r = 0; r < N_ROWS; r++) {
        for (int i = 0; i < N_IN; i++) xd[r * N_IN + i] = uniform(&s);
        int best = 0;
        float bestv = -1e30f;
        for (int c = 0; c < N_OUT; c++) {
            float v = 0.5f * uniform(&s);
            for (int i = 0; i < N_IN; i++) v += xd[r * N_IN + i] * teacher[i * N_OUT + c];
            if (v > bestv) bestv = v, best = c;
        }
        yd[r] = best;
    }
    return 0;
}

#define N_PARAMS 6
static const char *param_names[N_PARAMS] = {"l1/kernel", "l1/bias", "l2/kernel",
                                            "l2/bias",   "l3/kernel", "l3/bias"};

static tfc_tensor *dense(tfc_graph *g, int layer, tfc_tensor *x, int64_t in, int64_t out)
{
    tfc_tensor *k = tfc_variable(g, param_names[2 * layer], TFC_FLOAT32,
                                 tfc_shape_of(2, (int64_t[]){in, out}),
                                 tfc_init_glorot_uniform((uint64_t)layer + 11));
    tfc_tensor *b = tfc_variable(g, param_names[2 * layer + 1], TFC_FLOAT32,
                                 tfc_shape_of(1, &out), tfc_init_uniform(-0.1, 0.1, layer + 21));
    return tfc_bias_add(g, tfc_matmul(g, x, k, 0, 0), b);
}

/* The dropout model's first layer, a small CNN block: the 32 inputs as 2 channels of 4x4, a
 * 3x3 SAME convolution to 12 channels (l1/kernel [12, 2, 3, 3], l1/bias [12, 1, 1]), ReLU,
 * 2x2 max pooling, flattened to 12 x 2 x 2 = N_HID. */
static tfc_tensor *conv_block(tfc_graph *g, tfc_tensor *x)
{
    tfc_tensor *k = tfc_variable(g, param_names[0], TFC_FLOAT32,
                                 tfc_shape_of(4, (int64_t[]){12, 2, 3, 3}),
                                 tfc_init_glorot_uniform(11));
    tfc_tensor *b = tfc_variable(g, param_names[1], TFC_FLOAT32,
                                 tfc_shape_of(3, (int64_t[]){12, 1, 1}),
                                 tfc_init_uniform(-0.1, 0.1, 21));
    tfc_conv_params cp = {.auto_pad = TFC_CONV_PAD_SAME_UPPER};
    tfc_tensor *img = tfc_reshape(g, x, tfc_shape_of(4, (int64_t[]){-1, 2, 4, 4}));
    tfc_tensor *h = tfc_relu(g, tfc_add(g, tfc_conv(g, img, k, &cp), b));
    tfc_pool_params pp = {.n_spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
    return tfc_flatten(g, tfc_max_pool(g, h, &pp, NULL), 1);
}

static int fail(const char *what, const char *msg)
{
    fprintf(stderr, "ft_trainer: %s: %s\n", what, msg);
    return 1;
}

static int write_probes(tfc_store *st, FILE *f, int64_t target);

/* Every variable (parameters, Adam's slots, the global step) to path, through path.tmp; then,
 * with probes_st, the probes of steps 1..target from that store. */
static int write_variables(tfc_session *s, tfc_graph *g, const char *path, tfc_store *probes_st,
                           int64_t target)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return fail(tmp, strerror(errno));
    int rc = 0;
    for (int i = 0; i < 3 * N_PARAMS + 1 && !rc; i++) {
        char name[128];
        if (i == 3 * N_PARAMS)
            snprintf(name, sizeof name, "global_step");
        else
            snprintf(name, sizeof name, "%s%s", param_names[i / 3],
                     i % 3 == 0 ? "" : i % 3 == 1 ? "/adam_m" : "/adam_v");
        tfc_tensor *t = tfc_graph_find(g, name);
        tfc_value *v = NULL;
        if (!t) {
            rc = fail(name, "no such variable");
        } else if (tfc_session_read_variable(s, t, &v)) {
            rc = fail(name, tfc_session_errmsg(s));
        } else {
            fprintf(f, "%s %s %zu\n", name, tfc_dtype_name(tfc_value_dtype(v)),
                    tfc_value_nbytes(v));
            fwrite(tfc_value_cdata(v), 1, tfc_value_nbytes(v), f);
        }
        tfc_value_destroy(v);
    }
    if (!rc && probes_st) rc = write_probes(probes_st, f, target);
    if (fclose(f) && !rc) rc = fail(tmp, strerror(errno));
    if (!rc && rename(tmp, path)) rc = fail(path, strerror(errno));
    return rc;
}

/* The tensors a training step needs, by role. */
struct model {
    tfc_tensor *x, *y, *training, *loss, *train, *probe, *gstep;
};

/* The 32-48-48-4 MLP and its Adam step; with dropout, a dropout after each hidden layer and
 * the probe. */
static void build_model(tfc_graph *g, int with_dropout, struct model *m)
{
    m->x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, N_IN}));
    m->y = tfc_placeholder(g, "y", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    m->training = with_dropout ? tfc_placeholder(g, "training", TFC_FLOAT32, tfc_shape_of(0, NULL))
                               : NULL;
    tfc_tensor *h = with_dropout ? conv_block(g, m->x) : tfc_relu(g, dense(g, 0, m->x, N_IN, N_HID));
    if (with_dropout) h = tfc_dropout(g, h, 0.3, m->training, NULL, 0);
    h = tfc_relu(g, dense(g, 1, h, N_HID, N_HID));
    if (with_dropout) h = tfc_dropout(g, h, 0.2, m->training, NULL, 0);
    tfc_tensor *logits = dense(g, 2, h, N_HID, N_OUT);
    m->loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, m->y), 0, NULL, 0);
    m->gstep = tfc_global_step(g);
    m->probe = with_dropout ? tfc_dropout(g, tfc_fill(g, tfc_shape_of(1, (int64_t[]){256}),
                                                      TFC_FLOAT32, 1.0), 0.5, m->training,
                                          NULL, 0)
                            : NULL;
    tfc_tensor *params[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++) params[i] = tfc_graph_find(g, param_names[i]);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 0.01);
    adam.lr_tensor = tfc_lr_cosine(g, 0.01, m->gstep, 1000.0, 0.001);
    m->train = tfc_minimize(g, m->loss, N_PARAMS, params, &adam, m->gstep);
}

/* The dropout model from the store at st: built and saved (graph and "train" signature) when
 * the store has none, then always loaded, so that training runs the stored graph. */
static int stored_model(tfc_store *st, tfc_graph **out, struct model *m)
{
    tfc_graph *g = NULL;
    tfc_status rc = tfc_store_load_graph(st, &g);
    if (rc == TFC_ERR_NOT_FOUND) {
        if (tfc_graph_create(&g)) return fail("graph", tfc_errmsg());
        tfc_graph_set_seed(g, 5);
        build_model(g, 1, m);
        if (tfc_graph_status(g)) return fail("graph", tfc_graph_errmsg(g));
        const char *feeds[3] = {"x", "y", "training"}, *metrics[1] = {tfc_tensor_name(m->probe)};
        tfc_signature sig = {3, feeds, 0, NULL, 1, metrics, tfc_tensor_name(m->loss),
                             tfc_tensor_name(m->train)};
        if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "train", &sig))
            return fail("save", tfc_store_errmsg(st));
        tfc_graph_destroy(g);
        g = NULL;
        rc = tfc_store_load_graph(st, &g);
    }
    if (rc) return fail("load_graph", tfc_store_errmsg(st));
    tfc_signature *sig = NULL;
    if (tfc_store_get_signature(st, "train", &sig)) return fail("signature", tfc_store_errmsg(st));
    m->x = tfc_graph_find(g, sig->feeds[0]);
    m->y = tfc_graph_find(g, sig->feeds[1]);
    m->training = tfc_graph_find(g, sig->feeds[2]);
    m->probe = tfc_graph_find(g, sig->metrics[0]);
    m->loss = tfc_graph_find(g, sig->loss);
    m->train = tfc_graph_find(g, sig->train_op);
    m->gstep = tfc_graph_find(g, "global_step");
    tfc_signature_free(sig);
    *out = g;
    if (!m->x || !m->y || !m->training || !m->probe || !m->loss || !m->train || !m->gstep)
        return fail("signature", "a tensor of the stored train signature is missing");
    return 0;
}

/* 52 bits of an FNV-1a hash of v's bytes: a metric (a double) holds it exactly. */
static double probe_hash(const tfc_value *v)
{
    const unsigned char *p = tfc_value_cdata(v);
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < tfc_value_nbytes(v); i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return (double)(h >> 12);
}

/* The probes of steps 1..target from the store, as one more record of the variables' file. */
static int write_probes(tfc_store *st, FILE *f, int64_t target)
{
    fprintf(f, "probes int64 %zu\n", (size_t)target * sizeof(int64_t));
    for (int64_t k = 1; k <= target; k++) {
        char sql[128];
        int64_t v = -1;
        snprintf(sql, sizeof sql, "SELECT value FROM metrics WHERE name = 'probe' AND step = "
                 "%lld", (long long)k);
        if (tfc_store_query_int(st, sql, &v)) return fail("probes", tfc_store_errmsg(st));
        fwrite(&v, sizeof v, 1, f);
    }
    return 0;
}

/* Restores the latest checkpoint of st (or initializes the variables and saves step 0 when
 * there is none) and seeks the batcher; *step is where training starts. */
static int resume(tfc_store *st, tfc_session *s, tfc_batcher *b, const struct model *m,
                  int64_t target, int64_t *step)
{
    int n_ckpt = 0;
    tfc_checkpoint_info *list = NULL;
    if (tfc_store_list_checkpoints(st, &n_ckpt, &list)) return fail("list", tfc_store_errmsg(st));
    free(list);
    *step = 0;
    if (n_ckpt) {
        tfc_restore_report report = {0};
        if (tfc_store_restore(st, s, NULL, &report)) return fail("restore", tfc_store_errmsg(st));
        *step = report.step;
        if (report.position.seed != DATA_SEED)
            return fail("restore", "the checkpoint's input seed is not the data's");
        if (tfc_batcher_seek(b, report.position.epoch, report.position.step))
            return fail("seek", tfc_batcher_errmsg(b));
        tfc_restore_report_clear(&report);
    } else {
        if (tfc_session_init_variables(s)) return fail("init", tfc_session_errmsg(s));
    }
    tfc_value *gv;
    if (tfc_session_read_variable(s, m->gstep, &gv))
        return fail("global_step", tfc_session_errmsg(s));
    int64_t gs = (int64_t)tfc_value_get(gv, 0);
    tfc_value_destroy(gv);
    if (gs != *step) {
        fprintf(stderr, "ft_trainer: the global step %lld is not the checkpoint's step %lld\n",
                (long long)gs, (long long)*step);
        return 1;
    }
    if (*step > target) {
        fprintf(stderr, "ft_trainer: the store is at step %lld, past the target %lld\n",
                (long long)*step, (long long)target);
        return 1;
    }
    /* what a killed run logged after its last checkpoint goes before this run logs again */
    if (tfc_store_truncate_metrics(st, *step) || tfc_store_flush(st))
        return fail("truncate_metrics", tfc_store_errmsg(st));
    announce('R', *step);
    tfc_input_position pos = {.seed = DATA_SEED};
    if (!n_ckpt) {
        tfc_batcher_position(b, &pos.epoch, &pos.step);
        if (tfc_store_checkpoint(st, s, 0, &pos)) return fail("checkpoint", tfc_store_errmsg(st));
    }
    return 0;
}

/* Trains from step to target: metrics every step, a checkpoint every `every` and at target. */
static int train(tfc_store *st, tfc_session *s, tfc_batcher *b, const struct model *m,
                 int64_t step, int64_t target, int64_t every)
{
    const int64_t run_start = step;
    tfc_value *one = NULL;
    if (m->training && tfc_value_scalar(TFC_FLOAT32, 1, &one)) return fail("value", tfc_errmsg());
    tfc_tensor *feeds[3] = {m->x, m->y, m->training}, *fetch[2] = {m->loss, m->probe};
    int rc = 0;
    while (step < target && !rc) {
        tfc_value *in[3] = {NULL, NULL, one}, *got[2] = {NULL, NULL};
        if (tfc_batcher_next(b, in, NULL)) return fail("batch", tfc_batcher_errmsg(b));
        if (tfc_session_run(s, m->training ? 3 : 2, feeds, in, m->probe ? 2 : 1, fetch, got, 1,
                            (tfc_tensor *[]){m->train}))
            return fail("step", tfc_session_errmsg(s));
        step++;
        double l = tfc_value_get(got[0], 0), probe = got[1] ? probe_hash(got[1]) : 0;
        tfc_value_destroy(got[0]);
        tfc_value_destroy(got[1]);
        if (tfc_store_log_metric(st, step, "loss", l) ||
            tfc_store_log_metric(st, step, "run_start", (double)run_start) ||
            (m->probe && tfc_store_log_metric(st, step, "probe", probe)))
            rc = fail("log_metric", tfc_store_errmsg(st));
        if (!rc && (step % every == 0 || step == target)) {
            tfc_input_position pos = {.seed = DATA_SEED};
            tfc_batcher_position(b, &pos.epoch, &pos.step);
            if (tfc_store_checkpoint(st, s, step, &pos))
                rc = fail("checkpoint", tfc_store_errmsg(st));
        }
    }
    tfc_value_destroy(one);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: ft_trainer STORE TARGET OUT [--fd N] [--every K] [--keep K] "
                        "[--hold-us U] [--metric-batch M] [--model dropout]\n");
        return 2;
    }
    const char *store_path = argv[1], *out_path = argv[3];
    int64_t target = atoll(argv[2]), every = 10;
    int keep = 3, with_dropout = 0;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--fd")) announce_fd = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--every")) every = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--keep")) keep = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hold-us")) hold_us = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--metric-batch")) tfc_store_set_metric_batch(atoi(argv[i + 1]));
        else if (!strcmp(argv[i], "--model") && !strcmp(argv[i + 1], "dropout")) with_dropout = 1;
        else return fail(argv[i], "unknown option or value");
    }
    if (target < 1 || every < 1) return fail("arguments", "TARGET and --every must be >= 1");

    tfc_value *x = NULL, *y = NULL;
    if (make_data(&x, &y)) return fail("data", tfc_errmsg());
    tfc_store *st;
    if (tfc_store_open(store_path, TFC_STORE_CREATE, &st)) return fail("open", tfc_errmsg());
    tfc_graph *g = NULL;
    struct model m = {0};
    if (with_dropout) {
        if (stored_model(st, &g, &m)) return 1;
    } else {
        if (tfc_graph_create(&g)) return fail("graph", tfc_errmsg());
        tfc_graph_set_seed(g, 5);
        build_model(g, 0, &m);
    }
    if (tfc_graph_status(g)) return fail("graph", tfc_graph_errmsg(g));

    tfc_ctx *ctx;
    tfc_session *s;
    if (tfc_ctx_create(&ctx)) return fail("context", tfc_errmsg());
    if (tfc_session_create(ctx, g, &s)) return fail("session", tfc_errmsg());
    tfc_store_set_txn_hook(st, on_txn, NULL);
    if (tfc_store_set_retention(st, keep, 0)) return fail("retention", tfc_store_errmsg(st));
    tfc_batcher *b;
    if (tfc_batcher_create(2, (tfc_value *[]){x, y}, BATCH, DATA_SEED, TFC_BATCHER_SHUFFLE, &b))
        return fail("batcher", tfc_errmsg());

    int64_t step = 0;
    if (resume(st, s, b, &m, target, &step) || train(st, s, b, &m, step, target, every))
        return 1;
    if (tfc_store_flush(st)) return fail("flush", tfc_store_errmsg(st));
    if (write_variables(s, g, out_path, with_dropout ? st : NULL, target)) return 1;
    tfc_batcher_destroy(b);
    tfc_store_close(st);
    announce('D', target);
    tfc_session_destroy(s);
    tfc_ctx_destroy(ctx);
    tfc_graph_destroy(g);
    tfc_value_destroy(x);
    tfc_value_destroy(y);
    return 0;
}
