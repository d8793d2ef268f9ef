/* test_store.c: the SQLite model store. Graphs saved and loaded back (and run without the code
 * that built them), signatures, checkpoints (consistent cuts taken while training runs, resumed
 * training equal bit for bit, retention, subsets and name maps, chunked variables, one larger
 * than 64 MiB), batched metrics (committed with the checkpoint of their steps, discarded past
 * a resumed step), schema migrations, and bad input: not a database, truncated and corrupted
 * files, a newer schema, mismatched shapes, read-only stores and mounts, a full disk, and a
 * second process holding the lock; one training writer per store (a second one refused naming
 * the holder, a killed one taken over, exclusive mode), the latest checkpoint by step, readers
 * that leave the store one file and unchanged, and an empty file. Each failure must be clean and
 * lose nothing, and a failed write is sticky until tfc_store_flush reports it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"
#include "../store/store_testing.h"
#include "../graph/serialize.h"

extern char **environ;

static char tmpdir[1024];

static tfc_shape S0(void) { return tfc_shape_of(0, NULL); }
static tfc_shape S1(int64_t a) { return tfc_shape_of(1, (int64_t[]){a}); }
static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static const char *tpath(const char *name)
{
    static char buf[8][PATH_MAX];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, PATH_MAX, "%s/%s", tmpdir, name);
    return p;
}

static void remove_store(const char *path)
{
    char b[PATH_MAX];
    unlink(path);
    snprintf(b, sizeof b, "%s-wal", path);
    unlink(b);
    snprintf(b, sizeof b, "%s-shm", path);
    unlink(b);
}

static tfc_store *create_store_flags(const char *name, unsigned flags)
{
    const char *path = tpath(name);
    remove_store(path);
    tfc_store *st = NULL;
    tfc_status s = tfc_store_open(path, TFC_STORE_CREATE | flags, &st);
    if (s) fprintf(stderr, "open %s: %s\n", path, tfc_errmsg());
    CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
    return st;
}

static tfc_store *create_store(const char *name) { return create_store_flags(name, 0); }

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* The file is byte for byte what it was. */
static int same_file(const char *path, const char *data, size_t len)
{
    size_t n;
    char *now = read_file(path, &n);
    int same = now && n == len && !memcmp(now, data, len);
    free(now);
    return same;
}

static int file_size(const char *path, off_t *size)
{
    struct stat sb;
    if (stat(path, &sb)) return 0;
    *size = sb.st_size;
    return 1;
}

static tfc_value *read_var(tfc_session *s, tfc_tensor *v)
{
    tfc_value *out = NULL;
    CU_ASSERT_EQUAL(tfc_session_read_variable(s, v, &out), TFC_OK);
    return out;
}

static void set_var(tfc_session *s, tfc_tensor *v, double base)
{
    tfc_value *val;
    CU_ASSERT_EQUAL_FATAL(tfc_value_create(tfc_tensor_dtype(v), tfc_tensor_shape(v), &val), TFC_OK);
    for (int64_t i = 0; i < tfc_value_numel(val); i++) {
        double x = base + (double)i;
        switch (tfc_value_dtype(val)) {
        case TFC_FLOAT32: ((float *)tfc_value_data(val))[i] = (float)x; break;
        case TFC_FLOAT64: ((double *)tfc_value_data(val))[i] = x; break;
        case TFC_INT32: ((int32_t *)tfc_value_data(val))[i] = (int32_t)x; break;
        case TFC_INT64: ((int64_t *)tfc_value_data(val))[i] = (int64_t)x; break;
        default: ((uint8_t *)tfc_value_data(val))[i] = (uint8_t)x; break;
        }
    }
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, v, val), TFC_OK);
    tfc_value_destroy(val);
}

static double var0(tfc_session *s, tfc_tensor *v)
{
    tfc_value *x = read_var(s, v);
    double r = x ? tfc_value_get(x, 0) : NAN;
    tfc_value_destroy(x);
    return r;
}

static int values_equal(const tfc_value *a, const tfc_value *b)
{
    return a && b && tfc_value_dtype(a) == tfc_value_dtype(b) &&
           tfc_value_nbytes(a) == tfc_value_nbytes(b) &&
           !memcmp(tfc_value_cdata(a), tfc_value_cdata(b), tfc_value_nbytes(a));
}

static int vars_equal(tfc_session *s1, tfc_tensor *v1, tfc_session *s2, tfc_tensor *v2)
{
    tfc_value *a = read_var(s1, v1), *b = read_var(s2, v2);
    int eq = values_equal(a, b);
    tfc_value_destroy(a);
    tfc_value_destroy(b);
    return eq;
}

/* ---- opening and closing --------------------------------------------------------------------- */

static void test_open_close(void)
{
    tfc_store *st = NULL;
    const char *path = tpath("open.db");
    char wal[PATH_MAX], shm[PATH_MAX];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    remove_store(path);
    CU_ASSERT_EQUAL(tfc_store_open(path, 0, &st), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_READONLY | TFC_STORE_CREATE, &st),
                    TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_store_open(tmpdir, 0, &st), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_open(NULL, 0, &st), TFC_ERR_INVALID_ARGUMENT);

    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_schema_version(), 1);
    int64_t v = -1;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "PRAGMA user_version", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM pragma_journal_mode "
                                            "WHERE journal_mode = 'wal'", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 0, "loss", 1.5), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_store_close(st);
    tfc_store_close(NULL);
    /* a closed model is one file */
    off_t size = 0;
    CU_ASSERT(!file_size(wal, &size) || size == 0);
    CU_ASSERT(!file_size(shm, &size));
    CU_ASSERT(file_size(path, &size) && size > 0);

    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    int n = 0;
    int64_t *steps = NULL;
    double *vals = NULL;
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "loss", &n, &steps, &vals), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) CU_ASSERT_EQUAL(vals[0], 1.5);
    free(steps);
    free(vals);
    tfc_store_close(st);
    CU_ASSERT(!file_size(wal, &size) || size == 0);
}

/* ---- graphs ---------------------------------------------------------------------------------- */

static tfc_graph *build_model(tfc_tensor **x_out, tfc_tensor **y_out)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 0xfedcba9876543210ull); /* does not fit an int64 */
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 4));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S2(4, 6), tfc_init_glorot_uniform(7));
    tfc_tensor *b = tfc_variable(g, "b", TFC_FLOAT32, S1(6), tfc_init_uniform(-0.1, 0.3, 11));
    tfc_variable(g, "unused", TFC_INT64, S2(2, 2), tfc_init_constant(3));
    float cdata[6] = {0.1f, -0.2f, 0.3f, 1e-7f, 3.14159265f, -2.5f};
    tfc_value *cv;
    tfc_value_from_data(TFC_FLOAT32, S1(6), cdata, &cv);
    tfc_tensor *c = tfc_constant(g, "c", cv);
    tfc_value_destroy(cv);
    tfc_tensor *h = tfc_relu(g, tfc_bias_add(g, tfc_matmul(g, x, w, 0, 0), b));
    h = tfc_mul(g, h, c);
    tfc_tensor *parts[2];
    tfc_split(g, h, 2, 1, parts); /* a second output, "split:1", is an input below */
    tfc_tensor *sum = tfc_add(g, parts[0], tfc_op(g, "neg", 1, &parts[1], NULL, NULL, 0));
    tfc_tensor *red = tfc_reduce_sum(g, sum, 1, (int64_t[]){1}, 1);
    tfc_tensor *y = tfc_cast(g, tfc_softmax(g, tfc_op(g, "transpose", 1, &sum, "perm=[1,0]",
                                                      NULL, 0), 0), TFC_FLOAT64);
    tfc_tensor *scaled = tfc_mul(g, tfc_scalar(g, TFC_FLOAT32, 0.5), red);
    tfc_tensor_add_control_input(y, scaled); /* a control edge */
    tfc_tensor_set_name(y, "y");
    *x_out = x;
    *y_out = y;
    return g;
}

static int records_equal(const tfc_graph *a, const tfc_graph *b)
{
    if (a->n_nodes != b->n_nodes || a->seed != b->seed) return 0;
    for (int i = 0; i < a->n_nodes; i++) {
        struct tfc_node_record ra, rb;
        tfc_graph_export_node(a, i, &ra);
        tfc_graph_export_node(b, i, &rb);
        int eq = !strcmp(ra.name, rb.name) && !strcmp(ra.op, rb.op) &&
                 !strcmp(ra.attrs, rb.attrs) &&
                 ra.n_inputs == rb.n_inputs && ra.n_ctrl == rb.n_ctrl &&
                 ra.init.kind == rb.init.kind && ra.init.a == rb.init.a &&
                 ra.init.b == rb.init.b && ra.init.seed == rb.init.seed;
        for (int k = 0; eq && k < ra.n_inputs; k++) eq = !strcmp(ra.inputs[k], rb.inputs[k]);
        for (int k = 0; eq && k < ra.n_ctrl; k++) eq = !strcmp(ra.ctrl[k], rb.ctrl[k]);
        if (eq && (ra.value || rb.value)) eq = values_equal(ra.value, rb.value);
        if (!eq) fprintf(stderr, "node %d differs: %s %s [%s] / %s %s [%s]\n", i, ra.name, ra.op,
                         ra.attrs, rb.name, rb.op, rb.attrs);
        tfc_node_record_clear(&ra);
        tfc_node_record_clear(&rb);
        if (!eq) return 0;
    }
    return 1;
}

/* Stored rows whose shapes do not fit in 64 bits (a variable of 2^80 elements, a constant of
 * 2^62 floats): loading the graph is an error naming the node, not a crash or zero elements. */
static void test_stored_sizes_that_overflow(void)
{
    static const struct {
        const char *node, *from, *to;
    } cases[] = {
        {"w", "shape=[4,6]", "shape=[1099511627776,1099511627776]"},
        {"c", "shape=[6]", "shape=[4611686018427387904]"},
    };
    for (int i = 0; i < 2; i++) {
        tfc_tensor *x, *y;
        tfc_graph *g = build_model(&x, &y), *g2 = (tfc_graph *)1;
        tfc_store *st = create_store("overflow.db");
        CU_ASSERT_EQUAL_FATAL(tfc_store_save_graph(st, g), TFC_OK);
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE nodes SET attrs = replace(attrs, '%s', '%s') "
                 "WHERE name = '%s'", cases[i].from, cases[i].to, cases[i].node);
        CU_ASSERT_EQUAL(tfc_store_exec_sql(st, sql), TFC_OK);
        int64_t n = 0;
        snprintf(sql, sizeof sql, "SELECT count(*) FROM nodes WHERE attrs LIKE '%%%s%%'",
                 cases[i].to);
        CU_ASSERT_EQUAL(tfc_store_query_int(st, sql, &n), TFC_OK);
        CU_ASSERT_EQUAL(n, 1); /* the row did change */
        tfc_status r = tfc_store_load_graph(st, &g2);
        CU_ASSERT_NOT_EQUAL(r, TFC_OK);
        CU_ASSERT_PTR_NULL(g2);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), cases[i].node));
        printf("    %s: %s\n", cases[i].node, tfc_store_errmsg(st));
        tfc_store_close(st);
        tfc_graph_destroy(g);
    }
}

/* A constant whose stored attributes give another size than its stored data (found by
 * tests/fuzz/fuzz_store_graph: shape=[1099511627776] made the loader allocate 4 TiB before
 * reading the 24 bytes there are): an error naming the constant and both sizes; too little
 * data is found before anything of the attributes' size is allocated. */
static void test_stored_constant_size(void)
{
    static const char *const shapes[] = {"shape=[1099511627776]", "shape=[7]", "shape=[5]"};
    for (int i = 0; i < 3; i++) {
        tfc_tensor *x, *y;
        tfc_graph *g = build_model(&x, &y), *g2 = (tfc_graph *)1;
        tfc_store *st = create_store("constant_size.db");
        CU_ASSERT_EQUAL_FATAL(tfc_store_save_graph(st, g), TFC_OK);
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE nodes SET attrs = replace(attrs, 'shape=[6]', '%s') "
                 "WHERE name = 'c'", shapes[i]);
        CU_ASSERT_EQUAL(tfc_store_exec_sql(st, sql), TFC_OK);
        CU_ASSERT_EQUAL(tfc_store_load_graph(st, &g2), TFC_ERR_STORE);
        CU_ASSERT_PTR_NULL(g2);
        const char *msg = tfc_store_errmsg(st);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "constant 'c'"));
        /* too little data is refused before allocating, too much while reading it */
        CU_ASSERT_PTR_NOT_NULL(i < 2 ? strstr(msg, "24 bytes of data where")
                                     : strstr(msg, "more data than its 20 bytes"));
        printf("    %s\n", msg);
        tfc_store_close(st);
        tfc_graph_destroy(g);
    }
}

static void test_graph_roundtrip(void)
{
    tfc_tensor *x, *y;
    tfc_graph *g = build_model(&x, &y), *g2 = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_store *st = create_store("graph.db");
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &g2), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NULL(g2);
    tfc_store_set_chunk_bytes(8); /* the constant spans 3 chunks */
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_OK);
    tfc_store_set_chunk_bytes(0);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_OK); /* replaces */
    tfc_store_set_chunk_bytes(8);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_OK);
    tfc_store_set_chunk_bytes(0);
    int64_t n = 0;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM nodes", &n), TFC_OK);
    CU_ASSERT_EQUAL(n, tfc_graph_num_nodes(g));
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM node_data", &n), TFC_OK);
    CU_ASSERT_EQUAL(n, 3 + 1); /* c in 3 chunks, the scalar in 1 */
    tfc_store_close(st);

    CU_ASSERT_EQUAL_FATAL(tfc_store_open(tpath("graph.db"), TFC_STORE_READONLY, &st), TFC_OK);
    tfc_status s = tfc_store_load_graph(st, &g2);
    if (s) fprintf(stderr, "%s\n", tfc_store_errmsg(st));
    CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
    tfc_store_close(st);
    CU_ASSERT(records_equal(g, g2));

    /* the loaded graph runs and gives the same numbers */
    float xd[3 * 4];
    for (int i = 0; i < 12; i++) xd[i] = (float)(i % 5) - 1.5f;
    tfc_value *xv = test_f32(2, (int64_t[]){3, 4}, xd), *y1 = NULL, *y2 = NULL;
    tfc_tensor *x2 = tfc_graph_find(g2, "x"), *yy2 = tfc_graph_find(g2, "y");
    CU_ASSERT_PTR_NOT_NULL_FATAL(x2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(yy2);
    tfc_session *s1, *s2;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s1), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g2, &s2), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s1), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s2), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_run(s1, 1, &x, &xv, 1, &y, &y1, 0, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_run(s2, 1, &x2, &xv, 1, &yy2, &y2, 0, NULL), TFC_OK);
    CU_ASSERT(values_equal(y1, y2));
    CU_ASSERT(vars_equal(s1, tfc_graph_find(g, "w"), s2, tfc_graph_find(g2, "w")));
    CU_ASSERT(vars_equal(s1, tfc_graph_find(g, "b"), s2, tfc_graph_find(g2, "b")));
    tfc_value_destroy(xv);
    tfc_value_destroy(y1);
    tfc_value_destroy(y2);
    tfc_session_destroy(s1);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g2);

    /* a graph with a build error is refused */
    st = create_store("graph_bad.db");
    tfc_op(g, "nosuch_op", 1, &x, NULL, NULL, 0);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &g2), TFC_ERR_NOT_FOUND);
    tfc_store_close(st);
    tfc_graph_destroy(g);
}

/* A graph whose export fails (a node inside a while_loop still being built, two-step form) is
 * refused with the export's own status and message, naming the node and the loop, and the
 * stored graph is left as it was (it used to be reported as "out of memory", a store error). */
static void test_graph_export_fails(void)
{
    tfc_graph *g;
    CU_ASSERT_EQUAL_FATAL(tfc_graph_create(&g), TFC_OK);
    tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_store *st = create_store("graph_open.db");
    CU_ASSERT_EQUAL_FATAL(tfc_store_save_graph(st, g), TFC_OK);
    int64_t before = 0, after = -1;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM nodes", &before), TFC_OK);
    tfc_tensor *zero = tfc_scalar(g, TFC_INT32, 0), *in[1] = {NULL};
    tfc_cflow *cf = tfc_while_new(g, "open_loop", 1, &zero, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cf);
    CU_ASSERT_EQUAL_FATAL(tfc_cflow_enter(cf, 0, in), TFC_OK); /* and never finished */
    CU_ASSERT_EQUAL(tfc_graph_status(g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_ERR_INVALID_ARGUMENT);
    const char *msg = tfc_store_errmsg(st);
    if (!strstr(msg, "'open_loop', whose building is not finished")) fprintf(stderr, "%s\n", msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "'open_loop', whose building is not finished"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, tfc_tensor_name(in[0])));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "graph_open.db"));
    CU_ASSERT_PTR_NULL(strstr(msg, "memory"));
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM nodes", &after), TFC_OK);
    CU_ASSERT_EQUAL(after, before); /* rolled back: the graph saved before is still there */
    tfc_store_close(st);
    tfc_graph_destroy(g);
}

/* ---- signatures ------------------------------------------------------------------------------ */

static void test_signatures(void)
{
    tfc_tensor *x, *y;
    tfc_graph *g = build_model(&x, &y);
    tfc_store *st = create_store("sig.db");
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_OK);
    const char *feeds[] = {"x"}, *outputs[] = {"y", "split:1"}, *metrics[] = {"c"};
    tfc_signature sig = {1, feeds, 2, outputs, 1, metrics, "y", NULL};
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "predict", &sig), TFC_OK);
    tfc_signature *got = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_store_get_signature(st, "predict", &got), TFC_OK);
    CU_ASSERT_EQUAL(got->n_feeds, 1);
    CU_ASSERT_EQUAL(got->n_outputs, 2);
    CU_ASSERT_EQUAL(got->n_metrics, 1);
    CU_ASSERT_STRING_EQUAL(got->feeds[0], "x");
    CU_ASSERT_STRING_EQUAL(got->outputs[0], "y");
    CU_ASSERT_STRING_EQUAL(got->outputs[1], "split:1");
    CU_ASSERT_STRING_EQUAL(got->metrics[0], "c");
    CU_ASSERT_STRING_EQUAL(got->loss, "y");
    CU_ASSERT_PTR_NULL(got->train_op);
    tfc_signature_free(got);
    /* replacing */
    tfc_signature sig2 = {0, NULL, 1, outputs, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "predict", &sig2), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_get_signature(st, "predict", &got), TFC_OK);
    CU_ASSERT_EQUAL(got->n_feeds, 0);
    CU_ASSERT_EQUAL(got->n_outputs, 1);
    CU_ASSERT_PTR_NULL(got->loss);
    tfc_signature_free(got);
    tfc_signature_free(NULL);
    /* unknown names and signatures */
    const char *bad[] = {"nosuch:0"};
    tfc_signature sig3 = {1, bad, 0, NULL, 0, NULL, NULL, NULL};
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "train", &sig3), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "nosuch"));
    CU_ASSERT_EQUAL(tfc_store_get_signature(st, "train", &got), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NULL(got);
    tfc_store_close(st);
    tfc_graph_destroy(g);
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

struct model {
    tfc_graph *g;
    tfc_tensor *w, *b, *k, *gs;
};

static void small_model(struct model *m, int w_rows, enum tfc_dtype w_dtype, const char *extra)
{
    tfc_graph_create(&m->g);
    m->w = tfc_variable(m->g, "w", w_dtype, S2(w_rows, 4), tfc_init_zeros());
    m->b = tfc_variable(m->g, "b", TFC_FLOAT64, S1(5), tfc_init_zeros());
    m->k = tfc_variable(m->g, "k", TFC_INT32, S0(), tfc_init_zeros());
    m->gs = tfc_global_step(m->g);
    if (extra) tfc_variable(m->g, extra, TFC_FLOAT32, S2(3, 4), tfc_init_ones());
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(m->g), TFC_OK);
}

static void test_checkpoint_restore(void)
{
    struct model m;
    small_model(&m, 3, TFC_FLOAT32, NULL);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    tfc_session_init_variables(s);
    tfc_store *st = create_store("ckpt.db");
    tfc_checkpoint_info *info = NULL;
    int n = -1;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 0);
    free(info);
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, NULL, NULL), TFC_ERR_NOT_FOUND);

    set_var(s, m.w, 10);
    set_var(s, m.b, 20);
    set_var(s, m.k, 7);
    set_var(s, m.gs, 100);
    double t0 = (double)time(NULL);
    tfc_input_position pos = {0xdeadbeefcafef00dull, 2, 17};
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 100, &pos), TFC_OK);
    set_var(s, m.w, 30);
    set_var(s, m.b, 40);
    set_var(s, m.k, 8);
    set_var(s, m.gs, 200);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 200, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT(info[0].id < info[1].id);
    CU_ASSERT_EQUAL(info[0].step, 100);
    CU_ASSERT_EQUAL(info[1].step, 200);
    CU_ASSERT_EQUAL(info[0].n_variables, 4);
    CU_ASSERT_EQUAL(info[0].bytes, 3 * 4 * 4 + 5 * 8 + 4 + 8);
    CU_ASSERT(info[0].time >= t0 - 1 && info[0].time <= t0 + 60);
    CU_ASSERT_EQUAL(info[0].position.seed, pos.seed);
    CU_ASSERT_EQUAL(info[0].position.epoch, 2);
    CU_ASSERT_EQUAL(info[0].position.step, 17);
    CU_ASSERT_EQUAL(info[1].position.epoch, 0);
    free(info);

    /* the latest */
    set_var(s, m.w, 0);
    tfc_restore_report rep;
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, NULL, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.step, 200);
    CU_ASSERT_EQUAL(rep.n_missing + rep.n_extra, 0);
    tfc_restore_report_clear(&rep);
    CU_ASSERT_EQUAL(var0(s, m.w), 30);
    CU_ASSERT_EQUAL(var0(s, m.gs), 200);
    /* a given step */
    tfc_restore_options opt = {100, 0, NULL, NULL, 0};
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &opt, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.step, 100);
    CU_ASSERT_EQUAL(rep.position.seed, pos.seed);
    CU_ASSERT_EQUAL(rep.position.step, 17);
    tfc_restore_report_clear(&rep);
    CU_ASSERT_EQUAL(var0(s, m.w), 10);
    CU_ASSERT_EQUAL(var0(s, m.b), 20);
    CU_ASSERT_EQUAL(var0(s, m.k), 7);
    CU_ASSERT_EQUAL(var0(s, m.gs), 100);
    opt.step = 150;
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &opt, NULL), TFC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "150"));
    /* a subset by name */
    const char *names[] = {"b"};
    tfc_restore_options sub = {200, 1, names, NULL, 0};
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &sub, NULL), TFC_OK);
    CU_ASSERT_EQUAL(var0(s, m.b), 40);
    CU_ASSERT_EQUAL(var0(s, m.w), 10);
    const char *notvar[] = {"nosuch"};
    tfc_restore_options bad = {-1, 1, notvar, NULL, 0};
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &bad, NULL), TFC_ERR_NOT_FOUND);
    tfc_session_destroy(s);

    /* another graph: w2 takes the stored w (a name map), "fresh" is missing, k is extra */
    tfc_graph *g2;
    tfc_graph_create(&g2);
    tfc_tensor *w2 = tfc_variable(g2, "w2", TFC_FLOAT32, S2(3, 4), tfc_init_zeros());
    tfc_tensor *b2 = tfc_variable(g2, "b", TFC_FLOAT64, S1(5), tfc_init_zeros());
    tfc_tensor *fresh = tfc_variable(g2, "fresh", TFC_FLOAT32, S1(2), tfc_init_ones());
    tfc_tensor *gs2 = tfc_global_step(g2);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g2, &s), TFC_OK);
    tfc_session_init_variables(s);
    tfc_restore_options all = {-1, 0, NULL, NULL, 0};
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &all, &rep), TFC_ERR_NOT_FOUND); /* missing */
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "fresh"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "w2"));
    CU_ASSERT_EQUAL(var0(s, b2), 0); /* nothing changed */
    all.allow_missing = 1;
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &all, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.n_missing, 2); /* w2, fresh */
    CU_ASSERT_EQUAL(rep.n_extra, 2);   /* w, k */
    if (rep.n_extra == 2) {
        CU_ASSERT_STRING_EQUAL(rep.extra[0], "w");
        CU_ASSERT_STRING_EQUAL(rep.extra[1], "k");
    }
    tfc_restore_report_clear(&rep);
    CU_ASSERT_EQUAL(var0(s, b2), 40);
    CU_ASSERT_EQUAL(var0(s, gs2), 200);
    CU_ASSERT_EQUAL(var0(s, fresh), 1);
    const char *to[] = {"w2", "b"}, *from[] = {"w", "b"};
    tfc_restore_options map = {100, 2, to, from, 0};
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &map, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.n_missing, 0);
    CU_ASSERT_EQUAL(rep.n_extra, 1); /* k: w was used through the map */
    tfc_restore_report_clear(&rep);
    CU_ASSERT_EQUAL(var0(s, w2), 10);
    CU_ASSERT_EQUAL(var0(s, b2), 20);
    tfc_restore_report_clear(NULL);
    tfc_session_destroy(s);
    tfc_graph_destroy(g2);
    tfc_store_close(st);
    tfc_graph_destroy(m.g);
}

static void test_shape_mismatch(void)
{
    struct model m;
    small_model(&m, 3, TFC_FLOAT32, NULL);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    tfc_session_init_variables(s);
    set_var(s, m.w, 5);
    set_var(s, m.b, 6);
    tfc_store *st = create_store("shape.db");
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_session_destroy(s);
    tfc_graph_destroy(m.g);

    /* w is [4, 4] in this graph (b, k and the global step match and come first) */
    for (int pass = 0; pass < 2; pass++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *b = tfc_variable(g, "b", TFC_FLOAT64, S1(5), tfc_init_constant(-1));
        tfc_variable(g, "k", TFC_INT32, S0(), tfc_init_zeros());
        tfc_global_step(g);
        tfc_tensor *w = pass == 0
                            ? tfc_variable(g, "w", TFC_FLOAT32, S2(4, 4), tfc_init_constant(-2))
                            : tfc_variable(g, "w", TFC_FLOAT64, S2(3, 4), tfc_init_constant(-2));
        CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
        tfc_session_init_variables(s);
        tfc_status r = tfc_store_restore(st, s, NULL, NULL);
        CU_ASSERT_EQUAL(r, TFC_ERR_SHAPE);
        const char *msg = tfc_store_errmsg(st);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "'w'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, pass == 0 ? "[4,4]" : "float64"));
        if (pass == 0) printf("\n    shape mismatch: %s\n", msg);
        CU_ASSERT_EQUAL(var0(s, b), -1); /* nothing changed */
        CU_ASSERT_EQUAL(var0(s, w), -2);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
    }
    tfc_store_close(st);
}

/* A variable larger than one chunk, with the chunk size lowered for the test. */
static void test_chunked_variables(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *big = tfc_variable(g, "big", TFC_FLOAT32, S1(10007), tfc_init_uniform(-1, 1, 3));
    tfc_tensor *ints = tfc_variable(g, "ints", TFC_INT64, S2(333, 3), tfc_init_zeros());
    tfc_tensor *none = tfc_variable(g, "empty", TFC_FLOAT32, S2(0, 3), tfc_init_zeros());
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s, *s2;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s2), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s), TFC_OK);
    set_var(s, ints, 1e12);
    tfc_store *st = create_store("chunks.db");
    tfc_store_set_chunk_bytes(1000);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_store_set_chunk_bytes(0);
    int64_t n = 0, longest = 0;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM variable_chunks c JOIN "
                                            "variables v ON v.id = c.variable WHERE v.name = 'big'",
                                        &n), TFC_OK);
    CU_ASSERT_EQUAL(n, (10007 * 4 + 999) / 1000);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT max(length(data)) FROM variable_chunks",
                                        &longest), TFC_OK);
    CU_ASSERT_EQUAL(longest, 1000);
    tfc_status r = tfc_store_restore(st, s2, NULL, NULL);
    if (r) fprintf(stderr, "%s\n", tfc_store_errmsg(st));
    CU_ASSERT_EQUAL(r, TFC_OK);
    CU_ASSERT(vars_equal(s, big, s2, big));
    CU_ASSERT(vars_equal(s, ints, s2, ints));
    CU_ASSERT(tfc_session_variable_initialized(s2, none));
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One real variable above 64 MiB: two chunks of the default size. */
static void test_big_variable(void)
{
    const int64_t numel = 17 * 1000 * 1000; /* 68 MB of float32 */
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "huge", TFC_FLOAT32, S1(numel), tfc_init_zeros());
    tfc_session *s, *s2;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s2), TFC_OK);
    tfc_value *val;
    tfc_value_create(TFC_FLOAT32, S1(numel), &val);
    float *p = tfc_value_data(val);
    for (int64_t i = 0; i < numel; i++) p[i] = (float)(i % 65521) * 0.25f;
    CU_ASSERT_EQUAL(tfc_session_write_variable(s, v, val), TFC_OK);
    tfc_store *st = create_store("big.db");
    double t0 = now_s();
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_OK);
    double t1 = now_s();
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    double t2 = now_s();
    int64_t n = 0;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM variable_chunks", &n), TFC_OK);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(tfc_store_restore(st, s2, NULL, NULL), TFC_OK);
    double t3 = now_s();
    tfc_value *back = read_var(s2, v);
    CU_ASSERT(values_equal(val, back));
    printf("\n    68 MB variable: snapshot %.2f s, write %.2f s, restore %.2f s\n", t1 - t0,
           t2 - t1, t3 - t2);
    tfc_value_destroy(back);
    tfc_value_destroy(val);
    tfc_store_close(st);
    remove_store(tpath("big.db"));
    tfc_session_destroy(s);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g);
}

static void test_retention(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_variable(g, "v", TFC_FLOAT32, S1(3), tfc_init_ones());
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    tfc_store *st = create_store("retention.db");
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, -1, 0), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, 3, 0), TFC_OK);
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 10 * i, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_checkpoint_info *info;
    int n;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 3);
    if (n == 3) {
        CU_ASSERT_EQUAL(info[0].step, 70);
        CU_ASSERT_EQUAL(info[2].step, 90);
    }
    free(info);
    int64_t rows = 0;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM variable_chunks", &rows), TFC_OK);
    CU_ASSERT_EQUAL(rows, 3); /* deleting a checkpoint deletes its data */
    /* the newest 2, plus the first of every 50 steps */
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, 2, 50), TFC_OK);
    for (int i = 10; i < 20; i++)
        CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 10 * i, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    int64_t expect[] = {70, 100, 150, 180, 190};
    CU_ASSERT_EQUAL(n, 5);
    for (int i = 0; i < n && i < 5; i++) CU_ASSERT_EQUAL(info[i].step, expect[i]);
    free(info);
    /* keep everything again */
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, 0, 0), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 200, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 6);
    free(info);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A checkpoint chunk emptied or shortened in the file: restoring it is a store error naming
 * the variable and the problem, and the session's values stay as they were. */
static void test_damaged_chunks(void)
{
    static const struct {
        const char *sql, *what;
    } cases[] = {
        /* an empty blob with the CRC of nothing: it reaches the copy (a NULL blob of 0 bytes) */
        {"UPDATE variable_chunks SET data = zeroblob(0), crc32 = 0", "bytes of data"},
        {"UPDATE variable_chunks SET data = substr(data, 1, 4)", "CRC-32"},
        {"UPDATE variable_chunks SET crc32 = crc32 + 1", "CRC-32"},
    };
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *v = tfc_variable(g, "v", TFC_FLOAT32, S1(3), tfc_init_ones());
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variables(s);
    for (int i = 0; i < 3; i++) {
        tfc_store *st = create_store("damaged.db");
        CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_OK);
        CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
        CU_ASSERT_EQUAL(tfc_store_exec_sql(st, cases[i].sql), TFC_OK);
        CU_ASSERT_EQUAL(tfc_store_restore(st, s, NULL, NULL), TFC_ERR_STORE);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "'v'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), cases[i].what));
        if (!strstr(tfc_store_errmsg(st), cases[i].what))
            fprintf(stderr, "\n  %s: %s\n", cases[i].sql, tfc_store_errmsg(st));
        tfc_value *val = NULL;
        CU_ASSERT_EQUAL(tfc_session_read_variable(s, v, &val), TFC_OK);
        if (val) CU_ASSERT_EQUAL(tfc_value_get(val, 2), 1.0);
        tfc_value_destroy(val);
        tfc_store_close(st);
    }
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- checkpoints while training runs --------------------------------------------------------- */

struct trainer {
    tfc_session *s;
    tfc_tensor *step;
    int steps;
    volatile int done;
    tfc_status status;
};

static void *train_thread(void *arg)
{
    struct trainer *t = arg;
    for (int i = 0; i < t->steps && !t->status; i++)
        t->status = tfc_session_run(t->s, 0, NULL, NULL, 0, NULL, NULL, 1, &t->step);
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Each training step adds 1 to a and to b in one run: every checkpoint must hold a == b. */
static void test_consistent_cut(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *a = tfc_variable(g, "a", TFC_INT64, S0(), tfc_init_zeros());
    tfc_tensor *big = tfc_variable(g, "pad", TFC_FLOAT32, S1(1 << 16), tfc_init_zeros());
    tfc_tensor *b = tfc_variable(g, "b", TFC_INT64, S0(), tfc_init_zeros());
    tfc_tensor *one = tfc_scalar(g, TFC_INT64, 1);
    tfc_tensor *ups[3] = {tfc_assign_add(g, a, one),
                          tfc_assign_add(g, big, tfc_ones_like(g, big)),
                          tfc_assign_add(g, b, one)};
    tfc_tensor *step = tfc_group(g, 3, ups);
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_session *s, *s2;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s2), TFC_OK);
    tfc_session_init_variables(s);
    tfc_store *st = create_store("cut.db");
    struct trainer t = {s, step, 300, 0, TFC_OK};
    pthread_t th;
    pthread_create(&th, NULL, train_thread, &t);
    int k = 0;
    while (!__atomic_load_n(&t.done, __ATOMIC_ACQUIRE) && k < 200) {
        CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, k, NULL), TFC_OK);
        k++;
    }
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(t.status, TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT(k >= 2);
    int64_t last = -1, distinct = 0;
    for (int i = 0; i < k; i++) {
        tfc_restore_options o = {i, 0, NULL, NULL, 0};
        CU_ASSERT_EQUAL_FATAL(tfc_store_restore(st, s2, &o, NULL), TFC_OK);
        int64_t va = (int64_t)var0(s2, a), vb = (int64_t)var0(s2, b);
        tfc_value *pv = read_var(s2, big);
        float pad = ((float *)tfc_value_data(pv))[(1 << 16) - 1];
        tfc_value_destroy(pv);
        CU_ASSERT_EQUAL(va, vb);
        CU_ASSERT_EQUAL((int64_t)pad, va);
        CU_ASSERT(va >= last);
        distinct += va != last;
        last = va;
    }
    printf("\n    %d checkpoints during 300 steps, %lld distinct cuts\n", k, (long long)distinct);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_session_destroy(s2);
    tfc_graph_destroy(g);
}

/* Linear regression with Adam (two slots per variable) and a global step, fed by a shuffling
 * batcher. Training 10 steps equals training 5, checkpointing (with the batcher's position),
 * and resuming: in the same graph, and in the graph loaded from the store by names. */
enum { ROWS = 64 };

struct linreg {
    tfc_graph *g;
    tfc_tensor *x, *y, *w, *b, *loss, *train, *gs;
};

static void build_linreg(struct linreg *m)
{
    tfc_graph_create(&m->g);
    tfc_graph_set_seed(m->g, 5);
    m->x = tfc_placeholder(m->g, "x", TFC_FLOAT32, S2(-1, 3));
    m->y = tfc_placeholder(m->g, "y", TFC_FLOAT32, S2(-1, 1));
    m->w = tfc_variable(m->g, "w", TFC_FLOAT32, S2(3, 1), tfc_init_glorot_uniform(1));
    m->b = tfc_variable(m->g, "b", TFC_FLOAT32, S1(1), tfc_init_zeros());
    tfc_tensor *err = tfc_sub(m->g, tfc_bias_add(m->g, tfc_matmul(m->g, m->x, m->w, 0, 0), m->b),
                              m->y);
    m->loss = tfc_reduce_mean(m->g, tfc_square(m->g, err), 0, NULL, 0);
    tfc_tensor_set_name(m->loss, "loss");
    m->gs = tfc_global_step(m->g);
    tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 0.05);
    tfc_tensor *vars[2] = {m->w, m->b};
    m->train = tfc_minimize(m->g, m->loss, 2, vars, &opt, m->gs);
    tfc_tensor_set_name(m->train, "train");
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(m->g), TFC_OK);
}

static void run_steps(tfc_session *s, tfc_batcher *bt, tfc_tensor *x, tfc_tensor *y,
                      tfc_tensor *train, int n)
{
    for (int i = 0; i < n; i++) {
        tfc_value *batch[2];
        CU_ASSERT_EQUAL_FATAL(tfc_batcher_next(bt, batch, NULL), TFC_OK);
        tfc_tensor *ft[2] = {x, y};
        CU_ASSERT_EQUAL_FATAL(tfc_session_run(s, 2, ft, batch, 0, NULL, NULL, 1, &train), TFC_OK);
    }
}

static void test_resume_training(void)
{
    float xd[ROWS * 3], yd[ROWS];
    for (int i = 0; i < ROWS; i++) {
        for (int j = 0; j < 3; j++) xd[3 * i + j] = (float)((i * 7 + j * 3) % 11) / 5.0f - 1;
        yd[i] = 2 * xd[3 * i] - xd[3 * i + 1] + 0.5f * xd[3 * i + 2] + 0.25f;
    }
    tfc_value *xs = test_f32(2, (int64_t[]){ROWS, 3}, xd);
    tfc_value *ys = test_f32(2, (int64_t[]){ROWS, 1}, yd);
    tfc_value *src[2] = {xs, ys};
    const uint64_t seed = 77;
    struct linreg m;
    build_linreg(&m);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    tfc_session_init_variables(s);
    tfc_batcher *bt;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(2, src, 24, seed, TFC_BATCHER_SHUFFLE, &bt), TFC_OK);
    tfc_store *st = create_store("resume.db");
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, m.g), TFC_OK);
    const char *feeds[] = {"x", "y"}, *outs[] = {"loss"};
    tfc_signature sig = {2, feeds, 0, NULL, 1, outs, "loss", "train"};
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "train", &sig), TFC_OK);

    run_steps(s, bt, m.x, m.y, m.train, 5);
    tfc_input_position pos = {seed, 0, 0};
    tfc_batcher_position(bt, &pos.epoch, &pos.step);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 5, &pos), TFC_OK);
    run_steps(s, bt, m.x, m.y, m.train, 5); /* training goes on while the writer writes */
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(var0(s, m.gs), 10);
    int64_t slots = 0;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM variables", &slots), TFC_OK);
    CU_ASSERT(slots >= 7); /* w, b, their Adam slots, the global step */

    /* resume in the same graph */
    tfc_session *s2;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s2), TFC_OK);
    tfc_restore_report rep;
    CU_ASSERT_EQUAL_FATAL(tfc_store_restore(st, s2, NULL, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.step, 5);
    CU_ASSERT_EQUAL(rep.position.seed, seed);
    tfc_batcher *bt2;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(2, src, 24, rep.position.seed, TFC_BATCHER_SHUFFLE,
                                             &bt2), TFC_OK);
    CU_ASSERT_EQUAL(tfc_batcher_seek(bt2, rep.position.epoch, rep.position.step), TFC_OK);
    tfc_restore_report_clear(&rep);
    CU_ASSERT_EQUAL(var0(s2, m.gs), 5);
    run_steps(s2, bt2, m.x, m.y, m.train, 5);
    CU_ASSERT(vars_equal(s, m.w, s2, m.w));
    CU_ASSERT(vars_equal(s, m.b, s2, m.b));
    CU_ASSERT_EQUAL(var0(s2, m.gs), 10);
    tfc_batcher_destroy(bt2);
    tfc_session_destroy(s2);
    tfc_store_close(st);

    /* resume from the store alone: load the graph, find tensors by the signature's names */
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(tpath("resume.db"), 0, &st), TFC_OK);
    tfc_graph *g3;
    tfc_signature *sg;
    CU_ASSERT_EQUAL_FATAL(tfc_store_load_graph(st, &g3), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_get_signature(st, "train", &sg), TFC_OK);
    tfc_tensor *x3 = tfc_graph_find(g3, sg->feeds[0]), *y3 = tfc_graph_find(g3, sg->feeds[1]);
    tfc_tensor *train3 = tfc_graph_find(g3, sg->train_op);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(train3);
    tfc_session *s3;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g3, &s3), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_restore(st, s3, NULL, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.n_missing + rep.n_extra, 0);
    tfc_batcher *bt3;
    CU_ASSERT_EQUAL_FATAL(tfc_batcher_create(2, src, 24, rep.position.seed, TFC_BATCHER_SHUFFLE,
                                             &bt3), TFC_OK);
    tfc_batcher_seek(bt3, rep.position.epoch, rep.position.step);
    tfc_restore_report_clear(&rep);
    run_steps(s3, bt3, x3, y3, train3, 5);
    CU_ASSERT(vars_equal(s, m.w, s3, tfc_graph_find(g3, "w")));
    CU_ASSERT(vars_equal(s, m.b, s3, tfc_graph_find(g3, "b")));
    tfc_batcher_destroy(bt3);
    tfc_session_destroy(s3);
    tfc_signature_free(sg);
    tfc_graph_destroy(g3);
    tfc_store_close(st);

    tfc_batcher_destroy(bt);
    tfc_session_destroy(s);
    tfc_graph_destroy(m.g);
    tfc_value_destroy(xs);
    tfc_value_destroy(ys);
}

/* ---- metrics --------------------------------------------------------------------------------- */

static void test_metrics(void)
{
    tfc_store *st = create_store("metrics.db");
    uint64_t before = tfc_store_write_transactions(st);
    for (int i = 2999; i >= 0; i--) { /* logged out of order, read in step order */
        CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "loss", i == 7 ? NAN : 1.0 / (i + 1)), TFC_OK);
        if (i % 10 == 0) CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "accuracy", i * 1e-4), TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 0, "", 1), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    uint64_t txns = tfc_store_write_transactions(st) - before;
    CU_ASSERT(txns >= 1 && txns <= 4); /* 3300 values in batches, not one per step */
    printf("\n    3300 metric values in %llu transactions\n", (unsigned long long)txns);
    int n;
    int64_t *steps;
    double *values;
    CU_ASSERT_EQUAL_FATAL(tfc_store_read_metric(st, "loss", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 3000);
    int ordered = 1;
    for (int i = 0; i < n; i++) {
        ordered &= steps[i] == i;
        if (i != 7) ordered &= values[i] == 1.0 / (i + 1);
    }
    CU_ASSERT(ordered);
    CU_ASSERT(n > 7 && isnan(values[7]));
    free(steps);
    free(values);
    /* read_metric sees what was just logged */
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 5000, "accuracy", 0.9), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "accuracy", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 301);
    if (n == 301) CU_ASSERT_EQUAL(values[300], 0.9);
    free(steps);
    free(values);
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "nosuch", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(steps);
    tfc_store_log_metric(st, 6000, "loss", 0.5); /* written by close */
    tfc_store_close(st);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(tpath("metrics.db"), TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "loss", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 3001);
    free(steps);
    free(values);
    tfc_store_close(st);
}

/* tfc_store_list_metrics: every metric once, in the order first logged, with its count, step
 * range and last value (NaN stays NaN), those still buffered included; none in a fresh store;
 * the same after reopening read-only. */
static void check_listed(const tfc_metric_info *m, const char *name, int64_t count,
                         int64_t first, int64_t last, double last_value)
{
    CU_ASSERT_STRING_EQUAL(m->name, name);
    CU_ASSERT_EQUAL(m->count, count);
    CU_ASSERT_EQUAL(m->first_step, first);
    CU_ASSERT_EQUAL(m->last_step, last);
    CU_ASSERT(isnan(last_value) ? isnan(m->last_value) : m->last_value == last_value);
}

static void test_list_metrics(void)
{
    tfc_store *st = create_store("list_metrics.db");
    int n = -1;
    tfc_metric_info *m = NULL;
    CU_ASSERT_EQUAL(tfc_store_list_metrics(st, &n, &m), TFC_OK);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(m);
    for (int64_t step = 1; step <= 50; step++) {
        if (step <= 10 || step > 40) /* a gap of 30 steps */
            CU_ASSERT_EQUAL(tfc_store_log_metric(st, step, "loss", 1.0 / (double)step), TFC_OK);
        if (step == 3) CU_ASSERT_EQUAL(tfc_store_log_metric(st, step, "lr", NAN), TFC_OK);
        if (step % 5 == 0)
            CU_ASSERT_EQUAL(tfc_store_log_metric(st, step, "val_loss", (double)step), TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 7, "a metric, still buffered", 0.25), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 2, "loss", 2.0), TFC_OK); /* replaces step 2's */
    for (int pass = 0; pass < 2; pass++) {
        CU_ASSERT_EQUAL_FATAL(tfc_store_list_metrics(st, &n, &m), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(n, 4);
        check_listed(&m[0], "loss", 20, 1, 50, 1.0 / 50); /* one value per step */
        check_listed(&m[1], "lr", 1, 3, 3, NAN);
        check_listed(&m[2], "val_loss", 10, 5, 50, 50.0);
        check_listed(&m[3], "a metric, still buffered", 1, 7, 7, 0.25);
        free(m);
        tfc_store_close(st);
        CU_ASSERT_EQUAL_FATAL(tfc_store_open(tpath("list_metrics.db"), TFC_STORE_READONLY, &st),
                              TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_store_list_metrics(st, NULL, &m), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "list_metrics"));
    CU_ASSERT_EQUAL(tfc_store_list_metrics(NULL, &n, &m), TFC_ERR_INVALID_ARGUMENT);
    tfc_store_close(st);
}

/* ---- schema versions ------------------------------------------------------------------------- */

static void test_migrations(void)
{
    const char *path = tpath("migrate.db");
    tfc_store *st = create_store("migrate.db");
    tfc_store_log_metric(st, 1, "loss", 0.25);
    tfc_store_close(st);

    /* version 2 adds a column: the store migrates forward and keeps its data */
    tfc_store_set_test_migration("ALTER TABLE checkpoints ADD COLUMN note TEXT");
    CU_ASSERT_EQUAL(tfc_store_schema_version(), 2);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, 0, &st), TFC_OK);
    int64_t v = 0;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "PRAGMA user_version", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 2);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM pragma_table_info('checkpoints')"
                                            " WHERE name = 'note'", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM metrics", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 1);
    tfc_store_close(st);
    tfc_store_set_test_migration(NULL);

    /* a newer schema than this library: refused, the file untouched */
    size_t len;
    char *before = read_file(path, &len);
    CU_ASSERT_EQUAL(tfc_store_open(path, 0, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "newer"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
    printf("\n    newer schema: %s\n", tfc_errmsg());
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_ERR_STORE);
    CU_ASSERT(same_file(path, before, len));
    free(before);

    /* a migration that fails leaves the store at its version, data intact */
    path = tpath("migrate_fail.db");
    st = create_store("migrate_fail.db");
    tfc_store_log_metric(st, 1, "loss", 0.5);
    tfc_store_close(st);
    tfc_store_set_test_migration("CREATE TABLE extra(x); ALTER TABLE nosuch ADD COLUMN y");
    CU_ASSERT_EQUAL(tfc_store_open(path, 0, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "migrating"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "nosuch"));
    /* an old schema cannot be migrated read-only */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "older"));
    tfc_store_set_test_migration(NULL);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, 0, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "PRAGMA user_version", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM sqlite_schema WHERE name = "
                                            "'extra'", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 0);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM metrics", &v), TFC_OK);
    CU_ASSERT_EQUAL(v, 1);
    tfc_store_close(st);
}

/* ---- bad files ------------------------------------------------------------------------------- */

static void test_not_a_database(void)
{
    const char *path = tpath("notadb.db");
    const char text[] = "this is a text file, not a model store\n"
                        "0123456789012345678901234567890123456789012345678901234567890123456789\n";
    write_file(path, text, sizeof text);
    tfc_store *st = NULL;
    for (unsigned flags = 0; flags <= TFC_STORE_READONLY; flags += TFC_STORE_READONLY) {
        CU_ASSERT_EQUAL(tfc_store_open(path, flags, &st), TFC_ERR_STORE);
        CU_ASSERT_PTR_NULL(st);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "not an SQLite database"));
    }
    printf("\n    not a database: %s\n", tfc_errmsg());
    CU_ASSERT(same_file(path, text, sizeof text));

    /* an SQLite database that is not a model store */
    path = tpath("foreign.db");
    st = create_store("foreign.db");
    CU_ASSERT_EQUAL(tfc_store_exec_sql(st, "DROP TABLE meta"), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_EQUAL(tfc_store_open(path, 0, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "not a tfc model store"));

    /* someone else's database (rollback journal, tables, no version): not even its journal
     * mode is changed */
    path = tpath("foreign2.db");
    remove_store(path);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_CREATE | TFC_STORE_EXCLUSIVE, &st),
                          TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_exec_sql(st, "PRAGMA journal_mode=DELETE; DROP TABLE meta; "
                                           "PRAGMA user_version=0"), TFC_OK);
    tfc_store_close(st);
    size_t len;
    char *before = read_file(path, &len);
    CU_ASSERT_FATAL(before && len > 20);
    CU_ASSERT_EQUAL(before[18], 1); /* rollback journal, not WAL */
    CU_ASSERT_EQUAL(tfc_store_open(path, 0, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "not a tfc model store"));
    printf("    foreign database: %s\n", tfc_errmsg());
    CU_ASSERT(same_file(path, before, len));
    free(before);
}

/* A store whose uint8 variable is 20000 bytes of 0xA7, easy to find in the file. */
static void make_pattern_store(const char *name, tfc_graph **g, tfc_tensor **v, tfc_session **s)
{
    tfc_graph_create(g);
    *v = tfc_variable(*g, "pattern", TFC_UINT8, S1(20000), tfc_init_constant(0xA7));
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, *g, s), TFC_OK);
    tfc_session_init_variables(*s);
    tfc_store *st = create_store(name);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, *g), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, *s, 1, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_store_close(st);
}

static void test_truncated_and_corrupted(void)
{
    tfc_graph *g;
    tfc_tensor *v;
    tfc_session *s;
    make_pattern_store("good.db", &g, &v, &s);
    size_t len;
    char *good = read_file(tpath("good.db"), &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(good);
    CU_ASSERT(len > 20000);

    /* truncated to half */
    const char *path = tpath("truncated.db");
    write_file(path, good, len / 2);
    tfc_store *st = NULL;
    tfc_status r = tfc_store_open(path, 0, &st);
    CU_ASSERT_EQUAL(r, TFC_ERR_STORE);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "corrupted or truncated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
    printf("\n    truncated: %s\n", tfc_errmsg());
    CU_ASSERT(same_file(path, good, len / 2));
    tfc_store_close(st);

    /* one byte of the variable's data flipped: the CRC catches it, the session keeps its value */
    path = tpath("corrupt_data.db");
    char *bad = malloc(len);
    memcpy(bad, good, len);
    char run[16];
    memset(run, 0xA7, sizeof run);
    char *hit = memmem(bad, len, run, sizeof run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hit);
    hit[100] ^= 0x10;
    write_file(path, bad, len);
    set_var(s, v, 3);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, 0, &st), TFC_OK);
    r = tfc_store_restore(st, s, NULL, NULL);
    CU_ASSERT_EQUAL(r, TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "CRC"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "pattern"));
    printf("    corrupted data: %s\n", tfc_store_errmsg(st));
    CU_ASSERT_EQUAL(var0(s, v), 3);
    tfc_store_close(st);

    /* a b-tree page overwritten: SQLite reports corruption; the graph still loads or fails
     * cleanly, and nothing aborts */
    path = tpath("corrupt_page.db");
    memcpy(bad, good, len);
    size_t page = 4096;
    for (size_t i = page; i < 2 * page && i < len; i++) bad[i] = (char)0xFF;
    for (size_t i = 2 * page; i < 3 * page && i < len; i++) bad[i] = (char)0xFF;
    write_file(path, bad, len);
    r = tfc_store_open(path, 0, &st);
    if (r == TFC_OK) {
        tfc_checkpoint_info *info = NULL;
        int n;
        tfc_graph *g2 = NULL;
        tfc_status a = tfc_store_list_checkpoints(st, &n, &info);
        tfc_status b = tfc_store_load_graph(st, &g2);
        tfc_status c = tfc_store_restore(st, s, NULL, NULL);
        CU_ASSERT(a == TFC_ERR_STORE || b == TFC_ERR_STORE || c == TFC_ERR_STORE);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "corrupt"));
        printf("    corrupted page: %s\n", tfc_store_errmsg(st));
        free(info);
        tfc_graph_destroy(g2);
        tfc_store_close(st);
    } else {
        CU_ASSERT_EQUAL(r, TFC_ERR_STORE);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "corrupt"));
        printf("    corrupted page: %s\n", tfc_errmsg());
    }
    CU_ASSERT_EQUAL(var0(s, v), 3);
    CU_ASSERT(same_file(tpath("good.db"), good, len));
    free(bad);
    free(good);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- read-only ------------------------------------------------------------------------------- */

static void test_readonly_flag(void)
{
    tfc_graph *g;
    tfc_tensor *v;
    tfc_session *s;
    make_pattern_store("ro.db", &g, &v, &s);
    const char *path = tpath("ro.db");
    size_t len;
    char *before = read_file(path, &len);
    tfc_store *st;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 2, NULL), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "read-only"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), path));
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 1, "loss", 1), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_save_graph(st, g), TFC_ERR_STORE);
    tfc_signature sig = {0};
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "x", &sig), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, 1, 0), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_exec_sql(st, "DELETE FROM checkpoints"), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    /* reads work */
    set_var(s, v, 1);
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, NULL, NULL), TFC_OK);
    CU_ASSERT_EQUAL(var0(s, v), 0xA7);
    tfc_graph *g2;
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &g2), TFC_OK);
    tfc_graph_destroy(g2);
    tfc_store_close(st);
    CU_ASSERT(same_file(path, before, len));
    free(before);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- a second process ------------------------------------------------------------------------ */

struct child {
    pid_t pid;
    int to;     /* its stdin */
    FILE *from; /* its stdout */
};

static int helper_path(char *buf, size_t len)
{
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    snprintf(buf, len, "%s/store_holder", exe);
    return access(buf, X_OK);
}

static int spawn_helper(char *const argv[], struct child *c)
{
    char path[PATH_MAX];
    if (helper_path(path, sizeof path)) {
        fprintf(stderr, "tests/store_holder not found next to the test program\n");
        return -1;
    }
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    /* posix_spawn execs at once (no fork of this StarPU process keeps running) */
    int rc = posix_spawn(&c->pid, path, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc) {
        close(in[1]);
        close(out[0]);
        return -1;
    }
    c->to = in[1];
    c->from = fdopen(out[0], "r");
    return 0;
}

static int child_wait(struct child *c)
{
    int status = 0;
    if (c->to >= 0) close(c->to);
    c->to = -1;
    waitpid(c->pid, &status, 0);
    if (c->from) fclose(c->from);
    c->from = NULL;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int child_ready(struct child *c)
{
    char line[512];
    int pid = 0;
    while (fgets(line, sizeof line, c->from)) {
        if (sscanf(line, "ready %d", &pid) == 1) return pid;
        fprintf(stderr, "store_holder: %s", line);
    }
    return 0;
}

static void test_two_processes(void)
{
    const char *path = tpath("shared.db");
    remove_store(path);
    char pidtext[64];
    struct child c = {0, -1, NULL};
    char *argv[] = {"store_holder", "hold", (char *)path, NULL};
    CU_ASSERT_EQUAL_FATAL(spawn_helper(argv, &c), 0);
    int pid = child_ready(&c);
    CU_ASSERT_EQUAL_FATAL(pid, c.pid);
    snprintf(pidtext, sizeof pidtext, "locked by process %d", pid);

    /* a second writer: opening and reading work (WAL), writes wait, then fail naming pid */
    tfc_store *st;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, 0, &st), TFC_OK);
    tfc_store_set_busy_timeout(st, 300);
    const char *feeds[] = {"x"};
    tfc_signature sig = {1, feeds, 0, NULL, 0, NULL, NULL, NULL};
    double t0 = now_s();
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "predict", &sig), TFC_ERR_STORE);
    CU_ASSERT(now_s() - t0 >= 0.25);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), pidtext));
    printf("\n    second writer: %s\n", tfc_store_errmsg(st));
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 9, "loss", 9), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), pidtext));
    int n;
    int64_t *steps;
    double *values;
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "holder", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 1); /* the holder's committed row, not its open transaction */
    free(steps);
    free(values);

    /* the holder dies (kill -9) inside its transaction: nothing committed is lost */
    kill(c.pid, SIGKILL);
    CU_ASSERT_EQUAL(child_wait(&c), 128 + SIGKILL);
    CU_ASSERT_EQUAL(tfc_store_set_signature(st, "predict", &sig), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 10, "loss", 10), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "holder", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) CU_ASSERT_EQUAL(steps[0], 1);
    free(steps);
    free(values);
    tfc_store_close(st);

    /* exclusive locking mode (NFS, Lustre): even opening waits, then names the holder */
    path = tpath("exclusive.db");
    remove_store(path);
    char *argv2[] = {"store_holder", "hold", (char *)path, "exclusive", NULL};
    CU_ASSERT_EQUAL_FATAL(spawn_helper(argv2, &c), 0);
    pid = child_ready(&c);
    CU_ASSERT_EQUAL_FATAL(pid, c.pid);
    snprintf(pidtext, sizeof pidtext, "locked by process %d", pid);
    tfc_store_set_busy_timeout(NULL, 300);
    st = NULL;
    CU_ASSERT_EQUAL(tfc_store_open(path, 0, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), pidtext));
    printf("    exclusive holder: %s\n", tfc_errmsg());
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_EXCLUSIVE, &st), TFC_ERR_STORE);
    tfc_store_set_busy_timeout(NULL, 0);
    CU_ASSERT_EQUAL(child_wait(&c), 0); /* stdin closed: it rolls back and exits */
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_EXCLUSIVE, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "holder", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    free(steps);
    free(values);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 3, "loss", 3), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_store_close(st);
}

/* ---- a read-only mount and a full tmpfs (in the helper's private mount namespace) ------------ */

static void test_readonly_mount(void)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/mnt", tmpdir);
    mkdir(dir, 0700);
    struct child c = {0, -1, NULL};
    char *argv[] = {"store_holder", "romount", dir, NULL};
    CU_ASSERT_EQUAL_FATAL(spawn_helper(argv, &c), 0);
    close(c.to);
    c.to = -1;
    char line[1024];
    printf("\n");
    while (fgets(line, sizeof line, c.from)) printf("    %s", line);
    int rc = child_wait(&c);
    if (rc == 77)
        printf("    SKIPPED the read-only mount and full tmpfs checks (the sandbox refuses "
               "mounts)\n");
    else
        CU_ASSERT_EQUAL(rc, 0);
    rmdir(dir);
}

/* ---- a full disk: RLIMIT_FSIZE --------------------------------------------------------------- */

static void test_disk_full(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *small = tfc_variable(g, "small", TFC_FLOAT32, S1(100), tfc_init_ones());
    tfc_tensor *large = tfc_variable(g, "large", TFC_FLOAT32, S1(1 << 20), tfc_init_ones());
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variable(s, small);
    tfc_store *st = create_store("full.db");
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_OK); /* small only */
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_session_init_variable(s, large);

    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* else the kernel kills the process */
    lim = old;
    lim.rlim_cur = 1 << 20; /* files may not grow beyond 1 MiB: the 4 MiB checkpoint fails */
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 2, NULL), TFC_OK); /* the snapshot */
    tfc_status r = tfc_store_flush(st);                           /* the write */
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CU_ASSERT_EQUAL(r, TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "file size limit (RLIMIT_FSIZE"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "step 2"));
    printf("\n    full disk: %s\n", tfc_store_errmsg(st));

    /* nothing stored is lost, and the store works again once there is room */
    tfc_checkpoint_info *info;
    int n;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) CU_ASSERT_EQUAL(info[0].step, 1);
    free(info);
    set_var(s, small, 5);
    tfc_restore_options o = {1, 0, NULL, NULL, 1};
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, &o, NULL), TFC_OK);
    CU_ASSERT_EQUAL(var0(s, small), 1);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 3, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(tpath("full.db"), TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 2);
    free(info);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- the latest checkpoint: by step, never by arrival ---------------------------------------- */

/* A session over one initialized float variable "v", to checkpoint. */
static tfc_session *var_session(tfc_graph **g, tfc_tensor **v)
{
    tfc_graph_create(g);
    *v = tfc_variable(*g, "v", TFC_FLOAT32, S1(1), tfc_init_ones());
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, *g, &s), TFC_OK);
    tfc_session_init_variables(s);
    return s;
}

static void test_latest_by_step(void)
{
    tfc_graph *g;
    tfc_tensor *v;
    tfc_session *s = var_session(&g, &v);
    tfc_store *st = create_store("order.db");
    /* step 30 first, then 10 and 20 (a resume from an older checkpoint, or a second writer):
     * the newest ids hold the older steps */
    int64_t steps[] = {30, 10, 20};
    for (int i = 0; i < 3; i++) {
        set_var(s, v, (double)steps[i]);
        CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, steps[i], NULL), TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    set_var(s, v, 0);
    tfc_restore_report rep;
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, NULL, &rep), TFC_OK);
    CU_ASSERT_EQUAL(rep.step, 30);
    CU_ASSERT_EQUAL(var0(s, v), 30);
    tfc_restore_report_clear(&rep);
    tfc_checkpoint_info *info;
    int n;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 3);
    for (int i = 0; i < n && i < 3; i++) CU_ASSERT_EQUAL(info[i].step, 10 * (i + 1));
    free(info);
    /* retention keeps the newest by step */
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, 1, 0), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) CU_ASSERT_EQUAL(info[0].step, 30);
    free(info);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* ---- the training lock: one training writer per store --------------------------------------- */

static const char *host_name(void)
{
    static char host[256];
    if (gethostname(host, sizeof host)) strcpy(host, "?");
    host[sizeof host - 1] = 0;
    return host;
}

/* The message names the holder as "process PID on host 'HOST'". */
static int names_holder(const char *msg, long long pid, const char *host)
{
    char want[512];
    snprintf(want, sizeof want, "process %lld on host '%s'", pid, host);
    if (!strstr(msg, want)) fprintf(stderr, "no \"%s\" in: %s\n", want, msg);
    return strstr(msg, want) != NULL;
}

/* The training writer's pid recorded in the store at path (read-only), -1 when none. */
static int64_t recorded_trainer(const char *path)
{
    tfc_store *st;
    int64_t pid = -1;
    if (tfc_store_open(path, TFC_STORE_READONLY, &st)) return -2;
    if (tfc_store_query_int(st, "SELECT value FROM meta WHERE key = 'trainer_pid'", &pid))
        pid = -1;
    tfc_store_close(st);
    return pid;
}

static void test_training_lock_two_processes(void)
{
    tfc_graph *g;
    tfc_tensor *v;
    tfc_session *s = var_session(&g, &v);
    const char *path = tpath("trained.db");
    remove_store(path);
    struct child c = {0, -1, NULL};
    char *argv[] = {"store_holder", "train", (char *)path, NULL};
    CU_ASSERT_EQUAL_FATAL(spawn_helper(argv, &c), 0);
    int pid = child_ready(&c);
    CU_ASSERT_EQUAL_FATAL(pid, c.pid);

    /* a second training writer is refused at open, naming the holder's process and host */
    tfc_store *st = NULL;
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT(names_holder(tfc_errmsg(), pid, host_name()));
    printf("\n    second trainer: %s\n", tfc_errmsg());
    /* a writer opened without the flag is refused at its first checkpoint: nothing stored */
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, 0, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_ERR_STORE);
    CU_ASSERT(names_holder(tfc_store_errmsg(st), pid, host_name()));
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    int64_t n = -1;
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM checkpoints", &n), TFC_OK);
    CU_ASSERT_EQUAL(n, 0);
    tfc_store_close(st);
    /* readers take no lock */
    CU_ASSERT_EQUAL(recorded_trainer(path), pid);

    /* the holder closes: its record goes, and the next trainer takes the lock */
    CU_ASSERT_EQUAL(child_wait(&c), 0);
    CU_ASSERT_EQUAL(recorded_trainer(path), -1);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_OK);
    CU_ASSERT_EQUAL(recorded_trainer(path), getpid());
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 2, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_EQUAL(recorded_trainer(path), -1);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* Writes a training writer's record into the store at path, as a writer that is not one. */
static void fake_record(const char *path, long long pid, const char *host, const char *boot)
{
    tfc_store *st;
    char sql[1024];
    snprintf(sql, sizeof sql, "INSERT OR REPLACE INTO meta(key, value) VALUES ('trainer_pid', "
             "%lld), ('trainer_host', '%s'), ('trainer_boot', '%s'), ('trainer_since', "
             "1700000000.0)", pid, host, boot);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, 0, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_exec_sql(st, sql), TFC_OK);
    tfc_store_close(st);
}

static void this_boot_id(char *boot, size_t len)
{
    boot[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f && !fgets(boot, (int)len, f)) boot[0] = 0;
    if (f) fclose(f);
    boot[strcspn(boot, "\n")] = 0;
}

/* Whether this process holds a POSIX read lock on path (SQLite's shared lock of a WAL
 * connection), from /proc/locks. */
static int holds_read_lock(const char *path)
{
    struct stat sb;
    if (stat(path, &sb)) return 0;
    char line[256], kind[16], type[16];
    unsigned maj, min;
    unsigned long long ino;
    int pid, found = 0;
    FILE *f = fopen("/proc/locks", "r");
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "%*d: %15s %*s %15s %d %x:%x:%llu", kind, type, &pid, &maj, &min,
                       &ino) == 6 && !strcmp(kind, "POSIX") && !strcmp(type, "READ") &&
                pid == (int)getpid() && maj == major(sb.st_dev) && min == minor(sb.st_dev) &&
                ino == (unsigned long long)sb.st_ino;
    if (f) fclose(f);
    return found;
}

static void test_training_lock_takeover(void)
{
    const char *path = tpath("takeover.db");
    remove_store(path);
    struct child c = {0, -1, NULL};
    char *argv[] = {"store_holder", "train", (char *)path, NULL};
    CU_ASSERT_EQUAL_FATAL(spawn_helper(argv, &c), 0);
    int dead = child_ready(&c);
    CU_ASSERT_EQUAL_FATAL(dead, c.pid);
    /* killed: its record stays, its OS lock dies with it, and the next trainer takes over */
    kill(c.pid, SIGKILL);
    CU_ASSERT_EQUAL(child_wait(&c), 128 + SIGKILL);
    CU_ASSERT_EQUAL(recorded_trainer(path), dead);
    tfc_store *st, *st2 = NULL, *reader;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_OK);
    CU_ASSERT_EQUAL(recorded_trainer(path), getpid());

    /* a second training writer in this process is refused as well */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st2), TFC_ERR_STORE);
    CU_ASSERT_PTR_NULL(st2);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "this process"));
    printf("\n    same process: %s\n", tfc_errmsg());
    /* closing a trainer keeps the other stores' SQLite locks on the file (a close() of any
     * descriptor on it would drop them all) */
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &reader), TFC_OK);
    CU_ASSERT_EQUAL(recorded_trainer(path), getpid());
    CU_ASSERT(holds_read_lock(path));
    tfc_store_close(st);
    CU_ASSERT(holds_read_lock(path));
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT(holds_read_lock(path));
    tfc_store_close(reader);

    /* a file system without working locks: the record alone decides */
    char boot[64];
    this_boot_id(boot, sizeof boot);
    tfc_store_set_os_locks(0);
    fake_record(path, dead, host_name(), boot); /* this host, the process is gone */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_OK);
    tfc_store_close(st);
    fake_record(path, 1, host_name(), boot); /* this host, running (init) */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_ERR_STORE);
    CU_ASSERT(names_holder(tfc_errmsg(), 1, host_name()));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "since 2023-11-14 22:13:20 UTC"));
    printf("    running on this host: %s\n", tfc_errmsg());
    fake_record(path, 1, host_name(), "an-earlier-boot"); /* from before the host restarted */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_OK);
    tfc_store_close(st);
    fake_record(path, 1, "elsewhere.example", boot); /* another host: cannot tell */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_ERR_STORE);
    CU_ASSERT(names_holder(tfc_errmsg(), 1, "elsewhere.example"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "DELETE FROM meta"));
    printf("    another host: %s\n", tfc_errmsg());
    tfc_store_set_os_locks(1);
    /* with locks, the free OS lock proves that host's writer gone */
    CU_ASSERT_EQUAL(tfc_store_open(path, TFC_STORE_TRAINER, &st), TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_EQUAL(recorded_trainer(path), -1);
}

/* Exclusive locking mode (NFS, Lustre): nobody else can even open the store, and the message
 * still names the training writer, by process and host, from its record. */
static void test_training_lock_exclusive(void)
{
    const char *path = tpath("trained_excl.db");
    remove_store(path);
    struct child c = {0, -1, NULL};
    char *argv[] = {"store_holder", "train", (char *)path, "exclusive", NULL};
    CU_ASSERT_EQUAL_FATAL(spawn_helper(argv, &c), 0);
    int pid = child_ready(&c);
    CU_ASSERT_EQUAL_FATAL(pid, c.pid);
    tfc_store_set_busy_timeout(NULL, 300);
    tfc_store *st = NULL;
    unsigned flags[] = {TFC_STORE_TRAINER | TFC_STORE_EXCLUSIVE, TFC_STORE_TRAINER, 0,
                        TFC_STORE_READONLY};
    printf("\n");
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(tfc_store_open(path, flags[i], &st), TFC_ERR_STORE);
        CU_ASSERT_PTR_NULL(st);
        CU_ASSERT(names_holder(tfc_errmsg(), pid, host_name()));
        if (i == 0) printf("    exclusive trainer: %s\n", tfc_errmsg());
    }
    tfc_store_set_busy_timeout(NULL, 0);
    CU_ASSERT_EQUAL(child_wait(&c), 0);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_TRAINER | TFC_STORE_EXCLUSIVE, &st),
                          TFC_OK);
    tfc_store_close(st);
    CU_ASSERT_EQUAL(recorded_trainer(path), -1);
}

/* ---- readers leave the store one file, unchanged; an empty file is not a store --------------- */

static int has_side_files(const char *path)
{
    char b[PATH_MAX];
    off_t size;
    snprintf(b, sizeof b, "%s-wal", path);
    int wal = file_size(b, &size);
    snprintf(b, sizeof b, "%s-shm", path);
    return wal || file_size(b, &size);
}

/* Reads everything a read-only command reads. */
static void read_all(tfc_store *st, tfc_session *s)
{
    tfc_graph *g2 = NULL;
    CU_ASSERT_EQUAL(tfc_store_load_graph(st, &g2), TFC_OK);
    tfc_graph_destroy(g2);
    tfc_checkpoint_info *info = NULL;
    int n = 0;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    free(info);
    CU_ASSERT_EQUAL(tfc_store_restore(st, s, NULL, NULL), TFC_OK);
}

static void test_readers_leave_one_file(void)
{
    tfc_graph *g;
    tfc_tensor *v;
    tfc_session *s;
    make_pattern_store("reader.db", &g, &v, &s);
    const char *path = tpath("reader.db");
    size_t len;
    char *before = read_file(path, &len);
    CU_ASSERT_FATAL(before && !has_side_files(path));
    tfc_store *st, *w;
    unsigned flags[] = {TFC_STORE_READONLY, TFC_STORE_READONLY | TFC_STORE_EXCLUSIVE};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, flags[i], &st), TFC_OK);
        read_all(st, s);
        CU_ASSERT_EQUAL(tfc_store_exec_sql(st, "DELETE FROM checkpoints"), TFC_ERR_STORE);
        tfc_store_close(st);
        CU_ASSERT(!has_side_files(path));
        CU_ASSERT(same_file(path, before, len));
    }

    /* a trainer comes while a reader reads, writes, and leaves first: the reader sees its
     * data, and the last one out leaves one file */
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_TRAINER, &w), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_log_metric(w, 1, "loss", 0.5), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(w), TFC_OK);
    tfc_store_close(w);
    CU_ASSERT(has_side_files(path)); /* the reader is still open */
    int n = 0;
    int64_t *steps = NULL;
    double *values = NULL;
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "loss", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 1);
    free(steps);
    free(values);
    read_all(st, s);
    tfc_store_close(st);
    CU_ASSERT(!has_side_files(path));

    /* a reader while a trainer runs: the trainer's files stay until it closes */
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_TRAINER, &w), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_log_metric(w, 2, "loss", 0.25), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(w), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    read_all(st, s);
    tfc_store_close(st);
    CU_ASSERT(has_side_files(path));
    CU_ASSERT_EQUAL(tfc_store_log_metric(w, 3, "loss", 0.125), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(w), TFC_OK);
    tfc_store_close(w);
    CU_ASSERT(!has_side_files(path));
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "loss", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 3);
    free(steps);
    free(values);
    tfc_store_close(st);
    CU_ASSERT(!has_side_files(path));
    free(before);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

static void test_zero_byte_file(void)
{
    const char *path = tpath("empty.db");
    remove_store(path);
    write_file(path, "", 0);
    unsigned flags[] = {0, TFC_STORE_TRAINER, TFC_STORE_READONLY, TFC_STORE_EXCLUSIVE};
    printf("\n");
    for (int i = 0; i < 4; i++) {
        tfc_store *st = NULL;
        CU_ASSERT_EQUAL(tfc_store_open(path, flags[i], &st), TFC_ERR_STORE);
        CU_ASSERT_PTR_NULL(st);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), "empty file (0 bytes)"));
        CU_ASSERT_PTR_NOT_NULL(strstr(tfc_errmsg(), path));
        off_t size = -1;
        CU_ASSERT(file_size(path, &size) && size == 0);
        CU_ASSERT(!has_side_files(path));
        if (i == 0) printf("    zero bytes: %s\n", tfc_errmsg());
    }
    /* TFC_STORE_CREATE makes a store in it */
    tfc_store *st = NULL;
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_CREATE, &st), TFC_OK);
    tfc_store_close(st);
    off_t size = 0;
    CU_ASSERT(file_size(path, &size) && size > 0);
}

/* ---- a failed write stops the writer until it is reported ---------------------------------- */

/* Polls the writer (without waiting for it) until it reports an error, for up to 20 s. */
static tfc_status wait_write_error(tfc_store *st, int64_t *count)
{
    tfc_status r = TFC_OK;
    for (int i = 0; i < 2000 && !(r = tfc_store_committed_checkpoints(st, count, NULL)); i++)
        usleep(10000);
    return r;
}

static void test_sticky_write_error(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *small = tfc_variable(g, "small", TFC_FLOAT32, S1(100), tfc_init_ones());
    tfc_tensor *large = tfc_variable(g, "large", TFC_FLOAT32, S1(1 << 20), tfc_init_ones());
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, g, &s), TFC_OK);
    tfc_session_init_variable(s, small);
    const char *path = tpath("sticky.db");
    tfc_store *st = create_store("sticky.db");
    int64_t count = -1, step = -2;
    CU_ASSERT_EQUAL(tfc_store_committed_checkpoints(st, &count, &step), TFC_OK);
    CU_ASSERT(count == 0 && step == -1);
    for (int i = 1; i <= 3; i++) CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "loss", i), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 3, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_committed_checkpoints(st, &count, &step), TFC_OK);
    CU_ASSERT(count == 1 && step == 3);
    tfc_session_init_variable(s, large);

    /* the checkpoint of step 4 fails on the writer thread, past the file size limit */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 1 << 20; /* the 4 MiB checkpoint cannot be written */
    CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 4, NULL), TFC_OK); /* the snapshot */
    tfc_status r = wait_write_error(st, &count);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CU_ASSERT_EQUAL(r, TFC_ERR_STORE);
    CU_ASSERT_EQUAL(count, 1); /* still the one of step 3 */
    const char *msg = tfc_store_errmsg(st);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "file size limit (RLIMIT_FSIZE"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "checkpoint of step 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, path));
    printf("\n    the failed write: %s\n", msg);

    /* sticky: every write call returns it and queues nothing, however much room there is now */
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 4, "loss", 4), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "checkpoint of step 4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "log_metric refused"));
    printf("    the next write call: %s\n", tfc_store_errmsg(st));
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 5, NULL), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "file size limit"));
    CU_ASSERT_EQUAL(tfc_store_set_retention(st, 2, 0), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_truncate_metrics(st, 0), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_committed_checkpoints(st, &count, NULL), TFC_ERR_STORE);
    /* the flush reports it, once */
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "checkpoint of step 4"));
    CU_ASSERT_EQUAL(tfc_store_committed_checkpoints(st, &count, &step), TFC_OK);
    CU_ASSERT(count == 1 && step == 3);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 6, "loss", 6), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 6, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_committed_checkpoints(st, &count, &step), TFC_OK);
    CU_ASSERT(count == 2 && step == 6);
    tfc_checkpoint_info *info;
    int n;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT(n == 2 && info[0].step == 3 && info[1].step == 6);
    free(info);
    int64_t *steps;
    double *values;
    CU_ASSERT_EQUAL(tfc_store_read_metric(st, "loss", &n, &steps, &values), TFC_OK);
    CU_ASSERT(n == 4 && steps[2] == 3 && steps[3] == 6); /* the refused one is not there */
    free(steps);
    free(values);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
}

/* A failed write drops what was queued behind it: no checkpoint commits after an earlier one
 * failed. The caller's own connection holds the write lock while the writer waits for it. */
static void test_failed_write_drops_queue(void)
{
    struct model m;
    small_model(&m, 2, TFC_FLOAT32, NULL);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s), TFC_OK);
    /* a trainer from the start: the training lock needs a write transaction of its own */
    tfc_store *st = create_store_flags("dropped.db", TFC_STORE_TRAINER);
    tfc_store_set_busy_timeout(st, 200);
    CU_ASSERT_EQUAL_FATAL(tfc_store_exec_sql(st, "BEGIN IMMEDIATE"), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 1, NULL), TFC_OK); /* waits 200 ms, fails */
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 2, NULL), TFC_OK); /* queued behind it */
    int64_t count = -1;
    tfc_status r = wait_write_error(st, &count);
    CU_ASSERT_EQUAL(tfc_store_exec_sql(st, "ROLLBACK"), TFC_OK); /* room for step 2 now */
    CU_ASSERT_EQUAL(r, TFC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "checkpoint of step 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_store_errmsg(st), "locked"));
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_ERR_STORE);
    CU_ASSERT_EQUAL(tfc_store_committed_checkpoints(st, &count, NULL), TFC_OK);
    CU_ASSERT_EQUAL(count, 0);
    tfc_checkpoint_info *info;
    int n = -1;
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT_EQUAL(n, 0); /* not step 2 alone */
    free(info);
    /* reported: the store takes writes again */
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 3, NULL), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_list_checkpoints(st, &n, &info), TFC_OK);
    CU_ASSERT(n == 1 && info[0].step == 3);
    free(info);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_graph_destroy(m.g);
}

/* ---- metrics in step with checkpoints --------------------------------------------------------- */

static void test_metrics_in_checkpoint(void)
{
    struct model m;
    small_model(&m, 2, TFC_FLOAT32, NULL);
    tfc_session *s;
    CU_ASSERT_EQUAL_FATAL(tfc_session_create(test_ctx, m.g, &s), TFC_OK);
    CU_ASSERT_EQUAL(tfc_session_init_variables(s), TFC_OK);
    const char *path = tpath("ckmetrics.db");
    /* a trainer from the start: the training lock's own transaction is not counted below */
    tfc_store *st = create_store_flags("ckmetrics.db", TFC_STORE_TRAINER), *ro;
    for (int i = 1; i <= 5; i++) {
        CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "loss", 1.0 / i), TFC_OK);
        CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "accuracy", 0.1 * i), TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 7, "loss", 7), TFC_OK); /* ahead of the checkpoint */
    uint64_t before = tfc_store_write_transactions(st);
    CU_ASSERT_EQUAL(tfc_store_checkpoint(st, s, 5, NULL), TFC_OK);
    int64_t count = 0, n = -1;
    for (int i = 0; i < 2000 && !tfc_store_committed_checkpoints(st, &count, NULL) && !count; i++)
        usleep(10000);
    CU_ASSERT_EQUAL_FATAL(count, 1);
    /* one transaction: the checkpoint with the metrics of steps 1 to 5, seen from another
     * connection while the one of step 7 is still buffered */
    CU_ASSERT_EQUAL(tfc_store_write_transactions(st) - before, 1);
    CU_ASSERT_EQUAL_FATAL(tfc_store_open(path, TFC_STORE_READONLY, &ro), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_query_int(ro, "SELECT count(*) FROM metrics WHERE step <= 5", &n),
                    TFC_OK);
    CU_ASSERT_EQUAL(n, 10);
    CU_ASSERT_EQUAL(tfc_store_query_int(ro, "SELECT count(*) FROM metrics WHERE step > 5", &n),
                    TFC_OK);
    CU_ASSERT_EQUAL(n, 0);
    tfc_store_close(ro);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_query_int(st, "SELECT count(*) FROM metrics", &n), TFC_OK);
    CU_ASSERT_EQUAL(n, 11);
    tfc_store_close(st);
    tfc_session_destroy(s);
    tfc_graph_destroy(m.g);
}

static void test_truncate_metrics(void)
{
    tfc_store *st = create_store("truncate.db");
    for (int i = 1; i <= 20; i++) CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "loss", i), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    /* resumed from step 10: the steps after it are trained again */
    CU_ASSERT_EQUAL(tfc_store_truncate_metrics(st, 10), TFC_OK);
    for (int i = 11; i <= 15; i++)
        CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "loss", 100 + i), TFC_OK);
    for (int i = 16; i <= 18; i++) /* still buffered when the next resume drops them */
        CU_ASSERT_EQUAL(tfc_store_log_metric(st, i, "loss", 200 + i), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_truncate_metrics(st, 15), TFC_OK);
    CU_ASSERT_EQUAL(tfc_store_log_metric(st, 3, "loss", 42), TFC_OK); /* replaces step 3's */
    CU_ASSERT_EQUAL(tfc_store_flush(st), TFC_OK);
    int n;
    int64_t *steps;
    double *values;
    CU_ASSERT_EQUAL_FATAL(tfc_store_read_metric(st, "loss", &n, &steps, &values), TFC_OK);
    CU_ASSERT_EQUAL(n, 15);
    int right = n == 15;
    for (int i = 0; i < n && right; i++) {
        int64_t k = i + 1;
        right = steps[i] == k && values[i] == (k == 3 ? 42 : k > 10 ? 100 + k : k);
    }
    CU_ASSERT(right);
    free(steps);
    free(values);
    tfc_store_close(st);
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int suite_init(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tfc-store-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) return -1;
    return test_ctx_open();
}

static int suite_clean(void)
{
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_ctx_close();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("store", suite_init, suite_clean);
    TEST_ADD(test_open_close);
    TEST_ADD(test_graph_roundtrip);
    TEST_ADD(test_graph_export_fails);
    TEST_ADD(test_stored_sizes_that_overflow);
    TEST_ADD(test_stored_constant_size);
    TEST_ADD(test_damaged_chunks);
    TEST_ADD(test_signatures);
    TEST_ADD(test_checkpoint_restore);
    TEST_ADD(test_shape_mismatch);
    TEST_ADD(test_chunked_variables);
    TEST_ADD(test_big_variable);
    TEST_ADD(test_retention);
    TEST_ADD(test_consistent_cut);
    TEST_ADD(test_resume_training);
    TEST_ADD(test_metrics);
    TEST_ADD(test_list_metrics);
    TEST_ADD(test_migrations);
    TEST_ADD(test_not_a_database);
    TEST_ADD(test_truncated_and_corrupted);
    TEST_ADD(test_readonly_flag);
    TEST_ADD(test_two_processes);
    TEST_ADD(test_readonly_mount);
    TEST_ADD(test_disk_full);
    TEST_ADD(test_latest_by_step);
    TEST_ADD(test_training_lock_two_processes);
    TEST_ADD(test_training_lock_takeover);
    TEST_ADD(test_training_lock_exclusive);
    TEST_ADD(test_readers_leave_one_file);
    TEST_ADD(test_zero_byte_file);
    TEST_ADD(test_sticky_write_error);
    TEST_ADD(test_failed_write_drops_queue);
    TEST_ADD(test_metrics_in_checkpoint);
    TEST_ADD(test_truncate_metrics);
    return test_main();
}
