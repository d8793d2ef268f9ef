/* chain_epilogue.c: inside a chain task, a matmul and the step that adds a bias to its product
 * (alone, or fused with one activation after it: a dense layer) run as one kernel
 * (codelets/matmul_epilogue.h). The product goes straight into the add's output, which gets
 * its bias and activation row chunk by row chunk while in cache, instead of going to scratch
 * for the fused kernel's block loop to read back (4.7 us of the imported MLP's 373 us chain at
 * batch 128 for 64 rows of dense1's ReLU, 8 in slow phases). ONNX Runtime (MatMulAddFusion,
 * FusedGemm) and TensorFlow's grappler (_FusedMatMul) fuse the same pattern. Only chain tasks:
 * they run on CPU workers alone, so no device needs the merged kernel. */
#include <string.h>
#include "chain_epilogue.h"
#include "../codelets/fused.h"

/* Buffer j of step a and buffer k of step b are the same (slot, partition and block). */
static int same_buf(const struct step *a, int j, const struct step *b, int k)
{
    int pa = a->buf_part ? a->buf_part[j] : -1, pb = b->buf_part ? b->buf_part[k] : -1;
    return a->buf_slot[j] == b->buf_slot[k] && pa == pb &&
           (pa < 0 || a->buf_child[j] == b->buf_child[k]);
}

static int f32_buffer(const struct tfc_kdesc *d)
{
    return d->dtype == TFC_FLOAT32 && d->buf >= 0;
}

static int same_dims(const struct tfc_kdesc *x, const struct tfc_kdesc *y)
{
    if (x->rank != y->rank) return 0;
    for (int r = 0; r < x->rank; r++)
        if (x->dims[r] != y->dims[r]) return 0;
    return 1;
}

/* The unary e applies after adding its two inputs (0: none), or -1 when e computes anything
 * else: an element-wise add, or a fused program of that add (registers 0 and 1 in, 2 out)
 * and at most one unary of its sum (register 3). */
static int act_after_add(const struct step *e, double *p0, double *p1)
{
    const struct tfc_kargs *a = e->args;
    if (e->cl == &tfc_cl_elementwise) return a->kind == TFC_K_ADD ? 0 : -1;
    if (e->cl != &tfc_cl_fused || a->kind != TFC_K_FUSED) return -1;
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    const struct tfc_fused_op *add = &pg->ops[0], *u = &pg->ops[1];
    if (pg->n_ops < 1 || pg->n_ops > 2 || add->kind != TFC_K_ADD || add->a + add->b != 1 ||
        add->a * add->b != 0 || pg->out_reg[0] != 1 + pg->n_ops)
        return -1;
    if (pg->n_ops == 1) return 0;
    if (!tfc_ew_is_unary(u->kind) || u->a != 2) return -1;
    *p0 = u->p0, *p1 = u->p1;
    return u->kind;
}

int tfc_epilogue_match(const struct step *mm, const struct step *e, struct tfc_epilogue *ep)
{
    const struct tfc_kargs *m = mm->args, *a = e->args;
    if (mm->cl != &tfc_cl_matmul || m->kind != TFC_K_MATMUL || m->n_in != 2 || m->n_out != 1 ||
        a->n_in != 2 || a->n_out != 1)
        return 0;
    const struct tfc_kdesc *prod = &m->d[2], *out = &a->d[2];
    if (!f32_buffer(&m->d[0]) || !f32_buffer(&m->d[1]) || !f32_buffer(prod) ||
        !f32_buffer(out) || prod->rank != 2 || !same_dims(prod, out))
        return 0;
    int in = -1; /* e's input that is the product */
    for (int i = 0; i < 2; i++)
        if (f32_buffer(&a->d[i]) && same_dims(&a->d[i], prod) &&
            same_buf(mm, prod->buf, e, a->d[i].buf))
            in = i;
    if (in < 0) return 0;
    const struct tfc_kdesc *bias = &a->d[1 - in];
    int64_t n = prod->dims[1];
    if (!f32_buffer(bias) || bias->numel != n || (bias->rank != 1 && bias->rank != 2) ||
        bias->dims[bias->rank - 1] != n || (e->buf_part && e->buf_part[bias->buf] >= 0) ||
        bias->buf == out->buf)
        return 0;
    double p0 = 0, p1 = 0;
    int act = act_after_add(e, &p0, &p1);
    if (act < 0) return 0;
    *ep = (struct tfc_epilogue){.product = prod->buf, .bias_in = 1 - in, .act = act, .p0 = p0,
                                .p1 = p1};
    return 1;
}

size_t tfc_epilogue_args_size(void)
{
    return sizeof(struct tfc_kargs) + 4 * sizeof(struct tfc_kdesc);
}

void tfc_epilogue_args(const struct step *mm, const struct step *e, const struct tfc_epilogue *ep,
                       struct tfc_kargs *out)
{
    const struct tfc_kargs *m = mm->args, *a = e->args;
    memcpy(out, m, sizeof *out); /* kind, node (the matmul's), attrs, error slot */
    out->n_in = 3, out->n_out = 1;
    out->d[0] = m->d[0], out->d[1] = m->d[1], out->d[2] = a->d[ep->bias_in], out->d[3] = a->d[2];
    for (int i = 0; i < 4; i++) out->d[i].buf = i;
    out->attrs[MATMUL_EPILOGUE_ACT] = (struct tfc_kattr){.i = ep->act, .f = ep->p0};
    out->attrs[MATMUL_EPILOGUE_P1] = (struct tfc_kattr){.f = ep->p1};
    out->flops = m->flops + a->flops;
    out->bytes = m->bytes + a->bytes - 2 * (double)m->d[2].numel * sizeof(float); /* no product */
    out->footprint = starpu_hash_crc32c_be(a->footprint, m->footprint);
}

int tfc_epilogue_buf(const struct step *mm, const struct step *e, const struct tfc_epilogue *ep,
                     int which)
{
    const struct tfc_kargs *m = mm->args, *a = e->args;
    switch (which) {
    case 0: return m->d[0].buf;
    case 1: return m->d[1].buf;
    case 2: return a->d[ep->bias_in].buf;
    default: return a->d[2].buf;
    }
}
