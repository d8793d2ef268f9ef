/* rnn_step.c: the training step of the Fashion-MNIST RNN (examples/rnn_model.c: each image as
 * 28 rows of 28 pixels, an LSTM of 128 units, a dense layer of 10 on its last state; Adam at a
 * constant learning rate) at batch 128 on Fashion-MNIST through the library's batcher.
 * Measures the ms per step (tfc_session_run with the loss fetched and the train op as target):
 * median, 10th and 90th percentiles of --steps timed steps after --warmup steps, and the
 * GFLOP/s that the median gives with the step's matmul FLOP count (rnn_train_step_flops).
 * The last line is machine-readable:
 *   tfc rnn_step_ms_median=... p10=... p90=... gflop_per_step=... gflops=... batch=...
 *       workers=...
 *
 *   rnn_step [--steps N] [--warmup N] [--batch B] [--seed S] [--data DIR] [--workers N]
 *
 * --workers N sets STARPU_NCPU (StarPU's CPU workers; default: StarPU's choice) before StarPU
 * starts. The time loop is the layer's default mode (unrolled until while_loop has gradients).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../examples/rnn_model.h"
#include "../examples/mlp_model.h" /* mlp_load_fashion_mnist */
#include "benchutil.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "rnn_step: %s: %s\n", what, msg);
    exit(1);
}

struct options {
    int steps, warmup;
    int64_t batch;
    uint64_t seed;
    const char *data, *workers;
};

static int positive(const char *v) { return atoi(v) >= 1; }

static void parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.steps = 20, .warmup = 3, .batch = 128, .seed = 1, .data = DEFAULT_DATA};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", "rnn_step [--steps N] [--warmup N] [--batch B] [--seed S] "
                             "[--data DIR] [--workers N]");
        if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--batch")) o->batch = atoll(v);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--workers") && positive(v)) o->workers = v;
        else die("unknown option or bad value", a);
        i++;
    }
    if (o->steps < 1 || o->warmup < 0 || o->batch < 1) die("usage", "bad value");
}

int main(int argc, char **argv)
{
    struct options o;
    parse(argc, argv, &o);
    if (o.workers) setenv("STARPU_NCPU", o.workers, 1);
    tfc_value *sources[2];
    if (mlp_load_fashion_mnist(o.data, "train", &sources[0], &sources[1]))
        die("data", tfc_errmsg());
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) die("context", tfc_errmsg());
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, o.seed);
    struct rnn_model m;
    rnn_model_build(g, TFC_UINT8, TFC_RNN_MODE_DEFAULT, &m);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
    tfc_tensor *train = tfc_minimize(g, m.loss, 0, NULL, &adam, tfc_global_step(g));
    tfc_session *s;
    if (tfc_graph_status(g)) die("graph", tfc_graph_errmsg(g));
    if (tfc_session_create(ctx, g, &s) || tfc_session_init_variables(s)) die("session", tfc_errmsg());
    tfc_batcher *batches;
    if (tfc_batcher_create(2, sources, o.batch, o.seed,
                           TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, &batches))
        die("batcher", tfc_errmsg());
    tfc_tensor *feeds[2] = {m.images, m.labels};
    double *t = malloc(sizeof(double) * (size_t)o.steps), first = 0, last = 0;
    if (!t) die("memory", "no memory for the step times");
    for (int i = 0; i < o.warmup + o.steps; i++) {
        tfc_value *fv[2], *lv;
        if (tfc_batcher_next(batches, fv, NULL)) die("batcher", tfc_batcher_errmsg(batches));
        double t0 = bench_now();
        if (tfc_session_run(s, 2, feeds, fv, 1, &m.loss, &lv, 1, &train))
            die("run", tfc_session_errmsg(s));
        double dt = bench_now() - t0;
        if (i >= o.warmup) t[i - o.warmup] = dt;
        last = tfc_value_get(lv, 0);
        if (i == 0) first = last;
        tfc_value_destroy(lv);
    }
    double med = bench_quantile(t, o.steps, 0.5) * 1e3, p10 = bench_quantile(t, o.steps, 0.1) * 1e3;
    double p90 = bench_quantile(t, o.steps, 0.9) * 1e3, flop = rnn_train_step_flops(o.batch);
    double load[3];
    bench_load_average(load);
    printf("RNN training step, batch %lld: median %.1f ms (p10 %.1f, p90 %.1f) over %d steps "
           "after %d warm-up; %.2f GFLOP per step, %.1f GFLOP/s; loss %.3f -> %.3f; load "
           "average %.1f\n", (long long)o.batch, med, p10, p90, o.steps, o.warmup, flop * 1e-9,
           flop * 1e-9 / (med * 1e-3), first, last, load[0]);
    printf("tfc rnn_step_ms_median=%.2f p10=%.2f p90=%.2f gflop_per_step=%.3f gflops=%.2f "
           "batch=%lld workers=%s\n", med, p10, p90, flop * 1e-9, flop * 1e-9 / (med * 1e-3),
           (long long)o.batch, o.workers ? o.workers : "default");
    free(t);
    tfc_batcher_destroy(batches);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    tfc_value_destroy(sources[0]);
    tfc_value_destroy(sources[1]);
    return 0;
}
