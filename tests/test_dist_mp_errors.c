/* test_dist_mp_errors.c: rank placement hints (model parallelism, issue 15) in one process
 * without a distributed context: how "rank:R" hints parse, that rank 0 is accepted and runs
 * as without the hint, that another rank or a rank in a graph with control flow is an error
 * naming the node, and that tfc_gradients gives the nodes it builds the rank of the forward
 * node they differentiate, that optimizer slots take their variable's rank, and that the
 * plan-time passes (common subexpressions, fusion) keep nodes of different ranks apart. The
 * split itself runs under mpirun in tests/test_dist_mp.sh. */
#include "testutil.h"
#include "../graph/graph.h"
#include "../sched/plan.h"

static tfc_status bad_hint(const char *device)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_status st = tfc_graph_push_device(g, device, 1);
    if (st) CU_ASSERT(strstr(tfc_graph_errmsg(g), device) != NULL);
    tfc_graph_destroy(g);
    return st;
}

static void test_rank_hints_parse(void)
{
    const char *good[] = {"rank:0", "rank:1", "rank:12/cpu", "rank:1/cuda:0", "rank:0/opencl"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) CU_ASSERT_EQUAL(bad_hint(good[i]), TFC_OK);
    const char *bad[] = {"rank:", "rank:x", "rank:1/", "rank:1/gpu", "rank:1/rank:2", "rank:-1",
                         "rank:1cpu"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CU_ASSERT_EQUAL(bad_hint(bad[i]), TFC_ERR_INVALID_ARGUMENT);
    struct tfc_device_hint h;
    char msg[TFC_MSG_LEN], buf[64];
    CU_ASSERT_EQUAL_FATAL(tfc_device_parse("rank:3/cuda:1", 1, &h, msg), TFC_OK);
    CU_ASSERT(h.has_rank && h.rank == 3 && h.kind == TFC_DEVICE_CUDA && h.index == 1 && h.hard);
    CU_ASSERT_STRING_EQUAL(tfc_device_str(&h, buf, sizeof buf), "rank:3/cuda:1");
    CU_ASSERT_EQUAL_FATAL(tfc_device_parse("rank:2", 0, &h, msg), TFC_OK);
    CU_ASSERT(h.has_rank && h.rank == 2 && h.kind == TFC_DEVICE_ANY);
    CU_ASSERT_STRING_EQUAL(tfc_device_str(&h, buf, sizeof buf), "rank:2");
}

/* y = relu(x W0) under scope0, sum(y W1) under scope1; runs it on x = ones and returns the
 * status (the sum in *out). */
static tfc_status run_two_layers(const char *scope0, const char *scope1, float *out, char *err)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d[2] = {2, 3};
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, d));
    if (scope0) tfc_graph_push_device(g, scope0, 1);
    tfc_tensor *w0 = tfc_variable(g, "w0", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){3, 4}),
                                  tfc_init_constant(0.5));
    tfc_tensor *h = tfc_relu(g, tfc_matmul(g, x, w0, 0, 0));
    if (scope0) tfc_graph_pop_device(g);
    if (scope1) tfc_graph_push_device(g, scope1, 1);
    tfc_tensor *w1 = tfc_variable(g, "w1", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){4, 1}),
                                  tfc_init_constant(2));
    tfc_tensor *y = tfc_reduce_sum(g, tfc_matmul(g, h, w1, 0, 0), 0, NULL, 0);
    if (scope1) tfc_graph_pop_device(g);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_init_variables(s) == TFC_OK);
    float ones[6] = {1, 1, 1, 1, 1, 1};
    tfc_value *xv = test_f32(2, d, ones), *yv = NULL;
    tfc_status st = tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL);
    snprintf(err, TFC_MSG_LEN, "%s", st ? tfc_session_errmsg(s) : "");
    if (!st) *out = *(float *)tfc_value_data(yv);
    tfc_value_destroy(yv);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    return st;
}

static void test_rank0_runs_other_ranks_fail(void)
{
    float plain = 0, hinted = -1, other = -1;
    char err[TFC_MSG_LEN];
    CU_ASSERT_EQUAL_FATAL(run_two_layers(NULL, NULL, &plain, err), TFC_OK);
    CU_ASSERT_EQUAL(plain, 2 * 4 * 1.5f * 2); /* 2 rows, 4 units of relu(3 * 0.5), times 2 */
    CU_ASSERT_EQUAL(run_two_layers("rank:0", "rank:0/cpu", &hinted, err), TFC_OK);
    CU_ASSERT_EQUAL(hinted, plain);
    CU_ASSERT_EQUAL(run_two_layers("rank:0", "rank:1", &other, err), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(err, "node 'w1'") != NULL); /* the first node hinted to rank 1 */
    CU_ASSERT(strstr(err, "names rank 1") != NULL);
    CU_ASSERT(strstr(err, tfc_dist_available() ? "the context is not distributed"
                                               : "built without MPI") != NULL);
    CU_ASSERT(strstr(err, "only rank:0") != NULL);
    CU_ASSERT_EQUAL(other, -1);
    /* the device after the rank keeps its meaning: a hard OpenCL hint without an OpenCL worker */
    tfc_ctx_info info;
    CU_ASSERT_FATAL(tfc_ctx_info_get(test_ctx, &info) == TFC_OK);
    if (!info.n_opencl_workers) {
        CU_ASSERT_EQUAL(run_two_layers("rank:0/opencl", NULL, &other, err), TFC_ERR_NO_DEVICE);
        CU_ASSERT(strstr(err, "hard device 'rank:0/opencl' cannot be satisfied") != NULL);
    }
}

static tfc_status keep(tfc_graph *g, void *arg, tfc_tensor *const *in, tfc_tensor **out)
{
    (void)g, (void)in;
    out[0] = arg;
    return TFC_OK;
}

static void test_rank_in_control_flow_fails(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *p = tfc_placeholder(g, "p", TFC_BOOL, tfc_shape_of(0, NULL));
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_graph_push_device(g, "rank:1", 1);
    tfc_tensor *y = tfc_neg(g, x);
    tfc_graph_pop_device(g);
    tfc_tensor *r;
    CU_ASSERT_EQUAL_FATAL(tfc_cond(g, "c", p, keep, keep, y, 1, &r), TFC_OK);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    tfc_value *pv, *xv, *rv = NULL;
    tfc_value_create(TFC_BOOL, tfc_shape_of(0, NULL), &pv);
    tfc_value_create(TFC_FLOAT32, tfc_shape_of(0, NULL), &xv);
    tfc_tensor *ft[] = {p, x};
    tfc_value *fv[] = {pv, xv};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, fv, 1, &r, &rv, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_session_errmsg(s), "not supported across ranks") != NULL);
    CU_ASSERT(strstr(tfc_session_errmsg(s), y->node->name) != NULL);
    tfc_value_destroy(pv);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* Every node tfc_gradients builds takes the rank of the forward node it differentiates: the
 * second layer's gradient and the loss seed rank 1, the first layer's rank 0; a node without a
 * rank gives its gradient the open scope's hint, as before. */
static void test_gradients_follow_forward_rank(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d[2] = {2, 3};
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, d));
    tfc_graph_push_device(g, "rank:0", 1);
    tfc_tensor *w0 = tfc_variable(g, "w0", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){3, 4}), tfc_init_constant(0.5));
    tfc_tensor *h = tfc_relu(g, tfc_matmul(g, x, w0, 0, 0));
    tfc_graph_pop_device(g);
    tfc_graph_push_device(g, "rank:1/cpu", 1);
    tfc_tensor *w1 = tfc_variable(g, "w1", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){4, 1}), tfc_init_constant(2));
    tfc_tensor *y = tfc_reduce_sum(g, tfc_matmul(g, h, w1, 0, 0), 0, NULL, 0);
    tfc_graph_pop_device(g);
    int before = g->n_nodes;
    tfc_tensor *xs[] = {w0, w1}, *dx[2];
    CU_ASSERT_EQUAL_FATAL(tfc_gradients(g, 1, &y, NULL, 2, xs, dx), TFC_OK);
    CU_ASSERT_FATAL(g->n_nodes > before);
    int on1 = 0, on0 = 0;
    for (int i = before; i < g->n_nodes; i++) {
        const struct tfc_device_hint *hint = &g->nodes[i]->device;
        CU_ASSERT(hint->has_rank);
        CU_ASSERT_EQUAL(hint->kind, TFC_DEVICE_ANY); /* the rank only: no scope was open */
        on1 += hint->has_rank && hint->rank == 1;
        on0 += hint->has_rank && hint->rank == 0;
    }
    CU_ASSERT(on0 > 0 && on1 > 0);
    CU_ASSERT(dx[1]->node->device.has_rank && dx[1]->node->device.rank == 1);
    CU_ASSERT(dx[0]->node->device.has_rank && dx[0]->node->device.rank == 0);
    CU_ASSERT_EQUAL(g->n_dev_scope, 0); /* the colocation scopes are all closed */
    tfc_graph_destroy(g);
}

/* Adam's slots (and momentum's) take the rank of the variable they belong to, rank only: the
 * device part is the open scope's, as for gradients. */
static void test_slots_follow_variable_rank(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){2, 3}));
    tfc_graph_push_device(g, "rank:1/cpu", 1);
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){3, 1}),
                                 tfc_init_constant(0.5));
    tfc_graph_pop_device(g);
    tfc_tensor *u = tfc_variable(g, "u", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){1, 1}),
                                 tfc_init_constant(2)); /* no hint: its slots get none */
    tfc_tensor *loss = tfc_reduce_sum(g, tfc_matmul(g, tfc_matmul(g, x, w, 0, 0), u, 0, 0), 0,
                                      NULL, 0);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tfc_minimize(g, loss, 0, NULL, &opt, NULL));
    const char *on1[] = {"w/adam_m", "w/adam_v"}, *none[] = {"u/adam_m", "u/adam_v"};
    for (int i = 0; i < 2; i++) {
        tfc_tensor *t = tfc_graph_find(g, on1[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT(t->node->device.has_rank && t->node->device.rank == 1);
        CU_ASSERT_EQUAL(t->node->device.kind, TFC_DEVICE_ANY); /* not the variable's cpu */
        t = tfc_graph_find(g, none[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        CU_ASSERT_FALSE(t->node->device.has_rank);
    }
    tfc_graph_destroy(g);
}

/* Whether some step of p runs node t's node (not merged into another node, not fused away). */
static int has_step(const struct plan *p, const tfc_tensor *t)
{
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].node == t->node->id) return 1;
    return 0;
}

/* exp(x) built on rank 0 and again on rank 1 is one subexpression, and relu on rank 0 feeding
 * neg on rank 1 one fusable chain: with the passes on, each node keeps its own step (its
 * rank's), where without ranks they would merge and fuse. */
static void test_passes_keep_ranks_apart(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t d[2] = {2, 3};
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, d));
    tfc_tensor *e[2], *chain[2];
    for (int r = 0; r < 2; r++) {
        char where[8];
        snprintf(where, sizeof where, "rank:%d", r);
        tfc_graph_push_device(g, where, 1);
        e[r] = tfc_exp(g, x);
        chain[r] = r == 0 ? tfc_relu(g, x) : tfc_neg(g, chain[0]);
        tfc_graph_pop_device(g);
    }
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    float in[6] = {1, -2, 3, -4, 5, -6};
    tfc_value *xv = test_f32(2, d, in);
    tfc_tensor *fetch[] = {e[0], e[1], chain[1]};
    struct plan_options opt = {.cse = 1, .fusion = 1, .const_fold = 1};
    tfc_status st;
    char msg[TFC_MSG_LEN];
    struct plan *p = tfc_plan_build(g, 1, &x, &xv, 3, fetch, 0, NULL, &opt, &st, msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT(has_step(p, e[0]) && has_step(p, e[1]));         /* not merged */
    CU_ASSERT(has_step(p, chain[0]) && has_step(p, chain[1])); /* not fused */
    tfc_plan_free(p);
    /* the control: the same nodes without ranks do merge and fuse, so the passes are on */
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->device.has_rank = 0;
    g->version++;
    p = tfc_plan_build(g, 1, &x, &xv, 3, fetch, 0, NULL, &opt, &st, msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_FALSE(has_step(p, e[0]) && has_step(p, e[1]));
    CU_ASSERT_FALSE(has_step(p, chain[0]) && has_step(p, chain[1]));
    tfc_plan_free(p);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("dist_mp_errors", test_ctx_open, test_ctx_close);
    TEST_ADD(test_rank_hints_parse);
    TEST_ADD(test_rank0_runs_other_ranks_fail);
    TEST_ADD(test_rank_in_control_flow_fails);
    TEST_ADD(test_gradients_follow_forward_rank);
    TEST_ADD(test_slots_follow_variable_rank);
    TEST_ADD(test_passes_keep_ranks_apart);
    return test_main();
}
