/* test_session.c: running graphs: pruning (an unneeded node never runs), plan caching keyed by
 * feed shapes, repeated runs without graph work, asynchronous runs, concurrent runs from
 * several threads, overlap of independent nodes seen in StarPU's profiling records, variables
 * (initializers, reads through StarPU, snapshot of a fetched variable updated in the same run);
 * destroying a session with runs in flight waits for them and says so; the training flag
 * (a placeholder_with_default: default, feed, store round trip). */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static double var_value(tfc_session *s, tfc_tensor *v, int64_t i)
{
    tfc_value *r = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_session_read_variable(s, v, &r), TFC_OK);
    double x = tfc_value_get(r, i);
    tfc_value_destroy(r);
    return x;
}

static void test_pruning(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(4));
    tfc_tensor *counter = tfc_variable(g, "counter", TFC_FLOAT32, S1(1), tfc_init_zeros());
    tfc_tensor *bump = tfc_assign_add(g, counter, tfc_fill(g, S1(1), TFC_FLOAT32, 1.0)); /* unneeded */
    tfc_tensor *bad = tfc_gather(g, x, tfc_scalar(g, TFC_INT32, 99)); /* would fail if run */
    tfc_tensor *y = tfc_square(g, x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bump);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s), TFC_OK);
    float xd[4] = {1, 2, 3, 4};
    tfc_value *xv = test_f32(1, (int64_t[]){4}, xd), *yv;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_get(yv, 3), 16.0);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.tasks, 1); /* only square ran */
    CU_ASSERT_EQUAL(var_value(s, counter, 0), 0.0);
    /* running the target does bump it */
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, 1, &bump), TFC_OK);
    CU_ASSERT_EQUAL(var_value(s, counter, 0), 1.0);
    tfc_value_destroy(yv);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void run_batch(tfc_session *s, tfc_tensor *x, tfc_tensor *y, int batch)
{
    tfc_value *xv, *yv = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT32, S2(batch, 8), &xv), TFC_OK);
    float *d = tfc_value_data(xv);
    for (int i = 0; i < batch * 8; i++) d[i] = (float)(i % 13) - 6.0f;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_shape(yv).dims[0], batch);
    CU_ASSERT_EQUAL(tfc_value_shape(yv).dims[1], 1);
    /* row r sums relu(x) over 8 columns */
    for (int r = 0; r < batch; r += 17) {
        double want = 0;
        for (int c = 0; c < 8; c++) want += fmax(0.0, d[r * 8 + c]);
        CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(yv, r), want, 1e-5);
    }
    tfc_value_destroy(yv);
    tfc_value_destroy(xv);
}

static void test_plan_cache_by_feed_shape(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 8));
    tfc_tensor *y = tfc_reduce_sum(g, tfc_relu(g, x), 1, (int64_t[]){1}, 1);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_stats st;
    run_batch(s, x, y, 128);
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.lowerings, 1);
    run_batch(s, x, y, 96);
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.lowerings, 2);
    CU_ASSERT_EQUAL(st.plan_hits, 0);
    run_batch(s, x, y, 128); /* reuses the first plan */
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.lowerings, 2);
    CU_ASSERT_EQUAL(st.plan_hits, 1);
    CU_ASSERT_EQUAL(st.cached_plans, 2);
    /* LRU bound: with one slot, alternating shapes lower every time */
    tfc_session_set_plan_cache_size(s, 1);
    run_batch(s, x, y, 96);
    run_batch(s, x, y, 128);
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.cached_plans, 1);
    CU_ASSERT_EQUAL(st.lowerings, 4);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_repeated_runs_lower_once(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_INT64, tfc_shape_of(0, NULL), tfc_init_zeros());
    tfc_tensor *inc = tfc_assign_add(g, v, tfc_scalar(g, TFC_INT64, 1));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    for (int i = 0; i < 200; i++)
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, 1, &inc), TFC_OK);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.lowerings, 1);
    CU_ASSERT_EQUAL(st.runs, 200);
    CU_ASSERT_EQUAL(var_value(s, v, 0), 200.0);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_async_pipeline(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, S1(3));
    tfc_tensor *acc = tfc_variable(g, "acc", TFC_FLOAT64, S1(3), tfc_init_zeros());
    tfc_tensor *upd = tfc_assign_add(g, acc, x);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    enum { STEPS = 50 };
    double data[STEPS][3];
    tfc_value *feeds[STEPS];
    tfc_run *prev = NULL;
    for (int k = 0; k < STEPS; k++) {
        for (int j = 0; j < 3; j++) data[k][j] = k + 0.25 * j;
        CU_ASSERT_EQUAL_FATAL(tfc_value_wrap(TFC_FLOAT64, S1(3), data[k], &feeds[k]), TFC_OK);
        tfc_run *run;
        /* submit step k, then wait for step k-1 while k runs */
        CU_ASSERT_EQUAL_FATAL(tfc_session_run_async(s, 1, &x, &feeds[k], 1, &upd, 0, NULL, &run), TFC_OK);
        if (prev) {
            tfc_value *out;
            CU_ASSERT_EQUAL(tfc_run_wait(prev, &out), TFC_OK);
            /* the fetched value is the accumulator right after step k-1 */
            CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out, 0), (k - 1) * k / 2.0, 1e-9);
            tfc_value_destroy(out);
        }
        prev = run;
    }
    CU_ASSERT_EQUAL(tfc_run_wait(prev, NULL), TFC_OK);
    double want = (STEPS - 1) * STEPS / 2.0;
    CU_ASSERT_DOUBLE_EQUAL(var_value(s, acc, 0), want, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(var_value(s, acc, 2), want + 0.5 * STEPS, 1e-9);
    for (int k = 0; k < STEPS; k++) tfc_value_destroy(feeds[k]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

struct thread_arg {
    tfc_session *s;
    tfc_tensor *x, *y, *target;
    int id, runs, failures;
};

static void *increment_thread(void *p)
{
    struct thread_arg *a = p;
    for (int i = 0; i < a->runs; i++)
        if (tfc_session_run(a->s, 0, NULL, NULL, 0, NULL, NULL, 1, &a->target)) a->failures++;
    return NULL;
}

static void test_concurrent_assign_add(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, tfc_shape_of(0, NULL), tfc_init_zeros());
    tfc_tensor *inc = tfc_assign_add(g, v, tfc_scalar(g, TFC_FLOAT32, 1.0));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){s, NULL, NULL, inc, i, 1000, 0};
        pthread_create(&th[i], NULL, increment_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(args[i].failures, 0);
    }
    CU_ASSERT_EQUAL(var_value(s, v, 0), 4000.0);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void fill_input(float *d, int id, int n)
{
    for (int i = 0; i < n; i++) d[i] = (float)((i * 7 + id * 13) % 11) / 5.0f - 1.0f;
}

static void *forward_thread(void *p)
{
    struct thread_arg *a = p;
    float in[16 * 6];
    fill_input(in, a->id, 16 * 6);
    tfc_value *xv;
    tfc_value_wrap(TFC_FLOAT32, S2(16, 6), in, &xv);
    tfc_value *first = NULL;
    for (int i = 0; i < a->runs; i++) {
        tfc_value *yv;
        if (tfc_session_run(a->s, 1, &a->x, &xv, 1, &a->y, &yv, 0, NULL)) {
            a->failures++;
            continue;
        }
        if (!first) {
            first = yv;
            continue;
        }
        if (!test_same_f32(tfc_value_data(first), tfc_value_data(yv), 16 * 5, 1e-5)) a->failures++;
        tfc_value_destroy(yv);
    }
    /* hand the result back through the feed buffer's owner: compare in the main thread */
    a->target = (tfc_tensor *)first;
    tfc_value_destroy(xv);
    return NULL;
}

static void test_concurrent_forward(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 11);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 6));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S2(6, 5), tfc_init_glorot_uniform(3));
    tfc_tensor *y = tfc_softmax(g, tfc_tanh(g, tfc_matmul(g, x, w, 0, 0)), -1);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    /* serial results first */
    tfc_value *serial[4];
    for (int t = 0; t < 4; t++) {
        float in[16 * 6];
        fill_input(in, t, 16 * 6);
        tfc_value *xv = test_f32(2, (int64_t[]){16, 6}, in);
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &serial[t], 0, NULL), TFC_OK);
        tfc_value_destroy(xv);
    }
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){s, x, y, NULL, i, 100, 0};
        pthread_create(&th[i], NULL, forward_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        tfc_value *got = (tfc_value *)args[i].target;
        CU_ASSERT_EQUAL(args[i].failures, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);
        CU_ASSERT_TRUE(test_same_f32(tfc_value_data(got), tfc_value_data(serial[i]), 16 * 5, 1e-5));
        tfc_value_destroy(got);
        tfc_value_destroy(serial[i]);
    }
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_independent_nodes_overlap(void)
{
    tfc_ctx_info info;
    tfc_ctx_info_get(test_ctx, &info);
    /* an OpenCL worker (PoCL on the same cores) need not be chosen: a performance-model
     * scheduler may rightly keep both matmuls on the one CPU worker (STARPU_NCPU=1 dmda) */
    if (info.n_cpu_workers + info.n_cuda_workers < 2) {
        fprintf(stderr, "(fewer than two CPU/CUDA workers: overlap not assured, checked nothing) ");
        return;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    enum { N = 384 };
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, S2(N, N));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, S2(N, N));
    tfc_tensor *ya = tfc_matmul(g, a, a, 0, 0), *yb = tfc_matmul(g, b, b, 0, 1);
    tfc_tensor_set_name(ya, "left");
    tfc_tensor_set_name(yb, "right");
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_set_profiling(s, 1), TFC_OK);
    tfc_value *av, *bv;
    tfc_value_create(TFC_FLOAT32, S2(N, N), &av);
    tfc_value_create(TFC_FLOAT32, S2(N, N), &bv);
    fill_input(tfc_value_data(av), 1, N * N);
    fill_input(tfc_value_data(bv), 2, N * N);
    tfc_tensor *feeds[2] = {a, b}, *fetches[2] = {ya, yb};
    tfc_value *vals[2] = {av, bv};
    int overlapped = 0, tries;
    /* Under load (make -j, a shared machine) both workers may seldom be awake at once: keep
     * trying for up to 1000 runs or 30 s. */
    time_t t_end = time(NULL) + 30;
    for (tries = 0; tries < 1000 && !overlapped && time(NULL) < t_end; tries++) {
        tfc_value *out[2];
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, feeds, vals, 2, fetches, out, 0, NULL), TFC_OK);
        tfc_value_destroy(out[0]);
        tfc_value_destroy(out[1]);
        const tfc_task_record *r;
        int n = tfc_session_last_records(s, &r);
        CU_ASSERT_EQUAL_FATAL(n, 2);
        CU_ASSERT(r[0].end_us >= r[0].start_us && r[0].start_us > 0);
        const tfc_task_record *l = strcmp(r[0].node, "left") ? &r[1] : &r[0];
        const tfc_task_record *q = l == &r[0] ? &r[1] : &r[0];
        CU_ASSERT_STRING_EQUAL(q->node, "right");
        overlapped = l->worker != q->worker && l->start_us < q->end_us && q->start_us < l->end_us;
    }
    fprintf(stderr, "(overlap seen after %d runs) ", tries);
    CU_ASSERT(overlapped);
    tfc_session_set_profiling(s, 0);
    tfc_value_destroy(av);
    tfc_value_destroy(bv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_fetch_reads_before_update(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S1(2), tfc_init_constant(5.0));
    tfc_tensor *upd = tfc_assign_sub(g, w, tfc_fill(g, S1(2), TFC_FLOAT32, 1.5));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    tfc_tensor *fetches[2] = {w, upd};
    tfc_value *out[2];
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 2, fetches, out, 0, NULL), TFC_OK);
        CU_ASSERT_EQUAL(tfc_value_get(out[0], 1), 5.0 - 1.5 * i);       /* before */
        CU_ASSERT_EQUAL(tfc_value_get(out[1], 1), 5.0 - 1.5 * (i + 1)); /* after */
        tfc_value_destroy(out[0]);
        tfc_value_destroy(out[1]);
    }
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_initializers(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 1234);
    tfc_tensor *u = tfc_variable(g, "u", TFC_FLOAT64, S2(100, 50), tfc_init_uniform(-2, 3, 1));
    tfc_tensor *u2 = tfc_variable(g, "u2", TFC_FLOAT64, S2(100, 50), tfc_init_uniform(-2, 3, 2));
    tfc_tensor *n = tfc_variable(g, "n", TFC_FLOAT64, S1(20000), tfc_init_normal(1, 2, 3));
    tfc_tensor *t = tfc_variable(g, "t", TFC_FLOAT32, S1(5000), tfc_init_truncated_normal(0, 1, 4));
    tfc_tensor *gl = tfc_variable(g, "gl", TFC_FLOAT32, S2(784, 256), tfc_init_glorot_uniform(5));
    tfc_tensor *c = tfc_variable(g, "c", TFC_INT32, S1(3), tfc_init_constant(7));
    tfc_tensor *o = tfc_variable(g, "o", TFC_BOOL, S1(3), tfc_init_ones());
    tfc_session *s1, *s2;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s1), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s2), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s1), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variable(s2, u), TFC_OK);
    tfc_value *a, *b, *b2, *nv, *tv, *gv;
    tfc_session_read_variable(s1, u, &a);
    tfc_session_read_variable(s2, u, &b);
    tfc_session_read_variable(s1, u2, &b2);
    CU_ASSERT_EQUAL(memcmp(tfc_value_data(a), tfc_value_data(b), tfc_value_nbytes(a)), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(tfc_value_data(a), tfc_value_data(b2), tfc_value_nbytes(a)), 0);
    double lo = 1e9, hi = -1e9, sum = 0, sq = 0;
    for (int i = 0; i < 5000; i++) {
        double x = tfc_value_get(a, i);
        lo = fmin(lo, x); hi = fmax(hi, x);
    }
    CU_ASSERT(lo >= -2 && hi < 3 && lo < -1.9 && hi > 2.9);
    tfc_session_read_variable(s1, n, &nv);
    for (int i = 0; i < 20000; i++) {
        double x = tfc_value_get(nv, i);
        sum += x; sq += x * x;
    }
    double mean = sum / 20000, sd = sqrt(sq / 20000 - mean * mean);
    CU_ASSERT(fabs(mean - 1) < 0.06 && fabs(sd - 2) < 0.06);
    tfc_session_read_variable(s1, t, &tv);
    for (int i = 0; i < 5000; i++) CU_ASSERT_FATAL(fabs(tfc_value_get(tv, i)) <= 2.0);
    tfc_session_read_variable(s1, gl, &gv);
    double limit = sqrt(6.0 / (784 + 256)), mx = 0;
    for (int i = 0; i < 784 * 256; i++) mx = fmax(mx, fabs(tfc_value_get(gv, i)));
    CU_ASSERT(mx <= limit && mx > 0.99 * limit);
    CU_ASSERT_EQUAL(var_value(s1, c, 2), 7.0);
    CU_ASSERT_EQUAL(var_value(s1, o, 1), 1.0);
    /* s2 initialized only u: reading n there is an error, not an abort */
    tfc_value *none = NULL;
    CU_ASSERT_EQUAL(tfc_session_read_variable(s2, n, &none), TFC_ERR_UNINITIALIZED);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(s2), "'n'"));
    CU_ASSERT_FALSE(tfc_session_variable_initialized(s2, n));
    CU_ASSERT_TRUE(tfc_session_variable_initialized(s2, u));
    tfc_value *vals[] = {a, b, b2, nv, tv, gv};
    for (int i = 0; i < 6; i++) tfc_value_destroy(vals[i]);
    tfc_session_destroy(s1);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g);
}

static void test_write_variable_and_feed_override(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, S1(3), tfc_init_zeros());
    tfc_tensor *d = tfc_mul(g, v, tfc_scalar(g, TFC_FLOAT32, 2));
    tfc_tensor *e = tfc_add(g, d, tfc_scalar(g, TFC_FLOAT32, 1));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    float vals[3] = {1, 2, 3}, over[3] = {10, 20, 30};
    tfc_value *vv = test_f32(1, (int64_t[]){3}, vals), *ov = test_f32(1, (int64_t[]){3}, over), *out;
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 1, &e, &out, 0, NULL), TFC_ERR_UNINITIALIZED);
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, v, vv), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 1, &e, &out, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_get(out, 2), 7.0);
    tfc_value_destroy(out);
    /* feeding an intermediate cuts the graph above it */
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &d, &ov, 1, &e, &out, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_get(out, 2), 31.0);
    tfc_value_destroy(out);
    tfc_value_destroy(vv);
    tfc_value_destroy(ov);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* The text a call writes on stderr (fd 2), read back from a temporary file. */
struct stderr_capture {
    int saved;
    FILE *file;
};

static void stderr_capture_begin(struct stderr_capture *c)
{
    fflush(stderr);
    c->file = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->file);
    c->saved = dup(2);
    dup2(fileno(c->file), 2);
}

static char *stderr_capture_end(struct stderr_capture *c)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    long n = ftell(c->file);
    char *text = calloc(1, n > 0 ? (size_t)n + 1 : 1);
    rewind(c->file);
    if (text && n > 0 && fread(text, 1, (size_t)n, c->file) != (size_t)n) text[0] = 0;
    fclose(c->file);
    return text;
}

static int count_str(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* Destroying a session with runs submitted by tfc_session_run_async and never waited for:
 * destroy waits for them (their tasks read the feed and the session's buffers), says so on
 * stderr naming the session and each run, and drops their fetches. The feed is freed right
 * after destroy (a kernel still reading it would be a use after free for AddressSanitizer)
 * and the runs' tasks are all in the session's trace (TFC_TRACE records a run when it is
 * waited for): they completed before the session went. */
static void test_destroy_with_runs_in_flight(void)
{
    enum { N = 256, DEPTH = 12 };
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(N, N));
    tfc_tensor *z = x;
    for (int i = 0; i < DEPTH; i++) z = tfc_matmul(g, z, x, 0, 0); /* x = I: stays I */
    tfc_tensor *y = tfc_add(g, z, x);                             /* reads the feed last */
    tfc_tensor_set_name(y, "y");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_value *xv;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT32, S2(N, N), &xv), TFC_OK);
    float *xd = tfc_value_data(xv);
    for (int i = 0; i < N; i++) xd[i * N + i] = 1;
    char trace[] = "/tmp/tfc-session-trace-XXXXXX";
    int fd = mkstemp(trace);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    tfc_session *s;
    setenv("TFC_TRACE", trace, 1);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    unsetenv("TFC_TRACE");
    /* a task per product in flight (pinned, the chain would be one task) */
    CU_ASSERT_EQUAL(tfc_session_set_passes(s, TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS),
                    TFC_OK);
    tfc_value *out;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &out, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_get(out, 0), 2.0);
    CU_ASSERT_EQUAL(tfc_value_get(out, 1), 0.0);
    tfc_value_destroy(out);
    const tfc_task_record *r;
    int tasks = tfc_session_last_records(s, &r);
    CU_ASSERT(tasks >= DEPTH);
    tfc_run *fetching, *targeting;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run_async(s, 1, &x, &xv, 1, &y, 0, NULL, &fetching), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_run_async(s, 1, &x, &xv, 0, NULL, 1, &y, &targeting), TFC_OK);
    struct stderr_capture cap;
    stderr_capture_begin(&cap);
    tfc_session_destroy(s); /* neither run was waited for */
    char *said = stderr_capture_end(&cap);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
    fprintf(stderr, "%s", said ? said : "");
    CU_ASSERT_EQUAL(count_str(said, "tfc_session_destroy: session "), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "run 2 (fetches 'y') in flight"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "run 3 (targets 'y') in flight"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "tfc_run_wait"));
    free(said);
    FILE *f = fopen(trace, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[512];
    int events = 0;
    while (fgets(line, sizeof line, f)) events += strstr(line, "\"ph\":\"X\"") != NULL;
    fclose(f);
    CU_ASSERT_EQUAL(events, 3 * tasks); /* the synchronous run and both runs in flight */
    unlink(trace);
}

/* The training flag: a placeholder_with_default that a run sees as its default 0 unless fed,
 * fed with its shape checked, one per graph whatever scope is open, and kept with its default
 * by a store round trip. */
static float flag_run(tfc_session *s, tfc_tensor *flag, tfc_value *feed, tfc_tensor *y,
                      tfc_status want)
{
    tfc_value *yv = NULL;
    CU_ASSERT_EQUAL(tfc_session_run(s, feed ? 1 : 0, &flag, &feed, 1, &y, &yv, 0, NULL), want);
    float r = yv ? (float)tfc_value_get(yv, 0) : NAN;
    tfc_value_destroy(yv);
    return r;
}

static void test_training_flag(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_scope_push(g, "net");
    tfc_tensor *flag = tfc_training_flag(g);
    tfc_scope_pop(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(flag);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(flag), "training"); /* not net/training */
    CU_ASSERT_PTR_EQUAL(tfc_training_flag(g), flag);
    tfc_tensor *y = tfc_add(g, tfc_mul(g, flag, tfc_scalar(g, TFC_FLOAT32, 2)),
                            tfc_scalar(g, TFC_FLOAT32, 1));
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *one, *pair, *i32;
    tfc_value_scalar(TFC_FLOAT32, 1, &one);
    tfc_value_scalar(TFC_INT32, 1, &i32);
    tfc_value_create(TFC_FLOAT32, S1(2), &pair);
    CU_ASSERT_EQUAL(flag_run(s, flag, NULL, y, TFC_OK), 1.0f); /* unfed: the default 0 */
    CU_ASSERT_EQUAL(flag_run(s, flag, one, y, TFC_OK), 3.0f);
    CU_ASSERT_EQUAL(flag_run(s, flag, NULL, y, TFC_OK), 1.0f); /* no feed sticks */
    flag_run(s, flag, pair, y, TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_session_errmsg(s), "training"));
    flag_run(s, flag, i32, y, TFC_ERR_DTYPE);
    tfc_session_destroy(s);

    char dir[] = "test_session.XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/flag.db", dir);
    tfc_tensor_set_name(y, "y");
    tfc_store *st;
    tfc_graph *h = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &h), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    tfc_tensor *hflag = tfc_graph_find(h, "training"), *hy = tfc_graph_find(h, "y");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hflag);
    CU_ASSERT_PTR_EQUAL(tfc_training_flag(h), hflag);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_op(hflag), "placeholder_with_default");
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, h, &s), TFC_OK);
    CU_ASSERT_EQUAL(flag_run(s, hflag, NULL, hy, TFC_OK), 1.0f);
    CU_ASSERT_EQUAL(flag_run(s, hflag, one, hy, TFC_OK), 3.0f);
    tfc_session_destroy(s);
    tfc_graph_destroy(h);
    unlink(path);
    rmdir(dir);

    /* a "training" node of another kind is refused, naming what it is */
    tfc_graph *bad;
    tfc_graph_create(&bad);
    tfc_placeholder(bad, "training", TFC_FLOAT32, tfc_shape_of(0, NULL));
    CU_ASSERT_PTR_NULL(tfc_training_flag(bad));
    CU_ASSERT_EQUAL(tfc_graph_status(bad), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(bad), "placeholder"));
    tfc_graph_destroy(bad);
    tfc_graph *nul;
    tfc_graph_create(&nul);
    CU_ASSERT_PTR_NULL(tfc_placeholder_with_default(nul, "p", NULL));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(nul), "'p'"));
    tfc_graph_destroy(nul);
    tfc_value_destroy(one);
    tfc_value_destroy(pair);
    tfc_value_destroy(i32);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("session", test_ctx_open, test_ctx_close);
    TEST_ADD(test_pruning);
    TEST_ADD(test_plan_cache_by_feed_shape);
    TEST_ADD(test_repeated_runs_lower_once);
    TEST_ADD(test_async_pipeline);
    TEST_ADD(test_concurrent_assign_add);
    TEST_ADD(test_concurrent_forward);
    TEST_ADD(test_independent_nodes_overlap);
    TEST_ADD(test_fetch_reads_before_update);
    TEST_ADD(test_initializers);
    TEST_ADD(test_write_variable_and_feed_override);
    TEST_ADD(test_destroy_with_runs_in_flight);
    TEST_ADD(test_training_flag);
    return test_main();
}
