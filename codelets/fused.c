/* fused.c: the CPU kernel of fused element-wise steps (codelets/fused.h) and their codelet.
 * The op list runs block by block over the output (BLOCK elements at a time): inputs are
 * loaded (or, when contiguous, read in place), each op writes a block-sized register on the
 * stack, and registers that are outputs are written straight into the output buffers, so
 * intermediates never go through memory. The formulas are ew_math.h's, as elementwise.c's. */
#include <string.h>
#include "kernel.h"
#include "fused.h"
#include "opencl_common.h"
#include "../src/tfc.h"

#define BLOCK 512

/* ---- one op over a block: a loop per kind and float type, from ew_math.h's tables ------ */

#define UNARY_LOOP(K, name, SFX)                                                                \
    case TFC_K_##K:                                                                            \
        for (i = 0; i < m; i++) o[i] = tfc_ew_##name##_##SFX(x[i], p0, p1);                    \
        break;
#define BINARY_LOOP(K, name, SFX)                                                               \
    case TFC_K_##K:                                                                            \
        for (i = 0; i < m; i++) o[i] = tfc_ew_##name##_##SFX(x[i], y[i]);                      \
        break;
#define UNARY_F32(K, name) UNARY_LOOP(K, name, f32)
#define UNARY_F64(K, name) UNARY_LOOP(K, name, f64)
#define BINARY_F32(K, name) BINARY_LOOP(K, name, f32)
#define BINARY_F64(K, name) BINARY_LOOP(K, name, f64)

static inline __attribute__((always_inline)) void
apply_f32_n(const struct tfc_fused_op *op, float *restrict o, const float *x, const float *y, int m)
{
    float p0 = (float)op->p0, p1 = (float)op->p1;
    int i;
    switch (op->kind) {
    TFC_EW_UNARY_ANY(UNARY_F32) TFC_EW_UNARY_FLOAT(UNARY_F32) TFC_EW_BINARY(BINARY_F32)
    }
}

static inline __attribute__((always_inline)) void
apply_f64_n(const struct tfc_fused_op *op, double *restrict o, const double *x, const double *y,
            int m)
{
    double p0 = op->p0, p1 = op->p1;
    int i;
    switch (op->kind) {
    TFC_EW_UNARY_ANY(UNARY_F64) TFC_EW_UNARY_FLOAT(UNARY_F64) TFC_EW_BINARY(BINARY_F64)
    }
}

/* A whole block runs with its length known at compile time, so that -O2 (whose cost model
 * vectorizes only loops needing no scalar remainder) vectorizes the op loops. */
static void apply_f32(const struct tfc_fused_op *op, float *restrict o, const float *x,
                      const float *y, int m)
{
    if (m == BLOCK)
        apply_f32_n(op, o, x, y, BLOCK);
    else
        apply_f32_n(op, o, x, y, m);
}

static void apply_f64(const struct tfc_fused_op *op, double *restrict o, const double *x,
                      const double *y, int m)
{
    if (m == BLOCK)
        apply_f64_n(op, o, x, y, BLOCK);
    else
        apply_f64_n(op, o, x, y, m);
}

/* ---- loading a broadcast input ------------------------------------------------------- */

enum { IN_FULL, IN_SCALAR, IN_RUNS, IN_GENERAL };

/* Gathers elements i0..i0+m of the output index space from input x (element strides st over
 * the output dims), row run by row run. */
static void load_general(size_t es, const char *x, int rank, const int64_t *dims,
                         const int64_t *st, int64_t i0, int m, char *dst)
{
    int64_t idx[TFC_K_MAX_RANK], off = 0, rem = i0;
    for (int d = rank - 1; d >= 0; d--) {
        idx[d] = rem % dims[d];
        rem /= dims[d];
        off += idx[d] * st[d];
    }
    int64_t inner = dims[rank - 1], s = st[rank - 1];
    int j = 0;
    while (j < m) {
        int64_t run = inner - idx[rank - 1];
        if (run > m - j) run = m - j;
        if (s == 1) {
            memcpy(dst + (size_t)j * es, x + (size_t)off * es, (size_t)run * es);
        } else if (es == 4) {
            float *o = (float *)(void *)dst + j;
            const float *p = (const float *)(const void *)x + off;
            for (int64_t t = 0; t < run; t++) o[t] = p[t * s];
        } else {
            double *o = (double *)(void *)dst + j;
            const double *p = (const double *)(const void *)x + off;
            for (int64_t t = 0; t < run; t++) o[t] = p[t * s];
        }
        j += (int)run;
        off += run * s;
        idx[rank - 1] += run;
        if (idx[rank - 1] < inner) break; /* the block ended inside the row */
        off -= inner * s;
        idx[rank - 1] = 0;
        for (int d = rank - 2; d >= 0; d--) {
            idx[d]++;
            off += st[d];
            if (idx[d] < dims[d]) break;
            off -= st[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/* An input constant along the output's trailing axes where its strides are 0 (a per-channel
 * bias [C,1,1] over [N,C,H,W]: runs of H*W) is loaded run by run, each a fill the compiler
 * vectorizes, instead of gathered row by row. Returns the run length; *outer_rank gets the
 * number of leading axes that index the runs. */
static int64_t const_run_len(int rank, const int64_t *dims, const int64_t *st, int *outer_rank)
{
    int64_t len = 1;
    int d = rank - 1;
    for (; d >= 0 && st[d] == 0; d--) len *= dims[d];
    *outer_rank = d + 1;
    return len;
}

/* Runs shorter than this are left to load_general (a fill per short run gains nothing). */
#define MIN_RUN 16

/* Elements i0..i0+m of the output index space from an input constant along runs of len. */
static void load_runs(size_t es, const char *x, int outer_rank, const int64_t *dims,
                      const int64_t *st, int64_t len, int64_t i0, int m, char *dst)
{
    int64_t q = i0 / len, pos = i0 % len;
    for (int j = 0; j < m; q++, pos = 0) {
        int64_t off = 0, rem = q;
        for (int d = outer_rank - 1; d >= 0; d--) {
            off += rem % dims[d] * st[d];
            rem /= dims[d];
        }
        int run = len - pos < m - j ? (int)(len - pos) : m - j, t = 0;
        /* fills in groups of 8, which -O2 turns into vector stores, then the rest */
        if (es == 4) {
            float v = ((const float *)(const void *)x)[off], *o = (float *)(void *)dst + j;
            for (; t + 8 <= run; t += 8)
                for (int u = 0; u < 8; u++) o[t + u] = v;
            for (; t < run; t++) o[t] = v;
        } else {
            double v = ((const double *)(const void *)x)[off], *o = (double *)(void *)dst + j;
            for (; t + 8 <= run; t += 8)
                for (int u = 0; u < 8; u++) o[t + u] = v;
            for (; t < run; t++) o[t] = v;
        }
        j += run;
    }
}

static void fused_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    int n_in = a->n_in, n_out = a->n_out, n_regs = n_in + pg->n_ops;
    int f32 = od->dtype == TFC_FLOAT32;
    size_t es = f32 ? sizeof(float) : sizeof(double);
    int64_t n = od->numel, dims[TFC_K_MAX_RANK], st[TFC_FUSED_MAX_IN][TFC_K_MAX_RANK];
    int rank = tfc_fused_strides(a, dims, st);
    const char *in[TFC_FUSED_MAX_IN];
    char *out[TFC_FUSED_MAX_OUT];
    int mode[TFC_FUSED_MAX_IN], direct[TFC_FUSED_MAX_REGS];
    /* row strides: a tile of a larger tensor (sched/tiling.c) has rows ld elements apart;
     * when every operand read or written in place is contiguous, the output is one run */
    int64_t cols = dims[rank - 1], ld_in[TFC_FUSED_MAX_IN], ld_out[TFC_FUSED_MAX_OUT];
    int contig = 1;
    for (int j = 0; j < n_out; j++) {
        if (!(out[j] = tfc_kout(buffers, a, j))) return;
        ld_out[j] = tfc_kdesc_ld(buffers, tfc_kout_desc(a, j));
        contig &= ld_out[j] == cols;
    }
    for (int k = 0; k < n_in; k++) {
        in[k] = tfc_kin(buffers, a, k);
        mode[k] = a->d[k].numel == n ? IN_FULL : a->d[k].numel == 1 ? IN_SCALAR : IN_GENERAL;
        ld_in[k] = tfc_kdesc_ld(buffers, &a->d[k]);
        if (mode[k] == IN_FULL) contig &= ld_in[k] == cols;
    }
    tfc_fused_apply_ld(a, rank, ld_in, st);
    int64_t run_len[TFC_FUSED_MAX_IN];
    int run_outer[TFC_FUSED_MAX_IN];
    for (int k = 0; k < n_in; k++) {
        run_len[k] = const_run_len(rank, dims, st[k], &run_outer[k]);
        if (mode[k] == IN_GENERAL && run_len[k] >= MIN_RUN) mode[k] = IN_RUNS;
    }
    int64_t rowlen = contig ? n : cols, nrows = contig ? 1 : n / cols;
    /* an op whose register is an output writes into the output buffer directly */
    for (int r = 0; r < n_regs; r++) direct[r] = -1;
    for (int j = 0; j < n_out; j++)
        if (pg->out_reg[j] >= n_in && direct[pg->out_reg[j]] < 0) direct[pg->out_reg[j]] = j;
    /* register storage: 8-byte aligned, BLOCK elements of the widest type (at most 128 KiB) */
    double store[n_regs][BLOCK];
    for (int64_t i0 = 0, row = 0, c0 = 0; row < nrows; i0 += BLOCK, c0 += BLOCK) {
        if (c0 >= rowlen) { /* the next row (tiles only) */
            row++, c0 = 0, i0 = row * rowlen;
            if (row == nrows) break;
        }
        int m = rowlen - c0 < BLOCK ? (int)(rowlen - c0) : BLOCK;
        char *reg[TFC_FUSED_MAX_REGS];
        for (int k = 0; k < n_in; k++) {
            reg[k] = (char *)store[k];
            if (mode[k] == IN_FULL) {
                reg[k] = (char *)in[k] + (size_t)(row * ld_in[k] + c0) * es; /* in place */
            } else if (mode[k] == IN_SCALAR) {
                if (f32) {
                    float v = *(const float *)(const void *)in[k], *o = (float *)store[k];
                    for (int i = 0; i < m; i++) o[i] = v;
                } else {
                    double v = *(const double *)(const void *)in[k];
                    for (int i = 0; i < m; i++) store[k][i] = v;
                }
            } else if (mode[k] == IN_RUNS) {
                load_runs(es, in[k], run_outer[k], dims, st[k], run_len[k], i0, m, reg[k]);
            } else {
                load_general(es, in[k], rank, dims, st[k], i0, m, reg[k]);
            }
        }
        for (int k = 0; k < pg->n_ops; k++) {
            const struct tfc_fused_op *op = &pg->ops[k];
            int r = n_in + k;
            reg[r] = direct[r] >= 0 ? out[direct[r]] + (size_t)(row * ld_out[direct[r]] + c0) * es
                                    : (char *)store[r];
            const char *x = reg[op->a], *y = op->b >= 0 ? reg[op->b] : NULL;
            if (f32)
                apply_f32(op, (float *)(void *)reg[r], (const float *)(const void *)x,
                          (const float *)(const void *)y, m);
            else
                apply_f64(op, (double *)(void *)reg[r], (const double *)(const void *)x,
                          (const double *)(const void *)y, m);
        }
        for (int j = 0; j < n_out; j++) { /* outputs not written in place (shared registers) */
            int r = pg->out_reg[j];
            if (direct[r] != j)
                memcpy(out[j] + (size_t)(row * ld_out[j] + c0) * es, reg[r], (size_t)m * es);
        }
    }
}

static struct starpu_perfmodel fused_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_fused",
};

struct starpu_codelet tfc_cl_fused = {
    .cpu_funcs = {fused_cpu},
    .cpu_funcs_name = {"fused_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_fused_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_fused_opencl}, /* synchronous */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &fused_model,
    .name = "fused",
};
