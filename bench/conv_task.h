/* conv_task.h: one direction of a CNN conv layer (5x5 kernel, 2 of padding on every side,
 * stride 1) as the CPU conv codelet receives it: its arguments and three vector buffers of
 * random floats, for the benchmarks that call the codelet and its kernels directly
 * (conv_codelet, conv_winograd); and timing a call by this thread's CPU time, which leaves
 * out the time other processes had the core (the machine is shared). */
#ifndef TFC_BENCH_CONV_TASK_H
#define TFC_BENCH_CONV_TASK_H

#include <starpu.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "benchutil.h"
#include "../codelets/kargs.h"
#include "../codelets/kinds.h"
#include "../codelets/op_attrs.h"
#include "../src/tfc.h"

extern struct starpu_codelet tfc_cl_conv;

struct bench_conv_task {
    struct tfc_kargs *a;
    struct tfc_kerr err;
    struct starpu_vector_interface iface[3];
    void *bufs[3];
    float *data[3];   /* the buffers in the order the direction's kind takes them */
    float *x, *w, *y; /* the same arrays by role */
    double flops;     /* 2 N K C R S OH OW */
};

static inline float *bench_rand_floats(int64_t n)
{
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX * 2 - 1;
    return p;
}

/* x [batch, c, hw, hw], w [k, c, 5, 5], y [batch, k, hw, hw] in direction dir: 0 forward,
 * 1 input gradient, 2 filter gradient. */
static inline void bench_conv_task_make(struct bench_conv_task *t, int64_t c, int64_t k,
                                        int64_t hw, int64_t batch, int dir)
{
    static const int kinds[3] = {TFC_K_CONV, TFC_K_CONV_BP_INPUT, TFC_K_CONV_BP_FILTER};
    /* which of x, w, y each buffer is: forward (x, w) -> y, input gradient (dy, w) -> dx,
     * filter gradient (x, dy) -> dw */
    static const int order[3][3] = {{0, 1, 2}, {2, 1, 0}, {0, 2, 1}};
    memset(t, 0, sizeof *t);
    t->a = calloc(1, sizeof *t->a + 3 * sizeof(struct tfc_kdesc));
    struct tfc_kargs *a = t->a;
    a->kind = kinds[dir], a->n_in = 2, a->n_out = 1, a->err = &t->err;
    a->attrs[CONV_GROUPS].i = 1, a->attrs[CONV_PADS].n = 4;
    for (int i = 0; i < 4; i++) a->attrs[CONV_PADS].v[i] = 2;
    int64_t shapes[3][4] = {{batch, c, hw, hw}, {k, c, 5, 5}, {batch, k, hw, hw}};
    float *role[3];
    for (int i = 0; i < 3; i++) {
        struct tfc_kdesc *d = &a->d[i];
        const int64_t *s = shapes[order[dir][i]];
        d->dtype = TFC_FLOAT32, d->rank = 4, d->buf = i, d->numel = 1;
        for (int j = 0; j < 4; j++) d->dims[j] = s[j], d->numel *= s[j];
        t->data[i] = bench_rand_floats(d->numel);
        role[order[dir][i]] = t->data[i];
        t->iface[i] = (struct starpu_vector_interface){.id = STARPU_VECTOR_INTERFACE_ID,
                                                       .ptr = (uintptr_t)t->data[i],
                                                       .nx = (uint32_t)d->numel,
                                                       .elemsize = 4};
        t->bufs[i] = &t->iface[i];
    }
    t->x = role[0], t->w = role[1], t->y = role[2];
    t->flops = 2.0 * (double)(k * c * 25) * (double)(batch * hw * hw);
}

static inline void bench_conv_task_free(struct bench_conv_task *t)
{
    for (int i = 0; i < 3; i++) free(t->data[i]);
    free(t->a);
}

static inline double bench_thread_cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds per call of run(p, v), wall-clock and this thread's CPU time: means over
 * back-to-back calls lasting block_s, after one untimed. */
static inline void bench_sample(void (*run)(void *p, int v), void *p, int v, double block_s,
                                double *wall, double *cpu)
{
    run(p, v);
    int calls = 0;
    double t0 = bench_now(), c0 = bench_thread_cpu_now(), t;
    do {
        run(p, v);
        calls++;
    } while ((t = bench_now() - t0) < block_s);
    *cpu = (bench_thread_cpu_now() - c0) / calls;
    *wall = t / calls;
}

#endif
