/* test_graph.c: building graphs: names (generated, given, renamed, unique), attributes parsed
 * from the op's table, shape and dtype inference with an unknown leading dimension, sticky
 * build errors that name the node, internal errors that name the source line, lookup by name,
 * control inputs. No StarPU needed. */
#include <string.h>
#include "testutil.h"
#include "../graph/graph.h" /* tfc_graph_error, TFC_CHECK */

static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static void test_names(void)
{
    tfc_graph *g;
    CU_ASSERT_EQUAL_FATAL(tfc_graph_create(&g), TFC_OK);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 3));
    tfc_tensor *a = tfc_relu(g, x), *b = tfc_relu(g, x);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(x), "x");
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(a), "relu");
    CU_ASSERT_STRING_NOT_EQUAL(tfc_tensor_name(b), "relu");
    CU_ASSERT_EQUAL(tfc_tensor_set_name(a, "hidden"), TFC_OK);
    CU_ASSERT_PTR_EQUAL(tfc_graph_find(g, "hidden"), a);
    CU_ASSERT_PTR_NULL(tfc_graph_find(g, "relu"));
    CU_ASSERT_PTR_EQUAL(tfc_graph_find(g, "x"), x);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_op(a), "relu");
    /* a taken name is an error that names both */
    CU_ASSERT_EQUAL(tfc_tensor_set_name(b, "x"), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "'x'"));
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_placeholder(g, "x", TFC_FLOAT32, S2(1, 1)));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_destroy(g);
}

static void test_many_nodes_unique_names(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *t = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    for (int i = 0; i < 2000; i++) t = tfc_neg(g, t);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_graph_num_nodes(g), 2001);
    CU_ASSERT_PTR_EQUAL(tfc_graph_find(g, tfc_tensor_name(t)), t);
    tfc_graph_destroy(g);
}

/* Renaming when the name table is at its load limit: it grows before the node changes. */
static void test_rename_at_table_growth(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *t[32];
    t[0] = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    for (int i = 1; i < 32; i++) t[i] = tfc_neg(g, t[i - 1]); /* 32 names: a table of 64 */
    for (int i = 0; i < 32; i++) {
        char name[32];
        snprintf(name, sizeof name, "renamed_%d", i);
        CU_ASSERT_EQUAL(tfc_tensor_set_name(t[i], name), TFC_OK);
    }
    for (int i = 0; i < 32; i++)
        CU_ASSERT_PTR_EQUAL(tfc_graph_find(g, tfc_tensor_name(t[i])), t[i]);
    CU_ASSERT_PTR_NULL(tfc_graph_find(g, "x"));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    tfc_graph_destroy(g);
}

/* A broken invariant is TFC_ERR_INTERNAL with the file and line, and like every graph error it
 * stays the graph's first. */
static void test_internal_errors(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    CU_ASSERT_EQUAL(TFC_CHECK(1 + 1 == 2, tfc_graph_error, g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_EQUAL(TFC_CHECK(1 + 1 == 3, tfc_graph_error, g), TFC_ERR_INTERNAL);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "test_graph.c:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "internal error: 1 + 1 == 3"));
    CU_ASSERT_EQUAL(tfc_graph_error(g, TFC_ERR_SHAPE, "later"), TFC_ERR_SHAPE);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INTERNAL);
    CU_ASSERT_STRING_EQUAL(tfc_status_string(TFC_ERR_INTERNAL), "internal error");
    tfc_graph_destroy(g);
}

static void test_inference(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 784));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S2(784, 10), tfc_init_zeros());
    tfc_tensor *y = tfc_matmul(g, x, w, 0, 0);
    tfc_shape s = tfc_tensor_shape(y);
    CU_ASSERT_EQUAL(s.rank, 2);
    CU_ASSERT_EQUAL(s.dims[0], -1);
    CU_ASSERT_EQUAL(s.dims[1], 10);
    tfc_tensor *r = tfc_reshape(g, x, tfc_shape_of(3, (int64_t[]){-1, 28, 28}));
    CU_ASSERT_EQUAL(tfc_tensor_shape(r).dims[0], -1);
    tfc_tensor *m = tfc_reduce_mean(g, y, 1, (int64_t[]){1}, 1);
    CU_ASSERT_EQUAL(tfc_tensor_shape(m).rank, 2);
    CU_ASSERT_EQUAL(tfc_tensor_shape(m).dims[1], 1);
    CU_ASSERT_EQUAL(tfc_tensor_dtype(tfc_argmax(g, y, 1)), TFC_INT64);
    CU_ASSERT_EQUAL(tfc_tensor_dtype(tfc_less(g, y, y)), TFC_BOOL);
    tfc_tensor *b = tfc_add(g, tfc_placeholder(g, "p", TFC_FLOAT64, tfc_shape_of(3, (int64_t[]){4, 1, 3})),
                            tfc_placeholder(g, "q", TFC_FLOAT64, S2(2, 1)));
    s = tfc_tensor_shape(b);
    CU_ASSERT(s.rank == 3 && s.dims[0] == 4 && s.dims[1] == 2 && s.dims[2] == 3);
    tfc_tensor *parts[3];
    CU_ASSERT_EQUAL(tfc_split(g, tfc_placeholder(g, "z", TFC_INT32, S2(6, 9)), 3, 1, parts), TFC_OK);
    CU_ASSERT_EQUAL(tfc_tensor_shape(parts[2]).dims[1], 3);
    CU_ASSERT_STRING_EQUAL(tfc_tensor_name(parts[2]) + strlen(tfc_tensor_name(parts[2])) - 2, ":2");
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    tfc_graph_destroy(g);
}

static void test_generic_op_and_attributes(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, S2(3, 2));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, S2(3, 4));
    tfc_tensor *in[2] = {a, b};
    tfc_tensor *c = tfc_op(g, "matmul", 2, in, "transpose_a=1", NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(tfc_tensor_shape(c).dims[0], 2);
    CU_ASSERT_EQUAL(tfc_tensor_shape(c).dims[1], 4);
    tfc_tensor *t = tfc_op(g, "transpose", 1, &b, "perm=[1, 0]", NULL, 0);
    CU_ASSERT_EQUAL(tfc_tensor_shape(t).dims[0], 4);
    tfc_tensor *k = tfc_op(g, "cast", 1, &b, "dtype=float64", NULL, 0);
    CU_ASSERT_EQUAL(tfc_tensor_dtype(k), TFC_FLOAT64);
    /* unknown op, unknown attribute, bad value: each named in the message */
    CU_ASSERT_PTR_NULL(tfc_op(g, "conv9d", 1, &a, NULL, NULL, 0));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "conv9d"));
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_op(g, "matmul", 2, in, "transpose_c=1", NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "transpose_c"));
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_op(g, "cast", 1, &a, "dtype=complex128", NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "complex128"));
    tfc_graph_clear_error(g);
    int n = tfc_op_count();
    CU_ASSERT(n > 50);
    CU_ASSERT_PTR_NULL(tfc_op_name(n));
    tfc_graph_destroy(g);
}

static void test_build_errors_name_the_node(void)
{
    tfc_graph *g, *other;
    tfc_graph_create(&g);
    tfc_graph_create(&other);
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, S2(3, 2));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_FLOAT32, S2(3, 4));
    tfc_tensor *mm = tfc_matmul(g, a, b, 0, 0); /* 2 != 3 */
    CU_ASSERT_PTR_NULL(mm);
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "matmul"));
    /* the first error sticks: later builders return NULL, message unchanged */
    char first[512];
    snprintf(first, sizeof first, "%s", tfc_graph_errmsg(g));
    CU_ASSERT_PTR_NULL(tfc_relu(g, mm));
    CU_ASSERT_STRING_EQUAL(tfc_graph_errmsg(g), first);
    tfc_graph_clear_error(g);
    tfc_tensor *d = tfc_placeholder(g, "d", TFC_FLOAT64, S2(3, 2));
    CU_ASSERT_PTR_NULL(tfc_add(g, a, d));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_DTYPE);
    tfc_graph_clear_error(g);
    tfc_tensor *o = tfc_placeholder(other, "o", TFC_FLOAT32, S2(3, 2));
    CU_ASSERT_PTR_NULL(tfc_add(g, a, o));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "another graph"));
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_add(g, a, NULL));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_exp(g, tfc_placeholder(g, "i", TFC_INT32, S2(1, 1))));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_DTYPE);
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_variable(g, "v", TFC_FLOAT32, S2(-1, 2), tfc_init_zeros()));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_assign(g, a, a)); /* not a variable */
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "variable"));
    tfc_graph_clear_error(g);
    CU_ASSERT_PTR_NULL(tfc_reduce_sum(g, a, 1, (int64_t[]){5}, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "axis"));
    /* NULL graph everywhere */
    CU_ASSERT_PTR_NULL(tfc_relu(NULL, a));
    CU_ASSERT_EQUAL(tfc_graph_status(NULL), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_destroy(NULL);
    tfc_graph_destroy(other);
    tfc_graph_destroy(g);
}

/* A tensor whose bytes do not fit in int64 is refused where it is built, naming the node, so
 * nothing downstream (initializers, plans, the store) sees a wrapped-around size. */
static void test_sizes_that_overflow(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    const int64_t t40 = INT64_C(1099511627776), t62 = INT64_C(4611686018427387904);
    CU_ASSERT_PTR_NULL(tfc_variable(g, "w", TFC_FLOAT32, S2(t40, t40), tfc_init_zeros()));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "'w'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "64 bits"));
    tfc_graph_clear_error(g);
    /* the known dims of a placeholder already overflow: 2^62 float32 per row */
    CU_ASSERT_PTR_NULL(tfc_placeholder(g, "p", TFC_FLOAT32, S2(-1, t62)));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    tfc_graph_clear_error(g);
    /* inference that multiplies fits each input but not the output */
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_UINT8, S2(t40, 1));
    tfc_tensor *b = tfc_placeholder(g, "b", TFC_UINT8, S2(1, t40));
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_PTR_NULL(tfc_add(g, a, b));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "(add)"));
    tfc_graph_clear_error(g);
    /* the generic builder from text too */
    CU_ASSERT_PTR_NULL(tfc_op(g, "fill", 0, NULL, "dtype=float64,shape=[4611686018427387904,2]",
                              NULL, 0));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    tfc_graph_destroy(g);
}

static void test_control_inputs(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *a = tfc_placeholder(g, "a", TFC_FLOAT32, S2(1, 1));
    tfc_tensor *b = tfc_neg(g, a), *c = tfc_exp(g, a);
    CU_ASSERT_EQUAL(tfc_tensor_add_control_input(c, b), TFC_OK);
    CU_ASSERT_EQUAL(tfc_tensor_add_control_input(c, NULL), TFC_ERR_INVALID_ARGUMENT);
    tfc_graph_destroy(g);
}

/* Attributes as a stored graph may hold them (each case found by tests/fuzz/fuzz_attrs): sizes
 * whose sums or products overflow int64 and offsets outside the tensor are build errors that
 * say so, never a shape that wrapped around; and a default of -inf has no integer view. */
static void test_attribute_edges(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    const char *max = "9223372036854775807";
    char attrs[128];
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(2, 3));
    tfc_tensor *part = tfc_placeholder(g, "part", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){2}));
    tfc_tensor *full = tfc_placeholder(g, "full", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){3}));
    tfc_tensor *bytes3 = tfc_placeholder(g, "bytes3", TFC_UINT8, tfc_shape_of(1, (int64_t[]){3}));
    tfc_tensor *huge = tfc_placeholder(g, "huge", TFC_UINT8,
                                       tfc_shape_of(1, (int64_t[]){INT64_MAX}));
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);

    snprintf(attrs, sizeof attrs, "shape=[6,%s]", max); /* 6 * (2^63 - 1) */
    CU_ASSERT_PTR_NULL(tfc_op(g, "reshape", 1, &x, attrs, NULL, 0));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "more elements than int64 counts"));
    tfc_graph_clear_error(g);

    tfc_tensor *two_huge[2] = {huge, huge}; /* (2^63 - 1) * 2 elements on axis 0 */
    CU_ASSERT_PTR_NULL(tfc_op(g, "concat", 2, two_huge, "axis=0", NULL, 0));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "int64"));
    tfc_graph_clear_error(g);

    snprintf(attrs, sizeof attrs, "begin=[1],size=[%s]", max); /* 1 + 2^63 - 1 */
    CU_ASSERT_PTR_NULL(tfc_op(g, "slice", 1, &bytes3, attrs, NULL, 0));
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
    tfc_graph_clear_error(g);

    /* slice_grad writes its input at begin inside a tensor of the target's shape */
    tfc_tensor *pf[2] = {part, full};
    snprintf(attrs, sizeof attrs, "begin=[%s]", max);
    const char *begins[3] = {"begin=[-5]", attrs, "begin=[2]"};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_PTR_NULL(tfc_op(g, "slice_grad", 2, pf, begins[i], NULL, 0));
        CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_ERR_SHAPE);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_graph_errmsg(g), "does not fit"));
        tfc_graph_clear_error(g);
    }
    CU_ASSERT_PTR_NOT_NULL(tfc_op(g, "slice_grad", 2, pf, "begin=[1]", NULL, 0));

    /* clip's bounds default to -inf and inf: the integer view is 0, not a conversion C leaves
     * undefined (INT64_MIN on x86) */
    const struct tfc_op *clip = tfc_op_lookup("clip");
    struct tfc_kattr a[TFC_MAX_ATTRS];
    CU_ASSERT_PTR_NOT_NULL_FATAL(clip);
    tfc_attrs_default(clip, a);
    for (int i = 0; i < clip->n_attrs; i++) {
        CU_ASSERT_EQUAL(a[i].i, 0);
        CU_ASSERT(isinf(a[i].f));
    }
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("graph", NULL, NULL);
    TEST_ADD(test_names);
    TEST_ADD(test_many_nodes_unique_names);
    TEST_ADD(test_rename_at_table_growth);
    TEST_ADD(test_internal_errors);
    TEST_ADD(test_inference);
    TEST_ADD(test_generic_op_and_attributes);
    TEST_ADD(test_build_errors_name_the_node);
    TEST_ADD(test_control_inputs);
    TEST_ADD(test_sizes_that_overflow);
    TEST_ADD(test_attribute_edges);
    return test_main();
}
