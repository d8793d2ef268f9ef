/* feeds_model.c: a model store for tests/test_tool_feeds.sh whose "predict" signature mixes a
 * batched feed with whole ones: x float32 [-1, 3] (batched), s a float32 scalar and v float32
 * [2] (no unknown leading dimension: passed whole); outputs y = x * s ([-1, 3]) and z = v + s
 * ([2]).
 *
 *   feeds_model DIR      writes DIR/feeds.db, DIR/x.npy [4, 3] (1..12), DIR/s.npy (2, rank 0),
 *                        DIR/s1.npy ([1]: 2), DIR/v.npy [10, 20], DIR/v3.npy [3] and
 *                        DIR/vi.npy (int32 [10, 20]), DIR/one.npy and DIR/five.npy (float32
 *                        scalars 1 and 5)
 */
#include <stdio.h>
#include <tfc-starpu/tfc.h>

static int write_npy(const char *dir, const char *name, enum tfc_dtype dt, int rank,
                     const int64_t *dims, const void *data)
{
    char path[1024];
    tfc_value *v;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (tfc_value_from_data(dt, tfc_shape_of(rank, dims), data, &v) || tfc_npy_write(path, v))
        return fprintf(stderr, "feeds_model: %s: %s\n", name, tfc_errmsg()), 1;
    tfc_value_destroy(v);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: feeds_model DIR\n"), 2;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 3}));
    tfc_tensor *s = tfc_placeholder(g, "s", TFC_FLOAT32, tfc_shape_of(0, NULL));
    tfc_tensor *v = tfc_placeholder(g, "v", TFC_FLOAT32, tfc_shape_of(1, (int64_t[]){2}));
    tfc_tensor_set_name(tfc_mul(g, x, s), "y");
    tfc_tensor_set_name(tfc_add(g, v, s), "z");
    if (tfc_graph_status(g)) return fprintf(stderr, "feeds_model: %s\n", tfc_graph_errmsg(g)), 1;

    const char *feeds[3] = {"x", "s", "v"}, *outputs[2] = {"y", "z"};
    tfc_signature sig = {.n_feeds = 3, .feeds = feeds, .n_outputs = 2, .outputs = outputs};
    char path[1024];
    tfc_store *st;
    snprintf(path, sizeof path, "%s/feeds.db", argv[1]);
    if (tfc_store_open(path, TFC_STORE_CREATE, &st))
        return fprintf(stderr, "feeds_model: %s\n", tfc_errmsg()), 1;
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "predict", &sig))
        return fprintf(stderr, "feeds_model: %s\n", tfc_store_errmsg(st)), 1;
    tfc_store_close(st);
    tfc_graph_destroy(g);

    float xs[12], two = 2, one = 1, five = 5, vs[2] = {10, 20}, v3[3] = {1, 2, 3};
    int32_t vi[2] = {10, 20};
    for (int i = 0; i < 12; i++) xs[i] = (float)(i + 1);
    return write_npy(argv[1], "x.npy", TFC_FLOAT32, 2, (int64_t[]){4, 3}, xs) ||
           write_npy(argv[1], "s.npy", TFC_FLOAT32, 0, NULL, &two) ||
           write_npy(argv[1], "s1.npy", TFC_FLOAT32, 1, (int64_t[]){1}, &two) ||
           write_npy(argv[1], "v.npy", TFC_FLOAT32, 1, (int64_t[]){2}, vs) ||
           write_npy(argv[1], "v3.npy", TFC_FLOAT32, 1, (int64_t[]){3}, v3) ||
           write_npy(argv[1], "vi.npy", TFC_INT32, 1, (int64_t[]){2}, vi) ||
           write_npy(argv[1], "one.npy", TFC_FLOAT32, 0, NULL, &one) ||
           write_npy(argv[1], "five.npy", TFC_FLOAT32, 0, NULL, &five);
}
