/* test_plan.c: lowering, seen from inside sched/: pruning to the needed nodes, one step per
 * node with the right access modes, the snapshot step of a fetched variable, hop steps, and
 * perfmodel footprints that tell dtypes, shapes and cost-relevant attributes apart (StarPU's
 * default footprint ignores the element size). */
#include "config.h" /* TFC_HAVE_DNNL */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "../sched/plan.h"

static tfc_shape S2(int64_t a, int64_t b) { return tfc_shape_of(2, (int64_t[]){a, b}); }

static struct plan *build(tfc_graph *g, int nf, tfc_tensor **ft, tfc_value **fv, int nfetch,
                          tfc_tensor **fetch, const struct plan_options *opt)
{
    tfc_status st;
    char msg[TFC_MSG_LEN];
    struct plan *p = tfc_plan_build(g, nf, ft, fv, nfetch, fetch, 0, NULL, opt, &st, msg);
    if (!p) fprintf(stderr, "plan: %s\n", msg);
    return p;
}

static uint32_t matmul_footprint(enum tfc_dtype dt, int64_t m, int ta)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *a = tfc_placeholder(g, "a", dt, S2(m, m));
    tfc_tensor *y = tfc_matmul(g, a, a, ta, 0);
    tfc_value *av;
    tfc_value_create(dt, S2(m, m), &av);
    struct plan *p = build(g, 1, &a, &av, 1, &y, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->n_steps, 1);
    uint32_t f = p->steps[0].args->footprint;
    tfc_plan_free(p);
    tfc_value_destroy(av);
    tfc_graph_destroy(g);
    return f;
}

static void test_footprints(void)
{
    uint32_t f32 = matmul_footprint(TFC_FLOAT32, 64, 0);
    CU_ASSERT_EQUAL(f32, matmul_footprint(TFC_FLOAT32, 64, 0));   /* stable */
    CU_ASSERT_NOT_EQUAL(f32, matmul_footprint(TFC_FLOAT64, 64, 0)); /* element size */
    CU_ASSERT_NOT_EQUAL(f32, matmul_footprint(TFC_FLOAT32, 32, 0)); /* shape */
    CU_ASSERT_NOT_EQUAL(f32, matmul_footprint(TFC_FLOAT32, 64, 1)); /* transpose attribute */
}

/* ---- convolution and pooling perfmodels ---------------------------------------------------- */

/* The footprint and flops of the one step computing y (fed x, constant-free graph). */
static void step_model(tfc_graph *g, tfc_tensor *x, tfc_tensor *y, uint32_t *fp, double *flops)
{
    CU_ASSERT_EQUAL_FATAL(tfc_graph_status(g), TFC_OK);
    tfc_value *xv;
    tfc_value_create(tfc_tensor_dtype(x), tfc_tensor_shape(x), &xv);
    struct plan *p = build(g, 1, &x, &xv, 1, &y, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(p->n_steps, 1);
    *fp = p->steps[0].args->footprint;
    *flops = p->steps[0].args->flops;
    tfc_plan_free(p);
    tfc_value_destroy(xv);
}

/* conv x [2, 4, 9, 11] with a variable w [6, 4/groups, 3, 3] and pc's attributes; which
 * selects the op (0 conv, 1 backprop_input, 2 backprop_filter, each fed the tensor it reads). */
static void conv_model(int which, const tfc_conv_params *pc, uint32_t *fp, double *flops)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    int64_t gr = pc->groups ? pc->groups : 1;
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, (int64_t[]){2, 4, 9, 11}));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32,
                                 tfc_shape_of(4, (int64_t[]){6, 4 / gr, 3, 3}), tfc_init_ones());
    tfc_tensor *y = tfc_conv(g, x, w, pc), *fed = x, *out = y;
    if (which) { /* dy fed, of y's shape */
        fed = tfc_placeholder(g, "dy", TFC_FLOAT32, tfc_tensor_shape(y));
        out = which == 1 ? tfc_conv_backprop_input(g, fed, w, x, pc)
                         : tfc_conv_backprop_filter(g, x, fed, w, pc);
    }
    if (which) { /* x is read (or its shape) too: feed it as well */
        tfc_value *xv, *dv;
        tfc_value_create(TFC_FLOAT32, tfc_tensor_shape(x), &xv);
        tfc_value_create(TFC_FLOAT32, tfc_tensor_shape(fed), &dv);
        tfc_tensor *ft[2] = {x, fed};
        tfc_value *fv[2] = {xv, dv};
        struct plan *p = build(g, 2, ft, fv, 1, &out, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL_FATAL(p->n_steps, 1);
        *fp = p->steps[0].args->footprint, *flops = p->steps[0].args->flops;
        tfc_plan_free(p);
        tfc_value_destroy(xv), tfc_value_destroy(dv);
    } else {
        step_model(g, fed, out, fp, flops);
    }
    tfc_graph_destroy(g);
}

/* Two convolutions of the same operand sizes but another stride, pad, dilation or group count
 * (or auto_pad) get different footprints, so StarPU keeps one history entry each; the flops
 * are 2 N K C/groups kvol ovol for the convolution and both adjoints. */
static void test_conv_models(void)
{
    tfc_conv_params base = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, 0};
    tfc_conv_params var[5] = {base, base, base, base, base};
    var[0].strides[1] = 2;
    var[1].pads_begin[0] = 1;
    var[2].dilations[1] = 2;
    var[3].groups = 2;
    var[4].auto_pad = TFC_CONV_PAD_SAME_UPPER;
    for (int which = 0; which < 3; which++) {
        uint32_t f0, f0b, fv[5];
        double fl0, fl, flv[5];
        conv_model(which, &base, &f0, &fl0);
        conv_model(which, &base, &f0b, &fl);
        CU_ASSERT_EQUAL(f0, f0b); /* stable */
        /* out 7 x 9: 2 * N 2 * K 6 * C 4 * kvol 9 * ovol 63 */
        CU_ASSERT_DOUBLE_EQUAL(fl0, 2.0 * 2 * 6 * 4 * 9 * 63, 1e-9);
        for (int v = 0; v < 5; v++) {
            conv_model(which, &var[v], &fv[v], &flv[v]);
            CU_ASSERT_NOT_EQUAL(fv[v], f0);
            for (int u = 0; u < v; u++) CU_ASSERT_NOT_EQUAL(fv[v], fv[u]);
        }
        CU_ASSERT_DOUBLE_EQUAL(flv[0], 2.0 * 2 * 6 * 4 * 9 * (7 * 5), 1e-9); /* stride 2 */
        CU_ASSERT_DOUBLE_EQUAL(flv[3], 2.0 * 2 * 6 * 2 * 9 * 63, 1e-9);      /* groups 2 */
        CU_ASSERT_DOUBLE_EQUAL(flv[4], 2.0 * 2 * 6 * 4 * 9 * 99, 1e-9);      /* SAME: 9 x 11 */
    }
}

/* conv_transpose: output_padding (which changes only the output's size) and the stride are
 * keys; flops count the backprop-input kernel's multiply-adds: 2 N C_in C_out/groups kvol
 * in-volume (x [2, 4, 5], w [4, 3, 3]). */
static void test_conv_transpose_models(void)
{
    uint32_t fp[3];
    double fl[3];
    for (int v = 0; v < 3; v++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){2, 4, 5}));
        tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){4, 3, 3}),
                                     tfc_init_ones());
        tfc_conv_transpose_params tp = {.strides = {v ? 3 : 2}, .output_padding = {v == 1}};
        step_model(g, x, tfc_conv_transpose(g, x, w, &tp), &fp[v], &fl[v]);
        tfc_graph_destroy(g);
    }
    CU_ASSERT_NOT_EQUAL(fp[0], fp[1]);
    CU_ASSERT_NOT_EQUAL(fp[0], fp[2]);
    CU_ASSERT_NOT_EQUAL(fp[1], fp[2]);
    for (int v = 0; v < 3; v++) CU_ASSERT_DOUBLE_EQUAL(fl[v], 2.0 * 2 * 4 * 3 * 3 * 5, 1e-9);
}

/* Pooling: ceil_mode and count_include_pad are keys too; flops are a window per output. */
static void test_pool_models(void)
{
    uint32_t fp[3];
    double fl[3];
    for (int v = 0; v < 3; v++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32,
                                        tfc_shape_of(4, (int64_t[]){2, 3, 8, 8}));
        tfc_pool_params pp = {.n_spatial = 2, .kernel = {3, 3}, .strides = {2, 2},
                              .ceil_mode = v == 1, .count_include_pad = v == 2};
        step_model(g, x, tfc_avg_pool(g, x, &pp), &fp[v], &fl[v]);
        tfc_graph_destroy(g);
    }
    CU_ASSERT_NOT_EQUAL(fp[0], fp[1]);
    CU_ASSERT_NOT_EQUAL(fp[0], fp[2]);
    CU_ASSERT_DOUBLE_EQUAL(fl[0], 2.0 * 3 * 3 * 3 * 9, 1e-9); /* out 3 x 3, window 9 */
    CU_ASSERT_DOUBLE_EQUAL(fl[1], 2.0 * 3 * 4 * 4 * 9, 1e-9); /* ceil_mode: out 4 x 4 */
}

/* ---- normalization and dropout models, the convolution backend --------------------------- */

/* Kernel arguments of `kind` over float32 operands of the given shapes (n_in inputs, then the
 * outputs) and attributes, finished as a plan's steps are. The caller frees them. */
static struct tfc_kargs *kargs_of(int kind, int n_in, int n_out, const tfc_shape *shapes,
                                  const struct tfc_kattr *attrs)
{
    int n = n_in + n_out;
    struct tfc_kargs *a = calloc(1, sizeof *a + sizeof(struct tfc_kdesc) * (size_t)n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    a->kind = kind, a->n_in = n_in, a->n_out = n_out;
    if (attrs) memcpy(a->attrs, attrs, sizeof a->attrs);
    for (int i = 0; i < n; i++) {
        struct tfc_kdesc *d = &a->d[i];
        d->dtype = TFC_FLOAT32, d->rank = shapes[i].rank, d->numel = 1, d->buf = i;
        for (int j = 0; j < d->rank; j++) d->numel *= d->dims[j] = shapes[i].dims[j];
    }
    tfc_kargs_finish(a);
    return a;
}

static double kargs_flops_of(int kind, int n_in, int n_out, const tfc_shape *shapes)
{
    struct tfc_kargs *a = kargs_of(kind, n_in, n_out, shapes, NULL);
    double f = a->flops;
    free(a);
    return f;
}

/* Normalizations count their passes over x (training mode), not one flop per output. */
static void test_norm_models(void)
{
    tfc_shape x = tfc_shape_of(4, (int64_t[]){2, 3, 4, 5}), c = tfc_shape_of(1, (int64_t[]){3});
    tfc_shape sc = tfc_shape_of(0, NULL), r = tfc_shape_of(2, (int64_t[]){6, 10});
    tfc_shape rows = tfc_shape_of(1, (int64_t[]){6});
    /* batch_norm(x, gamma, beta, moving_mean, moving_var, training) -> y, mean, var */
    tfc_shape bn[9] = {x, c, c, c, c, sc, x, c, c};
    CU_ASSERT_DOUBLE_EQUAL(kargs_flops_of(TFC_K_BATCH_NORM, 6, 3, bn), 7.0 * 120, 1e-9);
    /* batch_norm_grad(dy, x, gamma, mean, var, training) -> dx, dgamma, dbeta, dmean, dvar */
    tfc_shape bng[11] = {x, x, c, c, c, sc, x, c, c, c, c};
    CU_ASSERT_DOUBLE_EQUAL(kargs_flops_of(TFC_K_BATCH_NORM_GRAD, 6, 5, bng), 12.0 * 120, 1e-9);
    /* batch_norm_update(moving_mean, moving_var, mean, var, training, x) -> moving_mean */
    tfc_shape bnu[7] = {c, c, c, c, sc, x, c};
    CU_ASSERT_DOUBLE_EQUAL(kargs_flops_of(TFC_K_BATCH_NORM_UPDATE, 6, 1, bnu), 8.0 * 3, 1e-9);
    /* layer_norm(x) -> y, mean, var; layer_norm_grad(dy, x, mean, var) -> dx */
    tfc_shape ln[4] = {r, r, rows, rows}, lng[5] = {r, r, rows, rows, r};
    CU_ASSERT_DOUBLE_EQUAL(kargs_flops_of(TFC_K_LAYER_NORM, 1, 3, ln), 6.0 * 60, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(kargs_flops_of(TFC_K_LAYER_NORM_GRAD, 4, 1, lng), 11.0 * 60, 1e-9);
}

/* Dropout: a Philox block per 4 elements; the rate is a key, the seed (which units, not how
 * many) is not, so the layers of one shape share a history. */
static void test_dropout_models(void)
{
    tfc_shape x = tfc_shape_of(2, (int64_t[]){6, 10}), sc = tfc_shape_of(0, NULL);
    tfc_shape ops[4] = {x, sc, sc, x}; /* (x, step, training) -> y */
    struct tfc_kattr at[3][TFC_K_MAX_ATTRS];
    memset(at, 0, sizeof at);
    for (int v = 0; v < 3; v++) {
        at[v][DROPOUT_RATE].f = v == 2 ? 0.25 : 0.5;
        at[v][DROPOUT_SEED].i = v == 1 ? 77 : 5;
    }
    for (int kind = TFC_K_DROPOUT; kind <= TFC_K_DROPOUT_GRAD; kind++) {
        struct tfc_kargs *a[3];
        for (int v = 0; v < 3; v++) a[v] = kargs_of(kind, 3, 1, ops, at[v]);
        CU_ASSERT_DOUBLE_EQUAL(a[0]->flops, 22.0 * 60, 1e-9);
        CU_ASSERT_EQUAL(a[0]->footprint, a[1]->footprint);     /* another seed */
        CU_ASSERT_NOT_EQUAL(a[0]->footprint, a[2]->footprint); /* another rate */
        for (int v = 0; v < 3; v++) free(a[v]);
    }
}

/* The convolution's footprint tells the CPU kernels apart: im2col's history is not oneDNN's.
 * auto and dnnl run the same kernels (oneDNN's in a build with it, else auto runs im2col). */
static void test_conv_backend_footprint(void)
{
    tfc_conv_params base = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, 0};
    static const char *const backends[3] = {"auto", "dnnl", "im2col"};
    for (int which = 0; which < 3; which++) {
        uint32_t fp[3];
        double fl;
        for (int b = 0; b < 3; b++) {
            setenv("TFC_CONV_BACKEND", backends[b], 1);
            conv_model(which, &base, &fp[b], &fl);
        }
        unsetenv("TFC_CONV_BACKEND");
        uint32_t unset;
        conv_model(which, &base, &unset, &fl);
        CU_ASSERT_EQUAL(unset, fp[0]);
        CU_ASSERT_EQUAL(fp[0], fp[1]);
#ifdef TFC_HAVE_DNNL
        CU_ASSERT_NOT_EQUAL(fp[0], fp[2]);
#else
        CU_ASSERT_EQUAL(fp[0], fp[2]);
#endif
    }
}

static void test_steps_and_modes(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, S2(-1, 4));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, S2(4, 4), tfc_init_ones());
    tfc_tensor *h = tfc_relu(g, tfc_matmul(g, x, w, 0, 0));
    tfc_tensor *unused = tfc_exp(g, h);
    tfc_tensor *upd = tfc_assign_add(g, w, tfc_matmul(g, h, h, 1, 0));
    (void)unused;
    tfc_value *xv;
    tfc_value_create(TFC_FLOAT32, S2(8, 4), &xv);
    tfc_tensor *fetch[2] = {w, upd};
    struct plan *p = build(g, 1, &x, &xv, 2, fetch, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* snapshot(w), matmul, relu, matmul(h^T h), assign_add, snapshot(w after): exp pruned */
    CU_ASSERT_EQUAL(p->n_steps, 6);
    int assign = -1;
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].args->kind == TFC_K_ASSIGN_ADD) assign = i;
    CU_ASSERT_EQUAL_FATAL(assign, 4);
    CU_ASSERT_EQUAL(p->steps[assign].modes[0], STARPU_RW); /* the variable, updated in place */
    CU_ASSERT_EQUAL(p->steps[assign].modes[1], STARPU_R);
    CU_ASSERT_EQUAL(p->slots[p->steps[assign].buf_slot[0]].kind, SLOT_PERSIST);
    CU_ASSERT_EQUAL(p->steps[0].args->kind, TFC_K_IDENTITY); /* w fetched before the update */
    CU_ASSERT_EQUAL(p->steps[1].args->d[0].dims[0], 8);      /* concrete batch */
    CU_ASSERT_EQUAL(p->n_var_checks, 1);
    tfc_plan_free(p);
    /* with the hop hook, each produced value gets a copy step */
    struct plan_options opt = {.hop = 1, .hop_where = STARPU_CPU};
    p = build(g, 1, &x, &xv, 1, &h, &opt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->n_steps, 4);
    CU_ASSERT_EQUAL(p->steps[1].cl, &tfc_cl_hop);
    CU_ASSERT_EQUAL(p->steps[3].where, STARPU_CPU);
    tfc_plan_free(p);
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
}

static void test_many_operands_and_empty(void)
{
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *in[12];
    tfc_value *vals[12];
    for (int i = 0; i < 12; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%d", i);
        in[i] = tfc_placeholder(g, name, TFC_FLOAT32, S2(2, i == 3 ? 0 : 1));
        tfc_value_create(TFC_FLOAT32, S2(2, i == 3 ? 0 : 1), &vals[i]);
    }
    tfc_tensor *c = tfc_concat(g, 12, in, 1);
    struct plan *p = build(g, 12, in, vals, 1, &c, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->n_steps, 1);
    CU_ASSERT_EQUAL(p->steps[0].n_buf, 12); /* 11 inputs + output: the empty one has no buffer */
    CU_ASSERT_EQUAL(p->steps[0].args->d[3].buf, -1);
    CU_ASSERT_EQUAL(p->slots[3].kind, SLOT_EMPTY);
    tfc_plan_free(p);
    for (int i = 0; i < 12; i++) tfc_value_destroy(vals[i]);
    tfc_graph_destroy(g);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("plan", NULL, NULL);
    TEST_ADD(test_footprints);
    TEST_ADD(test_conv_models);
    TEST_ADD(test_conv_transpose_models);
    TEST_ADD(test_pool_models);
    TEST_ADD(test_norm_models);
    TEST_ADD(test_dropout_models);
    TEST_ADD(test_conv_backend_footprint);
    TEST_ADD(test_steps_and_modes);
    TEST_ADD(test_many_operands_and_empty);
    return test_main();
}
