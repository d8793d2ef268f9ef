/* softmax_rows.c: the CPU kernels of a classifier's output over many classes: the loss
 * (sparse softmax cross-entropy from float32 logits) and the softmax its gradient computes, on
 * [rows, classes] logits. Each run's loss and softmax tasks are timed from the session's task
 * records (StarPU's profiling: the kernel alone, not the run around it); medians of RUNS runs
 * after 20 of warm-up, with the run's wall time beside them.
 *   softmax_rows [ROWS [CLASSES [RUNS]]]     (default 128 1000 400; STARPU_NCPU=1 advised) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/tfc.h"
#include "benchutil.h"

/* The measured time of the task of node `name` in the last run's records (-1: none). */
static double task_us(tfc_session *s, const char *name)
{
    const tfc_task_record *r;
    int n = tfc_session_last_records(s, &r);
    for (int i = 0; i < n; i++)
        if (r[i].node && !strcmp(r[i].node, name)) return r[i].end_us - r[i].start_us;
    return -1;
}

int main(int argc, char **argv)
{
    int rows = argc > 1 ? atoi(argv[1]) : 128, cls = argc > 2 ? atoi(argv[2]) : 1000;
    int runs = argc > 3 ? atoi(argv[3]) : 400;
    if (rows < 1 || cls < 1 || runs < 1) {
        fprintf(stderr, "usage: softmax_rows [ROWS [CLASSES [RUNS]]]\n");
        return 2;
    }
    tfc_ctx *ctx;
    tfc_graph *g;
    tfc_session *s;
    if (tfc_ctx_create(&ctx) || tfc_graph_create(&g)) {
        fprintf(stderr, "softmax_rows: %s\n", tfc_errmsg());
        return 1;
    }
    tfc_shape xs = tfc_shape_of(2, (int64_t[]){rows, cls});
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, xs);
    tfc_tensor *y = tfc_placeholder(g, "y", TFC_INT32, tfc_shape_of(1, (int64_t[]){rows}));
    tfc_tensor *out[2] = {tfc_sparse_softmax_cross_entropy(g, x, y), tfc_softmax(g, x, 1)};
    if (!out[0] || !out[1] || tfc_tensor_set_name(out[0], "loss") ||
        tfc_tensor_set_name(out[1], "probs") || tfc_session_create(ctx, g, &s) ||
        tfc_session_set_profiling(s, 1)) {
        fprintf(stderr, "softmax_rows: %s\n", tfc_graph_errmsg(g));
        return 1;
    }
    tfc_value *xv, *yv, *got[2];
    tfc_value_create(TFC_FLOAT32, xs, &xv);
    tfc_value_create(TFC_INT32, tfc_shape_of(1, (int64_t[]){rows}), &yv);
    float *xp = tfc_value_data(xv);
    int32_t *yp = tfc_value_data(yv);
    for (int64_t i = 0; i < (int64_t)rows * cls; i++) xp[i] = (float)(i * 7919 % 1000) / 100 - 5;
    for (int i = 0; i < rows; i++) yp[i] = i % cls;
    tfc_tensor *ft[] = {x, y};
    tfc_value *fv[] = {xv, yv};
    double *t_run = malloc(sizeof(double) * (size_t)runs);
    double *t_loss = malloc(sizeof(double) * (size_t)runs);
    double *t_soft = malloc(sizeof(double) * (size_t)runs);
    double loss0 = NAN;
    for (int k = -20; k < runs; k++) {
        double t0 = bench_now();
        if (tfc_session_run(s, 2, ft, fv, 2, out, got, 0, NULL)) {
            fprintf(stderr, "softmax_rows: %s\n", tfc_session_errmsg(s));
            return 1;
        }
        double t = bench_now() - t0;
        loss0 = ((float *)tfc_value_data(got[0]))[0];
        tfc_value_destroy(got[0]);
        tfc_value_destroy(got[1]);
        if (k < 0) continue;
        t_run[k] = t * 1e6;
        t_loss[k] = task_us(s, "loss");
        t_soft[k] = task_us(s, "probs");
    }
    double load[3];
    bench_load_average(load);
    printf("softmax_rows [%d, %d]: loss task %.1f us, softmax task %.1f us, run %.1f us "
           "(medians of %d; loss[0] %.6f; load average %.2f)\n", rows, cls,
           bench_median(t_loss, runs), bench_median(t_soft, runs), bench_median(t_run, runs),
           runs, loss0, load[0]);
    free(t_run), free(t_loss), free(t_soft);
    tfc_value_destroy(xv);
    tfc_value_destroy(yv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    return 0;
}
