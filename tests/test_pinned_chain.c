/* test_pinned_chain.c: a plan whose steps form a chain, on 2 or more CPU workers and no
 * device, runs as one chain task pinned to one worker (tfc_pin_chain, then tfc_chain_pinned:
 * its per-run intermediates in the worker's scratch). Checked against the same plan's tasks
 * without TFC_PASS_PIN_CHAINS: the same bits for an MLP's inference over runs with different
 * feeds, a fetched intermediate (a buffer of the chain task, not scratch), a variable updated
 * by the chain, a kernel error naming its node inside the chain (and the next run fine), a
 * plan whose intermediates pass 8 MiB keeping its tasks, a chain of more buffers than a task
 * holds inline, and a profiled run's records of the steps inside the chain (a matmul and its
 * bias add one step there). Elsewhere (one CPU
 * worker, or a device) the plans keep one task per step, which the counts then check. */
#include <math.h>
#include <starpu.h>
#include "testutil.h"

static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static const unsigned NO_PIN = TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS;

static int same_bits(const tfc_value *a, const tfc_value *b)
{
    return a && b && tfc_value_nbytes(a) == tfc_value_nbytes(b) &&
           !memcmp(tfc_value_cdata(a), tfc_value_cdata(b), tfc_value_nbytes(a));
}

/* A session with profiling on and these passes. */
static tfc_session *session(tfc_graph *g, unsigned passes)
{
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_passes(s, passes) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_set_profiling(s, 1) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    return s;
}

/* The last run's task count; *chains: of them, chain tasks; *worker: the one worker that ran
 * them all, or -1. */
static int last_tasks(tfc_session *s, int *chains, int *worker)
{
    const tfc_task_record *rec = NULL;
    int n = tfc_session_last_records(s, &rec);
    *chains = 0;
    *worker = n > 0 ? rec[0].worker : -1;
    for (int i = 0; i < n; i++) {
        *chains += !strcmp(rec[i].op, "chain");
        if (rec[i].worker != *worker) *worker = -1;
    }
    return n;
}

/* x [-1, 48] -> dense 32 relu -> dense 10 -> softmax (5 steps: matmul, bias + relu, matmul,
 * bias add, softmax), the weights constants. */
static tfc_graph *mlp(tfc_tensor **x, tfc_tensor **h, tfc_tensor **p)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 48));
    tfc_tensor *w[4];
    const int64_t dims[4][2] = {{48, 32}, {1, 32}, {32, 10}, {1, 10}};
    for (int i = 0; i < 4; i++) {
        tfc_value *v = test_filled(S2(dims[i][0], dims[i][1]), 11 + (unsigned)i);
        w[i] = tfc_constant(g, NULL, v);
        tfc_value_destroy(v);
    }
    *h = tfc_relu(g, tfc_add(g, tfc_matmul(g, *x, w[0], 0, 0), w[1]));
    *p = tfc_softmax(g, tfc_add(g, tfc_matmul(g, *h, w[2], 0, 0), w[3]), -1);
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    return g;
}

/* Three runs (feeds a, b, a: the scratch holds the last run's layers) give the unpinned
 * plan's bits; pinned, each run is one chain task, on one CPU worker. */
static void test_mlp_runs(void)
{
    tfc_tensor *x, *h, *p;
    tfc_graph *g = mlp(&x, &h, &p);
    tfc_value *xs[2] = {test_filled(S2(8, 48), 21), test_filled(S2(8, 48), 22)};
    tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
    for (int r = 0; r < 3; r++) {
        tfc_value *got = NULL, *want = NULL;
        CU_ASSERT_FATAL(tfc_session_run(pinned, 1, &x, &xs[r & 1], 1, &p, &got, 0, NULL) ==
                        TFC_OK);
        CU_ASSERT_FATAL(tfc_session_run(tasks, 1, &x, &xs[r & 1], 1, &p, &want, 0, NULL) ==
                        TFC_OK);
        int chains, worker, m = last_tasks(tasks, &chains, &worker);
        int n = last_tasks(pinned, &chains, &worker);
        CU_ASSERT(same_bits(got, want));
        CU_ASSERT_EQUAL(m, 5);
        CU_ASSERT_EQUAL(n, test_chains_here() ? 1 : 5);
        CU_ASSERT_EQUAL(chains, test_chains_here() ? 1 : 0);
        if (test_chains_here())
            CU_ASSERT(worker >= 0 && starpu_worker_get_type(worker) == STARPU_CPU_WORKER);
        tfc_value_destroy(got), tfc_value_destroy(want);
    }
    tfc_session_destroy(pinned), tfc_session_destroy(tasks);
    tfc_value_destroy(xs[0]), tfc_value_destroy(xs[1]);
    tfc_graph_destroy(g);
}

/* Fetching the hidden layer too: it is a buffer of the chain task, and both fetches are the
 * unpinned plan's. */
static void test_fetched_intermediate(void)
{
    tfc_tensor *x, *h, *p;
    tfc_graph *g = mlp(&x, &h, &p);
    tfc_value *xv = test_filled(S2(5, 48), 31), *got[2] = {NULL}, *want[2] = {NULL};
    tfc_tensor *fetches[2] = {h, p};
    tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
    CU_ASSERT_FATAL(tfc_session_run(pinned, 1, &x, &xv, 2, fetches, got, 0, NULL) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(tasks, 1, &x, &xv, 2, fetches, want, 0, NULL) == TFC_OK);
    int chains, worker;
    CU_ASSERT_EQUAL(last_tasks(pinned, &chains, &worker), test_chains_here() ? 1 : 5);
    CU_ASSERT(same_bits(got[0], want[0]));
    CU_ASSERT(same_bits(got[1], want[1]));
    for (int i = 0; i < 2; i++) tfc_value_destroy(got[i]), tfc_value_destroy(want[i]);
    tfc_session_destroy(pinned), tfc_session_destroy(tasks);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* v += relu(x w) then y = v * 2, three runs: the variable (a buffer the chain reads and
 * writes) holds the same sums as without the pass, and y too. */
static void test_variable_update(void)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(4, 16));
    tfc_value *wv = test_filled(S2(16, 8), 41);
    tfc_tensor *w = tfc_constant(g, NULL, wv);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, S2(4, 8), tfc_init_zeros());
    tfc_tensor *up = tfc_assign_add(g, v, tfc_relu(g, tfc_matmul(g, x, w, 0, 0)));
    tfc_tensor *y = tfc_mul(g, up, tfc_scalar(g, TFC_FLOAT32, 2.0));
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    tfc_value *xv = test_filled(S2(4, 16), 42);
    tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
    for (int r = 0; r < 3; r++) {
        tfc_value *got = NULL, *want = NULL;
        CU_ASSERT_FATAL(tfc_session_run(pinned, 1, &x, &xv, 1, &y, &got, 0, NULL) == TFC_OK);
        CU_ASSERT_FATAL(tfc_session_run(tasks, 1, &x, &xv, 1, &y, &want, 0, NULL) == TFC_OK);
        int chains, worker, n = last_tasks(pinned, &chains, &worker);
        int m = last_tasks(tasks, &chains, &worker);
        CU_ASSERT(same_bits(got, want));
        CU_ASSERT_EQUAL(n, test_chains_here() ? 1 : m); /* the update inside the chain task */
        CU_ASSERT(m >= 3);
        tfc_value_destroy(got), tfc_value_destroy(want);
    }
    tfc_value *vg = NULL, *vw = NULL;
    CU_ASSERT_FATAL(tfc_session_run(pinned, 0, NULL, NULL, 1, &v, &vg, 0, NULL) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(tasks, 0, NULL, NULL, 1, &v, &vw, 0, NULL) == TFC_OK);
    CU_ASSERT(same_bits(vg, vw));
    CU_ASSERT(tfc_value_get(vg, 0) != 0 || tfc_value_get(vg, 1) != 0); /* it did add */
    tfc_value_destroy(vg), tfc_value_destroy(vw);
    tfc_session_destroy(pinned), tfc_session_destroy(tasks);
    tfc_value_destroy(xv), tfc_value_destroy(wv);
    tfc_graph_destroy(g);
}

/* An integer division by zero in the chain's third step fails the run naming that node;
 * the next run (no zero) succeeds with the unpinned plan's bits. */
static void test_error_inside(void)
{
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(6, 16));
    tfc_tensor *d = tfc_placeholder(g, "d", TFC_INT32, tfc_shape_of(1, (int64_t[]){8}));
    tfc_value *wv = test_filled(S2(16, 8), 51);
    tfc_tensor *w = tfc_constant(g, NULL, wv);
    tfc_tensor *q = tfc_div(g, tfc_cast(g, tfc_matmul(g, x, w, 0, 0), TFC_INT32), d);
    tfc_tensor_set_name(q, "quotient");
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    int32_t div[2][8] = {{3, 1, 2, 0, 5, 1, 1, 2}, {3, 1, 2, 7, 5, 1, 1, 2}};
    tfc_value *xv = test_filled(S2(6, 16), 52), *dv[2];
    for (int k = 0; k < 2; k++)
        CU_ASSERT_FATAL(tfc_value_from_data(TFC_INT32, tfc_shape_of(1, (int64_t[]){8}), div[k],
                                            &dv[k]) == TFC_OK);
    tfc_tensor *feeds[2] = {x, d};
    tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
    tfc_value *out = NULL, *want = NULL;
    tfc_status st = tfc_session_run(pinned, 2, feeds, (tfc_value *[]){xv, dv[0]}, 1, &q, &out, 0,
                                    NULL);
    const char *msg = tfc_session_errmsg(pinned);
    CU_ASSERT(st != TFC_OK && out == NULL);
    CU_ASSERT(strstr(msg, "division by zero") && strstr(msg, "quotient"));
    if (st == TFC_OK || !strstr(msg, "quotient")) fprintf(stderr, "error: '%s'\n", msg);
    CU_ASSERT_FATAL(tfc_session_run(pinned, 2, feeds, (tfc_value *[]){xv, dv[1]}, 1, &q, &out, 0,
                                    NULL) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(tasks, 2, feeds, (tfc_value *[]){xv, dv[1]}, 1, &q, &want, 0,
                                    NULL) == TFC_OK);
    CU_ASSERT(same_bits(out, want));
    int chains, worker;
    CU_ASSERT_EQUAL(last_tasks(pinned, &chains, &worker), test_chains_here() ? 1 : 3);
    tfc_value_destroy(out), tfc_value_destroy(want), tfc_value_destroy(xv);
    tfc_value_destroy(dv[0]), tfc_value_destroy(dv[1]), tfc_value_destroy(wv);
    tfc_session_destroy(pinned), tfc_session_destroy(tasks);
    tfc_graph_destroy(g);
}

/* Six dense layers (x [3, 24] -> 24 units each, bias + tanh): the chain task has 14 buffers, more
 * than a StarPU task holds inline (STARPU_NMAXBUFS), and gives the unpinned plan's bits. */
static void test_many_buffers(void)
{
    enum { LAYERS = 6 };
    tfc_graph *g = NULL;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(3, 24)), *y = x;
    for (int l = 0; l < LAYERS; l++) {
        tfc_value *wv = test_filled(S2(24, 24), 71 + 2 * (unsigned)l);
        tfc_value *bv = test_filled(S2(1, 24), 72 + 2 * (unsigned)l);
        y = tfc_tanh(g, tfc_add(g, tfc_matmul(g, y, tfc_constant(g, NULL, wv), 0, 0),
                                tfc_constant(g, NULL, bv)));
        tfc_value_destroy(wv), tfc_value_destroy(bv);
    }
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
    CU_ASSERT_FATAL(2 * LAYERS + 2 > STARPU_NMAXBUFS);
    tfc_value *xv = test_filled(S2(3, 24), 70), *got = NULL, *want = NULL;
    tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
    CU_ASSERT_FATAL(tfc_session_run(pinned, 1, &x, &xv, 1, &y, &got, 0, NULL) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(tasks, 1, &x, &xv, 1, &y, &want, 0, NULL) == TFC_OK);
    int chains, worker, n = last_tasks(pinned, &chains, &worker);
    CU_ASSERT(same_bits(got, want));
    CU_ASSERT_EQUAL(n, test_chains_here() ? 1 : 2 * LAYERS);
    tfc_value_destroy(got), tfc_value_destroy(want), tfc_value_destroy(xv);
    tfc_session_destroy(pinned), tfc_session_destroy(tasks);
    tfc_graph_destroy(g);
}

/* x [rows, 64] w [64, 1024] -> relu -> sum of all: the product and the ReLU are rows x 4 KiB
 * each, not fetched. At 512 rows (4 MiB in all) the plan is one chain task; at 1536 (12 MiB,
 * past the 8 MiB a worker may keep as scratch) it keeps its 3 tasks, pinned to one worker.
 * Both give the unpinned plan's bits. */
static void test_scratch_cap(void)
{
    const int64_t rows[2] = {512, 1536};
    for (int k = 0; k < 2; k++) {
        tfc_graph *g = NULL;
        CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
        tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(rows[k], 64));
        tfc_value *wv = test_filled(S2(64, 1024), 61);
        tfc_tensor *w = tfc_constant(g, NULL, wv);
        tfc_tensor *total = tfc_reduce_sum(g, tfc_relu(g, tfc_matmul(g, x, w, 0, 0)), 2,
                                           (int64_t[]){0, 1}, 0);
        CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
        tfc_value *xv = test_filled(S2(rows[k], 64), 62), *got = NULL, *want = NULL;
        setenv("TFC_ROW_SPLIT_MIN", "off", 1); /* (a sum over the rows is not split anyway) */
        tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
        CU_ASSERT_FATAL(tfc_session_run(pinned, 1, &x, &xv, 1, &total, &got, 0, NULL) == TFC_OK);
        CU_ASSERT_FATAL(tfc_session_run(tasks, 1, &x, &xv, 1, &total, &want, 0, NULL) == TFC_OK);
        unsetenv("TFC_ROW_SPLIT_MIN");
        int chains, worker, n = last_tasks(pinned, &chains, &worker);
        CU_ASSERT(same_bits(got, want));
        CU_ASSERT_EQUAL(n, test_chains_here() && k == 0 ? 1 : 3);
        CU_ASSERT_EQUAL(chains, test_chains_here() && k == 0 ? 1 : 0);
        if (test_chains_here()) CU_ASSERT(worker >= 0); /* pinned either way */
        if (n != (test_chains_here() && k == 0 ? 1 : 3))
            fprintf(stderr, "%lld rows: %d tasks, %d chains\n", (long long)rows[k], n, chains);
        tfc_value_destroy(got), tfc_value_destroy(want), tfc_value_destroy(xv);
        tfc_value_destroy(wv);
        tfc_session_destroy(pinned), tfc_session_destroy(tasks);
        tfc_graph_destroy(g);
    }
}

/* A profiled pinned run keeps a record per step inside its chain task: the unpinned plan's
 * steps (node and op) in order, on the chain's worker, one after another within the chain's
 * times; the report lists them. A run of the unpinned plan has no step records. */
static void test_step_records(void)
{
    tfc_tensor *x, *h, *p;
    tfc_graph *g = mlp(&x, &h, &p);
    tfc_value *xv = test_filled(S2(8, 48), 71), *got = NULL, *want = NULL;
    tfc_session *pinned = session(g, TFC_PASS_ALL), *tasks = session(g, NO_PIN);
    for (int r = 0; r < 2; r++) { /* the second run: its instance's chain points at new times */
        CU_ASSERT_FATAL(tfc_session_run(pinned, 1, &x, &xv, 1, &p, &got, 0, NULL) == TFC_OK);
        tfc_value_destroy(got);
    }
    CU_ASSERT_FATAL(tfc_session_run(tasks, 1, &x, &xv, 1, &p, &want, 0, NULL) == TFC_OK);
    tfc_run_summary ps, ts;
    CU_ASSERT_FATAL(tfc_session_last_summary(pinned, &ps) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_last_summary(tasks, &ts) == TFC_OK);
    CU_ASSERT_EQUAL(ts.n_steps, 0);
    /* each matmul and the bias add after it are one step (sched/chain_epilogue.c) */
    CU_ASSERT_EQUAL_FATAL(ps.n_steps, test_chains_here() ? ts.n_tasks - 2 : 0);
    for (int k = 0, t = 0; k < ps.n_steps; k++, t++) {
        const tfc_task_record *st = &ps.steps[k], *chain = &ps.tasks[0];
        CU_ASSERT_STRING_EQUAL(st->node, ts.tasks[t].node);
        int merged = !strcmp(ts.tasks[t].op, "matmul");
        CU_ASSERT_STRING_EQUAL(st->op, merged ? "matmul+bias" : ts.tasks[t].op);
        t += merged;
        CU_ASSERT_EQUAL(st->worker, chain->worker);
        CU_ASSERT_STRING_EQUAL(st->worker_name, chain->worker_name);
        CU_ASSERT(st->start_us >= chain->start_us - 1 && st->end_us <= chain->end_us + 1);
        CU_ASSERT(st->end_us >= st->start_us);
        if (k) CU_ASSERT(st->start_us >= ps.steps[k - 1].end_us);
        CU_ASSERT(isnan(st->predicted_us));
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(tfc_session_write_report(pinned, f) == TFC_OK);
    fclose(f);
    CU_ASSERT_EQUAL(strstr(text, "steps inside the chain tasks") != NULL, test_chains_here());
    free(text);
    tfc_value_destroy(want), tfc_value_destroy(xv);
    tfc_session_destroy(pinned), tfc_session_destroy(tasks);
    tfc_graph_destroy(g);
}

int main(void)
{
    unsetenv("TFC_ROW_SPLIT_MIN");
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("pinned_chain", test_ctx_open, test_ctx_close);
    TEST_ADD(test_mlp_runs);
    TEST_ADD(test_fetched_intermediate);
    TEST_ADD(test_variable_update);
    TEST_ADD(test_error_inside);
    TEST_ADD(test_scratch_cap);
    TEST_ADD(test_many_buffers);
    TEST_ADD(test_step_records);
    return test_main();
}
