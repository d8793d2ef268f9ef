/* testutil.h: small helpers shared by the CUnit programs: a context per program, values from
 * arrays, and running a CUnit registry to an exit status. */
#ifndef TFC_TESTUTIL_H
#define TFC_TESTUTIL_H

#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Results are bitwise repeatable while every task runs on one kind of worker; when StarPU also
 * has CUDA or OpenCL workers the scheduler may run the same node on the CPU in one run and on
 * the device in the next, whose kernels round differently (tanh, exp, summation order). */
static inline int test_mixed_devices(void)
{
    tfc_ctx_info info;
    if (!test_ctx || tfc_ctx_info_get(test_ctx, &info)) return 0;
    return info.n_cpu_workers > 0 && info.n_cuda_workers + info.n_opencl_workers > 0;
}

/* Plans run as chain tasks here (tfc_pin_chain's one worker, or a block of rows per worker):
 * 2 or more CPU workers and no device. */
static inline int test_chains_here(void)
{
    tfc_ctx_info info;
    if (!test_ctx || tfc_ctx_info_get(test_ctx, &info)) return 0;
    return info.n_cpu_workers >= 2 && info.n_cuda_workers + info.n_opencl_workers == 0;
}

/* A float32 value of this shape filled from seed with numbers in [-0.5, 0.5). */
static inline tfc_value *test_filled(tfc_shape shape, unsigned seed)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_create(TFC_FLOAT32, shape, &v) == TFC_OK);
    uint32_t x = seed * 2654435761u + 7u;
    for (int64_t i = 0; i < tfc_value_numel(v); i++) {
        x = x * 1664525u + 1013904223u;
        ((float *)tfc_value_data(v))[i] = (float)((double)(x >> 8) / (1 << 24) - 0.5);
    }
    return v;
}

/* 1 when two float32 arrays are equal: bitwise on one kind of worker, within rel_tol (relative
 * to max(1, |a|)) across kinds. */
static inline int test_same_f32(const float *a, const float *b, size_t n, double rel_tol)
{
    if (!test_mixed_devices()) return memcmp(a, b, n * sizeof *a) == 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - b[i]) <= rel_tol * fmax(1.0, fabs((double)a[i])))) return 0;
    return 1;
}

static inline int test_same_f64(const double *a, const double *b, size_t n, double rel_tol)
{
    if (!test_mixed_devices()) return memcmp(a, b, n * sizeof *a) == 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= rel_tol * fmax(1.0, fabs(a[i])))) return 0;
    return 1;
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
