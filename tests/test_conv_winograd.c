/* test_conv_winograd.c: the Winograd convolution kernels (codelets/conv_winograd.c) in their
 * three directions against a float64 direct convolution, called as StarPU calls the conv
 * codelet (TFC_CONV_BACKEND=winograd) and directly: batches 1, 3 and 17 (a partial vector of
 * 16 images), 1, 3 and 32 channels, extents that are not multiples of the tile, asymmetric pads
 * 0..2, 3x3 and 5x5 kernels; every output starts as garbage. Also: the transforms for each
 * F(m, r) the tile allows, the exact adjoints (<dy, conv(x)> = <conv^T(dy), x> and
 * <dy, conv(x, w)> = <dw(x, dy), w>), the transforms of every instruction set the CPU runs
 * (AVX-512, AVX2, plain) with one and several tile positions a block, what
 * TFC_CONV_BACKEND=auto picks, the perfmodel footprint telling Winograd's tasks apart, a bad
 * value failing the task, and the per-thread scratch freed when its thread ends. */
#include "config.h"
#include <math.h>
#include <pthread.h>
#include <starpu.h>
#include "testutil.h"
#include "../codelets/conv_geom.h"
#include "../codelets/conv_winograd.h"
#include "../codelets/kernel.h"
#include "../codelets/thread_scratch.h"

extern struct starpu_codelet tfc_cl_conv;

/* 2-D, stride 1, dilation 1 */
struct wcase {
    int64_t n, c, k, h, w, r, pt, pl, pb, pr; /* pads: top, left, bottom, right */
};

static const struct wcase cases[] = {
    {1, 1, 1, 7, 9, 3, 0, 0, 0, 0},   {3, 3, 5, 13, 11, 5, 2, 1, 0, 2},
    {1, 32, 8, 10, 9, 5, 2, 2, 2, 2}, {3, 3, 32, 9, 14, 3, 1, 0, 2, 1},
    {17, 4, 3, 6, 5, 5, 1, 2, 2, 0},  {2, 32, 64, 14, 14, 5, 2, 2, 2, 2},
    {3, 1, 4, 5, 5, 5, 0, 0, 0, 0},   {1, 3, 2, 8, 6, 3, 2, 2, 2, 2},
};
#define NCASES (int)(sizeof cases / sizeof *cases)
static const int kinds[3] = {TFC_K_CONV, TFC_K_CONV_BP_INPUT, TFC_K_CONV_BP_FILTER};

struct task {
    struct tfc_kargs *a;
    struct tfc_kerr err;
    struct tfc_conv_geom g;
    struct starpu_vector_interface iface[3];
    void *bufs[3];
    float *data[3];
    float *x, *w, *y; /* by role */
    int64_t numel[3], len[3]; /* by position; by role */
};

/* A task of kinds[dir] (float32 unless dtype says) on case q, inputs random, output garbage. */
static void task_make(struct task *t, const struct wcase *q, int dir, int dtype)
{
    memset(t, 0, sizeof *t);
    t->a = calloc(1, sizeof *t->a + 3 * sizeof(struct tfc_kdesc));
    struct tfc_kargs *a = t->a;
    a->kind = kinds[dir], a->n_in = 2, a->n_out = 1, a->err = &t->err;
    a->attrs[CONV_GROUPS].i = 1, a->attrs[CONV_PADS].n = 4;
    int64_t pads[4] = {q->pt, q->pl, q->pb, q->pr};
    for (int i = 0; i < 4; i++) a->attrs[CONV_PADS].v[i] = pads[i];
    int64_t oh = q->h + q->pt + q->pb - q->r + 1, ow = q->w + q->pl + q->pr - q->r + 1;
    int64_t shapes[3][4] = {{q->n, q->c, q->h, q->w}, {q->k, q->c, q->r, q->r},
                            {q->n, q->k, oh, ow}};
    static const int order[3][3] = {{0, 1, 2}, {2, 1, 0}, {0, 2, 1}};
    float *role[3];
    for (int i = 0; i < 3; i++) {
        struct tfc_kdesc *d = &a->d[i];
        const int64_t *s = shapes[order[dir][i]];
        d->dtype = dtype, d->rank = 4, d->buf = i, d->numel = 1;
        for (int j = 0; j < 4; j++) d->dims[j] = s[j], d->numel *= s[j];
        t->numel[i] = t->len[order[dir][i]] = d->numel;
        t->data[i] = malloc((size_t)d->numel * sizeof(double));
        for (int64_t j = 0; j < d->numel; j++)
            t->data[i][j] = i == 2 ? 7.0f : (float)rand() / RAND_MAX * 4 - 2;
        role[order[dir][i]] = t->data[i];
        t->iface[i] = (struct starpu_vector_interface){.id = STARPU_VECTOR_INTERFACE_ID,
                                                       .ptr = (uintptr_t)t->data[i],
                                                       .nx = (uint32_t)d->numel,
                                                       .elemsize = 4};
        t->bufs[i] = &t->iface[i];
    }
    t->x = role[0], t->w = role[1], t->y = role[2];
    char msg[200];
    CU_ASSERT_FATAL(!tfc_conv_geom_of(a, &t->g, msg, sizeof msg));
}

static void task_free(struct task *t)
{
    for (int i = 0; i < 3; i++) free(t->data[i]);
    free(t->a);
}

/* The direction's output in float64 from the definition. */
static double *reference(const struct task *t)
{
    const struct tfc_conv_geom *g = &t->g;
    int64_t C = g->in_ch, K = g->out_ch, H = g->in[0], W = g->in[1], R = g->kern[0];
    int64_t OH = g->out[0], OW = g->out[1];
    int kind = t->a->kind;
    int64_t len = t->len[kind == TFC_K_CONV ? 2 : kind == TFC_K_CONV_BP_INPUT ? 0 : 1];
    double *o = calloc((size_t)len, sizeof *o);
    for (int64_t n = 0; n < g->batch; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t r = 0; r < R; r++)
                    for (int64_t s = 0; s < R; s++)
                        for (int64_t oy = 0; oy < OH; oy++)
                            for (int64_t ox = 0; ox < OW; ox++) {
                                int64_t iy = oy + r - g->pad_lo[0], ix = ox + s - g->pad_lo[1];
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                int64_t xi = ((n * C + c) * H + iy) * W + ix;
                                int64_t wi = ((k * C + c) * R + r) * R + s;
                                int64_t yi = ((n * K + k) * OH + oy) * OW + ox;
                                if (kind == TFC_K_CONV) o[yi] += (double)t->x[xi] * t->w[wi];
                                else if (kind == TFC_K_CONV_BP_INPUT)
                                    o[xi] += (double)t->y[yi] * t->w[wi];
                                else o[wi] += (double)t->y[yi] * t->x[xi];
                            }
    return o;
}

/* max |o - r| / max |r| of the task's output */
static double rel_error(const struct task *t, const double *ref)
{
    double diff = 0, big = 1e-30;
    for (int64_t i = 0; i < t->numel[2]; i++) {
        diff = fmax(diff, fabs((double)t->data[2][i] - ref[i]));
        big = fmax(big, fabs(ref[i]));
    }
    return diff / big;
}

static void run_codelet(struct task *t, const char *backend)
{
    setenv("TFC_CONV_BACKEND", backend, 1);
    tfc_cl_conv.cpu_funcs[0](t->bufs, t->a);
    unsetenv("TFC_CONV_BACKEND");
}

/* Winograd's float error grows with the tile (F(4x4, 5x5): about 1e-5 of the largest output
 * here); training tolerates far more; 1e-4 still catches any wrong coefficient or index. */
#define TOL 1e-4

/* Every case and direction, through the kernel and through the codelet; `set` names the
 * kernel set in messages. */
static void against_float64(const char *set)
{
    for (int ci = 0; ci < NCASES; ci++)
        for (int dir = 0; dir < 3; dir++)
            for (int via = 0; via < 2; via++) {
                struct task t;
                task_make(&t, &cases[ci], dir, TFC_FLOAT32);
                CU_ASSERT_FATAL(tfc_conv_winograd_fits(t.a, &t.g));
                if (via) run_codelet(&t, "winograd");
                else CU_ASSERT(tfc_conv_winograd_cpu(t.bufs, t.a) == 0);
                CU_ASSERT(!t.err.set);
                double *ref = reference(&t);
                double e = rel_error(&t, ref);
                if (!(e < TOL))
                    fprintf(stderr, "%s: case %d direction %d (%s): error %.3g\n", set, ci, dir,
                            via ? "codelet" : "direct", e);
                CU_ASSERT(e < TOL);
                free(ref);
                task_free(&t);
            }
}

static void test_against_float64(void)
{
    against_float64(tfc_conv_winograd_isa());
}

/* The same with the transforms of every instruction set this CPU runs (the default takes the
 * widest, so the others run only here), with 1 and 3 tile positions per block (3: blocks of
 * several 16-lane vectors, the last one partial). "avx2" also runs the file's own per-point
 * GEMMs (forward and input gradient): the channel counts here (1 to 64) give full 6-row
 * blocks and remainders of 1 to 5 rows (5: the forward GEMM of the 3 -> 5 channel case). */
static void test_every_kernel_set(void)
{
    static const char *const sets[] = {"avx512", "avx2", "plain"};
    int ran = 0;
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        if (tfc_conv_winograd_set_isa(sets[i])) {
            fprintf(stderr, "kernel set %s: not on this CPU, skipped\n", sets[i]);
            continue;
        }
        CU_ASSERT(strcmp(tfc_conv_winograd_isa(), sets[i]) == 0);
        for (int bp = 1; bp <= 3; bp += 2) {
            char label[64];
            snprintf(label, sizeof label, "%s, %d positions a block", sets[i], bp);
            tfc_conv_winograd_set_block(bp);
            against_float64(label);
        }
        ran++;
    }
    tfc_conv_winograd_set_block(1);
    CU_ASSERT(ran >= 1); /* plain runs everywhere */
    CU_ASSERT(tfc_conv_winograd_set_isa("avx1024") == -1);
    CU_ASSERT(tfc_conv_winograd_set_isa(NULL) == 0);
}

static void test_transforms(void)
{
    static const int good[][2] = {{1, 3}, {2, 3}, {4, 3}, {6, 3}, {2, 5}, {3, 5}, {4, 5},
                                  {2, 7}, {8, 1}};
    struct tfc_wino t;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        CU_ASSERT(tfc_wino_make(&t, good[i][0], good[i][1]) == 0);
        CU_ASSERT(t.n == good[i][0] + good[i][1] - 1);
    }
    CU_ASSERT(tfc_wino_make(&t, 5, 5) == -1); /* n = 9: more points than there are */
    CU_ASSERT(tfc_wino_make(&t, 0, 3) == -1);
    CU_ASSERT(tfc_wino_make(&t, 3, 0) == -1);
}

static double dot(const float *a, const float *b, int64_t n, double *mag)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i], *mag += fabs((double)a[i] * b[i]);
    return s;
}

/* <dy, conv(x, w)> = <conv_backprop_input(dy, w), x> = <conv_backprop_filter(x, dy), w>,
 * each side computed by the Winograd kernels in float32 on the same x, w, dy. */
static void test_adjoints(void)
{
    for (int ci = 0; ci < NCASES; ci++) {
        struct task f, bi, bf;
        task_make(&f, &cases[ci], 0, TFC_FLOAT32);
        task_make(&bi, &cases[ci], 1, TFC_FLOAT32);
        task_make(&bf, &cases[ci], 2, TFC_FLOAT32);
        memcpy(bi.w, f.w, (size_t)f.len[1] * 4), memcpy(bf.x, f.x, (size_t)f.len[0] * 4);
        memcpy(bf.y, bi.y, (size_t)f.len[2] * 4);
        CU_ASSERT(tfc_conv_winograd_cpu(f.bufs, f.a) == 0);
        CU_ASSERT(tfc_conv_winograd_cpu(bi.bufs, bi.a) == 0);
        CU_ASSERT(tfc_conv_winograd_cpu(bf.bufs, bf.a) == 0);
        double m0 = 0, m1 = 0, m2 = 0;
        double s0 = dot(bi.y, f.y, f.len[2], &m0), s1 = dot(bi.x, f.x, f.len[0], &m1);
        double s2 = dot(bf.w, f.w, f.len[1], &m2);
        double scale = fmax(m0, fmax(m1, m2)) + 1e-30;
        if (!(fabs(s0 - s1) < 1e-5 * scale && fabs(s0 - s2) < 1e-5 * scale))
            fprintf(stderr, "case %d: <dy, y> %.9g, <dx, x> %.9g, <dw, w> %.9g (scale %.3g)\n",
                    ci, s0, s1, s2, scale);
        CU_ASSERT(fabs(s0 - s1) < 1e-5 * scale);
        CU_ASSERT(fabs(s0 - s2) < 1e-5 * scale);
        task_free(&f), task_free(&bi), task_free(&bf);
    }
}

/* The task's perfmodel footprint under TFC_CONV_BACKEND=backend (tfc_kargs_finish). */
static uint32_t footprint(const struct wcase *q, int dir, const char *backend)
{
    struct task t;
    task_make(&t, q, dir, TFC_FLOAT32);
    setenv("TFC_CONV_BACKEND", backend, 1);
    tfc_kargs_finish(t.a);
    unsetenv("TFC_CONV_BACKEND");
    uint32_t f = t.a->footprint;
    task_free(&t);
    return f;
}

/* Winograd's task times get a history of their own under dmda: a task Winograd runs (auto on
 * conv2, winograd on any fitting task) has another footprint than the same task under oneDNN
 * or im2col, and auto's footprint is oneDNN's where auto leaves the task to oneDNN (conv1). */
static void test_footprint_per_kernels(void)
{
    static const struct wcase conv2 = {16, 32, 64, 14, 14, 5, 2, 2, 2, 2};
    static const struct wcase conv1 = {16, 1, 32, 28, 28, 5, 2, 2, 2, 2};
    for (int dir = 0; dir < 3; dir++) {
        uint32_t a2 = footprint(&conv2, dir, "auto"), a1 = footprint(&conv1, dir, "auto");
        CU_ASSERT_EQUAL(a2, footprint(&conv2, dir, "winograd"));
        CU_ASSERT_NOT_EQUAL(a2, footprint(&conv2, dir, "dnnl"));
        CU_ASSERT_NOT_EQUAL(a2, footprint(&conv2, dir, "im2col"));
        CU_ASSERT_NOT_EQUAL(a1, footprint(&conv1, dir, "winograd"));
#ifdef TFC_HAVE_DNNL
        CU_ASSERT_EQUAL(a1, footprint(&conv1, dir, "dnnl"));
#else
        CU_ASSERT_EQUAL(a1, footprint(&conv1, dir, "im2col"));
#endif
    }
}

/* 1 when the codelet under `backend` wrote the same bits as the Winograd kernel itself. */
static int codelet_ran_winograd(const struct wcase *q, int dir, const char *backend)
{
    struct task t;
    task_make(&t, q, dir, TFC_FLOAT32);
    CU_ASSERT(tfc_conv_winograd_cpu(t.bufs, t.a) == 0);
    float *wino = malloc((size_t)t.numel[2] * 4);
    memcpy(wino, t.data[2], (size_t)t.numel[2] * 4);
    for (int64_t i = 0; i < t.numel[2]; i++) t.data[2][i] = 7.0f;
    run_codelet(&t, backend);
    CU_ASSERT(!t.err.set);
    int same = !memcmp(wino, t.data[2], (size_t)t.numel[2] * 4);
    free(wino);
    task_free(&t);
    return same;
}

static void test_auto_rule(void)
{
    static const struct wcase conv2 = {16, 32, 64, 14, 14, 5, 2, 2, 2, 2};
    static const struct wcase conv1 = {16, 1, 32, 28, 28, 5, 2, 2, 2, 2};
    static const struct wcase conv2_b3 = {3, 32, 64, 14, 14, 5, 2, 2, 2, 2};
    static const struct wcase conv2_b13 = {13, 32, 64, 14, 14, 5, 2, 2, 2, 2};
    static const struct wcase k3 = {16, 32, 64, 14, 14, 3, 1, 1, 1, 1};
    struct task t;
    task_make(&t, &conv2, 0, TFC_FLOAT32);
    CU_ASSERT(tfc_conv_winograd_fits(t.a, &t.g) && tfc_conv_winograd_auto(&t.g));
    task_free(&t);
    task_make(&t, &conv1, 0, TFC_FLOAT32); /* one input channel: oneDNN */
    CU_ASSERT(tfc_conv_winograd_fits(t.a, &t.g) && !tfc_conv_winograd_auto(&t.g));
    task_free(&t);
    task_make(&t, &conv2_b3, 0, TFC_FLOAT32); /* 3 of 16 lanes */
    CU_ASSERT(!tfc_conv_winograd_auto(&t.g));
    task_free(&t);
    task_make(&t, &conv2_b13, 0, TFC_FLOAT32); /* 13 of 16 lanes */
    CU_ASSERT(tfc_conv_winograd_auto(&t.g));
    task_free(&t);
    task_make(&t, &k3, 0, TFC_FLOAT32); /* 3x3: fits, not picked (not measured to win) */
    CU_ASSERT(tfc_conv_winograd_fits(t.a, &t.g) && !tfc_conv_winograd_auto(&t.g));
    task_free(&t);
    task_make(&t, &conv2, 0, TFC_FLOAT64);
    CU_ASSERT(!tfc_conv_winograd_fits(t.a, &t.g));
    task_free(&t);
    task_make(&t, &conv2, 0, TFC_FLOAT32); /* stride 2, groups 2, a 4x5 kernel: no */
    t.g.stride[1] = 2;
    CU_ASSERT(!tfc_conv_winograd_fits(t.a, &t.g));
    t.g.stride[1] = 1, t.g.groups = 2;
    CU_ASSERT(!tfc_conv_winograd_fits(t.a, &t.g));
    t.g.groups = 1, t.g.kern[0] = 4;
    CU_ASSERT(!tfc_conv_winograd_fits(t.a, &t.g));
    task_free(&t);
    /* what the codelet runs: Winograd's bits under auto for conv2, not for conv1 */
    for (int dir = 0; dir < 3; dir++) {
        CU_ASSERT(codelet_ran_winograd(&conv2, dir, "auto"));
        CU_ASSERT(codelet_ran_winograd(&conv2, dir, "winograd"));
        CU_ASSERT(!codelet_ran_winograd(&conv2, dir, "im2col"));
        CU_ASSERT(!codelet_ran_winograd(&conv1, dir, "auto"));
        CU_ASSERT(codelet_ran_winograd(&conv1, dir, "winograd"));
    }
}

static void test_bad_backend(void)
{
    struct task t;
    task_make(&t, &cases[1], 0, TFC_FLOAT32);
    run_codelet(&t, "winogard");
    CU_ASSERT(t.err.set);
    CU_ASSERT(strstr(t.err.msg, "TFC_CONV_BACKEND must be one of auto|dnnl|im2col|winograd, "
                                "not 'winogard'") != NULL);
    if (!t.err.set) fprintf(stderr, "no error for TFC_CONV_BACKEND=winogard\n");
    task_free(&t);
}

static int live_in_thread; /* threads with scratch, seen from the thread before it ends */

static void *thread_conv(void *arg)
{
    struct task *t = arg;
    CU_ASSERT(tfc_conv_winograd_cpu(t->bufs, t->a) == 0);
    live_in_thread = tfc_thread_scratch_live();
    return NULL;
}

static void test_scratch_released(void)
{
    int before = tfc_thread_scratch_live();
    struct task t;
    task_make(&t, &cases[5], 0, TFC_FLOAT32);
    pthread_t th;
    CU_ASSERT_FATAL(pthread_create(&th, NULL, thread_conv, &t) == 0);
    pthread_join(th, NULL);
    CU_ASSERT(live_in_thread == before + 1);
    CU_ASSERT(tfc_thread_scratch_live() == before);
    task_free(&t);
}

int main(void)
{
    unsetenv("TFC_CONV_BACKEND");
    srand(5);
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("Winograd convolutions", NULL, NULL);
    if (!s || !CU_add_test(s, "transforms", test_transforms) ||
        !CU_add_test(s, "against float64", test_against_float64) ||
        !CU_add_test(s, "every kernel set", test_every_kernel_set) ||
        !CU_add_test(s, "exact adjoints", test_adjoints) ||
        !CU_add_test(s, "auto rule", test_auto_rule) ||
        !CU_add_test(s, "footprint per kernels", test_footprint_per_kernels) ||
        !CU_add_test(s, "bad TFC_CONV_BACKEND", test_bad_backend) ||
        !CU_add_test(s, "scratch released", test_scratch_released))
        return 1;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
