/* test_rnn.c: the LSTM and GRU layers (issue 13, item 5): outputs against a plain C reference
 * in float64 (last state and sequences, per-row lengths, initial states), the gradient of a
 * loss through the unrolled layer against central differences of that reference, the while
 * loop and the unrolled graph giving the same bits, the variables (names, shapes, trainable)
 * and the errors. */
#include "testutil.h"

enum { B = 3, T = 4, F = 5, H = 6 };

static double sig(double v) { return 1 / (1 + exp(-v)); }

/* Weights as the layer holds them (float64): kernel [F, G H], recurrent [H, G H], bias and
 * (GRU) recurrent bias [G H]. */
struct weights { double w[F * 4 * H], u[H * 4 * H], b[4 * H], rb[4 * H]; };

/* One step of the reference cell for one row: h, c updated in place. */
static void ref_cell(int gru, const struct weights *wt, const double *x, double *h, double *c)
{
    int G = gru ? 3 : 4;
    double zx[4 * H], zh[4 * H], hn[H];
    for (int j = 0; j < G * H; j++) {
        zx[j] = wt->b[j] + (!gru && j >= H && j < 2 * H); /* the forget bias offset */
        zh[j] = gru ? wt->rb[j] : 0;
        for (int f = 0; f < F; f++) zx[j] += x[f] * wt->w[f * G * H + j];
        for (int k = 0; k < H; k++) zh[j] += h[k] * wt->u[k * G * H + j];
    }
    for (int k = 0; k < H; k++) {
        if (!gru) {
            double i = sig(zx[k] + zh[k]), f = sig(zx[H + k] + zh[H + k]);
            double g = tanh(zx[2 * H + k] + zh[2 * H + k]), o = sig(zx[3 * H + k] + zh[3 * H + k]);
            c[k] = f * c[k] + i * g;
            hn[k] = o * tanh(c[k]);
        } else {
            double r = sig(zx[k] + zh[k]), z = sig(zx[H + k] + zh[H + k]);
            double n = tanh(zx[2 * H + k] + r * zh[2 * H + k]);
            hn[k] = (1 - z) * n + z * h[k];
        }
    }
    memcpy(h, hn, sizeof hn);
}

/* The whole layer: seq [B, T, H] (zeros past a row's length) and the last h [B, H]. */
static void ref_layer(int gru, const struct weights *wt, const double *x, const int32_t *len,
                      const double *h0, const double *c0, double *seq, double *last)
{
    for (int b = 0; b < B; b++) {
        double h[H], c[H];
        for (int k = 0; k < H; k++) h[k] = h0 ? h0[b * H + k] : 0, c[k] = c0 ? c0[b * H + k] : 0;
        for (int t = 0; t < T; t++) {
            int on = !len || t < len[b];
            if (on) ref_cell(gru, wt, x + (b * T + t) * F, h, c);
            for (int k = 0; k < H; k++) seq[(b * T + t) * H + k] = on ? h[k] : 0;
        }
        memcpy(last + b * H, h, sizeof h);
    }
}

static void fill(double *p, int n, double scale, unsigned seed)
{
    for (int i = 0; i < n; i++) p[i] = scale * sin(1.7 * (i + 1) + 0.3 * seed);
}

static void read_var(tfc_session *s, tfc_graph *g, const char *name, double *out, int64_t n)
{
    tfc_value *v = NULL;
    tfc_tensor *t = tfc_graph_find(g, name);
    CU_ASSERT_FATAL(t != NULL);
    CU_ASSERT_FATAL(tfc_session_read_variable(s, t, &v) == TFC_OK);
    CU_ASSERT_FATAL(tfc_value_numel(v) == n);
    memcpy(out, tfc_value_cdata(v), (size_t)n * sizeof *out);
    tfc_value_destroy(v);
}

static tfc_value *f64(int rank, const int64_t *dims, const double *data)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT64, tfc_shape_of(rank, dims), data, &v) == TFC_OK);
    return v;
}

/* Builds a layer (float64, lengths and initial states fed) in `mode`, runs it once, and
 * compares its sequences and last state with the reference. */
static void check_against_reference(int gru, tfc_rnn_mode mode)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64, tfc_shape_of(3, (int64_t[]){-1, T, F}));
    tfc_tensor *len = tfc_placeholder(g, "len", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h0 = tfc_placeholder(g, "h0", TFC_FLOAT64, tfc_shape_of(2, (int64_t[]){-1, H}));
    tfc_tensor *c0 = gru ? NULL : tfc_placeholder(g, "c0", TFC_FLOAT64, tfc_shape_of(2, (int64_t[]){-1, H}));
    tfc_rnn_opts o = {.return_sequences = 1, .initial_h = h0, .initial_c = c0, .lengths = len,
                      .mode = mode};
    tfc_tensor *seq = gru ? tfc_gru_layer(g, x, H, &o, "rnn") : tfc_lstm_layer(g, x, H, &o, "rnn");
    o.return_sequences = 0;
    tfc_tensor *last = gru ? tfc_gru_layer(g, x, H, &o, "rnn") : tfc_lstm_layer(g, x, H, &o, "rnn");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(tfc_graph_find(g, "rnn_1/kernel")), "rnn_1/kernel");
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    static double xd[B * T * F], hd[B * H], cd[B * H], ref_seq[B * T * H], ref_last[B * H];
    fill(xd, B * T * F, 1.0, 1), fill(hd, B * H, 0.5, 2), fill(cd, B * H, 0.5, 3);
    int32_t lens[B] = {T, 2, 0}; /* full, shorter, none: the last row keeps its initial state */
    tfc_value *fv[4] = {f64(3, (int64_t[]){B, T, F}, xd), NULL, f64(2, (int64_t[]){B, H}, hd),
                        gru ? NULL : f64(2, (int64_t[]){B, H}, cd)};
    tfc_value_from_data(TFC_INT32, tfc_shape_of(1, (int64_t[]){B}), lens, &fv[1]);
    tfc_tensor *feeds[4] = {x, len, h0, c0}, *fetch[2] = {seq, last};
    tfc_value *out[2] = {NULL, NULL};
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, gru ? 3 : 4, feeds, fv, 2, fetch, out, 0, NULL), TFC_OK);
    const char *prefix[2] = {"rnn", "rnn_1"};
    for (int layer = 0; layer < 2; layer++) {
        struct weights wt;
        char name[64];
        int G = gru ? 3 : 4;
        snprintf(name, sizeof name, "%s/kernel", prefix[layer]);
        read_var(s, g, name, wt.w, F * G * H);
        snprintf(name, sizeof name, "%s/recurrent_kernel", prefix[layer]);
        read_var(s, g, name, wt.u, H * G * H);
        snprintf(name, sizeof name, "%s/bias", prefix[layer]);
        read_var(s, g, name, wt.b, G * H);
        if (gru) {
            snprintf(name, sizeof name, "%s/recurrent_bias", prefix[layer]);
            read_var(s, g, name, wt.rb, G * H);
        }
        ref_layer(gru, &wt, xd, lens, hd, gru ? NULL : cd, ref_seq, ref_last);
        const double *got = tfc_value_cdata(out[layer]), *want = layer ? ref_last : ref_seq;
        int n = layer ? B * H : B * T * H, bad = 0;
        CU_ASSERT_EQUAL(tfc_value_numel(out[layer]), n);
        for (int i = 0; i < n; i++) bad += !(fabs(got[i] - want[i]) <= 1e-12);
        CU_ASSERT_EQUAL(bad, 0);
    }
    for (int k = 0; k < 4; k++) tfc_value_destroy(fv[k]);
    for (int k = 0; k < 2; k++) tfc_value_destroy(out[k]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_lstm_reference_unrolled(void) { check_against_reference(0, TFC_RNN_UNROLLED); }
static void test_lstm_reference_loop(void) { check_against_reference(0, TFC_RNN_WHILE_LOOP); }
static void test_gru_reference_unrolled(void) { check_against_reference(1, TFC_RNN_UNROLLED); }
static void test_gru_reference_loop(void) { check_against_reference(1, TFC_RNN_WHILE_LOOP); }

/* One graph of two layers "a" (last state) and "b" (sequences) in mode, run on fixed data:
 * out gets their values. The weights are seeded by the names, so both modes get the same. */
static void run_modes_case(int gru, tfc_rnn_mode mode, tfc_value **out)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){-1, 7, 9}));
    tfc_tensor *len = tfc_placeholder(g, "len", TFC_INT32, tfc_shape_of(1, (int64_t[]){16}));
    tfc_tensor *y[2];
    for (int k = 0; k < 2; k++) {
        tfc_rnn_opts o = {.return_sequences = k, .lengths = len, .mode = mode};
        y[k] = gru ? tfc_gru_layer(g, x, 12, &o, k ? "b" : "a")
                   : tfc_lstm_layer(g, x, 12, &o, k ? "b" : "a");
    }
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    static float xd[16 * 7 * 9];
    for (int i = 0; i < 16 * 7 * 9; i++) xd[i] = (float)sin(0.37 * i);
    int32_t lens[16];
    for (int b = 0; b < 16; b++) lens[b] = b % 9; /* 0 to 8: none, some, all steps */
    tfc_value *fv[2] = {test_f32(3, (int64_t[]){16, 7, 9}, xd), NULL};
    tfc_value_from_data(TFC_INT32, tfc_shape_of(1, (int64_t[]){16}), lens, &fv[1]);
    tfc_tensor *feeds[2] = {x, len};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, feeds, fv, 2, y, out, 0, NULL), TFC_OK);
    tfc_value_destroy(fv[0]), tfc_value_destroy(fv[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* float32, batch 16, 7 steps, lengths: the loop and the unrolled graph give the same bits. */
static void test_modes_same_bits(void)
{
    for (int gru = 0; gru < 2; gru++) {
        tfc_value *unrolled[2] = {0}, *loop[2] = {0};
        run_modes_case(gru, TFC_RNN_UNROLLED, unrolled);
        run_modes_case(gru, TFC_RNN_WHILE_LOOP, loop);
        for (int k = 0; k < 2; k++) {
            CU_ASSERT_FATAL(unrolled[k] && loop[k]);
            CU_ASSERT_EQUAL(tfc_value_numel(unrolled[k]), k ? 16 * 7 * 12 : 16 * 12);
            CU_ASSERT_EQUAL(tfc_value_numel(loop[k]), tfc_value_numel(unrolled[k]));
            CU_ASSERT(test_same_f32(tfc_value_cdata(unrolled[k]), tfc_value_cdata(loop[k]),
                                    (size_t)tfc_value_numel(loop[k]), 1e-5));
            double sum = 0; /* not a trivially equal pair of zeros */
            for (int64_t i = 0; i < tfc_value_numel(loop[k]); i++) sum += fabs(tfc_value_get(loop[k], i));
            CU_ASSERT(sum > 0.1);
            tfc_value_destroy(unrolled[k]), tfc_value_destroy(loop[k]);
        }
    }
}

/* d(sum of the sequences)/d(each weight) through the layer in either mode (the loop's
 * gradient is the reverse loop of graph/control_flow_grad.c), float64, with lengths (none when
 * dyn: the batch then known only when fed, the plan drops the gradient's sums to equal shapes),
 * against central differences of the reference. */
static void check_gradient(int gru, tfc_rnn_mode mode, int dyn)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT64,
                                    tfc_shape_of(3, (int64_t[]){dyn ? -1 : B, T, F}));
    tfc_tensor *len = tfc_placeholder(g, "len", TFC_INT32, tfc_shape_of(1, (int64_t[]){B}));
    tfc_rnn_opts o = {.return_sequences = 1, .lengths = dyn ? NULL : len, .mode = mode};
    tfc_tensor *y = gru ? tfc_gru_layer(g, x, H, &o, NULL) : tfc_lstm_layer(g, x, H, &o, NULL);
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0);
    const char *names[4] = {"kernel", "recurrent_kernel", "bias", "recurrent_bias"};
    int nv = gru ? 4 : 3, G = gru ? 3 : 4;
    tfc_tensor *vars[4], *dv[4];
    for (int k = 0; k < nv; k++) {
        char full[64];
        snprintf(full, sizeof full, "%s/%s", gru ? "gru" : "lstm", names[k]);
        vars[k] = tfc_graph_find(g, full);
        CU_ASSERT_FATAL(vars[k] != NULL);
    }
    if (tfc_gradients(g, 1, &loss, NULL, nv, vars, dv) != TFC_OK)
        fprintf(stderr, "gradients: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    static double xd[B * T * F], seq[B * T * H], last[B * H];
    fill(xd, B * T * F, 1.0, 4);
    int32_t lens[B] = {T, 3, 1}, all[B] = {T, T, T};
    tfc_value *fv[2] = {f64(3, (int64_t[]){B, T, F}, xd), NULL}, *out[4] = {0};
    tfc_value_from_data(TFC_INT32, tfc_shape_of(1, (int64_t[]){B}), lens, &fv[1]);
    tfc_tensor *feeds[2] = {x, len};
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, dyn ? 1 : 2, feeds, fv, nv, dv, out, 0, NULL), TFC_OK);
    struct weights wt = {{0}};
    double *p[4] = {wt.w, wt.u, wt.b, wt.rb};
    int64_t n[4] = {F * G * H, H * G * H, G * H, G * H};
    for (int k = 0; k < nv; k++) read_var(s, g, tfc_tensor_name(vars[k]), p[k], n[k]);
    int bad = 0;
    for (int k = 0; k < nv; k++)
        for (int64_t i = 0; i < n[k]; i += 7) { /* every 7th weight: every gate is hit */
            double keep = p[k][i], lo = 0, hi = 0, e = 1e-6;
            for (int side = 0; side < 2; side++) {
                p[k][i] = keep + (side ? e : -e);
                ref_layer(gru, &wt, xd, dyn ? all : lens, NULL, NULL, seq, last);
                double sum = 0;
                for (int j = 0; j < B * T * H; j++) sum += seq[j] * seq[j];
                *(side ? &hi : &lo) = sum;
            }
            p[k][i] = keep;
            double fd = (hi - lo) / (2 * e), got = tfc_value_get(out[k], i);
            if (!(fabs(fd - got) <= 1e-6 * fmax(1, fabs(fd)))) bad++;
        }
    CU_ASSERT_EQUAL(bad, 0);
    for (int k = 0; k < nv; k++) tfc_value_destroy(out[k]);
    tfc_value_destroy(fv[0]), tfc_value_destroy(fv[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_lstm_gradient(void) { check_gradient(0, TFC_RNN_UNROLLED, 0); }
static void test_gru_gradient(void) { check_gradient(1, TFC_RNN_UNROLLED, 0); }
static void test_lstm_gradient_loop(void) { check_gradient(0, TFC_RNN_WHILE_LOOP, 0); }
static void test_gru_gradient_loop(void) { check_gradient(1, TFC_RNN_WHILE_LOOP, 0); }
static void test_lstm_gradient_dynamic_batch(void) { check_gradient(0, TFC_RNN_UNROLLED, 1); }
static void test_gru_gradient_dynamic_batch(void) { check_gradient(1, TFC_RNN_UNROLLED, 1); }

/* One profiled run of the gradients of sum(y^2) through an LSTM of 8 steps over a fed batch in
 * mode: the gradients (kernel, recurrent_kernel, bias) into dv, the run's tasks by op. */
struct step_tasks { int sums, copies, matmuls, muls, all; };

static void run_step_tasks(tfc_rnn_mode mode, tfc_value **dvals, struct step_tasks *n)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){-1, 8, F}));
    tfc_rnn_opts o = {.mode = mode};
    tfc_tensor *y = tfc_lstm_layer(g, x, H, &o, NULL);
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_mul(g, y, y), 0, NULL, 0), *vars[3], *dv[3];
    CU_ASSERT_EQUAL_FATAL(tfc_trainable_variables(g, vars, 3), 3);
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &loss, NULL, 3, vars, dv), TFC_OK);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_profiling(s, 1) == TFC_OK);
    static float xd[5 * 8 * F];
    for (int i = 0; i < 5 * 8 * F; i++) xd[i] = (float)sin(0.61 * i);
    tfc_value *fv = test_f32(3, (int64_t[]){5, 8, F}, xd);
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &fv, 3, dv, dvals, 0, NULL), TFC_OK);
    const tfc_task_record *rec;
    int nr = tfc_session_last_records(s, &rec);
    *n = (struct step_tasks){0};
    for (int i = 0; i < nr; i++) {
        n->sums += !strcmp(rec[i].op, "sum_to_like");
        n->copies += !strcmp(rec[i].op, "reshape") || !strcmp(rec[i].op, "reshape_like");
        n->matmuls += !strcmp(rec[i].op, "matmul");
        n->muls += !strcmp(rec[i].op, "mul");
    }
    n->all = nr;
    tfc_value_destroy(fv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* The unrolled LSTM's training-gradient tasks: no sum_to_like (the cell's operands are all
 * [batch, units]: the sums reduce nothing, and the plan drops them), no per-step copies of the
 * step inputs (reshape forward, reshape_like backward: the steps read rows of the input
 * projection's splits), and the input projection in 4 chunks of 2 steps: 4 + 7 matmuls
 * forward (step 0 of a zero state has no recurrent one), 4 + 7 + 7 backward (the chunks'
 * kernel gradients, the recurrent kernel's and h's per step), where one projection made 23;
 * sibling products of the cell's backward fused. Its gradients are the while loop's (one projection over all steps) within float32's
 * summation-order error. */
static void test_lstm_step_tasks(void)
{
    tfc_value *unrolled[3] = {0}, *loop[3] = {0};
    struct step_tasks n, nl;
    run_step_tasks(TFC_RNN_UNROLLED, unrolled, &n);
    run_step_tasks(TFC_RNN_WHILE_LOOP, loop, &nl);
    CU_ASSERT_EQUAL(n.matmuls, 4 + 7 + 4 + 7 + 7);
    CU_ASSERT_EQUAL(n.sums, 0);
    CU_ASSERT(n.copies <= 1); /* the input's one flattening reshape */
    if (n.sums || n.copies > 1 || n.matmuls != 29)
        fprintf(stderr, "%d sum_to_like, %d reshape, %d matmul tasks\n", n.sums, n.copies, n.matmuls);
    /* backward, each step's cell multiplies dc by the gates: the products that feed the gate
     * gradients' concat have no tree to join, and the fusion pass runs one of them inside the
     * task of the tree that makes dc (a sibling; the other would take a ninth input): 7 lone
     * mul tasks for 7 steps, where each step had 2, and 117 tasks in all instead of 124 */
    CU_ASSERT_EQUAL(n.muls, 7);
    CU_ASSERT_EQUAL(n.all, 117);
    if (n.muls != 7 || n.all != 117) fprintf(stderr, "%d mul tasks, %d in all\n", n.muls, n.all);
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_FATAL(unrolled[k] && loop[k]);
        int64_t m = tfc_value_numel(loop[k]), bad = 0;
        CU_ASSERT_EQUAL(tfc_value_numel(unrolled[k]), m);
        for (int64_t i = 0; i < m; i++) {
            double a = tfc_value_get(unrolled[k], i), b = tfc_value_get(loop[k], i);
            bad += !(fabs(a - b) <= 1e-4 * fmax(1, fabs(b)));
        }
        CU_ASSERT_EQUAL(bad, 0);
        tfc_value_destroy(unrolled[k]), tfc_value_destroy(loop[k]);
    }
}

static int fails_with(tfc_graph *g, tfc_status want, const char *text)
{
    int ok = tfc_graph_status(g) == want && strstr(tfc_graph_errmsg(g), text) != NULL;
    if (!ok) fprintf(stderr, "got %d '%s', want %d '%s'\n", tfc_graph_status(g),
                     tfc_graph_errmsg(g), want, text);
    tfc_graph_destroy(g);
    return ok;
}

/* The variables (names, shapes, trainable) and the errors, each naming the layer. */
static void test_variables_and_errors(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){-1, 28, 28}));
    tfc_tensor *y = tfc_lstm_layer(g, x, 128, NULL, NULL);
    tfc_tensor *z = tfc_gru_layer(g, x, 16, NULL, "enc");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_shape ys = tfc_tensor_shape(y), zs = tfc_tensor_shape(z);
    CU_ASSERT(ys.rank == 2 && ys.dims[0] == -1 && ys.dims[1] == 128);
    CU_ASSERT(zs.rank == 2 && zs.dims[1] == 16);
    const char *names[7] = {"lstm/kernel", "lstm/recurrent_kernel", "lstm/bias", "enc/kernel",
                            "enc/recurrent_kernel", "enc/bias", "enc/recurrent_bias"};
    int64_t d0[7] = {28, 128, 512, 28, 16, 48, 48}, d1[7] = {512, 512, 0, 48, 48, 0, 0};
    tfc_tensor *tv[8];
    CU_ASSERT_EQUAL(tfc_trainable_variables(g, tv, 8), 7);
    for (int k = 0; k < 7; k++) {
        tfc_tensor *v = tfc_graph_find(g, names[k]);
        CU_ASSERT_FATAL(v != NULL);
        tfc_shape s = tfc_tensor_shape(v);
        CU_ASSERT(s.dims[0] == d0[k] && (d1[k] ? s.rank == 2 && s.dims[1] == d1[k] : s.rank == 1));
        CU_ASSERT(tfc_variable_trainable(v));
    }
    tfc_graph_destroy(g);
    struct { int gru; int64_t units; int rank; enum tfc_dtype dt; int bad_opt; tfc_status st;
             const char *text; } cases[] = {
        {0, 0, 3, TFC_FLOAT32, 0, TFC_ERR_INVALID_ARGUMENT, "lstm 'r': units is 0"},
        {1, 4, 2, TFC_FLOAT32, 0, TFC_ERR_SHAPE, "gru 'r': input 'x' has shape"},
        {0, 4, 3, TFC_INT32, 0, TFC_ERR_DTYPE, "lstm 'r': input 'x' is int32"},
        {1, 4, 3, TFC_FLOAT32, 1, TFC_ERR_INVALID_ARGUMENT, "gru 'r': initial_c is given"},
        {0, 4, 3, TFC_FLOAT32, 2, TFC_ERR_SHAPE, "lstm 'r': lengths 'len' is float32"},
        {0, 4, 3, TFC_FLOAT32, 3, TFC_ERR_SHAPE, "lstm 'r': initial_h 'h' is float32 [2, 5]"},
        {0, 4, 3, TFC_FLOAT32, 4, TFC_ERR_INVALID_ARGUMENT, "lstm 'r': unknown mode 7"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tfc_graph_create(&g);
        int64_t dims[3] = {2, 3, 4};
        x = tfc_placeholder(g, "x", cases[c].dt, tfc_shape_of(cases[c].rank, dims));
        tfc_rnn_opts o = {0};
        if (cases[c].bad_opt == 1) o.initial_c = tfc_placeholder(g, "c", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){2, 4}));
        if (cases[c].bad_opt == 2) o.lengths = tfc_placeholder(g, "len", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){2}));
        if (cases[c].bad_opt == 3) o.initial_h = tfc_placeholder(g, "h", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){2, 5}));
        if (cases[c].bad_opt == 4) o.mode = (tfc_rnn_mode)7;
        y = cases[c].gru ? tfc_gru_layer(g, x, cases[c].units, &o, "r")
                         : tfc_lstm_layer(g, x, cases[c].units, &o, "r");
        CU_ASSERT_PTR_NULL(y);
        CU_ASSERT(fails_with(g, cases[c].st, cases[c].text));
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("rnn", test_ctx_open, test_ctx_close);
    TEST_ADD(test_lstm_reference_unrolled);
    TEST_ADD(test_lstm_reference_loop);
    TEST_ADD(test_gru_reference_unrolled);
    TEST_ADD(test_gru_reference_loop);
    TEST_ADD(test_modes_same_bits);
    TEST_ADD(test_lstm_gradient);
    TEST_ADD(test_gru_gradient);
    TEST_ADD(test_lstm_gradient_loop);
    TEST_ADD(test_gru_gradient_loop);
    TEST_ADD(test_lstm_gradient_dynamic_batch);
    TEST_ADD(test_gru_gradient_dynamic_batch);
    TEST_ADD(test_lstm_step_tasks);
    TEST_ADD(test_variables_and_errors);
    return test_main();
}
