/* tiling_rows.c: which plans split over their batch rows into one independent chain per CPU
 * worker (sched/tiling.c does the split). An inference plan whose every step computes each row
 * of its outputs from the same row of its batch inputs (a matmul by a constant or a variable,
 * element-wise ops with row-vector or scalar operands, softmax over a later axis, a reshape
 * keeping the rows) gives the same values on any block of rows as on the whole batch (the
 * same bits where the GEMM's kernels do not depend on the row count; OpenBLAS's and oneDNN's
 * AVX2 kernels sum 64 rows in another order than 128 on a Zen 3: within rounding). So each
 * block of rows can run through the whole network with no join between layers: a block of
 * one step's output is the next step's input block, and each block's steps run as one chain
 * task (chain_blocks.c: the intermediates in the worker's scratch). The chains are not pinned:
 * an idle worker takes a block whose worker the OS has taken away before it started. Beside
 * two busy processes a split run still waits for both workers (the imported MLP's medians:
 * pinned 8-9.5 ms, unpinned about 4, one unsplit chain 1.0-1.4; bench/RESULTS.md); quiet,
 * the split is the faster plan. The imported MLP
 * at batch 128 ran as one chain on one worker (its time one core's sgemm time) while
 * onnxruntime split each GEMM over both cores (bench/RESULTS.md, ONNX runs 3 and 4). */
#include <starpu.h>
#include "plan.h"
#include "../codelets/fused.h"
#include "../codelets/op_attrs.h"

/* How operand d of a position-wise step relates to its output o over the rows: of o's shape
 * (split with it), constant over the rows (a lower rank, or a first dim of 1: read whole, the
 * kernel broadcasts it over the block as over the batch), or neither. */
enum { ROWS_NONE, ROWS_SPLIT, ROWS_WHOLE };

static int row_kind(const struct tfc_kdesc *d, const struct tfc_kdesc *o)
{
    if (d->buf < 0 || d->numel > UINT32_MAX) return ROWS_NONE;
    if (d->rank < o->rank || (d->rank == o->rank && d->dims[0] == 1)) return ROWS_WHOLE;
    if (d->rank != o->rank) return ROWS_NONE;
    for (int r = 0; r < d->rank; r++)
        if (d->dims[r] != o->dims[r]) return ROWS_NONE;
    return ROWS_SPLIT;
}

/* Position-wise element-wise kinds (unary, binary, comparisons, casts, select, add_n,
 * broadcast): each output element from the inputs' elements at its position. */
static int positionwise(const struct step *st)
{
    int k = st->args->kind;
    if (st->cl == &tfc_cl_fused) return k == TFC_K_FUSED;
    return st->cl == &tfc_cl_elementwise && k > TFC_K_NONE && k < TFC_K_FILL;
}

/* A matmul C [m, n] = A [m, k] op(B), B a variable or a constant: A and C by rows. */
static unsigned matmul_rows(const struct plan *p, const struct step *st, int64_t m)
{
    const struct tfc_kargs *a = st->args;
    if (a->kind != TFC_K_MATMUL || a->attrs[MATMUL_TRANSPOSE_A].i) return 0;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = &a->d[2];
    if (da->rank != 2 || dc->rank != 2 || da->dims[0] != m || dc->dims[0] != m || db->buf < 0)
        return 0;
    enum slot_kind bk = p->slots[st->buf_slot[db->buf]].kind;
    return bk == SLOT_PERSIST || bk == SLOT_CONST ? 1u << 0 | 1u << 2 : 0;
}

/* The descriptors of step st that split over m batch rows (bit i: descriptor i), or 0 when
 * st is not row-wise over them: every output split, at least one input split. */
unsigned tfc_rows_operands(const struct plan *p, const struct step *st, int64_t m)
{
    const struct tfc_kargs *a = st->args;
    int nd = a->n_in + a->n_out;
    if (a->n_out < 1 || nd > 31) return 0;
    unsigned split = 0;
    if (st->cl == &tfc_cl_matmul) {
        split = matmul_rows(p, st, m);
    } else if (st->cl == &tfc_cl_softmax) {
        const struct tfc_kdesc *d = &a->d[0];
        int axis = (int)a->attrs[SOFTMAX_AXIS].i;
        if (axis < 0) axis += d->rank;
        if ((a->kind == TFC_K_SOFTMAX || a->kind == TFC_K_LOG_SOFTMAX) && a->n_in == 1 &&
            d->rank >= 2 && axis > 0 && d->dims[0] == m && row_kind(&a->d[1], d) == ROWS_SPLIT)
            split = 1u << 0 | 1u << 1;
    } else if (st->cl == &tfc_cl_layout) {
        const struct tfc_kdesc *d = &a->d[0], *o = &a->d[1];
        if (a->kind == TFC_K_RESHAPE && a->n_in == 1 && d->rank >= 1 && o->rank >= 1 &&
            d->dims[0] == m && o->dims[0] == m && d->numel == o->numel && d->buf >= 0)
            split = 1u << 0 | 1u << 1;
    } else if (positionwise(st)) {
        const struct tfc_kdesc *o = &a->d[a->n_in];
        if (o->rank < 1 || o->dims[0] != m) return 0;
        for (int i = 0; i < nd; i++) {
            int k = row_kind(&a->d[i], o);
            if (k == ROWS_NONE || (i >= a->n_in && k != ROWS_SPLIT)) return 0;
            if (k == ROWS_SPLIT) split |= 1u << i;
        }
    }
    if (!(split & ((1u << a->n_in) - 1))) return 0;
    uint64_t split_bufs = 0, whole_bufs = 0; /* no buffer read both by rows and whole */
    for (int i = 0; i < nd; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        if (d->buf < 0 || d->buf >= 64 || d->numel > UINT32_MAX) return 0;
        if (split >> i & 1) split_bufs |= 1ull << d->buf;
        else whole_bufs |= 1ull << d->buf;
        if (i >= a->n_in && (!(split >> i & 1) ||
                             p->slots[st->buf_slot[d->buf]].kind != SLOT_TEMP))
            return 0;
    }
    return split_bufs & whole_bufs ? 0 : split;
}

/* A step that may run on any CPU worker: a CPU implementation, no placement. */
static int free_cpu_step(const struct step *st)
{
    const struct starpu_codelet *cl = st->cl;
    return cl && cl->cpu_funcs[0] && (!cl->where || (cl->where & STARPU_CPU)) && !st->where &&
           !st->workerids;
}

int tfc_rows_split_of(const struct plan *p, const struct plan_options *opt, int64_t *rows)
{
    if (!opt || opt->rows_min <= 0 || opt->mp_split || opt->hop || opt->where || p->n_steps < 1 ||
        p->n_parts || !starpu_is_initialized())
        return 0;
    if (starpu_cuda_worker_get_count() || starpu_opencl_worker_get_count()) return 0;
    int n = starpu_worker_get_count_by_type(STARPU_CPU_WORKER);
    if (n < 2 || n != (int)starpu_worker_get_count()) return 0;
    const struct tfc_kdesc *o = &p->steps[0].args->d[p->steps[0].args->n_in]; /* split */
    int64_t m = p->steps[0].args->n_out > 0 && o->rank >= 1 ? o->dims[0] : 0;
    if (m < opt->rows_min || m < n) return 0;
    for (int i = 0; i < p->n_steps; i++)
        if (!free_cpu_step(&p->steps[i]) || !tfc_rows_operands(p, &p->steps[i], m)) return 0;
    *rows = m;
    return n;
}
