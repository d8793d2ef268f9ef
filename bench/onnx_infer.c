/* onnx_infer.c: our side of bench/onnx_vs_ort.py. Imports an ONNX model with tfc_onnx_import
 * (its first input must be float32 [-1, features...], its first output is fetched) and times
 * inference on a batch of B rows: W warm-up runs (plans, perfmodels), then N timed runs; prints
 *   tfc onnx_infer batch=B import_ms=... ms_median=... ms_min=... runs=N
 * With `mlp`, writes a dense ReLU MLP of the given layer sizes (random weights) as an ONNX
 * model through tfc_onnx_export instead: the large model whose import the benchmark times.
 *
 *   onnx_infer run MODEL.onnx [BATCH [RUNS [WARMUP [nopin]]]]   (defaults 128 50 5)
 * nopin: without the TFC_PASS_PIN_CHAINS plan pass (the A/B comparison of that pass).
 *   onnx_infer mlp OUT.onnx SIZE,SIZE,...                  (e.g. 784,4096,4096,2048,10)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tfc-starpu/tfc.h>
#include "benchutil.h"

static int die(const char *what, const char *msg)
{
    fprintf(stderr, "onnx_infer: %s: %s\n", what, msg);
    return 1;
}

static int run(const char *path, int64_t batch, int runs, int warmup, int pin)
{
    tfc_graph *g;
    tfc_onnx_model *m;
    tfc_graph_create(&g);
    double t0 = bench_now();
    if (tfc_onnx_import(g, path, NULL, &m)) return die(path, tfc_graph_errmsg(g));
    double import_ms = (bench_now() - t0) * 1e3;
    tfc_tensor *x = tfc_graph_find(g, m->predict->feeds[0]);
    tfc_tensor *y = tfc_graph_find(g, m->predict->outputs[0]);
    tfc_shape s = tfc_tensor_shape(x);
    if (tfc_tensor_dtype(x) != TFC_FLOAT32 || s.rank < 1 || s.dims[0] != -1)
        return die(path, "the first input must be float32 [-1, ...]");
    s.dims[0] = batch;
    tfc_value *xv;
    tfc_value_create(TFC_FLOAT32, s, &xv);
    float *p = tfc_value_data(xv);
    uint32_t r = 12345;
    for (int64_t i = 0; i < tfc_value_numel(xv); i++) {
        r = r * 1664525u + 1013904223u;
        p[i] = (float)(r >> 8) / (float)(1u << 24); /* pixels in [0, 1) */
    }
    tfc_ctx *ctx;
    tfc_session *sess;
    if (tfc_ctx_create(&ctx)) return die("runtime", tfc_errmsg());
    if (tfc_session_create(ctx, g, &sess)) return die("session", tfc_errmsg());
    if (!pin && tfc_session_set_passes(sess, TFC_PASS_ALL & ~(unsigned)TFC_PASS_PIN_CHAINS))
        return die("session", tfc_session_errmsg(sess));
    double *ms = calloc((size_t)runs + 1, sizeof *ms);
    for (int i = 0; i < warmup + runs; i++) {
        tfc_value *yv;
        double t = bench_now();
        if (tfc_session_run(sess, 1, &x, &xv, 1, &y, &yv, 0, NULL))
            return die("run", tfc_session_errmsg(sess));
        if (i >= warmup) ms[i - warmup] = (bench_now() - t) * 1e3;
        tfc_value_destroy(yv);
    }
    double best = ms[0];
    for (int i = 1; i < runs; i++) best = ms[i] < best ? ms[i] : best;
    printf("tfc onnx_infer batch=%lld import_ms=%.2f ms_median=%.4f ms_min=%.4f runs=%d\n",
           (long long)batch, import_ms, bench_median(ms, runs), best, runs);
    free(ms);
    tfc_value_destroy(xv);
    tfc_session_destroy(sess);
    tfc_ctx_destroy(ctx);
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g);
    return 0;
}

static int make_mlp(const char *path, const char *sizes)
{
    int64_t n[16];
    int k = 0;
    for (const char *c = sizes; *c && k < 16; c = strchr(c, ',') ? strchr(c, ',') + 1 : "")
        n[k++] = strtoll(c, NULL, 10);
    if (k < 2) return die(sizes, "at least two layer sizes, comma-separated");
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *h = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, n[0]}));
    for (int i = 1; i < k; i++) {
        char name[32];
        snprintf(name, sizeof name, "dense%d", i);
        h = tfc_dense(g, h, n[i], i + 1 < k ? TFC_ACT_RELU : TFC_ACT_NONE, name);
    }
    tfc_tensor_set_name(h, "logits");
    if (tfc_graph_status(g)) return die("graph", tfc_graph_errmsg(g));
    tfc_ctx *ctx;
    tfc_session *s;
    if (tfc_ctx_create(&ctx) || tfc_session_create(ctx, g, &s) || tfc_session_init_variables(s))
        return die("session", tfc_errmsg());
    const char *feeds[1] = {"images"}, *outs[1] = {"logits"};
    tfc_signature sig = {.n_feeds = 1, .feeds = feeds, .n_outputs = 1, .outputs = outs};
    tfc_onnx_export_options o = {.variables = s};
    double t0 = bench_now();
    if (tfc_onnx_export(g, &sig, &o, path)) return die(path, tfc_errmsg());
    printf("tfc onnx_infer wrote %s export_ms=%.1f\n", path, (bench_now() - t0) * 1e3);
    tfc_session_destroy(s);
    tfc_ctx_destroy(ctx);
    tfc_graph_destroy(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "run"))
        return run(argv[2], argc > 3 ? atoll(argv[3]) : 128, argc > 4 ? atoi(argv[4]) : 50,
                   argc > 5 ? atoi(argv[5]) : 5, !(argc > 6 && !strcmp(argv[6], "nopin")));
    if (argc == 4 && !strcmp(argv[1], "mlp")) return make_mlp(argv[2], argv[3]);
    fprintf(stderr, "usage: onnx_infer run MODEL.onnx [BATCH [RUNS [WARMUP [nopin]]]]\n"
                    "       onnx_infer mlp OUT.onnx SIZE,SIZE,...\n");
    return 2;
}
