/* pad.c: CPU kernels of pad (constant, reflect, edge; any rank and dtype: elements are copied
 * as bytes) and pad_grad (each element of dy added onto its source in dx, float32 or float64).
 * Where an element comes from is pad_src.h, shared with the other devices. */
#include <string.h>
#include "kernel.h"
#include "bcast.h"
#include "pad_src.h"
#include "opencl_common.h" /* tfc_opencl_can_execute */
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
void tfc_pad_opencl(void *buffers[], void *cl_arg); /* codelets/opencl_pad.c */
#endif
#ifdef STARPU_USE_CUDA
void tfc_pad_cuda(void *buffers[], void *cl_arg); /* codelets/pad_cuda.cu */
#endif

/* The flat source index in the unpadded tensor `in` of output element `flat` of `out`, or -1
 * for the constant. */
static int64_t pad_source(const struct tfc_kargs *a, const struct tfc_kdesc *in,
                          const struct tfc_kdesc *out, int64_t flat)
{
    int64_t src = 0, stride = 1;
    int mode = (int)a->attrs[PAD_MODE].i;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t o = flat % out->dims[d];
        flat /= out->dims[d];
        long long i = tfc_pad_src(o, a->attrs[PAD_BEGIN].v[d], in->dims[d], mode);
        if (i < 0) return -1;
        src += (int64_t)i * stride;
        stride *= in->dims[d];
    }
    return src;
}

static void pad_run(const struct tfc_kargs *a, const void *x, void *y)
{
    const struct tfc_kdesc *in = &a->d[0], *out = tfc_kout_desc(a, 0);
    size_t es = tfc_kdtype_size(out->dtype);
    for (int64_t k = 0; k < out->numel; k++) {
        int64_t s = x ? pad_source(a, in, out, k) : -1;
        if (s >= 0)
            memcpy((char *)y + (size_t)k * es, (const char *)x + (size_t)s * es, es);
        else
            tfc_store_f64(y, out->dtype, k, a->attrs[PAD_VALUE].f);
    }
}

static void pad_grad_run(const struct tfc_kargs *a, const void *dy, void *dx)
{
    const struct tfc_kdesc *g = &a->d[0], *x = tfc_kout_desc(a, 0);
    memset(dx, 0, (size_t)x->numel * tfc_kdtype_size(x->dtype));
    for (int64_t k = 0; k < g->numel && dy; k++) {
        int64_t s = pad_source(a, x, g, k);
        if (s >= 0)
            tfc_store_f64(dx, x->dtype, s,
                          tfc_load_f64(dx, x->dtype, s) + tfc_load_f64(dy, g->dtype, k));
    }
}

static void pad_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    void *y = tfc_kout(buffers, a, 0);
    if (!y) return;
    if (a->kind == TFC_K_PAD)
        pad_run(a, tfc_kin(buffers, a, 0), y);
    else
        pad_grad_run(a, tfc_kin(buffers, a, 0), y);
}

static struct starpu_perfmodel pad_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_pad",
};

struct starpu_codelet tfc_cl_pad = {
    .cpu_funcs = {pad_cpu},
    .cpu_funcs_name = {"pad_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_pad_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    /* every kind and dtype: tfc_opencl_supports' default for codelets it does not list */
    .opencl_funcs = {tfc_pad_opencl},
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &pad_model,
    .name = "pad",
};
