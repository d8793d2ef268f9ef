/* test_env.c: StarPU's environment variables take effect unchanged (STARPU_NCPU=1 and
 * STARPU_SCHED=prio, read back through our own worker report), a StarPU the application
 * started is joined and left running, and StarPU failing to start (no worker) is a status. */
#include <string.h>
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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("env", NULL, NULL);
    TEST_ADD(test_env_respected);
    TEST_ADD(test_join_application_runtime);
    TEST_ADD(test_no_worker_is_a_status);
    return test_main();
}
