/* test_onnx_export.c: tfc_onnx_export round trips. A stored MLP and a stored CNN (trained a
 * few steps, saved with a checkpoint, loaded back from the store) are exported with their
 * checkpoint's values, imported back with tfc_onnx_import and run on the same input: the
 * outputs must be the same bits (the same kernels run). The MLP again with its variables as
 * graph inputs, fed their values; the CNN also with batch norm (within 1e-6: ONNX's epsilon
 * is a float32). A model of many element-wise, array and normalization ops
 * (several exported as a few ONNX nodes: gelu, silu, log1p, ...) must agree within float
 * rounding. Models imported from ONNX's node tests (libonnx-testdata; skipped without it) are
 * exported and imported again, and must give the same bits and ONNX's expected outputs. And
 * the errors: an op with no ONNX form, an unfed placeholder, a fed training flag, a variable
 * without a value, a file that cannot be written. ONNX_EXPORT_ALL=1 round-trips every node
 * test whose import succeeds and prints the counts. The imported MLP's plan: its task count,
 * and its chain of tasks on one worker (TFC_PASS_PIN_CHAINS) with the same bits as without. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <starpu.h>
#include "testutil.h"
#include "../examples/cnn_model.h"
#include "../onnx/onnx_import.h"

static char dir[512];

static void path_in(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* Deterministic values in [-1, 1). */
static tfc_value *filled(enum tfc_dtype dt, tfc_shape s, uint32_t seed)
{
    tfc_value *v;
    CU_ASSERT_FATAL(!tfc_value_create(dt, s, &v));
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < tfc_value_numel(v); i++) {
        x = x * 1664525u + 1013904223u;
        double r = (double)(x >> 8) / (double)(1u << 24) * 2 - 1;
        if (dt == TFC_FLOAT32) ((float *)tfc_value_data(v))[i] = (float)r;
        else if (dt == TFC_FLOAT64) ((double *)tfc_value_data(v))[i] = r;
        else if (dt == TFC_INT32) ((int32_t *)tfc_value_data(v))[i] = (int32_t)(x >> 8) % 4;
    }
    return v;
}

/* Runs sig's outputs of g from feeds given by name; out receives sig->n_outputs values. */
static tfc_status run_outputs(tfc_graph *g, tfc_session *s, const tfc_signature *sig, int n_feeds,
                              const char *const *names, tfc_value *const *vals, tfc_value **out)
{
    tfc_tensor *ft[16], *fetch[16];
    for (int i = 0; i < n_feeds; i++) CU_ASSERT_PTR_NOT_NULL_FATAL(ft[i] = tfc_graph_find(g, names[i]));
    for (int i = 0; i < sig->n_outputs; i++)
        CU_ASSERT_PTR_NOT_NULL_FATAL(fetch[i] = tfc_graph_find(g, sig->outputs[i]));
    tfc_status st = tfc_session_run(s, n_feeds, ft, vals, sig->n_outputs, fetch, out, 0, NULL);
    if (st) fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
    return st;
}

/* Same dtype, shape and bits (within rel_tol when mixed devices may round differently, or when
 * rel_tol is asked for: composites of several ONNX nodes). */
static int same_values(const tfc_value *a, const tfc_value *b, double rel_tol)
{
    tfc_shape sa = tfc_value_shape(a), sb = tfc_value_shape(b);
    if (tfc_value_dtype(a) != tfc_value_dtype(b) || sa.rank != sb.rank) return 0;
    for (int d = 0; d < sa.rank; d++)
        if (sa.dims[d] != sb.dims[d]) return 0;
    if (rel_tol == 0 && !test_mixed_devices())
        return !memcmp(tfc_value_cdata(a), tfc_value_cdata(b), tfc_value_nbytes(a));
    if (rel_tol == 0) rel_tol = 1e-5;
    for (int64_t i = 0; i < tfc_value_numel(a); i++) {
        double x = tfc_value_get(a, i), y = tfc_value_get(b, i);
        if (!(fabs(x - y) <= rel_tol * fmax(1.0, fabs(x))) && !(isnan(x) && isnan(y))) return 0;
    }
    return 1;
}

/* Exports sig of g (variables from vars, or graph inputs when NULL) to name in dir, imports it
 * into a new graph with a session, and runs both on the feeds: the outputs must agree. The
 * variables-as-inputs case feeds the imported graph each variable's value as well. */
static void round_trip(tfc_graph *g, tfc_session *s, const tfc_signature *sig, tfc_session *vars,
                       const char *name, int n_feeds, tfc_value *const *feeds, double rel_tol)
{
    char path[1024];
    path_in(path, sizeof path, name);
    tfc_onnx_export_options o = {.variables = vars};
    tfc_status st = tfc_onnx_export(g, sig, &o, path);
    if (st) fprintf(stderr, "export: %s\n", tfc_errmsg());
    CU_ASSERT_FATAL(st == TFC_OK);
    tfc_graph *g2;
    tfc_onnx_model *m;
    CU_ASSERT_FATAL(!tfc_graph_create(&g2));
    st = tfc_onnx_import(g2, path, NULL, &m);
    if (st) fprintf(stderr, "import: %s\n", tfc_graph_errmsg(g2));
    CU_ASSERT_FATAL(st == TFC_OK);
    CU_ASSERT_EQUAL(m->predict->n_outputs, sig->n_outputs);
    for (int i = 0; i < sig->n_outputs && i < m->predict->n_outputs; i++)
        CU_ASSERT_STRING_EQUAL(m->predict->outputs[i], sig->outputs[i]);
    /* feeds: the signature's, then (variables as inputs) each imported placeholder that is a
     * variable of g, fed its value in s */
    const char *names[16];
    tfc_value *vals[16];
    int n = 0;
    for (int i = 0; i < n_feeds; i++) names[n] = sig->feeds[i], vals[n++] = feeds[i];
    for (int i = 0; i < m->predict->n_feeds && !vars; i++) {
        tfc_tensor *v = tfc_graph_find(g, m->predict->feeds[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        if (strcmp(tfc_tensor_op(v), "variable")) continue;
        CU_ASSERT_FATAL(!tfc_session_read_variable(s, v, &vals[n]));
        names[n++] = m->predict->feeds[i];
    }
    CU_ASSERT_EQUAL(n, vars ? n_feeds : m->predict->n_feeds);
    tfc_session *s2;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g2, &s2));
    tfc_value *a[16] = {0}, *b[16] = {0};
    CU_ASSERT_FATAL(!run_outputs(g, s, sig, n_feeds, sig->feeds, feeds, a));
    CU_ASSERT_FATAL(!run_outputs(g2, s2, m->predict, n, names, vals, b));
    for (int i = 0; i < sig->n_outputs; i++) {
        int same = same_values(a[i], b[i], rel_tol);
        if (!same) {
            double worst = 0;
            for (int64_t k = 0; k < tfc_value_numel(a[i]) && tfc_value_numel(a[i]) == tfc_value_numel(b[i]); k++)
                worst = fmax(worst, fabs(tfc_value_get(a[i], k) - tfc_value_get(b[i], k)));
            fprintf(stderr, "%s: output '%s' differs after the round trip (largest difference "
                    "%g)\n", name, sig->outputs[i], worst);
        }
        CU_ASSERT(same);
        tfc_value_destroy(a[i]);
        tfc_value_destroy(b[i]);
    }
    for (int i = n_feeds; i < n; i++) tfc_value_destroy(vals[i]);
    tfc_session_destroy(s2);
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g2);
}

/* Trains g a few steps (train with the feeds), saves graph, "predict" and a checkpoint into a
 * store, and loads them back: *g_out, *s_out (restored), *sig_out. */
static void store_and_load(tfc_graph *g, const char *name, tfc_tensor *train, int n_feeds,
                           tfc_tensor *const *ft, tfc_value *const *fv,
                           const tfc_signature *predict, tfc_graph **g_out, tfc_session **s_out,
                           tfc_signature **sig_out)
{
    char path[1024];
    path_in(path, sizeof path, name);
    unlink(path);
    tfc_session *s;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &s));
    CU_ASSERT_FATAL(!tfc_session_init_variables(s));
    for (int step = 0; step < 3; step++)
        CU_ASSERT_FATAL(!tfc_session_run(s, n_feeds, ft, fv, 0, NULL, NULL, 1, &train));
    tfc_store *st;
    CU_ASSERT_FATAL(!tfc_store_open(path, TFC_STORE_CREATE, &st));
    CU_ASSERT_FATAL(!tfc_store_save_graph(st, g));
    CU_ASSERT_FATAL(!tfc_store_set_signature(st, "predict", predict));
    CU_ASSERT_FATAL(!tfc_store_checkpoint(st, s, 3, NULL));
    CU_ASSERT_FATAL(!tfc_store_flush(st));
    tfc_store_close(st);
    tfc_session_destroy(s);
    CU_ASSERT_FATAL(!tfc_store_open(path, TFC_STORE_READONLY, &st));
    CU_ASSERT_FATAL(!tfc_store_load_graph(st, g_out));
    CU_ASSERT_FATAL(!tfc_store_get_signature(st, "predict", sig_out));
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, *g_out, s_out));
    CU_ASSERT_FATAL(!tfc_store_restore(st, *s_out, NULL, NULL));
    tfc_store_close(st);
}

/* 16 -> 16 (ReLU) -> 4 with Adam; predict: softmax probabilities and the argmax class. */
static tfc_graph *mlp_graph(tfc_tensor **train)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 7);
    tfc_tensor *x = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 16}));
    tfc_tensor *y = tfc_placeholder(g, "labels", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h = tfc_dense(g, x, 16, TFC_ACT_RELU, "dense1");
    tfc_tensor *logits = tfc_dense(g, h, 4, TFC_ACT_NONE, "logits");
    tfc_tensor_set_name(tfc_softmax(g, logits, -1), "probabilities");
    tfc_tensor_set_name(tfc_argmax(g, logits, 1), "predict/class");
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, y), 0,
                                       NULL, 0);
    tfc_tensor_set_name(loss, "loss");
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 0.01);
    *train = tfc_minimize(g, loss, 0, NULL, &adam, tfc_global_step(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    return g;
}

static void test_mlp(void)
{
    tfc_tensor *train;
    tfc_graph *g = mlp_graph(&train);
    tfc_value *fv[2] = {filled(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){32, 16}), 1),
                        filled(TFC_INT32, tfc_shape_of(1, (int64_t[]){32}), 2)};
    tfc_tensor *ft[2] = {tfc_graph_find(g, "images"), tfc_graph_find(g, "labels")};
    const char *feeds[1] = {"images"}, *outs[2] = {"probabilities", "predict/class"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 2, .outputs = outs};
    tfc_graph *g2;
    tfc_session *s2;
    tfc_signature *sig;
    store_and_load(g, "mlp.db", train, 2, ft, fv, &predict, &g2, &s2, &sig);
    tfc_value *x = filled(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){5, 16}), 3);
    round_trip(g2, s2, sig, s2, "mlp.onnx", 1, &x, 0);          /* checkpoint as initializers */
    round_trip(g2, s2, sig, NULL, "mlp-inputs.onnx", 1, &x, 0); /* variables as graph inputs */
    /* the loss (SoftmaxCrossEntropyLoss, which the importer writes as a few ops) */
    const char *lfeeds[2] = {"images", "labels"}, *louts[1] = {"loss"};
    tfc_signature lsig = {.n_feeds = 2, .feeds = lfeeds, .n_outputs = 1, .outputs = louts};
    tfc_value *xy[2] = {x, filled(TFC_INT32, tfc_shape_of(1, (int64_t[]){5}), 4)};
    round_trip(g2, s2, &lsig, s2, "mlp-loss.onnx", 2, xy, 1e-5);
    tfc_value_destroy(xy[1]);
    tfc_value_destroy(x);
    tfc_value_destroy(fv[0]);
    tfc_value_destroy(fv[1]);
    tfc_signature_free(sig);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g2);
    tfc_graph_destroy(g);
}

/* Runs the imported model's "predict" RUNS times on x with profiling on; returns the last
 * output. Every run must plan to n_tasks tasks; *one_worker: the CPU worker that ran every
 * task of every run, or -1 when they ran on more than one. */
static tfc_value *profiled_runs(tfc_graph *g, const tfc_onnx_model *m, unsigned passes,
                                tfc_value *x, int n_tasks, int *one_worker)
{
    enum { RUNS = 20 };
    tfc_session *s;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &s));
    CU_ASSERT_FATAL(!tfc_session_set_passes(s, passes));
    CU_ASSERT_FATAL(!tfc_session_set_profiling(s, 1));
    tfc_tensor *in = tfc_graph_find(g, m->predict->feeds[0]);
    tfc_tensor *out = tfc_graph_find(g, m->predict->outputs[0]);
    tfc_value *y = NULL;
    *one_worker = -2;
    for (int r = 0; r < RUNS; r++) {
        tfc_value_destroy(y);
        y = NULL;
        CU_ASSERT_FATAL(!tfc_session_run(s, 1, &in, &x, 1, &out, &y, 0, NULL));
        const tfc_task_record *rec;
        int n = tfc_session_last_records(s, &rec);
        CU_ASSERT_EQUAL(n, n_tasks);
        for (int i = 0; i < n; i++) {
            if (*one_worker == -2) *one_worker = rec[i].worker;
            if (rec[i].worker != *one_worker) *one_worker = -1;
        }
    }
    tfc_session_destroy(s);
    return y;
}

/* The worker that ran every task of the session's last completed run (-1: several). */
static int last_run_worker(tfc_session *s, int n_tasks)
{
    const tfc_task_record *rec;
    int n = tfc_session_last_records(s, &rec), w = n > 0 ? rec[0].worker : -1;
    CU_ASSERT_EQUAL(n, n_tasks);
    for (int i = 1; i < n; i++) w = rec[i].worker == w ? w : -1;
    return w;
}

/* Two runs of a pinned chain in flight at once run on two workers, each on one. */
static void concurrent_chains(tfc_graph *g, const tfc_onnx_model *m, tfc_value *x)
{
    tfc_session *s;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &s));
    CU_ASSERT_FATAL(!tfc_session_set_profiling(s, 1));
    tfc_tensor *in = tfc_graph_find(g, m->predict->feeds[0]);
    tfc_tensor *out = tfc_graph_find(g, m->predict->outputs[0]);
    tfc_run *r[2];
    tfc_value *y[2];
    int w[2];
    for (int i = 0; i < 2; i++)
        CU_ASSERT_FATAL(!tfc_session_run_async(s, 1, &in, &x, 1, &out, 0, NULL, &r[i]));
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_FATAL(!tfc_run_wait(r[i], &y[i]));
        w[i] = last_run_worker(s, 1); /* one chain task */
    }
    CU_ASSERT(same_values(y[0], y[1], 0));
    CU_ASSERT(w[0] >= 0 && w[1] >= 0 && w[0] != w[1]);
    tfc_value_destroy(y[0]);
    tfc_value_destroy(y[1]);
    tfc_session_destroy(s);
}

/* The imported MLP's plan (issue 14, item 6): Gemm + Relu, Gemm, Softmax become 5 steps
 * (matmul, bias add + relu fused, matmul, bias add, softmax), each waiting for the one before,
 * so TFC_PASS_PIN_CHAINS runs them on one CPU worker (where there are two or more and no
 * devices) as one chain task, the same worker run after run, with the same bits as the 5
 * tasks without the pass; two runs in flight at once take a worker each. The row split
 * (TFC_ROW_SPLIT_MIN, 64 by default) would make its 128 rows two chains of 64
 * (tests/test_tiling, test_row_chains): off here. */
static void test_mlp_plan(void)
{
    setenv("TFC_ROW_SPLIT_MIN", "off", 1);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 5);
    tfc_tensor *x = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 64}));
    tfc_tensor *h = tfc_dense(g, x, 32, TFC_ACT_RELU, "dense1");
    tfc_tensor_set_name(tfc_softmax(g, tfc_dense(g, h, 10, TFC_ACT_NONE, "logits"), -1),
                        "probabilities");
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_session *vars;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &vars));
    CU_ASSERT_FATAL(!tfc_session_init_variables(vars));
    const char *feeds[1] = {"images"}, *outs[1] = {"probabilities"};
    tfc_signature sig = {.n_feeds = 1, .feeds = feeds, .n_outputs = 1, .outputs = outs};
    char path[1024];
    path_in(path, sizeof path, "mlp-plan.onnx");
    tfc_onnx_export_options o = {.variables = vars};
    CU_ASSERT_FATAL(tfc_onnx_export(g, &sig, &o, path) == TFC_OK);
    tfc_session_destroy(vars);
    tfc_graph *g2;
    tfc_onnx_model *m;
    tfc_graph_create(&g2);
    CU_ASSERT_FATAL(tfc_onnx_import(g2, path, NULL, &m) == TFC_OK);
    tfc_value *xv = filled(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){128, 64}), 9);
    int w_pin, w_free, pins = starpu_cpu_worker_get_count() >= 2 &&
                             !starpu_cuda_worker_get_count() && !starpu_opencl_worker_get_count();
    tfc_value *pinned = profiled_runs(g2, m, TFC_PASS_ALL, xv, pins ? 1 : 5, &w_pin);
    tfc_value *free_ = profiled_runs(g2, m, TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS, xv, 5,
                                     &w_free);
    CU_ASSERT(same_values(pinned, free_, 0));
    if (pins) {
        CU_ASSERT(w_pin >= 0);
        if (w_pin >= 0) CU_ASSERT_EQUAL(starpu_worker_get_type(w_pin), STARPU_CPU_WORKER);
        concurrent_chains(g2, m, xv);
    }
    fprintf(stderr, "mlp plan: %d tasks pinned (worker %d), 5 unpinned (%s)\n", pins ? 1 : 5, w_pin,
            w_free >= 0 ? "one worker" : "several workers");
    tfc_value_destroy(pinned);
    tfc_value_destroy(free_);
    tfc_value_destroy(xv);
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g2);
    unsetenv("TFC_ROW_SPLIT_MIN");
    tfc_graph_destroy(g);
}

/* The flagship CNN (dropout; with batch_norm, a batch norm layer before each ReLU), trained 3
 * steps with the training flag 1: the export writes inference mode (no dropout; the moving
 * statistics), as `tfc run` computes. ONNX's epsilon attribute is a float32, so batch norm's
 * 1e-3 comes back rounded: that model agrees within rel_tol, the other to the bit. */
static void cnn_round_trip(int batch_norm, double rel_tol)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 3);
    struct cnn_config c = {.dropout = 0.5, .batch_norm = batch_norm};
    struct cnn_model net;
    cnn_model_build(g, TFC_INT32, &c, &net);
    tfc_tensor_set_name(tfc_softmax(g, net.logits, -1), "probabilities");
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
    tfc_tensor *train = tfc_minimize(g, net.loss, 0, NULL, &adam, tfc_global_step(g));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_value *on;
    tfc_value_scalar(TFC_FLOAT32, 1, &on);
    tfc_value *fv[3] = {filled(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){8, 784}), 4),
                        filled(TFC_INT32, tfc_shape_of(1, (int64_t[]){8}), 5), on};
    tfc_tensor *ft[3] = {net.images, net.labels, net.training};
    const char *feeds[1] = {"images"}, *outs[1] = {"probabilities"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 1, .outputs = outs};
    tfc_graph *g2;
    tfc_session *s2;
    tfc_signature *sig;
    store_and_load(g, batch_norm ? "cnn-bn.db" : "cnn.db", train, 3, ft, fv, &predict, &g2, &s2, &sig);
    tfc_value *x = filled(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){3, 784}), 6);
    round_trip(g2, s2, sig, s2, batch_norm ? "cnn-bn.onnx" : "cnn.onnx", 1, &x, rel_tol);
    tfc_value_destroy(x);
    for (int i = 0; i < 3; i++) tfc_value_destroy(fv[i]);
    tfc_signature_free(sig);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g2);
    tfc_graph_destroy(g);
}

static void test_cnn(void) { cnn_round_trip(0, 0); }
static void test_cnn_batch_norm(void) { cnn_round_trip(1, 1e-6); }

/* Many exporters at once; those written as several ONNX nodes round differently from our
 * fused kernels, so this compares within 1e-5. */
static void test_many_ops(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 6}));
    tfc_tensor *ax = tfc_abs(g, x);
    tfc_tensor *parts[3];
    tfc_split(g, tfc_gelu_tanh(g, x), 3, 1, parts);
    tfc_tensor *sum = tfc_add_n(g, 3, (tfc_tensor *[]){tfc_gelu(g, x), tfc_silu(g, x),
                                                        tfc_log1p(g, ax)});
    sum = tfc_add(g, sum, tfc_mul(g, tfc_expm1(g, x), tfc_rsqrt(g, tfc_add(g, ax, tfc_scalar(g, TFC_FLOAT32, 1)))));
    sum = tfc_sub(g, sum, tfc_square(g, tfc_clip(g, x, -0.5, 0.25)));
    sum = tfc_add(g, sum, tfc_elu(g, x, 0.7));
    sum = tfc_add(g, sum, tfc_hard_sigmoid(g, tfc_leaky_relu(g, x, 0.1), 0.3, 0.4));
    tfc_tensor *mask = tfc_not_equal(g, tfc_sign(g, x), tfc_scalar(g, TFC_FLOAT32, 1));
    sum = tfc_select(g, mask, sum, tfc_neg(g, sum));
    tfc_tensor *ln = tfc_layer_norm(g, sum, NULL, NULL, 1, 1e-3);
    tfc_tensor *cat = tfc_concat(g, 2, (tfc_tensor *[]){ln, parts[1]}, 1); /* [-1, 8] */
    int64_t b[2] = {0, 1}, sz[2] = {-1, 6};
    tfc_tensor *sl = tfc_slice(g, tfc_transpose(g, tfc_transpose(g, cat, NULL), NULL), b, sz);
    tfc_tensor *padded = tfc_pad(g, sl, (int64_t[]){0, 1}, (int64_t[]){0, 2}, TFC_PAD_REFLECT, 0);
    tfc_tensor *red = tfc_reduce_sum(g, padded, 1, (int64_t[]){1}, 1);
    tfc_tensor *mx = tfc_reduce_max(g, tfc_log_softmax(g, padded, -1), 1, (int64_t[]){-1}, 0);
    tfc_tensor *hot = tfc_one_hot(g, tfc_argmax(g, padded, 1), 9, TFC_FLOAT32, 2, -1);
    tfc_tensor *out = tfc_add(g, tfc_mul(g, hot, red), tfc_reshape(g, mx, tfc_shape_of(2, (int64_t[]){-1, 1})));
    out = tfc_add(g, out, tfc_cast(g, tfc_cast(g, tfc_mul(g, hot, tfc_scalar(g, TFC_FLOAT32, 3)), TFC_INT32), TFC_FLOAT32));
    /* (zeros_like, ones_like, reshape_like and broadcast_like export through Shape, which the
     * importer folds only for static shapes: not used here) */
    tfc_tensor_set_name(out, "y");
    tfc_tensor *xent = tfc_softmax_cross_entropy(g, padded, tfc_softmax(g, tfc_neg(g, padded), -1));
    tfc_tensor_set_name(xent, "xent");
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    const char *feeds[1] = {"x"}, *outs[2] = {"y", "xent"};
    tfc_signature sig = {.n_feeds = 1, .feeds = feeds, .n_outputs = 2, .outputs = outs};
    tfc_session *s;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &s));
    tfc_value *xv = filled(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){7, 6}), 8);
    round_trip(g, s, &sig, s, "ops.onnx", 1, &xv, 1e-5);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- node tests ----------------------------------------------------------------------- */

static const char *const node_tests[] = {
    "test_gemm_all_attributes", "test_matmul_3d", "test_conv_with_strides_and_asymmetric_padding",
    "test_convtranspose", "test_maxpool_2d_pads", "test_averagepool_2d_pads_count_include_pad",
    "test_batchnorm_example", "test_layer_normalization_3d_axis_negative_1_epsilon",
    "test_softmax_axis_1", "test_edge_pad", "test_reflect_pad", "test_transpose_all_permutations_4",
    "test_split_equal_parts_1d", "test_concat_3d_axis_1", "test_reduce_mean_keepdims_example",
    "test_clip", "test_elu", "test_leakyrelu", "test_hardsigmoid", "test_softplus", "test_erf",
    "test_where_example", "test_argmax_default_axis_example", "test_reshape_negative_dim",
    "test_slice", "test_not_2d",
};

static tfc_value *read_pb(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static uint8_t buf[16 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, n, buf);
    if (!t) return NULL;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_value *v = NULL;
    if (tfc_onnx_tensor_value(g, t, ".", path, &v)) v = NULL;
    tfc_graph_destroy(g);
    onnx__tensor_proto__free_unpacked(t, NULL);
    return v;
}

struct io {
    int n_in, n_out;
    char *names[16];
    tfc_value *in[16], *expected[16];
};

/* The graph inputs (not initializers) of a node test's model with their data set 0. */
static int read_io(const char *tdir, struct io *io)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/model.onnx", tdir);
    tfc_graph *g;
    tfc_graph_create(&g);
    Onnx__ModelProto *mp;
    int ok = !tfc_onnx_model_read(g, path, &mp);
    tfc_graph_destroy(g);
    if (!ok) return 0;
    const Onnx__GraphProto *gp = mp->graph;
    memset(io, 0, sizeof *io);
    for (size_t i = 0; i < gp->n_input && io->n_in < 16; i++) {
        int init = 0;
        for (size_t k = 0; k < gp->n_initializer; k++) init |= !strcmp(gp->initializer[k]->name, gp->input[i]->name);
        if (init) continue;
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", tdir, io->n_in);
        io->names[io->n_in] = strdup(gp->input[i]->name);
        io->in[io->n_in++] = read_pb(path);
    }
    for (int k = 0; k < (int)gp->n_output && k < 16; k++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/output_%d.pb", tdir, k);
        io->expected[io->n_out++] = read_pb(path);
    }
    onnx__model_proto__free_unpacked(mp, NULL);
    for (int i = 0; i < io->n_in; i++) ok &= io->in[i] != NULL;
    for (int k = 0; k < io->n_out; k++) ok &= io->expected[k] != NULL;
    return ok;
}

static void io_free(struct io *io)
{
    for (int i = 0; i < io->n_in; i++) free(io->names[i]), tfc_value_destroy(io->in[i]);
    for (int k = 0; k < io->n_out; k++) tfc_value_destroy(io->expected[k]);
}

/* ONNX's default tolerances. */
static int close_to(const tfc_value *got, const tfc_value *want)
{
    if (tfc_value_numel(got) != tfc_value_numel(want)) return 0;
    for (int64_t i = 0; i < tfc_value_numel(got); i++) {
        double a = tfc_value_get(got, i), b = tfc_value_get(want, i);
        if (!(fabs(a - b) <= 1e-7 + 1e-3 * fabs(b))) return 0;
    }
    return 1;
}

enum { NT_SAME, NT_DIFFERENT, NT_NOT_EXPORTED, NT_NOT_IMPORTED };

/* Imports a node test (integer inputs frozen, as test_onnx_nodes does), exports it, imports
 * the export and runs both: same bits, and ONNX's expected outputs. */
static int node_round_trip(const char *tdir, const char *name, int verbose)
{
    struct io io;
    if (!read_io(tdir, &io)) return io_free(&io), NT_NOT_IMPORTED;
    const char *frozen[16];
    const tfc_value *fvals[16];
    tfc_value *feed_vals[16];
    int n_frozen = 0, n_feeds = 0;
    for (int i = 0; i < io.n_in; i++) {
        if ((tfc_value_dtype(io.in[i]) == TFC_FLOAT32 || tfc_value_dtype(io.in[i]) == TFC_FLOAT64)) {
            feed_vals[n_feeds++] = io.in[i];
        } else {
            frozen[n_frozen] = io.names[i], fvals[n_frozen++] = io.in[i];
        }
    }
    tfc_onnx_options o = {.n_frozen = n_frozen, .frozen_names = frozen, .frozen_values = fvals};
    char model[1200], path[1024];
    snprintf(model, sizeof model, "%s/model.onnx", tdir);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_onnx_model *m = NULL;
    int rc = NT_NOT_IMPORTED;
    if (tfc_onnx_import(g, model, &o, &m)) goto done;
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    rc = NT_NOT_EXPORTED;
    if (tfc_onnx_export(g, m->predict, NULL, path)) {
        if (verbose) printf("  %s: not exported: %s\n", name, tfc_errmsg());
        goto done;
    }
    /* the export's feeds are the same placeholders (names changed the same way by import) */
    const char *our_feeds[16];
    for (int i = 0; i < n_feeds; i++) our_feeds[i] = m->predict->feeds[i];
    tfc_signature sig = *m->predict;
    sig.feeds = our_feeds;
    sig.n_feeds = n_feeds;
    tfc_session *s;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &s));
    tfc_graph *g2;
    tfc_graph_create(&g2);
    tfc_onnx_model *m2 = NULL;
    rc = NT_DIFFERENT;
    if (tfc_onnx_import(g2, path, NULL, &m2)) {
        printf("  %s: the export does not import: %s\n", name, tfc_graph_errmsg(g2));
    } else {
        tfc_session *s2;
        CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g2, &s2));
        tfc_value *a[16] = {0}, *b[16] = {0};
        if (!run_outputs(g, s, &sig, n_feeds, our_feeds, feed_vals, a) &&
            !run_outputs(g2, s2, m2->predict, n_feeds, (const char *const *)m2->predict->feeds,
                         feed_vals, b)) {
            rc = NT_SAME;
            for (int k = 0; k < sig.n_outputs; k++)
                if (!same_values(a[k], b[k], 0) || !close_to(b[k], io.expected[k])) rc = NT_DIFFERENT;
        }
        if (rc != NT_SAME) printf("  %s: outputs differ after the round trip\n", name);
        for (int k = 0; k < sig.n_outputs; k++) tfc_value_destroy(a[k]), tfc_value_destroy(b[k]);
        tfc_session_destroy(s2);
    }
    tfc_onnx_model_free(m2);
    tfc_graph_destroy(g2);
    tfc_session_destroy(s);
    unlink(path);
done:
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g);
    io_free(&io);
    return rc;
}

static const char *node_root(void)
{
    const char *root = getenv("ONNX_NODE_TESTS");
    return root && *root ? root : "/usr/share/libonnx-testdata/data/node";
}

static void test_node_tests(void)
{
    char tdir[1024];
    if (access(node_root(), R_OK)) {
        printf("  (no libonnx-testdata at %s: node tests skipped)\n", node_root());
        return;
    }
    for (size_t i = 0; i < sizeof node_tests / sizeof node_tests[0]; i++) {
        snprintf(tdir, sizeof tdir, "%s/%s", node_root(), node_tests[i]);
        int rc = node_round_trip(tdir, node_tests[i], 1);
        if (rc != NT_SAME) printf("  %s: round trip result %d\n", node_tests[i], rc);
        CU_ASSERT_EQUAL(rc, NT_SAME);
    }
}

/* ONNX_EXPORT_ALL=1: every node test whose import succeeds, with counts. */
static void all_node_tests(void)
{
    DIR *d = opendir(node_root());
    if (!d) return;
    int count[4] = {0};
    struct dirent *e;
    char tdir[1024];
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "test_", 5)) {
            snprintf(tdir, sizeof tdir, "%s/%s", node_root(), e->d_name);
            count[node_round_trip(tdir, e->d_name, 1)]++;
        }
    closedir(d);
    printf("node tests: %d same after export and import, %d differ, %d not exported, %d not "
           "imported in the first place\n", count[NT_SAME], count[NT_DIFFERENT],
           count[NT_NOT_EXPORTED], count[NT_NOT_IMPORTED]);
}

/* ---- errors --------------------------------------------------------------------------- */

static void expect_error(tfc_graph *g, const tfc_signature *sig, tfc_session *vars,
                         const char *path, tfc_status want, const char *needle)
{
    tfc_onnx_export_options o = {.variables = vars};
    tfc_status st = tfc_onnx_export(g, sig, &o, path);
    CU_ASSERT_EQUAL(st, want);
    if (!strstr(tfc_errmsg(), needle))
        fprintf(stderr, "expected '%s' in: %s\n", needle, tfc_errmsg());
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), needle));
    CU_ASSERT(access(path, F_OK) != 0); /* nothing written */
}

static void test_errors(void)
{
    char path[1024];
    path_in(path, sizeof path, "bad.onnx");
    unlink(path);
    tfc_tensor *train;
    tfc_graph *g = mlp_graph(&train);
    const char *both[2] = {"images", "labels"}, *probs[1] = {"probabilities"};
    const char *none[1] = {"nosuch"};
    tfc_signature sig = {.n_feeds = 2, .feeds = both, .n_outputs = 1};
    /* the training step needs gradients and optimizer updates, which have no ONNX form */
    const char *train_out[1] = {"train"};
    tfc_tensor_set_name(train, "train");
    sig.outputs = train_out;
    expect_error(g, &sig, NULL, path, TFC_ERR_NOT_FOUND, "has no ONNX form");
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "ONNX export: node '"));
    sig.outputs = probs;
    sig.n_feeds = 0;
    expect_error(g, &sig, NULL, path, TFC_ERR_INVALID_ARGUMENT, "node 'images'");
    sig.n_feeds = 1;
    sig.outputs = none;
    expect_error(g, &sig, NULL, path, TFC_ERR_NOT_FOUND, "output 'nosuch'");
    sig.outputs = probs;
    sig.n_outputs = 0;
    expect_error(g, &sig, NULL, path, TFC_ERR_INVALID_ARGUMENT, "no outputs");
    sig.n_outputs = 1;
    tfc_session *s;
    CU_ASSERT_FATAL(!tfc_session_create(test_ctx, g, &s));
    expect_error(g, &sig, s, path, TFC_ERR_UNINITIALIZED, "dense1/kernel");
    CU_ASSERT_FATAL(!tfc_session_init_variables(s));
    expect_error(g, &sig, s, "/nonexistent-dir/m.onnx", TFC_ERR_INVALID_ARGUMENT,
                 "/nonexistent-dir/m.onnx");
    tfc_session_destroy(s);
    tfc_graph_destroy(g);

    /* the training flag fed: dropout cannot be written in inference mode */
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 4}));
    tfc_tensor_set_name(tfc_dropout(g, x, 0.5, tfc_training_flag(g), NULL, 0), "y");
    const char *fed[2] = {"x", "training"}, *y[1] = {"y"};
    tfc_signature dsig = {.n_feeds = 2, .feeds = fed, .n_outputs = 1, .outputs = y};
    expect_error(g, &dsig, NULL, path, TFC_ERR_INVALID_ARGUMENT, "training input 'training'");
    dsig.n_feeds = 1; /* unfed: its default 0, the identity */
    CU_ASSERT_EQUAL(tfc_onnx_export(g, &dsig, NULL, path), TFC_OK);
    unlink(path);
    tfc_graph_destroy(g);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tfc-onnx-export-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    if (mkdir(dir, 0700)) return perror(dir), 1;
    if (test_ctx_open()) return 1;
    CU_initialize_registry();
    TEST_SUITE("onnx_export", NULL, NULL);
    if (getenv("ONNX_EXPORT_ALL")) {
        TEST_ADD(all_node_tests);
    } else {
        TEST_ADD(test_mlp);
        TEST_ADD(test_mlp_plan);
        TEST_ADD(test_cnn);
        TEST_ADD(test_cnn_batch_norm);
        TEST_ADD(test_many_ops);
        TEST_ADD(test_node_tests);
        TEST_ADD(test_errors);
    }
    int rc = test_main();
    test_ctx_close();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
