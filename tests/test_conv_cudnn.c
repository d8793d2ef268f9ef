/* test_conv_cudnn.c: the cuDNN convolution kernels (codelets/conv_cudnn.cu) on a CUDA worker
 * against the CPU's im2col kernel, and the own CUDA kernel (TFC_CONV_BACKEND=im2col) too, for
 * conv, conv_backprop_input and conv_backprop_filter in float32 and float64: 1-3 spatial dims,
 * strides, dilations, groups, depthwise, a high pad that does not change the output extent
 * (cuDNN takes it) and one that does (cuDNN must decline it, the own kernel runs it). The
 * counters say which ran, so a GPU run that silently fell back everywhere fails. Each output
 * starts as garbage; a second run (the cached plan) must give the same bits. Needs a CUDA
 * worker: without one (or in a build without CUDA) it returns 77 (skip). */
#include "config.h"
#include <starpu.h>
#include "testutil.h"
#include "../codelets/conv_geom.h"
#ifdef TFC_USE_CUDA
#include "../codelets/conv_cudnn.h"

extern struct starpu_codelet tfc_cl_conv;

struct conv_case {
    const char *name;
    int cudnn; /* 1: cuDNN must run it; 0: it must decline */
    int nd;
    int64_t n, c, k, groups, in[3], kern[3], stride[3], dil[3], pad_lo[3], pad_hi[3];
};

static const struct conv_case cases[] = {
    {"2-D 5x5 pads 2, 3->8", 1, 2, 2, 3, 8, 1, {12, 10}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}},
    {"1-D stride 2, no pads", 1, 1, 3, 4, 6, 1, {11}, {3}, {2}, {1}, {0}, {0}},
    {"2-D groups 2, dilation 2, strides 2x1", 1, 2, 2, 8, 4, 2, {9, 7}, {3, 2}, {2, 1}, {2, 1},
     {1, 1}, {1, 1}},
    {"3-D strides, dilation, pads 1", 1, 3, 1, 3, 2, 1, {5, 6, 6}, {2, 3, 2}, {1, 2, 1},
     {1, 1, 2}, {1, 1, 1}, {1, 1, 1}},
    {"depthwise 16 channels", 1, 2, 2, 16, 16, 16, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1},
     {1, 1}},
    /* pads 1/2 with stride 2 on 7: the high pad adds no output (4 either way) */
    {"2-D pads 1/2 with stride 2 (same extent)", 1, 2, 1, 2, 3, 1, {7, 7}, {3, 3}, {2, 2},
     {1, 1}, {1, 1}, {2, 2}},
    /* pads 0/2 on 7 with kernel 3: 7 outputs, 5 with pads 0/0: cuDNN cannot express it */
    {"1-D pads 0/2 (asymmetric)", 0, 1, 2, 3, 2, 1, {7}, {3}, {1}, {1}, {0}, {2}},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

static const int kinds[3] = {TFC_K_CONV, TFC_K_CONV_BP_INPUT, TFC_K_CONV_BP_FILTER};
static const char *const kind_names[3] = {"conv", "conv_backprop_input", "conv_backprop_filter"};

/* One task's arguments and host buffers (in0, in1, out), the output full of garbage. */
struct task {
    struct tfc_kargs *a;
    struct tfc_kerr err;
    void *data[3];
    int64_t numel[3];
    size_t es;
};

static void dims_of(const struct conv_case *q, const struct tfc_conv_geom *g, int which,
                    struct tfc_kdesc *d)
{
    int64_t lead[3][2] = {{q->n, q->c}, {q->k, q->c / q->groups}, {q->n, q->k}};
    d->rank = q->nd + 2, d->dims[0] = lead[which][0], d->dims[1] = lead[which][1];
    d->numel = d->dims[0] * d->dims[1];
    for (int i = 0; i < q->nd; i++) {
        d->dims[2 + i] = which == 0 ? q->in[i] : which == 1 ? q->kern[i] : g->out[i];
        d->numel *= d->dims[2 + i];
    }
}

static void task_make(struct task *t, const struct conv_case *q, int kind, int dtype)
{
    memset(t, 0, sizeof *t);
    t->a = calloc(1, sizeof *t->a + 3 * sizeof(struct tfc_kdesc));
    struct tfc_kargs *a = t->a;
    a->kind = kinds[kind], a->n_in = 2, a->n_out = 1, a->err = &t->err;
    a->attrs[CONV_GROUPS].i = q->groups;
    a->attrs[CONV_STRIDES].n = a->attrs[CONV_DILATIONS].n = q->nd;
    a->attrs[CONV_PADS].n = 2 * q->nd;
    for (int i = 0; i < q->nd; i++) {
        a->attrs[CONV_STRIDES].v[i] = q->stride[i], a->attrs[CONV_DILATIONS].v[i] = q->dil[i];
        a->attrs[CONV_PADS].v[i] = q->pad_lo[i], a->attrs[CONV_PADS].v[q->nd + i] = q->pad_hi[i];
    }
    struct tfc_kdesc sh[3]; /* x, w, y */
    struct tfc_conv_geom g;
    char msg[200];
    dims_of(q, NULL, 0, &sh[0]), dims_of(q, NULL, 1, &sh[1]);
    CU_ASSERT_FATAL(!tfc_conv_geom_make(sh[0].dims, sh[0].rank, sh[1].dims, sh[1].rank,
                                        a->attrs, &g, msg, sizeof msg));
    dims_of(q, &g, 2, &sh[2]);
    static const int order[3][3] = {{0, 1, 2}, {2, 1, 0}, {0, 2, 1}}; /* in0, in1, out */
    t->es = dtype == TFC_FLOAT32 ? 4 : 8;
    for (int i = 0; i < 3; i++) {
        a->d[i] = sh[order[kind][i]];
        a->d[i].dtype = dtype, a->d[i].buf = i;
        t->numel[i] = a->d[i].numel;
        t->data[i] = malloc((size_t)t->numel[i] * t->es);
        for (int64_t j = 0; j < t->numel[i]; j++) {
            double v = i == 2 ? 7.0 : (double)rand() / RAND_MAX * 4 - 2;
            if (dtype == TFC_FLOAT32) ((float *)t->data[i])[j] = (float)v;
            else ((double *)t->data[i])[j] = v;
        }
    }
}

/* A copy of t's inputs with the garbage output. */
static void task_clone(struct task *c, const struct task *t)
{
    *c = *t;
    size_t sz = sizeof *t->a + 3 * sizeof(struct tfc_kdesc);
    c->a = malloc(sz);
    memcpy(c->a, t->a, sz);
    c->a->err = &c->err;
    for (int i = 0; i < 3; i++) {
        c->data[i] = malloc((size_t)t->numel[i] * t->es);
        memcpy(c->data[i], t->data[i], (size_t)t->numel[i] * t->es);
    }
}

static void task_free(struct task *t)
{
    for (int i = 0; i < 3; i++) free(t->data[i]);
    free(t->a);
}

/* Runs t on worker `worker` (-1: the CPU codelet called here, im2col) with the backend. */
static void task_run(struct task *t, int worker, const char *backend)
{
    setenv("TFC_CONV_BACKEND", backend, 1);
    if (worker < 0) {
        struct starpu_vector_interface iface[3];
        void *bufs[3];
        for (int i = 0; i < 3; i++) {
            iface[i] = (struct starpu_vector_interface){.id = STARPU_VECTOR_INTERFACE_ID,
                                                        .ptr = (uintptr_t)t->data[i],
                                                        .nx = (uint32_t)t->numel[i],
                                                        .elemsize = (uint32_t)t->es};
            bufs[i] = &iface[i];
        }
        tfc_cl_conv.cpu_funcs[0](bufs, t->a);
    } else {
        starpu_data_handle_t h[3];
        for (int i = 0; i < 3; i++)
            starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)t->data[i],
                                        (uint32_t)t->numel[i], t->es);
        size_t sz = sizeof *t->a + 3 * sizeof(struct tfc_kdesc);
        struct tfc_kargs *a = malloc(sz); /* StarPU frees it with the task (STARPU_CL_ARGS) */
        memcpy(a, t->a, sz);
        CU_ASSERT(starpu_task_insert(&tfc_cl_conv, STARPU_R, h[0], STARPU_R, h[1], STARPU_W,
                                     h[2], STARPU_CL_ARGS, a, sz, STARPU_EXECUTE_ON_WORKER,
                                     worker, 0) == 0);
        starpu_task_wait_for_all();
        for (int i = 0; i < 3; i++) starpu_data_unregister(h[i]);
    }
    unsetenv("TFC_CONV_BACKEND");
}

/* max |got - want| over max |want|. */
static double rel_diff(const struct task *got, const struct task *want)
{
    double diff = 0, big = 1e-30;
    for (int64_t i = 0; i < want->numel[2]; i++) {
        double g = got->es == 4 ? ((float *)got->data[2])[i] : ((double *)got->data[2])[i];
        double w = want->es == 4 ? ((float *)want->data[2])[i] : ((double *)want->data[2])[i];
        diff = fmax(diff, fabs(g - w)), big = fmax(big, fabs(w));
    }
    return diff / big;
}

static int g_worker = -1; /* the CUDA worker */

/* One case, kind and dtype: cuDNN twice (the second from the cached plan), the own CUDA
 * kernel and the CPU's im2col, with what the counters say about who ran. */
static void check_one(const struct conv_case *q, int k, int dtype)
{
    struct task ref, cud, cud2, own;
    task_make(&ref, q, k, dtype);
    task_clone(&cud, &ref), task_clone(&cud2, &ref), task_clone(&own, &ref);
    task_run(&ref, -1, "im2col");
    long long ran0, dec0, ran1, dec1, ran2, dec2;
    tfc_conv_cudnn_counts(&ran0, &dec0);
    task_run(&cud, g_worker, "auto");
    task_run(&cud2, g_worker, "auto");
    tfc_conv_cudnn_counts(&ran1, &dec1);
    task_run(&own, g_worker, "im2col");
    tfc_conv_cudnn_counts(&ran2, &dec2);
    double tol = dtype == TFC_FLOAT32 ? 1e-4 : 1e-12; /* the op sweep's: FFT, Winograd */
    double d_cud = rel_diff(&cud, &ref), d_own = rel_diff(&own, &ref);
    int same = !memcmp(cud.data[2], cud2.data[2], (size_t)cud.numel[2] * cud.es);
    int by_cudnn = ran1 - ran0 == 2 && dec1 == dec0, declined = dec1 - dec0 == 2 && ran1 == ran0;
    int ok = !cud.err.set && !cud2.err.set && !own.err.set && !ref.err.set && d_cud <= tol &&
             d_own <= tol && same && (q->cudnn ? by_cudnn : declined) && ran2 == ran1 &&
             dec2 == dec1;
    if (!ok)
        fprintf(stderr, "%s, %s, %s: cuDNN ran %lld and declined %lld of 2 (expected %s), "
                "then %lld/%lld under im2col; diff %.3g (cuDNN) %.3g (own kernel); second "
                "run %s; errors '%s' '%s'\n", q->name, kind_names[k],
                dtype == TFC_FLOAT32 ? "float32" : "float64", ran1 - ran0, dec1 - dec0,
                q->cudnn ? "ran" : "declined", ran2 - ran1, dec2 - dec1, d_cud, d_own,
                same ? "the same" : "differs", cud.err.set ? cud.err.msg : "",
                own.err.set ? own.err.msg : "");
    CU_ASSERT(ok);
    task_free(&ref), task_free(&cud), task_free(&cud2), task_free(&own);
}

static void test_against_cpu(void)
{
    srand(12);
    for (int ci = 0; ci < NCASES; ci++)
        for (int k = 0; k < 3; k++)
            for (int dt = 0; dt < 2; dt++)
                check_one(&cases[ci], k, dt ? TFC_FLOAT64 : TFC_FLOAT32);
}
#endif

int main(void)
{
#ifndef TFC_USE_CUDA
    fprintf(stderr, "test_conv_cudnn: built without CUDA: skipped\n");
    return 77;
#else
    unsetenv("TFC_CONV_BACKEND");
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx) != TFC_OK) return 1;
    for (unsigned w = 0; w < starpu_worker_get_count() && g_worker < 0; w++)
        if (starpu_worker_get_type((int)w) == STARPU_CUDA_WORKER) g_worker = (int)w;
    if (g_worker < 0) {
        fprintf(stderr, "test_conv_cudnn: StarPU has no CUDA worker: skipped\n");
        tfc_ctx_destroy(ctx);
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("cuDNN convolutions", NULL, NULL);
    if (!s || !CU_add_test(s, "cuDNN and own CUDA kernel against CPU", test_against_cpu))
        return 1;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    tfc_ctx_destroy(ctx);
    return failures ? 1 : 0;
#endif
}
