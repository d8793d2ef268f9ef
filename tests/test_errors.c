/* test_errors.c: bad input gets a status and a message naming what is wrong, never an abort:
 * cycles, missing and mis-shaped feeds, wrong dtypes, tensors of another graph, NULL handles,
 * uninitialized variables, kernels failing at run time. Run under ASan/LSan in CI for leaks. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

#define HAS(s, sub) CU_ASSERT_PTR_NOT_NULL(strstr((s), (sub)))

static void test_cycle(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(2, 2));
    tfc_tensor *a = tfc_neg(g, x), *b = tfc_exp(g, a);
    tfc_tensor_set_name(a, "a");
    tfc_tensor_set_name(b, "b");
    CU_ASSERT_EQUAL(tfc_tensor_add_control_input(a, b), TFC_OK); /* a -> b -> a */
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *xv, *out = (tfc_value *)1;
    tfc_value_create(TFC_FLOAT32, S2(2, 2), &xv);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &b, &out, 0, NULL), TFC_ERR_CYCLE);
    CU_ASSERT_PTR_NULL(out);
    HAS(tfc_session_errmsg(s), "cycle");
    CU_ASSERT(strstr(tfc_session_errmsg(s), "'a'") || strstr(tfc_session_errmsg(s), "'b'"));
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_feeds(void)
{
    tfc_graph *g, *other;
    tfc_graph_create(&g);
    tfc_graph_create(&other);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 3));
    tfc_tensor *y = tfc_placeholder(g, "labels", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *loss = tfc_sparse_softmax_cross_entropy(g, x, y);
    tfc_tensor *foreign = tfc_placeholder(other, "f", TFC_FLOAT32, S2(1, 1));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *x43, *x44, *x4d, *y4, *y5, *out = NULL;
    tfc_value_create(TFC_FLOAT32, S2(4, 3), &x43);
    tfc_value_create(TFC_FLOAT32, S2(4, 4), &x44);
    tfc_value_create(TFC_FLOAT64, S2(4, 3), &x4d);
    tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){4}), &y4);
    tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){5}), &y5);
    tfc_tensor *ft[2] = {x, y};
    /* a needed placeholder left unfed */
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &x43, 1, &loss, &out, 0, NULL), TFC_ERR_MISSING_FEED);
    HAS(tfc_session_errmsg(s), "'labels'");
    /* mis-shaped feed */
    tfc_value *v1[2] = {x44, y4};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, v1, 1, &loss, &out, 0, NULL), TFC_ERR_SHAPE);
    HAS(tfc_session_errmsg(s), "'x'");
    /* wrong dtype */
    tfc_value *v2[2] = {x4d, y4};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, v2, 1, &loss, &out, 0, NULL), TFC_ERR_DTYPE);
    HAS(tfc_session_errmsg(s), "float32");
    /* shapes that only clash once the unknown dims are known */
    tfc_value *v3[2] = {x43, y5};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, v3, 1, &loss, &out, 0, NULL), TFC_ERR_SHAPE);
    HAS(tfc_session_errmsg(s), "sparse_softmax_cross_entropy");
    /* another graph's tensor, NULL tensors and values, nothing to do */
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 1, &foreign, &out, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    HAS(tfc_session_errmsg(s), "another graph");
    tfc_tensor *null_t = NULL;
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 1, &null_t, &out, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    tfc_value *null_v = NULL;
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &null_v, 1, &loss, &out, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_run(NULL, 0, NULL, NULL, 1, &loss, &out, 0, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(out);
    /* after all that, a good run still works */
    tfc_value *v4[2] = {x43, y4};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, v4, 1, &loss, &out, 0, NULL), TFC_OK);
    CU_ASSERT_DOUBLE_EQUAL(tfc_value_get(out, 0), 1.0986123, 1e-5); /* log 3 */
    tfc_value_destroy(out);
    tfc_value *vals[] = {x43, x44, x4d, y4, y5};
    for (int i = 0; i < 5; i++) tfc_value_destroy(vals[i]);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_graph_destroy(other);
}

static void test_kernel_errors_fail_the_run(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *p = tfc_placeholder(g, "params", TFC_FLOAT32, S2(4, 2));
    tfc_tensor *i = tfc_placeholder(g, "ids", TFC_INT64, tfc_shape_of(1, (int64_t[]){3}));
    tfc_tensor *rows = tfc_gather(g, p, i);
    tfc_tensor_set_name(rows, "lookup");
    tfc_tensor *k = tfc_placeholder(g, "k", TFC_INT32, tfc_shape_of(0, NULL));
    tfc_tensor *q = tfc_div(g, k, tfc_scalar(g, TFC_INT32, 0));
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *pv, *iv, *kv, *out = NULL;
    tfc_value_create(TFC_FLOAT32, S2(4, 2), &pv);
    int64_t ids[3] = {0, 7, 1};
    tfc_value_wrap(TFC_INT64, tfc_shape_of(1, (int64_t[]){3}), ids, &iv);
    tfc_value_scalar(TFC_INT32, 5, &kv);
    tfc_tensor *ft[2] = {p, i};
    tfc_value *fv[2] = {pv, iv};
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, fv, 1, &rows, &out, 0, NULL), TFC_ERR_OUT_OF_RANGE);
    HAS(tfc_session_errmsg(s), "'lookup'");
    HAS(tfc_session_errmsg(s), "7");
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &k, &kv, 1, &q, &out, 0, NULL), TFC_ERR_OUT_OF_RANGE);
    HAS(tfc_session_errmsg(s), "division by zero");
    /* the error does not stick to the plan: fixed input runs fine */
    ids[1] = 3;
    CU_ASSERT_EQUAL(tfc_session_run(s, 2, ft, fv, 1, &rows, &out, 0, NULL), TFC_OK);
    tfc_value_destroy(out);
    tfc_value_destroy(pv);
    tfc_value_destroy(iv);
    tfc_value_destroy(kv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_uninitialized_and_variables(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *w = tfc_variable(g, "weights", TFC_FLOAT32, S2(2, 2), tfc_init_ones());
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(2, 2));
    tfc_tensor *y = tfc_matmul(g, x, w, 0, 0);
    tfc_tensor *set = tfc_assign(g, w, x);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *xv, *out = NULL, *bad;
    tfc_value_create(TFC_FLOAT32, S2(2, 2), &xv);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &out, 0, NULL), TFC_ERR_UNINITIALIZED);
    HAS(tfc_session_errmsg(s), "'weights'");
    CU_ASSERT_EQUAL(tfc_session_read_variable(s, w, &out), TFC_ERR_UNINITIALIZED);
    /* assign initializes: then reads work */
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 0, NULL, NULL, 1, &set), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &out, 0, NULL), TFC_OK);
    tfc_value_destroy(out);
    /* variable API misuse */
    CU_ASSERT_EQUAL(tfc_session_read_variable(s, x, &out), TFC_ERR_INVALID_ARGUMENT);
    HAS(tfc_session_errmsg(s), "not a variable");
    tfc_value_create(TFC_FLOAT64, S2(2, 2), &bad);
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, w, bad), TFC_ERR_DTYPE);
    tfc_value_destroy(bad);
    tfc_value_create(TFC_FLOAT32, S2(2, 3), &bad);
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, w, bad), TFC_ERR_SHAPE);
    tfc_value_destroy(bad);
    CU_ASSERT_EQUAL(tfc_session_init_variable(s, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_read_variable(NULL, w, &out), TFC_ERR_INVALID_ARGUMENT);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A tensor StarPU cannot hold (more than 2^32-1 elements: its interfaces count in 32 bits) or no
 * memory node could (more bytes than this machine's RAM) is refused when the run is planned,
 * naming it: before, the count wrapped (a kernel wrote past a small buffer) or StarPU retried
 * the allocation forever. */
static void run_expect(tfc_graph *g, tfc_tensor *fetch, tfc_status want, const char *name,
                       const char *why)
{
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_value *out = NULL;
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 1, &fetch, &out, 0, NULL), want);
    CU_ASSERT_PTR_NULL(out);
    HAS(tfc_session_errmsg(s), name);
    HAS(tfc_session_errmsg(s), why);
    tfc_session_destroy(s);
}

static void test_tensors_too_large_for_starpu(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t big = (int64_t)1 << 33;
    tfc_tensor *f = tfc_fill(g, tfc_shape_of(1, &big), TFC_FLOAT32, 1.0);
    tfc_tensor_set_name(f, "huge_fill");
    run_expect(g, tfc_reduce_sum(g, tfc_sin(g, f), 0, NULL, 0), TFC_ERR_INVALID_ARGUMENT,
               "'huge_fill'", "4294967295 elements");
    tfc_tensor *v = tfc_variable(g, "huge_var", TFC_FLOAT32, tfc_shape_of(1, &big),
                                 tfc_init_zeros());
    run_expect(g, tfc_reduce_sum(g, v, 0, NULL, 0), TFC_ERR_INVALID_ARGUMENT, "'huge_var'",
               "4294967295 elements");
    /* within StarPU's count, beyond the RAM: 2^32-1 doubles are 32 GiB */
    int64_t most = (int64_t)UINT32_MAX;
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (ram < (double)most * 8) {
        tfc_tensor *d = tfc_fill(g, tfc_shape_of(1, &most), TFC_FLOAT64, 1.0);
        tfc_tensor_set_name(d, "ram_fill");
        run_expect(g, tfc_reduce_sum(g, tfc_sin(g, d), 0, NULL, 0), TFC_ERR_OUT_OF_MEMORY,
                   "'ram_fill'", "largest memory node");
    } else {
        printf("(this machine has %.0f GiB of RAM: the out-of-memory case needs under 32)\n",
               ram / (1 << 30));
    }
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    tfc_graph_destroy(g);
}

static void test_null_handles(void)
{
    tfc_session *s = (tfc_session *)1;
    tfc_graph *g;
    tfc_graph_create(&g);
    CU_ASSERT_EQUAL(tfc_session_create(NULL, g, &s), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(tfc_session_create(test_ctx, NULL, &s), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_session_create(test_ctx, g, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_run_wait(NULL, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_ctx_create(NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_ctx_info_get(NULL, NULL), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(tfc_graph_find(g, "nope"));
    CU_ASSERT_PTR_NULL(tfc_graph_find(g, NULL));
    /* a graph with a build error refuses a session, naming the error */
    tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, -1}));
    CU_ASSERT_EQUAL(tfc_session_create(test_ctx, g, &s), TFC_ERR_INVALID_ARGUMENT);
    HAS(tfc_errmsg(), "'x'");
    tfc_session_destroy(NULL);
    tfc_ctx_destroy(NULL);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("errors", test_ctx_open, test_ctx_close);
    TEST_ADD(test_cycle);
    TEST_ADD(test_feeds);
    TEST_ADD(test_kernel_errors_fail_the_run);
    TEST_ADD(test_uninitialized_and_variables);
    TEST_ADD(test_null_handles);
    TEST_ADD(test_tensors_too_large_for_starpu);
    return test_main();
}
