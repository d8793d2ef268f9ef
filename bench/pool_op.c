/* pool_op.c: the CNN's two 2x2 stride-2 max pools with indices (issue 12: [B, 32, 28, 28] and
 * [B, 64, 14, 14], float32) and their gradients (max_pool_grad), each one task (tiling off) of
 * one session run, timed by the task records (the kernel alone, not the run around it). After
 * warm-up runs, the fastest of the repeats: on a shared machine the minimum is what the kernel
 * costs, the rest is other processes taking the core. Lines are machine-readable:
 *   pool_op layer=pool1 op=max_pool batch=128 min_us=... median_us=...
 *
 *   pool_op [--batch B] [--repeats N] [--warmup N]
 * It runs with STARPU_NCPU=1 unless the environment sets it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/tfc.h"
#include "benchutil.h"

/* The task time of node `name` in the session's last run, or -1. */
static double task_us(tfc_session *s, const char *name)
{
    const tfc_task_record *r = NULL;
    int n = tfc_session_last_records(s, &r);
    for (int i = 0; i < n; i++)
        if (r[i].node && strcmp(r[i].node, name) == 0) return r[i].end_us - r[i].start_us;
    return -1;
}

/* One layer: y, idx = max_pool(x); dx = max_pool_grad(dy, idx, x); prints both ops' times. */
static int run_layer(tfc_ctx *ctx, const char *layer, int64_t batch, int64_t c, int64_t hw,
                     int repeats, int warmup)
{
    int64_t xd[4] = {batch, c, hw, hw}, yd[4] = {batch, c, hw / 2, hw / 2};
    int64_t nx = batch * c * hw * hw, ny = nx / 4;
    tfc_graph *g = NULL;
    if (tfc_graph_create(&g)) return -1;
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(4, xd));
    tfc_tensor *dy = tfc_placeholder(g, "dy", TFC_FLOAT32, tfc_shape_of(4, yd)), *idx = NULL;
    tfc_pool_params p = {.n_spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
    tfc_tensor *y = tfc_max_pool(g, x, &p, &idx);
    tfc_tensor *in[3] = {dy, idx, x};
    tfc_tensor *dx = tfc_op(g, "max_pool_grad", 3, in, NULL, NULL, 0);
    if (tfc_graph_status(g)) {
        fprintf(stderr, "pool_op: %s\n", tfc_graph_errmsg(g));
        tfc_graph_destroy(g);
        return -1;
    }
    float *xb = malloc(sizeof(float) * (size_t)nx), *db = malloc(sizeof(float) * (size_t)ny);
    double *t = malloc(sizeof(double) * 2 * (size_t)repeats);
    tfc_value *xv = NULL, *dv = NULL;
    tfc_session *s = NULL;
    int rc = -1;
    if (!xb || !db || !t) goto out;
    for (int64_t i = 0; i < nx; i++) xb[i] = (float)((i * 2654435761u) % 1000) / 7.0f; /* ties */
    for (int64_t i = 0; i < ny; i++) db[i] = (float)(i % 13) - 6.0f;
    if (tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(4, xd), xb, &xv) ||
        tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(4, yd), db, &dv) ||
        tfc_session_create(ctx, g, &s) || tfc_session_set_tiling(s, 0, 0) ||
        tfc_session_set_profiling(s, 1))
        goto out;
    tfc_tensor *ft[2] = {x, dy}, *fetch[2] = {y, dx};
    tfc_value *fv[2] = {xv, dv};
    for (int r = -warmup; r < repeats; r++) {
        tfc_value *got[2] = {NULL, NULL};
        if (tfc_session_run(s, 2, ft, fv, 2, fetch, got, 0, NULL)) {
            fprintf(stderr, "pool_op: %s\n", tfc_session_errmsg(s));
            goto out;
        }
        tfc_value_destroy(got[0]), tfc_value_destroy(got[1]);
        if (r < 0) continue;
        t[r] = task_us(s, tfc_tensor_name(y));
        t[repeats + r] = task_us(s, tfc_tensor_name(dx));
    }
    for (int k = 0; k < 2; k++) {
        double *v = t + k * repeats;
        printf("pool_op layer=%s op=%s batch=%lld min_us=%.1f median_us=%.1f\n", layer,
               k ? "max_pool_grad" : "max_pool", (long long)batch, bench_quantile(v, repeats, 0),
               bench_median(v, repeats));
    }
    rc = 0;
out:
    tfc_session_destroy(s);
    tfc_value_destroy(xv), tfc_value_destroy(dv);
    free(xb), free(db), free(t);
    tfc_graph_destroy(g);
    return rc;
}

int main(int argc, char **argv)
{
    int64_t batch = 128;
    int repeats = 25, warmup = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batch")) batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else break;
    }
    if (batch < 1 || repeats < 1 || warmup < 0) {
        fprintf(stderr, "usage: pool_op [--batch B>=1] [--repeats N>=1] [--warmup N>=0]\n");
        return 2;
    }
    setenv("STARPU_NCPU", "1", 0);
    tfc_ctx *ctx = NULL;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "pool_op: %s\n", tfc_errmsg());
        return 1;
    }
    int rc = run_layer(ctx, "pool1", batch, 32, 28, repeats, warmup) ||
             run_layer(ctx, "pool2", batch, 64, 14, repeats, warmup);
    tfc_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
