/* loop_model.c: a model store for tests/test_cflow_train.sh whose loss is computed by a
 * while_loop: a small recurrent network reads each row of x ([rows, 4, 3]) step by step,
 * h' = tanh(h W + x_t U + b), and the loss pulls the last h towards 0.5. Its "train" signature
 * runs tfc_minimize's step, so `tfc train` runs the loop and its gradient loop from the store,
 * without this code.
 *
 *   loop_model DIR [sgd|adam]   writes DIR/loop.db and DIR/x.npy (float32 [16, 4, 3]); the
 *                               optimizer is SGD (default) or Adam (slots in the checkpoints)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <tfc-starpu/tfc.h>

struct rnn { tfc_tensor *w, *u, *b, *xt; };

static tfc_status below4(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    (void)arg;
    out[0] = tfc_less(g, v[0], tfc_scalar(g, TFC_INT32, 4));
    return TFC_OK;
}

static tfc_status step(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct rnn *a = arg;
    tfc_tensor *x = tfc_gather(g, a->xt, v[0]); /* [rows, 3]: step v[0] of every row */
    tfc_tensor *z = tfc_add(g, tfc_matmul(g, v[1], a->w, 0, 0), tfc_matmul(g, x, a->u, 0, 0));
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    out[1] = tfc_tanh(g, tfc_add(g, z, a->b));
    return TFC_OK;
}

int main(int argc, char **argv)
{
    int adam = argc == 3 && !strcmp(argv[2], "adam");
    if (argc < 2 || argc > 3 || (argc == 3 && !adam && strcmp(argv[2], "sgd")))
        return fprintf(stderr, "usage: loop_model DIR [sgd|adam]\n"), 2;
    char path[1024];
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){-1, 4, 3}));
    int64_t d33[2] = {3, 3}, d3 = 3, perm[3] = {1, 0, 2};
    struct rnn a = {tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(2, d33),
                                 tfc_init_uniform(-0.5, 0.5, 1)),
                    tfc_variable(g, "u", TFC_FLOAT32, tfc_shape_of(2, d33),
                                 tfc_init_uniform(-0.5, 0.5, 2)),
                    tfc_variable(g, "b", TFC_FLOAT32, tfc_shape_of(1, &d3), tfc_init_zeros()),
                    tfc_transpose(g, x, perm)};
    tfc_tensor *h0 = tfc_zeros_like(g, tfc_gather(g, a.xt, tfc_scalar(g, TFC_INT32, 0)));
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), h0}, *r[2];
    if (tfc_while_loop(g, "rnn", below4, step, &a, 2, init, NULL, r))
        return fprintf(stderr, "loop_model: %s\n", tfc_graph_errmsg(g)), 1;
    tfc_tensor *err = tfc_sub(g, r[1], tfc_scalar(g, TFC_FLOAT32, 0.5));
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_square(g, err), 0, NULL, 0);
    tfc_tensor *vars[3] = {a.w, a.u, a.b};
    tfc_optimizer opt = adam ? tfc_optimizer_default(TFC_OPT_ADAM, 0.02)
                             : tfc_optimizer_default(TFC_OPT_SGD, 0.1);
    tfc_tensor *train = tfc_minimize(g, loss, 3, vars, &opt, tfc_global_step(g));
    tfc_tensor_set_name(loss, "loss");
    tfc_tensor_set_name(train, "train");
    if (tfc_graph_status(g)) return fprintf(stderr, "loop_model: %s\n", tfc_graph_errmsg(g)), 1;

    const char *feeds[1] = {"x"};
    tfc_signature sig = {.n_feeds = 1, .feeds = feeds, .loss = "loss", .train_op = "train"};
    tfc_store *st;
    snprintf(path, sizeof path, "%s/loop.db", argv[1]);
    if (tfc_store_open(path, TFC_STORE_CREATE, &st))
        return fprintf(stderr, "loop_model: %s\n", tfc_errmsg()), 1;
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "train", &sig))
        return fprintf(stderr, "loop_model: %s\n", tfc_store_errmsg(st)), 1;
    tfc_store_close(st);

    float xs[16 * 12];
    for (int i = 0; i < 16 * 12; i++) xs[i] = (float)sin(0.37 * i + 0.2);
    tfc_value *xv;
    snprintf(path, sizeof path, "%s/x.npy", argv[1]);
    if (tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(3, (int64_t[]){16, 4, 3}), xs, &xv) ||
        tfc_npy_write(path, xv))
        return fprintf(stderr, "loop_model: %s\n", tfc_errmsg()), 1;
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
    return 0;
}
