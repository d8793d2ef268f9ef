/* test_conv_dnnl.c: the oneDNN convolution kernels (codelets/conv_dnnl.c) against the im2col
 * ones (codelets/conv.c with TFC_CONV_BACKEND=im2col) on the same buffers, called as StarPU
 * calls a CPU codelet: 1-3 spatial dims, strides, asymmetric pads, dilations, groups, the
 * CNN's two layers (blocked layouts, and the plain ones of a 1-channel input gradient). Each
 * output starts as garbage, so both must overwrite it alike (the filter gradient is the sum over
 * the task's images, not added to what was there). Also: a second call (a cached primitive)
 * gives the same bits, float64 is declined, oneDNN starts no thread of its own, and
 * TFC_CONV_BACKEND's bad values fail the task with a message. Without oneDNN in the build the
 * kernels say so, and TFC_CONV_BACKEND=dnnl fails the task saying so. */
#include "config.h"
#include <dirent.h>
#ifdef TFC_HAVE_DNNL
#include <omp.h>
#endif
#include <starpu.h>
#include "testutil.h"
#include "../codelets/conv_dnnl.h"
#include "../codelets/conv_geom.h"

extern struct starpu_codelet tfc_cl_conv;

struct conv_case {
    const char *name;
    int nd;
    int64_t n, c, k, groups, in[3], kern[3], stride[3], dil[3], pad_lo[3], pad_hi[3];
};

static const struct conv_case cases[] = {
    {"cnn conv2 (5x5 SAME, 32->64)", 2, 2, 32, 64, 1, {14, 14}, {5, 5}, {1, 1}, {1, 1},
     {2, 2}, {2, 2}},
    {"cnn conv1 (5x5 SAME, 1->32)", 2, 2, 1, 32, 1, {28, 28}, {5, 5}, {1, 1}, {1, 1}, {2, 2},
     {2, 2}},
    {"1-D stride 2, pads 1/0", 1, 3, 4, 6, 1, {11}, {3}, {2}, {1}, {1}, {0}},
    {"2-D groups 2, dilation, strides", 2, 2, 8, 4, 2, {9, 7}, {3, 2}, {2, 1}, {2, 1}, {1, 0},
     {2, 1}},
    {"3-D strides, dilation, pads", 3, 1, 3, 2, 1, {5, 4, 6}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2},
     {0, 1, 1}, {1, 0, 0}},
    {"depthwise 16 channels", 2, 2, 16, 16, 16, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

static const int kinds[3] = {TFC_K_CONV, TFC_K_CONV_BP_INPUT, TFC_K_CONV_BP_FILTER};
static const char *const kind_names[3] = {"conv", "conv_backprop_input", "conv_backprop_filter"};

/* One task's arguments and buffers: x, w, y shapes placed as the kind takes them. */
struct task {
    struct tfc_kargs *a;
    struct tfc_kerr err;
    struct starpu_vector_interface iface[3];
    void *bufs[3];
    void *data[3];
    int64_t numel[3];
};

static void shape_of(const struct conv_case *q, const struct tfc_conv_geom *g, int which,
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

/* The task of kind (0 conv, 1 input gradient, 2 filter gradient) with random inputs and a
 * garbage output; dtype a tfc_dtype. */
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
    shape_of(q, NULL, 0, &sh[0]), shape_of(q, NULL, 1, &sh[1]);
    struct tfc_conv_geom g;
    char msg[200];
    CU_ASSERT_FATAL(!tfc_conv_geom_make(sh[0].dims, sh[0].rank, sh[1].dims, sh[1].rank,
                                        a->attrs, &g, msg, sizeof msg));
    shape_of(q, &g, 2, &sh[2]);
    static const int order[3][3] = {{0, 1, 2}, {2, 1, 0}, {0, 2, 1}}; /* in0, in1, out */
    size_t es = dtype == TFC_FLOAT32 ? 4 : 8;
    for (int i = 0; i < 3; i++) {
        a->d[i] = sh[order[kind][i]];
        a->d[i].dtype = dtype, a->d[i].buf = i;
        t->numel[i] = a->d[i].numel;
        t->data[i] = malloc((size_t)t->numel[i] * es);
        for (int64_t j = 0; j < t->numel[i]; j++) {
            double v = i == 2 ? 7.0 : (double)rand() / RAND_MAX * 4 - 2;
            if (dtype == TFC_FLOAT32) ((float *)t->data[i])[j] = (float)v;
            else ((double *)t->data[i])[j] = v;
        }
        t->iface[i] = (struct starpu_vector_interface){.id = STARPU_VECTOR_INTERFACE_ID,
                                                       .ptr = (uintptr_t)t->data[i],
                                                       .nx = (uint32_t)t->numel[i],
                                                       .elemsize = (uint32_t)es};
        t->bufs[i] = &t->iface[i];
    }
}

/* A copy of t's inputs with a fresh garbage output. */
static void task_clone(struct task *c, const struct task *t)
{
    *c = *t;
    size_t sz = sizeof *t->a + 3 * sizeof(struct tfc_kdesc);
    c->a = malloc(sz);
    memcpy(c->a, t->a, sz);
    c->a->err = &c->err;
    memset(&c->err, 0, sizeof c->err);
    for (int i = 0; i < 3; i++) {
        size_t bytes = (size_t)t->numel[i] * t->iface[i].elemsize;
        c->data[i] = malloc(bytes);
        memcpy(c->data[i], t->data[i], bytes);
        c->iface[i].ptr = (uintptr_t)c->data[i];
        c->bufs[i] = &c->iface[i];
    }
}

static void task_free(struct task *t)
{
    for (int i = 0; i < 3; i++) free(t->data[i]);
    free(t->a);
}

/* The im2col kernel through the codelet, as a StarPU worker would call it. */
static void run_codelet(struct task *t, const char *backend)
{
    setenv("TFC_CONV_BACKEND", backend, 1);
    tfc_cl_conv.cpu_funcs[0](t->bufs, t->a);
    unsetenv("TFC_CONV_BACKEND");
}

/* max |a - b| over max |b| (b the im2col result). */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double diff = 0, big = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        big = fmax(big, fabs((double)b[i]));
    }
    return diff / big;
}

static void test_against_im2col(void)
{
    srand(5);
    for (int ci = 0; ci < NCASES; ci++)
        for (int k = 0; k < 3; k++) {
            struct task t, ref, again;
            task_make(&t, &cases[ci], k, TFC_FLOAT32);
            task_clone(&ref, &t);
            task_clone(&again, &t);
            run_codelet(&ref, "im2col");
            enum tfc_conv_dnnl_result r = tfc_conv_dnnl_cpu(t.bufs, t.a);
#ifdef TFC_HAVE_DNNL
            enum tfc_conv_dnnl_result r2 = tfc_conv_dnnl_cpu(again.bufs, again.a);
            double d = rel_diff(t.data[2], ref.data[2], t.numel[2]);
            int same = !memcmp(t.data[2], again.data[2], (size_t)t.numel[2] * sizeof(float));
            if (r != TFC_CONV_DNNL_RAN || r2 != TFC_CONV_DNNL_RAN || t.err.set || d > 1e-5 ||
                !same)
                fprintf(stderr, "%s, %s: result %d/%d, error '%s', max diff %.3g of the "
                        "largest, second call %s\n", cases[ci].name, kind_names[k], (int)r,
                        (int)r2, t.err.msg, d, same ? "the same" : "differs");
            CU_ASSERT(r == TFC_CONV_DNNL_RAN && r2 == TFC_CONV_DNNL_RAN);
            CU_ASSERT(!t.err.set && !ref.err.set);
            CU_ASSERT(d <= 1e-5);
            CU_ASSERT(same);
#else
            CU_ASSERT(r == TFC_CONV_DNNL_ABSENT);
#endif
            task_free(&t), task_free(&ref), task_free(&again);
        }
}

static void test_float64_declined(void)
{
    struct task t;
    task_make(&t, &cases[3], 0, TFC_FLOAT64);
    enum tfc_conv_dnnl_result r = tfc_conv_dnnl_cpu(t.bufs, t.a);
#ifdef TFC_HAVE_DNNL
    CU_ASSERT(r == TFC_CONV_DNNL_DECLINED);
#else
    CU_ASSERT(r == TFC_CONV_DNNL_ABSENT);
#endif
    CU_ASSERT(((double *)t.data[2])[0] == 7.0); /* untouched: im2col's to write */
    task_free(&t);
}

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* oneDNN runs on the calling worker alone: Debian's build would otherwise start an OpenMP team
 * of one thread per core at its first parallel loop and keep it. The calling thread's own
 * OpenMP setting is left as it was. */
static void test_no_thread_of_its_own(void)
{
    int before = thread_count();
#ifdef TFC_HAVE_DNNL
    omp_set_num_threads(3);
#endif
    struct task t;
    task_make(&t, &cases[0], 0, TFC_FLOAT32);
    t.a->d[0].dims[0] = t.a->d[2].dims[0] = 1; /* the first image only: a new primitive */
    t.a->d[0].numel /= 2, t.a->d[2].numel /= 2;
    for (int i = 0; i < 3; i++) tfc_conv_dnnl_cpu(t.bufs, t.a);
    int after = thread_count();
    if (after != before) fprintf(stderr, "threads: %d before oneDNN ran, %d after\n", before, after);
    CU_ASSERT(before > 0 && after == before);
#ifdef TFC_HAVE_DNNL
    CU_ASSERT(omp_get_max_threads() == 3);
#endif
    task_free(&t);
}

static void expect_task_error(const char *backend, const char *phrase)
{
    struct task t;
    task_make(&t, &cases[2], 0, TFC_FLOAT32);
    run_codelet(&t, backend);
    if (!t.err.set || !strstr(t.err.msg, phrase))
        fprintf(stderr, "TFC_CONV_BACKEND=%s: error '%s', expected '%s'\n", backend,
                t.err.set ? t.err.msg : "(none)", phrase);
    CU_ASSERT(t.err.set && strstr(t.err.msg, phrase));
    task_free(&t);
}

static void test_backend_variable(void)
{
    expect_task_error("cudnn", "TFC_CONV_BACKEND must be one of auto|dnnl|im2col|winograd, not 'cudnn'");
    expect_task_error("", "TFC_CONV_BACKEND must be one of");
#ifndef TFC_HAVE_DNNL
    expect_task_error("dnnl", "built without oneDNN");
#endif
    const char *good[] = {"auto", "dnnl", "im2col"};
    for (int i = 0; i < 3; i++) {
#ifndef TFC_HAVE_DNNL
        if (i == 1) continue;
#endif
        struct task t;
        task_make(&t, &cases[2], 2, TFC_FLOAT32);
        run_codelet(&t, good[i]);
        CU_ASSERT(!t.err.set && ((float *)t.data[2])[0] != 7.0f);
        task_free(&t);
    }
}

/* A task on every CPU worker of a started StarPU: each worker builds its own oneDNN state, on
 * its own thread alone (no OpenMP team beside StarPU's workers), and all of it is gone once
 * StarPU stops. */
static void test_worker_state_released(void)
{
    int before = tfc_conv_dnnl_live_threads();
    tfc_ctx *ctx;
    CU_ASSERT_FATAL(tfc_ctx_create(&ctx) == TFC_OK);
    int threads_before = thread_count();
    struct task t;
    task_make(&t, &cases[0], 1, TFC_FLOAT32);
    starpu_data_handle_t h[3];
    for (int i = 0; i < 3; i++)
        starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)t.data[i],
                                    (uint32_t)t.numel[i], sizeof(float));
    int ncpu = 0;
    for (unsigned w = 0; w < starpu_worker_get_count(); w++) {
        if (starpu_worker_get_type((int)w) != STARPU_CPU_WORKER) continue;
        ncpu++;
        size_t sz = sizeof *t.a + 3 * sizeof(struct tfc_kdesc);
        struct tfc_kargs *a = malloc(sz); /* StarPU frees it with the task (STARPU_CL_ARGS) */
        memcpy(a, t.a, sz);
        CU_ASSERT(starpu_task_insert(&tfc_cl_conv, STARPU_R, h[0], STARPU_R, h[1], STARPU_W,
                                     h[2], STARPU_CL_ARGS, a, sz, STARPU_EXECUTE_ON_WORKER,
                                     (int)w, 0) == 0);
    }
    starpu_task_wait_for_all();
    for (int i = 0; i < 3; i++) starpu_data_unregister(h[i]);
    int during = tfc_conv_dnnl_live_threads(), threads_during = thread_count();
    if (threads_during != threads_before)
        fprintf(stderr, "threads: %d with StarPU started, %d after the convolutions\n",
                threads_before, threads_during);
    CU_ASSERT(threads_during == threads_before);
    tfc_ctx_destroy(ctx);
    int after = tfc_conv_dnnl_live_threads();
#ifdef TFC_HAVE_DNNL
    if (during != before + ncpu || after != before)
        fprintf(stderr, "threads with oneDNN state: %d before StarPU, %d with %d CPU workers, "
                "%d after it stopped\n", before, during, ncpu, after);
    CU_ASSERT(ncpu > 0 && during == before + ncpu && after == before);
#else
    CU_ASSERT(during == 0 && after == 0);
#endif
    CU_ASSERT(!t.err.set);
    task_free(&t);
}

int main(void)
{
    unsetenv("TFC_CONV_BACKEND");
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("oneDNN convolutions", NULL, NULL);
    /* the thread count first: nothing of oneDNN's has run yet */
    if (!s || !CU_add_test(s, "no thread of its own", test_no_thread_of_its_own) ||
        !CU_add_test(s, "same as im2col", test_against_im2col) ||
        !CU_add_test(s, "float64 declined", test_float64_declined) ||
        !CU_add_test(s, "TFC_CONV_BACKEND", test_backend_variable) ||
        !CU_add_test(s, "worker state released", test_worker_state_released))
        return 1;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
