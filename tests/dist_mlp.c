/* dist_mlp: a small MLP trained data-parallel (issue 15), for tests/test_dist_mpi.sh.
 *   dist_mlp local R OWNERS STEPS OUT   one process, the reference of R ranks
 *   dist_mlp mpi   - OWNERS STEPS OUT   under mpirun: every rank writes OUT.<rank>
 *   ... STORE save     then a checkpoint of the step STEPS into STORE (rank 0 writes it)
 *   ... STORE resume   first restores STORE's latest checkpoint, and trains up to step STEPS
 * OWNERS is size (variables sharded by size, a large one split into row tiles owned by
 * different ranks: hidden/kernel is more than 1/R of the model's bytes), whole (by size, no
 * tiles: TFC_DIST_WHOLE_VARIABLES) or rank0, or op: tfc_minimize's train op stepped
 * by tfc_dist_op_step (what `mpirun tfc train` runs), which must give the same bits. OUT gets the raw float32 bytes of every
 * variable after STEPS synchronous steps of Adam over global batches of 24 rows. Exits 1 on an
 * error, or when training left the variables as they started. Prints the mean step time.
 * Backup workers (tests/test_dist_mpi.sh): DIST_MLP_BACKUPS=b sets b backups, and rank 0 writes
 * the ranks each step applied to OUT.chosen (a mask a line); DIST_MLP_SLOW_RANK=r sleeps
 * DIST_MLP_SLOW_MS ms in each of rank r's steps (a straggler); DIST_MLP_REPLAY=FILE (local
 * mode) applies each step the ranks of FILE's line. With a store to save, rank 0 also logs
 * the masks as the metric "dist/chosen" of steps 1..STEPS, which the checkpoint commits: then
 * DIST_MLP_REPLAY=STORE.db replays them from there. DIST_MLP_IN=n: n inputs instead of 6
 * (hidden/kernel n x 16: one dominant variable, for bench/RESULTS.md's bytes per rank).
 * DIST_MLP_OPT=sgd|momentum: that optimizer instead of Adam. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tfc-starpu/tfc.h>

enum { ROWS = 96, CLASSES = 3, BATCH = 24, NV = 4 };
static int IN = 6; /* DIST_MLP_IN */

#define CHECK(call, what)                                                          \
    do {                                                                           \
        if (call) {                                                                \
            fprintf(stderr, "dist_mlp: %s: %s\n", what, tfc_errmsg());             \
            return 1;                                                              \
        }                                                                          \
    } while (0)

/* Deterministic data: x from an LCG, label = argmax of a fixed linear map. */
static void make_data(tfc_value **x, tfc_value **y)
{
    tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){ROWS, (int64_t)IN}), x);
    tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){ROWS}), y);
    float *xp = tfc_value_data(*x);
    int32_t *yp = tfc_value_data(*y);
    uint32_t s = 12345;
    for (int i = 0; i < ROWS; i++) {
        float score[CLASSES] = {0};
        for (int j = 0; j < IN; j++) {
            s = s * 1664525u + 1013904223u;
            xp[i * IN + j] = (float)(s >> 8) / 16777216.0f * 2 - 1;
            for (int c = 0; c < CLASSES; c++) score[c] += xp[i * IN + j] * (float)((j + 2 * c) % 5 - 2);
        }
        yp[i] = 0;
        for (int c = 1; c < CLASSES; c++) if (score[c] > score[yp[i]]) yp[i] = c;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Writes the variables' bytes; *moved tells whether they differ from `before` (NULL: skip). */
static int dump(tfc_session *s, tfc_tensor **vars, const char *path, char *before, size_t *len, int *moved)
{
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (path && !f) { perror(path); return 1; }
    size_t pos = 0;
    *moved = 0;
    for (int i = 0; i < NV; i++) {
        tfc_value *v;
        if (tfc_session_read_variable(s, vars[i], &v)) return 1;
        size_t n = tfc_value_nbytes(v);
        if (f) fwrite(tfc_value_data(v), 1, n, f);
        if (before && !path) memcpy(before + pos, tfc_value_data(v), n);
        if (before && path) *moved |= memcmp(before + pos, tfc_value_data(v), n) != 0;
        pos += n;
        tfc_value_destroy(v);
    }
    *len = pos;
    return f ? fclose(f) != 0 : 0;
}

/* The latest checkpoint of path into s (every rank reads it), the batchers moved to its
 * position, *k0 its step. */
static int restore(tfc_session *s, const char *path, tfc_batcher **b, int first, int last, int *k0)
{
    tfc_store *st;
    CHECK(tfc_store_open(path, TFC_STORE_READONLY, &st), "store");
    tfc_restore_report rep = {0};
    CHECK(tfc_store_restore(st, s, NULL, &rep), "restore");
    for (int r = first; r <= last; r++)
        CHECK(tfc_batcher_seek(b[r], rep.position.epoch, rep.position.step), "seek");
    *k0 = (int)rep.step;
    tfc_restore_report_clear(&rep);
    tfc_store_close(st);
    return 0;
}

/* A checkpoint of step k with the batcher's position, written by this process alone. */
static int checkpoint(tfc_session *s, const char *path, tfc_store *open, tfc_batcher *b, int k)
{
    tfc_store *st = open;
    if (!st) CHECK(tfc_store_open(path, TFC_STORE_CREATE | TFC_STORE_TRAINER, &st), "store");
    tfc_input_position pos = {.seed = 3};
    tfc_batcher_position(b, &pos.epoch, &pos.step);
    CHECK(tfc_store_checkpoint(st, s, k, &pos), "checkpoint");
    CHECK(tfc_store_flush(st), "flush");
    tfc_store_close(st);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 8) {
        fprintf(stderr, "usage: dist_mlp local|mpi R size|rank0 STEPS OUT [STORE save|resume]\n");
        return 2;
    }
    int mpi = strcmp(argv[1], "mpi") == 0, steps = atoi(argv[4]);
    if (getenv("DIST_MLP_IN")) IN = atoi(getenv("DIST_MLP_IN"));
    if (IN < 1 || IN > 256) { fprintf(stderr, "dist_mlp: DIST_MLP_IN is 1 to 256\n"); return 2; }
    const char *store = argc == 8 ? argv[6] : NULL;
    int save = store && strcmp(argv[7], "save") == 0, resume = store && !save;
    tfc_ctx *ctx;
    CHECK(tfc_ctx_create_dist(mpi ? TFC_DIST_MPI : TFC_DIST_NONE, &ctx), "context");
    int rank = tfc_dist_rank(ctx), ranks = mpi ? tfc_dist_size(ctx) : atoi(argv[2]);
    if (mpi) { /* for tests/test_dist_mpi.sh, which kills or stops one rank */
        char pidpath[512];
        snprintf(pidpath, sizeof pidpath, "%s.%d.pid", argv[5], rank);
        FILE *pf = fopen(pidpath, "w");
        if (pf) fprintf(pf, "%ld\n", (long)getpid()), fclose(pf);
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, (int64_t)IN}));
    tfc_tensor *y = tfc_placeholder(g, "y", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h = tfc_dense(g, x, 16, TFC_ACT_RELU, "hidden");
    tfc_tensor *logits = tfc_dense(g, h, CLASSES, TFC_ACT_NONE, "out");
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, y), 0, NULL, 0);
    tfc_tensor *vars[NV];
    if (tfc_trainable_variables(g, vars, NV) != NV) { fprintf(stderr, "dist_mlp: %s\n", tfc_graph_errmsg(g)); return 1; }
    const char *kind = getenv("DIST_MLP_OPT"); /* sgd, momentum or adam (the default) */
    tfc_optimizer opt = tfc_optimizer_default(!kind || !strcmp(kind, "adam") ? TFC_OPT_ADAM
                                              : !strcmp(kind, "sgd") ? TFC_OPT_SGD
                                                                     : TFC_OPT_MOMENTUM, 0.01);
    tfc_dist_train *t;
    unsigned flags = !strcmp(argv[3], "rank0") ? TFC_DIST_OWNERS_RANK0
                     : !strcmp(argv[3], "whole") ? TFC_DIST_WHOLE_VARIABLES : 0;
    CHECK(tfc_dist_train_create(g, loss, NV, vars, &opt, ranks, flags, &t), "trainer");
    for (int i = 0; i < NV && rank == 0; i++) /* tests/test_dist_mpi.sh checks the tiles */
        if (tfc_dist_train_tiles(t, i) > 1)
            printf("tiles: %s in %d\n", tfc_tensor_name(vars[i]), tfc_dist_train_tiles(t, i));
    /* built in every mode, so that every mode has the same graph; its Adam shares the slots
     * and counts its steps as the trainer's counters do */
    tfc_tensor *train_op = tfc_minimize(g, loss, NV, vars, &opt, NULL);
    tfc_dist_op *op = NULL;
    int use_op = strcmp(argv[3], "op") == 0;
    CHECK(!train_op || tfc_dist_op_create(g, train_op, &op), "train op");
    tfc_session *s;
    CHECK(tfc_session_create(ctx, g, &s), "session");
    CHECK(tfc_session_init_variables(s), "init");
    static char before[1 << 20];
    size_t len;
    int moved;
    if (dump(s, vars, NULL, before, &len, &moved)) return 1;

    tfc_value *xs, *ys;
    make_data(&xs, &ys);
    tfc_batcher *b[8];
    int first = mpi ? rank : 0, last = mpi ? rank : ranks - 1;
    for (int r = first; r <= last; r++)
        CHECK(tfc_batcher_create_shard(2, (tfc_value *[]){xs, ys}, BATCH, 3,
                                       TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST, r, ranks, &b[r]), "batcher");
    tfc_tensor *feeds[2] = {x, y};
    const char *backups = getenv("DIST_MLP_BACKUPS"), *slow = getenv("DIST_MLP_SLOW_RANK");
    const char *slow_ms = getenv("DIST_MLP_SLOW_MS"), *replay = getenv("DIST_MLP_REPLAY");
    if (backups && tfc_dist_train_set_backups(t, atoi(backups))) {
        fprintf(stderr, "dist_mlp: backups: %s\n", tfc_dist_train_errmsg(t));
        return 1;
    }
    size_t rlen = replay ? strlen(replay) : 0;
    int replay_db = rlen > 3 && !strcmp(replay + rlen - 3, ".db");
    FILE *chosen = NULL, *replayed = replay && !replay_db ? fopen(replay, "r") : NULL;
    double *masks = NULL;
    int n_masks = 0;
    if (replay_db) { /* the masks the checkpoint committed */
        tfc_store *rs;
        int64_t *at = NULL;
        CHECK(tfc_store_open(replay, TFC_STORE_READONLY, &rs), "replay store");
        CHECK(tfc_store_read_metric(rs, "dist/chosen", &n_masks, &at, &masks), "dist/chosen");
        free(at);
        tfc_store_close(rs);
        replay = NULL;
    }
    tfc_store *chosen_store = NULL;
    if (backups && save && rank == 0)
        CHECK(tfc_store_open(store, TFC_STORE_CREATE | TFC_STORE_TRAINER, &chosen_store), "store");
    if (replay && !replayed) { perror(replay); return 1; }
    if (backups && rank == 0) {
        char cpath[512];
        snprintf(cpath, sizeof cpath, "%s.chosen", argv[5]);
        if (!(chosen = fopen(cpath, "w"))) { perror(cpath); return 1; }
    }
    int k0 = 0;
    if (resume && restore(s, store, b, first, last, &k0)) return 1;
    double t0 = now_s();
    /* DIST_MLP_FAIL_RANK=r: rank r returns 1 before step 2, as a rank whose step failed does,
     * leaving the others waiting (tests/test_dist_mpi.sh: the job must end all the same) */
    const char *fail_rank = getenv("DIST_MLP_FAIL_RANK");
    for (int k = k0; k < steps; k++) {
        if (mpi && fail_rank && atoi(fail_rank) == rank && k == 2) {
            fprintf(stderr, "dist_mlp: rank %d gives up at step %d (DIST_MLP_FAIL_RANK)\n", rank, k);
            return 1;
        }
        if (mpi && slow && atoi(slow) == rank) usleep(1000 * (useconds_t)atoi(slow_ms ? slow_ms : "300"));
        unsigned long long mask = 0;
        if (masks && k < n_masks) mask = (unsigned long long)masks[k];
        if ((masks && (k >= n_masks || tfc_dist_train_replay(t, mask))) ||
            (replayed && (fscanf(replayed, "%llx", &mask) != 1 || tfc_dist_train_replay(t, mask)))) {
            fprintf(stderr, "dist_mlp: replay: no mask for step %d, or a bad one\n", k);
            return 1;
        }
        tfc_value *slices[8 * 2];
        for (int r = first; r <= last; r++)
            CHECK(tfc_batcher_next(b[r], &slices[2 * (r - first)], NULL), "batch");
        tfc_status st = use_op ? tfc_dist_op_step(op, ctx, s, 2, feeds, slices, BATCH, 0, NULL, NULL)
                        : mpi  ? tfc_dist_train_step(t, ctx, s, 2, feeds, slices, BATCH)
                               : tfc_dist_train_step_local(t, s, 2, feeds, slices, BATCH);
        if (st) {
            fprintf(stderr, "dist_mlp: step %d: %s\n", k,
                    use_op ? tfc_dist_op_errmsg(op) : tfc_dist_train_errmsg(t));
            return 1;
        }
        if (chosen) fprintf(chosen, "%llx\n", tfc_dist_train_chosen(t));
        if (chosen_store)
            CHECK(tfc_store_log_metric(chosen_store, k + 1, "dist/chosen",
                                       (double)tfc_dist_train_chosen(t)), "log dist/chosen");
    }
    if (chosen) fclose(chosen);
    if (replayed) fclose(replayed);
    free(masks);
    double per_step = (now_s() - t0) / (steps > k0 ? steps - k0 : 1);
    if (save) {
        if (tfc_dist_train_gather(t, ctx, s)) {
            fprintf(stderr, "dist_mlp: gather: %s\n", tfc_dist_train_errmsg(t));
            return 1;
        }
        if (rank == 0 && checkpoint(s, store, chosen_store, b[first], steps)) return 1;
    }
    char path[512];
    snprintf(path, sizeof path, mpi ? "%s.%d" : "%s", argv[5], rank);
    if (dump(s, vars, path, before, &len, &moved)) return 1;
    printf("rank %d of %d: %d steps, %.3f ms per step, variables %s\n", rank, ranks, steps,
           1e3 * per_step, moved ? "trained" : "unchanged");
    for (int r = first; r <= last; r++) tfc_batcher_destroy(b[r]);
    tfc_value_destroy(xs), tfc_value_destroy(ys);
    tfc_session_destroy(s);
    tfc_dist_train_destroy(t);
    tfc_dist_op_destroy(op);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    return moved || steps == 0 ? 0 : 1;
}
