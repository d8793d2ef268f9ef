/* conv_winograd_rule.c: which convolutions the Winograd kernels (codelets/conv_winograd.c)
 * run, and which of them TFC_CONV_BACKEND=auto gives them; apart from the kernels so that
 * the perfmodel's footprint (codelets/perfmodel.c) can ask without calling into them. */
#include "conv_winograd.h"
#include "../src/tfc.h"

#define LANES 16 /* images per vector in the kernels */

int tfc_conv_winograd_tile(int r)
{
    return r == 3 || r == 5 ? 4 : 0; /* F(4x4, 3x3) on 6x6 tiles, F(4x4, 5x5) on 8x8 */
}

int tfc_conv_winograd_fits(const struct tfc_kargs *a, const struct tfc_conv_geom *g)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    if (o->dtype != TFC_FLOAT32 || a->d[0].dtype != TFC_FLOAT32 || g->nd != 2 || g->groups != 1)
        return 0;
    for (int d = 0; d < 2; d++)
        if (g->stride[d] != 1 || g->dil[d] != 1 || g->out[d] < 1 || g->in[d] < 1) return 0;
    /* the GEMMs take int extents: channel counts far below that */
    return g->kern[0] == g->kern[1] && tfc_conv_winograd_tile((int)g->kern[0]) &&
           g->batch >= 1 && g->in_ch >= 1 && g->out_ch >= 1 && g->in_ch <= 65536 &&
           g->out_ch <= 65536;
}

/* 5x5 kernels with enough channels and images: measured faster than oneDNN here (bench/
 * conv_winograd). Images go 16 to a vector, so a batch leaving a quarter of the lanes empty
 * loses; so does a 1-channel input (conv1: the GEMMs are 1 deep). */
int tfc_conv_winograd_auto(const struct tfc_conv_geom *g)
{
    int64_t lanes = (g->batch + LANES - 1) / LANES * LANES;
    return g->kern[0] == 5 && g->in_ch >= 16 && g->out_ch >= 16 && 4 * g->batch >= 3 * lanes;
}
