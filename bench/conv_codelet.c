/* conv_codelet.c: the CNN's two conv layers (bench/conv_backends' shapes: Fashion-MNIST 28x28x1,
 * conv1 5x5 SAME 1->32, conv2 5x5 SAME 32->64 on 14x14) through the library's CPU codelet, as a
 * StarPU worker runs it, on one thread: oneDNN (codelets/conv_dnnl.c, with its layout rule and
 * with every primitive forced to blocked or to plain layouts) against im2col + OpenBLAS
 * (TFC_CONV_BACKEND=im2col), and the yardstick: one cblas_sgemm of the direction's whole-batch
 * im2col shape. Rounds interleave the variants in a rotated order; each sample is the mean of
 * enough back-to-back calls to last --block-ms; figures are medians over rounds of wall-clock
 * and of the thread's CPU time (the machine is shared: CPU time leaves out the time others had
 * the core); the rates and ratios come from CPU time, the last column from wall-clock. Usage: conv_codelet [--batches 128,32,16] [--rounds 7] [--block-ms 20] */
#include "config.h"
#include <cblas.h>
#include <math.h>
#include <starpu.h>
#include "benchutil.h"
#include "../codelets/conv_dnnl.h"
#include "../codelets/conv_geom.h"
#include "../codelets/kinds.h"
#include "../codelets/op_attrs.h"
#include "../src/tfc.h"

extern struct starpu_codelet tfc_cl_conv;

struct layer {
    const char *name;
    int64_t c, k, hw;
};
static const struct layer layers[] = {{"conv1", 1, 32, 28}, {"conv2", 32, 64, 14}};
static const int kinds[3] = {TFC_K_CONV, TFC_K_CONV_BP_INPUT, TFC_K_CONV_BP_FILTER};
static const char *const dir_names[3] = {"forward", "backward-data", "backward-filter"};

enum { V_SGEMM, V_IM2COL, V_DNNL, V_DNNL_BLOCKED, V_DNNL_PLAIN, N_VARIANTS };
static const char *const variant_names[N_VARIANTS] = {
    "sgemm same shape", "im2col codelet", "dnnl codelet", "dnnl all blocked", "dnnl all plain"};

/* One direction's task (x, w, y placed as the kind takes them) and the sgemm of its shape. */
struct problem {
    struct tfc_kargs *a;
    struct tfc_kerr err;
    struct starpu_vector_interface iface[3];
    void *bufs[3];
    float *data[3];
    int m, n, k;       /* the sgemm: C[m,n] = A[m,k] B[k,n] */
    float *A, *B, *C;
    double flops;
};

static float *rand_floats(int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX * 2 - 1;
    return p;
}

static void problem_make(struct problem *p, const struct layer *l, int64_t batch, int dir)
{
    memset(p, 0, sizeof *p);
    p->a = calloc(1, sizeof *p->a + 3 * sizeof(struct tfc_kdesc));
    struct tfc_kargs *a = p->a;
    a->kind = kinds[dir], a->n_in = 2, a->n_out = 1, a->err = &p->err;
    a->attrs[CONV_GROUPS].i = 1, a->attrs[CONV_PADS].n = 4;
    for (int i = 0; i < 4; i++) a->attrs[CONV_PADS].v[i] = 2;
    int64_t shapes[3][4] = {{batch, l->c, l->hw, l->hw}, {l->k, l->c, 5, 5},
                            {batch, l->k, l->hw, l->hw}}; /* x, w, y */
    static const int order[3][3] = {{0, 1, 2}, {2, 1, 0}, {0, 2, 1}};
    for (int i = 0; i < 3; i++) {
        struct tfc_kdesc *d = &a->d[i];
        const int64_t *s = shapes[order[dir][i]];
        d->dtype = TFC_FLOAT32, d->rank = 4, d->buf = i, d->numel = 1;
        for (int j = 0; j < 4; j++) d->dims[j] = s[j], d->numel *= s[j];
        p->data[i] = rand_floats(d->numel);
        p->iface[i] = (struct starpu_vector_interface){.id = STARPU_VECTOR_INTERFACE_ID,
                                                       .ptr = (uintptr_t)p->data[i],
                                                       .nx = (uint32_t)d->numel,
                                                       .elemsize = 4};
        p->bufs[i] = &p->iface[i];
    }
    int crs = (int)(l->c * 25), cols = (int)(batch * l->hw * l->hw), kk = (int)l->k;
    int mnk[3][3] = {{kk, cols, crs}, {crs, cols, kk}, {kk, crs, cols}};
    p->m = mnk[dir][0], p->n = mnk[dir][1], p->k = mnk[dir][2];
    p->A = rand_floats((int64_t)p->m * p->k), p->B = rand_floats((int64_t)p->k * p->n);
    p->C = rand_floats((int64_t)p->m * p->n);
    p->flops = 2.0 * (double)kk * crs * cols;
}

static void problem_free(struct problem *p)
{
    for (int i = 0; i < 3; i++) free(p->data[i]);
    free(p->A), free(p->B), free(p->C), free(p->a);
}

static void run_once(struct problem *p, int v)
{
    if (v == V_SGEMM) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->n, p->k, 1.0f, p->A,
                    p->k, p->B, p->n, 0.0f, p->C, p->n);
        return;
    }
    static const enum tfc_conv_dnnl_layouts lay[N_VARIANTS] = {
        [V_DNNL] = TFC_CONV_DNNL_LAYOUTS_AUTO, [V_DNNL_BLOCKED] = TFC_CONV_DNNL_LAYOUTS_BLOCKED,
        [V_DNNL_PLAIN] = TFC_CONV_DNNL_LAYOUTS_PLAIN};
    setenv("TFC_CONV_BACKEND", v == V_IM2COL ? "im2col" : "dnnl", 1);
    tfc_conv_dnnl_force_layouts(lay[v]);
    tfc_cl_conv.cpu_funcs[0](p->bufs, p->a);
    if (p->err.set) {
        fprintf(stderr, "conv_codelet: %s: %s\n", variant_names[v], p->err.msg);
        exit(1);
    }
}

static double thread_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds per call, wall-clock and this thread's CPU time (which leaves out the time other
 * processes had the core): means over back-to-back calls lasting block_s, after one untimed. */
static void sample(struct problem *p, int v, double block_s, double *wall, double *cpu)
{
    run_once(p, v);
    int calls = 0;
    double t0 = bench_now(), c0 = thread_cpu_now(), t;
    do {
        run_once(p, v);
        calls++;
    } while ((t = bench_now() - t0) < block_s);
    *cpu = (thread_cpu_now() - c0) / calls;
    *wall = t / calls;
}

/* max |o - r| / max |r| of variant v's output against im2col's. */
static double check(struct problem *p, int v)
{
    int64_t n = p->a->d[2].numel;
    float *ref = malloc((size_t)n * sizeof *ref);
    run_once(p, V_IM2COL);
    memcpy(ref, p->data[2], (size_t)n * sizeof *ref);
    run_once(p, v);
    double diff = 0, big = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)p->data[2][i] - ref[i]));
        big = fmax(big, fabs((double)ref[i]));
    }
    free(ref);
    return diff / big;
}

static void bench_one(const struct layer *l, int64_t batch, int dir, int rounds, double block_s)
{
    struct problem p;
    problem_make(&p, l, batch, dir);
    int nv = 0, vs[N_VARIANTS];
    for (int v = 0; v < N_VARIANTS; v++)
#ifndef TFC_HAVE_DNNL
        if (v < V_DNNL)
#endif
            vs[nv++] = v;
    for (int i = 2; i < nv; i++) {
        double d = check(&p, vs[i]);
        if (d > 1e-4) {
            fprintf(stderr, "conv_codelet: %s %s %s differs from im2col by %.3g\n", l->name,
                    dir_names[dir], variant_names[vs[i]], d);
            exit(1);
        }
    }
    double t[N_VARIANTS][64], c[N_VARIANTS][64];
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < nv; j++) {
            int v = vs[(j + r) % nv];
            sample(&p, v, block_s, &t[v][r], &c[v][r]);
        }
    double med[N_VARIANTS], cpu[N_VARIANTS];
    for (int j = 0; j < nv; j++)
        med[vs[j]] = bench_median(t[vs[j]], rounds), cpu[vs[j]] = bench_median(c[vs[j]], rounds);
    for (int j = 0; j < nv; j++) {
        int v = vs[j];
        printf("| %s | %lld | %s | %s | %.3f | %.3f | %.0f | %.2f | %.2f |\n", l->name,
               (long long)batch, dir_names[dir], variant_names[v], med[v] * 1e3, cpu[v] * 1e3,
               p.flops / cpu[v] * 1e-9, cpu[V_SGEMM] / cpu[v], med[V_SGEMM] / med[v]);
    }
    fflush(stdout);
    problem_free(&p);
}

static double load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}

int main(int argc, char **argv)
{
    char batches[128] = "128,32,16";
    int rounds = 7;
    double block_ms = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batches")) snprintf(batches, sizeof batches, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--block-ms")) block_ms = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--batches 128,32,16] [--rounds 7] [--block-ms 20]\n",
                    argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64) rounds = 7;
    openblas_set_num_threads(1);
    srand(3);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("one thread; OPENBLAS_CORETYPE=%s; load average %.1f at the start\n\n",
           ct ? ct : "(unset)", load_average());
    printf("| layer | batch | direction | variant | ms wall | ms CPU | GFLOP/s (CPU) | /sgemm (CPU) "
           "| /sgemm (wall) |\n|---|---|---|---|---|---|---|---|---|\n");
    for (char *save = NULL, *tok = strtok_r(batches, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save))
        for (int li = 0; li < 2; li++)
            for (int dir = 0; dir < 3; dir++)
                bench_one(&layers[li], atoll(tok), dir, rounds, block_ms * 1e-3);
    printf("\nload average %.1f at the end\n", load_average());
    return 0;
}
