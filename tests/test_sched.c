/* test_sched.c: scheduling hints. Priorities: critical-path ranks on known graphs (a long chain
 * beside wide independent work, write-after-read edges, the fetch copy at the end) and their
 * mapping into the scheduler's priority range ([0, 0] gives 0), TFC_PRIORITIES, calibrated
 * history-based costs where a policy reads models. Placement:
 * device strings and scopes, a hard "cpu" hint keeping every task of its nodes on CPU workers
 * while an OpenCL worker exists (STARPU_OPENCL_ON_CPUS=1 unless the caller set it), hard and
 * soft "opencl" hints on ops without an OpenCL codelet, a one-device hint honoured through the
 * worker list, and, with StarPU restarted without OpenCL workers, the "no worker" error. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "../sched/session_priv.h"
#include "../sched/testing.h"

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }

static struct plan *build(tfc_graph *g, int nf, tfc_tensor **ft, tfc_value **fv, int nfetch,
                          tfc_tensor **fetch, int ntarget, tfc_tensor **targets,
                          const struct plan_options *opt)
{
    tfc_status st;
    char msg[TFC_MSG_LEN];
    struct plan *p = tfc_plan_build(g, nf, ft, fv, nfetch, fetch, ntarget, targets, opt, &st, msg);
    if (!p) fprintf(stderr, "plan: %s\n", msg);
    return p;
}

static int step_of(const struct plan *p, const tfc_tensor *t)
{
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].node == t->node->id && p->steps[i].cl != &tfc_cl_hop) return i;
    return -1;
}

static int has_text(const char *s, const char *sub)
{
    if (!strstr(s, sub)) {
        fprintf(stderr, "\"%s\" lacks \"%s\"\n", s, sub);
        return 0;
    }
    return 1;
}

/* ---- priorities ------------------------------------------------------------------------ */

enum { WIDE = 6, CHAIN = 8 };

/* x -> WIDE independent negations (built first, so submitted first), and x -> a chain of
 * CHAIN negations; every op reads and writes [1024] float32, so all costs are equal. targets
 * [WIDE + 1]: the leaves and the chain's last op. */
static void chain_beside_wide(tfc_graph *g, tfc_tensor **x, tfc_tensor **leaves,
                              tfc_tensor **chain, tfc_tensor **targets)
{
    *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(1024));
    for (int i = 0; i < WIDE; i++) targets[i] = leaves[i] = tfc_neg(g, *x);
    tfc_tensor *c = *x;
    for (int k = 0; k < CHAIN; k++) chain[k] = c = tfc_neg(g, c);
    targets[WIDE] = chain[CHAIN - 1];
}

static void test_ranks_chain_beside_wide(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x, *leaves[WIDE], *chain[CHAIN], *targets[WIDE + 1];
    chain_beside_wide(g, &x, leaves, chain, targets);
    tfc_value *xv;
    tfc_value_create(TFC_FLOAT32, S1(1024), &xv);
    struct plan_options opt = {.priorities = 1, .prio_min = -100, .prio_max = 100};
    struct plan *p = build(g, 1, &x, &xv, 0, NULL, WIDE + 1, targets, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(p->n_steps, WIDE + CHAIN);
    CU_ASSERT_EQUAL(step_of(p, leaves[0]), 0); /* the wide work is submitted first */
    const struct step *head = &p->steps[step_of(p, chain[0])];
    const struct step *tail = &p->steps[step_of(p, chain[CHAIN - 1])];
    double cost = head->cost;
    CU_ASSERT(cost > 2.0); /* the analytic cost: 2 us + bytes / 10 GB/s + flops / 5 GFLOP/s */
    CU_ASSERT_DOUBLE_EQUAL(cost, 2.0 + 8192 / 1e4 + 1024 / 5e3, 1e-9);
    /* the chain: ranks count the steps left, the head has the whole chain */
    CU_ASSERT_DOUBLE_EQUAL(head->rank, CHAIN * cost, 1e-9);
    for (int k = 1; k < CHAIN; k++) {
        const struct step *a = &p->steps[step_of(p, chain[k - 1])];
        const struct step *b = &p->steps[step_of(p, chain[k])];
        CU_ASSERT(a->rank > b->rank);
        CU_ASSERT(a->priority >= b->priority);
    }
    /* equal-cost independent leaves: equal ranks and priorities, below the chain head's */
    for (int i = 0; i < WIDE; i++) {
        const struct step *l = &p->steps[step_of(p, leaves[i])];
        CU_ASSERT_DOUBLE_EQUAL(l->rank, cost, 1e-9);
        CU_ASSERT_EQUAL(l->priority, p->steps[step_of(p, leaves[0])].priority);
        CU_ASSERT(l->priority < head->priority);
        CU_ASSERT_EQUAL(l->priority, tail->priority); /* same rank as the chain's last step */
    }
    /* mapping: the highest rank gets the maximum, ranks map onto [0, max] (a range holding 0:
     * the least critical get the cheap priority 0) */
    CU_ASSERT_EQUAL(head->priority, 100);
    for (int i = 0; i < p->n_steps; i++)
        CU_ASSERT(p->steps[i].priority >= 0 && p->steps[i].priority <= 100);
    CU_ASSERT_EQUAL(p->steps[step_of(p, leaves[0])].priority, (int)nearbyint(100.0 / CHAIN));
    tfc_plan_free(p);

    /* the chain alone: every step waits for the one before, never two are ready at once, so
     * priorities would order nothing: all 0 (the ranks stay) */
    p = build(g, 1, &x, &xv, 0, NULL, 1, &chain[CHAIN - 1], &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->n_steps, CHAIN);
    for (int i = 0; i < p->n_steps; i++) CU_ASSERT_EQUAL(p->steps[i].priority, 0);
    CU_ASSERT_DOUBLE_EQUAL(p->steps[0].rank, CHAIN * cost, 1e-9);
    tfc_plan_free(p);

    /* the full int range (prio, lws, dmdas): no overflow, the same order */
    opt.prio_min = INT_MIN;
    opt.prio_max = INT_MAX;
    p = build(g, 1, &x, &xv, 0, NULL, WIDE + 1, targets, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->steps[step_of(p, chain[0])].priority, INT_MAX);
    CU_ASSERT(p->steps[step_of(p, chain[1])].priority < INT_MAX);
    CU_ASSERT(p->steps[step_of(p, leaves[0])].priority < p->steps[step_of(p, chain[1])].priority);
    CU_ASSERT(p->steps[step_of(p, leaves[0])].priority > 0);
    tfc_plan_free(p);

    /* [0, 0] (eager, dmda, heteroprio), priorities off, and no options: all 0, ranks kept */
    struct plan_options flat[3] = {{.priorities = 1},
                                   {.priorities = 0, .prio_min = -5, .prio_max = 5}};
    for (int k = 0; k < 3; k++) {
        p = build(g, 1, &x, &xv, 0, NULL, WIDE + 1, targets, k < 2 ? &flat[k] : NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        for (int i = 0; i < p->n_steps; i++) CU_ASSERT_EQUAL(p->steps[i].priority, 0);
        CU_ASSERT_DOUBLE_EQUAL(p->steps[step_of(p, chain[0])].rank, CHAIN * cost, 1e-9);
        tfc_plan_free(p);
    }
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* The steps a run waits for (tfc_plan_mark_sinks): those no later step waits for. The chain's
 * last step (the chain's others end before it starts) and every independent leaf; a reader of
 * a variable that a later step updates (write after read) does not signal, the update does. */
static void test_sinks(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x, *leaves[WIDE], *chain[CHAIN], *targets[WIDE + 1];
    chain_beside_wide(g, &x, leaves, chain, targets);
    tfc_value *xv;
    tfc_value_create(TFC_FLOAT32, S1(1024), &xv);
    struct plan_options opt = {.priorities = 1, .prio_min = -100, .prio_max = 100};
    struct plan *p = build(g, 1, &x, &xv, 0, NULL, WIDE + 1, targets, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int k = 0; k < CHAIN; k++)
        CU_ASSERT_EQUAL(p->steps[step_of(p, chain[k])].signals, k == CHAIN - 1);
    for (int i = 0; i < WIDE; i++) CU_ASSERT_EQUAL(p->steps[step_of(p, leaves[i])].signals, 1);
    CU_ASSERT_EQUAL(p->n_signals, WIDE + 1);
    tfc_plan_free(p);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);

    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, S1(16), tfc_init_zeros());
    tfc_tensor *r = tfc_neg(g, v);
    tfc_tensor *u = tfc_assign_add(g, v, tfc_fill(g, S1(16), TFC_FLOAT32, 1.0));
    tfc_tensor *y = tfc_exp(g, r);
    p = build(g, 0, NULL, NULL, 1, &y, 1, &u, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->steps[step_of(p, r)].signals, 0); /* the update and exp wait for it */
    CU_ASSERT_EQUAL(p->steps[step_of(p, u)].signals, 1);
    CU_ASSERT_EQUAL(p->steps[step_of(p, y)].signals, 1);
    tfc_plan_free(p);
    tfc_graph_destroy(g);
}

/* A reader of a variable before its update runs first (write after read, as StarPU orders
 * them), so the reader's rank includes the update; a fetched value adds its host copy. */
static void test_ranks_war_and_fetch(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, S1(65536), tfc_init_zeros());
    tfc_tensor *r = tfc_neg(g, v);
    tfc_tensor *u = tfc_assign_add(g, v, tfc_fill(g, S1(65536), TFC_FLOAT32, 1.0));
    tfc_tensor *y = tfc_exp(g, r);
    struct plan_options opt = {.priorities = 1, .prio_min = -10, .prio_max = 10};
    struct plan *p = build(g, 0, NULL, NULL, 1, &y, 1, &u, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const struct step *rs = &p->steps[step_of(p, r)], *us = &p->steps[step_of(p, u)];
    const struct step *ys = &p->steps[step_of(p, y)];
    double copy = 65536 * 4 / 1e4; /* the fetch of y: 10 GB/s */
    CU_ASSERT_DOUBLE_EQUAL(ys->rank, ys->cost + copy, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(us->rank, us->cost, 1e-9);
    /* neg(v) precedes the update of v and the exp: it waits for neither, both wait for it */
    double want = rs->cost + (us->rank > ys->rank ? us->rank : ys->rank);
    CU_ASSERT_DOUBLE_EQUAL(rs->rank, want, 1e-9);
    CU_ASSERT(rs->priority == 10);
    tfc_plan_free(p);
    tfc_graph_destroy(g);
}

/* Sessions take the running scheduler's range; TFC_PRIORITIES=0 turns priorities off and a
 * bad value fails session creation. */
static void test_session_priorities(void)
{
    tfc_ctx_info info;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_info_get(test_ctx, &info), TFC_OK);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x, *leaves[WIDE], *chain[CHAIN], *targets[WIDE + 1];
    chain_beside_wide(g, &x, leaves, chain, targets);
    float xd[1024];
    for (int i = 0; i < 1024; i++) xd[i] = (float)i;
    tfc_value *xv = test_f32(1, (int64_t[]){1024}, xd), *yv = NULL;
    /* one step per node: the row split (1024 rows of one element, on 2 or more CPU workers
     * alone) would run each block's steps as one chain task */
    setenv("TFC_ROW_SPLIT_MIN", "off", 1);
    for (int off = 0; off <= 1; off++) {
        if (off) setenv("TFC_PRIORITIES", "0", 1);
        tfc_session *s;
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        tfc_session_set_passes(s, 0); /* the wide leaves are identical: keep them apart */
        CU_ASSERT_EQUAL(s->opt.prio_min, info.min_priority);
        CU_ASSERT_EQUAL(s->opt.prio_max, info.max_priority);
        CU_ASSERT_EQUAL(s->opt.priorities, !off);
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &chain[CHAIN - 1], &yv, WIDE,
                                              targets), TFC_OK);
        CU_ASSERT_EQUAL(tfc_value_get(yv, 5), 5.0); /* an even number of negations */
        tfc_value_destroy(yv);
        struct plan *p = s->mru;
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        int lo = INT_MAX, hi = INT_MIN;
        for (int i = 0; i < p->n_steps; i++) {
            int pr = p->steps[i].priority;
            lo = pr < lo ? pr : lo;
            hi = pr > hi ? pr : hi;
        }
        CU_ASSERT(lo >= info.min_priority && hi <= info.max_priority);
        if (off || info.min_priority == info.max_priority) {
            CU_ASSERT(lo == 0 && hi == 0);
        } else {
            CU_ASSERT_EQUAL(p->steps[step_of(p, chain[0])].priority, info.max_priority);
            CU_ASSERT(p->steps[step_of(p, leaves[0])].priority < info.max_priority);
        }
        /* the testing switch agrees (a plan of the chain and one leaf: not a chain) */
        tfc_session_set_priorities(s, off);
        tfc_tensor *two[2] = {chain[1], leaves[0]};
        CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 0, NULL, NULL, 2, two), TFC_OK);
        CU_ASSERT_EQUAL(s->mru->steps[step_of(s->mru, chain[0])].priority,
                        off && info.min_priority < info.max_priority ? info.max_priority : 0);
        tfc_session_destroy(s);
    }
    const char *bad[] = {"yes", "", "2", "01"};
    for (int i = 0; i < 4; i++) {
        setenv("TFC_PRIORITIES", bad[i], 1);
        tfc_session *s = NULL;
        CU_ASSERT_EQUAL(tfc_session_create(test_ctx, g, &s), TFC_ERR_INVALID_ARGUMENT);
        CU_ASSERT_PTR_NULL(s);
        CU_ASSERT(has_text(tfc_errmsg(), "TFC_PRIORITIES must be 0"));
    }
    unsetenv("TFC_PRIORITIES");
    unsetenv("TFC_ROW_SPLIT_MIN");
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

/* Under a policy that reads perfmodels, a step whose history-based model is calibrated for its
 * footprint costs the calibrated mean (here injected: 123 us for an odd matmul shape no other
 * test uses); otherwise, or with lookups off, the analytic cost. */
static void test_history_costs(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_shape sa = tfc_shape_of(2, (int64_t[]){37, 41}), sb = tfc_shape_of(2, (int64_t[]){41, 29});
    tfc_tensor *in[2] = {tfc_placeholder(g, "a", TFC_FLOAT32, sa),
                         tfc_placeholder(g, "b", TFC_FLOAT32, sb)};
    tfc_tensor *z = tfc_neg(g, tfc_matmul(g, in[0], in[1], 0, 0));
    tfc_value *v[2];
    tfc_value_create(TFC_FLOAT32, sa, &v[0]);
    tfc_value_create(TFC_FLOAT32, sb, &v[1]);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    /* a matmul task of its own (pinned, the plan would be one chain task) */
    CU_ASSERT_EQUAL(tfc_session_set_passes(s, TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS),
                    TFC_OK);
    tfc_value *zv = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, in, v, 1, &z, &zv, 0, NULL), TFC_OK);
    tfc_value_destroy(zv);
    CU_ASSERT(tfc_cl_matmul.model->is_loaded); /* StarPU loads a model at the first submission */
    struct plan_options opt = s->opt;
    opt.model_lookup = 0;
    struct plan *p = build(g, 2, in, v, 1, &z, 0, NULL, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const struct step *mm = &p->steps[0], *ng = &p->steps[1];
    CU_ASSERT_EQUAL_FATAL(mm->cl, &tfc_cl_matmul);
    double analytic = 2.0 + 4.0 * (37 * 41 + 41 * 29 + 37 * 29) / 1e4 + 2.0 * 37 * 29 * 41 / 5e3;
    CU_ASSERT_DOUBLE_EQUAL(mm->cost, analytic, 1e-9);
    int cpu = -1;
    for (unsigned w = 0; w < starpu_worker_get_count() && cpu < 0; w++)
        if (starpu_worker_get_type((int)w) == STARPU_CPU_WORKER) cpu = (int)w;
    CU_ASSERT_FATAL(cpu >= 0);
    struct starpu_perfmodel_arch *arch =
        starpu_worker_get_perf_archtype(cpu, STARPU_NMAX_SCHED_CTXS);
    struct starpu_task t; /* the footprint hook reads the kernel arguments only */
    starpu_task_init(&t);
    t.cl = &tfc_cl_matmul;
    t.cl_arg = mm->args;
    for (int i = 0; i < 12; i++) /* StarPU drops the first sample; 10 make it calibrated */
        starpu_perfmodel_update_history(tfc_cl_matmul.model, &t, arch, (unsigned)cpu, 0, 123.0);
    starpu_task_clean(&t);
    double neg_cost = ng->cost;
    tfc_plan_free(p);
    opt.model_lookup = 1;
    p = build(g, 2, in, v, 1, &z, 0, NULL, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_DOUBLE_EQUAL(p->steps[0].cost, 123.0, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(p->steps[1].cost, neg_cost, 1e-9); /* analytic model: unchanged */
    CU_ASSERT_DOUBLE_EQUAL(p->steps[0].rank, 123.0 + p->steps[1].rank, 1e-6);
    tfc_plan_free(p);
    tfc_value_destroy(v[0]);
    tfc_value_destroy(v[1]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- placement: strings and scopes ------------------------------------------------------ */

static void test_device_strings_and_scopes(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(4));
    tfc_tensor *y = tfc_neg(g, x);
    tfc_tensor_set_name(y, "y");
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "opencl:-1", "cpu:0", "CPU", "cuda:1x",
                         "opencl:99999999999"};
    for (int i = 0; i < 8; i++) {
        CU_ASSERT_EQUAL(tfc_tensor_set_device(y, bad[i], 1), TFC_ERR_INVALID_ARGUMENT);
        CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INVALID_ARGUMENT);
        CU_ASSERT(has_text(tfc_graph_errmsg(g), "node 'y'"));
        CU_ASSERT(has_text(tfc_graph_errmsg(g), bad[i]));
        tfc_graph_clear_error(g);
        CU_ASSERT_EQUAL(y->node->device.kind, TFC_DEVICE_ANY); /* unchanged */
    }
    uint64_t version = g->version;
    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "cuda:1", 1), TFC_OK);
    CU_ASSERT(g->version > version); /* cached plans are rebuilt */
    CU_ASSERT_EQUAL(y->node->device.kind, TFC_DEVICE_CUDA);
    CU_ASSERT_EQUAL(y->node->device.index, 1);
    CU_ASSERT_EQUAL(y->node->device.hard, 1);
    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "opencl", 0), TFC_OK);
    CU_ASSERT_EQUAL(y->node->device.kind, TFC_DEVICE_OPENCL);
    CU_ASSERT_EQUAL(y->node->device.index, -1);
    CU_ASSERT_EQUAL(y->node->device.hard, 0);
    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, NULL, 1), TFC_OK);
    CU_ASSERT_EQUAL(y->node->device.kind, TFC_DEVICE_ANY);
    CU_ASSERT_EQUAL(tfc_tensor_set_device(NULL, "cpu", 1), TFC_ERR_INVALID_ARGUMENT);

    /* scopes nest; the innermost applies; NULL opens a scope without a hint */
    CU_ASSERT_EQUAL(tfc_graph_push_device(g, "cpu", 1), TFC_OK);
    tfc_tensor *a = tfc_neg(g, x);
    CU_ASSERT_EQUAL(tfc_graph_push_device(g, "opencl:0", 0), TFC_OK);
    tfc_tensor *b = tfc_neg(g, a);
    CU_ASSERT_EQUAL(tfc_graph_push_device(g, NULL, 0), TFC_OK);
    tfc_tensor *c = tfc_neg(g, b);
    CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_OK);
    tfc_tensor *d = tfc_neg(g, c);
    CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_OK);
    tfc_tensor *e = tfc_neg(g, d);
    CU_ASSERT_EQUAL(a->node->device.kind, TFC_DEVICE_CPU);
    CU_ASSERT_EQUAL(a->node->device.hard, 1);
    CU_ASSERT_EQUAL(b->node->device.kind, TFC_DEVICE_OPENCL);
    CU_ASSERT_EQUAL(b->node->device.index, 0);
    CU_ASSERT_EQUAL(b->node->device.hard, 0);
    CU_ASSERT_EQUAL(c->node->device.kind, TFC_DEVICE_ANY);
    CU_ASSERT_EQUAL(d->node->device.kind, TFC_DEVICE_CPU);
    CU_ASSERT_EQUAL(e->node->device.kind, TFC_DEVICE_ANY);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    /* more pops than pushes, and a bad scope string, are errors on the graph */
    CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(has_text(tfc_graph_errmsg(g), "no device scope"));
    tfc_graph_clear_error(g);
    CU_ASSERT_EQUAL(tfc_graph_push_device(g, "tpu", 1), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(has_text(tfc_graph_errmsg(g), "'tpu'"));
    tfc_graph_clear_error(g);
    CU_ASSERT_EQUAL(g->n_dev_scope, 0);
    tfc_graph_destroy(g);
}

/* ---- placement at run time --------------------------------------------------------------- */

static int n_workers_of(enum starpu_worker_archtype t)
{
    return (int)starpu_worker_get_count_by_type(t);
}

/* x -> WIDE branches a_i = exp(neg(x)) under a hard "cpu" scope, beside WIDE unhinted branches
 * b_i = square(neg(x)). With the hop hook on and no hop mask, each value also gets a copy task
 * that follows its node's hint: the copy codelet has an OpenCL implementation, so unhinted
 * copies may run on the OpenCL worker, hinted ones never. */
static void test_hard_cpu(void)
{
    int n_ocl = n_workers_of(STARPU_OPENCL_WORKER);
    if (!n_ocl) fprintf(stderr, "(no OpenCL worker: the CPU hint is checked without rivals) ");
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S1(65536)), *fetch[2 * WIDE];
    CU_ASSERT_EQUAL(tfc_graph_push_device(g, "cpu", 1), TFC_OK);
    for (int i = 0; i < WIDE; i++) fetch[i] = tfc_exp(g, tfc_neg(g, x));
    CU_ASSERT_EQUAL(tfc_graph_pop_device(g), TFC_OK);
    for (int i = 0; i < WIDE; i++) fetch[WIDE + i] = tfc_square(g, tfc_neg(g, x));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_set_passes(s, 0); /* the branches are identical: CSE would merge them */
    tfc_session_set_hop(s, 1, 0);
    tfc_session_set_profiling(s, 1);
    static float xd[65536];
    for (int i = 0; i < 65536; i++) xd[i] = (float)(i % 7) * 0.1f;
    tfc_value *xv = test_f32(1, (int64_t[]){65536}, xd), *out[2 * WIDE];
    int hinted = 0, free_ocl = 0, free_tasks = 0;
    for (int run = 0; run < 10; run++) {
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 2 * WIDE, fetch, out, 0, NULL),
                              TFC_OK);
        CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[0], 13), exp(-0.6), 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out[WIDE], 13), 0.36, 1e-5);
        for (int i = 0; i < 2 * WIDE; i++) tfc_value_destroy(out[i]);
        const tfc_task_record *r;
        int n = tfc_session_last_records(s, &r);
        CU_ASSERT_EQUAL(n, 8 * WIDE); /* 2 ops and 2 copies per branch */
        for (int i = 0; i < n; i++) {
            const struct tfc_node *nd = tfc_graph_find(g, r[i].node)->node;
            enum starpu_worker_archtype t = starpu_worker_get_type(r[i].worker);
            if (nd->device.kind == TFC_DEVICE_CPU) {
                hinted++;
                if (t != STARPU_CPU_WORKER)
                    fprintf(stderr, "task of '%s' (%s) ran on %s\n", r[i].node, r[i].op,
                            r[i].worker_name);
                CU_ASSERT_EQUAL(t, STARPU_CPU_WORKER);
            } else {
                free_tasks++;
                free_ocl += t == STARPU_OPENCL_WORKER;
            }
        }
    }
    CU_ASSERT_EQUAL(hinted, 10 * 4 * WIDE);
    if (n_ocl) fprintf(stderr, "(unhinted tasks on OpenCL: %d of %d) ", free_ocl, free_tasks);
    const struct plan *p = s->mru;
    for (int i = 0; i < p->n_steps; i++) {
        const struct step *st = &p->steps[i];
        int mine = s->g->nodes[st->node]->device.kind == TFC_DEVICE_CPU;
        CU_ASSERT_EQUAL(st->where, mine ? STARPU_CPU : 0u);
        CU_ASSERT_PTR_NULL(st->workerids);
    }
    tfc_session_set_profiling(s, 0);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* "opencl" on an int32 neg, which the OpenCL codelet does not implement (integer arithmetic
 * stays on the CPU): hard fails at plan time naming the node and the device; soft runs on the
 * CPU and reports the fallback. */
static void run_opencl_hint(int expect_workers)
{
    int n_ocl = n_workers_of(STARPU_OPENCL_WORKER);
    if (expect_workers >= 0) CU_ASSERT_EQUAL(n_ocl > 0, expect_workers);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_INT32, tfc_shape_of(2, (int64_t[]){2, 4}));
    tfc_tensor *y = tfc_neg(g, x);
    tfc_tensor_set_name(y, "flip");
    int32_t xd[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tfc_value *xv = NULL, *yv = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_value_from_data(TFC_INT32, tfc_shape_of(2, (int64_t[]){2, 4}), xd, &xv),
                          TFC_OK);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);

    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "opencl", 1), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_ERR_NO_DEVICE);
    CU_ASSERT_PTR_NULL(yv);
    const char *m = tfc_session_errmsg(s);
    CU_ASSERT(has_text(m, "node 'flip' (neg)"));
    CU_ASSERT(has_text(m, "hard device 'opencl'"));
    CU_ASSERT(has_text(m, n_ocl ? "has no OpenCL implementation" : "runs no OpenCL worker"));
    if (n_ocl) { /* a device index StarPU does not have */
        CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "opencl:7", 1), TFC_OK);
        CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_ERR_NO_DEVICE);
        CU_ASSERT(has_text(tfc_session_errmsg(s), "no OpenCL device 7"));
        CU_ASSERT(has_text(tfc_session_errmsg(s), "'opencl:7'"));
    }
    /* CUDA: none here (or, on a CUDA build with a GPU, neg has a CUDA codelet) */
    if (!n_workers_of(STARPU_CUDA_WORKER)) {
        CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "cuda:0", 1), TFC_OK);
        CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_ERR_NO_DEVICE);
        CU_ASSERT(has_text(tfc_session_errmsg(s), "runs no CUDA worker"));
    }

    tfc_session_stats st0, st;
    tfc_session_get_stats(s, &st0);
    CU_ASSERT_EQUAL(st0.soft_fallbacks, 0);
    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "opencl", 0), TFC_OK);
    tfc_session_set_profiling(s, 1);
    for (int run = 1; run <= 2; run++) {
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_OK);
        CU_ASSERT_EQUAL(tfc_value_get(yv, 7), -8.0);
        tfc_value_destroy(yv);
        tfc_session_get_stats(s, &st);
        CU_ASSERT_EQUAL(st.soft_fallbacks, (uint64_t)run); /* one task per run */
        const char *w = tfc_session_last_warning(s);
        CU_ASSERT(has_text(w, "node 'flip' (neg): soft device 'opencl' not satisfied"));
        CU_ASSERT(has_text(w, "any worker may run it"));
        const tfc_task_record *r;
        CU_ASSERT_EQUAL_FATAL(tfc_session_last_records(s, &r), 1);
        CU_ASSERT_EQUAL(starpu_worker_get_type(r[0].worker), STARPU_CPU_WORKER);
    }
    CU_ASSERT_EQUAL(st.lowerings, st0.lowerings + 1); /* built once, reported every run */
    /* dropping the hint rebuilds the plan; the warning and the count stop */
    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, NULL, 0), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_OK);
    tfc_value_destroy(yv);
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.soft_fallbacks, 2);
    CU_ASSERT_STRING_EQUAL(tfc_session_last_warning(s), "");
    tfc_session_set_profiling(s, 0);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_opencl_hints(void)
{
    run_opencl_hint(-1);
}

/* A soft "opencl:0" on a node: its op falls back (no OpenCL codelet), its hop copies (whose
 * codelet has one) are held to the worker list of OpenCL device 0. */
static void test_one_device_worker_list(void)
{
    int ocl = -1;
    for (unsigned w = 0; w < starpu_worker_get_count(); w++)
        if (starpu_worker_get_type((int)w) == STARPU_OPENCL_WORKER && ocl < 0) ocl = (int)w;
    if (ocl < 0) {
        fprintf(stderr, "(skipped: no OpenCL worker) ");
        return;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_INT32, S1(1000));
    tfc_tensor *y = tfc_neg(g, x); /* int32: no OpenCL implementation */
    CU_ASSERT_EQUAL(tfc_tensor_set_device(y, "opencl:0", 0), TFC_OK);
    tfc_tensor *z = tfc_abs(g, y);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_set_hop(s, 1, 0);
    tfc_session_set_profiling(s, 1);
    int32_t xd[1000];
    for (int i = 0; i < 1000; i++) xd[i] = i;
    tfc_value *xv = NULL, *zv = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_value_from_data(TFC_INT32, S1(1000), xd, &xv), TFC_OK);
    for (int run = 0; run < 10; run++) {
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &z, &zv, 0, NULL), TFC_OK);
        CU_ASSERT_EQUAL(tfc_value_get(zv, 999), 999.0);
        tfc_value_destroy(zv);
        const tfc_task_record *r;
        int n = tfc_session_last_records(s, &r);
        CU_ASSERT_EQUAL(n, 4); /* neg, hop, abs, hop */
        for (int i = 0; i < n; i++)
            if (strcmp(r[i].node, y->name) == 0 && strcmp(r[i].op, "hop") == 0)
                CU_ASSERT_EQUAL(r[i].worker, ocl);
    }
    const struct plan *p = s->mru;
    int hop = -1;
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].node == y->node->id && p->steps[i].cl == &tfc_cl_hop) hop = i;
    CU_ASSERT_FATAL(hop >= 0);
    CU_ASSERT_EQUAL(p->steps[hop].where, STARPU_OPENCL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->steps[hop].workerids);
    CU_ASSERT(p->steps[hop].workerids[ocl / 32] >> (ocl % 32) & 1u);
    CU_ASSERT_EQUAL(p->n_soft_fallbacks, 1); /* the neg itself */
    CU_ASSERT_EQUAL(p->steps[step_of(p, y)].where, 0u);
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.soft_fallbacks, 10);
    tfc_session_set_profiling(s, 0);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- StarPU restarted without OpenCL workers --------------------------------------------- */

static void test_no_opencl_worker(void)
{
    run_opencl_hint(0);
}

static int open_with_opencl(void)
{
    setenv("STARPU_OPENCL_ON_CPUS", "1", 0); /* PoCL's CPU device, unless the caller chose */
    return test_ctx_open();
}

static int open_without_opencl(void)
{
    setenv("STARPU_NOPENCL", "0", 1);
    return test_ctx_open();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    {
        TEST_SUITE("priorities", NULL, NULL);
        TEST_ADD(test_ranks_chain_beside_wide);
        TEST_ADD(test_ranks_war_and_fetch);
        TEST_ADD(test_sinks);
        TEST_ADD(test_device_strings_and_scopes);
    }
    {
        TEST_SUITE("runs", open_with_opencl, test_ctx_close);
        TEST_ADD(test_session_priorities);
        TEST_ADD(test_history_costs);
        TEST_ADD(test_hard_cpu);
        TEST_ADD(test_opencl_hints);
        TEST_ADD(test_one_device_worker_list);
    }
    {
        TEST_SUITE("no_opencl", open_without_opencl, test_ctx_close);
        TEST_ADD(test_no_opencl_worker);
    }
    return test_main();
}
