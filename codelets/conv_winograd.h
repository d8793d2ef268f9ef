/* conv_winograd.h: Winograd convolutions F(m x m, r x r) on the CPU for float32 2-D
 * convolutions with stride 1, dilation 1 and one group (codelets/conv_winograd.c), in the
 * three directions of a training step; the conv codelet (codelets/conv.c) calls them under
 * TFC_CONV_BACKEND=winograd, and under auto where tfc_conv_winograd_auto says they win. */
#ifndef TFC_CONV_WINOGRAD_H
#define TFC_CONV_WINOGRAD_H

#include <stdint.h>
#include "kargs.h"
#include "conv_geom.h"

#define TFC_WINO_MAX_N 8 /* the largest tile n = m + r - 1 */

/* A small float matrix as the list of its nonzeros per row. */
struct tfc_wino_sparse {
    int rows, cols;
    int nnz[TFC_WINO_MAX_N];
    int idx[TFC_WINO_MAX_N][TFC_WINO_MAX_N];
    float val[TFC_WINO_MAX_N][TFC_WINO_MAX_N];
};

/* The transforms of F(m, r) on tiles of n = m + r - 1, generated in double from the
 * interpolation points 0, 1, -1, 2, -2, 1/2, -1/2 (the first n - 1) and infinity, rounded to
 * float: Y = AT [(G g GT) . (BT d B)] A, and the transposes the adjoints use. */
struct tfc_wino {
    int m, r, n;
    struct tfc_wino_sparse sAT, sA, sBT, sB, sG, sGT;
};

/* Fills t for F(m, r), m >= 1, r >= 1, m + r - 1 <= TFC_WINO_MAX_N; -1 when out of range or
 * when the generated transforms fail their check of the 1-D identity in double. */
int tfc_wino_make(struct tfc_wino *t, int m, int r);

/* 1 when the task's geometry is one these kernels run: float32, 2-D, stride 1, dilation 1,
 * one group, a square kernel of 2 to 7 taps, nothing empty. */
int tfc_conv_winograd_fits(const struct tfc_kargs *a, const struct tfc_conv_geom *g);
/* 1 when TFC_CONV_BACKEND=auto should run this fitting task with Winograd: what measured
 * faster than oneDNN's direct kernels here (bench/RESULTS.md, "Winograd measured"). */
int tfc_conv_winograd_auto(const struct tfc_conv_geom *g);
/* The tile size m the kernels use for kernel size r. */
int tfc_conv_winograd_tile(int r);

/* Runs a fitting conv, conv_backprop_input or conv_backprop_filter task (a->kind) on the
 * calling thread with the same contract as the im2col kernel (outputs overwritten; the filter
 * gradient summed over the task's images). Scratch is per thread, kept between tasks and freed
 * when the thread ends. 0, or -1 with the failure recorded on the run (no memory). */
int tfc_conv_winograd_cpu(void *buffers[], const struct tfc_kargs *a);

/* The same on plain NCHW / KCRS float arrays for one geometry g (as tfc_conv_geom_of fills
 * it) with transforms t (benchmarks and tests pick m): kind TFC_K_CONV reads x, w and writes
 * y; TFC_K_CONV_BP_INPUT reads dy (as y), w and writes dx (as x); TFC_K_CONV_BP_FILTER reads
 * x, dy (as y) and writes dw (as w). 0, or -1 when scratch memory cannot be had. */
int tfc_conv_winograd_run(int kind, const struct tfc_wino *t, const struct tfc_conv_geom *g,
                          float *x, float *w, float *y);
/* Tile positions (of 16 images) per block from now on (benchmarks; default 1, the filter
 * gradient twice that). */
void tfc_conv_winograd_set_block(int positions);
/* Forces the transforms of one instruction set from now on: "avx512", "avx2" or "plain"
 * (generic x86-64); NULL: the widest the CPU runs (the default). -1 for another name or one
 * this CPU lacks (tests and benchmarks). */
int tfc_conv_winograd_set_isa(const char *name);
/* The name of the instruction set the next call runs. */
const char *tfc_conv_winograd_isa(void);

#endif
