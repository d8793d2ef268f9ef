/* dist_mp: model parallelism across ranks (issue 15), for tests/test_dist_mp.sh. An MLP of L
 * dense layers (L = 2 or 3), layer l built under the placement scope "rank:l" (the loss under
 * the last layer's), trained by tfc_minimize's SGD without any hint on its gradient or update
 * nodes (they follow the forward nodes and the variables).
 *   dist_mp local L STEPS OUT   one process, no rank hints: the reference
 *   dist_mp mpi   L STEPS OUT   under mpirun -np L: every rank writes OUT.<rank>
 * OUT gets the raw bytes of: the logits of a first run (an inference plan: its steps are all
 * row-wise, so the row split may apply), the forward logits and loss of a second (fetches
 * only), the loss of each of STEPS training steps (fetch and train op in one run), then every
 * variable, fetched. Exits 1 on an error, or when training left the loss where it started.
 * DIST_MP_ROWS=N: a batch of N rows (default 32, at most 4096).
 * DIST_MP_ADAM=1 trains with Adam instead: its slot variables and step counter have no hint
 * (rank 0) while the variables they update live on other ranks, so they cross ranks each
 * step and go back home at its end. With Adam, the variables written to OUT are followed by
 * their slots and the optimizer's step counter, and all of them also go to OUT.vars (mpi:
 * OUT.vars.<rank>), alone.
 * DIST_MP_CKPT=PATH DIST_MP_CKPT_AT=K: after K training steps, every rank takes a checkpoint
 * into the store PATH.<rank> (local: PATH), then training goes on.
 * DIST_MP_RESTORE=PATH: after initializing, restores the latest checkpoint of the store
 * PATH.<rank> (local: PATH) before the first run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tfc-starpu/tfc.h>

enum { IN = 8, HIDDEN = 12, CLASSES = 4, MAXL = 3, MAXV = 3 * 2 * MAXL + 1, MAXROWS = 4096 };

#define CHECK(call, what)                                                          \
    do {                                                                           \
        if (call) {                                                                \
            fprintf(stderr, "dist_mp: %s: %s\n", what, tfc_errmsg());              \
            return 1;                                                              \
        }                                                                          \
    } while (0)

#define CHECK_RUN(call, what)                                                      \
    do {                                                                           \
        if (call) {                                                                \
            fprintf(stderr, "dist_mp: %s: %s\n", what, tfc_session_errmsg(s));     \
            return 1;                                                              \
        }                                                                          \
    } while (0)

/* Deterministic data of rows rows: x from an LCG, label = argmax of a fixed linear map. */
static void make_data(int rows, tfc_value **x, tfc_value **y)
{
    tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){rows, IN}), x);
    tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){rows}), y);
    float *xp = tfc_value_data(*x);
    int32_t *yp = tfc_value_data(*y);
    uint32_t s = 777;
    for (int i = 0; i < rows; i++) {
        float score[CLASSES] = {0};
        for (int j = 0; j < IN; j++) {
            s = s * 1664525u + 1013904223u;
            xp[i * IN + j] = (float)(s >> 8) / 16777216.0f * 2 - 1;
            for (int c = 0; c < CLASSES; c++) score[c] += xp[i * IN + j] * (float)((j + c) % 3 - 1);
        }
        yp[i] = 0;
        for (int c = 1; c < CLASSES; c++) if (score[c] > score[yp[i]]) yp[i] = c;
    }
}

static void put(FILE *f, tfc_value *v)
{
    fwrite(tfc_value_data(v), 1, tfc_value_nbytes(v), f);
    tfc_value_destroy(v);
}

/* The store of DIST_MP_CKPT / DIST_MP_RESTORE: PATH.<rank> under mpirun, else PATH. */
static tfc_status open_store(const char *base, int mpi, int rank, unsigned flags, tfc_store **st)
{
    char path[512];
    snprintf(path, sizeof path, mpi ? "%s.%d" : "%s", base, rank);
    return tfc_store_open(path, flags, st);
}

/* Adam's slots of the nv trainable variables and its step counter, after them in vars. */
static int add_slots(tfc_graph *g, tfc_tensor **vars, int nv)
{
    int n = nv;
    for (int i = 0; i < nv; i++)
        for (int k = 0; k < 2; k++) {
            char name[256];
            snprintf(name, sizeof name, "%s/%s", tfc_tensor_name(vars[i]), k ? "adam_v" : "adam_m");
            if (!(vars[n++] = tfc_graph_find(g, name))) return -1;
        }
    return (vars[n++] = tfc_graph_find(g, "optimizer/iterations")) ? n : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: dist_mp local|mpi LAYERS STEPS OUT\n");
        return 2;
    }
    int mpi = strcmp(argv[1], "mpi") == 0, layers = atoi(argv[2]), steps = atoi(argv[3]);
    int rows = getenv("DIST_MP_ROWS") ? atoi(getenv("DIST_MP_ROWS")) : 32;
    if (layers < 2 || layers > MAXL || rows < 1 || rows > MAXROWS) return 2;
    tfc_ctx *ctx;
    CHECK(tfc_ctx_create_dist(mpi ? TFC_DIST_MPI : TFC_DIST_NONE, &ctx), "context");
    int rank = tfc_dist_rank(ctx);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, IN}));
    tfc_tensor *y = tfc_placeholder(g, "y", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h = x, *loss = NULL;
    for (int l = 0; l < layers; l++) {
        char where[16], name[16];
        snprintf(where, sizeof where, "rank:%d", l);
        snprintf(name, sizeof name, "layer%d", l);
        if (mpi) CHECK(tfc_graph_push_device(g, where, 1), "push_device");
        int last = l == layers - 1;
        h = tfc_dense(g, h, last ? CLASSES : HIDDEN, last ? TFC_ACT_NONE : TFC_ACT_RELU, name);
        if (last) loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, h, y), 0, NULL, 0);
        if (mpi) CHECK(tfc_graph_pop_device(g), "pop_device");
    }
    tfc_tensor *vars[MAXV];
    int nv = tfc_trainable_variables(g, vars, MAXV);
    int adam = getenv("DIST_MP_ADAM") != NULL;
    tfc_optimizer opt = tfc_optimizer_default(adam ? TFC_OPT_ADAM : TFC_OPT_SGD, adam ? 0.01 : 0.2);
    tfc_tensor *train = tfc_minimize(g, loss, 0, NULL, &opt, NULL);
    if (!train || nv != 2 * layers) {
        fprintf(stderr, "dist_mp: graph: %s\n", tfc_graph_errmsg(g));
        return 1;
    }
    tfc_session *s;
    CHECK(tfc_session_create(ctx, g, &s), "session");
    CHECK(tfc_session_init_variables(s), "init");
    const char *restore = getenv("DIST_MP_RESTORE"), *ckpt = getenv("DIST_MP_CKPT");
    int ckpt_at = getenv("DIST_MP_CKPT_AT") ? atoi(getenv("DIST_MP_CKPT_AT")) : -1;
    if (restore) {
        tfc_store *st;
        CHECK(open_store(restore, mpi, rank, TFC_STORE_READONLY, &st), "open the store to restore");
        if (tfc_store_restore(st, s, NULL, NULL)) {
            fprintf(stderr, "dist_mp: restore: %s\n", tfc_store_errmsg(st));
            return 1;
        }
        tfc_store_close(st);
    }
    int nall = adam ? add_slots(g, vars, nv) : nv;
    if (nall < 0) {
        fprintf(stderr, "dist_mp: Adam's slots or step counter not found\n");
        return 1;
    }
    tfc_value *xv, *yv;
    make_data(rows, &xv, &yv);
    char path[512];
    snprintf(path, sizeof path, mpi ? "%s.%d" : "%s", argv[4], rank);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); return 1; }
    tfc_tensor *ft[] = {x, y}, *fw[] = {h, loss};
    tfc_value *fv[] = {xv, yv}, *out[MAXV];
    CHECK_RUN(tfc_session_run(s, 1, ft, fv, 1, &h, out, 0, NULL), "inference");
    put(f, out[0]);
    CHECK_RUN(tfc_session_run(s, 2, ft, fv, 2, fw, out, 0, NULL), "forward");
    float first = *(float *)tfc_value_data(out[1]), last = first;
    put(f, out[0]);
    put(f, out[1]);
    for (int k = 0; k < steps; k++) {
        CHECK_RUN(tfc_session_run(s, 2, ft, fv, 1, &loss, out, 1, &train), "train step");
        last = *(float *)tfc_value_data(out[0]);
        put(f, out[0]);
        if (ckpt && k + 1 == ckpt_at) {
            tfc_store *st;
            CHECK(open_store(ckpt, mpi, rank, TFC_STORE_CREATE, &st), "open the checkpoint store");
            if (tfc_store_checkpoint(st, s, k + 1, NULL) || tfc_store_flush(st)) {
                fprintf(stderr, "dist_mp: checkpoint: %s\n", tfc_store_errmsg(st));
                return 1;
            }
            tfc_store_close(st);
        }
    }
    CHECK_RUN(tfc_session_run(s, 0, NULL, NULL, nall, vars, out, 0, NULL), "variables");
    snprintf(path, sizeof path, mpi ? "%s.vars.%d" : "%s.vars", argv[4], rank);
    FILE *fv2 = fopen(path, "wb");
    if (!fv2) { perror(path); return 1; }
    for (int i = 0; i < nall; i++) {
        fwrite(tfc_value_data(out[i]), 1, tfc_value_nbytes(out[i]), fv2);
        put(f, out[i]);
    }
    fclose(fv2);
    fclose(f);
    printf("rank %d: loss %.6f -> %.6f after %d steps\n", rank, first, last, steps);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_value_destroy(xv);
    tfc_value_destroy(yv);
    tfc_ctx_destroy(ctx);
    return steps > 0 && !(last < first);
}
