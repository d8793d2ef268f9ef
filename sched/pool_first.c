/* pool_first.c: a max pool that reads a fused element-wise step non-decreasing in one operand
 * runs first (a plan pass after fusion). The maximum over a window of f(x, b) is f(max of x, b)
 * when f is non-decreasing in x and b is the same across the window (a bias per channel), and
 * IEEE rounding is monotone, so the pooled values are the same bit for bit (except where a
 * window holds a NaN: the pool, not f, then meets it). The element-wise step then reads and
 * writes the pooled tensor: conv -> bias + ReLU -> 2x2 pool becomes conv -> pool -> bias + ReLU,
 * a quarter of the bytes through the element-wise kernel and no pass over the convolution's
 * output in between. TensorFlow's arithmetic optimizer swaps a max pool with a monotone unary
 * function likewise (OptimizeMaxOrMinOfMonotonicStage). */
#include "passes.h"
#include "../codelets/fused.h"
#include "../codelets/kinds.h"

extern struct starpu_codelet tfc_cl_pool;

/* Whether fused op o is non-decreasing in each operand that depends on the pooled input (da,
 * db) and exact per element (no approximated function: max of f(x) must be f(max of x)). */
static int monotone_op(const struct tfc_fused_op *o, int da, int db)
{
    switch (o->kind) {
    case TFC_K_RELU:
    case TFC_K_CLIP:
    case TFC_K_ADD:
    case TFC_K_MAXIMUM:
    case TFC_K_MINIMUM: return 1;
    case TFC_K_LEAKY_RELU: return o->p0 >= 0;
    case TFC_K_SUB: return da && !db;
    default: return 0;
    }
}

/* Whether the fused program's single output is non-decreasing in input m. */
static int monotone_in(const struct tfc_kargs *a, int m)
{
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    char dep[TFC_FUSED_MAX_REGS] = {0};
    dep[m] = 1;
    for (int k = 0; k < pg->n_ops; k++) {
        const struct tfc_fused_op *o = &pg->ops[k];
        int da = dep[o->a], db = o->b >= 0 && dep[o->b];
        if ((da || db) && !monotone_op(o, da, db)) return 0;
        dep[a->n_in + k] = (char)(da || db);
    }
    return dep[pg->out_reg[0]];
}

/* The input of fused step arguments a that the pool may go before: the one input with the
 * output's shape, every other one the same across the last nsp (pooled) dims. -1 when none. */
static int pooled_input(const struct tfc_kargs *a, int nsp)
{
    const struct tfc_kdesc *o = &a->d[a->n_in];
    int m = -1;
    for (int k = 0; k < a->n_in; k++) {
        const struct tfc_kdesc *d = &a->d[k];
        int full = d->rank == o->rank, flat = 1;
        for (int i = 0; i < o->rank; i++) full &= d->dims[i] == o->dims[i];
        for (int i = 1; i <= nsp && i <= d->rank; i++) flat &= d->dims[d->rank - i] == 1;
        if (full && !flat && m < 0) m = k;
        else if (!flat) return -1;
    }
    return m;
}

/* Whether slot s is written by step f, read by step q, and touched by no other step nor
 * fetched. */
static int only_between(const struct plan *p, int s, int f, int q)
{
    if (p->slots[s].kind != SLOT_TEMP) return 0;
    for (int j = 0; j < p->n_fetches; j++)
        if (p->fetch_slot[j] == s) return 0;
    for (int i = 0; i < p->n_steps; i++)
        for (int b = 0; b < p->steps[i].n_buf; b++)
            if (p->steps[i].buf_slot[b] == s && i != f && i != q) return 0;
    return 1;
}

/* d (an operand of the element-wise step) takes the pool output's shape. */
static void pooled_shape(struct tfc_kdesc *d, const struct tfc_kdesc *pout)
{
    d->rank = pout->rank;
    d->numel = pout->numel;
    for (int r = 0; r < pout->rank; r++) d->dims[r] = pout->dims[r];
}

/* Steps i (fused) and i + 1 (a max pool of its output): swapped when they qualify. */
static int try_swap(struct plan *p, int i)
{
    struct step *f = &p->steps[i], *q = &p->steps[i + 1];
    if (f->cl != &tfc_cl_fused || q->cl != &tfc_cl_pool || !q->args ||
        q->args->kind != TFC_K_MAX_POOL || q->args->n_in != 1 || q->args->n_out != 1 ||
        f->args->n_out != 1)
        return 0;
    struct tfc_kargs *fa = f->args;
    const struct tfc_kdesc *pin = &q->args->d[0], *pout = &q->args->d[1];
    int y = f->buf_slot[fa->d[fa->n_in].buf]; /* f's output, the pool's input */
    if (q->buf_slot[pin->buf] != y || !only_between(p, y, i, i + 1)) return 0;
    int m = pooled_input(fa, pin->rank - 2);
    if (m < 0 || !monotone_in(fa, m)) return 0;
    int c = f->buf_slot[fa->d[m].buf], z = q->buf_slot[pout->buf];
    /* the pool reads c into y (now of the pooled shape); f reads y and writes z */
    p->slots[y].desc = p->slots[z].desc;
    p->slots[y].numel = p->slots[z].numel;
    q->buf_slot[pin->buf] = c;
    q->buf_slot[pout->buf] = y;
    f->buf_slot[fa->d[m].buf] = y;
    f->buf_slot[fa->d[fa->n_in].buf] = z;
    pooled_shape(&fa->d[m], pout);
    pooled_shape(&fa->d[fa->n_in], pout);
    tfc_fused_finish(fa);
    struct step t = *f;
    *f = *q;
    *q = t;
    return 1;
}

int tfc_pool_first(struct plan *p, const struct plan_options *opt)
{
    int n = 0;
    if (!opt || !opt->fusion) return 0; /* (no fused steps without it) */
    for (int i = 0; i + 1 < p->n_steps; i++) n += try_swap(p, i);
    return n;
}
