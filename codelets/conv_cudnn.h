/* conv_cudnn.h: the cuDNN backend of the CUDA convolution kernels (codelets/conv_cudnn.cu,
 * cuDNN 9's graph API), as codelets/conv_cuda.cu calls it before its own direct kernels.
 * C++ (nvcc) for the .cu files; the counters are C too, for tests and benchmarks. */
#ifndef TFC_CONV_CUDNN_H
#define TFC_CONV_CUDNN_H

#include "kargs.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tfc_conv_cudnn_result {
    TFC_CONV_CUDNN_RAN,      /* the output is written (enqueued), or a failure is recorded */
    TFC_CONV_CUDNN_DECLINED, /* not for cuDNN (an empty operand, padding whose high side
                              * changes the output extent, no exact engine, no workspace):
                              * the own kernel runs it */
};

/* Runs a conv, conv_backprop_input (also conv_transpose) or conv_backprop_filter task's kernel
 * (a->kind) with cuDNN on the calling CUDA worker's stream, with the own kernel's contract: the
 * output is overwritten (conv_backprop_filter: the filter gradient summed over the task's
 * images). Execution plans are cached per worker, so per device (see conv_cudnn.cu), and
 * released on each worker at StarPU's shutdown (tfc_cuda_on_worker_shutdown). */
enum tfc_conv_cudnn_result tfc_conv_cudnn(void *buffers[], const struct tfc_kargs *a);

/* Tasks cuDNN ran and tasks it declined since the process started (for tests: a GPU run that
 * never used cuDNN would otherwise pass on the own kernels alone). */
void tfc_conv_cudnn_counts(long long *ran, long long *declined);

#ifdef __cplusplus
}
#endif

#endif
