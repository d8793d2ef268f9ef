/* two_layer.c: the forward pass of a two-layer network, softmax(relu(x W1 + b1) W2 + b2), with
 * Glorot-initialized weights, run on a batch whose size is known only at run time. Prints the
 * class probabilities of the first rows and StarPU's worker report. */
#include <stdio.h>
#include <stdlib.h>
#include <tfc-starpu/tfc.h>

int main(int argc, char **argv)
{
    int batch = argc > 1 ? atoi(argv[1]) : 8;
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "two_layer: %s\n", tfc_errmsg());
        return 1;
    }
    char report[2048];
    tfc_ctx_describe(ctx, report, sizeof report);
    fputs(report, stdout);

    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, 2024);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 16}));
    tfc_tensor *w1 = tfc_variable(g, "w1", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){16, 32}),
                                  tfc_init_glorot_uniform(1));
    tfc_tensor *b1 = tfc_variable(g, "b1", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){32}),
                                  tfc_init_zeros());
    tfc_tensor *w2 = tfc_variable(g, "w2", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){32, 4}),
                                  tfc_init_glorot_uniform(2));
    tfc_tensor *b2 = tfc_variable(g, "b2", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){4}),
                                  tfc_init_zeros());
    tfc_tensor *h = tfc_relu(g, tfc_bias_add(g, tfc_matmul(g, x, w1, 0, 0), b1));
    tfc_tensor *probs = tfc_softmax(g, tfc_bias_add(g, tfc_matmul(g, h, w2, 0, 0), b2), -1);
    if (tfc_graph_status(g)) {
        fprintf(stderr, "two_layer: %s\n", tfc_graph_errmsg(g));
        return 1;
    }
    tfc_session *s;
    tfc_session_create(ctx, g, &s);
    tfc_session_init_variables(s);

    tfc_value *xv, *pv;
    tfc_value_create(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){batch, 16}), &xv);
    float *xd = tfc_value_data(xv);
    for (int i = 0; i < batch * 16; i++) xd[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    if (tfc_session_run(s, 1, &x, &xv, 1, &probs, &pv, 0, NULL)) {
        fprintf(stderr, "two_layer: %s\n", tfc_session_errmsg(s));
        return 1;
    }
    for (int r = 0; r < batch && r < 4; r++)
        printf("row %d: %.4f %.4f %.4f %.4f\n", r, tfc_value_get(pv, r * 4),
               tfc_value_get(pv, r * 4 + 1), tfc_value_get(pv, r * 4 + 2),
               tfc_value_get(pv, r * 4 + 3));
    tfc_value_destroy(pv);
    tfc_value_destroy(xv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    return 0;
}
