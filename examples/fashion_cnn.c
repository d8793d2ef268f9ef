/* fashion_cnn.c: the flagship CNN example. Trains the network of cnn_model.c (two 5x5
 * convolutions with 32 and 64 channels, each with ReLU and 2x2 max pooling, a 1024-unit dense
 * layer with dropout, 10 outputs; batch norm optional) with Adam on Fashion-MNIST (Debian package dataset-fashion-mnist), with a
 * progress bar per epoch (plain lines when stderr is not a terminal), then prints the test
 * accuracy and a final machine-readable line test_accuracy=0.xxxx. Training steps feed the
 * graph's training flag 1; evaluation leaves it 0.
 *
 *   fashion_cnn [--epochs N] [--max-steps N] [--seed S] [--batch B] [--lr LR] [--data DIR]
 *               [--save MODEL.db] [--dropout RATE] [--batch-norm] [--quiet]
 *
 * Defaults: 10 epochs at batch 128, Adam with the learning rate 1e-3 decayed along a cosine
 * to 2% of it. --max-steps N stops after N training steps in all (a short run for CI; the learning rate
 * then decays over those N steps). --dropout RATE (default 0.5; 0: none) drops the dense
 * layer's units in training steps; --batch-norm puts a batch norm layer before each conv ReLU.
 *
 * With --save, the model goes into a store (graph, "train" and "predict" signatures, a final
 * checkpoint, per-step metrics), which the `tfc` tool can then train further, evaluate, run,
 * draw and plot without this program.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tfc-starpu/tfc.h>
#include "cnn_model.h"
#include "mlp_model.h" /* mlp_load_fashion_mnist */

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

struct options {
    int epochs, quiet;
    int64_t batch, max_steps;     /* max_steps 0: every step of every epoch */
    struct cnn_config net;
    uint64_t seed;
    double lr;
    const char *data;
    const char *save;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "fashion_cnn: %s\n", msg);
    fprintf(stderr, "usage: fashion_cnn [--epochs N] [--max-steps N] [--seed S] [--batch B] "
                    "[--lr LR] [--data DIR] [--save MODEL.db] [--dropout RATE] [--batch-norm] "
                    "[--quiet]\n");
    return 2;
}

static int parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.epochs = 10, .batch = 128, .seed = 1, .lr = 1e-3, .data = DEFAULT_DATA,
                          .net = {.dropout = 0.5}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (!strcmp(a, "--batch-norm")) {
            o->net.batch_norm = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(NULL), -1;
        if (!v) return fprintf(stderr, "fashion_cnn: %s needs a value\n", a), usage(NULL), -1;
        errno = 0; /* out-of-range numbers are refused, not wrapped */
        if (!strcmp(a, "--epochs")) {
            long e = strtol(v, &end, 10);
            o->epochs = e > INT_MAX ? 0 : (int)e;
        }
        else if (!strcmp(a, "--max-steps")) o->max_steps = strtoll(v, &end, 10);
        else if (!strcmp(a, "--dropout")) o->net.dropout = strtod(v, &end);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--batch")) o->batch = strtoll(v, &end, 10);
        else if (!strcmp(a, "--lr")) o->lr = strtod(v, &end);
        else if (!strcmp(a, "--data")) o->data = v, end = (char *)v + strlen(v);
        else if (!strcmp(a, "--save")) o->save = v, end = (char *)v + strlen(v);
        else return fprintf(stderr, "fashion_cnn: unknown option %s\n", a), usage(NULL), -1;
        if (!end || *end || errno || o->epochs < 1 || o->batch < 1 || !(o->lr > 0) ||
            o->max_steps < 0 || !(o->net.dropout >= 0 && o->net.dropout < 1)) {
            fprintf(stderr, "fashion_cnn: %s %s: bad value (--dropout takes [0, 1), --lr a "
                            "positive number, --max-steps 0 or more, other counts 1 or more)\n",
                    a, v);
            return usage(NULL), -1;
        }
        i++;
    }
    return 0;
}

/* The graph and its signatures into a new store (the tfc tool reads them). */
static int save_model(const char *path, tfc_graph *g, tfc_store **out)
{
    tfc_store *st;
    const char *feeds[2] = {"images", "labels"}, *metrics[1] = {"accuracy"};
    const char *outputs[1] = {"probabilities"};
    tfc_signature train = {.n_feeds = 2, .feeds = feeds, .n_metrics = 1, .metrics = metrics,
                           .loss = "loss", .train_op = "train"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 1, .outputs = outputs};
    if (tfc_store_open(path, TFC_STORE_CREATE, &st))
        return fprintf(stderr, "fashion_cnn: %s\n", tfc_errmsg()), -1;
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "train", &train) ||
        tfc_store_set_signature(st, "predict", &predict)) {
        fprintf(stderr, "fashion_cnn: %s\n", tfc_store_errmsg(st));
        tfc_store_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

/* Seconds between two progress lines when stderr is not a terminal (a log file, a pipe). */
#define PLAIN_PROGRESS_EVERY_S 10.0

/* An epoch's progress on stderr: on a terminal (tty) a bar redrawn in place with \r; elsewhere
 * a plain line, with no carriage return or escape code, so that logs stay readable. */
static void progress(int tty, int epoch, int epochs, int64_t step, int64_t steps, double loss,
                     double ex_per_s, double left)
{
    if (!tty) {
        fprintf(stderr, "epoch %d/%d: step %lld/%lld, loss %.4f, %.0f ex/s, %.0f s left\n",
                epoch, epochs, (long long)step, (long long)steps, loss, ex_per_s, left);
        fflush(stderr);
        return;
    }
    char bar[31];
    int fill = (int)(30 * step / steps);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[30] = 0;
    fprintf(stderr, "\repoch %d/%d [%s] %5lld/%lld loss %.4f %7.0f ex/s %4.0fs left ", epoch,
            epochs, bar, (long long)step, (long long)steps, loss, ex_per_s, left);
    fflush(stderr);
}

/* The flagship's graph: the network of cnn_model.c, then the metrics, the predictions, and
 * Adam with the learning rate decayed along a cosine over the run, to 2% of its start. */
struct flagship {
    struct cnn_model m;
    tfc_tensor *hits;      /* correct predictions in a batch */
    tfc_tensor *train;
    tfc_value *training_on; /* float32 1: the training flag's feed in training steps */
    int64_t steps;         /* per epoch */
    int64_t total;         /* in the run: every epoch's, or --max-steps when fewer */
};

static void build(tfc_graph *g, const struct options *o, int64_t n_train, struct flagship *f)
{
    struct cnn_model *m = &f->m;
    cnn_model_build(g, TFC_UINT8, &o->net, m);
    tfc_tensor *correct = tfc_cast(
        g, tfc_equal(g, tfc_cast(g, tfc_argmax(g, m->logits, 1), TFC_INT32), m->labels_i32),
        TFC_FLOAT32);
    f->hits = tfc_reduce_sum(g, correct, 0, NULL, 0);
    tfc_tensor *accuracy = tfc_reduce_mean(g, correct, 0, NULL, 0);
    tfc_tensor *probs = tfc_softmax(g, m->logits, -1);
    f->steps = (n_train + o->batch - 1) / o->batch;
    f->total = f->steps * o->epochs;
    if (o->max_steps && o->max_steps < f->total) f->total = o->max_steps;
    tfc_tensor *global_step = tfc_global_step(g);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, o->lr);
    adam.lr_tensor = tfc_lr_cosine(g, o->lr, global_step, (double)f->total, 0.02 * o->lr);
    f->train = tfc_minimize(g, m->loss, 0, NULL, &adam, global_step); /* the trainable set */
    /* the names the store's signatures use */
    tfc_tensor_set_name(m->loss, "loss");
    tfc_tensor_set_name(accuracy, "accuracy");
    tfc_tensor_set_name(probs, "probabilities");
    tfc_tensor_set_name(f->train, "train");
}

/* One epoch's steps (`steps` of them) over the shuffled training set, with the progress bar;
 * each step's loss goes to the store when there is one. Returns the loss sum, -1 on error. */
static double train_epoch(const struct options *o, const struct flagship *f, tfc_session *s,
                          tfc_store *store, tfc_batcher *batches, int epoch, int64_t steps)
{
    tfc_tensor *feeds[3] = {f->m.images, f->m.labels, f->m.training}, *loss = f->m.loss;
    int tty = isatty(STDERR_FILENO); /* a bar every 20 steps, else a line every 10 s */
    int epochs = (int)((f->total + f->steps - 1) / f->steps);
    double t0 = now(), loss_sum = 0, last_line = t0;
    for (int64_t step = 1; step <= steps; step++) {
        tfc_value *batch[3], *lv;
        if (tfc_batcher_next(batches, batch, NULL))
            return fprintf(stderr, "fashion_cnn: %s\n", tfc_batcher_errmsg(batches)), -1;
        batch[2] = f->training_on;
        if (tfc_session_run(s, 3, feeds, batch, 1, &loss, &lv, 1, &f->train))
            return fprintf(stderr, "fashion_cnn: %s\n", tfc_session_errmsg(s)), -1;
        loss_sum += tfc_value_get(lv, 0);
        if (store)
            tfc_store_log_metric(store, (epoch - 1) * f->steps + step, "loss", tfc_value_get(lv, 0));
        tfc_value_destroy(lv);
        double tn = now();
        int due = tty ? step % 20 == 0 : tn - last_line >= PLAIN_PROGRESS_EVERY_S;
        if (!o->quiet && (due || step == steps)) {
            double dt = tn - t0, rate = (double)(step * o->batch) / dt;
            double left = dt / (double)step * (double)(steps - step);
            progress(tty, epoch, epochs, step, steps, loss_sum / (double)step, rate, left);
            last_line = tn;
        }
    }
    if (!o->quiet && tty) fprintf(stderr, "\n"); /* plain lines end with theirs */
    return loss_sum;
}

/* f->total steps over the shuffled training set, with a summary line per epoch. */
static int train(const struct options *o, const struct flagship *f, tfc_session *s,
                 tfc_store *store, tfc_value *const *sources)
{
    tfc_batcher *batches;
    if (tfc_batcher_create(2, sources, o->batch, o->seed, TFC_BATCHER_SHUFFLE, &batches))
        return fprintf(stderr, "fashion_cnn: %s\n", tfc_errmsg()), 1;
    double t_start = now();
    int epoch = 1;
    for (int64_t done = 0; done < f->total; epoch++) {
        int64_t steps = f->total - done < f->steps ? f->total - done : f->steps;
        double t0 = now(), loss_sum = train_epoch(o, f, s, store, batches, epoch, steps);
        if (loss_sum < 0) return tfc_batcher_destroy(batches), 1;
        done += steps;
        double dt = now() - t0;
        printf("epoch %d: mean loss %.4f, %lld steps, %.1f s, %.0f examples/s\n", epoch,
               loss_sum / (double)steps, (long long)steps, dt, (double)(steps * o->batch) / dt);
    }
    double train_s = now() - t_start, waited = tfc_batcher_wait_seconds(batches);
    tfc_batcher_destroy(batches);
    printf("trained %lld steps (%d epochs) in %.1f s (%.1f%% of it waiting for input)\n",
           (long long)f->total, epoch - 1, train_s, 100.0 * waited / train_s);
    return 0;
}

/* The test images classified right, counted in batches of 1000; -1 after an error. */
static double evaluate(const struct flagship *f, tfc_session *s, tfc_value *const *sources)
{
    tfc_batcher *eval;
    tfc_tensor *feeds[2] = {f->m.images, f->m.labels}, *hits = f->hits;
    double hit_count = 0;
    tfc_batcher_create(2, sources, 1000, 0, 0, &eval);
    for (int64_t i = 0; i < tfc_batcher_steps_per_epoch(eval); i++) {
        tfc_value *batch[2], *hv;
        tfc_batcher_next(eval, batch, NULL);
        if (tfc_session_run(s, 2, feeds, batch, 1, &hits, &hv, 0, NULL))
            return fprintf(stderr, "fashion_cnn: %s\n", tfc_session_errmsg(s)), -1;
        hit_count += tfc_value_get(hv, 0);
        tfc_value_destroy(hv);
    }
    tfc_batcher_destroy(eval);
    return hit_count;
}

/* The test accuracy and a final checkpoint (with the input position of the end) into the
 * store, which is closed. */
static int finish_store(const struct options *o, const struct flagship *f, tfc_session *s,
                        tfc_store *store, double accuracy)
{
    tfc_input_position pos = {o->seed, f->total / f->steps, f->total % f->steps};
    tfc_store_log_metric(store, f->total, "test_accuracy", accuracy);
    if (tfc_store_checkpoint(store, s, f->total, &pos) || tfc_store_flush(store))
        return fprintf(stderr, "fashion_cnn: %s\n", tfc_store_errmsg(store)), 1;
    tfc_store_close(store);
    printf("saved the model to %s\n", o->save);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 2 : rc;
    tfc_value *data[4]; /* train images, labels, test images, labels */
    if (mlp_load_fashion_mnist(o.data, "train", &data[0], &data[1]) ||
        mlp_load_fashion_mnist(o.data, "t10k", &data[2], &data[3]))
        return fprintf(stderr, "fashion_cnn: %s\n", tfc_errmsg()), 1;

    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) return fprintf(stderr, "fashion_cnn: %s\n", tfc_errmsg()), 1;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, o.seed);
    struct flagship f;
    build(g, &o, tfc_value_shape(data[0]).dims[0], &f);
    tfc_session *s;
    if (tfc_value_scalar(TFC_FLOAT32, 1.0, &f.training_on))
        return fprintf(stderr, "fashion_cnn: %s\n", tfc_errmsg()), 1;
    if (tfc_graph_status(g) || tfc_session_create(ctx, g, &s) || tfc_session_init_variables(s)) {
        fprintf(stderr, "fashion_cnn: %s\n",
                tfc_graph_status(g) ? tfc_graph_errmsg(g) : tfc_errmsg());
        return 1;
    }
    tfc_store *store = NULL;
    if (o.save && save_model(o.save, g, &store)) return 1;
    if (train(&o, &f, s, store, &data[0])) return 1;
    double hit_count = evaluate(&f, s, &data[2]);
    if (hit_count < 0) return 1;
    int64_t n_test = tfc_value_shape(data[2]).dims[0];
    printf("test accuracy %.2f%%\n", 100.0 * hit_count / (double)n_test);
    printf("test_accuracy=%.4f\n", hit_count / (double)n_test);
    if (store && finish_store(&o, &f, s, store, hit_count / (double)n_test)) return 1;

    tfc_value_destroy(f.training_on);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(ctx);
    for (int i = 0; i < 4; i++) tfc_value_destroy(data[i]);
    return 0;
}
