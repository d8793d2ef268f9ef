/* checkpoint_step.c: what checkpointing costs the training step of the flagship network
 * (examples/mnist_mlp.c's 784-256-128-10 ReLU MLP, Glorot-uniform kernels, zero biases, sparse
 * softmax cross-entropy, Adam at lr 1e-3 with a global step, batch 128 through the shuffling
 * batcher; the data are synthetic, of Fashion-MNIST's shape: only time is measured). For each
 * checkpoint interval N (0: no checkpoint) it trains --steps timed steps after --warmup steps
 * on a fresh SQLite store (WAL, synchronous=FULL, in --dir) with retention keep 3, a checkpoint
 * (variables, Adam's slots, the global step and the batcher's position: 2.8 MB) after every
 * N-th step, and measures each step from batch to return, the checkpoint call included (it
 * takes the snapshot; the writer thread stores it while training goes on). Rounds alternate
 * the intervals; each figure is the median over the rounds of that round's figure:
 *   step ms median, mean, p99, max; the checkpoint call's ms (median); wall ms per step over
 *   the whole run including the final flush (what checkpoints cost in total).
 * The last lines are machine-readable: "tfc every=N step_ms_median=... ...".
 *
 *   checkpoint_step [--steps N] [--warmup N] [--rounds R] [--every N,N,...] [--dir DIR]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "../src/tfc.h"
#include "benchutil.h"

#define ROWS 8192
#define MAX_EVERY 8
#define MAX_ROUNDS 16

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "checkpoint_step: %s: %s\n", what, msg);
    exit(1);
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

enum { F_MEDIAN, F_MEAN, F_P99, F_MAX, F_CKPT, F_WALL, F_N };
static const char *fig_names[F_N] = {"step_ms_median", "step_ms_mean", "step_ms_p99",
                                     "step_ms_max", "ckpt_call_ms", "wall_ms_per_step"};

int main(int argc, char **argv)
{
    int steps = 500, warmup = 20, rounds = 3, n_every = 3;
    int every[MAX_EVERY] = {0, 50, 100};
    const char *dir = "/tmp";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", "checkpoint_step [--steps N] [--warmup N] [--rounds R] "
                             "[--every N,N,...] [--dir DIR]");
        if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--rounds")) rounds = atoi(v);
        else if (!strcmp(a, "--dir")) dir = v;
        else if (!strcmp(a, "--every")) {
            n_every = 0;
            for (char *s = (char *)v, *end; *s && n_every < MAX_EVERY; s = *end ? end + 1 : end)
                every[n_every++] = (int)strtol(s, &end, 10);
        } else die(a, "unknown option");
        i++;
    }
    if (steps < 1 || warmup < 0 || rounds < 1 || rounds > MAX_ROUNDS || !n_every)
        die("usage", "bad arguments");

    /* synthetic data of Fashion-MNIST's shape */
    tfc_value *x, *y;
    if (tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){ROWS, 784}), &x) ||
        tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){ROWS}), &y))
        die("data", tfc_errmsg());
    uint64_t r = 88172645463325252ull;
    float *xd = tfc_value_data(x);
    int32_t *yd = tfc_value_data(y);
    for (int64_t i = 0; i < (int64_t)ROWS * 784; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        xd[i] = (float)(r >> 40) / (float)(1 << 24);
    }
    for (int i = 0; i < ROWS; i++) yd[i] = (int32_t)((xd[i * 784] * 10.0f)) % 10;

    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *xin = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 784}));
    tfc_tensor *yin = tfc_placeholder(g, "y", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h = dense(g, "dense1", xin, 784, 256, 1, 1);
    h = dense(g, "dense2", h, 256, 128, 2, 1);
    tfc_tensor *logits = dense(g, "logits", h, 128, 10, 3, 0);
    tfc_tensor *loss =
        tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, yin), 0, NULL, 0);
    const char *names[6] = {"dense1/kernel", "dense1/bias", "dense2/kernel",
                            "dense2/bias",   "logits/kernel", "logits/bias"};
    tfc_tensor *vars[6];
    for (int i = 0; i < 6; i++) vars[i] = tfc_graph_find(g, names[i]);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
    tfc_tensor *train = tfc_minimize(g, loss, 6, vars, &adam, tfc_global_step(g));
    if (tfc_graph_status(g)) die("graph", tfc_graph_errmsg(g));

    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) die("context", tfc_errmsg());
    char desc[256];
    tfc_ctx_describe(ctx, desc, sizeof desc);
    printf("checkpoint_step: %d rounds of %d timed steps after %d warm-up steps, batch 128, "
           "store in %s; %s\n", rounds, steps, warmup, dir, desc);

    static double fig[MAX_EVERY][F_N][MAX_ROUNDS];
    double *t = calloc((size_t)steps, sizeof *t), *ck = calloc((size_t)steps, sizeof *ck);
    int64_t ckpt_bytes = 0;
    for (int round = 0; round < rounds; round++) {
        for (int e = 0; e < n_every; e++) {
            int n = every[e];
            char path[1024];
            snprintf(path, sizeof path, "%s/checkpoint_step-%d.db", dir, (int)getpid());
            const char *sfx[] = {"", "-wal", "-shm"};
            for (int k = 0; k < 3; k++) {
                char p[1100];
                snprintf(p, sizeof p, "%s%s", path, sfx[k]);
                unlink(p);
            }
            tfc_session *s;
            tfc_store *st;
            tfc_batcher *b;
            if (tfc_session_create(ctx, g, &s) || tfc_session_init_variables(s))
                die("session", tfc_errmsg());
            if (tfc_store_open(path, TFC_STORE_CREATE, &st)) die("store", tfc_errmsg());
            if (tfc_store_set_retention(st, 3, 0)) die("retention", tfc_store_errmsg(st));
            if (tfc_batcher_create(2, (tfc_value *[]){x, y}, 128, 7 + (uint64_t)round,
                                   TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, &b))
                die("batcher", tfc_errmsg());
            int n_ck = 0;
            double t_start = 0;
            for (int i = -warmup; i < steps; i++) {
                if (i == 0) t_start = bench_now();
                tfc_value *bv[2];
                if (tfc_batcher_next(b, bv, NULL)) die("batcher", tfc_batcher_errmsg(b));
                double t0 = bench_now();
                if (tfc_session_run(s, 2, (tfc_tensor *[]){xin, yin}, bv, 0, NULL, NULL, 1,
                                    &train))
                    die("step", tfc_session_errmsg(s));
                if (n > 0 && (i + warmup + 1) % n == 0) {
                    double c0 = bench_now();
                    tfc_input_position pos = {.seed = 7 + (uint64_t)round};
                    tfc_batcher_position(b, &pos.epoch, &pos.step);
                    if (tfc_store_checkpoint(st, s, i + warmup + 1, &pos))
                        die("checkpoint", tfc_store_errmsg(st));
                    if (i >= 0) ck[n_ck++] = (bench_now() - c0) * 1e3;
                }
                if (i >= 0) t[i] = (bench_now() - t0) * 1e3;
            }
            if (tfc_store_flush(st)) die("flush", tfc_store_errmsg(st));
            double wall = (bench_now() - t_start) * 1e3 / steps;
            if (n > 0 && !ckpt_bytes) {
                int nc = 0;
                tfc_checkpoint_info *list = NULL;
                if (!tfc_store_list_checkpoints(st, &nc, &list) && nc)
                    ckpt_bytes = list[nc - 1].bytes;
                free(list);
            }
            tfc_batcher_destroy(b);
            tfc_store_close(st);
            tfc_session_destroy(s);
            for (int k = 0; k < 3; k++) {
                char p[1100];
                snprintf(p, sizeof p, "%s%s", path, sfx[k]);
                unlink(p);
            }
            double mean = 0;
            for (int i = 0; i < steps; i++) mean += t[i];
            fig[e][F_MEAN][round] = mean / steps;
            fig[e][F_MEDIAN][round] = bench_quantile(t, steps, 0.5);
            fig[e][F_P99][round] = bench_quantile(t, steps, 0.99);
            fig[e][F_MAX][round] = bench_quantile(t, steps, 1.0);
            fig[e][F_CKPT][round] = bench_quantile(ck, n_ck, 0.5);
            fig[e][F_WALL][round] = wall;
            printf("round %d, every %3d: median %.3f ms, mean %.3f ms, max %.1f ms, %d "
                   "checkpoints timed (call %.2f ms), wall %.3f ms/step\n",
                   round + 1, n, fig[e][F_MEDIAN][round], fig[e][F_MEAN][round],
                   fig[e][F_MAX][round], n_ck, fig[e][F_CKPT][round], wall);
            fflush(stdout);
        }
    }
    printf("checkpoint size: %lld bytes\n", (long long)ckpt_bytes);
    printf("| every | step ms (median) | mean | p99 | max | checkpoint call ms | wall ms/step |\n");
    printf("|---|---|---|---|---|---|---|\n");
    double med[MAX_EVERY][F_N];
    for (int e = 0; e < n_every; e++) {
        for (int f = 0; f < F_N; f++) med[e][f] = bench_quantile(fig[e][f], rounds, 0.5);
        if (every[e] > 0)
            printf("| %d | %.3f | %.3f | %.3f | %.1f | %.2f | %.3f |\n", every[e],
                   med[e][F_MEDIAN], med[e][F_MEAN], med[e][F_P99], med[e][F_MAX], med[e][F_CKPT],
                   med[e][F_WALL]);
        else
            printf("| none | %.3f | %.3f | %.3f | %.1f | - | %.3f |\n", med[e][F_MEDIAN],
                   med[e][F_MEAN], med[e][F_P99], med[e][F_MAX], med[e][F_WALL]);
    }
    for (int e = 0; e < n_every; e++) {
        printf("tfc every=%d", every[e]);
        for (int f = 0; f < F_N; f++) printf(" %s=%.4f", fig_names[f], med[e][f]);
        printf("\n");
    }
    free(t);
    free(ck);
    tfc_ctx_destroy(ctx);
    tfc_graph_destroy(g);
    tfc_value_destroy(x);
    tfc_value_destroy(y);
    return 0;
}
