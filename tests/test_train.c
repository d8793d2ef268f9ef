/* test_train.c: training end to end: small models trained by tfc_minimize reach tolerance
 * (linear regression with SGD, XOR with Adam), a run that fetches W and updates it returns W
 * from before the update, repeated training with one seed gives the same loss curve, the global
 * step counts steps, learning-rate schedules and global-norm clipping give their values. */
#include <math.h>
#include <string.h>
#include "testutil.h"

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
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    double first = fetch1(s, loss);
    for (int i = 0; i < 300; i++)
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, 1, &train), TFC_OK);
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
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
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
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *stepv, *out[6];
    tfc_value_scalar(TFC_INT64, 25, &stepv);
    tfc_tensor *fetch[6] = {sd, ex, co, norm, clipped[0], clipped[1]};
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &step, &stepv, 6, fetch, out, 0, NULL), TFC_OK);
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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("train", test_ctx_open, test_ctx_close);
    TEST_ADD(test_linear_regression_sgd);
    TEST_ADD(test_xor_adam_and_repeatability);
    TEST_ADD(test_schedules_and_clipping);
    return test_main();
}
