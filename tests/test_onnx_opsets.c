/* test_onnx_opsets.c: the opset branches of the ONNX importer, each on a one-node model written
 * here with protobuf-c and checked against the arithmetic in C: Softmax over the flattened
 * trailing dims before opset 13 and over one axis from 13; ReduceSum's axes as an attribute
 * (opset 11) and as an input (13); Split sizes as an attribute (11) and an input (13), with
 * several outputs and a zero-size one; Add with opset 6's broadcast/axis attributes;
 * BatchNormalization's is_test before opset 7 (0: training, refused with a message); and
 * initializers marked trainable that feed BatchNormalization's running statistics (kept out
 * of the trainable variables). */
#include <unistd.h>
#include "testutil.h"
#include "../onnx/onnx_import.h"

#define MAXN 6

/* One node; inputs are graph inputs (float32) or, with a value, int64 initializers. */
struct one_node {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto node, *nodes[1];
    char *in_names[MAXN], *out_names[MAXN];
    Onnx__AttributeProto attrs[4], *attr_ptrs[4];
    Onnx__ValueInfoProto vi_in[MAXN], vi_out[MAXN], *ins[MAXN], *outs[MAXN];
    Onnx__TypeProto tp_in[MAXN], tp_out[MAXN];
    Onnx__TypeProto__Tensor tt_in[MAXN], tt_out[MAXN];
    Onnx__TensorShapeProto sh_in[MAXN];
    Onnx__TensorShapeProto__Dimension dims[MAXN][4], *dim_ptrs[MAXN][4];
    Onnx__TensorProto inits[MAXN], *init_ptrs[MAXN];
    int64_t init_dims[MAXN][1];
};

static void one_node_init(struct one_node *m, char *op, int64_t opset)
{
    memset(m, 0, sizeof *m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 7;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.graph = &m->graph;
    onnx__node_proto__init(&m->node);
    m->node.op_type = op;
    m->node.name = "n";
    m->node.input = m->in_names;
    m->node.output = m->out_names;
    m->node.attribute = m->attr_ptrs;
    m->nodes[0] = &m->node;
    m->graph.n_node = 1;
    m->graph.node = m->nodes;
    m->graph.input = m->ins;
    m->graph.output = m->outs;
    m->graph.initializer = m->init_ptrs;
}

static void add_input(struct one_node *m, char *name, int rank, const int64_t *dims)
{
    int i = (int)m->graph.n_input++;
    m->in_names[m->node.n_input++] = name;
    onnx__value_info_proto__init(&m->vi_in[i]);
    onnx__type_proto__init(&m->tp_in[i]);
    onnx__type_proto__tensor__init(&m->tt_in[i]);
    onnx__tensor_shape_proto__init(&m->sh_in[i]);
    for (int d = 0; d < rank; d++) {
        onnx__tensor_shape_proto__dimension__init(&m->dims[i][d]);
        m->dims[i][d].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        m->dims[i][d].dim_value = dims[d];
        m->dim_ptrs[i][d] = &m->dims[i][d];
    }
    m->sh_in[i].n_dim = (size_t)rank;
    m->sh_in[i].dim = m->dim_ptrs[i];
    m->tt_in[i].has_elem_type = 1;
    m->tt_in[i].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    m->tt_in[i].shape = &m->sh_in[i];
    m->tp_in[i].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    m->tp_in[i].tensor_type = &m->tt_in[i];
    m->vi_in[i].name = name;
    m->vi_in[i].type = &m->tp_in[i];
    m->ins[i] = &m->vi_in[i];
}

/* An initializer input: int64 values (float ones when f is non-NULL). */
static void add_init(struct one_node *m, char *name, int n, int64_t *ints, float *f)
{
    int i = (int)m->graph.n_initializer++;
    m->in_names[m->node.n_input++] = name;
    Onnx__TensorProto *t = &m->inits[i];
    onnx__tensor_proto__init(t);
    t->name = name;
    m->init_dims[i][0] = n;
    t->n_dims = 1;
    t->dims = m->init_dims[i];
    t->has_data_type = 1;
    t->data_type = f ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    if (f) t->n_float_data = (size_t)n, t->float_data = f;
    else t->n_int64_data = (size_t)n, t->int64_data = ints;
    m->init_ptrs[i] = t;
}

static void add_output(struct one_node *m, char *name)
{
    int i = (int)m->graph.n_output++;
    m->out_names[m->node.n_output++] = name;
    onnx__value_info_proto__init(&m->vi_out[i]);
    onnx__type_proto__init(&m->tp_out[i]);
    onnx__type_proto__tensor__init(&m->tt_out[i]);
    m->tt_out[i].has_elem_type = 1;
    m->tt_out[i].elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    m->tp_out[i].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    m->tp_out[i].tensor_type = &m->tt_out[i];
    m->vi_out[i].name = name;
    m->vi_out[i].type = &m->tp_out[i];
    m->outs[i] = &m->vi_out[i];
}

static void add_attr_int(struct one_node *m, char *name, int64_t v)
{
    Onnx__AttributeProto *a = &m->attrs[m->node.n_attribute];
    onnx__attribute_proto__init(a);
    a->name = name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = 1;
    a->i = v;
    m->attr_ptrs[m->node.n_attribute++] = a;
}

static void add_attr_ints(struct one_node *m, char *name, int n, int64_t *v)
{
    Onnx__AttributeProto *a = &m->attrs[m->node.n_attribute];
    onnx__attribute_proto__init(a);
    a->name = name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = (size_t)n;
    a->ints = v;
    m->attr_ptrs[m->node.n_attribute++] = a;
}

static char model_path[256];

static tfc_status import(struct one_node *m, int trainable, tfc_graph **g, tfc_onnx_model **om)
{
    size_t n = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(n);
    onnx__model_proto__pack(&m->model, buf);
    FILE *f = fopen(model_path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(buf, 1, n, f);
    fclose(f);
    free(buf);
    CU_ASSERT_FATAL(tfc_graph_create(g) == TFC_OK);
    tfc_onnx_options o = {.trainable = trainable};
    tfc_status st = tfc_onnx_import(*g, model_path, &o, om);
    if (st) printf("\n  import: %s", tfc_graph_errmsg(*g));
    return st;
}

/* Imports m, feeds `x` (the first graph input) and fetches every output into got. */
static void run(struct one_node *m, const float *x, tfc_value **got)
{
    tfc_graph *g;
    tfc_onnx_model *om = NULL;
    CU_ASSERT_FATAL(import(m, 0, &g, &om) == TFC_OK);
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    tfc_tensor *feed = tfc_graph_find(g, om->predict->feeds[0]), *fetch[MAXN];
    for (int k = 0; k < om->predict->n_outputs; k++) fetch[k] = tfc_graph_find(g, om->predict->outputs[k]);
    tfc_shape fs = tfc_tensor_shape(feed);
    tfc_value *xv;
    CU_ASSERT_FATAL(tfc_value_from_data(TFC_FLOAT32, fs, x, &xv) == TFC_OK);
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &feed, &xv, om->predict->n_outputs, fetch, got, 0, NULL) == TFC_OK);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_onnx_model_free(om);
    tfc_graph_destroy(g);
}

static float xs24[24];

static void fill_x(void)
{
    for (int i = 0; i < 24; i++) xs24[i] = 0.1f * (float)((i * 7) % 11) - 0.3f;
}

static const int64_t dims234[3] = {2, 3, 4};

/* softmax of x [rows, n] row by row into y */
static void softmax_rows(const float *x, float *y, int rows, int n)
{
    for (int r = 0; r < rows; r++) {
        double mx = -1e30, sum = 0;
        for (int j = 0; j < n; j++) mx = fmax(mx, x[r * n + j]);
        for (int j = 0; j < n; j++) sum += exp(x[r * n + j] - mx);
        for (int j = 0; j < n; j++) y[r * n + j] = (float)(exp(x[r * n + j] - mx) / sum);
    }
}

static void check_close(const tfc_value *v, const float *want, int n)
{
    CU_ASSERT_FATAL(v != NULL);
    CU_ASSERT(tfc_value_numel(v) == n);
    for (int i = 0; i < n && i < tfc_value_numel(v); i++)
        CU_ASSERT(fabs(tfc_value_get(v, i) - want[i]) < 1e-5);
}

static void test_softmax(void)
{
    float want[24];
    tfc_value *got[1];
    struct one_node m;
    /* before 13: axis 1 flattens [2, 3, 4] to [2, 12] */
    one_node_init(&m, "Softmax", 11);
    add_input(&m, "x", 3, dims234);
    add_output(&m, "y");
    run(&m, xs24, got);
    softmax_rows(xs24, want, 2, 12);
    check_close(got[0], want, 24);
    tfc_value_destroy(got[0]);
    /* from 13: over the last axis only */
    one_node_init(&m, "Softmax", 13);
    add_input(&m, "x", 3, dims234);
    add_output(&m, "y");
    run(&m, xs24, got);
    softmax_rows(xs24, want, 6, 4);
    check_close(got[0], want, 24);
    tfc_value_destroy(got[0]);
}

static void test_reduce_sum(void)
{
    float want[8] = {0};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) want[a * 4 + c] += xs24[(a * 3 + b) * 4 + c];
    static int64_t axes[1] = {1};
    tfc_value *got[1];
    struct one_node m;
    one_node_init(&m, "ReduceSum", 11); /* axes attribute */
    add_input(&m, "x", 3, dims234);
    add_attr_ints(&m, "axes", 1, axes);
    add_attr_int(&m, "keepdims", 0);
    add_output(&m, "y");
    run(&m, xs24, got);
    check_close(got[0], want, 8);
    tfc_value_destroy(got[0]);
    one_node_init(&m, "ReduceSum", 13); /* axes input */
    add_input(&m, "x", 3, dims234);
    add_init(&m, "axes", 1, axes, NULL);
    add_attr_int(&m, "keepdims", 0);
    add_output(&m, "y");
    run(&m, xs24, got);
    check_close(got[0], want, 8);
    CU_ASSERT(tfc_value_shape(got[0]).rank == 2);
    tfc_value_destroy(got[0]);
}

/* Split of [2, 3, 4] along axis 2 in sizes (s0, s1): outputs are checked element by element. */
static void check_split(tfc_value **got, int64_t s0)
{
    for (int k = 0; k < 2; k++) {
        int64_t w = k ? 4 - s0 : s0, at = k ? s0 : 0;
        tfc_shape s = tfc_value_shape(got[k]);
        CU_ASSERT(s.rank == 3 && s.dims[2] == w);
        for (int r = 0; r < 6; r++)
            for (int c = 0; c < w; c++)
                CU_ASSERT(tfc_value_get(got[k], r * w + c) == xs24[r * 4 + at + c]);
        tfc_value_destroy(got[k]);
    }
}

static void test_split(void)
{
    static int64_t sizes[2] = {1, 3}, zero_sizes[2] = {0, 4};
    tfc_value *got[2];
    struct one_node m;
    one_node_init(&m, "Split", 11); /* sizes attribute */
    add_input(&m, "x", 3, dims234);
    add_attr_int(&m, "axis", 2);
    add_attr_ints(&m, "split", 2, sizes);
    add_output(&m, "a");
    add_output(&m, "b");
    run(&m, xs24, got);
    check_split(got, 1);
    one_node_init(&m, "Split", 13); /* sizes input, one part empty */
    add_input(&m, "x", 3, dims234);
    add_init(&m, "split", 2, zero_sizes, NULL);
    add_attr_int(&m, "axis", 2);
    add_output(&m, "a");
    add_output(&m, "b");
    run(&m, xs24, got);
    check_split(got, 0);
}

static void test_legacy_broadcast(void)
{
    static float b[3] = {1, 10, 100};
    float want[24];
    for (int i = 0; i < 24; i++) want[i] = xs24[i] + b[(i / 4) % 3];
    tfc_value *got[1];
    struct one_node m;
    one_node_init(&m, "Add", 6); /* B [3] aligned at axis 1 of [2, 3, 4] */
    add_input(&m, "x", 3, dims234);
    add_init(&m, "B", 3, NULL, b);
    add_attr_int(&m, "broadcast", 1);
    add_attr_int(&m, "axis", 1);
    add_output(&m, "y");
    run(&m, xs24, got);
    check_close(got[0], want, 24);
    tfc_value_destroy(got[0]);
}

static float bn_scale[3] = {1, 2, 0.5f}, bn_bias[3] = {0, 1, -1}, bn_mean[3] = {0.1f, 0, -0.2f},
             bn_var[3] = {1, 4, 0.25f};

static void bn_model(struct one_node *m, int64_t opset)
{
    one_node_init(m, "BatchNormalization", opset);
    add_input(m, "x", 3, dims234);
    add_init(m, "scale", 3, NULL, bn_scale);
    add_init(m, "B", 3, NULL, bn_bias);
    add_init(m, "mean", 3, NULL, bn_mean);
    add_init(m, "var", 3, NULL, bn_var);
    add_output(m, "y");
}

static void test_batch_norm(void)
{
    float want[24];
    for (int i = 0; i < 24; i++) {
        int c = (i / 4) % 3;
        want[i] = (float)((xs24[i] - bn_mean[c]) / sqrt(bn_var[c] + 1e-5) * bn_scale[c] + bn_bias[c]);
    }
    tfc_value *got[1];
    struct one_node m;
    bn_model(&m, 6);
    add_attr_int(&m, "is_test", 1);
    run(&m, xs24, got);
    check_close(got[0], want, 24);
    tfc_value_destroy(got[0]);
    /* is_test=0 asks for training mode, which an import for inference does not give */
    bn_model(&m, 6);
    add_attr_int(&m, "is_test", 0);
    tfc_graph *g;
    tfc_onnx_model *om = NULL;
    CU_ASSERT(import(&m, 0, &g, &om) == TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(tfc_graph_errmsg(g), "is_test=0") != NULL);
    tfc_graph_destroy(g);
    /* opset 15, trainable: scale and B are trainable variables, the running statistics not */
    bn_model(&m, 15);
    CU_ASSERT_FATAL(import(&m, 1, &g, &om) == TFC_OK);
    CU_ASSERT(om->n_variables == 4);
    for (int i = 0; i < om->n_variables; i++) {
        const char *name = tfc_tensor_name(om->variables[i]);
        int stat = !strcmp(name, "mean") || !strcmp(name, "var");
        CU_ASSERT(tfc_variable_trainable(om->variables[i]) == !stat);
    }
    tfc_onnx_model_free(om);
    tfc_graph_destroy(g);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(model_path, sizeof model_path, "%s/tfc-onnx-opsets-%d.onnx",
             tmp && *tmp ? tmp : "/tmp", (int)getpid());
    fill_x();
    if (test_ctx_open()) return 1;
    CU_initialize_registry();
    CU_pSuite s = CU_add_suite("onnx_opsets", NULL, NULL);
    CU_add_test(s, "Softmax before and from opset 13", test_softmax);
    CU_add_test(s, "ReduceSum axes: attribute (11), input (13)", test_reduce_sum);
    CU_add_test(s, "Split sizes: attribute (11), input (13), zero-size", test_split);
    CU_add_test(s, "Add with opset 6 broadcast and axis", test_legacy_broadcast);
    CU_add_test(s, "BatchNormalization is_test, trainable statistics", test_batch_norm);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    test_ctx_close();
    unlink(model_path);
    return failed ? 1 : 0;
}
