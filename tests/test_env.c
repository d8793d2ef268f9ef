/* test_env.c: StarPU's environment variables take effect unchanged (STARPU_NCPU=1 and
 * STARPU_SCHED=prio, read back through our own worker report), a StarPU the application
 * started is joined and left running, and StarPU failing to start (no worker) is a status. */
#include <string.h>
#include <unistd.h>
#include <starpu.h>
#include "testutil.h"

static void test_env_respected(void)
{
    setenv("STARPU_NCPU", "1", 1);
    setenv("STARPU_SCHED", "prio", 1);
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_ctx_info info;
    CU_ASSERT_EQUAL(tfc_ctx_info_get(ctx, &info), TFC_OK);
    CU_ASSERT_EQUAL(info.n_cpu_workers, 1);
    CU_ASSERT_STRING_EQUAL(info.sched_policy, "prio");
    CU_ASSERT(info.min_priority < info.max_priority); /* prio has a priority range */
    CU_ASSERT_FALSE(info.joined);
    char report[1024];
    tfc_ctx_describe(ctx, report, sizeof report);
    CU_ASSERT_PTR_NOT_NULL(strstr(report, "scheduler prio"));
    CU_ASSERT_STRING_EQUAL(getenv("STARPU_NCPU"), "1"); /* never overridden */
    CU_ASSERT_STRING_EQUAL(getenv("STARPU_SCHED"), "prio");
    tfc_ctx_destroy(ctx);
    CU_ASSERT_FALSE(starpu_is_initialized());
    unsetenv("STARPU_NCPU");
    unsetenv("STARPU_SCHED");
}

static void test_join_application_runtime(void)
{
    CU_ASSERT_EQUAL_FATAL(starpu_init(NULL), 0);
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);
    CU_ASSERT_TRUE(info.joined);
    /* the joined runtime really runs our graphs */
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *y = tfc_add(g, tfc_scalar(g, TFC_FLOAT32, 2), tfc_scalar(g, TFC_FLOAT32, 3));
    tfc_session *s;
    tfc_value *out;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 0, NULL, NULL, 1, &y, &out, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_get(out, 0), 5.0);
    tfc_value_destroy(out);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    CU_ASSERT_TRUE(starpu_is_initialized()); /* left running for its owner */
    starpu_shutdown();
    CU_ASSERT_FALSE(starpu_is_initialized());
}

static void test_no_worker_is_a_status(void)
{
    setenv("STARPU_NCPU", "0", 1);
    setenv("STARPU_NOPENCL", "0", 1);
    setenv("STARPU_NCUDA", "0", 1);
    tfc_ctx *ctx = (tfc_ctx *)1;
    CU_ASSERT_EQUAL(tfc_ctx_create(&ctx), TFC_ERR_NO_DEVICE);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "no worker"));
    unsetenv("STARPU_NCPU");
    unsetenv("STARPU_NOPENCL");
    unsetenv("STARPU_NCUDA");
    /* and StarPU starts fine afterwards */
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_ctx_destroy(ctx);
}

/* Our own variables: a bad value or an unknown TFC_ name fails tfc_ctx_create with a message
 * naming it, before StarPU starts; good values take effect. */
static void expect_ctx_error(const char *name, const char *value, const char *in_msg)
{
    setenv(name, value, 1);
    tfc_ctx *ctx = (tfc_ctx *)1;
    CU_ASSERT_EQUAL(tfc_ctx_create(&ctx), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), in_msg));
    if (!strstr(tfc_errmsg(), in_msg)) fprintf(stderr, "%s=%s: %s\n", name, value, tfc_errmsg());
    CU_ASSERT_FALSE(starpu_is_initialized());
    unsetenv(name);
}

static void test_knobs_checked_at_start(void)
{
    expect_ctx_error("TFC_PRIORITIES", "2", "TFC_PRIORITIES must be 0 or 1, not '2'");
    expect_ctx_error("TFC_REPORT", "yes", "TFC_REPORT must be 0 or 1");
    expect_ctx_error("TFC_TRACE", "", "TFC_TRACE is empty");
    expect_ctx_error("TFC_PLAN_CACHE", "0", "TFC_PLAN_CACHE must be an integer in [1,");
    expect_ctx_error("TFC_PLAN_CACHE", "12x", "not '12x'");
    expect_ctx_error("TFC_STORE_EXCLUSIVE", "on", "TFC_STORE_EXCLUSIVE must be 0 or 1");
    expect_ctx_error("TFC_PRIORITY", "1", "unknown environment variable TFC_PRIORITY ");
    /* the test programs' own variables are known, whatever their values */
    setenv("TFC_TEST_SCHEDS", "anything", 1);
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_ctx_destroy(ctx);
    unsetenv("TFC_TEST_SCHEDS");
    /* the store checks its variable where it is read */
    setenv("TFC_STORE_EXCLUSIVE", "2", 1);
    tfc_store *st = (tfc_store *)1;
    CU_ASSERT_EQUAL(tfc_store_open("/tmp/tfc-test-env-never.db", TFC_STORE_CREATE, &st),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "TFC_STORE_EXCLUSIVE"));
    CU_ASSERT_EQUAL(access("/tmp/tfc-test-env-never.db", F_OK), -1); /* nothing created */
    unsetenv("TFC_STORE_EXCLUSIVE");
}

static void test_plan_cache_knob(void)
{
    setenv("TFC_PLAN_CACHE", "2", 1);
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *y = tfc_neg(g, x);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(ctx, g, &s), TFC_OK);
    for (int64_t n = 1; n <= 5; n++) { /* each feed shape is its own plan */
        float d[5] = {1, 2, 3, 4, 5};
        tfc_value *xv, *yv;
        tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(1, &n), d, &xv);
        CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_OK);
        tfc_value_destroy(xv);
        tfc_value_destroy(yv);
    }
    tfc_session_stats st;
    tfc_session_get_stats(s, &st);
    CU_ASSERT_EQUAL(st.cached_plans, 2);
    CU_ASSERT_EQUAL(st.lowerings, 5);
    tfc_session_set_plan_cache_size(s, 4); /* the API overrides the variable */
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    unsetenv("TFC_PLAN_CACHE");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("env", NULL, NULL);
    TEST_ADD(test_env_respected);
    TEST_ADD(test_join_application_runtime);
    TEST_ADD(test_no_worker_is_a_status);
    TEST_ADD(test_knobs_checked_at_start);
    TEST_ADD(test_plan_cache_knob);
    return test_main();
}
