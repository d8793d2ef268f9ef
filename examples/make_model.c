/* make_model.c: builds a small model store and data files for the `tfc` tool (and its test):
 * a 16-16-4 ReLU network with Adam and a global step, classifying 4x4 synthetic "images"
 * whose bright quadrant is the class. Nothing is trained here: `tfc train` does that.
 *
 *   make_model DIR
 *
 * writes into DIR (which must exist):
 *   model.db          graph, "train" signature (feeds images and labels; loss; metric
 *                     accuracy; train_op train) and "predict" signature (feed images; outputs
 *                     probabilities and predict/class), no checkpoint
 *   predict-only.db   the same graph with the "predict" signature only
 *   train-images.idx  uint8 [1024, 4, 4] (idx; converted by the tool to float32 [-1, 16])
 *   train-labels.idx  uint8 [1024] (converted to int32)
 *   test-x.npy        float32 [256, 16], pixels already in [0, 1]
 *   test-y.npy        int64 [256] (converted to int32)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tfc-starpu/tfc.h>

#define N_TRAIN 1024
#define N_TEST 256

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng(void)
{
    /* xorshift64*: deterministic data on every machine */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

/* One example: pixels in [0, 128) plus 40..80 on the quadrant of the class (noisy enough that
 * the curves take a few epochs to flatten). */
static void example(uint8_t *px, uint8_t *label)
{
    int c = (int)(rng() % 4);
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) {
            int quadrant = (y / 2) * 2 + x / 2, v = (int)(rng() % 128);
            if (quadrant == c) v += 40 + (int)(rng() % 41);
            px[y * 4 + x] = (uint8_t)v;
        }
    *label = (uint8_t)c;
}

static int write_idx(const char *path, int rank, const uint32_t *dims, const void *data,
                     size_t bytes)
{
    FILE *f = fopen(path, "wb");
    if (!f) return perror(path), -1;
    unsigned char hdr[4] = {0, 0, 0x08, (unsigned char)rank};
    fwrite(hdr, 1, 4, f);
    for (int i = 0; i < rank; i++) {
        unsigned char d[4] = {(unsigned char)(dims[i] >> 24), (unsigned char)(dims[i] >> 16),
                              (unsigned char)(dims[i] >> 8), (unsigned char)dims[i]};
        fwrite(d, 1, 4, f);
    }
    fwrite(data, 1, bytes, f);
    if (fclose(f)) return perror(path), -1;
    return 0;
}

static int write_data(const char *dir)
{
    static uint8_t px[N_TRAIN * 16], labels[N_TRAIN];
    static float tx[N_TEST * 16];
    static int64_t ty[N_TEST];
    char path[4096];
    for (int i = 0; i < N_TRAIN; i++) example(px + i * 16, labels + i);
    snprintf(path, sizeof path, "%s/train-images.idx", dir);
    if (write_idx(path, 3, (uint32_t[]){N_TRAIN, 4, 4}, px, sizeof px)) return -1;
    snprintf(path, sizeof path, "%s/train-labels.idx", dir);
    if (write_idx(path, 1, (uint32_t[]){N_TRAIN}, labels, sizeof labels)) return -1;
    for (int i = 0; i < N_TEST; i++) {
        uint8_t p[16], l;
        example(p, &l);
        for (int k = 0; k < 16; k++) tx[i * 16 + k] = (float)p[k] / 255.0f;
        ty[i] = l;
    }
    tfc_value *vx, *vy;
    tfc_value_wrap(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){N_TEST, 16}), tx, &vx);
    tfc_value_wrap(TFC_INT64, tfc_shape_of(1, (int64_t[]){N_TEST}), ty, &vy);
    snprintf(path, sizeof path, "%s/test-x.npy", dir);
    tfc_status st = tfc_npy_write(path, vx);
    snprintf(path, sizeof path, "%s/test-y.npy", dir);
    if (!st) st = tfc_npy_write(path, vy);
    tfc_value_destroy(vx);
    tfc_value_destroy(vy);
    if (st) return fprintf(stderr, "make_model: %s\n", tfc_errmsg()), -1;
    return 0;
}

static tfc_tensor *dense(tfc_graph *g, const char *name, tfc_tensor *x, int64_t in, int64_t out,
                         uint64_t seed)
{
    char w[64], b[64];
    snprintf(w, sizeof w, "%s/kernel", name);
    snprintf(b, sizeof b, "%s/bias", name);
    tfc_tensor *kernel = tfc_variable(g, w, TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){in, out}),
                                      tfc_init_glorot_uniform(seed));
    tfc_tensor *bias = tfc_variable(g, b, TFC_FLOAT32, tfc_shape_of(1, &out), tfc_init_zeros());
    return tfc_bias_add(g, tfc_matmul(g, x, kernel, 0, 0), bias);
}

static int save(const char *path, tfc_graph *g, int with_train)
{
    const char *feeds[2] = {"images", "labels"}, *metrics[1] = {"accuracy"};
    const char *outputs[2] = {"probabilities", "predict/class"};
    tfc_signature train = {.n_feeds = 2, .feeds = feeds, .n_metrics = 1, .metrics = metrics,
                           .loss = "loss", .train_op = "train"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 2, .outputs = outputs};
    tfc_store *st;
    unlink(path);
    if (tfc_store_open(path, TFC_STORE_CREATE, &st))
        return fprintf(stderr, "make_model: %s\n", tfc_errmsg()), -1;
    if (tfc_store_save_graph(st, g) ||
        (with_train && tfc_store_set_signature(st, "train", &train)) ||
        tfc_store_set_signature(st, "predict", &predict)) {
        fprintf(stderr, "make_model: %s\n", tfc_store_errmsg(st));
        tfc_store_close(st);
        return -1;
    }
    tfc_store_close(st);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: make_model DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    if (write_data(dir)) return 1;

    tfc_graph *g;
    if (tfc_graph_create(&g)) return fprintf(stderr, "make_model: %s\n", tfc_errmsg()), 1;
    tfc_graph_set_seed(g, 7);
    tfc_tensor *x = tfc_placeholder(g, "images", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){-1, 16}));
    tfc_tensor *y = tfc_placeholder(g, "labels", TFC_INT32, tfc_shape_of(1, (int64_t[]){-1}));
    tfc_tensor *h = tfc_relu(g, dense(g, "hidden", x, 16, 16, 1));
    tfc_tensor *logits = dense(g, "logits", h, 16, 4, 2);
    tfc_tensor *loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, y), 0,
                                       NULL, 0);
    tfc_tensor *cls = tfc_argmax(g, logits, 1);
    tfc_tensor *correct = tfc_cast(g, tfc_equal(g, tfc_cast(g, cls, TFC_INT32), y), TFC_FLOAT32);
    tfc_tensor *accuracy = tfc_reduce_mean(g, correct, 0, NULL, 0);
    /* the probabilities go through a split and a concat (an edge from output 1), and the
     * class waits for them (a control edge), so that `tfc dot` has both kinds to draw */
    tfc_tensor *halves[2] = {NULL, NULL}, *probs = NULL;
    if (!tfc_split(g, logits, 2, 1, halves))
        probs = tfc_softmax(g, tfc_concat(g, 2, halves, 1), -1);
    if (!probs || tfc_tensor_add_control_input(cls, probs)) probs = NULL;
    tfc_tensor *vars[4];
    const char *names[4] = {"hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias"};
    for (int i = 0; i < 4; i++) vars[i] = tfc_graph_find(g, names[i]);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, 0.02);
    tfc_tensor *train = tfc_minimize(g, loss, 4, vars, &adam, tfc_global_step(g));
    tfc_tensor_set_name(loss, "loss");
    tfc_tensor_set_name(accuracy, "accuracy");
    tfc_tensor_set_name(probs, "probabilities");
    tfc_tensor_set_name(cls, "predict/class");
    tfc_tensor_set_name(train, "train");
    if (tfc_graph_status(g) || !probs) {
        fprintf(stderr, "make_model: %s\n", tfc_graph_status(g) ? tfc_graph_errmsg(g) : tfc_errmsg());
        tfc_graph_destroy(g);
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.db", dir);
    int rc = save(path, g, 1);
    snprintf(path, sizeof path, "%s/predict-only.db", dir);
    if (!rc) rc = save(path, g, 0);
    tfc_graph_destroy(g);
    if (rc) return 1;
    printf("wrote %s/model.db, %s/predict-only.db and the data files\n", dir, dir);
    return 0;
}
