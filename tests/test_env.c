/* test_env.c: StarPU's environment variables take effect unchanged (STARPU_NCPU=1 and
 * STARPU_SCHED=prio, read back through our own worker report), a StarPU the application
 * started is joined and left running, and StarPU failing to start (no worker) is a status.
 * STARPU_ values StarPU would abort on fail tfc_ctx_create before StarPU starts (the full
 * table is tests/test_bad_env.c); an unwritable StarPU home gives way to a private directory
 * that lives as long as StarPU; the OpenCL programs built under an application's StarPU are
 * not reused by the next StarPU. */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <starpu.h>
#include "testutil.h"
#include "../sched/testing.h"

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

/* ---- StarPU's variables, before StarPU starts ------------------------------------------- */

static void test_starpu_values_checked(void)
{
    expect_ctx_error("STARPU_NCPU", "abc", "STARPU_NCPU must be an integer in [0, ");
    expect_ctx_error("STARPU_CALIBRATE", "junk", "STARPU_CALIBRATE must be an integer in [0, 2]");
    expect_ctx_error("STARPU_SCHED", "bogus", "lws, ws, dm, dmda, dmdap, dmdar, dmdas, dmdasd");
    expect_ctx_error("STARPU_WORKERS_CPUID", "0 x", "STARPU_WORKERS_CPUID must list CPU ids");
    /* StarPU starts as usual afterwards */
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_ctx_destroy(ctx);
    /* a StarPU already running has read its environment: joining it checks nothing */
    CU_ASSERT_EQUAL_FATAL(starpu_init(NULL), 0);
    setenv("STARPU_CALIBRATE", "junk", 1);
    CU_ASSERT_EQUAL(tfc_ctx_create(&ctx), TFC_OK);
    tfc_ctx_destroy(ctx);
    unsetenv("STARPU_CALIBRATE");
    starpu_shutdown();
}

/* ---- a private StarPU home ------------------------------------------------------------- */

struct home_case {
    char file[PATH_MAX]; /* STARPU_HOME: a regular file, so nothing can go under it */
    char *saved;         /* STARPU_HOME before */
};

static void home_unwritable(struct home_case *h)
{
    const char *v = getenv("STARPU_HOME");
    h->saved = v ? strdup(v) : NULL;
    snprintf(h->file, sizeof h->file, "/tmp/tfc-test-env-home-XXXXXX");
    int fd = mkstemp(h->file);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    setenv("STARPU_HOME", h->file, 1);
}

static void home_restore(struct home_case *h)
{
    unlink(h->file);
    if (h->saved) setenv("STARPU_HOME", h->saved, 1); else unsetenv("STARPU_HOME");
    free(h->saved);
}

static int is_dir(const char *path)
{
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* A graph run on the context: StarPU writes its bus models under its home. */
static void run_something(tfc_ctx *ctx)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *y = tfc_add(g, tfc_scalar(g, TFC_FLOAT32, 2), tfc_scalar(g, TFC_FLOAT32, 3));
    tfc_session *s;
    tfc_value *out = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_run(s, 0, NULL, NULL, 1, &y, &out, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(out ? tfc_value_get(out, 0) : 0, 5.0);
    tfc_value_destroy(out);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_private_home(void)
{
    struct home_case h;
    home_unwritable(&h);
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    char *home = strdup(getenv("STARPU_HOME"));
    CU_ASSERT(strcmp(home, h.file) != 0 && is_dir(home));
    char sampling[PATH_MAX + 32];
    snprintf(sampling, sizeof sampling, "%s/.starpu/sampling/bus", home);
    CU_ASSERT(is_dir(sampling)); /* StarPU's models went there */
    char report[1024];
    tfc_ctx_describe(ctx, report, sizeof report);
    CU_ASSERT_PTR_NOT_NULL(strstr(report, home));
    run_something(ctx);
    /* a second context joins the same StarPU and home; the directory goes with the last one */
    tfc_ctx *ctx2;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx2), TFC_OK);
    tfc_ctx_destroy(ctx);
    CU_ASSERT(is_dir(home));
    run_something(ctx2);
    tfc_ctx_destroy(ctx2);
    CU_ASSERT_FALSE(is_dir(home));
    CU_ASSERT_STRING_EQUAL(getenv("STARPU_HOME"), h.file); /* as it was */
    /* the next StarPU gets a new one */
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    CU_ASSERT(strcmp(getenv("STARPU_HOME"), home) != 0 && is_dir(getenv("STARPU_HOME")));
    tfc_ctx_destroy(ctx);
    free(home);
    home_restore(&h);
}

/* The application starts StarPU after our context: our last context cannot remove the private
 * home StarPU still writes to (at its own shutdown), so it stays. */
static void test_private_home_outlived_by_application(void)
{
    struct home_case h;
    home_unwritable(&h);
    tfc_ctx *ctx;
    CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
    char *home = strdup(getenv("STARPU_HOME"));
    CU_ASSERT_EQUAL_FATAL(starpu_init(NULL), 0);
    tfc_ctx_destroy(ctx);
    CU_ASSERT(starpu_is_initialized());
    CU_ASSERT(is_dir(home));
    CU_ASSERT_STRING_EQUAL(getenv("STARPU_HOME"), home);
    starpu_shutdown(); /* writes its models: no abort */
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    CU_ASSERT_EQUAL(system(cmd), 0);
    free(home);
    home_restore(&h);
}

/* ---- OpenCL programs belong to one StarPU ----------------------------------------------- */

/* y = -x pinned to the OpenCL worker of the application's StarPU, twice, each time under a
 * StarPU started anew: the second run must build its programs again (the first StarPU's
 * OpenCL context is gone). StarPU 1.3 lists the OpenCL devices once per process, at its first
 * start, so this test runs first. */
static void test_opencl_programs_per_starpu(void)
{
    setenv("STARPU_OPENCL_ON_CPUS", "1", 1);
    for (int round = 0; round < 2; round++) {
        CU_ASSERT_EQUAL_FATAL(starpu_init(NULL), 0);
        if (!starpu_opencl_worker_get_count()) {
            fprintf(stderr, "(no OpenCL worker: skipped) ");
            starpu_shutdown();
            break;
        }
        tfc_ctx *ctx;
        CU_ASSERT_EQUAL_FATAL(tfc_ctx_create(&ctx), TFC_OK);
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){256}));
        tfc_tensor *y = tfc_neg(g, x);
        tfc_session *s;
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(ctx, g, &s), TFC_OK);
        tfc_session_set_where(s, STARPU_OPENCL);
        tfc_session_set_profiling(s, 1);
        float xd[256];
        for (int i = 0; i < 256; i++) xd[i] = (float)i;
        tfc_value *xv = test_f32(1, (int64_t[]){256}, xd), *yv = NULL;
        CU_ASSERT_EQUAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL), TFC_OK);
        CU_ASSERT_EQUAL(yv ? tfc_value_get(yv, 255) : 0, -255.0);
        const tfc_task_record *r;
        CU_ASSERT_EQUAL_FATAL(tfc_session_last_records(s, &r), 1);
        CU_ASSERT_EQUAL(starpu_worker_get_type(r[0].worker), STARPU_OPENCL_WORKER);
        tfc_value_destroy(xv);
        tfc_value_destroy(yv);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
        tfc_ctx_destroy(ctx);
        starpu_shutdown();
        CU_ASSERT_FALSE(starpu_is_initialized());
    }
    unsetenv("STARPU_OPENCL_ON_CPUS");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("env", NULL, NULL);
    TEST_ADD(test_opencl_programs_per_starpu);
    TEST_ADD(test_env_respected);
    TEST_ADD(test_join_application_runtime);
    TEST_ADD(test_no_worker_is_a_status);
    TEST_ADD(test_knobs_checked_at_start);
    TEST_ADD(test_plan_cache_knob);
    TEST_ADD(test_starpu_values_checked);
    TEST_ADD(test_private_home);
    TEST_ADD(test_private_home_outlived_by_application);
    return test_main();
}
