/* test_chain_epilogue.c: inside chain tasks a matmul and the bias add after it (alone, or
 * fused with one activation) run as one kernel (sched/chain_epilogue.c,
 * codelets/matmul_epilogue.h). Two dense layers, x [m, 48] -> act(x w1 + b1) [m, 64] ->
 * h w2^T + b2 [m, 16] (w2 stored [16, 64], b1 [64], b2 [1, 16]), on an inference plan split
 * over batch rows (128 rows: a chain per CPU worker) and on a pinned one (8 rows: one chain),
 * for relu, leaky_relu, sigmoid, tanh and no activation, under TFC_MATMUL_BACKEND blas and
 * auto (oneDNN for the 64-wide products where it wins): the plan without fusion's bits where
 * both plans apply the same formulas (add, relu, leaky_relu), within 1e-6 of them for the
 * exponentials, within float32 rounding of a double reference always; the merges counted
 * (tfc_matmul_epilogue_runs: a layer per block and run). When the first product is also
 * fetched, read by another op, or added to a matrix instead of a row vector, only the second
 * layer merges, with the same values. With one CPU worker or a device there is no chain and
 * no merge. */
#include <starpu.h>
#include "testutil.h"
#include "../codelets/matmul_epilogue.h"

#define K 48
#define H 64
#define O 16

static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

/* Values in [-1, 1): the activations see both signs and their curved parts. */
static tfc_value *filled(tfc_shape shape, unsigned seed)
{
    tfc_value *v = test_filled(shape, seed);
    for (int64_t i = 0; i < tfc_value_numel(v); i++) ((float *)tfc_value_data(v))[i] *= 2;
    return v;
}

enum act { ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_SIGMOID, ACT_TANH, N_ACTS };
static const char *const act_names[N_ACTS] = {"none", "relu", "leaky_relu", "sigmoid", "tanh"};

/* How the first layer's product is used besides its bias add. */
enum use { USE_ONLY, USE_FETCHED, USE_SHARED, USE_MATRIX_BIAS };

struct net {
    tfc_graph *g;
    tfc_tensor *x, *bias_feed, *prod, *y, *extra;
    tfc_value *w1, *b1, *w2, *b2;
};

static tfc_tensor *activate(tfc_graph *g, enum act a, tfc_tensor *t)
{
    switch (a) {
    case ACT_RELU: return tfc_relu(g, t);
    case ACT_LEAKY: return tfc_leaky_relu(g, t, 0.2);
    case ACT_SIGMOID: return tfc_sigmoid(g, t);
    case ACT_TANH: return tfc_tanh(g, t);
    default: return t;
    }
}

static void net_build(struct net *n, enum act a, enum use u)
{
    memset(n, 0, sizeof *n);
    CU_ASSERT_FATAL(tfc_graph_create(&n->g) == TFC_OK);
    tfc_graph *g = n->g;
    n->w1 = filled(S2(K, H), 1), n->b1 = filled(S1(H), 2);
    n->w2 = filled(S2(O, H), 3), n->b2 = filled(S2(1, O), 4);
    n->x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, K));
    n->prod = tfc_matmul(g, n->x, tfc_constant(g, "w1", n->w1), 0, 0);
    tfc_tensor *b1 = tfc_constant(g, "b1", n->b1);
    if (u == USE_MATRIX_BIAS) b1 = n->bias_feed = tfc_placeholder(g, "b", TFC_FLOAT32, S2(-1, H));
    tfc_tensor *h = activate(g, a, tfc_add(g, n->prod, b1));
    n->y = tfc_add(g, tfc_matmul(g, h, tfc_constant(g, "w2", n->w2), 0, 1),
                   tfc_constant(g, "b2", n->b2));
    if (u == USE_SHARED) n->extra = tfc_mul(g, n->prod, n->prod);
    if (u == USE_FETCHED) n->extra = n->prod;
    CU_ASSERT_FATAL(tfc_graph_status(g) == TFC_OK);
}

static void net_free(struct net *n)
{
    tfc_value_destroy(n->w1), tfc_value_destroy(n->b1);
    tfc_value_destroy(n->w2), tfc_value_destroy(n->b2);
    tfc_graph_destroy(n->g);
}

static double act_ref(enum act a, double v)
{
    switch (a) {
    case ACT_RELU: return v > 0 ? v : 0;
    case ACT_LEAKY: return v > 0 ? v : 0.2 * v;
    case ACT_SIGMOID: return 1 / (1 + exp(-v));
    case ACT_TANH: return tanh(v);
    default: return v;
    }
}

/* Whether y [m, O] is within float32 rounding of the double network on x. */
static int near_reference(const struct net *n, enum act a, const tfc_value *xv,
                          const tfc_value *bv, const tfc_value *y, int64_t m)
{
    const float *x = tfc_value_cdata(xv), *w1 = tfc_value_cdata(n->w1);
    const float *b1 = bv ? tfc_value_cdata(bv) : tfc_value_cdata(n->b1);
    const float *w2 = tfc_value_cdata(n->w2), *b2 = tfc_value_cdata(n->b2);
    const float *got = tfc_value_cdata(y);
    for (int64_t r = 0; r < m; r++) {
        double h[H];
        for (int j = 0; j < H; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)x[r * K + k] * w1[k * H + j];
            h[j] = act_ref(a, s + b1[bv ? r * H + j : j]);
        }
        for (int o = 0; o < O; o++) {
            double s = b2[o];
            for (int j = 0; j < H; j++) s += h[j] * w2[o * H + j];
            if (!(fabs(s - got[r * O + o]) <= 1e-4 * fmax(1.0, fabs(s)))) return 0;
        }
    }
    return 1;
}

/* One run of n's plan on m rows with or without fusion (which the merge is part of): y, and
 * the first product when the net fetches it. Returns the merges the run made. */
static long run_net(const struct net *n, int fusion, int64_t m, const tfc_value *xv,
                    const tfc_value *bv, tfc_value **y, tfc_value **extra)
{
    tfc_session *s = NULL;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, n->g, &s) == TFC_OK);
    unsigned passes = fusion ? TFC_PASS_ALL : TFC_PASS_ALL & ~(unsigned)TFC_PASS_FUSION;
    CU_ASSERT_FATAL(tfc_session_set_passes(s, passes) == TFC_OK);
    tfc_tensor *feeds[2] = {n->x, n->bias_feed}, *fetches[2] = {n->y, n->extra};
    const tfc_value *fv[2] = {xv, bv};
    tfc_value *out[2] = {NULL, NULL};
    long before = tfc_matmul_epilogue_runs();
    tfc_status st = tfc_session_run(s, bv ? 2 : 1, feeds, (tfc_value *const *)fv,
                                    n->extra ? 2 : 1, fetches, out, 0, NULL);
    if (st) fprintf(stderr, "run (m %lld): %s\n", (long long)m, tfc_session_errmsg(s));
    CU_ASSERT_FATAL(st == TFC_OK);
    long merges = tfc_matmul_epilogue_runs() - before;
    tfc_session_destroy(s);
    *y = out[0];
    if (extra) *extra = out[1];
    else tfc_value_destroy(out[1]);
    return merges;
}

static int same_values(const tfc_value *a, const tfc_value *b, double tol)
{
    size_t len = (size_t)tfc_value_numel(a);
    const float *p = tfc_value_cdata(a), *q = tfc_value_cdata(b);
    if (tol == 0) return !memcmp(p, q, len * sizeof *p);
    for (size_t i = 0; i < len; i++)
        if (!(fabs((double)p[i] - q[i]) <= tol * fmax(1.0, fabs((double)q[i])))) return 0;
    return 1;
}

/* The chains of a run on m rows: one per CPU worker from 64 rows (TFC_ROW_SPLIT_MIN's
 * default), one pinned below; none without chains. */
static long blocks_of(int64_t m)
{
    if (!test_chains_here()) return 0;
    return m >= 64 ? starpu_worker_get_count_by_type(STARPU_CPU_WORKER) : 1;
}

/* Runs net (act a, use u) on m rows with fusion and without; checks values and merges. */
static void check_case(enum act a, enum use u, int64_t m, const char *backend)
{
    struct net n;
    net_build(&n, a, u);
    tfc_value *xv = filled(S2(m, K), 10 + (unsigned)m);
    tfc_value *bv = u == USE_MATRIX_BIAS ? filled(S2(m, H), 20) : NULL;
    tfc_value *y = NULL, *y0 = NULL, *e = NULL, *e0 = NULL;
    long merges = run_net(&n, 1, m, xv, bv, &y, u == USE_FETCHED ? &e : NULL);
    long none = run_net(&n, 0, m, xv, bv, &y0, u == USE_FETCHED ? &e0 : NULL);
    int exact = a == ACT_NONE || a == ACT_RELU || a == ACT_LEAKY;
    int ok = same_values(y, y0, exact ? 0 : 1e-6) && near_reference(&n, a, xv, bv, y, m) &&
             (!e || same_values(e, e0, 0));
    long want = blocks_of(m) * (u == USE_ONLY ? 2 : 1);
    if (!ok || merges != want || none != 0)
        fprintf(stderr, "%s, use %d, m %lld, backend %s: values %s, %ld merges (want %ld), %ld "
                "without fusion\n", act_names[a], (int)u, (long long)m, backend,
                ok ? "ok" : "differ", merges, want, none);
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(merges, want);
    CU_ASSERT_EQUAL(none, 0);
    tfc_value_destroy(y), tfc_value_destroy(y0), tfc_value_destroy(e), tfc_value_destroy(e0);
    tfc_value_destroy(xv), tfc_value_destroy(bv);
    net_free(&n);
}

/* Every activation, split over rows and pinned, through OpenBLAS and through auto. */
static void test_activations(void)
{
    const char *backends[2] = {"blas", "auto"};
    for (int b = 0; b < 2; b++) {
        setenv("TFC_MATMUL_BACKEND", backends[b], 1);
        for (int a = 0; a < N_ACTS; a++) {
            check_case((enum act)a, USE_ONLY, 128, backends[b]);
            check_case((enum act)a, USE_ONLY, 8, backends[b]);
        }
    }
    unsetenv("TFC_MATMUL_BACKEND");
}

/* The first product fetched, read by another op, or added to a matrix: no merge there. (On 8
 * rows the plan with another reader is no chain of steps, so it is not pinned: 128 only.) */
static void test_product_used_elsewhere(void)
{
    for (int u = USE_FETCHED; u <= USE_MATRIX_BIAS; u++) {
        check_case(ACT_RELU, (enum use)u, 128, "auto");
        if (u != USE_SHARED) check_case(ACT_SIGMOID, (enum use)u, 8, "auto");
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("chain_epilogue", test_ctx_open, test_ctx_close);
    TEST_ADD(test_activations);
    TEST_ADD(test_product_used_elsewhere);
    return test_main();
}
