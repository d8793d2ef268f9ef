/* kargs.h: what a kernel receives. Each task's cl_arg points to a tfc_kargs built once per plan
 * (immutable while runs use it): the op kind, every operand's dtype and concrete shape, the
 * attributes, and where to record a failure. Plain C, shared by the .c, .cu and OpenCL hosts. */
#ifndef TFC_KARGS_H
#define TFC_KARGS_H

#include <stddef.h>
#include <stdint.h>
#include "kinds.h" /* enum tfc_kernel_kind */

#ifdef __cplusplus
extern "C" {
#endif

#define TFC_K_MAX_RANK 8
#define TFC_K_MAX_ATTRS 8

/* One operand. dtype is an enum tfc_dtype value. buf is the operand's index in the task's
 * buffers, or -1 when it has no buffer (zero elements never reach StarPU). */
struct tfc_kdesc {
    int32_t dtype;
    int32_t rank;
    int64_t dims[TFC_K_MAX_RANK];
    int64_t numel;
    int32_t buf;
    int32_t pad_;
};

/* Range errors a device kernel finds (the message each kind gives: tfc_kerr_format). */
enum tfc_kerr_kind {
    TFC_CU_ERR_DIV0 = 1, /* "integer division by zero" */
    TFC_CU_ERR_GATHER,   /* "index %lld at position %lld is outside [0, %lld)" */
    TFC_CU_ERR_LABEL,    /* "label %lld of row %lld is outside [0, %lld)" */
};

/* A range error as a CUDA kernel writes it straight into host memory (mapped, pinned): no
 * host function per task; the run reads it once its tasks have ended (tfc_kerr_take_device). */
struct tfc_kerr_dev {
    volatile int32_t set;
    int32_t kind;  /* enum tfc_kerr_kind */
    int32_t node;
    int32_t pad_;
    int64_t pos, value, bound;
};

/* The first kernel failure of a run; written once (compare-and-swap on `claimed`). */
struct tfc_kerr {
    int claimed;  /* the first failing kernel takes it (atomically), then writes the fields */
    int set;      /* stored (release) once status, node and msg are written: a reader that
                   * does not wait for the tasks (a loop's predicate check) loads it (acquire) */
    int status;   /* a tfc_status */
    int node;     /* the failing node's id */
    char msg[200];
    struct tfc_kerr_dev *dev; /* NULL, or the instance's device record (CUDA workers) */
};

/* An attribute value: `i` for ints, dtypes and bools, `f` for floats, `v[0..n)` for lists. */
struct tfc_kattr {
    int64_t i;
    double f;
    int32_t n;
    int32_t pad_;
    int64_t v[TFC_K_MAX_RANK];
};

struct tfc_kargs {
    int32_t kind;          /* enum tfc_kernel_kind */
    int32_t node;          /* node id, for error messages */
    int32_t n_in, n_out;
    uint32_t footprint;    /* perfmodel key: kind, dtypes, shapes, attributes */
    int32_t pad_;
    double flops;          /* estimated, for analytic models and priorities */
    double bytes;          /* bytes read and written */
    struct tfc_kerr *err;  /* the run instance's error slot */
    struct tfc_kattr attrs[TFC_K_MAX_ATTRS];
    struct tfc_kdesc d[];  /* n_in inputs, then n_out outputs */
};

static inline const struct tfc_kdesc *tfc_kin_desc(const struct tfc_kargs *a, int i)
{
    return &a->d[i];
}

static inline const struct tfc_kdesc *tfc_kout_desc(const struct tfc_kargs *a, int i)
{
    return &a->d[a->n_in + i];
}

/* Records the first failure of the run (thread-safe; later failures are dropped). */
void tfc_kernel_fail(const struct tfc_kargs *a, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The message of a range error of kind `kind` (enum tfc_kerr_kind) into msg[len]. */
void tfc_kerr_format(int kind, long long pos, long long value, long long bound, char *msg,
                     size_t len);
/* Moves a device record, if one was written, into e (unless e is already set) and clears it. */
void tfc_kerr_take_device(struct tfc_kerr *e);

#ifdef __cplusplus
}
#endif

#endif
