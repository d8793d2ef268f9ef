/* overhead.c: the runtime's cost per task against bare StarPU. N tiny ops (neg of a scalar),
 * either independent (each reads x, writes its own) or a chain (each reads the previous), run
 * from a cached plan, against N bare starpu_task_insert calls with an empty codelet and the
 * same access pattern. Interleaved repeats; medians. Usage: overhead [N] [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <starpu.h>
#include "../src/tfc.h"
#include "benchutil.h"

static void empty(void *buffers[], void *arg) { (void)buffers; (void)arg; }

static struct starpu_codelet empty_cl = {
    .cpu_funcs = {empty}, .nbuffers = 2, .modes = {STARPU_R, STARPU_W}, .name = "empty"};

static double bare(starpu_data_handle_t *h, int n, int chain)
{
    double t0 = bench_now();
    for (int i = 0; i < n; i++)
        starpu_task_insert(&empty_cl, STARPU_R, chain ? h[i] : h[0], STARPU_W, h[i + 1], 0);
    starpu_task_wait_for_all();
    return bench_now() - t0;
}

static double ours(tfc_session *s, tfc_tensor **targets, int n_targets)
{
    double t0 = bench_now();
    if (tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, n_targets, targets)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000, reps = argc > 2 ? atoi(argv[2]) : 7;
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "%s\n", tfc_errmsg());
        return 1;
    }
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);
    float *vals = calloc((size_t)n + 1, sizeof(float));
    starpu_data_handle_t *h = malloc(sizeof *h * ((size_t)n + 1));
    for (int i = 0; i <= n; i++)
        starpu_variable_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)&vals[i], sizeof(float));

    printf("# overhead: %d tiny ops, %d repeats, scheduler %s, %d CPU workers\n", n, reps,
           info.sched_policy, info.n_cpu_workers);
    printf("%-12s %12s %12s %8s\n", "pattern", "bare us/task", "tfc us/task", "ratio");
    for (int chain = 0; chain <= 1; chain++) {
        tfc_graph *g;
        tfc_graph_create(&g);
        tfc_tensor *x = tfc_scalar(g, TFC_FLOAT32, 1.0), *prev = x;
        tfc_tensor **targets = malloc(sizeof *targets * (size_t)n);
        for (int i = 0; i < n; i++) {
            targets[i] = tfc_neg(g, chain ? prev : x);
            prev = targets[i];
        }
        tfc_session *s;
        tfc_session_create(ctx, g, &s);
        tfc_session_set_passes(s, 0); /* one task per op: no CSE, folding (x is a constant)
                                       * or fusion, which would remove the tasks measured */
        int n_targets = chain ? 1 : n;
        tfc_tensor **tgt = chain ? &targets[n - 1] : targets;
        ours(s, tgt, n_targets); /* build and cache the plan, warm up */
        bare(h, n, chain);
        double *tb = malloc(sizeof(double) * (size_t)reps), *to = malloc(sizeof(double) * (size_t)reps);
        for (int r = 0; r < reps; r++) {
            tb[r] = bare(h, n, chain);
            to[r] = ours(s, tgt, n_targets);
        }
        double mb = bench_median(tb, reps) / n * 1e6, mo = bench_median(to, reps) / n * 1e6;
        printf("%-12s %12.2f %12.2f %8.2f\n", chain ? "chain" : "independent", mb, mo, mo / mb);
        tfc_session_stats st;
        tfc_session_get_stats(s, &st);
        if (st.lowerings != 1) fprintf(stderr, "unexpected: %llu lowerings\n", (unsigned long long)st.lowerings);
        free(tb); free(to); free(targets);
        tfc_session_destroy(s);
        tfc_graph_destroy(g);
    }
    for (int i = 0; i <= n; i++) starpu_data_unregister(h[i]);
    free(h);
    free(vals);
    tfc_ctx_destroy(ctx);
    return 0;
}
