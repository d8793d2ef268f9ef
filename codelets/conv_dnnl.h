/* conv_dnnl.h: the oneDNN backend of the CPU convolution kernels (codelets/conv_dnnl.c), as
 * codelets/conv.c calls it before its own im2col kernels. */
#ifndef TFC_CONV_DNNL_KERNEL_H
#define TFC_CONV_DNNL_KERNEL_H

#include "kargs.h"

enum tfc_conv_dnnl_result {
    TFC_CONV_DNNL_RAN,      /* the output is written, or a failure is recorded on the run */
    TFC_CONV_DNNL_DECLINED, /* not for oneDNN (float64, an empty operand, a geometry oneDNN
                             * refuses or runs only with reference code): im2col runs it */
    TFC_CONV_DNNL_ABSENT,   /* the library was built without oneDNN */
};

/* Runs a conv, conv_backprop_input or conv_backprop_filter task's kernel (a->kind) with oneDNN
 * on the calling CPU worker, with the same contract as the im2col kernel: the output is
 * overwritten (conv_backprop_filter: the filter gradient summed over the task's images). */
enum tfc_conv_dnnl_result tfc_conv_dnnl_cpu(void *buffers[], const struct tfc_kargs *a);
/* Threads holding oneDNN state (codelets/dnnl_thread.c: engine, stream, the primitives of
 * convolutions and of matmuls): each StarPU CPU worker that ran one, until it ends at
 * StarPU's shutdown (for tests). */
int tfc_conv_dnnl_live_threads(void);

/* The layouts of the primitives built from now on (for benchmarks): auto (blocked, but plain
 * for the input gradient of layers with few input channels), all blocked, all plain. */
enum tfc_conv_dnnl_layouts {
    TFC_CONV_DNNL_LAYOUTS_AUTO,
    TFC_CONV_DNNL_LAYOUTS_BLOCKED,
    TFC_CONV_DNNL_LAYOUTS_PLAIN,
};
void tfc_conv_dnnl_force_layouts(enum tfc_conv_dnnl_layouts l);

#endif
