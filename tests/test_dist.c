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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("dist", test_ctx_open, test_ctx_close);
    TEST_ADD(test_shards_are_the_global_batch);
    TEST_ADD(test_shard_bad_args);
    TEST_ADD(test_dist_api_local);
    return test_main();
}
