/* while_overhead.c: the cost of one iteration of an empty while_loop (issue 13): i = 0; while
 * (i < n) i = i + 1, against a bare StarPU task (an empty codelet in a RW chain) and against
 * the same loop written by hand on bare StarPU (a compare task, an add task,
 * starpu_data_acquire of the flag). The loop is a counter, so by default it runs count-known
 * (one add task per iteration, no read-back); with TFC_WHILE_COUNT=0 it tests its predicate
 * each iteration (two tiny tasks and one read-back), measured too, and with
 * TFC_WHILE_SPECULATE=1 as well (one iteration ahead of the read-back). Interleaved repeats;
 * medians. Usage: while_overhead [iterations] [repeats] [count-known|tested|speculative]: the third
 * argument runs only that form of the tfc loop (for callgrind: one form's instructions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starpu.h>
#include "../src/tfc.h"
#include "benchutil.h"

static void empty(void *buffers[], void *arg) { (void)buffers; (void)arg; }

static void less_than(void *buffers[], void *arg)
{
    int32_t n;
    starpu_codelet_unpack_args(arg, &n); /* STARPU_VALUE packs it */
    int32_t *i = (int32_t *)STARPU_VARIABLE_GET_PTR(buffers[0]);
    *(uint8_t *)STARPU_VARIABLE_GET_PTR(buffers[1]) = *i < n;
}

static void incr(void *buffers[], void *arg)
{
    (void)arg;
    (*(int32_t *)STARPU_VARIABLE_GET_PTR(buffers[0]))++;
}

static struct starpu_codelet empty_cl = {
    .cpu_funcs = {empty}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "empty"};
static struct starpu_codelet less_cl = {
    .cpu_funcs = {less_than}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W}, .name = "less"};
static struct starpu_codelet incr_cl = {
    .cpu_funcs = {incr}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "incr"};

static double bare_tasks(starpu_data_handle_t h, int n)
{
    double t0 = bench_now();
    for (int i = 0; i < n; i++) starpu_task_insert(&empty_cl, STARPU_RW, h, 0);
    starpu_task_wait_for_all();
    return bench_now() - t0;
}

/* The loop by hand: the least a host-driven loop costs on StarPU. */
static double bare_loop(starpu_data_handle_t hi, starpu_data_handle_t hf, int32_t *i, uint8_t *f,
                        int32_t n)
{
    double t0 = bench_now();
    starpu_data_acquire(hi, STARPU_W);
    *i = 0;
    starpu_data_release(hi);
    for (;;) {
        starpu_task_insert(&less_cl, STARPU_R, hi, STARPU_W, hf, STARPU_VALUE, &n, sizeof n, 0);
        starpu_data_acquire(hf, STARPU_R);
        int go = *f;
        starpu_data_release(hf);
        if (!go) break;
        starpu_task_insert(&incr_cl, STARPU_RW, hi, 0);
    }
    starpu_task_wait_for_all();
    double t = bench_now() - t0;
    starpu_data_acquire(hi, STARPU_R);
    if (*i != n) {
        fprintf(stderr, "bare loop: wrong count %d\n", *i);
        exit(1);
    }
    starpu_data_release(hi);
    return t;
}

static tfc_status below(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], (tfc_tensor *)arg);
    return TFC_OK;
}

static tfc_status step(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    return TFC_OK;
}

/* One run of the loop; tested: with its predicate read back each iteration (2: one iteration
 * ahead, TFC_WHILE_SPECULATE=1). */
static double ours(tfc_session *s, tfc_tensor *n, tfc_value *nv, tfc_tensor *r, int expect,
                   int tested)
{
    tfc_value *out = NULL;
    if (tested) setenv("TFC_WHILE_COUNT", "0", 1);
    if (tested == 2) setenv("TFC_WHILE_SPECULATE", "1", 1);
    double t0 = bench_now();
    if (tfc_session_run(s, 1, &n, &nv, 1, &r, &out, 0, NULL)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    double t = bench_now() - t0;
    if (tested) unsetenv("TFC_WHILE_COUNT");
    if (tested == 2) unsetenv("TFC_WHILE_SPECULATE");
    if (*(const int32_t *)tfc_value_cdata(out) != expect) {
        fprintf(stderr, "wrong result %d\n", *(const int32_t *)tfc_value_cdata(out));
        exit(1);
    }
    tfc_value_destroy(out);
    return t;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000, reps = argc > 2 ? atoi(argv[2]) : 5;
    int only = argc <= 3                         ? 0 /* both forms */
               : !strcmp(argv[3], "count-known") ? 1
               : !strcmp(argv[3], "tested")      ? 2
               : !strcmp(argv[3], "speculative") ? 3
                                                 : -1;
    tfc_ctx *ctx;
    if (n < 1 || reps < 1 || only < 0 || tfc_ctx_create(&ctx)) {
        fprintf(stderr, "usage: while_overhead [iterations >= 1] [repeats >= 1] "
                        "[count-known|tested|speculative]; %s\n", tfc_errmsg());
        return 1;
    }
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);
    int32_t iv = 0;
    uint8_t fv = 0;
    starpu_data_handle_t hi, hf;
    starpu_variable_data_register(&hi, STARPU_MAIN_RAM, (uintptr_t)&iv, sizeof iv);
    starpu_variable_data_register(&hf, STARPU_MAIN_RAM, (uintptr_t)&fv, sizeof fv);

    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *nt = tfc_placeholder(g, "n", TFC_INT32, tfc_shape_of(0, NULL)), *r;
    tfc_tensor *i0 = tfc_scalar(g, TFC_INT32, 0);
    tfc_session *s = NULL;
    tfc_value *nval = NULL;
    if (tfc_while_loop(g, "count", below, step, nt, 1, &i0, NULL, &r) ||
        tfc_session_create(ctx, g, &s) || tfc_value_scalar(TFC_INT32, n, &nval)) {
        fprintf(stderr, "build: %s\n", tfc_graph_errmsg(g));
        return 1;
    }
    /* plans and instances made once, as a training loop would */
    if (!only || only == 1) ours(s, nt, nval, r, n, 0);
    if (!only || only == 2) ours(s, nt, nval, r, n, 1);
    if (!only || only == 3) ours(s, nt, nval, r, n, 2);
    bare_tasks(hf, n);
    bare_loop(hi, hf, &iv, &fv, n);
    double *tb = malloc(sizeof(double) * (size_t)reps), *tl = malloc(sizeof(double) * (size_t)reps),
           *to = malloc(sizeof(double) * (size_t)reps), *tt = malloc(sizeof(double) * (size_t)reps),
           *ts = malloc(sizeof(double) * (size_t)reps);
    for (int k = 0; k < reps; k++) {
        tb[k] = bare_tasks(hf, n);
        tl[k] = bare_loop(hi, hf, &iv, &fv, n);
        to[k] = only && only != 1 ? 0 : ours(s, nt, nval, r, n, 0);
        tt[k] = only && only != 2 ? 0 : ours(s, nt, nval, r, n, 1);
        ts[k] = only && only != 3 ? 0 : ours(s, nt, nval, r, n, 2);
    }
    double mb = bench_median(tb, reps) / n * 1e6, ml = bench_median(tl, reps) / n * 1e6,
           mo = bench_median(to, reps) / n * 1e6, mt = bench_median(tt, reps) / n * 1e6,
           ms = bench_median(ts, reps) / n * 1e6;
    printf("# while_overhead: %d iterations, %d repeats, scheduler %s, %d CPU workers\n", n,
           reps, info.sched_policy, info.n_cpu_workers);
    printf("%-34s %10s %14s\n", "", "us", "x bare task");
    printf("%-34s %10.2f %14.2f\n", "bare StarPU task (RW chain)", mb, 1.0);
    printf("%-34s %10.2f %14.2f\n", "bare StarPU loop, per iteration", ml, ml / mb);
    printf("%-34s %10.2f %14.2f\n", "tfc while_loop, count-known", mo, mo / mb);
    printf("%-34s %10.2f %14.2f\n", "tfc while_loop, predicate tested", mt, mt / mb);
    printf("%-34s %10.2f %14.2f\n", "tfc while_loop, tested, speculative", ms, ms / mb);
    printf("(tfc / bare loop: count-known %.2f, predicate tested %.2f, speculative %.2f)\n",
           mo / ml, mt / ml, ms / ml);
    free(tb); free(tl); free(to); free(tt); free(ts);
    tfc_value_destroy(nval);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    starpu_data_unregister(hi);
    starpu_data_unregister(hf);
    tfc_ctx_destroy(ctx);
    return 0;
}
