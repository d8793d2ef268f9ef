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
TFC_EW_VECTOR_CLONES
static void apply_f32(const struct tfc_fused_op *op, float *restrict o, const float *x,
                      const float *y, int m)
{
    if (m == BLOCK)
        apply_f32_n(op, o, x, y, BLOCK);
    else
        apply_f32_n(op, o, x, y, m);
}

void tfc_fused_unary_f32(const struct tfc_fused_op *op, float *o, const float *x, int m)
{
    apply_f32(op, o, x, NULL, m);
}

TFC_EW_VECTOR_CLONES
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

/* The inputs of one task as the block loop reads them: where each is, how a block of it is
 * loaded, and its strides in the output's index space. */
struct fused_inputs {
    int n;                                        /* inputs */
    int rank;                                     /* of the output's index space */
    size_t es;                                    /* element size, bytes */
    int64_t dims[TFC_K_MAX_RANK];                 /* the output's dims */
    int64_t st[TFC_FUSED_MAX_IN][TFC_K_MAX_RANK]; /* element strides (0 where it broadcasts) */
    const char *in[TFC_FUSED_MAX_IN];             /* data */
    int mode[TFC_FUSED_MAX_IN];                   /* IN_FULL .. IN_GENERAL */
    int64_t ld[TFC_FUSED_MAX_IN];                 /* row stride, elements */
    int64_t run_len[TFC_FUSED_MAX_IN];            /* elements per constant run (IN_RUNS) */
    int run_outer[TFC_FUSED_MAX_IN];              /* leading axes that index the runs */
};

/* The outputs, and which of them each register writes in place. */
struct fused_outputs {
    int n;
    char *out[TFC_FUSED_MAX_OUT];    /* data */
    int64_t ld[TFC_FUSED_MAX_OUT];   /* row stride, elements */
    int direct[TFC_FUSED_MAX_REGS];  /* the output a register is written into, or -1 */
};

/* Fills fi for the task. Returns 1 when every input read in place (those of the output's size)
 * is contiguous. */
static int inputs_prepare(void *buffers[], const struct tfc_kargs *a, struct fused_inputs *fi)
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    int64_t n = od->numel;
    fi->n = a->n_in;
    fi->es = od->dtype == TFC_FLOAT32 ? sizeof(float) : sizeof(double);
    fi->rank = tfc_fused_strides(a, fi->dims, fi->st);
    int64_t cols = fi->dims[fi->rank - 1];
    int contig = 1;
    for (int k = 0; k < fi->n; k++) {
        fi->in[k] = tfc_kin(buffers, a, k);
        fi->mode[k] = a->d[k].numel == n ? IN_FULL : a->d[k].numel == 1 ? IN_SCALAR : IN_GENERAL;
        fi->ld[k] = tfc_kdesc_ld(buffers, &a->d[k]);
        if (fi->mode[k] == IN_FULL) contig &= fi->ld[k] == cols;
    }
    tfc_fused_apply_ld(a, fi->rank, fi->ld, fi->st);
    for (int k = 0; k < fi->n; k++) {
        fi->run_len[k] = const_run_len(fi->rank, fi->dims, fi->st[k], &fi->run_outer[k]);
        if (fi->mode[k] == IN_GENERAL && fi->run_len[k] >= MIN_RUN) fi->mode[k] = IN_RUNS;
    }
    return contig;
}

/* Fills fo; 0 when an output has no buffer (zero elements: nothing to compute). Returns in
 * *contig whether every output is contiguous (rows of cols elements). */
static int outputs_prepare(void *buffers[], const struct tfc_kargs *a, int64_t cols,
                           struct fused_outputs *fo, int *contig)
{
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    fo->n = a->n_out;
    *contig = 1;
    for (int j = 0; j < fo->n; j++) {
        if (!(fo->out[j] = tfc_kout(buffers, a, j))) return 0;
        fo->ld[j] = tfc_kdesc_ld(buffers, tfc_kout_desc(a, j));
        *contig &= fo->ld[j] == cols;
    }
    /* an op whose register is an output writes into the output buffer directly */
    for (int r = 0; r < a->n_in + pg->n_ops; r++) fo->direct[r] = -1;
    for (int j = 0; j < fo->n; j++)
        if (pg->out_reg[j] >= a->n_in && fo->direct[pg->out_reg[j]] < 0)
            fo->direct[pg->out_reg[j]] = j;
    return 1;
}

/* Input k's register for the block of m elements at column c0 of row `row` (i0 in the output's
 * index space): the input itself when it is read in place, else `store` loaded from it. */
static char *input_block(const struct fused_inputs *fi, int k, int64_t row, int64_t c0,
                         int64_t i0, int m, double *store)
{
    size_t es = fi->es;
    const char *x = fi->in[k];
    switch (fi->mode[k]) {
    case IN_FULL:
        return (char *)x + (size_t)(row * fi->ld[k] + c0) * es; /* in place */
    case IN_SCALAR:
        if (es == sizeof(float)) {
            float v = *(const float *)(const void *)x, *o = (float *)store;
            for (int i = 0; i < m; i++) o[i] = v;
        } else {
            double v = *(const double *)(const void *)x;
            for (int i = 0; i < m; i++) store[i] = v;
        }
        break;
    case IN_RUNS:
        load_runs(es, x, fi->run_outer[k], fi->dims, fi->st[k], fi->run_len[k], i0, m,
                  (char *)store);
        break;
    default:
        load_general(es, x, fi->rank, fi->dims, fi->st[k], i0, m, (char *)store);
    }
    return (char *)store;
}

/* Runs the op list over one block whose input registers reg[0..n_in) are loaded, then copies
 * the outputs not written in place (registers shared by several outputs). */
static void ops_block(const struct tfc_fused_prog *pg, const struct fused_outputs *fo, int n_in,
                      size_t es, char **reg, double (*store)[BLOCK], int64_t row, int64_t c0,
                      int m)
{
    for (int k = 0; k < pg->n_ops; k++) {
        const struct tfc_fused_op *op = &pg->ops[k];
        int r = n_in + k, d = fo->direct[r];
        reg[r] = d >= 0 ? fo->out[d] + (size_t)(row * fo->ld[d] + c0) * es : (char *)store[r];
        const char *x = reg[op->a], *y = op->b >= 0 ? reg[op->b] : NULL;
        if (es == sizeof(float))
            apply_f32(op, (float *)(void *)reg[r], (const float *)(const void *)x,
                      (const float *)(const void *)y, m);
        else
            apply_f64(op, (double *)(void *)reg[r], (const double *)(const void *)x,
                      (const double *)(const void *)y, m);
    }
    for (int j = 0; j < fo->n; j++) {
        int r = pg->out_reg[j];
        if (fo->direct[r] != j)
            memcpy(fo->out[j] + (size_t)(row * fo->ld[j] + c0) * es, reg[r], (size_t)m * es);
    }
}

static void fused_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    int64_t n = tfc_kout_desc(a, 0)->numel;
    struct fused_inputs fi;
    struct fused_outputs fo;
    int contig_in = inputs_prepare(buffers, a, &fi), contig_out;
    /* row strides: a tile of a larger tensor (sched/tiling.c) has rows ld elements apart;
     * when every operand read or written in place is contiguous, the output is one run */
    int64_t cols = fi.dims[fi.rank - 1];
    if (!outputs_prepare(buffers, a, cols, &fo, &contig_out)) return;
    int contig = contig_in && contig_out;
    int64_t rowlen = contig ? n : cols, nrows = contig ? 1 : n / cols;
    /* register storage: 8-byte aligned, BLOCK elements of the widest type (at most 128 KiB) */
    double store[a->n_in + pg->n_ops][BLOCK];
    for (int64_t i0 = 0, row = 0, c0 = 0; row < nrows; i0 += BLOCK, c0 += BLOCK) {
        if (c0 >= rowlen) { /* the next row (tiles only) */
            row++, c0 = 0, i0 = row * rowlen;
            if (row == nrows) break;
        }
        int m = rowlen - c0 < BLOCK ? (int)(rowlen - c0) : BLOCK;
        char *reg[TFC_FUSED_MAX_REGS];
        for (int k = 0; k < fi.n; k++) reg[k] = input_block(&fi, k, row, c0, i0, m, store[k]);
        ops_block(pg, &fo, fi.n, fi.es, reg, store, row, c0, m);
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
