/* test_layers.c: layers and variables as a user expects (issue 12, item 3): name scopes, the
 * trainable set (optimizer slots and counters left out), tfc_minimize without a variable list,
 * tfc_dense's shapes and initializer statistics (He, Glorot), a small model trained with
 * tfc_dense, a store round trip that keeps scoped names and the trainable flag, the batch
 * and layer normalization layers (variables, inference values, training), and conv layers
 * (shapes, names, errors, He/Glorot statistics with the conv layout's fans, a tiny conv net that
 * trains). */
#include <math.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static int has(tfc_graph *g, const char *name) { return tfc_graph_find(g, name) != NULL; }

static void test_scope_names_nest(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    CU_ASSERT_STRING_EQUAL(tfc_scope_current(g), "");
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(3));
    CU_ASSERT_EQUAL(tfc_scope_push(g, "block1"), TFC_OK);
    CU_ASSERT_STRING_EQUAL(tfc_scope_current(g), "block1");
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S1(3), tfc_init_ones());
    tfc_tensor *a1 = tfc_add(g, x, w), *a2 = tfc_add(g, a1, w);
    CU_ASSERT_EQUAL(tfc_scope_push(g, "inner"), TFC_OK);
    CU_ASSERT_STRING_EQUAL(tfc_scope_current(g), "block1/inner");
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, S1(3), tfc_init_ones());
    tfc_tensor *m = tfc_mul(g, a2, v);
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_OK);
    tfc_tensor *u = tfc_variable(g, "u", TFC_FLOAT32, S1(3), tfc_init_ones());
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_OK);
    tfc_tensor *top = tfc_variable(g, "w", TFC_FLOAT32, S1(3), tfc_init_ones());
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(w), "block1/w");
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(a1), "block1/add");
    CU_ASSERT_EQUAL(strncmp(tfc_tensor_name(a2), "block1/add_", 11), 0); /* generated, unique */
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(v), "block1/inner/v");
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(m), "block1/inner/mul");
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(u), "block1/u");
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(top), "w"); /* the scopes are closed */
    CU_ASSERT_PTR_EQUAL(tfc_graph_find(g, "block1/inner/v"), v);
    CU_ASSERT_STRING_EQUAL(tfc_scope_current(g), "");
    /* a scope opened again: a given name already used is an error, as outside scopes */
    CU_ASSERT_EQUAL(tfc_scope_push(g, "block1"), TFC_OK);
    CU_ASSERT_PTR_NULL(tfc_variable(g, "w", TFC_FLOAT32, S1(3), tfc_init_ones()));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "block1/w"));
    tfc_graph_destroy(g);
}

static void test_scope_pop_without_push(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INVALID_ARGUMENT); /* sticky, as build errors */
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "no name scope is open"));
    CU_ASSERT_PTR_NULL(tfc_placeholder(g, "x", TFC_FLOAT32, S1(1)));
    tfc_graph_destroy(g);
    /* one pop more than pushes */
    tfc_graph_create(&g);
    CU_ASSERT_EQUAL(tfc_scope_push(g, "a"), TFC_OK);
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_destroy(g);
    /* bad scope names */
    const char *bad[] = {NULL, "", "a:b", "a,b", "trailing/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfc_graph_create(&g);
        CU_ASSERT_EQUAL(tfc_scope_push(g, bad[i]), TFC_ERR_INVALID_ARGUMENT);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "invalid scope name"));
        tfc_graph_destroy(g);
    }
    CU_ASSERT_EQUAL(tfc_scope_push(NULL, "a"), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_scope_pop(NULL), TFC_ERR_INVALID_ARGUMENT);
}

static void test_trainable_set(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 3));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S2(3, 2), tfc_init_ones());
    tfc_tensor *b = tfc_variable(g, "b", TFC_FLOAT32, S1(2), tfc_init_zeros());
    tfc_tensor *stat = tfc_variable(g, "moving_mean", TFC_FLOAT32, S1(2), tfc_init_zeros());
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, NULL, 0), 3);
    CU_ASSERT_EQUAL(tfc_variable_set_trainable(stat, 0), TFC_OK);
    CU_ASSERT_FALSE(tfc_variable_trainable(stat));
    CU_ASSERT_TRUE(tfc_variable_trainable(w));
    tfc_tensor *y = tfc_add(g, tfc_bias_add(g, tfc_matmul(g, x, w, 0, 0), b), stat);
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_square(g, y), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.01);
    CU_ASSERT_PTR_NOT_NULL(tfc_minimize(g, loss, 2, (tfc_tensor *[]){w, b}, &opt,
                                        tfc_global_step(g)));
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    /* slots, Adam's iteration counter and global_step exist and are not trainable */
    const char *own[] = {"w/adam_m", "w/adam_v", "b/adam_m", "optimizer/iterations",
                         "global_step"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        tfc_tensor *t = tfc_graph_find(g, own[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_FALSE(tfc_variable_trainable(t));
    }
    tfc_tensor *vars[8];
    CU_ASSERT_EQUAL_FATAL(tfc_trainable_variables(g, vars, 8), 2);
    CU_ASSERT_PTR_EQUAL(vars[0], w);
    CU_ASSERT_PTR_EQUAL(vars[1], b);
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, vars, 1), 2); /* counts past capacity */
    CU_ASSERT_EQUAL(tfc_variable_set_trainable(stat, 1), TFC_OK);
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, NULL, 0), 3);
    CU_ASSERT_FALSE(tfc_variable_trainable(x));
    CU_ASSERT_EQUAL(tfc_variable_set_trainable(x, 0), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "'x' is a placeholder, not a variable"));
    CU_ASSERT_EQUAL(tfc_variable_set_trainable(NULL, 0), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_destroy(g);
}

static void read_f32(tfc_session *s, tfc_tensor *v, float *out, int n)
{
    tfc_value *val;
    CU_ASSERT_EQUAL_FATAL(tfc_session_read_variable(s, v, &val), TFC_OK);
    memcpy(out, tfc_value_cdata(val), sizeof *out * (size_t)n);
    tfc_value_destroy(val);
}

/* loss = sum(w * frozen) + sum(c * 0 + stop_gradient(behind)): w gets grad frozen = 2; frozen
 * is not trainable; behind is reached only through stop_gradient; u is not reached at all. */
static void test_minimize_without_list(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S1(4), tfc_init_ones());
    tfc_tensor *frozen = tfc_variable(g, "frozen", TFC_FLOAT32, S1(4), tfc_init_constant(2));
    tfc_tensor *behind = tfc_variable(g, "behind", TFC_FLOAT32, S1(4), tfc_init_ones());
    tfc_tensor *u = tfc_variable(g, "u", TFC_FLOAT32, S1(4), tfc_init_ones());
    tfc_variable_set_trainable(frozen, 0);
    tfc_tensor *loss = tfc_add(g, tfc_reduce_sum(g, tfc_mul(g, w, frozen), 0, NULL, 0),
                               tfc_reduce_sum(g, tfc_stop_gradient(g, behind), 0, NULL, 0));
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_MOMENTUM, 0.25);
    CU_ASSERT_EQUAL(tfc_scope_push(g, "train"), TFC_OK); /* slots stay "<var>/<slot>" */
    tfc_tensor *step = tfc_minimize(g, loss, 0, NULL, &opt, NULL);
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(step);
    CU_ASSERT_TRUE(has(g, "w/momentum"));
    CU_ASSERT_FALSE(has(g, "frozen/momentum"));
    CU_ASSERT_FALSE(has(g, "behind/momentum"));
    CU_ASSERT_FALSE(has(g, "u/momentum"));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    float before[4], after[4];
    read_f32(s, frozen, before, 4);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, 1, &step), TFC_OK);
    read_f32(s, frozen, after, 4);
    CU_ASSERT_EQUAL(memcmp(before, after, sizeof before), 0); /* bit-identical */
    /* momentum 0.9, lr 0.25, gradient 2: buf 2, 3.8, 5.42; w = 1 - 0.25 (2 + 3.8 + 5.42) */
    read_f32(s, w, after, 4);
    for (int i = 0; i < 4; i++) CU_ASSERT_DOUBLE_EQUAL(after[i], 1 - 0.25 * 11.22, 1e-5);
    read_f32(s, behind, after, 4);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(after[i], 1.0f);
    read_f32(s, u, after, 4);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(after[i], 1.0f);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    /* a loss that reaches no trainable variable */
    tfc_graph_create(&g);
    tfc_tensor *c = tfc_variable(g, "c", TFC_FLOAT32, S1(2), tfc_init_ones());
    tfc_variable_set_trainable(c, 0);
    CU_ASSERT_PTR_NULL(tfc_minimize(g, tfc_reduce_sum(g, c, 0, NULL, 0), 0, NULL, &opt, NULL));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "depends on no trainable variable"));
    tfc_graph_destroy(g);
}

static void assert_shape(tfc_tensor *t, int64_t d0, int64_t d1)
{
    tfc_shape s = tfc_tensor_shape(t);
    CU_ASSERT_EQUAL(s.rank, d1 ? 2 : 1);
    CU_ASSERT_EQUAL(s.dims[0], d0);
    if (d1) CU_ASSERT_EQUAL(s.dims[1], d1);
}

static void test_dense_shapes_and_names(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 5));
    tfc_tensor *h = tfc_dense(g, x, 8, TFC_ACT_RELU, NULL);
    tfc_tensor *h2 = tfc_dense(g, h, 6, TFC_ACT_TANH, NULL);
    CU_ASSERT_EQUAL(tfc_scope_push(g, "head"), TFC_OK);
    tfc_tensor *y = tfc_dense(g, h2, 3, TFC_ACT_NONE, "logits");
    CU_ASSERT_EQUAL(tfc_scope_pop(g), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    assert_shape(h, -1, 8);
    assert_shape(h2, -1, 6);
    assert_shape(y, -1, 3);
    assert_shape(tfc_graph_find(g, "dense/kernel"), 5, 8);
    assert_shape(tfc_graph_find(g, "dense/bias"), 8, 0);
    assert_shape(tfc_graph_find(g, "dense_1/kernel"), 8, 6);
    assert_shape(tfc_graph_find(g, "head/logits/kernel"), 6, 3);
    assert_shape(tfc_graph_find(g, "head/logits/bias"), 3, 0);
    CU_ASSERT_EQUAL(strncmp(tfc_tensor_name(y), "head/logits/", 12), 0);
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, NULL, 0), 6);
    CU_ASSERT_STRING_EQUAL(tfc_scope_current(g), ""); /* the layer closed its scope */
    tfc_graph_destroy(g);
    /* errors name the layer */
    struct { int64_t units; int act; int rank; tfc_status st; const char *msg; } bad[] = {
        {0, TFC_ACT_NONE, 2, TFC_ERR_INVALID_ARGUMENT, "dense 'd': units is 0"},
        {4, 99, 2, TFC_ERR_INVALID_ARGUMENT, "dense 'd': unknown activation 99"},
        {4, TFC_ACT_RELU, 1, TFC_ERR_SHAPE, "dense 'd': input 'x' has shape"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfc_graph_create(&g);
        tfc_tensor *in = tfc_placeholder(g, "x", TFC_FLOAT32,
                                         bad[i].rank == 2 ? S2(2, 3) : S1(3));
        CU_ASSERT_PTR_NULL(tfc_dense(g, in, bad[i].units, (tfc_activation)bad[i].act, "d"));
        CU_ASSERT_EQUAL(tfc_graph_status(g), bad[i].st);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), bad[i].msg));
        tfc_graph_destroy(g);
    }
}

/* Mean and standard deviation of a variable's initial values. */
static void stats(tfc_session *s, tfc_tensor *v, double *mean, double *sd, double *maxabs)
{
    tfc_value *val;
    CU_ASSERT_EQUAL_FATAL(tfc_session_read_variable(s, v, &val), TFC_OK);
    int64_t n = tfc_value_numel(val);
    double sum = 0, sq = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = tfc_value_get(val, i);
        sum += x;
        sq += x * x;
        mx = fmax(mx, fabs(x));
    }
    *mean = sum / (double)n;
    *sd = sqrt(sq / (double)n - *mean * *mean);
    *maxabs = mx;
    tfc_value_destroy(val);
}

static void test_initializer_statistics(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *hn = tfc_variable(g, "hn", TFC_FLOAT32, S2(400, 300), tfc_init_he_normal(1));
    tfc_tensor *hu = tfc_variable(g, "hu", TFC_FLOAT32, S2(400, 300), tfc_init_he_uniform(2));
    tfc_tensor *gu = tfc_variable(g, "gu", TFC_FLOAT32, S2(400, 300), tfc_init_glorot_uniform(3));
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 500));
    tfc_dense(g, x, 200, TFC_ACT_RELU, "relu_layer");
    tfc_dense(g, x, 200, TFC_ACT_TANH, "tanh_layer");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    struct { tfc_tensor *v; double sd, limit; } want[] = {
        {hn, sqrt(2.0 / 400), 0},
        {hu, sqrt(2.0 / 400), sqrt(6.0 / 400)},
        {gu, sqrt(2.0 / 700), sqrt(6.0 / 700)},
        {tfc_graph_find(g, "relu_layer/kernel"), sqrt(2.0 / 500), 0},  /* He normal */
        {tfc_graph_find(g, "tanh_layer/kernel"), sqrt(2.0 / 700), sqrt(6.0 / 700)}, /* Glorot */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double mean, sd, maxabs;
        CU_ASSERT_PTR_NOT_NULL_FATAL(want[i].v);
        stats(s, want[i].v, &mean, &sd, &maxabs);
        CU_ASSERT(fabs(mean) < 0.02 * want[i].sd);
        CU_ASSERT(fabs(sd / want[i].sd - 1) < 0.02);
        if (want[i].limit) CU_ASSERT(maxabs <= want[i].limit);
        if (!want[i].limit) CU_ASSERT(maxabs > 3 * want[i].sd); /* normal: tails not cut */
    }
    double mean, sd, maxabs;
    stats(s, tfc_graph_find(g, "relu_layer/bias"), &mean, &sd, &maxabs);
    CU_ASSERT_EQUAL(maxabs, 0);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* y = x0 * x1 on a grid needs the hidden layer's nonlinearity: a small MLP of tfc_dense trained
 * by a list-free tfc_minimize brings the mean squared error far below the target's variance. */
static void test_small_model_trains(void)
{
    enum { N = 64 };
    float xs[N * 2], ys[N];
    for (int i = 0; i < N; i++) {
        xs[2 * i] = (float)(i % 8) / 3.5f - 1;
        xs[2 * i + 1] = (float)(i / 8) / 3.5f - 1;
        ys[i] = xs[2 * i] * xs[2 * i + 1];
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 5);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(N, 2));
    tfc_tensor *y = tfc_placeholder(g, "y", TFC_FLOAT32, S2(N, 1));
    tfc_tensor *h = tfc_dense(g, x, 32, TFC_ACT_TANH, "hidden");
    tfc_tensor *p = tfc_dense(g, h, 1, TFC_ACT_NONE, "out");
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_square(g, tfc_sub(g, p, y)), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.02);
    tfc_tensor *step = tfc_minimize(g, loss, 0, NULL, &opt, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    tfc_value *feeds[2] = {test_f32(2, (int64_t[]){N, 2}, xs), test_f32(2, (int64_t[]){N, 1}, ys)};
    tfc_tensor *ph[2] = {x, y};
    double first = -1, last = -1;
    for (int it = 0; it < 400; it++) {
        tfc_value *lv;
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, ph, feeds, 1, &loss, &lv, 1, &step), TFC_OK);
        last = tfc_value_get(lv, 0);
        if (first < 0) first = last;
        tfc_value_destroy(lv);
    }
    printf(" (loss %.4f -> %.5f) ", first, last);
    CU_ASSERT(last < 0.002); /* the target's variance is about 0.13 */
    CU_ASSERT(last < first / 20);
    tfc_value_destroy(feeds[0]);
    tfc_value_destroy(feeds[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_store_keeps_scopes_and_trainable(void)
{
    char dir[] = "test_layers.XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.db", dir);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 4));
    tfc_scope_push(g, "net");
    tfc_tensor *y = tfc_dense(g, x, 3, TFC_ACT_RELU, "block");
    tfc_tensor *stat = tfc_variable(g, "moving_mean", TFC_FLOAT32, S1(3), tfc_init_zeros());
    tfc_scope_pop(g);
    tfc_variable_set_trainable(stat, 0);
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_add(g, y, stat), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_MOMENTUM, 0.1);
    tfc_minimize(g, loss, 0, NULL, &opt, tfc_global_step(g));
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_store *st;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_save_graph(st, g), TFC_OK);
    tfc_store_close(st);
    tfc_graph *h = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &h), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(tfc_graph_num_nodes(h), tfc_graph_num_nodes(g));
    const char *names[] = {"net/block/kernel", "net/block/bias", "net/moving_mean",
                           "net/block/kernel/momentum", "optimizer/iterations", "global_step"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tfc_tensor *a = tfc_graph_find(g, names[i]), *b = tfc_graph_find(h, names[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        CU_ASSERT_EQUAL(tfc_variable_trainable(a), tfc_variable_trainable(b));
        CU_ASSERT_EQUAL(tfc_variable_trainable(b), i < 2); /* only the layer's own two */
    }
    CU_ASSERT_EQUAL(tfc_trainable_variables(h, NULL, 0), 2);
    tfc_graph_destroy(h);
    tfc_graph_destroy(g);
    unlink(path);
    rmdir(dir);
}

/* ---- normalization layers ---------------------------------------------------------------- */

static void write_f32(tfc_session *s, tfc_tensor *v, const float *data, int n)
{
    tfc_value *val = test_f32(1, (int64_t[]){n}, data);
    CU_ASSERT_EQUAL_FATAL(tfc_session_write_variable(s, v, val), TFC_OK);
    tfc_value_destroy(val);
}

/* Variables under the layer's scope; gamma and beta trainable, the moving statistics not; a
 * second layer of the same name gets a scope of its own. */
static void test_batch_norm_layer_variables(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 3));
    tfc_tensor *tr = tfc_placeholder(g, "training", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *h = tfc_dense(g, x, 4, TFC_ACT_NONE, "d");
    tfc_tensor *y = tfc_batch_norm_layer(g, h, tr, 0.1, 1e-5, "bn");
    tfc_tensor *y2 = tfc_batch_norm_layer(g, y, tr, 0.1, 1e-5, "bn");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    assert_shape(y2, -1, 4);
    const char *names[] = {"bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance",
                           "bn_1/gamma", "bn_1/moving_variance"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        tfc_tensor *v = tfc_graph_find(g, names[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        CU_ASSERT_EQUAL(tfc_variable_trainable(v), strstr(names[i], "moving") == NULL);
    }
    tfc_tensor *vars[8];
    CU_ASSERT_EQUAL_FATAL(tfc_trainable_variables(g, vars, 8), 6); /* d: 2, bn and bn_1: 2 */
    for (int i = 0; i < 6; i++) CU_ASSERT_PTR_NULL(strstr(tfc_tensor_name(vars[i]), "moving"));
    /* errors name the layer */
    CU_ASSERT_PTR_NULL(tfc_batch_norm_layer(g, tfc_placeholder(g, "v", TFC_FLOAT32, S1(3)), tr,
                                            0.1, 1e-5, "flat"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "batch_norm 'flat': input 'v' has "
                                                       "shape [3]"));
    tfc_graph_destroy(g);
}

/* Inference: y = (x - moving_mean) / sqrt(moving_variance + eps) * gamma + beta, computed here,
 * for x = [N, C, L]; the variables stay as they were. */
static void test_batch_norm_layer_inference(void)
{
    enum { N = 2, C = 3, L = 4 };
    float xs[N * C * L], mm[C] = {0.5f, -1, 2}, mv[C] = {0.25f, 4, 1.5f};
    float gamma[C] = {2, 0.5f, -1}, beta[C] = {0.1f, 0.2f, -0.3f}, got[C];
    for (int i = 0; i < N * C * L; i++) xs[i] = (float)((i * 7) % 11) / 4 - 1;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){N, C, L}));
    tfc_tensor *tr = tfc_placeholder(g, "training", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *y = tfc_batch_norm_layer(g, x, tr, 0.1, 1e-3, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    tfc_tensor *v[4] = {tfc_graph_find(g, "batch_norm/moving_mean"),
                        tfc_graph_find(g, "batch_norm/moving_variance"),
                        tfc_graph_find(g, "batch_norm/gamma"),
                        tfc_graph_find(g, "batch_norm/beta")};
    const float *vals[4] = {mm, mv, gamma, beta};
    for (int k = 0; k < 4; k++) write_f32(s, v[k], vals[k], C);
    float zero = 0;
    tfc_value *feeds[2] = {test_f32(3, (int64_t[]){N, C, L}, xs), test_f32(0, NULL, &zero)}, *yv;
    tfc_tensor *ph[2] = {x, tr};
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, ph, feeds, 1, &y, &yv, 0, NULL), TFC_OK);
    const float *yd = tfc_value_cdata(yv);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            for (int l = 0; l < L; l++) {
                int i = (n * C + c) * L + l;
                double want = (xs[i] - mm[c]) / sqrt(mv[c] + 1e-3) * gamma[c] + beta[c];
                CU_ASSERT_DOUBLE_EQUAL(yd[i], want, 1e-5 * (1 + fabs(want)));
            }
    tfc_value_destroy(yv);
    for (int k = 0; k < 2; k++) {
        read_f32(s, v[k], got, C);
        CU_ASSERT_EQUAL(memcmp(got, vals[k], sizeof got), 0); /* untouched, bit for bit */
    }
    tfc_value_destroy(feeds[0]);
    tfc_value_destroy(feeds[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A small net trained with tfc_minimize over the trainable set: gamma and beta change, and
 * the moving statistics move toward the statistics of the batch that the layer normalizes. */
static void test_batch_norm_layer_trains(void)
{
    enum { N = 16, C = 3 };
    float xs[N * 2], ys[N], one = 1;
    for (int i = 0; i < N; i++) {
        xs[2 * i] = (float)(i % 4) - 1.5f;
        xs[2 * i + 1] = (float)(i / 4) * 0.5f + 3;
        ys[i] = xs[2 * i] * 0.5f - xs[2 * i + 1];
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 9);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(N, 2));
    tfc_tensor *y = tfc_placeholder(g, "y", TFC_FLOAT32, S2(N, 1));
    tfc_tensor *tr = tfc_placeholder(g, "training", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *h = tfc_dense(g, x, C, TFC_ACT_NONE, "d");
    tfc_tensor *b = tfc_tanh(g, tfc_batch_norm_layer(g, h, tr, 0.5, 1e-5, "bn"));
    tfc_tensor *p = tfc_dense(g, b, 1, TFC_ACT_NONE, "out");
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_square(g, tfc_sub(g, p, y)), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_SGD, 0.01);
    tfc_tensor *step = tfc_minimize(g, loss, 0, NULL, &opt, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, NULL, 0), 6);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    tfc_value *feeds[3] = {test_f32(2, (int64_t[]){N, 2}, xs), test_f32(2, (int64_t[]){N, 1}, ys),
                           test_f32(0, NULL, &one)};
    tfc_tensor *ph[3] = {x, y, tr};
    const char *names[] = {"bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"};
    float before[4][C], after[4][C];
    for (int k = 0; k < 4; k++) read_f32(s, tfc_graph_find(g, names[k]), before[k], C);
    for (int it = 0; it < 6; it++) {
        tfc_value *lv;
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 3, ph, feeds, 1, &loss, &lv, 1, &step), TFC_OK);
        tfc_value_destroy(lv);
    }
    for (int k = 0; k < 4; k++) read_f32(s, tfc_graph_find(g, names[k]), after[k], C);
    /* the batch statistics of h now (SGD with a small rate moves them little) */
    tfc_value *hv;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, ph, feeds, 1, &h, &hv, 0, NULL), TFC_OK);
    const float *hd = tfc_value_cdata(hv);
    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0;
        for (int n = 0; n < N; n++) mean += hd[n * C + c] / N;
        for (int n = 0; n < N; n++) var += (hd[n * C + c] - mean) * (hd[n * C + c] - mean);
        var /= N - 1; /* unbiased, as the moving variance */
        CU_ASSERT(after[0][c] != before[0][c] && after[1][c] != before[1][c]);
        /* momentum 0.5 over 6 steps: within 2^-6 of the start distance plus the drift */
        CU_ASSERT(fabs(after[2][c] - mean) < 0.1 * fabs(before[2][c] - mean) + 1e-3);
        CU_ASSERT(fabs(after[3][c] - var) < 0.1 * fabs(before[3][c] - var) + 1e-3 * (1 + var));
    }
    tfc_value_destroy(hv);
    for (int k = 0; k < 3; k++) tfc_value_destroy(feeds[k]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A stored graph with a batch norm layer keeps the untrainable moving statistics and the
 * update wired to y: the loaded graph moves them in a training run, not in an inference run. */
static void test_batch_norm_layer_store(void)
{
    char dir[] = "test_layers.XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.db", dir);
    tfc_graph *g, *h = NULL;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 2));
    tfc_tensor *tr = tfc_placeholder(g, "training", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *y = tfc_batch_norm_layer(g, x, tr, 0.5, 1e-5, "bn");
    CU_ASSERT_EQUAL_FATAL(tfc_tensor_set_name(y, "y"), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_store *st;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_save_graph(st, g), TFC_OK);
    tfc_store_close(st);
    tfc_graph_destroy(g);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &h), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(tfc_trainable_variables(h, NULL, 0), 2);
    tfc_tensor *ph[2] = {tfc_graph_find(h, "x"), tfc_graph_find(h, "training")};
    tfc_tensor *out = tfc_graph_find(h, "y"), *mm = tfc_graph_find(h, "bn/moving_mean");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mm);
    CU_ASSERT_FALSE(tfc_variable_trainable(mm));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, h, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    float xs[8] = {1, 2, 3, 4, 5, 6, 7, 8}, flags[2] = {0, 1}, got[2];
    const float want[2][2] = {{0, 0}, {2, 2.5f}}; /* batch means 4 and 5, momentum 0.5 */
    for (int k = 0; k < 2; k++) {
        tfc_value *feeds[2] = {test_f32(2, (int64_t[]){4, 2}, xs), test_f32(0, NULL, &flags[k])};
        tfc_value *yv = NULL;
        CU_ASSERT_EQUAL(tfc_session_run(s, 2, ph, feeds, 1, &out, &yv, 0, NULL), TFC_OK);
        tfc_value_destroy(yv);
        read_f32(s, mm, got, 2);
        CU_ASSERT_DOUBLE_EQUAL(got[0], want[k][0], 1e-6);
        CU_ASSERT_DOUBLE_EQUAL(got[1], want[k][1], 1e-6);
        tfc_value_destroy(feeds[0]);
        tfc_value_destroy(feeds[1]);
    }
    tfc_session_destroy(s);
    tfc_graph_destroy(h);
    unlink(path);
    rmdir(dir);
}

/* Layer norm layer over the last 2 dims: gamma and beta of those dims, values as computed. */
static void test_layer_norm_layer(void)
{
    enum { B = 2, R = 3, K = 4 };
    float xs[B * R * K];
    for (int i = 0; i < B * R * K; i++) xs[i] = (float)((i * 5) % 13) / 3 - 2;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){-1, R, K}));
    tfc_tensor *y = tfc_layer_norm_layer(g, x, 2, 1e-5, "ln");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_tensor *gamma = tfc_graph_find(g, "ln/gamma"), *beta = tfc_graph_find(g, "ln/beta");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gamma);
    CU_ASSERT_PTR_NOT_NULL_FATAL(beta);
    CU_ASSERT_EQUAL(tfc_tensor_shape(gamma).rank, 2);
    CU_ASSERT_TRUE(tfc_variable_trainable(gamma) && tfc_variable_trainable(beta));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    float gv[R * K], bv[R * K];
    for (int i = 0; i < R * K; i++) gv[i] = 0.5f + (float)i / 8, bv[i] = (float)i / 16 - 0.3f;
    tfc_value *w = test_f32(2, (int64_t[]){R, K}, gv);
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, gamma, w), TFC_OK);
    tfc_value_destroy(w);
    w = test_f32(2, (int64_t[]){R, K}, bv);
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, beta, w), TFC_OK);
    tfc_value_destroy(w);
    tfc_value *feed = test_f32(3, (int64_t[]){B, R, K}, xs), *yv;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &feed, 1, &y, &yv, 0, NULL), TFC_OK);
    const float *yd = tfc_value_cdata(yv);
    for (int b = 0; b < B; b++) {
        double mean = 0, var = 0;
        for (int j = 0; j < R * K; j++) mean += xs[b * R * K + j] / (R * K);
        for (int j = 0; j < R * K; j++) var += pow(xs[b * R * K + j] - mean, 2) / (R * K);
        for (int j = 0; j < R * K; j++) {
            double want = (xs[b * R * K + j] - mean) / sqrt(var + 1e-5) * gv[j] + bv[j];
            CU_ASSERT_DOUBLE_EQUAL(yd[b * R * K + j], want, 1e-5 * (1 + fabs(want)));
        }
    }
    tfc_value_destroy(yv);
    tfc_value_destroy(feed);
    tfc_session_destroy(s);
    CU_ASSERT_PTR_NULL(tfc_layer_norm_layer(g, x, 4, 1e-5, "bad"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "layer_norm 'bad': n_axes is 4"));
    tfc_graph_destroy(g);
}

/* ---- convolution layers (layers_conv.c) ---------------------------------------------------- */

static void assert_dims(tfc_tensor *t, int rank, const int64_t *dims)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    tfc_shape s = tfc_tensor_shape(t);
    CU_ASSERT_EQUAL_FATAL(s.rank, rank);
    for (int d = 0; d < rank; d++) CU_ASSERT_EQUAL(s.dims[d], dims[d]);
}

static void test_conv_layer_shapes_and_names(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, (int64_t[]){-1, 3, 8, 8}));
    int64_t k5[2] = {5, 5}, k3[2] = {3, 3};
    tfc_tensor *c1 = tfc_conv_layer(g, x, 4, 2, k5, NULL, TFC_ACT_RELU, 1, "conv");
    tfc_tensor *p1 = tfc_max_pool_layer(g, c1, 2, 2, 0);
    tfc_conv_params valid = {.strides = {2, 2}, .groups = 2};
    tfc_tensor *c2 = tfc_conv_layer(g, p1, 6, 2, k3, &valid, TFC_ACT_NONE, 0, "conv");
    tfc_tensor *a2 = tfc_avg_pool_layer(g, p1, 2, 2, 1);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    assert_dims(c1, 4, (int64_t[]){-1, 4, 8, 8}); /* SAME keeps 8x8 */
    assert_dims(p1, 4, (int64_t[]){-1, 4, 4, 4});
    assert_dims(c2, 4, (int64_t[]){-1, 6, 1, 1}); /* (4 - 3) / 2 + 1 */
    assert_dims(a2, 4, (int64_t[]){-1, 4, 3, 3}); /* stride 1 */
    assert_dims(tfc_graph_find(g, "conv/kernel"), 4, (int64_t[]){4, 3, 5, 5});
    assert_dims(tfc_graph_find(g, "conv/bias"), 1, (int64_t[]){4});
    assert_dims(tfc_graph_find(g, "conv_1/kernel"), 4, (int64_t[]){6, 2, 3, 3}); /* C/groups */
    CU_ASSERT_PTR_NULL(tfc_graph_find(g, "conv_1/bias")); /* use_bias 0 */
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, NULL, 0), 3);
    CU_ASSERT_STRING_EQUAL(tfc_scope_current(g), "");
    tfc_graph_destroy(g);
    /* errors name the layer and the value */
    struct { int64_t filters; int ns; int64_t k, groups; int rank, act; tfc_status st; const char *msg; } bad[] = {
        {4, 4, 3, 1, 4, TFC_ACT_RELU, TFC_ERR_INVALID_ARGUMENT, "conv_layer 'c': n_spatial is 4"},
        {4, 2, 0, 1, 4, TFC_ACT_RELU, TFC_ERR_INVALID_ARGUMENT, "kernel size 0 in spatial dim 0"},
        {4, 1, 3, 1, 4, TFC_ACT_RELU, TFC_ERR_SHAPE, "conv_layer 'c': input 'x' has shape [2, 3, 8, 8]"},
        {4, 2, 3, 2, 4, TFC_ACT_RELU, TFC_ERR_INVALID_ARGUMENT, "4 filters in 2 groups over 3 input"},
        {0, 2, 3, 1, 4, TFC_ACT_RELU, TFC_ERR_INVALID_ARGUMENT, "0 filters"},
        {4, 2, 3, 1, 4, 42, TFC_ERR_INVALID_ARGUMENT, "unknown activation 42"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfc_graph_create(&g);
        tfc_tensor *in = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, (int64_t[]){2, 3, 8, 8}));
        int64_t kern[3] = {bad[i].k, bad[i].k, bad[i].k};
        tfc_conv_params p = {.groups = bad[i].groups, .auto_pad = TFC_CONV_PAD_VALID};
        CU_ASSERT_PTR_NULL(tfc_conv_layer(g, in, bad[i].filters, bad[i].ns, kern, &p,
                                          (tfc_activation)bad[i].act, 1, "c"));
        CU_ASSERT_EQUAL(tfc_graph_status(g), bad[i].st);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), bad[i].msg));
        tfc_graph_destroy(g);
    }
    tfc_graph_create(&g);
    tfc_tensor *in = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){2, 3, 8}));
    CU_ASSERT_PTR_NULL(tfc_max_pool_layer(g, in, 1, 0, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "max_pool_layer: n_spatial 1, size 0"));
    tfc_graph_destroy(g);
}

/* He normal for ReLU layers, Glorot uniform otherwise, with the fans of the conv layout
 * [K, C/groups, kernel...]: fan_in = C/groups * kernel volume, fan_out = K * kernel volume. */
static void test_conv_initializer_statistics(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, (int64_t[]){-1, 16, 9, 9}));
    int64_t k5[2] = {5, 5};
    tfc_conv_params grouped = {.groups = 4, .auto_pad = TFC_CONV_PAD_SAME_UPPER};
    tfc_conv_layer(g, x, 64, 2, k5, NULL, TFC_ACT_RELU, 1, "relu_conv");
    tfc_conv_layer(g, x, 64, 2, k5, NULL, TFC_ACT_TANH, 1, "tanh_conv");
    tfc_conv_layer(g, x, 64, 2, k5, &grouped, TFC_ACT_RELU, 1, "grouped");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    struct { const char *v; double sd, limit; } want[] = {
        {"relu_conv/kernel", sqrt(2.0 / (16 * 25)), 0},
        {"tanh_conv/kernel", sqrt(2.0 / (16 * 25 + 64 * 25)), sqrt(6.0 / (16 * 25 + 64 * 25))},
        {"grouped/kernel", sqrt(2.0 / (4 * 25)), 0},
    };
    double mean, sd, maxabs;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tfc_tensor *v = tfc_graph_find(g, want[i].v);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        stats(s, v, &mean, &sd, &maxabs);
        CU_ASSERT(fabs(mean) < 0.03 * want[i].sd);
        CU_ASSERT(fabs(sd / want[i].sd - 1) < 0.03);
        if (want[i].limit) CU_ASSERT(maxabs <= want[i].limit);
        if (!want[i].limit) CU_ASSERT(maxabs > 3 * want[i].sd); /* normal: tails not cut */
    }
    stats(s, tfc_graph_find(g, "relu_conv/bias"), &mean, &sd, &maxabs);
    CU_ASSERT_EQUAL(maxabs, 0);
    /* the same name gives the same weights in another graph (seeded by the name) */
    tfc_graph *h;
    tfc_graph_create(&h);
    tfc_tensor *hx = tfc_placeholder(h, "other", TFC_FLOAT32, tfc_shape_of(4, (int64_t[]){1, 16, 9, 9}));
    tfc_conv_layer(h, hx, 64, 2, k5, NULL, TFC_ACT_RELU, 0, "relu_conv");
    tfc_session *hs;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, h, &hs), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(hs), TFC_OK);
    tfc_value *a, *b;
    CU_ASSERT_EQUAL_FATAL(tfc_session_read_variable(s, tfc_graph_find(g, "relu_conv/kernel"), &a), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_read_variable(hs, tfc_graph_find(h, "relu_conv/kernel"), &b), TFC_OK);
    CU_ASSERT_EQUAL(memcmp(tfc_value_cdata(a), tfc_value_cdata(b), tfc_value_nbytes(a)), 0);
    tfc_value_destroy(a);
    tfc_value_destroy(b);
    tfc_session_destroy(hs);
    tfc_graph_destroy(h);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A tiny conv net (conv 3x3 ReLU, 2x2 max pool, dense) learns where the bright bar of a 6x6
 * image is (left or right half) through a list-free tfc_minimize: the loss falls far. */
static void test_tiny_conv_net_trains(void)
{
    enum { N = 16 };
    float xs[N * 36], ys[N];
    for (int i = 0; i < N; i++) {
        int right = i % 2, col = right ? 3 + (i / 2) % 3 : (i / 2) % 3;
        for (int p = 0; p < 36; p++) xs[i * 36 + p] = (p % 6 == col) ? 1.0f : 0.1f * (float)((i * 7 + p) % 5) / 5;
        ys[i] = (float)right;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 3);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, (int64_t[]){N, 1, 6, 6}));
    tfc_tensor *y = tfc_placeholder(g, "y", TFC_FLOAT32, S2(N, 1));
    int64_t k3[2] = {3, 3};
    tfc_tensor *h = tfc_max_pool_layer(g, tfc_conv_layer(g, x, 4, 2, k3, NULL, TFC_ACT_RELU, 1, "conv"), 2, 2, 0);
    tfc_tensor *logit = tfc_dense(g, tfc_flatten(g, h, 1), 1, TFC_ACT_NONE, "out");
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_square(g, tfc_sub(g, tfc_sigmoid(g, logit), y)), 0, NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.05);
    tfc_tensor *step = tfc_minimize(g, loss, 0, NULL, &opt, NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, NULL, 0), 4); /* conv and out: kernel, bias */
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_init_variables(s), TFC_OK);
    tfc_value *feeds[2] = {test_f32(4, (int64_t[]){N, 1, 6, 6}, xs), test_f32(2, (int64_t[]){N, 1}, ys)};
    tfc_tensor *ph[2] = {x, y};
    double first = -1, last = -1;
    for (int it = 0; it < 60; it++) {
        tfc_value *lv;
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, ph, feeds, 1, &loss, &lv, 1, &step), TFC_OK);
        last = tfc_value_get(lv, 0);
        if (first < 0) first = last;
        tfc_value_destroy(lv);
    }
    printf(" (loss %.4f -> %.5f) ", first, last);
    CU_ASSERT(last < first / 10);
    CU_ASSERT(last < 0.02);
    tfc_value_destroy(feeds[0]);
    tfc_value_destroy(feeds[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("layers", test_ctx_open, test_ctx_close);
    TEST_ADD(test_scope_names_nest);
    TEST_ADD(test_scope_pop_without_push);
    TEST_ADD(test_trainable_set);
    TEST_ADD(test_minimize_without_list);
    TEST_ADD(test_dense_shapes_and_names);
    TEST_ADD(test_initializer_statistics);
    TEST_ADD(test_small_model_trains);
    TEST_ADD(test_store_keeps_scopes_and_trainable);
    TEST_ADD(test_batch_norm_layer_variables);
    TEST_ADD(test_batch_norm_layer_inference);
    TEST_ADD(test_batch_norm_layer_trains);
    TEST_ADD(test_batch_norm_layer_store);
    TEST_ADD(test_layer_norm_layer);
    TEST_ADD(test_conv_layer_shapes_and_names);
    TEST_ADD(test_conv_initializer_statistics);
    TEST_ADD(test_tiny_conv_net_trains);
    return test_main();
}
