/* test_dist.c: the parts of distribution (issue 15) that run in one process: the batcher's
 * per-rank slices of the global batch, and the distribution API's answers (the ranks
 * themselves run under mpirun in tests/test_dist.sh). */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

enum { N = 101 };

/* A source whose row i holds i, so a batch tells which rows it took. */
static tfc_value *row_ids(void)
{
    int64_t dims[] = {N};
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_create(TFC_INT64, tfc_shape_of(1, dims), &v) == TFC_OK);
    int64_t *p = tfc_value_data(v);
    for (int i = 0; i < N; i++) p[i] = i;
    return v;
}

/* Rows of epoch `epoch` in the order the batcher gives them, batch by batch; returns the
 * number of rows and fills per_step[s] with the rows of step s. */
static int64_t take_epoch(tfc_batcher *b, int64_t *rows, int64_t *per_step)
{
    int64_t pos = 0;
    int done = 0;
    for (int s = 0; !done; s++) {
        tfc_value *v;
        CU_ASSERT_FATAL(tfc_batcher_next(b, &v, &done) == TFC_OK);
        int64_t r = tfc_value_shape(v).dims[0];
        memcpy(rows + pos, tfc_value_cdata(v), (size_t)r * sizeof *rows);
        per_step[s] = r;
        pos += r;
    }
    return pos;
}

/* The slices of ranks 0..R-1, step by step in rank order, are the one-process batches. */
static void check_shards(int n_ranks, int64_t batch, unsigned flags)
{
    tfc_value *src = row_ids();
    tfc_batcher *one;
    CU_ASSERT_FATAL(tfc_batcher_create(1, &src, batch, 5, flags, &one) == TFC_OK);
    int64_t steps = tfc_batcher_steps_per_epoch(one);
    for (int epoch = 0; epoch < 2; epoch++) {
        int64_t whole[N], whole_steps[N];
        int64_t n = take_epoch(one, whole, whole_steps);
        int64_t got[8][N], got_steps[8][N], pos[8] = {0};
        for (int r = 0; r < n_ranks; r++) {
            tfc_batcher *b;
            CU_ASSERT_FATAL(tfc_batcher_create_shard(1, &src, batch, 5, flags, r, n_ranks, &b) == TFC_OK);
            CU_ASSERT_EQUAL(tfc_batcher_steps_per_epoch(b), steps);
            if (epoch) CU_ASSERT_FATAL(tfc_batcher_seek(b, epoch, 0) == TFC_OK);
            take_epoch(b, got[r], got_steps[r]);
            tfc_batcher_destroy(b);
        }
        int64_t at = 0, same = 1;
        for (int64_t s = 0; s < steps; s++) {
            int64_t rows = 0;
            for (int r = 0; r < n_ranks; r++) {
                same &= memcmp(got[r] + pos[r], whole + at + rows,
                               (size_t)got_steps[r][s] * sizeof(int64_t)) == 0;
                CU_ASSERT(got_steps[r][s] >= whole_steps[s] / n_ranks);
                CU_ASSERT(got_steps[r][s] <= whole_steps[s] / n_ranks + 1);
                rows += got_steps[r][s];
                pos[r] += got_steps[r][s];
            }
            CU_ASSERT_EQUAL(rows, whole_steps[s]);
            at += rows;
        }
        CU_ASSERT(same);
        CU_ASSERT_EQUAL(at, n);
    }
    tfc_batcher_destroy(one);
    tfc_value_destroy(src);
}

static void test_shards_are_the_global_batch(void)
{
    check_shards(1, 10, TFC_BATCHER_SHUFFLE);
    check_shards(2, 12, TFC_BATCHER_SHUFFLE);            /* the last batch 5 rows: 2, 3 */
    check_shards(3, 10, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST); /* 10 rows: 3, 3, 4 */
    check_shards(3, 16, 0);                              /* in order; the last batch 5 rows */
    check_shards(5, 17, TFC_BATCHER_SHUFFLE | TFC_BATCHER_DROP_LAST);
    check_shards(5, 32, TFC_BATCHER_SHUFFLE);            /* last batch of 5: a row each */
}

static void test_shard_bad_args(void)
{
    tfc_value *src = row_ids();
    tfc_batcher *b = (tfc_batcher *)1;
    CU_ASSERT_EQUAL(tfc_batcher_create_shard(1, &src, 10, 1, 0, 2, 2, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(b);
    CU_ASSERT(strstr(tfc_errmsg(), "rank 2 of 2 ranks") != NULL);
    CU_ASSERT_EQUAL(tfc_batcher_create_shard(1, &src, 10, 1, 0, 0, 0, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_batcher_create_shard(1, &src, 10, 1, 0, -1, 2, &b), TFC_ERR_INVALID_ARGUMENT);
    /* 2 rows for 3 ranks; 101 rows in batches of 20 leave a last batch of 1 row for 2 ranks */
    CU_ASSERT_EQUAL(tfc_batcher_create_shard(1, &src, 2, 1, 0, 0, 3, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_errmsg(), "batch of 2 rows leaves rank 0 of 3 ranks no row") != NULL);
    CU_ASSERT_EQUAL(tfc_batcher_create_shard(1, &src, 20, 1, 0, 0, 2, &b), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_errmsg(), "DROP_LAST") != NULL);
    CU_ASSERT_EQUAL(tfc_batcher_create_shard(1, &src, 20, 1, TFC_BATCHER_DROP_LAST, 1, 2, &b), TFC_OK);
    tfc_batcher_destroy(b);
    tfc_value_destroy(src);
}

/* Without distribution: rank 0 of 1. A mode that does not exist is refused. */
static void test_dist_api_local(void)
{
    CU_ASSERT_EQUAL(tfc_dist_rank(test_ctx), 0);
    CU_ASSERT_EQUAL(tfc_dist_size(test_ctx), 1);
    CU_ASSERT_EQUAL(tfc_dist_rank(NULL), 0);
    CU_ASSERT_EQUAL(tfc_dist_size(NULL), 1);
    tfc_ctx *c = (tfc_ctx *)1;
    CU_ASSERT_EQUAL(tfc_ctx_create_dist((tfc_dist_mode)7, &c), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT(strstr(tfc_errmsg(), "distribution mode 7") != NULL);
    /* StarPU runs already (test_ctx) without MPI: a distributed context cannot join it, and
     * a build without MPI says it has none */
    CU_ASSERT_EQUAL(tfc_ctx_create_dist(TFC_DIST_MPI, &c), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT(strstr(tfc_errmsg(), tfc_dist_available() ? "StarPU runs already without MPI"
                                                        : "built without StarPU-MPI") != NULL);
}

/* A small model: x [-1, 4] -> dense 5 tanh -> dense 2, mean squared error against t. */
struct tiny {
    tfc_graph *g;
    tfc_tensor *x, *t, *loss, *vars[4];
};

static void tiny_build(struct tiny *m)
{
    CU_ASSERT_FATAL(tfc_graph_create(&m->g) == TFC_OK);
    m->x = tfc_placeholder(m->g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 4}));
    m->t = tfc_placeholder(m->g, "t", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 2}));
    tfc_tensor *h = tfc_dense(m->g, m->x, 5, TFC_ACT_TANH, "h");
    tfc_tensor *y = tfc_dense(m->g, h, 2, TFC_ACT_NONE, "y");
    tfc_tensor *d = tfc_sub(m->g, y, m->t);
    m->loss = tfc_reduce_mean(m->g, tfc_mul(m->g, d, d), 0, NULL, 0);
    CU_ASSERT_FATAL(tfc_trainable_variables(m->g, m->vars, 4) == 4);
}

static tfc_value *tiny_data(int rows, int cols, float seed)
{
    float p[64];
    for (int i = 0; i < rows * cols; i++) p[i] = (float)((i * 7 + (int)seed) % 11) / 11.0f - 0.4f;
    return test_f32(2, (int64_t[]){rows, cols}, p);
}

/* Owners by size (variables kept whole), all on rank 0, and the trainer's argument errors. */
static void test_train_owners_and_errors(void)
{
    struct tiny m;
    tiny_build(&m); /* h/kernel 20, h/bias 5, y/kernel 10, y/bias 2 floats */
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_SGD, 0.1);
    tfc_dist_train *t;
    CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 3,
                                          TFC_DIST_WHOLE_VARIABLES, &t) == TFC_OK);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(tfc_dist_train_tiles(t, i), 1);
    int want[4] = {0, 2, 1, 2}; /* 20 -> 0, 10 -> 1, 5 -> 2, 2 -> 2 (2 has 5, 1 has 10) */
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(tfc_dist_train_owner(t, i), want[i]);
        if (tfc_dist_train_owner(t, i) != want[i])
            printf("\n  %s: owner %d\n", tfc_tensor_name(m.vars[i]), tfc_dist_train_owner(t, i));
    }
    CU_ASSERT_EQUAL(tfc_dist_train_owner(t, 4), -1);
    tfc_dist_train_destroy(t);
    CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 3, TFC_DIST_OWNERS_RANK0, &t) == TFC_OK);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(tfc_dist_train_owner(t, i), 0);
    /* a context of 1 rank cannot step a trainer made for 3 */
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, m.g, &s) == TFC_OK);
    tfc_value *xv = tiny_data(6, 4, 1), *tv = tiny_data(6, 2, 2);
    CU_ASSERT_EQUAL(tfc_dist_train_step(t, test_ctx, s, 2, (tfc_tensor *[]){m.x, m.t},
                                        (tfc_value *[]){xv, tv}, 6), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_dist_train_errmsg(t), "the context has 1 ranks, the trainer was made for 3") != NULL);
    tfc_value_destroy(xv), tfc_value_destroy(tv);
    tfc_session_destroy(s);
    tfc_dist_train_destroy(t);

    t = (tfc_dist_train *)1;
    CU_ASSERT_EQUAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 0, 0, &t), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_EQUAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 2, 8, &t), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_errmsg(), "unknown flags 0x8") != NULL);
    tfc_tensor *i64 = tfc_variable(m.g, "count", TFC_FLOAT64, tfc_shape_of(0, NULL), tfc_init_zeros());
    tfc_tensor *loss2 = tfc_add(m.g, m.loss, tfc_cast(m.g, tfc_mul(m.g, i64, i64), TFC_FLOAT32));
    CU_ASSERT_EQUAL(tfc_dist_train_create(m.g, loss2, 1, &i64, &opt, 2, 0, &t), TFC_ERR_DTYPE);
    CU_ASSERT(strstr(tfc_errmsg(), "variable 'count' is not float32") != NULL);
    tfc_graph_destroy(m.g);
}

/* Checks variable i's tiles: rows[k] its first row (rows[n] its row count), owner[k] its owner. */
static void check_tiles(tfc_dist_train *t, int i, int n, const int64_t *rows, const int *owner)
{
    CU_ASSERT_EQUAL_FATAL(tfc_dist_train_tiles(t, i), n);
    for (int k = 0; k < n; k++) {
        int64_t r0 = -1, r1 = -1;
        int o = tfc_dist_train_tile(t, i, k, &r0, &r1);
        CU_ASSERT(o == owner[k] && r0 == rows[k] && r1 == rows[k + 1]);
        if (o != owner[k] || r0 != rows[k] || r1 != rows[k + 1])
            printf("\n  variable %d tile %d: rows [%lld, %lld) on rank %d\n", i, k,
                   (long long)r0, (long long)r1, o);
    }
    CU_ASSERT_EQUAL(tfc_dist_train_tile(t, i, n, NULL, NULL), -1);
    CU_ASSERT_EQUAL(tfc_dist_train_owner(t, i), owner[0]);
}

/* Large variables split into row tiles owned by different ranks (sched/dist_tile.c): which
 * rank owns which rows, by default (above the model's bytes / ranks), with a threshold, and
 * the cases that keep every variable whole. */
static void test_train_tiles(void)
{
    struct tiny m;
    tiny_build(&m); /* h/kernel [4,5] 80 B, h/bias [5] 20 B, y/kernel [5,2] 40 B, y/bias 8 B */
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.1);
    tfc_dist_train *t;
    CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 3, 0, &t) == TFC_OK);
    /* 80 B > 148 B / 3: h/kernel in 3 tiles of rows [0,1) [1,2) [2,4) (5, 5, 10 floats). Largest
     * first to the lightest rank holding no other tile of it: h/kernel's rows [2,4) -> 0,
     * y/kernel -> 1, rows [0,1) -> 2, rows [1,2) -> 1 (0 and 2 hold tiles), h/bias -> 2,
     * y/bias -> 0 (0 and 2 both have 40 B) */
    check_tiles(t, 0, 3, (int64_t[]){0, 1, 2, 4}, (int[]){2, 1, 0});
    check_tiles(t, 1, 1, (int64_t[]){0, 5}, (int[]){2});
    check_tiles(t, 2, 1, (int64_t[]){0, 5}, (int[]){1});
    check_tiles(t, 3, 1, (int64_t[]){0, 2}, (int[]){0});
    /* above 20 B: y/kernel too, rows [0,1) [1,3) [3,5) (2, 4, 4 floats); h/bias (20 B) whole.
     * h/kernel [2,4) -> 0, [0,1) -> 1, [1,2) -> 2, h/bias -> 1 (1 and 2 have 20 B), y/kernel
     * [1,3) -> 2, [3,5) -> 0 (0 and 1 have 40 B), [0,1) -> 1, y/bias -> 2 */
    CU_ASSERT_FATAL(tfc_dist_train_set_tiling(t, 20) == TFC_OK);
    check_tiles(t, 0, 3, (int64_t[]){0, 1, 2, 4}, (int[]){1, 2, 0});
    check_tiles(t, 1, 1, (int64_t[]){0, 5}, (int[]){1});
    check_tiles(t, 2, 3, (int64_t[]){0, 1, 3, 5}, (int[]){1, 2, 0});
    check_tiles(t, 3, 1, (int64_t[]){0, 2}, (int[]){2});
    CU_ASSERT_EQUAL(tfc_dist_train_set_tiling(t, -2), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_dist_train_errmsg(t), "set_tiling: -2 bytes") != NULL);
    CU_ASSERT_FATAL(tfc_dist_train_set_tiling(t, 0) == TFC_OK); /* none: owners by size */
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(tfc_dist_train_tiles(t, i), 1);
    CU_ASSERT_EQUAL(tfc_dist_train_owner(t, 0), 0);
    CU_ASSERT_EQUAL(tfc_dist_train_tiles(t, 4), -1);
    CU_ASSERT_EQUAL(tfc_dist_train_tile(t, 0, 1, NULL, NULL), -1);
    /* 2 ranks: 2 tiles of 2 rows, on ranks 0 and 1 */
    CU_ASSERT_FATAL(tfc_dist_train_set_tiling(t, -1) == TFC_OK);
    tfc_dist_train_destroy(t);
    CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 2, 0, &t) == TFC_OK);
    check_tiles(t, 0, 2, (int64_t[]){0, 2, 4}, (int[]){0, 1});
    /* backup workers put everything on rank 0, whole */
    CU_ASSERT_FATAL(tfc_dist_train_set_backups(t, 1) == TFC_OK);
    check_tiles(t, 0, 1, (int64_t[]){0, 4}, (int[]){0});
    tfc_dist_train_destroy(t);
    /* TFC_DIST_TILE_BYTES sets the threshold; a bad value is an error naming it */
    setenv("TFC_DIST_TILE_BYTES", "off", 1);
    CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 3, 0, &t) == TFC_OK);
    CU_ASSERT_EQUAL(tfc_dist_train_tiles(t, 0), 1);
    tfc_dist_train_destroy(t);
    setenv("TFC_DIST_TILE_BYTES", "lots", 1);
    CU_ASSERT_EQUAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 3, 0, &t),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_errmsg(), "TFC_DIST_TILE_BYTES must be an integer") != NULL);
    unsetenv("TFC_DIST_TILE_BYTES");
    /* whole: by flag, all on rank 0, and under global-norm clipping (not element-wise) */
    unsigned flags[2] = {TFC_DIST_WHOLE_VARIABLES, TFC_DIST_OWNERS_RANK0};
    for (int f = 0; f < 3; f++) {
        tfc_optimizer o = opt;
        if (f == 2) o.clip_norm = 1;
        CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &o, 3, f < 2 ? flags[f] : 0,
                                              &t) == TFC_OK);
        CU_ASSERT_EQUAL(tfc_dist_train_tiles(t, 0), 1);
        tfc_dist_train_destroy(t);
    }
    tfc_graph_destroy(m.g);
}

/* One rank, the reference path: the same bits as ordinary training with tfc_minimize (the
 * weighted sum of one slice is the gradient times 1.0f), so the reference is training. */
static void test_train_one_rank_is_minimize(void)
{
    float got[2][64];
    for (int way = 0; way < 2; way++) {
        struct tiny m;
        tiny_build(&m);
        tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.05);
        tfc_dist_train *t = NULL;
        tfc_tensor *step = NULL;
        if (way == 0) {
            CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 1, 0, &t) == TFC_OK);
        } else {
            CU_ASSERT_FATAL((step = tfc_minimize(m.g, m.loss, 4, m.vars, &opt, NULL)) != NULL);
        }
        tfc_session *s;
        CU_ASSERT_FATAL(tfc_session_create(test_ctx, m.g, &s) == TFC_OK);
        CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
        for (int k = 0; k < 5; k++) {
            tfc_value *xv = tiny_data(6, 4, (float)k), *tv = tiny_data(6, 2, (float)(k + 3));
            tfc_tensor *f[2] = {m.x, m.t};
            tfc_value *v[2] = {xv, tv};
            tfc_status st = way == 0 ? tfc_dist_train_step(t, test_ctx, s, 2, f, v, 6)
                                     : tfc_session_run(s, 2, f, v, 0, NULL, NULL, 1, &step);
            CU_ASSERT_EQUAL(st, TFC_OK);
            tfc_value_destroy(xv), tfc_value_destroy(tv);
        }
        int pos = 0;
        for (int i = 0; i < 4; i++) {
            tfc_value *v;
            CU_ASSERT_FATAL(tfc_session_read_variable(s, m.vars[i], &v) == TFC_OK);
            memcpy(got[way] + pos, tfc_value_data(v), tfc_value_nbytes(v));
            pos += (int)(tfc_value_nbytes(v) / sizeof(float));
            tfc_value_destroy(v);
        }
        tfc_session_destroy(s);
        tfc_dist_train_destroy(t);
        tfc_graph_destroy(m.g);
    }
    CU_ASSERT(memcmp(got[0], got[1], 37 * sizeof(float)) == 0);
}

/* Backup workers, replay, the gathered state and the train-op steps, in one process: their
 * argument checks, the state a trainer found (each Adam update's slots and counter), a replay
 * of all ranks equal to the plain reference, and one that drops a rank differing from it. */
static void test_backups_replay_and_op(void)
{
    struct tiny m;
    tiny_build(&m);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.05);
    tfc_dist_train *t;
    CU_ASSERT_FATAL(tfc_dist_train_create(m.g, m.loss, 4, m.vars, &opt, 3, 0, &t) == TFC_OK);
    CU_ASSERT_EQUAL(tfc_dist_train_set_backups(t, 3), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_dist_train_errmsg(t), "3 backups among 3 ranks") != NULL);
    CU_ASSERT_EQUAL(tfc_dist_train_set_backups(t, -1), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_dist_train_set_backups(t, 1), TFC_OK);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(tfc_dist_train_owner(t, i), 0);
    CU_ASSERT_EQUAL(tfc_dist_train_replay(t, 0x8), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_dist_train_errmsg(t), "beyond the 3 ranks") != NULL);
    CU_ASSERT_EQUAL(tfc_dist_train_replay(t, 0x6), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_dist_train_errmsg(t), "leaves out rank 0") != NULL);
    CU_ASSERT_EQUAL(tfc_dist_train_gather(NULL, test_ctx, NULL), TFC_ERR_INVALID_ARGUMENT);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, m.g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    CU_ASSERT_EQUAL(tfc_dist_train_gather(t, test_ctx, s), TFC_OK); /* one process: all here */
    /* the same step three ways: all slices, a replay of all, a replay without rank 2 */
    float got[3][64];
    for (int way = 0; way < 3; way++) {
        CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
        if (way) CU_ASSERT_EQUAL(tfc_dist_train_replay(t, way == 1 ? 0x7 : 0x3), TFC_OK);
        tfc_value *v[6];
        for (int r = 0; r < 3; r++) v[2 * r] = tiny_data(2, 4, (float)r), v[2 * r + 1] = tiny_data(2, 2, (float)r + 5);
        CU_ASSERT_EQUAL(tfc_dist_train_step_local(t, s, 2, (tfc_tensor *[]){m.x, m.t}, v, 6), TFC_OK);
        CU_ASSERT_EQUAL(tfc_dist_train_chosen(t), way == 2 ? 0x3u : 0x7u);
        for (int k = 0; k < 6; k++) tfc_value_destroy(v[k]);
        int pos = 0;
        for (int i = 0; i < 4; i++) {
            tfc_value *val;
            CU_ASSERT_FATAL(tfc_session_read_variable(s, m.vars[i], &val) == TFC_OK);
            memcpy(got[way] + pos, tfc_value_data(val), tfc_value_nbytes(val));
            pos += (int)(tfc_value_nbytes(val) / sizeof(float));
            tfc_value_destroy(val);
        }
    }
    CU_ASSERT(memcmp(got[0], got[1], 37 * sizeof(float)) == 0);
    CU_ASSERT(memcmp(got[0], got[2], 37 * sizeof(float)) != 0);
    tfc_session_destroy(s);
    tfc_dist_train_destroy(t);
    /* a train op that groups no optimizer update */
    tfc_dist_op *op = (tfc_dist_op *)1;
    tfc_tensor *none = tfc_group(m.g, 1, &m.loss);
    CU_ASSERT_EQUAL(tfc_dist_op_create(m.g, none, &op), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(op);
    CU_ASSERT(strstr(tfc_errmsg(), "groups no optimizer update") != NULL);
    tfc_graph_destroy(m.g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("dist", test_ctx_open, test_ctx_close);
    TEST_ADD(test_shards_are_the_global_batch);
    TEST_ADD(test_shard_bad_args);
    TEST_ADD(test_dist_api_local);
    TEST_ADD(test_train_owners_and_errors);
    TEST_ADD(test_train_tiles);
    TEST_ADD(test_train_one_rank_is_minimize);
    TEST_ADD(test_backups_replay_and_op);
    return test_main();
}
