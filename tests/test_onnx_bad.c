/* test_onnx_bad.c: ONNX models that must import (a small MLP written here with protobuf-c:
 * MatMul, Add, Relu; initializers as raw_data, typed fields and an external file; its import
 * run and checked against the same arithmetic in C, as constants and as trainable variables,
 * read from a pipe, and through `tfc import` + `tfc run`), and each way of damaging it, which
 * must fail with a status and a message naming the problem: a truncated file, not ONNX,
 * another protobuf, an unknown op, a newer opset, type and shape mismatches, a missing
 * external data file, data sizes that do not match the dims (checked before any data is
 * read), a value-dependent input that is not constant; every prefix of the model and 1500
 * copies with bytes changed. */
#define _GNU_SOURCE /* nftw in bad_input.h */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "bad_input.h"
#include "../onnx/onnx_import.h"

extern char **environ;

/* ---- a small model, built field by field ------------------------------------------------- */
static float w_data[12], b_data[3];

struct model_parts {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__NodeProto nodes[3], *node_ptrs[3];
    char *in_mm[2], *out_mm[1], *in_add[2], *out_add[1], *in_relu[1], *out_relu[1];
    Onnx__TensorProto w, b, *inits[2];
    int64_t w_dims[2], b_dims[1];
    Onnx__StringStringEntryProto ext[1], *ext_ptrs[1];
    Onnx__ValueInfoProto x, y, *inputs[1], *outputs[1];
    Onnx__TypeProto xt, yt;
    Onnx__TypeProto__Tensor xtt, ytt;
    Onnx__TensorShapeProto xs, ys;
    Onnx__TensorShapeProto__Dimension xd[2], yd[2], *xdp[2], *ydp[2];
};

static void dim_value(Onnx__TensorShapeProto__Dimension *d, int64_t v)
{
    onnx__tensor_shape_proto__dimension__init(d);
    if (v < 0) {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        d->dim_param = "N";
    } else {
        d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d->dim_value = v;
    }
}

static void value_info(Onnx__ValueInfoProto *vi, Onnx__TypeProto *t, Onnx__TypeProto__Tensor *tt,
                       Onnx__TensorShapeProto *s, Onnx__TensorShapeProto__Dimension *d,
                       Onnx__TensorShapeProto__Dimension **dp, char *name, int64_t cols)
{
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(t);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(s);
    dim_value(&d[0], -1);
    dim_value(&d[1], cols);
    dp[0] = &d[0];
    dp[1] = &d[1];
    s->n_dim = 2;
    s->dim = dp;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = s;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    vi->name = name;
    vi->type = t;
}

static void node(Onnx__NodeProto *n, char *op, char *name, char **in, int n_in, char **out)
{
    onnx__node_proto__init(n);
    n->op_type = op;
    n->name = name;
    n->n_input = (size_t)n_in;
    n->input = in;
    n->n_output = 1;
    n->output = out;
}

/* x [N, 4] -> relu(x W + b) [N, 3]; W as raw_data, b as float_data. */
static void model_init(struct model_parts *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < 12; i++) w_data[i] = 0.25f * (float)(i % 5) - 0.4f;
    for (int i = 0; i < 3; i++) b_data[i] = 0.1f * (float)(i + 1);
    onnx__model_proto__init(&p->model);
    onnx__graph_proto__init(&p->graph);
    onnx__operator_set_id_proto__init(&p->opset);
    p->opset.domain = "";
    p->opset.has_version = 1;
    p->opset.version = 13;
    p->opsets[0] = &p->opset;
    p->model.has_ir_version = 1;
    p->model.ir_version = 8;
    p->model.n_opset_import = 1;
    p->model.opset_import = p->opsets;
    p->model.graph = &p->graph;
    p->in_mm[0] = "x"; p->in_mm[1] = "W"; p->out_mm[0] = "h";
    p->in_add[0] = "h"; p->in_add[1] = "b"; p->out_add[0] = "z";
    p->in_relu[0] = "z"; p->out_relu[0] = "y";
    node(&p->nodes[0], "MatMul", "mm", p->in_mm, 2, p->out_mm);
    node(&p->nodes[1], "Add", "add", p->in_add, 2, p->out_add);
    node(&p->nodes[2], "Relu", "relu_node", p->in_relu, 1, p->out_relu);
    for (int i = 0; i < 3; i++) p->node_ptrs[i] = &p->nodes[i];
    p->graph.n_node = 3;
    p->graph.node = p->node_ptrs;
    onnx__tensor_proto__init(&p->w);
    p->w.name = "W";
    p->w_dims[0] = 4;
    p->w_dims[1] = 3;
    p->w.n_dims = 2;
    p->w.dims = p->w_dims;
    p->w.has_data_type = 1;
    p->w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    p->w.has_raw_data = 1;
    p->w.raw_data.len = sizeof w_data;
    p->w.raw_data.data = (uint8_t *)w_data;
    onnx__tensor_proto__init(&p->b);
    p->b.name = "b";
    p->b_dims[0] = 3;
    p->b.n_dims = 1;
    p->b.dims = p->b_dims;
    p->b.has_data_type = 1;
    p->b.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    p->b.n_float_data = 3;
    p->b.float_data = b_data;
    p->inits[0] = &p->w;
    p->inits[1] = &p->b;
    p->graph.n_initializer = 2;
    p->graph.initializer = p->inits;
    value_info(&p->x, &p->xt, &p->xtt, &p->xs, p->xd, p->xdp, "x", 4);
    value_info(&p->y, &p->yt, &p->ytt, &p->ys, p->yd, p->ydp, "y", 3);
    p->inputs[0] = &p->x;
    p->outputs[0] = &p->y;
    p->graph.n_input = 1;
    p->graph.input = p->inputs;
    p->graph.n_output = 1;
    p->graph.output = p->outputs;
}

/* W moved to the external file `location` (which is written when write_it). */
static void model_external(struct model_parts *p, char *location, int write_it)
{
    onnx__string_string_entry_proto__init(&p->ext[0]);
    p->ext[0].key = "location";
    p->ext[0].value = location;
    p->ext_ptrs[0] = &p->ext[0];
    p->w.n_external_data = 1;
    p->w.external_data = p->ext_ptrs;
    p->w.has_data_location = 1;
    p->w.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    p->w.has_raw_data = 0;
    if (write_it) {
        FILE *f = fopen(bad_path(location), "wb");
        CU_ASSERT_FATAL(f != NULL);
        fwrite(w_data, 1, sizeof w_data, f);
        fclose(f);
    }
}

static const char *model_write(const struct model_parts *p, const char *name)
{
    size_t n = onnx__model_proto__get_packed_size(&p->model);
    uint8_t *buf = malloc(n);
    CU_ASSERT_FATAL(buf != NULL);
    onnx__model_proto__pack(&p->model, buf);
    const char *path = bad_path(name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(buf, 1, n, f);
    fclose(f);
    free(buf);
    return path;
}

/* ---- checks ------------------------------------------------------------------------------- */
static const float x_data[8] = {1, -2, 0.5f, 3, -1, 0.25f, 2, -0.75f};

static void expected_y(float *y)
{
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 3; j++) {
            float s = b_data[j];
            for (int k = 0; k < 4; k++) s += x_data[r * 4 + k] * w_data[k * 3 + j];
            y[r * 3 + j] = s > 0 ? s : 0;
        }
}

/* Imports path, runs x through the predict signature and compares with the C arithmetic. */
static void check_good(const char *path, int trainable)
{
    tfc_graph *g;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_onnx_options o = {.trainable = trainable};
    tfc_onnx_model *m = NULL;
    tfc_status st = tfc_onnx_import(g, path, &o, &m);
    if (st) printf("\n  unexpected: %s\n", tfc_graph_errmsg(g));
    CU_ASSERT_FATAL(st == TFC_OK);
    CU_ASSERT(m->opset == 13);
    CU_ASSERT(m->n_variables == (trainable ? 2 : 0));
    CU_ASSERT_FATAL(m->predict->n_feeds == 1 && m->predict->n_outputs == 1);
    tfc_tensor *x = tfc_graph_find(g, m->predict->feeds[0]);
    tfc_tensor *y = tfc_graph_find(g, m->predict->outputs[0]);
    CU_ASSERT_FATAL(x && y);
    CU_ASSERT(tfc_tensor_shape(x).dims[0] == -1); /* the symbolic batch dimension */
    tfc_session *s;
    CU_ASSERT_FATAL(tfc_session_create(test_ctx, g, &s) == TFC_OK);
    if (trainable) {
        CU_ASSERT(tfc_variable_trainable(m->variables[0]));
        CU_ASSERT(tfc_onnx_init_variables(s, m) == TFC_OK);
    }
    tfc_value *xv = test_f32(2, (int64_t[]){2, 4}, x_data), *yv = NULL;
    CU_ASSERT_FATAL(tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL) == TFC_OK);
    float want[6];
    expected_y(want);
    for (int i = 0; i < 6; i++) CU_ASSERT(fabs(tfc_value_get(yv, i) - want[i]) < 1e-6);
    tfc_value_destroy(xv);
    tfc_value_destroy(yv);
    tfc_session_destroy(s);
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g);
}

/* The import fails with status, and its message holds each of the NULL-ended words. */
static void expect_fail(const char *path, const tfc_onnx_options *o, tfc_status status, ...)
{
    tfc_graph *g;
    CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
    tfc_onnx_model *m = (tfc_onnx_model *)1;
    tfc_status st = tfc_onnx_import(g, path, o, &m);
    const char *msg = tfc_graph_errmsg(g);
    printf("\n  %s -> %s: %s", strrchr(path, '/') + 1, tfc_status_string(st), msg);
    CU_ASSERT(st == status);
    CU_ASSERT(m == NULL);
    va_list ap;
    va_start(ap, status);
    for (const char *w; (w = va_arg(ap, const char *));) {
        if (!strstr(msg, w)) printf("\n  missing '%s'", w);
        CU_ASSERT(strstr(msg, w) != NULL);
    }
    va_end(ap);
    tfc_graph_destroy(g);
}

/* The FIFO's write end once a reader has opened it, or -1 after 30 s without one (an import
 * that never opens its file must fail the test, not hang it in open). */
static int open_fifo_writer(const char *fifo)
{
    for (int tries = 0; tries < 30000; tries++) {
        int fd = open(fifo, O_WRONLY | O_NONBLOCK); /* ENXIO while nobody reads */
        if (fd >= 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
            return fd;
        }
        usleep(1000);
    }
    return -1;
}

/* Copies the file named by arg[0] into the FIFO named by arg[1] (a writer thread). A reader
 * that closes early makes a write fail (EPIPE: main ignores SIGPIPE), which ends the copy. */
static void *fifo_writer(void *arg)
{
    char **paths = arg;
    FILE *in = fopen(paths[0], "rb");
    int out = open_fifo_writer(paths[1]);
    char buf[4096];
    for (size_t n; in && out >= 0 && (n = fread(buf, 1, sizeof buf, in)) > 0;)
        if (write(out, buf, n) != (ssize_t)n) break;
    if (in) fclose(in);
    if (out >= 0) close(out);
    return NULL;
}

/* A model read from a pipe (not mapped as a regular file is) imports the same. */
static void check_good_from_fifo(const char *path)
{
    char file[PATH_MAX], fifo[PATH_MAX];
    snprintf(file, sizeof file, "%s", path);
    snprintf(fifo, sizeof fifo, "%s", bad_path("good.fifo"));
    unlink(fifo);
    CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
    char *paths[2] = {file, fifo};
    pthread_t t;
    CU_ASSERT_FATAL(pthread_create(&t, NULL, fifo_writer, paths) == 0);
    check_good(fifo, 0);
    pthread_join(t, NULL);
    unlink(fifo);
}

static void test_good_model(void)
{
    struct model_parts p;
    model_init(&p);
    const char *path = model_write(&p, "good.onnx");
    check_good(path, 0);
    check_good(path, 1);
    check_good_from_fifo(path);
    model_external(&p, "w.bin", 1);
    check_good(model_write(&p, "external.onnx"), 0);
}

static void test_not_onnx(void)
{
    struct model_parts p;
    model_init(&p);
    const char *good = model_write(&p, "good.onnx");
    size_t n;
    unsigned char *bytes = bad_read_file(good, &n);
    CU_ASSERT_FATAL(bytes && n > 40);
    /* cut inside the graph: protobuf-c finds a length past the end */
    CU_ASSERT_FATAL(bad_write_file(bad_path("truncated.onnx"), bytes, n - 30) == 0);
    expect_fail(bad_path("truncated.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "truncated.onnx",
                "truncated", NULL);
    free(bytes);
    CU_ASSERT_FATAL(bad_write_file(bad_path("text.onnx"), "hello, I am not a model\n", 24) == 0);
    expect_fail(bad_path("text.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "text.onnx",
                "not an ONNX model", NULL);
    CU_ASSERT_FATAL(bad_write_file(bad_path("empty.onnx"), "", 0) == 0);
    expect_fail(bad_path("empty.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "empty", NULL);
    expect_fail(bad_path("absent.onnx"), NULL, TFC_ERR_NOT_FOUND, "absent.onnx", NULL);
    /* a TensorProto parses as a ModelProto of unknown fields: no graph */
    size_t tn = onnx__tensor_proto__get_packed_size(&p.w);
    uint8_t *tb = malloc(tn);
    onnx__tensor_proto__pack(&p.w, tb);
    CU_ASSERT_FATAL(bad_write_file(bad_path("tensor.onnx"), tb, tn) == 0);
    free(tb);
    expect_fail(bad_path("tensor.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "not an ONNX model",
                NULL);
}

static void test_unknown_op_and_opset(void)
{
    struct model_parts p;
    model_init(&p);
    p.nodes[2].op_type = "FancyRelu";
    expect_fail(model_write(&p, "unknown_op.onnx"), NULL, TFC_ERR_NOT_FOUND, "FancyRelu",
                "relu_node", "opset 13", NULL);
    model_init(&p);
    p.opset.version = 99;
    expect_fail(model_write(&p, "opset99.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "opset 99",
                "newer", NULL);
    model_init(&p);
    p.nodes[2].domain = "com.example";
    expect_fail(model_write(&p, "domain.onnx"), NULL, TFC_ERR_NOT_FOUND, "com.example",
                "relu_node", NULL);
}

static void test_type_and_shape_mismatch(void)
{
    struct model_parts p;
    model_init(&p);
    p.ytt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64; /* declared, but we compute float */
    expect_fail(model_write(&p, "out_type.onnx"), NULL, TFC_ERR_SHAPE, "'y'", "int64", "float32",
                NULL);
    model_init(&p);
    p.yd[1].dim_value = 7;
    expect_fail(model_write(&p, "out_shape.onnx"), NULL, TFC_ERR_SHAPE, "'y'", "[-1, 7]",
                "[-1, 3]", NULL);
    model_init(&p);
    p.xd[1].dim_value = 5; /* x [N, 5] @ W [4, 3] */
    expect_fail(model_write(&p, "in_shape.onnx"), NULL, TFC_ERR_SHAPE, "'mm'", "MatMul", NULL);
    model_init(&p);
    p.xtt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    expect_fail(model_write(&p, "in_type.onnx"), NULL, TFC_ERR_DTYPE, "'x'", "float16", NULL);
    model_init(&p);
    p.xd[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    p.xd[1].dim_param = "features";
    expect_fail(model_write(&p, "in_symbolic.onnx"), NULL, TFC_ERR_SHAPE, "'x'", "symbolic",
                NULL);
    /* a frozen input whose value does not fit the declared type */
    model_init(&p);
    tfc_value *v;
    CU_ASSERT_FATAL(tfc_value_create(TFC_INT64, tfc_shape_of(2, (int64_t[]){2, 4}), &v) == 0);
    const char *names[] = {"x"};
    const tfc_value *vals[] = {v};
    tfc_onnx_options o = {.n_frozen = 1, .frozen_names = names, .frozen_values = vals};
    expect_fail(model_write(&p, "frozen.onnx"), &o, TFC_ERR_SHAPE, "'x'", "int64", NULL);
    tfc_value_destroy(v);
}

static void test_bad_data(void)
{
    struct model_parts p;
    model_init(&p);
    model_external(&p, "missing.bin", 0);
    expect_fail(model_write(&p, "no_external.onnx"), NULL, TFC_ERR_NOT_FOUND, "'W'",
                "missing.bin", NULL);
    model_init(&p);
    model_external(&p, "../escape.bin", 0);
    expect_fail(model_write(&p, "escape.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "escape.bin",
                "inside the model's folder", NULL);
    model_init(&p);
    p.w.raw_data.len = 44; /* 11 floats for [4, 3] */
    expect_fail(model_write(&p, "raw_short.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "'W'",
                "44 bytes", "48", NULL);
    model_init(&p);
    p.b.n_float_data = 2;
    expect_fail(model_write(&p, "typed_short.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "'b'",
                "2 values", "3", NULL);
    /* an int32 tensor whose values sit in float_data: NaN and 3e9 do not convert (C leaves
     * that conversion undefined: fuzz_onnx's UBSan finding) */
    float odd[2][3] = {{1, NAN, 2}, {1, 2, 3e9f}};
    for (int i = 0; i < 2; i++) {
        model_init(&p);
        p.b.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
        p.b.float_data = odd[i];
        expect_fail(model_write(&p, "int_from_float.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT,
                    "'b'", "float_data", "int32", NULL);
    }
    /* dims claiming 2^60 elements with 48 bytes of data: refused before any allocation */
    model_init(&p);
    p.w_dims[0] = (int64_t)1 << 30;
    p.w_dims[1] = (int64_t)1 << 30;
    expect_fail(model_write(&p, "huge_dims.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "'W'",
                "48 bytes", NULL);
    /* an initializer without a name (fuzz_onnx: it imported as a constant but not as a
     * trainable variable, whose node needs a name) */
    for (int trainable = 0; trainable < 2; trainable++) {
        model_init(&p);
        p.b.name = "";
        tfc_onnx_options o = {.trainable = trainable};
        expect_fail(model_write(&p, "unnamed_init.onnx"), &o, TFC_ERR_INVALID_ARGUMENT,
                    "initializer 1", "no name", NULL);
    }
    /* a graph input or output without a name ("" is an absent value to a node, and the
     * signature names its feeds and outputs) */
    model_init(&p);
    p.x.name = "";
    p.in_mm[0] = "";
    expect_fail(model_write(&p, "unnamed_input.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT,
                "graph input 0", "no name", NULL);
    model_init(&p);
    p.y.name = "";
    p.out_relu[0] = "";
    expect_fail(model_write(&p, "unnamed_output.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT,
                "graph output 0", "no name", NULL);
    model_init(&p);
    p.w_dims[0] = -4;
    expect_fail(model_write(&p, "negative_dim.onnx"), NULL, TFC_ERR_SHAPE, "'W'", "negative",
                NULL);
}

/* Reshape's shape from a graph input: known only when the graph runs. */
static void test_not_constant(void)
{
    struct model_parts p;
    model_init(&p);
    p.nodes[2].op_type = "Reshape";
    char *in[2] = {"z", "x"};
    p.nodes[2].n_input = 2;
    p.nodes[2].input = in;
    expect_fail(model_write(&p, "dynamic_shape.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "Reshape",
                "'x'", "known at import time", NULL);
    /* Shape of x, whose batch dimension is symbolic: not foldable, and said so */
    model_init(&p);
    p.nodes[2].op_type = "Shape";
    p.in_relu[0] = "x";
    expect_fail(model_write(&p, "shape_of_batch.onnx"), NULL, TFC_ERR_INVALID_ARGUMENT, "Shape",
                "'x'", "known only when the graph runs", NULL);
}

/* Every prefix of the good model and 1500 copies with a few bytes changed (a fixed seed):
 * each import returns a status, a failed one with a message, and never reads out of bounds
 * (the sanitizer build and valgrind check that part). */
static void test_mutations(void)
{
    struct model_parts p;
    model_init(&p);
    size_t n;
    unsigned char *good = bad_read_file(model_write(&p, "good.onnx"), &n);
    CU_ASSERT_FATAL(good != NULL);
    unsigned char *buf = malloc(n);
    CU_ASSERT_FATAL(buf != NULL);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", bad_path("mutant.onnx"));
    uint64_t seed = 14;
    int ok = 0, failed = 0, silent = 0;
    for (size_t round = 0; round < n + 1500; round++) {
        size_t len = round < n ? round : n;
        memcpy(buf, good, n);
        for (int k = 0; round >= n && k < 1 + (int)(round % 4); k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            buf[(seed >> 33) % n] = (unsigned char)(seed >> 20);
        }
        CU_ASSERT_FATAL(bad_write_file(path, buf, len) == 0);
        tfc_graph *g;
        CU_ASSERT_FATAL(tfc_graph_create(&g) == TFC_OK);
        tfc_onnx_model *m = NULL;
        tfc_status st = tfc_onnx_import(g, path, NULL, &m);
        if (st == TFC_OK) ok++;
        else failed++;
        if (st != TFC_OK && !*tfc_graph_errmsg(g)) silent++;
        CU_ASSERT((st == TFC_OK) == (m != NULL));
        tfc_onnx_model_free(m);
        tfc_graph_destroy(g);
    }
    printf("\n  %d imported, %d refused, %d refused without a message", ok, failed, silent);
    CU_ASSERT(silent == 0);
    CU_ASSERT(failed > 0);
    free(buf);
    free(good);
}

/* ---- the tool: tfc import, then tfc run on the store -------------------------------------- */
static char tfc_path[PATH_MAX + 16];

static int spawn(char *const *argv)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    const int flags = O_WRONLY | O_CREAT | O_TRUNC;
    posix_spawn_file_actions_addopen(&fa, 1, bad_path("tool.out"), flags, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, bad_path("tool.err"), flags, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    if (rc || waitpid(pid, &status, 0) != pid) return -1;
    size_t n;
    char *err = (char *)bad_read_file(bad_path("tool.err"), &n);
    if (err && n) printf("\n  %s: %s", argv[1], err);
    free(err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void tool_round_trip(const char *model_path, const char *db_path, int trainable)
{
    /* own copies: bad_path's buffers rotate */
    char model[PATH_MAX], db[PATH_MAX], out[PATH_MAX], x[PATH_MAX], y[PATH_MAX];
    snprintf(model, sizeof model, "%s", model_path);
    snprintf(db, sizeof db, "%s", db_path);
    snprintf(out, sizeof out, "%s", bad_path("out"));
    snprintf(x, sizeof x, "%s", bad_path("x.npy"));
    snprintf(y, sizeof y, "%s", bad_path("out/y.npy"));
    tfc_value *xv = test_f32(2, (int64_t[]){2, 4}, x_data);
    CU_ASSERT_FATAL(tfc_npy_write(x, xv) == TFC_OK);
    tfc_value_destroy(xv);
    char *imp[] = {tfc_path, "import", model, db, trainable ? "--trainable" : NULL, NULL};
    CU_ASSERT_FATAL(spawn(imp) == 0);
    char data[PATH_MAX + 8];
    snprintf(data, sizeof data, "x=%s", x);
    char *run[] = {tfc_path, "run", db, "--data", data, "--out", out, NULL};
    CU_ASSERT_FATAL(spawn(run) == 0);
    tfc_value *yv = NULL;
    CU_ASSERT_FATAL(tfc_npy_read(y, &yv) == TFC_OK);
    float want[6];
    expected_y(want);
    CU_ASSERT(tfc_value_numel(yv) == 6);
    for (int i = 0; i < 6 && i < tfc_value_numel(yv); i++)
        CU_ASSERT(fabs(tfc_value_get(yv, i) - want[i]) < 1e-6);
    tfc_value_destroy(yv);
    unlink(y);
}

static void test_tool(void)
{
    char build[PATH_MAX];
    CU_ASSERT_FATAL(getcwd(build, sizeof build) != NULL);
    snprintf(tfc_path, sizeof tfc_path, "%s/src/tfc", build);
    CU_ASSERT_FATAL(access(tfc_path, X_OK) == 0);
    struct model_parts p;
    model_init(&p);
    char model_copy[PATH_MAX], db_copy[PATH_MAX];
    snprintf(model_copy, sizeof model_copy, "%s", model_write(&p, "good.onnx"));
    tool_round_trip(model_copy, bad_path("const.db"), 0);
    tool_round_trip(model_copy, bad_path("trainable.db"), 1);
    /* the store exists now: refused, and left as it was */
    snprintf(db_copy, sizeof db_copy, "%s", bad_path("const.db"));
    char *again[] = {tfc_path, "import", model_copy, db_copy, NULL};
    CU_ASSERT(spawn(again) == 1);
    /* a bad model leaves no store behind */
    p.nodes[2].op_type = "FancyRelu";
    char bad_model[PATH_MAX], bad_db[PATH_MAX];
    snprintf(bad_model, sizeof bad_model, "%s", model_write(&p, "unknown_op.onnx"));
    snprintf(bad_db, sizeof bad_db, "%s", bad_path("bad.db"));
    char *bad[] = {tfc_path, "import", bad_model, bad_db, NULL};
    CU_ASSERT(spawn(bad) == 1);
    CU_ASSERT(access(bad_db, F_OK) != 0);
    char *usage[] = {tfc_path, "import", model_copy, NULL};
    CU_ASSERT(spawn(usage) == 2);
}

int main(void)
{
    /* bad_input.h's helpers for the table programs, unused here */
    (void)bad_verdict, (void)bad_summary, (void)bad_check_wal_shm, (void)bad_remove_store;
    (void)bad_same_bytes, (void)bad_copy_file;
    signal(SIGPIPE, SIG_IGN); /* fifo_writer's reader may close early */
    if (bad_dir_create("tfc-onnx-bad") || test_ctx_open()) return 1;
    CU_initialize_registry();
    CU_pSuite s = CU_add_suite("onnx_bad", NULL, NULL);
    CU_add_test(s, "a good model: constants, variables, external data", test_good_model);
    CU_add_test(s, "truncated, empty, absent, not ONNX, another protobuf", test_not_onnx);
    CU_add_test(s, "unknown op, newer opset, other domain", test_unknown_op_and_opset);
    CU_add_test(s, "type and shape mismatches", test_type_and_shape_mismatch);
    CU_add_test(s, "external data missing, sizes against dims", test_bad_data);
    CU_add_test(s, "value-dependent input not constant", test_not_constant);
    CU_add_test(s, "truncations and byte changes: a status each", test_mutations);
    CU_add_test(s, "tfc import and tfc run", test_tool);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = (int)CU_get_number_of_failures();
    CU_cleanup_registry();
    test_ctx_close();
    bad_dir_remove();
    return failed ? 1 : 0;
}
