/* checkpoint_step.c: what checkpointing costs the training step of the flagship network
 * (examples/mlp_model.c's 784-256-128-10 ReLU MLP, Glorot-uniform kernels, zero biases, sparse
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
#include "../examples/mlp_model.h"
#include "benchutil.h"

#define ROWS 8192
#define MAX_EVERY 8
#define MAX_ROUNDS 16

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "checkpoint_step: %s: %s\n", what, msg);
    exit(1);
}

enum { F_MEDIAN, F_MEAN, F_P99, F_MAX, F_CKPT, F_WALL, F_N };
static const char *fig_names[F_N] = {"step_ms_median", "step_ms_mean", "step_ms_p99",
                                     "step_ms_max", "ckpt_call_ms", "wall_ms_per_step"};

struct options {
    int steps, warmup, rounds, n_every;
    int every[MAX_EVERY];
    const char *dir;
};

static void parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.steps = 500, .warmup = 20, .rounds = 3, .n_every = 3,
                          .every = {0, 50, 100}, .dir = "/tmp"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("usage", "checkpoint_step [--steps N] [--warmup N] [--rounds R] "
                             "[--every N,N,...] [--dir DIR]");
        if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--warmup")) o->warmup = atoi(v);
        else if (!strcmp(a, "--rounds")) o->rounds = atoi(v);
        else if (!strcmp(a, "--dir")) o->dir = v;
        else if (!strcmp(a, "--every")) {
            o->n_every = 0;
            for (char *s = (char *)v, *end; *s && o->n_every < MAX_EVERY; s = *end ? end + 1 : end)
                o->every[o->n_every++] = (int)strtol(s, &end, 10);
        } else die(a, "unknown option");
        i++;
    }
    if (o->steps < 1 || o->warmup < 0 || o->rounds < 1 || o->rounds > MAX_ROUNDS || !o->n_every)
        die("usage", "bad arguments");
}

/* Synthetic data of Fashion-MNIST's shape: x float32 [ROWS, 784] in [0, 1), y int32 [ROWS]. */
static void make_data(tfc_value **x, tfc_value **y)
{
    if (tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){ROWS, 784}), x) ||
        tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){ROWS}), y))
        die("data", tfc_errmsg());
    uint64_t r = 88172645463325252ull;
    float *xd = tfc_value_data(*x);
    int32_t *yd = tfc_value_data(*y);
    for (int64_t i = 0; i < (int64_t)ROWS * 784; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        xd[i] = (float)(r >> 40) / (float)(1 << 24);
    }
    for (int i = 0; i < ROWS; i++) yd[i] = (int32_t)((xd[i * 784] * 10.0f)) % 10;
}

/* The store's file and its WAL and shared-memory files, removed. */
static void remove_store(const char *path)
{
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int k = 0; k < 3; k++) {
        char p[1100];
        snprintf(p, sizeof p, "%s%s", path, sfx[k]);
        unlink(p);
    }
}

/* What one round needs. */
struct bench {
    const struct options *o;
    tfc_ctx *ctx;
    tfc_graph *g;
    struct mlp_model m;
    tfc_tensor *train;
    tfc_value *x, *y;
    double *t, *ck;        /* each timed step's ms, each timed checkpoint call's ms */
    int64_t ckpt_bytes;    /* of one checkpoint, from the store */
};

/* One round at checkpoint interval n (0: none) on a fresh store and session: the figures of
 * that round into fig[f]. */
static void run_round(struct bench *b, int round, int n, double fig[F_N])
{
    const struct options *o = b->o;
    char path[1024];
    snprintf(path, sizeof path, "%s/checkpoint_step-%d.db", o->dir, (int)getpid());
    remove_store(path);
    tfc_session *s;
    tfc_store *st;
    tfc_batcher *bt;
    if (tfc_session_create(b->ctx, b->g, &s) || tfc_session_init_variables(s))
        die("session", tfc_errmsg());
    if (tfc_store_open(path, TFC_STORE_CREATE, &st)) die("store", tfc_errmsg());
    if (tfc_store_set_retention(st, 3, 0)) die("retention", tfc_store_errmsg(st));
    if (tfc_batcher_create(2, (tfc_value *[]){b->x, b->y}, 128, 7 + (uint64_t)round,
                           TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, &bt))
        die("batcher", tfc_errmsg());
    int n_ck = 0;
    double t_start = 0;
    for (int i = -o->warmup; i < o->steps; i++) {
        if (i == 0) t_start = bench_now();
        tfc_value *bv[2];
        if (tfc_batcher_next(bt, bv, NULL)) die("batcher", tfc_batcher_errmsg(bt));
        double t0 = bench_now();
        if (tfc_session_run(s, 2, (tfc_tensor *[]){b->m.images, b->m.labels}, bv, 0, NULL, NULL,
                            1, &b->train))
            die("step", tfc_session_errmsg(s));
        if (n > 0 && (i + o->warmup + 1) % n == 0) {
            double c0 = bench_now();
            tfc_input_position pos = {.seed = 7 + (uint64_t)round};
            tfc_batcher_position(bt, &pos.epoch, &pos.step);
            if (tfc_store_checkpoint(st, s, i + o->warmup + 1, &pos))
                die("checkpoint", tfc_store_errmsg(st));
            if (i >= 0) b->ck[n_ck++] = (bench_now() - c0) * 1e3;
        }
        if (i >= 0) b->t[i] = (bench_now() - t0) * 1e3;
    }
    if (tfc_store_flush(st)) die("flush", tfc_store_errmsg(st));
    double wall = (bench_now() - t_start) * 1e3 / o->steps;
    if (n > 0 && !b->ckpt_bytes) {
        int nc = 0;
        tfc_checkpoint_info *list = NULL;
        if (!tfc_store_list_checkpoints(st, &nc, &list) && nc) b->ckpt_bytes = list[nc - 1].bytes;
        free(list);
    }
    tfc_batcher_destroy(bt);
    tfc_store_close(st);
    tfc_session_destroy(s);
    remove_store(path);
    double mean = 0;
    for (int i = 0; i < o->steps; i++) mean += b->t[i];
    fig[F_MEAN] = mean / o->steps;
    fig[F_MEDIAN] = bench_quantile(b->t, o->steps, 0.5);
    fig[F_P99] = bench_quantile(b->t, o->steps, 0.99);
    fig[F_MAX] = bench_quantile(b->t, o->steps, 1.0);
    fig[F_CKPT] = bench_quantile(b->ck, n_ck, 0.5);
    fig[F_WALL] = wall;
    printf("round %d, every %3d: median %.3f ms, mean %.3f ms, max %.1f ms, %d "
           "checkpoints timed (call %.2f ms), wall %.3f ms/step\n",
           round + 1, n, fig[F_MEDIAN], fig[F_MEAN], fig[F_MAX], n_ck, fig[F_CKPT], wall);
    fflush(stdout);
}

/* The medians over the rounds, as a Markdown table and as machine-readable lines. */
static void report(const struct options *o, double fig[][F_N][MAX_ROUNDS])
{
    printf("| every | step ms (median) | mean | p99 | max | checkpoint call ms | wall ms/step |\n");
    printf("|---|---|---|---|---|---|---|\n");
    double med[MAX_EVERY][F_N];
    for (int e = 0; e < o->n_every; e++) {
        for (int f = 0; f < F_N; f++) med[e][f] = bench_quantile(fig[e][f], o->rounds, 0.5);
        if (o->every[e] > 0)
            printf("| %d | %.3f | %.3f | %.3f | %.1f | %.2f | %.3f |\n", o->every[e],
                   med[e][F_MEDIAN], med[e][F_MEAN], med[e][F_P99], med[e][F_MAX], med[e][F_CKPT],
                   med[e][F_WALL]);
        else
            printf("| none | %.3f | %.3f | %.3f | %.1f | - | %.3f |\n", med[e][F_MEDIAN],
                   med[e][F_MEAN], med[e][F_P99], med[e][F_MAX], med[e][F_WALL]);
    }
    for (int e = 0; e < o->n_every; e++) {
        printf("tfc every=%d", o->every[e]);
        for (int f = 0; f < F_N; f++) printf(" %s=%.4f", fig_names[f], med[e][f]);
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    struct options o;
    parse(argc, argv, &o);
    struct bench b = {.o = &o};
    make_data(&b.x, &b.y);

    /* the flagship's network on int32 labels; Adam at lr 1e-3 with a global step */
    tfc_graph_create(&b.g);
    mlp_model_build(b.g, TFC_INT32, &b.m);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
    b.train = tfc_minimize(b.g, b.m.loss, MLP_N_VARS, b.m.vars, &adam, tfc_global_step(b.g));
    if (tfc_graph_status(b.g)) die("graph", tfc_graph_errmsg(b.g));

    if (tfc_ctx_create(&b.ctx)) die("context", tfc_errmsg());
    char desc[256];
    tfc_ctx_describe(b.ctx, desc, sizeof desc);
    printf("checkpoint_step: %d rounds of %d timed steps after %d warm-up steps, batch 128, "
           "store in %s; %s\n", o.rounds, o.steps, o.warmup, o.dir, desc);

    static double fig[MAX_EVERY][F_N][MAX_ROUNDS];
    b.t = calloc((size_t)o.steps, sizeof *b.t);
    b.ck = calloc((size_t)o.steps, sizeof *b.ck);
    for (int round = 0; round < o.rounds; round++)
        for (int e = 0; e < o.n_every; e++) {
            double f[F_N];
            run_round(&b, round, o.every[e], f);
            for (int k = 0; k < F_N; k++) fig[e][k][round] = f[k];
        }
    printf("checkpoint size: %lld bytes\n", (long long)b.ckpt_bytes);
    report(&o, fig);
    free(b.t);
    free(b.ck);
    tfc_ctx_destroy(b.ctx);
    tfc_graph_destroy(b.g);
    tfc_value_destroy(b.x);
    tfc_value_destroy(b.y);
    return 0;
}
