/* test_onnx_control.c: ONNX If and Loop through our cond and while_loop, on models written here
 * with protobuf-c and checked against the arithmetic in C: If with a predicate fed at run time
 * and branches that capture a graph input; Loop with a trip count M fed at run time, a
 * loop-carried value, an outer-scope capture and a scan output (one row per iteration); Loop
 * whose body condition stops it before M (a body initializer); a scan output with no declared
 * shape (found by probing the body); a body with the wrong number of outputs; errors
 * inside a branch (an unknown op; an op type left unset); subgraphs nested too deep. */
#include <unistd.h>
#include "testutil.h"
#include "../onnx/onnx_import.h"

static char model_path[512];

/* Everything a model is made of is allocated here and freed at once. */
static void *pool[4096];
static int n_pool;

static void *mk(size_t size)
{
    void *p = calloc(1, size);
    CU_ASSERT_FATAL(p != NULL && n_pool < 4096);
    pool[n_pool++] = p;
    return p;
}

static void pool_free(void)
{
    while (n_pool) free(pool[--n_pool]);
}

/* A tensor value info: elem type, rank (-1: no shape) and dims. */
static Onnx__ValueInfoProto *vinfo(char *name, int32_t type, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = mk(sizeof *vi);
    Onnx__TypeProto *tp = mk(sizeof *tp);
    Onnx__TypeProto__Tensor *tt = mk(sizeof *tt);
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = type;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sh = mk(sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->n_dim = (size_t)rank;
        sh->dim = mk(sizeof *sh->dim * (size_t)(rank + 1));
        for (int d = 0; d < rank; d++) {
            sh->dim[d] = mk(sizeof *sh->dim[d]);
            onnx__tensor_shape_proto__dimension__init(sh->dim[d]);
            sh->dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            sh->dim[d]->dim_value = dims[d];
        }
        tt->shape = sh;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = name;
    vi->type = tp;
    return vi;
}

static Onnx__NodeProto *node(char *op, int n_in, char **in, int n_out, char **out)
{
    Onnx__NodeProto *n = mk(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = op;
    n->name = op;
    n->n_input = (size_t)n_in;
    n->input = in;
    n->n_output = (size_t)n_out;
    n->output = out;
    return n;
}

static void attr_graph(Onnx__NodeProto *n, char *name, Onnx__GraphProto *g)
{
    Onnx__AttributeProto *a = mk(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = name;
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    a->g = g;
    Onnx__AttributeProto **as = mk(sizeof *as * (n->n_attribute + 1));
    if (n->n_attribute) memcpy(as, n->attribute, sizeof *as * n->n_attribute);
    as[n->n_attribute++] = a;
    n->attribute = as;
}

static Onnx__GraphProto *graph(char *name, int n_node, Onnx__NodeProto **nodes, int n_in,
                               Onnx__ValueInfoProto **in, int n_out, Onnx__ValueInfoProto **out)
{
    Onnx__GraphProto *g = mk(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = name;
    g->n_node = (size_t)n_node;
    g->node = nodes;
    g->n_input = (size_t)n_in;
    g->input = in;
    g->n_output = (size_t)n_out;
    g->output = out;
    return g;
}

/* An int64 scalar initializer of g. */
static void init_i64(Onnx__GraphProto *g, char *name, int64_t *v)
{
    Onnx__TensorProto *t = mk(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_int64_data = 1;
    t->int64_data = v;
    g->n_initializer = 1;
    g->initializer = mk(sizeof *g->initializer);
    g->initializer[0] = t;
}

static void write_model(Onnx__GraphProto *g)
{
    Onnx__ModelProto m;
    Onnx__OperatorSetIdProto opset, *opsets[1] = {&opset};
    onnx__model_proto__init(&m);
    onnx__operator_set_id_proto__init(&opset);
    opset.has_version = 1;
    opset.version = 13;
    m.has_ir_version = 1;
    m.ir_version = 7;
    m.n_opset_import = 1;
    m.opset_import = opsets;
    m.graph = g;
    size_t n = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(n);
    CU_ASSERT_FATAL(buf != NULL);
    onnx__model_proto__pack(&m, buf);
    FILE *f = fopen(model_path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(buf, 1, n, f) == n);
    fclose(f);
    free(buf);
}

/* Imports model_path, feeds the named inputs and fetches every output. */
static tfc_status import_run(int n_feeds, const char *const *names, tfc_value *const *vals,
                             int n_out, tfc_value **got, char *msg, size_t len)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_onnx_model *m = NULL;
    tfc_status st = tfc_onnx_import(g, model_path, NULL, &m);
    snprintf(msg, len, "%s", st ? tfc_graph_errmsg(g) : "");
    tfc_session *s = NULL;
    if (!st) {
        tfc_tensor *feeds[4], *fetches[4];
        for (int i = 0; i < n_feeds; i++) CU_ASSERT_FATAL((feeds[i] = tfc_graph_find(g, names[i])) != NULL);
        CU_ASSERT_FATAL(m->predict->n_outputs == n_out);
        for (int k = 0; k < n_out; k++) fetches[k] = tfc_graph_find(g, m->predict->outputs[k]);
        CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
        st = tfc_session_run(s, n_feeds, feeds, vals, n_out, fetches, got, 0, NULL);
        if (st) snprintf(msg, len, "%s", tfc_session_errmsg(s));
    }
    tfc_session_destroy(s);
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g);
    return st;
}

static const int64_t three[1] = {3};
static const float xs[3] = {1, 2, 3};

static tfc_value *scalar(enum tfc_dtype dt, double x)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_create(dt, tfc_shape_of(0, NULL), &v) == TFC_OK);
    if (dt == TFC_BOOL) *(uint8_t *)tfc_value_data(v) = x != 0;
    else *(int64_t *)tfc_value_data(v) = (int64_t)x;
    return v;
}

static void check_values(const tfc_value *v, int64_t rows, const float *want, int n)
{
    tfc_shape s = tfc_value_shape(v);
    CU_ASSERT_FATAL(tfc_value_numel(v) == n);
    CU_ASSERT(rows < 0 || (s.rank == 2 && s.dims[0] == rows && s.dims[1] == 3));
    for (int i = 0; i < n; i++) CU_ASSERT(tfc_value_get(v, i) == want[i]);
}

/* y = If(p) then x * x else -x, both branches capturing graph input x; then_op and else_op
 * replace the branches' ops (NULL: an op type left unset, as a damaged file has it), sq the
 * then branch's output name ("sq"; "" unnamed). */
static void if_model(char *then_op, char *else_op, char *sq)
{
    static char *then_in[] = {"x", "x"}, *else_in[] = {"x"}, *else_out[] = {"neg"},
                *if_in[] = {"p"}, *if_out[] = {"y"};
    char *then_out[] = {sq};
    Onnx__NodeProto *tn[] = {node(then_op, 2, then_in, 1, then_out)};
    Onnx__NodeProto *en[] = {node(else_op, 1, else_in, 1, else_out)};
    Onnx__ValueInfoProto *to[] = {vinfo(sq, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    Onnx__ValueInfoProto *eo[] = {vinfo("neg", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    Onnx__NodeProto *ifn = node("If", 1, if_in, 1, if_out);
    attr_graph(ifn, "then_branch", graph("then", 1, tn, 0, NULL, 1, to));
    attr_graph(ifn, "else_branch", graph("else", 1, en, 0, NULL, 1, eo));
    Onnx__NodeProto *nodes[] = {ifn};
    Onnx__ValueInfoProto *in[] = {vinfo("p", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL),
                                  vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    Onnx__ValueInfoProto *out[] = {vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    write_model(graph("if", 1, nodes, 2, in, 1, out));
    pool_free();
}

static void test_if(void)
{
    if_model("Mul", "Neg", "sq");
    static const char *names[] = {"p", "x"};
    static const float sq[3] = {1, 4, 9}, neg[3] = {-1, -2, -3};
    for (int p = 0; p < 2; p++) {
        tfc_value *vals[2] = {scalar(TFC_BOOL, p), test_f32(1, three, xs)}, *got[1] = {0};
        char msg[1024];
        CU_ASSERT_FATAL(import_run(2, names, vals, 1, got, msg, sizeof msg) == TFC_OK);
        check_values(got[0], -1, p ? sq : neg, 3);
        for (int i = 0; i < 2; i++) tfc_value_destroy(vals[i]);
        tfc_value_destroy(got[0]);
    }
}

/* Loop(M, "", v0 = x) with body (i, c, v): w = v + x (x captured from outside), c_out = c, or
 * i < 1 with stop_early (an initializer of the body), and the scan output w. scan_rank -1
 * leaves the scan output's shape undeclared; extra_out adds a body output too many. */
static void loop_model(int stop_early, int scan_rank, int extra_out)
{
    static char *add_in[] = {"v", "x"}, *add_out[] = {"w"}, *id_in[] = {"c"},
                *id_out[] = {"c_out"}, *lt_in[] = {"i", "one"}, *scan_in[] = {"w"},
                *scan_out[] = {"s"}, *loop_in[] = {"M", "", "x"}, *loop_out[] = {"y", "scan"};
    Onnx__NodeProto *bn[] = {node("Add", 2, add_in, 1, add_out),
                             stop_early ? node("Less", 2, lt_in, 1, id_out)
                                        : node("Identity", 1, id_in, 1, id_out),
                             node("Identity", 1, scan_in, 1, scan_out)};
    Onnx__ValueInfoProto *bin[] = {vinfo("i", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL),
                                   vinfo("c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL),
                                   vinfo("v", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    Onnx__ValueInfoProto *bout[] = {
        vinfo("c_out", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL),
        vinfo("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three),
        vinfo("s", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, scan_rank, three),
        vinfo("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    Onnx__GraphProto *body = graph("body", 3, bn, 3, bin, 3 + extra_out, bout);
    static int64_t one = 1;
    if (stop_early) init_i64(body, "one", &one);
    Onnx__NodeProto *ln = node("Loop", 3, loop_in, 2, loop_out);
    attr_graph(ln, "body", body);
    Onnx__NodeProto *nodes[] = {ln};
    static const int64_t rows3[2] = {-1, 3};
    Onnx__ValueInfoProto *in[] = {vinfo("M", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL),
                                  vinfo("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three)};
    Onnx__ValueInfoProto *out[] = {vinfo("y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, three),
                                   vinfo("scan", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, rows3)};
    out[1]->type->tensor_type->shape->dim[0]->value_case =
        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    out[1]->type->tensor_type->shape->dim[0]->dim_param = "iterations";
    write_model(graph("loop", 1, nodes, 2, in, 2, out));
    pool_free();
}

static void run_loop(int64_t trips, float *y, float *scan, int64_t *rows)
{
    static const char *names[] = {"M", "x"};
    tfc_value *vals[2] = {scalar(TFC_INT64, (double)trips), test_f32(1, three, xs)};
    tfc_value *got[2] = {0};
    char msg[1024];
    tfc_status st = import_run(2, names, vals, 2, got, msg, sizeof msg);
    if (st) fprintf(stderr, "loop: %s\n", msg);
    CU_ASSERT_FATAL(st == TFC_OK);
    *rows = tfc_value_shape(got[1]).dims[0];
    for (int i = 0; i < 3; i++) y[i] = (float)tfc_value_get(got[0], i);
    for (int64_t i = 0; i < 3 * *rows && i < 30; i++) scan[i] = (float)tfc_value_get(got[1], i);
    for (int i = 0; i < 2; i++) {
        tfc_value_destroy(vals[i]);
        tfc_value_destroy(got[i]);
    }
}

static void test_loop_trip_count(void)
{
    loop_model(0, 1, 0);
    float y[3], scan[30];
    int64_t rows;
    run_loop(3, y, scan, &rows); /* v = x + 3x; rows 2x, 3x, 4x */
    CU_ASSERT(rows == 3);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(y[i] == 4 * xs[i]);
        for (int r = 0; r < 3; r++) CU_ASSERT(scan[3 * r + i] == (float)(r + 2) * xs[i]);
    }
    run_loop(0, y, scan, &rows); /* no iteration: the initial value, an empty scan */
    CU_ASSERT(rows == 0);
    for (int i = 0; i < 3; i++) CU_ASSERT(y[i] == xs[i]);
}

/* The scan output's shape left undeclared: found by mapping the body once aside. */
static void test_loop_undeclared_scan(void)
{
    loop_model(0, -1, 0);
    float y[3], scan[30];
    int64_t rows;
    run_loop(2, y, scan, &rows);
    CU_ASSERT(rows == 2);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(y[i] == 3 * xs[i]);
        for (int r = 0; r < 2; r++) CU_ASSERT(scan[3 * r + i] == (float)(r + 2) * xs[i]);
    }
}

static void test_loop_condition(void)
{
    loop_model(1, 1, 0);
    float y[3], scan[30];
    int64_t rows;
    run_loop(10, y, scan, &rows); /* iterations 0 and 1 run: i < 1 is false after the second */
    CU_ASSERT(rows == 2);
    for (int i = 0; i < 3; i++) CU_ASSERT(y[i] == 3 * xs[i]);
    run_loop(1, y, scan, &rows); /* M stops it first */
    CU_ASSERT(rows == 1);
    for (int i = 0; i < 3; i++) CU_ASSERT(y[i] == 2 * xs[i]);
}

/* Errors inside a branch name the inner node; unset names and op types inside subgraphs are
 * read as "" (not followed as NULL); a branch's unnamed output is refused. */
static void test_subgraph_errors(void)
{
    char msg[1024];
    tfc_value *got[1] = {0};
    if_model("FancyRelu", "Neg", "sq");
    CU_ASSERT(import_run(0, NULL, NULL, 1, got, msg, sizeof msg) == TFC_ERR_NOT_FOUND);
    CU_ASSERT(strstr(msg, "'FancyRelu'") && strstr(msg, "node 'FancyRelu'") &&
              strstr(msg, "opset 13"));
    if_model("Mul", NULL, "sq");
    CU_ASSERT(import_run(0, NULL, NULL, 1, got, msg, sizeof msg) == TFC_ERR_NOT_FOUND);
    CU_ASSERT(strstr(msg, "unknown op ''") != NULL);
    /* a branch output without a name ("" is an absent value): refused, naming the branch */
    if_model("Mul", "Neg", "");
    CU_ASSERT(import_run(0, NULL, NULL, 1, got, msg, sizeof msg) == TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(msg, "graph output 0 of graph 'then'") && strstr(msg, "no name"));
}

/* 40 Ifs, each in the previous one's then_branch: refused when read, before any recursion
 * of the import could run out of stack. */
static void test_nesting(void)
{
    static char *if_in[] = {"p"};
    Onnx__GraphProto *inner = graph("leaf", 0, NULL, 0, NULL, 0, NULL);
    for (int d = 0; d < 40; d++) {
        Onnx__NodeProto **ns = mk(sizeof *ns);
        ns[0] = node("If", 1, if_in, 0, NULL);
        attr_graph(ns[0], "then_branch", inner);
        inner = graph("level", 1, ns, 0, NULL, 0, NULL);
    }
    write_model(inner);
    pool_free();
    char msg[1024];
    CU_ASSERT(import_run(0, NULL, NULL, 0, NULL, msg, sizeof msg) == TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(msg, "subgraphs nested deeper than 32") != NULL);
}

static void test_loop_errors(void)
{
    char msg[1024];
    tfc_value *got[2] = {0};
    loop_model(0, 1, 1);
    CU_ASSERT(import_run(0, NULL, NULL, 2, got, msg, sizeof msg) == TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(msg, "the body must take 3 inputs and give 3 outputs, not 3 and 4") != NULL);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(model_path, sizeof model_path, "%s/tfc-onnx-control-%d.onnx",
             tmp && *tmp ? tmp : "/tmp", (int)getpid());
    if (test_ctx_open()) return 1;
    CU_initialize_registry();
    CU_pSuite s = CU_add_suite("onnx_control", NULL, NULL);
    CU_add_test(s, "If: run-time predicate, captured input", test_if);
    CU_add_test(s, "Loop: trip count, carried value, capture, scan", test_loop_trip_count);
    CU_add_test(s, "Loop: body condition and body initializer", test_loop_condition);
    CU_add_test(s, "Loop: scan shape not declared", test_loop_undeclared_scan);
    CU_add_test(s, "Loop: wrong body", test_loop_errors);
    CU_add_test(s, "errors inside subgraphs, unset op types", test_subgraph_errors);
    CU_add_test(s, "subgraphs nested too deep", test_nesting);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    test_ctx_close();
    unlink(model_path);
    return failed ? 1 : 0;
}
