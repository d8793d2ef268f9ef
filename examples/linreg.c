/* linreg.c: linear regression y = x w + b trained by hand-written gradient descent, entirely as
 * graph nodes (the gradient of the mean squared error is written out, no autodiff): one
 * session run per step updates w and b in place with assign_sub. Prints the fitted weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <tfc-starpu/tfc.h>

#define N 256 /* examples */
#define D 3   /* features */

/* N examples of y = x true_w + true_b, x uniform in [-1, 1) from a fixed generator. */
static void make_data(float *x, float *y)
{
    const float true_w[D] = {2.0f, -3.0f, 0.5f}, true_b = 1.25f;
    unsigned seed = 42;
    for (int i = 0; i < N; i++) {
        y[i] = true_b;
        for (int j = 0; j < D; j++) {
            seed = seed * 1103515245u + 12345u;
            x[i * D + j] = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f;
            y[i] += true_w[j] * x[i * D + j];
        }
    }
}

struct model {
    tfc_tensor *x, *y;    /* placeholders: [batch, D] features, [batch, 1] targets */
    tfc_tensor *w, *b;    /* variables, zeros at first */
    tfc_tensor *loss;     /* mean squared error */
    tfc_tensor *steps[2]; /* one gradient descent step: w -= dw, b -= db */
};

static struct model build(tfc_graph *g)
{
    struct model m;
    m.x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, D}));
    m.y = tfc_placeholder(g, "y", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 1}));
    m.w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){D, 1}), tfc_init_zeros());
    m.b = tfc_variable(g, "b", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){1}), tfc_init_zeros());
    tfc_tensor *err = tfc_sub(g, tfc_bias_add(g, tfc_matmul(g, m.x, m.w, 0, 0), m.b), m.y);
    m.loss = tfc_reduce_mean(g, tfc_square(g, err), 0, NULL, 0);
    /* d loss / d w = 2/N x^T err, d loss / d b = 2 mean(err); learning rate 0.1 */
    tfc_tensor *scale = tfc_scalar(g, TFC_FLOAT32, 0.1 * 2.0 / N);
    tfc_tensor *dw = tfc_mul(g, scale, tfc_matmul(g, m.x, err, 1, 0));
    tfc_tensor *db = tfc_mul(g, scale, tfc_reduce_sum(g, err, 1, (int64_t[]){0}, 0));
    m.steps[0] = tfc_assign_sub(g, m.w, dw);
    m.steps[1] = tfc_assign_sub(g, m.b, db);
    return m;
}

/* 300 steps on the whole data set; the loss at the first and the last. 0, or 1 after printing
 * the session's error. */
static int train(tfc_session *s, struct model *m, tfc_value *xv, tfc_value *yv, double *first,
                 double *last)
{
    tfc_tensor *feeds[2] = {m->x, m->y};
    tfc_value *vals[2] = {xv, yv}, *lv = NULL;
    for (int step = 0; step < 300; step++) {
        tfc_status st = tfc_session_run(s, 2, feeds, vals, 1, &m->loss, &lv, 2, m->steps);
        if (st) {
            fprintf(stderr, "linreg: %s\n", tfc_session_errmsg(s));
            return 1;
        }
        *last = tfc_value_get(lv, 0);
        if (step == 0) *first = *last;
        tfc_value_destroy(lv);
    }
    return 0;
}

int main(void)
{
    float *x = malloc(sizeof(float) * N * D), *y = malloc(sizeof(float) * N);
    make_data(x, y);
    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) {
        fprintf(stderr, "linreg: %s\n", tfc_errmsg());
        return 1;
    }
    tfc_graph *g;
    tfc_graph_create(&g);
    struct model m = build(g);
    if (tfc_graph_status(g)) {
        fprintf(stderr, "linreg: %s\n", tfc_graph_errmsg(g));
        return 1;
    }

    tfc_session *s;
    tfc_session_create(ctx, g, &s);
    tfc_session_init_variables(s);
    tfc_value *xv, *yv;
    tfc_value_wrap(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){N, D}), x, &xv);
    tfc_value_wrap(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){N, 1}), y, &yv);
    double first = 0, last = 0;
    if (train(s, &m, xv, yv, &first, &last)) return 1;
    tfc_value *wv, *bv;
    tfc_session_read_variable(s, m.w, &wv);
    tfc_session_read_variable(s, m.b, &bv);
    printf("loss %.6f -> %.6f\nw = [%.4f, %.4f, %.4f], b = %.4f (true: [2, -3, 0.5], 1.25)\n",
           first, last, tfc_value_get(wv, 0), tfc_value_get(wv, 1), tfc_value_get(wv, 2),
           tfc_value_get(bv, 0));
    int ok = fabs(tfc_value_get(wv, 0) - 2.0) < 0.05 && fabs(tfc_value_get(bv, 0) - 1.25) < 0.05;
    tfc_value_destroy(wv);
    tfc_value_destroy(bv);
    tfc_value_destroy(xv);
    tfc_value_destroy(yv);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    free(x);
    free(y);
    printf("%s\n", ok ? "converged" : "did not converge");
    return ok ? 0 : 1;
}
