/* mlp_step.c: the training step of the flagship network (examples/mlp_model.c: 784-256-128-10
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
#include "../examples/mlp_model.h"
#include "benchutil.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "mlp_step: %s: %s\n", what, msg);
    exit(1);
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

struct options {
    int steps, warmup, profile;
    int64_t batch;
    uint64_t seed;
    const char *data, *device;
};

static void parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.steps = 200, .warmup = 20, .profile = 100, .batch = 128, .seed = 1,
                          .data = DEFAULT_DATA};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", "mlp_step [--steps N] [--warmup N] [--profile N] [--batch B] "
                             "[--seed S] [--data DIR] [--device KIND]");
        if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--profile")) o->profile = atoi(v);
        else if (!strcmp(a, "--batch")) o->batch = atoll(v);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else die("unknown option", a);
        i++;
    }
    if (o->steps < 1 || o->warmup < 0 || o->profile < 0 || o->batch < 1) die("usage", "bad value");
}

/* What a step needs: the session, the network, the train op, the data. */
struct bench {
    const struct options *o;
    tfc_session *s;
    struct mlp_model m;
    tfc_tensor *train;
    tfc_value *sources[2];  /* images, labels */
};

/* One training step on the batcher's next batch; *loss (may be NULL) receives the loss, which
 * is then fetched. Returns the seconds session_run took. */
static double step(struct bench *b, tfc_batcher *batcher, double *loss, int64_t *rows)
{
    tfc_value *bv[2], *lv = NULL;
    tfc_tensor *feeds[2] = {b->m.images, b->m.labels};
    if (tfc_batcher_next(batcher, bv, NULL)) die("batcher", tfc_batcher_errmsg(batcher));
    if (rows) *rows = tfc_value_shape(bv[1]).dims[0];
    double t0 = bench_now();
    if (tfc_session_run(b->s, 2, feeds, bv, loss != NULL, &b->m.loss, loss ? &lv : NULL, 1,
                        &b->train))
        die("run", tfc_session_errmsg(b->s));
    double dt = bench_now() - t0;
    if (lv) {
        *loss = tfc_value_get(lv, 0);
        tfc_value_destroy(lv);
    }
    return dt;
}

static tfc_batcher *batcher(struct bench *b, uint64_t seed, unsigned flags)
{
    tfc_batcher *batches;
    if (tfc_batcher_create(2, b->sources, b->o->batch, seed, flags, &batches))
        die("batcher", tfc_errmsg());
    return batches;
}

/* (a) step time: warm-up, then timed steps with the loss fetched, then without. */
struct step_times {
    double med, mean, p10, p90, med_nofetch, tasks_per_step, first_loss, last_loss;
};

static void time_steps(struct bench *b, struct step_times *r)
{
    const struct options *o = b->o;
    tfc_batcher *batches = batcher(b, o->seed, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST);
    double *t_fetch = malloc(sizeof(double) * (size_t)o->steps);
    double *t_nofetch = malloc(sizeof(double) * (size_t)o->steps);
    tfc_session_stats st0, st1;
    r->first_loss = r->last_loss = 0;
    for (int phase = 0; phase < 3; phase++) {
        int count = phase == 0 ? o->warmup : o->steps;
        if (phase == 1) tfc_session_get_stats(b->s, &st0);
        if (phase == 2) tfc_session_get_stats(b->s, &st1);
        for (int i = 0; i < count; i++) {
            double loss = 0, dt = step(b, batches, phase != 2 ? &loss : NULL, NULL);
            if (phase == 1) t_fetch[i] = dt;
            if (phase == 2) t_nofetch[i] = dt;
            if (phase != 2) {
                if (phase == 0 && i == 0) r->first_loss = loss;
                r->last_loss = loss;
            }
        }
    }
    r->tasks_per_step = (double)(st1.tasks - st0.tasks) / (double)o->steps;
    tfc_batcher_destroy(batches);
    r->med = bench_quantile(t_fetch, o->steps, 0.5) * 1e3;
    r->p10 = bench_quantile(t_fetch, o->steps, 0.1) * 1e3;
    r->p90 = bench_quantile(t_fetch, o->steps, 0.9) * 1e3;
    r->med_nofetch = bench_quantile(t_nofetch, o->steps, 0.5) * 1e3;
    r->mean = 0;
    for (int i = 0; i < o->steps; i++) r->mean += t_fetch[i] * 1e3 / o->steps;
    free(t_fetch);
    free(t_nofetch);
}

/* (b), (c): one full epoch end to end, a fresh shuffled batcher, the last batch partial. */
struct epoch_times {
    double seconds, run, slowest, loss, waited;
    int64_t steps, seen;
};

static void time_epoch(struct bench *b, struct epoch_times *r)
{
    double t_epoch = bench_now();
    tfc_batcher *batches = batcher(b, b->o->seed + 1, TFC_BATCHER_SHUFFLE);
    *r = (struct epoch_times){.steps = tfc_batcher_steps_per_epoch(batches)};
    for (int64_t i = 0; i < r->steps; i++) {
        int64_t rows;
        double loss, dt = step(b, batches, &loss, &rows);
        r->seen += rows;
        r->run += dt;
        if (dt > r->slowest) r->slowest = dt;
        r->loss += loss;
    }
    r->waited = tfc_batcher_wait_seconds(batches);
    tfc_batcher_destroy(batches);
    r->seconds = bench_now() - t_epoch;
}

/* (d) memory: what the step needs, in bytes, computed from the shapes: params, grads, Adam's m
 * and v (4 float32 copies); activations forward, and their grads (the same count minus the
 * input's). */
static double model_bytes(int64_t batch)
{
    const int64_t dims[4] = {784, 256, 128, 10};
    int64_t params = 0, acts = batch * 784; /* the input batch */
    for (int l = 0; l < 3; l++) {
        params += dims[l] * dims[l + 1] + dims[l + 1];
        /* matmul output, bias_add output (and ReLU output on hidden layers) */
        acts += batch * dims[l + 1] * (l < 2 ? 3 : 2);
    }
    acts += batch * 10; /* softmax probabilities of the cross-entropy */
    return 4.0 * 4.0 * (double)params + 4.0 * (double)(2 * acts - batch * 784)
           + (double)batch * (1 + 4); /* labels uint8 and their int32 cast */
}

/* Where the step's time goes: per-op task time from the profiling records of o->profile
 * steps, printed as a table. */
static void profile(struct bench *b)
{
    const struct options *o = b->o;
    tfc_batcher *batches = batcher(b, o->seed + 2, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST);
    tfc_session_set_profiling(b->s, 1);
    struct opstat ops[64];
    int n_ops = 0;
    double busy_us = 0, span_us = 0, wall = 0, worker_busy[64] = {0};
    long n_tasks = 0;
    for (int i = 0; i < o->profile; i++) {
        double loss;
        wall += step(b, batches, &loss, NULL);
        const tfc_task_record *r;
        int nr = tfc_session_last_records(b->s, &r);
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
    tfc_session_set_profiling(b->s, 0);
    tfc_batcher_destroy(batches);
    qsort(ops, (size_t)n_ops, sizeof *ops, by_time);
    double per = 1.0 / o->profile;
    printf("# profile over %d steps (profiling on): wall %.3f ms/step, first-to-last task "
           "%.3f ms/step, task time %.3f ms/step in %.1f tasks/step (%.1f us/task)\n",
           o->profile, wall * 1e3 * per, span_us * 1e-3 * per, busy_us * 1e-3 * per,
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

/* The flagship's network with Adam at torch's defaults, a constant lr of 1e-3 (no schedule, so
 * no global step either), the whole of it under the --device hint when there is one. */
static void build(tfc_ctx *ctx, tfc_graph *g, struct bench *b)
{
    const struct options *o = b->o;
    tfc_graph_set_seed(g, o->seed);
    if (o->device && tfc_graph_push_device(g, o->device, 0)) die("--device", tfc_graph_errmsg(g));
    mlp_model_build(g, TFC_UINT8, &b->m);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
    b->train = tfc_minimize(g, b->m.loss, MLP_N_VARS, b->m.vars, &adam, NULL);
    if (o->device) tfc_graph_pop_device(g);
    if (tfc_graph_status(g)) die("graph", tfc_graph_errmsg(g));
    if (tfc_session_create(ctx, g, &b->s) || tfc_session_init_variables(b->s))
        die("session", tfc_errmsg());
}

int main(int argc, char **argv)
{
    struct options o;
    parse(argc, argv, &o);
    struct bench b = {.o = &o};

    /* data: uint8 [60000,28,28] -> float32 [60000,784] in [0,1]; labels uint8 [60000] */
    double t_load = bench_now();
    if (mlp_load_fashion_mnist(o.data, "train", &b.sources[0], &b.sources[1]))
        die("read", tfc_errmsg());
    t_load = bench_now() - t_load;

    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) die("context", tfc_errmsg());
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);
    tfc_graph *g;
    tfc_graph_create(&g);
    build(ctx, g, &b);

    struct step_times st;
    struct epoch_times ep;
    time_steps(&b, &st);
    time_epoch(&b, &ep);
    double data_bytes = (double)tfc_value_nbytes(b.sources[0]) +
                        (double)tfc_value_nbytes(b.sources[1]);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_rss_mb = (double)ru.ru_maxrss / 1024.0; /* kB on Linux */
    if (o.profile > 0) profile(&b);

    printf("# %d CPU workers, %d CUDA workers, placement %s, scheduler %s; data loaded in %.2f s; loss %.4f -> %.4f; "
           "epoch mean loss %.4f over %lld examples; step ms p10 %.3f p90 %.3f; in the epoch "
           "session_run took %.3f s (%.3f ms/step, slowest %.1f ms)\n",
           info.n_cpu_workers, info.n_cuda_workers, o.device ? o.device : "(scheduler)",
           info.sched_policy, t_load, st.first_loss, st.last_loss,
           ep.loss / (double)ep.steps, (long long)ep.seen, st.p10, st.p90, ep.run,
           ep.run * 1e3 / (double)ep.steps, ep.slowest * 1e3);
    printf("tfc ncpu=%d ncuda=%d step_ms_median=%.4f step_ms_mean=%.4f step_nofetch_ms_median=%.4f "
           "tasks_per_step=%.1f "
           "epoch_s=%.3f epoch_examples_per_s=%.1f wait_frac=%.5f peak_rss_mb=%.1f model_mb=%.3f "
           "data_mb=%.1f loss_last=%.9g epoch_loss=%.9g\n",
           info.n_cpu_workers, info.n_cuda_workers, st.med, st.mean, st.med_nofetch,
           st.tasks_per_step, ep.seconds, (double)ep.seen / ep.seconds, ep.waited / ep.seconds,
           peak_rss_mb, model_bytes(o.batch) / 1048576.0, data_bytes / 1048576.0, st.last_loss,
           ep.loss / (double)ep.steps);

    tfc_session_destroy(b.s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    tfc_value_destroy(b.sources[0]);
    tfc_value_destroy(b.sources[1]);
    return 0;
}
