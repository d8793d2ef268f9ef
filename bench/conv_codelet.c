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
#include "conv_task.h"
#include "../codelets/conv_dnnl.h"
#include "../codelets/conv_geom.h"
#include "../src/tfc.h"

struct layer {
    const char *name;
    int64_t c, k, hw;
};
static const struct layer layers[] = {{"conv1", 1, 32, 28}, {"conv2", 32, 64, 14}};
static const char *const dir_names[3] = {"forward", "backward-data", "backward-filter"};

enum { V_SGEMM, V_IM2COL, V_DNNL, V_DNNL_BLOCKED, V_DNNL_PLAIN, N_VARIANTS };
static const char *const variant_names[N_VARIANTS] = {
    "sgemm same shape", "im2col codelet", "dnnl codelet", "dnnl all blocked", "dnnl all plain"};

/* One direction's task and the sgemm of its shape. */
struct problem {
    struct bench_conv_task t;
    int m, n, k; /* the sgemm: C[m,n] = A[m,k] B[k,n] */
    float *A, *B, *C;
};

static void problem_make(struct problem *p, const struct layer *l, int64_t batch, int dir)
{
    bench_conv_task_make(&p->t, l->c, l->k, l->hw, batch, dir);
    int crs = (int)(l->c * 25), cols = (int)(batch * l->hw * l->hw), kk = (int)l->k;
    int mnk[3][3] = {{kk, cols, crs}, {crs, cols, kk}, {kk, crs, cols}};
    p->m = mnk[dir][0], p->n = mnk[dir][1], p->k = mnk[dir][2];
    p->A = bench_rand_floats((int64_t)p->m * p->k);
    p->B = bench_rand_floats((int64_t)p->k * p->n);
    p->C = bench_rand_floats((int64_t)p->m * p->n);
}

static void problem_free(struct problem *p)
{
    bench_conv_task_free(&p->t);
    free(p->A), free(p->B), free(p->C);
}

static void run_once(void *arg, int v)
{
    struct problem *p = arg;
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
    tfc_cl_conv.cpu_funcs[0](p->t.bufs, p->t.a);
    if (p->t.err.set) {
        fprintf(stderr, "conv_codelet: %s: %s\n", variant_names[v], p->t.err.msg);
        exit(1);
    }
}

/* max |o - r| / max |r| of variant v's output against im2col's. */
static double check(struct problem *p, int v)
{
    int64_t n = p->t.a->d[2].numel;
    float *ref = malloc((size_t)n * sizeof *ref);
    run_once(p, V_IM2COL);
    memcpy(ref, p->t.data[2], (size_t)n * sizeof *ref);
    run_once(p, v);
    double diff = 0, big = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)p->t.data[2][i] - ref[i]));
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
            bench_sample(run_once, &p, v, block_s, &t[v][r], &c[v][r]);
        }
    double med[N_VARIANTS], cpu[N_VARIANTS];
    for (int j = 0; j < nv; j++)
        med[vs[j]] = bench_median(t[vs[j]], rounds), cpu[vs[j]] = bench_median(c[vs[j]], rounds);
    for (int j = 0; j < nv; j++) {
        int v = vs[j];
        printf("| %s | %lld | %s | %s | %.3f | %.3f | %.0f | %.2f | %.2f |\n", l->name,
               (long long)batch, dir_names[dir], variant_names[v], med[v] * 1e3, cpu[v] * 1e3,
               p.t.flops / cpu[v] * 1e-9, cpu[V_SGEMM] / cpu[v], med[V_SGEMM] / med[v]);
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
