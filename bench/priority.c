/* priority.c: what critical-path priorities buy. One graph holds a long chain of matmuls
 * (c[k+1] = c[k] w) beside wide independent work (W matmuls y w, built first, so submitted
 * first); each run computes both. Without priorities a chain step that becomes ready queues
 * behind the independent tasks already queued; with them it goes first, so the chain overlaps
 * the wide work. Two sessions over the graph, one with priorities (the default) and one without
 * (tfc_session_set_priorities), run in interleaved order after warm-up runs that also calibrate
 * the matmul perfmodel; the figures are medians of the makespans (one tfc_session_run: submit
 * and wait, the plans cached). "chain" and "wide" alone give the bound: the best makespan is
 * about max(chain, chain / P + wide) with P workers (the wide work alone keeps them busy).
 * STARPU_SCHED defaults to dmdas here (set it to compare others).
 * Usage: priority [chain_len=200] [wide=200] [n=256] [repeats=9] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../src/tfc.h"
#include "benchutil.h"
#include "../sched/testing.h"

static double run(tfc_session *s, int n_targets, tfc_tensor **targets)
{
    double t0 = bench_now();
    if (tfc_session_run(s, 0, NULL, NULL, 0, NULL, NULL, n_targets, targets)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    return bench_now() - t0;
}

/* The wide matmuls y w (targets[0 .. wide), built first) and the chain c[k+1] = c[k] w of len
 * steps (targets[wide]); w is the identity (eye) so values stay put, y is ones. */
static tfc_tensor **build(tfc_graph *g, int n, int len, int wide, tfc_value **eye,
                          tfc_value **ones)
{
    tfc_shape sq = tfc_shape_of(2, (int64_t[]){n, n});
    tfc_value_create(TFC_FLOAT32, sq, eye);
    tfc_value_create(TFC_FLOAT32, sq, ones);
    float *e = tfc_value_data(*eye), *o = tfc_value_data(*ones);
    for (int i = 0; i < n * n; i++) o[i] = 1.0f;
    for (int i = 0; i < n; i++) e[i * n + i] = 1.0f; /* values stay put along the chain */
    tfc_tensor *w = tfc_constant(g, "w", *eye), *y = tfc_constant(g, "y", *ones);
    tfc_tensor **targets = malloc(sizeof *targets * (size_t)(wide + 1));
    for (int i = 0; i < wide; i++) targets[i] = tfc_matmul(g, y, w, 0, 0);
    tfc_tensor *c = y;
    for (int k = 0; k < len; k++) c = tfc_matmul(g, c, w, 0, 0);
    targets[wide] = c;
    return targets;
}

/* Median makespans in milliseconds. */
struct medians {
    double on, off;     /* both parts, priorities on and off */
    double chain, wide; /* each part alone, priorities on */
};

/* Warm-up runs, then reps rounds with on and off in alternating order. */
static struct medians measure(tfc_session *on, tfc_session *off, tfc_tensor **targets, int wide,
                              int reps)
{
    for (int i = 0; i < 3; i++) { /* plans, perfmodel calibration, caches */
        run(on, wide + 1, targets);
        run(off, wide + 1, targets);
    }
    size_t bytes = sizeof(double) * (size_t)reps;
    double *t_on = malloc(bytes), *t_off = malloc(bytes), *t_chain = malloc(bytes);
    double *t_wide = malloc(bytes);
    for (int r = 0; r < reps; r++) {
        if (r % 2) {
            t_off[r] = run(off, wide + 1, targets);
            t_on[r] = run(on, wide + 1, targets);
        } else {
            t_on[r] = run(on, wide + 1, targets);
            t_off[r] = run(off, wide + 1, targets);
        }
        t_chain[r] = run(on, 1, &targets[wide]);
        t_wide[r] = run(on, wide, targets);
    }
    struct medians m = {.on = bench_median(t_on, reps) * 1e3,
                        .off = bench_median(t_off, reps) * 1e3,
                        .chain = bench_median(t_chain, reps) * 1e3,
                        .wide = bench_median(t_wide, reps) * 1e3};
    free(t_on); free(t_off); free(t_chain); free(t_wide);
    return m;
}

static void report(const tfc_ctx_info *info, int len, int wide, int n, int reps,
                   const struct medians *m)
{
    int workers = info->n_cpu_workers + info->n_cuda_workers + info->n_opencl_workers;
    /* the wide work alone keeps every worker busy: it is m_wide * workers of work */
    double spread = m->chain / workers + m->wide, bound = spread > m->chain ? spread : m->chain;
    printf("# priority: chain of %d matmuls [%d,%d] beside %d independent ones; scheduler %s "
           "(priorities [%d, %d]), %d CPU workers; median of %d interleaved runs\n",
           len, n, n, wide, info->sched_policy, info->min_priority, info->max_priority,
           info->n_cpu_workers, reps);
    printf("%-26s %10s\n", "run", "ms");
    printf("%-26s %10.2f\n", "priorities on", m->on);
    printf("%-26s %10.2f\n", "priorities off", m->off);
    printf("%-26s %10.2f\n", "chain alone", m->chain);
    printf("%-26s %10.2f\n", "wide work alone", m->wide);
    printf("%-26s %10.2f\n", "bound max(c, c/P + w)", bound);
    printf("off/on %.2f\n", m->off / m->on);
}

int main(int argc, char **argv)
{
    int len = argc > 1 ? atoi(argv[1]) : 200, wide = argc > 2 ? atoi(argv[2]) : 200;
    int n = argc > 3 ? atoi(argv[3]) : 256, reps = argc > 4 ? atoi(argv[4]) : 9;
    if (len < 1 || wide < 1 || n < 1 || reps < 1) {
        fprintf(stderr, "usage: priority [chain_len] [wide] [n] [repeats]\n");
        return 2;
    }
    setenv("STARPU_SCHED", "dmdas", 0);
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "%s\n", tfc_errmsg());
        return 1;
    }
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);

    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_value *eye, *ones;
    tfc_tensor **targets = build(g, n, len, wide, &eye, &ones);
    if (tfc_graph_status(g)) {
        fprintf(stderr, "%s\n", tfc_graph_errmsg(g));
        return 1;
    }

    tfc_session *on, *off;
    if (tfc_session_create(ctx, g, &on) || tfc_session_create(ctx, g, &off)) {
        fprintf(stderr, "%s\n", tfc_errmsg());
        return 1;
    }
    tfc_session_set_priorities(on, 1);
    tfc_session_set_priorities(off, 0);
    tfc_session_set_passes(on, 0); /* the wide matmuls are identical: CSE would merge them */
    tfc_session_set_passes(off, 0);
    struct medians m = measure(on, off, targets, wide, reps);
    report(&info, len, wide, n, reps, &m);
    free(targets);
    tfc_session_destroy(on);
    tfc_session_destroy(off);
    tfc_value_destroy(eye);
    tfc_value_destroy(ones);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    return 0;
}
