/* test_train.c: training end to end: small models trained by tfc_minimize reach tolerance
 * (linear regression with SGD, XOR with Adam), a run that fetches W and updates it returns W
 * from before the update, repeated training with one seed gives the same loss curve, the global
 * step counts steps, learning-rate schedules and global-norm clipping give their values, and a
 * small MLP (embedding gather with repeated ids, concat, two dense layers, Adam) gives the same
 * losses and weights as the same training pinned to the CPU workers.
 *
 * Environment (as tests/test_ops): TFC_TEST_WHERE=opencl pins every op task that has an OpenCL
 * kernel to the OpenCL worker, TFC_TEST_WHERE=alternate every other one (the rest to the CPU),
 * so every session here trains on that device; exits 77 without an OpenCL worker. */
#include <math.h>
#include <string.h>
#include <starpu.h>
#include "testutil.h"
#include "../sched/testing.h"

static int g_ocl;                   /* TFC_TEST_WHERE: 1 opencl, 2 alternate */
static int g_ocl_tasks, g_cpu_tasks; /* op tasks seen on each kind of worker (device modes) */

/* A session in the test's device mode (profiled there, to count where tasks ran). */
static tfc_status open_session(tfc_graph *g, tfc_session **s)
{
    tfc_status st = tfc_session_create(test_ctx, g, s);
    if (st || !g_ocl) return st;
    tfc_session_set_where(*s, STARPU_OPENCL);
    return tfc_session_set_profiling(*s, 1);
}

static void count_workers(tfc_session *s)
{
    const tfc_task_record *r = NULL;
    int n = g_ocl ? tfc_session_last_records(s, &r) : 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(r[i].worker_name, "OpenCL", 6) == 0)
            g_ocl_tasks++;
        else
            g_cpu_tasks++;
    }
}

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static double fetch1(tfc_session *s, tfc_tensor *t)
{
    tfc_value *v = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 1, &t, &v, 0, NULL), TFC_OK);
    double x = tfc_value_get(v, 0);
    tfc_value_destroy(v);
    return x;
}

static void test_linear_regression_sgd(void)
{
    enum { N = 64 };
    double x[N * 2], y[N];
    for (int i = 0; i < N; i++) {
        x[2 * i] = (i % 8) / 4.0 - 1;
        x[2 * i + 1] = (i / 8) / 4.0 - 1;
        y[i] = 3 * x[2 * i] - 2 * x[2 * i + 1] + 0.5;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_value *xv, *yv;
    tfc_value_from_data(TFC_FLOAT64, S2(N, 2), x, &xv);
    tfc_value_from_data(TFC_FLOAT64, S2(N, 1), y, &yv);
    tfc_tensor *X = tfc_constant(g, "X", xv);
    tfc_tensor *Y = tfc_constant(g, "Y", yv);
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT64, S2(2, 1), tfc_init_normal(0, 0.1, 1));
    tfc_tensor *b = tfc_variable(g, "b", TFC_FLOAT64, S1(1), tfc_init_zeros());
    tfc_tensor *err = tfc_sub(g, tfc_add(g, tfc_matmul(g, X, w, 0, 0), b), Y);
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_square(g, err), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_SGD, 0.2);
    tfc_tensor *vars[2] = {w, b}, *gs = tfc_global_step(g);
    tfc_tensor *train = tfc_minimize(g, loss, 2, vars, &opt, gs);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(open_session(g, &s), TFC_OK);
    tfc_session_init_variables(s);
    double first = fetch1(s, loss);
    for (int i = 0; i < 300; i++) {
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, 1, &train), TFC_OK);
        count_workers(s);
    }
    double last = fetch1(s, loss);
    CU_ASSERT(first > 0.5);
    CU_ASSERT(last < 1e-8);
    CU_ASSERT_EQUAL(fetch1(s, gs), 300.0);
    tfc_value *wv;
    tfc_session_read_variable(s, w, &wv);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(wv, 0), 3.0, 1e-4);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(wv, 1), -2.0, 1e-4);
    tfc_value_destroy(wv);
    tfc_value_destroy(xv);
    tfc_value_destroy(yv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* XOR with a 2-8-2 tanh network, Adam, sparse cross-entropy; returns the loss curve. */
static int train_xor(double *curve, int steps, int check_fetch_before_update)
{
    float x[8] = {0, 0, 0, 1, 1, 0, 1, 1};
    int32_t labels[4] = {0, 1, 1, 0};
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 99);
    tfc_tensor *X = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 2));
    tfc_tensor *L = tfc_placeholder(g, "labels", TFC_INT32, S1(-1));
    tfc_tensor *w1 = tfc_variable(g, "w1", TFC_FLOAT32, S2(2, 8), tfc_init_glorot_uniform(1));
    tfc_tensor *b1 = tfc_variable(g, "b1", TFC_FLOAT32, S1(8), tfc_init_zeros());
    tfc_tensor *w2 = tfc_variable(g, "w2", TFC_FLOAT32, S2(8, 2), tfc_init_glorot_uniform(2));
    tfc_tensor *b2 = tfc_variable(g, "b2", TFC_FLOAT32, S1(2), tfc_init_zeros());
    tfc_tensor *h = tfc_tanh(g, tfc_bias_add(g, tfc_matmul(g, X, w1, 0, 0), b1));
    tfc_tensor *logits = tfc_bias_add(g, tfc_matmul(g, h, w2, 0, 0), b2);
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, L), 0, NULL, 0);
    tfc_tensor *correct = tfc_equal(g, tfc_cast(g, tfc_argmax(g, logits, 1), TFC_INT32), L);
    tfc_tensor *acc = tfc_reduce_mean(g, tfc_cast(g, correct, TFC_FLOAT32), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.05);
    tfc_tensor *vars[4] = {w1, b1, w2, b2};
    tfc_tensor *train = tfc_minimize(g, loss, 4, vars, &opt, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(open_session(g, &s), TFC_OK);
    tfc_session_init_variables(s);
    tfc_value *xv, *lv;
    tfc_value_wrap(TFC_FLOAT32, S2(4, 2), x, &xv);
    tfc_value_wrap(TFC_INT32, S1(4), labels, &lv);
    tfc_tensor *feeds[2] = {X, L};
    tfc_value *fv[2] = {xv, lv};
    if (check_fetch_before_update) {
        /* W fetched in the run that updates it: the value from before the update */
        tfc_value *before, *during, *after;
        tfc_session_read_variable(s, w2, &before);
        CU_ASSERT_EQUAL(tfc_session_run(s, 2, feeds, fv, 1, &w2, &during, 1, &train), TFC_OK);
        tfc_session_read_variable(s, w2, &after);
        CU_ASSERT_EQUAL(memcmp(tfc_value_data(before), tfc_value_data(during), tfc_value_nbytes(before)), 0);
        CU_ASSERT_NOT_EQUAL(memcmp(tfc_value_data(after), tfc_value_data(during), tfc_value_nbytes(after)), 0);
        tfc_value_destroy(before);
        tfc_value_destroy(during);
        tfc_value_destroy(after);
    }
    for (int i = 0; i < steps; i++) {
        tfc_value *lossv;
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, feeds, fv, 1, &loss, &lossv, 1, &train), TFC_OK);
        curve[i] = tfc_value_get(lossv, 0);
        tfc_value_destroy(lossv);
        count_workers(s);
    }
    tfc_value *accv;
    tfc_session_run(s, 2, feeds, fv, 1, &acc, &accv, 0, NULL);
    int perfect = tfc_value_get(accv, 0) == 1.0;
    tfc_value_destroy(accv);
    tfc_value_destroy(xv);
    tfc_value_destroy(lv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    return perfect;
}

static void test_xor_adam_and_repeatability(void)
{
    double a[200], b[200];
    CU_ASSERT_TRUE(train_xor(a, 200, 1));
    CU_ASSERT(a[199] < 0.05);
    CU_ASSERT(a[199] < a[0]);
    train_xor(b, 200, 1);
    /* same seed, same loss curve (bitwise on one kind of worker) */
    CU_ASSERT_TRUE(test_same_f64(a, b, 200, 1e-4));
}

static void test_schedules_and_clipping(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *step = tfc_placeholder(g, "step", TFC_INT64, tfc_shape_of(0, NULL));
    tfc_tensor *sd = tfc_lr_step_decay(g, 0.1, step, 10, 0.5);
    tfc_tensor *ex = tfc_lr_exponential(g, 0.1, step, 10, 0.5);
    tfc_tensor *co = tfc_lr_cosine(g, 0.1, step, 100, 0.01);
    float g1[2] = {3, 0}, g2[1] = {4};
    tfc_value *v1, *v2;
    tfc_value_from_data(TFC_FLOAT32, S1(2), g1, &v1);
    tfc_value_from_data(TFC_FLOAT32, S1(1), g2, &v2);
    tfc_tensor *grads[2] = {tfc_constant(g, "g1", v1), tfc_constant(g, "g2", v2)}, *clipped[2];
    tfc_tensor *norm = tfc_clip_by_global_norm(g, 2, grads, 1.0, clipped);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(open_session(g, &s), TFC_OK);
    tfc_value *stepv, *out[6];
    tfc_value_scalar(TFC_INT64, 25, &stepv);
    tfc_tensor *fetch[6] = {sd, ex, co, norm, clipped[0], clipped[1]};
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &step, &stepv, 6, fetch, out, 0, NULL), TFC_OK);
    count_workers(s);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[0], 0), 0.1 * 0.25, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[1], 0), 0.1 * pow(0.5, 2.5), 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[2], 0), 0.01 + 0.045 * (1 + cos(M_PI * 0.25)), 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[3], 0), 5.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[4], 0), 0.6, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[5], 0), 0.8, 1e-6);
    for (int i = 0; i < 6; i++) tfc_value_destroy(out[i]);
    tfc_value_destroy(stepv);
    tfc_value_destroy(v1);
    tfc_value_destroy(v2);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A small MLP trained with Adam for a few steps: ids [B,2] (repeated ids, so the gradient
 * of the embedding table sums several rows into one) pick rows of a [10,4] table, reshaped to
 * [B,8] and concatenated with dense features [B,8], then relu(16x32), 32x4 logits and the
 * mean sparse cross-entropy. where = STARPU_CPU pins every op task to the CPU (the reference);
 * 0 uses the test's device mode. Fills the loss of each step and the final w1 and table. */
enum { MLP_B = 24, MLP_STEPS = 6 };
static int train_mlp(uint32_t where, double *losses, tfc_value **w1_out, tfc_value **emb_out)
{
    float x[MLP_B * 8];
    int32_t ids[MLP_B * 2], labels[MLP_B];
    for (int i = 0; i < MLP_B * 8; i++) x[i] = (float)sin(0.37 * i + 0.2);
    for (int i = 0; i < MLP_B * 2; i++) ids[i] = (i * 7 + i / 5) % 6; /* rows 6..9 unused */
    for (int i = 0; i < MLP_B; i++) labels[i] = (i * 3 + i / 4) % 4;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 7);
    tfc_tensor *X = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 8));
    tfc_tensor *I = tfc_placeholder(g, "ids", TFC_INT32, S2(-1, 2));
    tfc_tensor *L = tfc_placeholder(g, "labels", TFC_INT32, S1(-1));
    tfc_tensor *emb = tfc_variable(g, "emb", TFC_FLOAT32, S2(10, 4), tfc_init_glorot_uniform(3));
    tfc_tensor *w1 = tfc_variable(g, "w1", TFC_FLOAT32, S2(16, 32), tfc_init_glorot_uniform(4));
    tfc_tensor *b1 = tfc_variable(g, "b1", TFC_FLOAT32, S1(32), tfc_init_zeros());
    tfc_tensor *w2 = tfc_variable(g, "w2", TFC_FLOAT32, S2(32, 4), tfc_init_glorot_uniform(5));
    tfc_tensor *b2 = tfc_variable(g, "b2", TFC_FLOAT32, S1(4), tfc_init_zeros());
    tfc_tensor *e = tfc_reshape(g, tfc_gather(g, emb, I), S2(-1, 8));
    tfc_tensor *parts[2] = {e, X};
    tfc_tensor *h = tfc_relu(g, tfc_bias_add(g, tfc_matmul(g, tfc_concat(g, 2, parts, 1), w1, 0, 0), b1));
    tfc_tensor *logits = tfc_bias_add(g, tfc_matmul(g, h, w2, 0, 0), b2);
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, L), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.01);
    tfc_tensor *vars[5] = {emb, w1, b1, w2, b2};
    tfc_tensor *train = tfc_minimize(g, loss, 5, vars, &opt, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    if (where) {
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        tfc_session_set_where(s, where);
    } else {
        CU_ASSERT_EQUAL_FATAL(open_session(g, &s), TFC_OK);
    }
    tfc_session_init_variables(s);
    tfc_value *xv, *iv, *lv;
    tfc_value_wrap(TFC_FLOAT32, S2(MLP_B, 8), x, &xv);
    tfc_value_wrap(TFC_INT32, S2(MLP_B, 2), ids, &iv);
    tfc_value_wrap(TFC_INT32, S1(MLP_B), labels, &lv);
    tfc_tensor *feeds[3] = {X, I, L};
    tfc_value *fv[3] = {xv, iv, lv};
    int ocl_ops = 0, ok = 1;
    for (int i = 0; i < MLP_STEPS && ok; i++) {
        tfc_value *lossv = NULL;
        tfc_status st = tfc_session_run(s, 3, feeds, fv, 1, &loss, &lossv, 1, &train);
        CU_ASSERT_EQUAL(st, TFC_OK);
        if (st) {
            fprintf(stderr, "MLP step %d: %s\n", i, tfc_session_errmsg(s));
            ok = 0;
            break;
        }
        losses[i] = tfc_value_get(lossv, 0);
        tfc_value_destroy(lossv);
        if (where) continue;
        count_workers(s);
        /* where=opencl: the training's own kernels ran there, every time */
        const tfc_task_record *r = NULL;
        int n = g_ocl == 1 ? tfc_session_last_records(s, &r) : 0;
        static const char *const ops[] = {"gather", "scatter_add_rows", "concat", "reshape",
                                          "matmul", "apply_adam", "relu_grad"};
        for (int k = 0; k < n; k++)
            for (int j = 0; j < (int)(sizeof ops / sizeof ops[0]); j++) {
                if (strcmp(r[k].op, ops[j]) != 0) continue;
                if (strncmp(r[k].worker_name, "OpenCL", 6) == 0) {
                    ocl_ops |= 1 << j;
                } else {
                    fprintf(stderr, "MLP: node '%s' (%s) ran on %s, not on OpenCL\n", r[k].node,
                            r[k].op, r[k].worker_name);
                    ok = 0;
                }
            }
    }
    if (ok && !where && g_ocl == 1 && ocl_ops != (1 << 7) - 1) {
        fprintf(stderr, "MLP: not every training kernel ran on OpenCL (mask %#x)\n", ocl_ops);
        ok = 0;
    }
    CU_ASSERT_EQUAL(tfc_session_read_variable(s, w1, w1_out), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_read_variable(s, emb, emb_out), TFC_OK);
    tfc_value_destroy(xv);
    tfc_value_destroy(iv);
    tfc_value_destroy(lv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    return ok;
}

static int close_f32(double got, double want) { return fabs(got - want) <= 2e-5 * (1 + fabs(want)); }

static void test_mlp_adam_matches_cpu(void)
{
    double ref[MLP_STEPS] = {0}, got[MLP_STEPS] = {0};
    tfc_value *rw = NULL, *re = NULL, *gw = NULL, *ge = NULL;
    CU_ASSERT_TRUE(train_mlp(STARPU_CPU, ref, &rw, &re));
    CU_ASSERT_TRUE(train_mlp(0, got, &gw, &ge));
    CU_ASSERT(ref[MLP_STEPS - 1] < ref[0]); /* it trains */
    for (int i = 0; i < MLP_STEPS; i++) {
        if (!close_f32(got[i], ref[i]))
            fprintf(stderr, "MLP step %d: loss %.9g, CPU-only %.9g\n", i, got[i], ref[i]);
        CU_ASSERT(close_f32(got[i], ref[i]));
    }
    tfc_value *pairs[2][2] = {{gw, rw}, {ge, re}};
    for (int p = 0; p < 2; p++) {
        if (!pairs[p][0] || !pairs[p][1]) continue;
        int bad = 0;
        for (int64_t i = 0; i < tfc_value_numel(pairs[p][1]); i++) {
            double a = tfc_value_get(pairs[p][0], i), b = tfc_value_get(pairs[p][1], i);
            if (!close_f32(a, b) && bad++ < 3)
                fprintf(stderr, "MLP %s[%lld]: %.9g, CPU-only %.9g\n", p ? "emb" : "w1",
                        (long long)i, a, b);
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
    tfc_value_destroy(rw);
    tfc_value_destroy(re);
    tfc_value_destroy(gw);
    tfc_value_destroy(ge);
}

/* In the device modes, op tasks ran on the OpenCL worker (and, alternating, on the CPU). */
static void test_device_mode_used(void)
{
    if (!g_ocl) return;
    fprintf(stderr, "\nTFC_TEST_WHERE=%s: %d op tasks on the OpenCL worker, %d elsewhere\n",
            g_ocl == 2 ? "alternate" : "opencl", g_ocl_tasks, g_cpu_tasks);
    CU_ASSERT(g_ocl_tasks > 0);
    if (g_ocl == 2) CU_ASSERT(g_cpu_tasks > 0);
}

static int suite_open(void)
{
    if (test_ctx_open()) return -1;
    tfc_ctx_info info;
    if (tfc_ctx_info_get(test_ctx, &info)) return -1;
    if (g_ocl && info.n_opencl_workers == 0) {
        fprintf(stderr, "TFC_TEST_WHERE=%s but StarPU has no OpenCL worker: skipped\n",
                g_ocl == 2 ? "alternate" : "opencl");
        test_ctx_close();
        exit(77);
    }
    return 0;
}

int main(void)
{
    const char *where = getenv("TFC_TEST_WHERE");
    g_ocl = !where || !*where ? 0 : strcmp(where, "opencl") == 0 ? 1
          : strcmp(where, "alternate") == 0 ? 2 : -1;
    if (g_ocl < 0) {
        fprintf(stderr, "TFC_TEST_WHERE=%s: only 'opencl' and 'alternate' are known\n", where);
        return 1;
    }
    tfc_testing_set_where_alternate(g_ocl == 2);
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("train", suite_open, test_ctx_close);
    TEST_ADD(test_linear_regression_sgd);
    TEST_ADD(test_xor_adam_and_repeatability);
    TEST_ADD(test_schedules_and_clipping);
    TEST_ADD(test_mlp_adam_matches_cpu);
    TEST_ADD(test_device_mode_used);
    return test_main();
}
