/* testutil.h: small helpers shared by the CUnit programs: a context per program, values from
 * arrays, and running a CUnit registry to an exit status. */
#ifndef TFC_TESTUTIL_H
#define TFC_TESTUTIL_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include "../src/tfc.h"

static tfc_ctx *test_ctx;

static inline int test_ctx_open(void)
{
    if (tfc_ctx_create(&test_ctx)) {
        fprintf(stderr, "tfc_ctx_create: %s\n", tfc_errmsg());
        return -1;
    }
    return 0;
}

static inline int test_ctx_close(void)
{
    tfc_ctx_destroy(test_ctx);
    test_ctx = NULL;
    return 0;
}

static inline tfc_value *test_f32(int rank, const int64_t *dims, const float *data)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(rank, dims), data, &v) == TFC_OK);
    return v;
}

/* Runs the registered suites; the exit status is the number of failures (0 = pass). */
static inline int test_main(void)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failures = (int)CU_get_number_of_failures() + (int)CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}

#define TEST_SUITE(name, init, clean) CU_pSuite suite = CU_add_suite(name, init, clean)
#define TEST_ADD(fn) CU_add_test(suite, #fn, fn)

#endif
