/* mlp_step.c: the training step of the flagship network (examples/mnist_mlp.c: 784-256-128-10
 * ReLU MLP, Glorot-uniform kernels, zero biases, sparse softmax cross-entropy, Adam) at a
 * constant learning rate, on Fashion-MNIST through the library's batcher. bench/mlp_torch.py is
 * the same in PyTorch; bench/run_mlp.sh runs both. Measures
 *   (a) ms per step (tfc_session_run with the loss fetched and the train op as target):
 *       median of --steps timed steps after --warmup steps; also the same without the fetch;
 *   (b) examples/s of one full epoch end to end (batcher created, shuffled, 469 steps, last
 *       one partial);
 *   (c) the fraction of that epoch spent waiting for input (tfc_batcher_wait_seconds);
 *   (d) peak RSS (getrusage) against params + grads + Adam slots + activations of one step;
 *   then, unless --profile 0, per-op task time from the session's profiling records.
 * The last line is machine-readable: tfc step_ms_median=... epoch_examples_per_s=... ...
 * Workers come from StarPU (STARPU_NCPU).
 *
 * --device KIND puts the whole graph (training step included) under a soft placement hint
 * ("cpu", "cuda", "opencl"); without it the scheduler places every task.
 *
 *   mlp_step [--steps N] [--warmup N] [--profile N] [--batch B] [--seed S] [--data DIR]
 *            [--device KIND]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include "../src/tfc.h"
#include "benchutil.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "mlp_step: %s: %s\n", what, msg);
    exit(1);
}

static tfc_value *load(const char *dir, const char *file)
{
    char path[1024];
    tfc_value *v;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (tfc_idx_read(path, &v)) die("read", tfc_errmsg());
    return v;
}

static tfc_tensor *dense(tfc_graph *g, const char *name, tfc_tensor *x, int64_t in, int64_t out,
                         uint64_t seed, int relu)
{
    char w[64], b[64];
    snprintf(w, sizeof w, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    tfc_tensor *kernel = tfc_variable(g, w, TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){in, out}),
                                      tfc_init_glorot_uniform(seed));
    tfc_tensor *bias = tfc_variable(g, b, TFC_FLOAT32, tfc_shape_of(1, &out), tfc_init_zeros());
    tfc_tensor *y = tfc_bias_add(g, tfc_matmul(g, x, kernel, 0, 0), bias);
    return relu ? tfc_relu(g, y) : y;
}

struct opstat {
    const char *op;
    double us;
    long tasks;
};

static int by_time(const void *a, const void *b)
{
    double x = ((const struct opstat *)a)->us, y = ((const struct opstat *)b)->us;
    return (x < y) - (x > y);
}

int main(int argc, char **argv)
{
    int steps = 200, warmup = 20, profile = 100;
    int64_t batch = 128;
    uint64_t seed = 1;
    const char *data = DEFAULT_DATA, *device = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", "mlp_step [--steps N] [--warmup N] [--profile N] [--batch B] "
                             "[--seed S] [--data DIR] [--device KIND]");
        if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--profile")) profile = atoi(v);
        else if (!strcmp(a, "--batch")) batch = atoll(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--device")) device = v;
        else die("unknown option", a);
        i++;
    }
    if (steps < 1 || warmup < 0 || profile < 0 || batch < 1) die("usage", "bad value");

    /* data: uint8 [60000,28,28] -> float32 [60000,784] in [0,1]; labels uint8 [60000] */
    double t_load = bench_now();
    tfc_value *raw = load(data, "train-images-idx3-ubyte.gz"), *images;
    tfc_value *labels_v = load(data, "train-labels-idx1-ubyte.gz");
    int64_t n = tfc_value_shape(raw).dims[0];
    if (tfc_value_normalize_u8(raw, 1.0f / 255.0f, 0.0f, &images)) die("normalize", tfc_errmsg());
    tfc_value_destroy(raw);
    if (tfc_value_reshape(images, tfc_shape_of(2, (int64_t[]){n, 784}))) die("reshape", tfc_errmsg());
    t_load = bench_now() - t_load;

    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) die("context", tfc_errmsg());
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, seed);
    if (device && tfc_graph_push_device(g, device, 0)) die("--device", tfc_graph_errmsg(g));
    tfc_tensor *x = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 784}));
    tfc_tensor *y = tfc_placeholder(g, "labels", TFC_UINT8, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h1 = dense(g, "dense1", x, 784, 256, 1, 1);
    tfc_tensor *h2 = dense(g, "dense2", h1, 256, 128, 2, 1);
    tfc_tensor *logits = dense(g, "logits", h2, 128, 10, 3, 0);
    tfc_tensor *loss = tfc_reduce_mean(
        g, tfc_sparse_softmax_cross_entropy(g, logits, tfc_cast(g, y, TFC_INT32)), 0, NULL, 0);
    tfc_tensor *vars[6];
    const char *names[6] = {"dense1/kernel", "dense1/bias", "dense2/kernel", "dense2/bias",
                            "logits/kernel", "logits/bias"};
    for (int i = 0; i < 6; i++) vars[i] = tfc_graph_find(g, names[i]);
    /* Adam, torch's defaults, constant lr 1e-3 (no schedule, so no global step either) */
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
    tfc_tensor *train = tfc_minimize(g, loss, 6, vars, &adam, NULL);
    if (device) tfc_graph_pop_device(g);
    tfc_session *s;
    if (tfc_graph_status(g)) die("graph", tfc_graph_errmsg(g));
    if (tfc_session_create(ctx, g, &s) || tfc_session_init_variables(s)) die("session", tfc_errmsg());

    tfc_tensor *feeds[2] = {x, y};
    tfc_value *sources[2] = {images, labels_v};

    /* (a) step time: warm-up, then timed steps with the loss fetched, then without */
    tfc_batcher *b;
    if (tfc_batcher_create(2, sources, batch, seed, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, &b))
        die("batcher", tfc_errmsg());
    double *t_fetch = malloc(sizeof(double) * (size_t)steps);
    double *t_nofetch = malloc(sizeof(double) * (size_t)steps);
    double first_loss = 0, last_loss = 0;
    tfc_session_stats st0, st1;
    for (int phase = 0; phase < 3; phase++) {
        int count = phase == 0 ? warmup : steps;
        if (phase == 1) tfc_session_get_stats(s, &st0);
        if (phase == 2) tfc_session_get_stats(s, &st1);
        for (int i = 0; i < count; i++) {
            tfc_value *bv[2], *lv = NULL;
            if (tfc_batcher_next(b, bv, NULL)) die("batcher", tfc_batcher_errmsg(b));
            int fetch = phase != 2;
            double t0 = bench_now();
            if (tfc_session_run(s, 2, feeds, bv, fetch, &loss, fetch ? &lv : NULL, 1, &train))
                die("run", tfc_session_errmsg(s));
            double dt = bench_now() - t0;
            if (phase == 1) t_fetch[i] = dt;
            if (phase == 2) t_nofetch[i] = dt;
            if (lv) {
                if (phase == 0 && i == 0) first_loss = tfc_value_get(lv, 0);
                last_loss = tfc_value_get(lv, 0);
                tfc_value_destroy(lv);
            }
        }
    }
    double tasks_per_step = (double)(st1.tasks - st0.tasks) / (double)steps;
    tfc_batcher_destroy(b);
    double med = bench_quantile(t_fetch, steps, 0.5) * 1e3, p10 = bench_quantile(t_fetch, steps, 0.1) * 1e3,
           p90 = bench_quantile(t_fetch, steps, 0.9) * 1e3;
    double med_nf = bench_quantile(t_nofetch, steps, 0.5) * 1e3, mean = 0;
    for (int i = 0; i < steps; i++) mean += t_fetch[i] * 1e3 / steps;

    /* (b), (c): one full epoch end to end, a fresh shuffled batcher, the last batch partial */
    double t_epoch = bench_now();
    if (tfc_batcher_create(2, sources, batch, seed + 1, TFC_BATCHER_SHUFFLE, &b))
        die("batcher", tfc_errmsg());
    int64_t epoch_steps = tfc_batcher_steps_per_epoch(b), seen = 0;
    double epoch_loss = 0, epoch_run = 0, epoch_max = 0;
    for (int64_t i = 0; i < epoch_steps; i++) {
        tfc_value *bv[2], *lv;
        if (tfc_batcher_next(b, bv, NULL)) die("batcher", tfc_batcher_errmsg(b));
        seen += tfc_value_shape(bv[1]).dims[0];
        double t0 = bench_now();
        if (tfc_session_run(s, 2, feeds, bv, 1, &loss, &lv, 1, &train))
            die("run", tfc_session_errmsg(s));
        t0 = bench_now() - t0;
        epoch_run += t0;
        if (t0 > epoch_max) epoch_max = t0;
        epoch_loss += tfc_value_get(lv, 0);
        tfc_value_destroy(lv);
    }
    double waited = tfc_batcher_wait_seconds(b);
    tfc_batcher_destroy(b);
    t_epoch = bench_now() - t_epoch;

    /* (d) memory: peak RSS against what the step needs, computed from the shapes */
    const int64_t dims[4] = {784, 256, 128, 10};
    int64_t params = 0, acts = batch * 784; /* the input batch */
    for (int l = 0; l < 3; l++) {
        params += dims[l] * dims[l + 1] + dims[l + 1];
        /* matmul output, bias_add output (and ReLU output on hidden layers) */
        acts += batch * dims[l + 1] * (l < 2 ? 3 : 2);
    }
    acts += batch * 10; /* softmax probabilities of the cross-entropy */
    /* params, grads, Adam's m and v: 4 float32 copies; activations forward, and their grads
     * (the same count minus the input's) */
    double model_bytes = 4.0 * 4.0 * (double)params + 4.0 * (double)(2 * acts - batch * 784)
                         + (double)batch * (1 + 4); /* labels uint8 and their int32 cast */
    double data_bytes = (double)tfc_value_nbytes(images) + (double)tfc_value_nbytes(labels_v);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_rss_mb = (double)ru.ru_maxrss / 1024.0; /* kB on Linux */

    /* where the step's time goes: per-op task time from the profiling records */
    if (profile > 0) {
        if (tfc_batcher_create(2, sources, batch, seed + 2, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, &b))
            die("batcher", tfc_errmsg());
        tfc_session_set_profiling(s, 1);
        struct opstat ops[64];
        int n_ops = 0;
        double busy_us = 0, span_us = 0, wall = 0, worker_busy[64] = {0};
        long n_tasks = 0;
        for (int i = 0; i < profile; i++) {
            tfc_value *bv[2], *lv;
            if (tfc_batcher_next(b, bv, NULL)) die("batcher", tfc_batcher_errmsg(b));
            double t0 = bench_now();
            if (tfc_session_run(s, 2, feeds, bv, 1, &loss, &lv, 1, &train))
                die("run", tfc_session_errmsg(s));
            wall += bench_now() - t0;
            tfc_value_destroy(lv);
            const tfc_task_record *r;
            int nr = tfc_session_last_records(s, &r);
            double lo = 1e300, hi = -1e300;
            for (int k = 0; k < nr; k++) {
                double d = r[k].end_us - r[k].start_us;
                int j = 0;
                while (j < n_ops && strcmp(ops[j].op, r[k].op)) j++;
                if (j == n_ops && n_ops < 64) ops[n_ops++] = (struct opstat){r[k].op, 0, 0};
                if (j < 64) ops[j].us += d, ops[j].tasks++;
                if (r[k].worker >= 0 && r[k].worker < 64) worker_busy[r[k].worker] += d;
                busy_us += d;
                n_tasks++;
                if (r[k].start_us < lo) lo = r[k].start_us;
                if (r[k].end_us > hi) hi = r[k].end_us;
            }
            if (nr) span_us += hi - lo;
        }
        tfc_session_set_profiling(s, 0);
        tfc_batcher_destroy(b);
        qsort(ops, (size_t)n_ops, sizeof *ops, by_time);
        double per = 1.0 / profile;
        printf("# profile over %d steps (profiling on): wall %.3f ms/step, first-to-last task "
               "%.3f ms/step, task time %.3f ms/step in %.1f tasks/step (%.1f us/task)\n",
               profile, wall * 1e3 * per, span_us * 1e-3 * per, busy_us * 1e-3 * per,
               (double)n_tasks * per, busy_us / (double)(n_tasks ? n_tasks : 1));
        for (int w = 0; w < 64; w++)
            if (worker_busy[w] > 0)
                printf("# worker %d busy %.3f ms/step (%.0f%% of wall)\n", w,
                       worker_busy[w] * 1e-3 * per, 100.0 * worker_busy[w] * 1e-6 / wall);
        printf("# %-28s %8s %10s %10s %7s\n", "op", "tasks", "us/step", "us/task", "share");
        for (int j = 0; j < n_ops; j++)
            printf("# %-28s %8.1f %10.1f %10.2f %6.1f%%\n", ops[j].op, (double)ops[j].tasks * per,
                   ops[j].us * per, ops[j].us / (double)ops[j].tasks, 100.0 * ops[j].us / busy_us);
        printf("tfc_profile wall_ms=%.4f task_ms=%.4f tasks_per_step=%.1f\n", wall * 1e3 * per,
               busy_us * 1e-3 * per, (double)n_tasks * per);
    }

    printf("# %d CPU workers, %d CUDA workers, placement %s, scheduler %s; data loaded in %.2f s; loss %.4f -> %.4f; "
           "epoch mean loss %.4f over %lld examples; step ms p10 %.3f p90 %.3f; in the epoch "
           "session_run took %.3f s (%.3f ms/step, slowest %.1f ms)\n",
           info.n_cpu_workers, info.n_cuda_workers, device ? device : "(scheduler)",
           info.sched_policy, t_load, first_loss, last_loss,
           epoch_loss / (double)epoch_steps, (long long)seen, p10, p90, epoch_run,
           epoch_run * 1e3 / (double)epoch_steps, epoch_max * 1e3);
    printf("tfc ncpu=%d ncuda=%d step_ms_median=%.4f step_ms_mean=%.4f step_nofetch_ms_median=%.4f "
           "tasks_per_step=%.1f "
           "epoch_s=%.3f epoch_examples_per_s=%.1f wait_frac=%.5f peak_rss_mb=%.1f model_mb=%.3f "
           "data_mb=%.1f loss_last=%.9g epoch_loss=%.9g\n",
           info.n_cpu_workers, info.n_cuda_workers, med, mean, med_nf, tasks_per_step, t_epoch, (double)seen / t_epoch,
           waited / t_epoch, peak_rss_mb, model_bytes / 1048576.0, data_bytes / 1048576.0,
           last_loss, epoch_loss / (double)epoch_steps);

    free(t_fetch);
    free(t_nofetch);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    tfc_value_destroy(images);
    tfc_value_destroy(labels_v);
    return 0;
}
