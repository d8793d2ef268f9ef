/* flag_model.c: a model store for tests/test_tool.sh that shows what the training flag
 * (tfc_training_flag) holds in each run: its "train" signature's metric flag_seen is the flag
 * itself, so `tfc train` must log 1 (it feeds the flag) and `tfc eval` and validation 0 (the
 * default). The model is a one-weight regression fed x.
 *
 *   flag_model DIR      writes DIR/flag.db and DIR/x.npy (float32 [8, 1])
 */
#include <stdio.h>
#include <tfc-starpu/tfc.h>

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: flag_model DIR\n"), 2;
    char path[1024];
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 1}));
    tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){1}),
                                 tfc_init_zeros());
    tfc_tensor *err = tfc_sub(g, tfc_mul(g, x, w), tfc_scalar(g, TFC_FLOAT32, 1));
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_square(g, err), 0, NULL, 0);
    tfc_tensor *seen = tfc_identity(g, tfc_training_flag(g));
    tfc_optimizer sgd = tfc_optimizer_default(TFC_OPT_SGD, 0.1);
    tfc_tensor *train = tfc_minimize(g, loss, 0, NULL, &sgd, tfc_global_step(g));
    tfc_tensor_set_name(loss, "loss");
    tfc_tensor_set_name(seen, "flag_seen");
    tfc_tensor_set_name(train, "train");
    if (tfc_graph_status(g)) return fprintf(stderr, "flag_model: %s\n", tfc_graph_errmsg(g)), 1;

    const char *feeds[1] = {"x"}, *metrics[1] = {"flag_seen"};
    tfc_signature sig = {.n_feeds = 1, .feeds = feeds, .n_metrics = 1, .metrics = metrics,
                         .loss = "loss", .train_op = "train"};
    tfc_store *st;
    snprintf(path, sizeof path, "%s/flag.db", argv[1]);
    if (tfc_store_open(path, TFC_STORE_CREATE, &st))
        return fprintf(stderr, "flag_model: %s\n", tfc_errmsg()), 1;
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "train", &sig))
        return fprintf(stderr, "flag_model: %s\n", tfc_store_errmsg(st)), 1;
    tfc_store_close(st);

    float xs[8] = {0.5f, 1, 1.5f, 2, -0.5f, -1, 0.25f, 0.75f};
    tfc_value *xv;
    snprintf(path, sizeof path, "%s/x.npy", argv[1]);
    if (tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){8, 1}), xs, &xv) ||
        tfc_npy_write(path, xv))
        return fprintf(stderr, "flag_model: %s\n", tfc_errmsg()), 1;
    tfc_value_destroy(xv);
    tfc_graph_destroy(g);
    return 0;
}
