/* opencl_common.c: program loading, kernel lookup, argument and error helpers of the OpenCL
 * codelets (see opencl_common.h), and the count of OpenCL devices StarPU will find. The
 * families call these; this file calls no family (which family supports what is
 * codelets/opencl_support.c). Programs are built for one StarPU's OpenCL contexts and unloaded
 * when the library lets that StarPU go (sched/runtime.c). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "opencl_common.h"
#include "bcast.h" /* tfc_load_i64 */
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tfc_ocl_prog *g_loaded; /* programs built in this StarPU lifetime */

/* The kinds and the element-wise formulas, as the C and CUDA kernels see them
 * (codelets/ew_math_cl.c, generated from codelets/kinds.h and codelets/ew_scalar.h). */
extern const char tfc_ew_cl_kinds[], tfc_ew_cl_scalar[];

static const char prelude[] =
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#define TFC_EW_FN static inline\n"
    "#define MAXR 8\n"
    "typedef struct { long rank, n; long dims[MAXR]; long st[3][MAXR]; } bcast_t;\n"
    "typedef struct { long nk, nr; long kd[MAXR], ks[MAXR], rd[MAXR], rs[MAXR]; } red_t;\n"
    "#define AT(p, off) ((global void *)((global char *)(p) + (off)))\n"
    /* element offset in operand k of output element i, under broadcasting */
    "long bc_off(const bcast_t *b, long i, int k)\n"
    "{ long off = 0; for (int d = (int)b->rank - 1; d >= 0; d--) {\n"
    "  off += (i % b->dims[d]) * b->st[k][d]; i /= b->dims[d]; } return off; }\n";
static const char f32[] = "#define T float\n#define TS(n) n##_f32\n"
                          "#define EW(n) tfc_ew_##n##_f32\n#define EWS(f) f##_f32\n";
static const char f64[] = "#undef T\n#undef TS\n#undef EW\n#undef EWS\n#define T double\n"
                          "#define TS(n) n##_f64\n#define EW(n) tfc_ew_##n##_f64\n#define EWS(f) f##_f64\n";

/* prelude, kinds, then the family's body for float and for double (each after the formulas
 * when the family uses them), then its type-less kernels */
static char *build_source(const struct tfc_ocl_prog *p)
{
    const char *scalar = p->ew_math ? tfc_ew_cl_scalar : "";
    size_t len = sizeof prelude + strlen(tfc_ew_cl_kinds) + sizeof f32 + sizeof f64 +
                 2 * (strlen(scalar) + strlen(p->body)) + (p->plain ? strlen(p->plain) : 0) + 8;
    char *s = malloc(len);
    if (!s) return NULL;
    snprintf(s, len, "%s%s%s%s%s\n%s%s%s\n%s\n", prelude, tfc_ew_cl_kinds, f32, scalar, p->body,
             f64, scalar, p->body, p->plain ? p->plain : "");
    return s;
}

void tfc_opencl_shutdown(void)
{
    pthread_mutex_lock(&g_lock);
    while (g_loaded) {
        struct tfc_ocl_prog *p = g_loaded;
        g_loaded = p->next;
        starpu_opencl_unload_opencl(&p->prog);
        p->loaded = 0;
        p->next = NULL;
    }
    pthread_mutex_unlock(&g_lock);
}

int tfc_ocl_fail(const struct tfc_kargs *a, const char *what, cl_int err)
{
    tfc_kernel_fail(a, TFC_ERR_RUNTIME, "OpenCL %s failed (error %d)", what, (int)err);
    return -1;
}

cl_kernel tfc_ocl_kernel(struct tfc_ocl_prog *p, const char *name, int dtype,
                         const struct tfc_kargs *a, cl_command_queue *queue)
{
    char full[96];
    snprintf(full, sizeof full, "%s%s", name, dtype == 0 ? "_f32" : dtype == 1 ? "_f64" : "");
    cl_kernel k = NULL;
    int devid = starpu_worker_get_devid(starpu_worker_get_id());
    pthread_mutex_lock(&g_lock);
    if (!p->loaded) {
        char *src = build_source(p);
        int ret = src ? starpu_opencl_load_opencl_from_string(src, &p->prog, "") : -1;
        free(src);
        if (ret) {
            pthread_mutex_unlock(&g_lock);
            tfc_kernel_fail(a, TFC_ERR_RUNTIME, "OpenCL: building the %s kernels failed (%d)",
                            p->family, ret);
            return NULL;
        }
        p->loaded = 1;
        p->next = g_loaded;
        g_loaded = p;
    }
    cl_int err = starpu_opencl_load_kernel(&k, queue, &p->prog, full, devid);
    pthread_mutex_unlock(&g_lock);
    if (err != CL_SUCCESS) {
        tfc_kernel_fail(a, TFC_ERR_RUNTIME, "OpenCL: kernel %s not found (error %d)", full,
                        (int)err);
        return NULL;
    }
    return k;
}

void tfc_ocl_buf(void *buffers[], int b, cl_mem *mem, cl_ulong *off)
{
    void *iface = buffers[b];
    if (*(enum starpu_data_interface_id *)iface == STARPU_MATRIX_INTERFACE_ID) {
        *mem = (cl_mem)STARPU_MATRIX_GET_DEV_HANDLE(iface);
        *off = STARPU_MATRIX_GET_OFFSET(iface);
    } else {
        *mem = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(iface);
        *off = STARPU_VECTOR_GET_OFFSET(iface);
    }
}

int tfc_ocl_copy(const struct tfc_kargs *a, void *buffers[], int from, int to, size_t bytes)
{
    cl_mem src, dst;
    cl_ulong so, doff;
    tfc_ocl_buf(buffers, from, &src, &so);
    tfc_ocl_buf(buffers, to, &dst, &doff);
    cl_command_queue q;
    starpu_opencl_get_current_queue(&q);
    cl_int err = clEnqueueCopyBuffer(q, src, dst, so, doff, bytes, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(q);
    return err == CL_SUCCESS ? 0 : tfc_ocl_fail(a, "copy", err);
}

cl_mem tfc_ocl_bad_create(const struct tfc_kargs *a)
{
    cl_int bad = INT_MAX, err;
    cl_context ctx;
    starpu_opencl_get_context(starpu_worker_get_devid(starpu_worker_get_id()), &ctx);
    cl_mem B = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof bad, &bad,
                              &err);
    if (err != CL_SUCCESS) {
        tfc_ocl_fail(a, "clCreateBuffer", err);
        return NULL;
    }
    return B;
}

int tfc_ocl_bad_read(const struct tfc_kargs *a, cl_command_queue q, cl_mem B, cl_mem idx,
                     cl_ulong io, int idx_dtype, int64_t *pos, int64_t *value)
{
    cl_int bad = INT_MAX;
    cl_int err = clEnqueueReadBuffer(q, B, CL_TRUE, 0, sizeof bad, &bad, 0, NULL, NULL);
    if (err != CL_SUCCESS) return tfc_ocl_fail(a, "clEnqueueReadBuffer", err);
    if (bad == INT_MAX) return 0;
    unsigned char raw[8] = {0};
    size_t es = tfc_kdtype_size(idx_dtype);
    err = clEnqueueReadBuffer(q, idx, CL_TRUE, io + (size_t)bad * es, es, raw, 0, NULL, NULL);
    if (err != CL_SUCCESS) return tfc_ocl_fail(a, "clEnqueueReadBuffer", err);
    *pos = bad;
    *value = tfc_load_i64(raw, idx_dtype, 0);
    return 1;
}

int tfc_ocl_run(const struct tfc_kargs *a, cl_kernel k, cl_command_queue q, size_t gws0,
                size_t gws1, int nargs, const size_t *sizes, const void *const *vals)
{
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < nargs && err == CL_SUCCESS; i++)
        err = clSetKernelArg(k, (cl_uint)i, sizes[i], vals[i]);
    if (err != CL_SUCCESS) return tfc_ocl_fail(a, "clSetKernelArg", err);
    size_t gws[2] = {gws0, gws1};
    err = clEnqueueNDRangeKernel(q, k, gws1 ? 2 : 1, NULL, gws, NULL, 0, NULL, NULL);
    if (err == CL_SUCCESS) err = clFinish(q);
    if (err != CL_SUCCESS) return tfc_ocl_fail(a, "kernel launch", err);
    return 0;
}

#endif

/* As StarPU 1.3.10's _starpu_opencl_init counts them (driver_opencl.c): up to 4 platforms
 * (_STARPU_OPENCL_PLATFORM_MAX), not SOCL's, devices of the asked types, at most
 * STARPU_MAXOPENCLDEVS. The values of the two variables were checked before (src/env.c). */
int tfc_opencl_device_count(void)
{
#ifdef STARPU_USE_OPENCL
    cl_device_type type = CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR;
    const char *on = getenv("STARPU_OPENCL_ON_CPUS"), *only = getenv("STARPU_OPENCL_ONLY_ON_CPUS");
    if (on && atoi(on) > 0) type |= CL_DEVICE_TYPE_CPU;
    if (only && atoi(only) > 0) type = CL_DEVICE_TYPE_CPU;
    cl_platform_id platforms[4];
    cl_uint n_platforms = 0;
    if (clGetPlatformIDs(4, platforms, &n_platforms) != CL_SUCCESS) return 0;
    int total = 0;
    for (cl_uint i = 0; i < n_platforms && i < 4; i++) {
        char name[1024];
        cl_uint num = 0;
        if (clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name, name, NULL) !=
                CL_SUCCESS || !strcmp(name, "SOCL Platform"))
            continue;
        if (clGetDeviceIDs(platforms[i], type, 0, NULL, &num) == CL_SUCCESS) total += (int)num;
    }
    return total < STARPU_MAXOPENCLDEVS ? total : STARPU_MAXOPENCLDEVS;
#else
    return -1;
#endif
}
