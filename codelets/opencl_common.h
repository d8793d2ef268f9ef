/* opencl_common.h: shared host code of the OpenCL codelets (PoCL or any OpenCL device): one
 * program per op family, built once per StarPU lifetime from a source string (the family's
 * body is instantiated for float (suffix _f32) and double (_f64)), kernels looked up per call
 * on the calling worker's device, buffer and error helpers, and the support predicate that
 * can_execute and the plan's test hooks share. Kernel failures go to tfc_kernel_fail. */
#ifndef TFC_OPENCL_COMMON_H
#define TFC_OPENCL_COMMON_H

#include "kernel.h"

/* Whether the OpenCL codelet of `cl` implements the step described by `a` (kind, dtypes,
 * non-empty operands). 0 for codelets without an OpenCL implementation. Callable without
 * StarPU running. This and can_execute are codelets/opencl_support.c, the only file that
 * knows every family. */
int tfc_opencl_supports(const struct starpu_codelet *cl, const struct tfc_kargs *a);

/* can_execute hook of the codelets with OpenCL implementations: non-OpenCL workers always,
 * OpenCL workers only where tfc_opencl_supports. */
int tfc_opencl_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl);

/* Unloads the programs (before starpu_shutdown; they are rebuilt on next use). */
void tfc_opencl_shutdown(void);

/* The OpenCL devices StarPU 1.3 would take at starpu_init with the environment as it is (GPUs
 * and accelerators; CPUs too with STARPU_OPENCL_ON_CPUS, only CPUs with
 * STARPU_OPENCL_ONLY_ON_CPUS), counted before it starts; -1 without OpenCL support. */
int tfc_opencl_device_count(void);

/* Per-family predicates (in the family files). */
int tfc_opencl_elementwise_ok(const struct tfc_kargs *a);
int tfc_opencl_matmul_ok(const struct tfc_kargs *a);
int tfc_opencl_reduce_ok(const struct tfc_kargs *a);
int tfc_opencl_softmax_ok(const struct tfc_kargs *a);
int tfc_opencl_layout_ok(const struct tfc_kargs *a); /* checks empty and shape-only operands */
int tfc_opencl_assign_ok(const struct tfc_kargs *a);
int tfc_opencl_optimizer_ok(const struct tfc_kargs *a);

#ifdef STARPU_USE_OPENCL
#include <starpu_opencl.h>

void tfc_elementwise_opencl(void *buffers[], void *cl_arg);
void tfc_matmul_opencl(void *buffers[], void *cl_arg);
void tfc_reduce_opencl(void *buffers[], void *cl_arg);
void tfc_softmax_opencl(void *buffers[], void *cl_arg);
void tfc_layout_opencl(void *buffers[], void *cl_arg);
void tfc_assign_opencl(void *buffers[], void *cl_arg);
void tfc_optimizer_opencl(void *buffers[], void *cl_arg);

/* A family's program: `body` uses T (float or double) and TS(name) for kernel names;
 * `plain` (may be NULL) is compiled once, untemplated. */
struct tfc_ocl_prog {
    const char *family;
    const char *body;
    const char *plain;
    int ew_math;   /* 1: the body uses the element-wise formulas (ew_scalar.h's EW(...)) */
    int loaded;
    struct starpu_opencl_program prog;
    struct tfc_ocl_prog *next;
};

/* The calling worker's kernel `name` (suffixed _f32/_f64 when dtype is 0/1; dtype -1: no
 * suffix) and queue; NULL after recording a failure. Release with clReleaseKernel. */
cl_kernel tfc_ocl_kernel(struct tfc_ocl_prog *p, const char *name, int dtype,
                         const struct tfc_kargs *a, cl_command_queue *queue);

/* Buffer b of the task: its cl_mem and byte offset. */
void tfc_ocl_buf(void *buffers[], int b, cl_mem *mem, cl_ulong *off);

/* Sets kernel arguments from (size, pointer) pairs, enqueues a 1-D (gws1 = 0) or 2-D range and
 * waits; records a failure and returns nonzero on error. */
int tfc_ocl_run(const struct tfc_kargs *a, cl_kernel k, cl_command_queue q, size_t gws0,
                size_t gws1, int nargs, const size_t *sizes, const void *const *vals);

/* Copies bytes from task buffer `from` to buffer `to` on the worker's queue and waits; records
 * a failure and returns nonzero on error. */
int tfc_ocl_copy(const struct tfc_kargs *a, void *buffers[], int from, int to, size_t bytes);

/* Device-side index errors: a one-int buffer holding the first bad position (INT_MAX: none),
 * which kernels lower with atomic_min. create returns NULL after recording a failure. */
cl_mem tfc_ocl_bad_create(const struct tfc_kargs *a);
/* Reads the bad position back: 0 when none, 1 with *pos and *value (element *pos of index
 * buffer idx at byte offset io, dtype idx_dtype), -1 after recording a failure. */
int tfc_ocl_bad_read(const struct tfc_kargs *a, cl_command_queue q, cl_mem B, cl_mem idx,
                     cl_ulong io, int idx_dtype, int64_t *pos, int64_t *value);

/* Records an OpenCL failure ("OpenCL <what> failed (error N)") and returns -1. */
int tfc_ocl_fail(const struct tfc_kargs *a, const char *what, cl_int err);
#endif

#endif
