/* test_value.c: tfc_value: create, copy, wrap (no copy), scalar, accessors, bad arguments. */
#include <string.h>
#include "testutil.h"

static void test_create_zeroed(void)
{
    tfc_value *v;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT64, tfc_shape_of(2, (int64_t[]){3, 4}), &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_numel(v), 12);
    CU_ASSERT_EQUAL(tfc_value_nbytes(v), 96);
    CU_ASSERT_EQUAL(tfc_value_dtype(v), TFC_FLOAT64);
    CU_ASSERT_EQUAL(tfc_value_shape(v).rank, 2);
    CU_ASSERT_EQUAL(tfc_value_shape(v).dims[1], 4);
    for (int i = 0; i < 12; i++) CU_ASSERT_EQUAL(tfc_value_get(v, i), 0.0);
    tfc_value_destroy(v);
}

static void test_from_data_copies_and_wrap_borrows(void)
{
    int32_t data[3] = {1, -2, 3};
    tfc_value *c, *w;
    CU_ASSERT_EQUAL_FATAL(tfc_value_from_data(TFC_INT32, tfc_shape_of(1, (int64_t[]){3}), data, &c), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_value_wrap(TFC_INT32, tfc_shape_of(1, (int64_t[]){3}), data, &w), TFC_OK);
    CU_ASSERT_PTR_NOT_EQUAL(tfc_value_data(c), data);
    CU_ASSERT_PTR_EQUAL(tfc_value_data(w), data);
    data[1] = 42;
    CU_ASSERT_EQUAL(tfc_value_get(c, 1), -2);
    CU_ASSERT_EQUAL(tfc_value_get(w, 1), 42);
    tfc_value_destroy(c);
    tfc_value_destroy(w); /* must not free the caller's array */
    CU_ASSERT_EQUAL(data[0], 1);
}

static void test_scalar_and_dtypes(void)
{
    static const size_t sizes[] = {4, 8, 4, 8, 1, 1};
    for (int dt = 0; dt < TFC_NUM_DTYPES; dt++) {
        tfc_value *v;
        CU_ASSERT_EQUAL_FATAL(tfc_value_scalar((enum tfc_dtype)dt, 1.0, &v), TFC_OK);
        CU_ASSERT_EQUAL(tfc_value_shape(v).rank, 0);
        CU_ASSERT_EQUAL(tfc_value_numel(v), 1);
        CU_ASSERT_EQUAL(tfc_value_get(v, 0), 1.0);
        CU_ASSERT_EQUAL(tfc_dtype_size((enum tfc_dtype)dt), sizes[dt]);
        tfc_value_destroy(v);
    }
    CU_ASSERT_STRING_EQUAL(tfc_dtype_name(TFC_BOOL), "bool");
}

static void test_rank8_and_empty(void)
{
    tfc_value *v;
    int64_t d8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_UINT8, tfc_shape_of(8, d8), &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_numel(v), 16);
    tfc_value_destroy(v);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){0, 5}), &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_numel(v), 0);
    CU_ASSERT_PTR_NULL(tfc_value_data(v));
    tfc_value_destroy(v);
}

static void test_bad_arguments(void)
{
    tfc_value *v = (tfc_value *)1;
    int64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CU_ASSERT_EQUAL(tfc_value_create(TFC_FLOAT32, tfc_shape_of(9, d9), &v), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NULL(v);
    CU_ASSERT_EQUAL(tfc_value_create((enum tfc_dtype)99, tfc_shape_of(0, NULL), &v), TFC_ERR_DTYPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "dtype"));
    CU_ASSERT_EQUAL(tfc_value_create(TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){-3}), &v), TFC_ERR_SHAPE);
    CU_ASSERT_EQUAL(tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){3}), NULL, &v),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_value_create(TFC_FLOAT32, tfc_shape_of(0, NULL), NULL), TFC_ERR_INVALID_ARGUMENT);
    tfc_value_destroy(NULL);
    /* sizes that overflow: an error naming the shape, never a wrapped count */
    static const struct {
        int rank;
        int64_t dims[3];
        enum tfc_dtype dtype;
    } huge[] = {
        {1, {INT64_C(4611686018427387904)}, TFC_FLOAT32},        /* 2^62 x 4 bytes */
        {2, {INT64_C(1099511627776), INT64_C(1099511627776)}, TFC_UINT8}, /* 2^80 elements */
        {3, {INT64_C(3037000500), INT64_C(3037000500), 2}, TFC_FLOAT64},
        {1, {INT64_MAX}, TFC_INT32},
    };
    for (int i = 0; i < (int)(sizeof huge / sizeof huge[0]); i++) {
        tfc_shape sh = tfc_shape_of(huge[i].rank, huge[i].dims);
        v = (tfc_value *)1;
        CU_ASSERT_EQUAL(tfc_value_create(huge[i].dtype, sh, &v), TFC_ERR_SHAPE);
        CU_ASSERT_PTR_NULL(v);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "64 bits"));
        if (i == 1) CU_ASSERT_EQUAL(tfc_shape_numel(&sh), -1); /* overflows: no count */
    }
    /* a zero dimension makes any other dimension harmless: no elements */
    tfc_shape empty = tfc_shape_of(3, (int64_t[]){0, INT64_MAX, INT64_MAX});
    CU_ASSERT_EQUAL(tfc_shape_numel(&empty), 0);
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(TFC_FLOAT64, empty, &v), TFC_OK);
    CU_ASSERT_EQUAL(tfc_value_numel(v), 0);
    tfc_value_destroy(v);
    CU_ASSERT_EQUAL(tfc_value_numel(NULL), 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("value", NULL, NULL);
    TEST_ADD(test_create_zeroed);
    TEST_ADD(test_from_data_copies_and_wrap_borrows);
    TEST_ADD(test_scalar_and_dtypes);
    TEST_ADD(test_rank8_and_empty);
    TEST_ADD(test_bad_arguments);
    return test_main();
}
