/* conv_winograd.c: the Winograd kernels (codelets/conv_winograd.c) for the CNN's conv layers
 * (conv2: 5x5 SAME, 32 -> 64 channels on 14x14; conv1: 1 -> 32 on 28x28) in the three
 * directions against the library's CPU conv codelet as a StarPU worker runs it (oneDNN when
 * built with it, TFC_CONV_BACKEND=dnnl; else im2col), one thread, for each tile size m of
 * F(m x m, 5 x 5). Each variant is first checked against a float64 direct convolution (max
 * |o - r| / max |r| printed). Rounds interleave the variants in a rotated order; a sample is
 * the mean of back-to-back calls lasting --block-ms; figures are medians over rounds of the
 * thread's CPU time (the machine is shared) and of wall-clock. Usage: conv_winograd
 * [--batches 16,32,128] [--rounds 7] [--block-ms 20] [--tiles 2,3,4] [--layers conv2]
 * [--block-pos 1] (tile positions of 16 images per block) [--isas auto] (the transforms'
 * instruction sets: auto, avx512, avx2 or plain, each tile size with each) */
#include "config.h"
#include <cblas.h>
#include <math.h>
#include <starpu.h>
#include "conv_task.h"
#include "../codelets/conv_geom.h"
#include "../codelets/conv_winograd.h"
#include "../src/tfc.h"

struct layer {
    const char *name;
    int64_t c, k, hw;
};
static const struct layer layers[] = {{"conv1", 1, 32, 28}, {"conv2", 32, 64, 14}};
static const char *const dir_names[3] = {"forward", "input gradient", "filter gradient"};
#define MAX_VARIANTS 8

/* One direction's task and its geometry. */
struct problem {
    struct bench_conv_task t;
    struct tfc_conv_geom g;
};

static void problem_make(struct problem *p, const struct layer *l, int64_t batch, int dir)
{
    bench_conv_task_make(&p->t, l->c, l->k, l->hw, batch, dir);
    char msg[200];
    if (tfc_conv_geom_of(p->t.a, &p->g, msg, sizeof msg)) {
        fprintf(stderr, "conv_winograd: %s\n", msg);
        exit(1);
    }
}

static void problem_free(struct problem *p) { bench_conv_task_free(&p->t); }

/* variant 0: the codelet; v >= 1: Winograd with transforms wino[v] */
static struct tfc_wino wino[MAX_VARIANTS];
static const char *wino_isa[MAX_VARIANTS]; /* NULL: the default */

static void run_once(void *arg, int v)
{
    struct problem *p = arg;
    if (v == 0) {
        tfc_cl_conv.cpu_funcs[0](p->t.bufs, p->t.a);
    } else if (tfc_conv_winograd_set_isa(wino_isa[v]) ||
               tfc_conv_winograd_run(p->t.a->kind, &wino[v], &p->g, p->t.x, p->t.w, p->t.y)) {
        fprintf(stderr, "conv_winograd: no memory for the scratch\n");
        exit(1);
    }
    if (p->t.err.set) {
        fprintf(stderr, "conv_winograd: codelet: %s\n", p->t.err.msg);
        exit(1);
    }
}

/* The direction's output in float64 from the definition (stride 1, dilation 1). */
static double *reference(const struct problem *p)
{
    const struct tfc_conv_geom *g = &p->g;
    int64_t N = g->batch, C = g->in_ch, K = g->out_ch, H = g->in[0], W = g->in[1];
    int64_t R = g->kern[0], S = g->kern[1], OH = g->out[0], OW = g->out[1];
    int kind = p->t.a->kind;
    int64_t len = kind == TFC_K_CONV ? N * K * OH * OW
                  : kind == TFC_K_CONV_BP_INPUT ? N * C * H * W : K * C * R * S;
    double *o = calloc((size_t)len, sizeof *o);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t r = 0; r < R; r++)
                    for (int64_t s = 0; s < S; s++)
                        for (int64_t oy = 0; oy < OH; oy++) {
                            int64_t iy = oy + r - g->pad_lo[0];
                            if (iy < 0 || iy >= H) continue;
                            for (int64_t ox = 0; ox < OW; ox++) {
                                int64_t ix = ox + s - g->pad_lo[1];
                                if (ix < 0 || ix >= W) continue;
                                int64_t xi = ((n * C + c) * H + iy) * W + ix;
                                int64_t wi = ((k * C + c) * R + r) * S + s;
                                int64_t yi = ((n * K + k) * OH + oy) * OW + ox;
                                if (kind == TFC_K_CONV) o[yi] += (double)p->t.x[xi] * p->t.w[wi];
                                else if (kind == TFC_K_CONV_BP_INPUT)
                                    o[xi] += (double)p->t.y[yi] * p->t.w[wi];
                                else o[wi] += (double)p->t.y[yi] * p->t.x[xi];
                            }
                        }
    return o;
}

static double check(struct problem *p, int v, const double *ref)
{
    run_once(p, v);
    int64_t n = p->t.a->d[2].numel;
    const float *out = p->t.data[2];
    double diff = 0, big = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)out[i] - ref[i]));
        big = fmax(big, fabs(ref[i]));
    }
    return diff / big;
}

static void bench_one(const struct layer *l, int64_t batch, int dir, int nv, const int *tiles,
                      int rounds, double block_s, int verify)
{
    struct problem p;
    problem_make(&p, l, batch, dir);
    double err[MAX_VARIANTS] = {0};
    if (verify) {
        double *ref = reference(&p);
        for (int v = 0; v < nv; v++) err[v] = check(&p, v, ref);
        free(ref);
    }
    double t[MAX_VARIANTS][64], c[MAX_VARIANTS][64], med[MAX_VARIANTS], cpu[MAX_VARIANTS];
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < nv; j++) {
            int v = (j + r) % nv;
            bench_sample(run_once, &p, v, block_s, &t[v][r], &c[v][r]);
        }
    for (int v = 0; v < nv; v++) med[v] = bench_median(t[v], rounds), cpu[v] = bench_median(c[v], rounds);
    for (int v = 0; v < nv; v++) {
        char name[64];
        if (v) {
            tfc_conv_winograd_set_isa(wino_isa[v]);
            snprintf(name, sizeof name, "winograd F(%dx%d,5x5) %s", tiles[v], tiles[v],
                     tfc_conv_winograd_isa());
        }
        else snprintf(name, sizeof name, "codelet (%s)", getenv("TFC_CONV_BACKEND"));
        char e[32] = "-";
        if (verify) snprintf(e, sizeof e, "%.1e", err[v]);
        printf("| %s | %lld | %s | %s | %.3f | %.3f | %.0f | %.2f | %.2f | %s |\n", l->name,
               (long long)batch, dir_names[dir], name, med[v] * 1e3, cpu[v] * 1e3,
               p.t.flops / cpu[v] * 1e-9, cpu[0] / cpu[v], med[0] / med[v], e);
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
    char batches[128] = "16,32,128", tile_list[64] = "2,3,4", layer_list[64] = "conv2",
         isa_list[64] = "auto";
    int rounds = 7, verify_max = 32;
    double block_ms = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batches")) snprintf(batches, sizeof batches, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--tiles")) snprintf(tile_list, sizeof tile_list, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--layers")) snprintf(layer_list, sizeof layer_list, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--block-ms")) block_ms = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--block-pos")) tfc_conv_winograd_set_block(atoi(argv[i + 1]));
        else if (!strcmp(argv[i], "--verify-max")) verify_max = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isas"))
            snprintf(isa_list, sizeof isa_list, "%s", argv[i + 1]);
        else {
            fprintf(stderr, "usage: %s [--batches 16,32,128] [--tiles 2,3,4] [--layers conv2] "
                    "[--rounds 7] [--block-ms 20] [--verify-max 32] [--block-pos 1] "
                    "[--isas auto,avx512,avx2,plain]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64) rounds = 7;
    int tiles[MAX_VARIANTS], nv = 1;
    static char isa_names[MAX_VARIANTS][16];
    for (char *s1 = NULL, *tok = strtok_r(tile_list, ",", &s1); tok;
         tok = strtok_r(NULL, ",", &s1))
        for (char *i = isa_list, *e; *i && nv < MAX_VARIANTS; i = *e ? e + 1 : e) {
            e = i + strcspn(i, ",");
            snprintf(isa_names[nv], sizeof isa_names[nv], "%.*s", (int)(e - i), i);
            wino_isa[nv] = strcmp(isa_names[nv], "auto") ? isa_names[nv] : NULL;
            tiles[nv] = atoi(tok);
            if (tfc_conv_winograd_set_isa(wino_isa[nv])) {
                fprintf(stderr, "conv_winograd: no kernels \"%s\" on this CPU\n", isa_names[nv]);
                return 2;
            }
            if (tfc_wino_make(&wino[nv], tiles[nv], 5)) {
                fprintf(stderr, "conv_winograd: no transforms for F(%s, 5)\n", tok);
                return 2;
            }
            nv++;
        }
#ifdef TFC_HAVE_DNNL
    setenv("TFC_CONV_BACKEND", "dnnl", 1);
#else
    setenv("TFC_CONV_BACKEND", "im2col", 1);
#endif
    openblas_set_num_threads(1);
    srand(3);
    printf("one thread; load average %.1f at the start; error: max |o - r| / max |r| against "
           "float64 (checked at batches <= %d)\n\n", load_average(), verify_max);
    printf("| layer | batch | direction | variant | ms wall | ms CPU | GFLOP/s (CPU, direct "
           "flops) | speed-up (CPU) | speed-up (wall) | error |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n");
    for (char *save = NULL, *tok = strtok_r(batches, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save))
        for (int li = 0; li < 2; li++) {
            if (!strstr(layer_list, layers[li].name)) continue;
            for (int dir = 0; dir < 3; dir++)
                bench_one(&layers[li], atoll(tok), dir, nv, tiles, rounds, block_ms * 1e-3,
                          atoll(tok) <= verify_max);
        }
    printf("\nload average %.1f at the end\n", load_average());
    return 0;
}
