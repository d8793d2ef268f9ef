/* trainer.c: the command line and the run the flagship examples share (see trainer.h): the
 * graph around an example's network (metrics, predictions, Adam), the training loop with its
 * progress bar, the test accuracy, and the store of --save. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mlp_model.h" /* mlp_load_fashion_mnist */
#include "trainer.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void trainer_defaults(struct trainer_options *o, const char *prog, const char *usage, int epochs)
{
    *o = (struct trainer_options){.prog = prog, .usage = usage, .epochs = epochs, .batch = 128,
                                  .seed = 1, .lr = 1e-3, .data = DEFAULT_DATA};
}

/* ---- the command line ------------------------------------------------------------------- */

/* Whether strto* read all of value, and nothing out of range (errno cleared before). */
static int whole(const char *value, const char *end)
{
    return end != value && !*end && !errno;
}

int trainer_set_switch(const char *value, void *target)
{
    (void)value;
    *(int *)target = 1;
    return 0;
}

int trainer_set_steps(const char *value, void *target)
{
    char *end;
    long long v = strtoll(value, &end, 10);
    if (!whole(value, end) || v < 0) return -1;
    *(int64_t *)target = v;
    return 0;
}

int trainer_set_rate(const char *value, void *target)
{
    char *end;
    double v = strtod(value, &end);
    if (!whole(value, end) || !(v >= 0 && v < 1)) return -1;
    *(double *)target = v;
    return 0;
}

static int set_epochs(const char *value, void *target)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (!whole(value, end) || v < 1 || v > INT_MAX) return -1;
    *(int *)target = (int)v;
    return 0;
}

static int set_batch(const char *value, void *target)
{
    char *end;
    long long v = strtoll(value, &end, 10);
    if (!whole(value, end) || v < 1) return -1;
    *(int64_t *)target = v;
    return 0;
}

static int set_seed(const char *value, void *target)
{
    char *end;
    unsigned long long v = strtoull(value, &end, 10);
    if (!whole(value, end) || strchr(value, '-')) return -1; /* strtoull wraps negatives */
    *(uint64_t *)target = v;
    return 0;
}

static int set_positive(const char *value, void *target)
{
    char *end;
    double v = strtod(value, &end);
    if (!whole(value, end) || !(v > 0)) return -1;
    *(double *)target = v;
    return 0;
}

static int set_string(const char *value, void *target)
{
    *(const char **)target = value;
    return 0;
}

/* Prints "prog: message" (when there is one) and the usage line; returns the exit status 2. */
static int usage(const struct trainer_options *o, const char *fmt, ...)
{
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", o->prog);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    fprintf(stderr, "usage: %s %s\n", o->prog, o->usage);
    return 2;
}

static const struct trainer_flag *find_flag(const struct trainer_flag *f, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].name, name)) return &f[i];
    return NULL;
}

int trainer_parse(int argc, char **argv, const struct trainer_flag *own, int n_own,
                  struct trainer_options *o)
{
    const struct trainer_flag common[] = {
        {"--epochs", "a whole number, 1 or more", set_epochs, &o->epochs},
        {"--seed", "a whole number, 0 or more", set_seed, &o->seed},
        {"--batch", "a whole number, 1 or more", set_batch, &o->batch},
        {"--lr", "a positive number", set_positive, &o->lr},
        {"--data", "a folder", set_string, &o->data},
        {"--save", "a file name", set_string, &o->save},
        {"--quiet", NULL, trainer_set_switch, &o->quiet},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(o, NULL);
        const struct trainer_flag *f = find_flag(common, sizeof common / sizeof *common, a);
        if (!f) f = find_flag(own, n_own, a);
        if (!f) return usage(o, "unknown option %s", a);
        if (!f->takes) {
            f->set(NULL, f->target);
            continue;
        }
        if (!v) return usage(o, "%s needs a value (%s)", a, f->takes);
        errno = 0; /* out-of-range numbers are refused, not wrapped */
        if (f->set(v, f->target))
            return usage(o, "%s %s: bad value (%s takes %s)", a, v, a, f->takes);
        i++;
    }
    return 0;
}

/* ---- the graph around the network -------------------------------------------------------- */

struct run {
    struct trainer_net net;
    tfc_tensor *hits;        /* correct predictions in a batch */
    tfc_tensor *train;
    tfc_value *training_on;  /* float32 1: the training flag's feed in training steps */
    int64_t steps;           /* per epoch */
    int64_t total;           /* in the run: every epoch's, or --max-steps when fewer */
};

/* The network, then the metrics, the predictions, and Adam with the learning rate decayed
 * along a cosine over the run, to 2% of its start. */
static void build(tfc_graph *g, const struct trainer_options *o, trainer_build_fn build_net,
                  void *ctx, int64_t n_train, struct run *r)
{
    struct trainer_net *m = &r->net;
    build_net(g, ctx, m);
    tfc_tensor *correct = tfc_cast(
        g, tfc_equal(g, tfc_cast(g, tfc_argmax(g, m->logits, 1), TFC_INT32), m->labels_i32),
        TFC_FLOAT32);
    r->hits = tfc_reduce_sum(g, correct, 0, NULL, 0);
    tfc_tensor *accuracy = tfc_reduce_mean(g, correct, 0, NULL, 0);
    tfc_tensor *probs = tfc_softmax(g, m->logits, -1);
    r->steps = (n_train + o->batch - 1) / o->batch;
    r->total = r->steps * o->epochs;
    if (o->max_steps && o->max_steps < r->total) r->total = o->max_steps;
    tfc_tensor *global_step = tfc_global_step(g);
    tfc_optimizer adam = tfc_optimizer_default(TFC_OPT_ADAM, o->lr);
    adam.lr_tensor = tfc_lr_cosine(g, o->lr, global_step, (double)r->total, 0.02 * o->lr);
    r->train = tfc_minimize(g, m->loss, m->n_vars, m->vars, &adam, global_step);
    /* the names the store's signatures use */
    tfc_tensor_set_name(m->loss, "loss");
    tfc_tensor_set_name(accuracy, "accuracy");
    tfc_tensor_set_name(probs, "probabilities");
    tfc_tensor_set_name(r->train, "train");
}

/* The graph and its signatures into a new store (the tfc tool reads them). */
static int save_model(const struct trainer_options *o, tfc_graph *g, tfc_store **out)
{
    tfc_store *st;
    const char *feeds[2] = {"images", "labels"}, *metrics[1] = {"accuracy"};
    const char *outputs[1] = {"probabilities"};
    tfc_signature train = {.n_feeds = 2, .feeds = feeds, .n_metrics = 1, .metrics = metrics,
                           .loss = "loss", .train_op = "train"};
    tfc_signature predict = {.n_feeds = 1, .feeds = feeds, .n_outputs = 1, .outputs = outputs};
    if (tfc_store_open(o->save, TFC_STORE_CREATE, &st))
        return fprintf(stderr, "%s: %s\n", o->prog, tfc_errmsg()), -1;
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "train", &train) ||
        tfc_store_set_signature(st, "predict", &predict)) {
        fprintf(stderr, "%s: %s\n", o->prog, tfc_store_errmsg(st));
        tfc_store_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

/* ---- training ----------------------------------------------------------------------------- */

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

/* One epoch's steps (`steps` of them) over the shuffled training set, with the progress bar;
 * each step's loss goes to the store when there is one. Returns the loss sum, -1 on error. */
static double train_epoch(const struct trainer_options *o, const struct run *r, tfc_session *s,
                          tfc_store *store, tfc_batcher *batches, int epoch, int64_t steps)
{
    tfc_tensor *feeds[3] = {r->net.images, r->net.labels, r->net.training}, *loss = r->net.loss;
    int n_feeds = r->net.training ? 3 : 2;
    int tty = isatty(STDERR_FILENO); /* a bar every 20 steps, else a line every 10 s */
    int epochs = (int)((r->total + r->steps - 1) / r->steps);
    double t0 = now(), loss_sum = 0, last_line = t0;
    for (int64_t step = 1; step <= steps; step++) {
        tfc_value *batch[3], *lv;
        if (tfc_batcher_next(batches, batch, NULL))
            return fprintf(stderr, "%s: %s\n", o->prog, tfc_batcher_errmsg(batches)), -1;
        batch[2] = r->training_on;
        if (tfc_session_run(s, n_feeds, feeds, batch, 1, &loss, &lv, 1, &r->train))
            return fprintf(stderr, "%s: %s\n", o->prog, tfc_session_errmsg(s)), -1;
        loss_sum += tfc_value_get(lv, 0);
        if (store)
            tfc_store_log_metric(store, (epoch - 1) * r->steps + step, "loss",
                                 tfc_value_get(lv, 0));
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

/* r->total steps over the shuffled training set, with a summary line per epoch. */
static int train(const struct trainer_options *o, const struct run *r, tfc_session *s,
                 tfc_store *store, tfc_value *const *sources)
{
    tfc_batcher *batches;
    if (tfc_batcher_create(2, sources, o->batch, o->seed, TFC_BATCHER_SHUFFLE, &batches))
        return fprintf(stderr, "%s: %s\n", o->prog, tfc_errmsg()), 1;
    int64_t n_train = tfc_value_shape(sources[0]).dims[0];
    double t_start = now();
    int epoch = 1;
    for (int64_t done = 0; done < r->total; epoch++) {
        int64_t steps = r->total - done < r->steps ? r->total - done : r->steps;
        double t0 = now(), loss_sum = train_epoch(o, r, s, store, batches, epoch, steps);
        if (loss_sum < 0) return tfc_batcher_destroy(batches), 1;
        done += steps;
        double dt = now() - t0, mean = loss_sum / (double)steps;
        if (o->count_steps)
            printf("epoch %d: mean loss %.4f, %lld steps, %.1f s, %.0f examples/s\n", epoch,
                   mean, (long long)steps, dt, (double)(steps * o->batch) / dt);
        else
            printf("epoch %d: mean loss %.4f, %.1f s, %.0f examples/s\n", epoch, mean, dt,
                   (double)n_train / dt);
    }
    double train_s = now() - t_start, waited = tfc_batcher_wait_seconds(batches);
    tfc_batcher_destroy(batches);
    if (o->count_steps)
        printf("trained %lld steps (%d epochs) in %.1f s (%.1f%% of it waiting for input)\n",
               (long long)r->total, epoch - 1, train_s, 100.0 * waited / train_s);
    else
        printf("trained %d epochs in %.1f s (%.1f%% of it waiting for input)\n", epoch - 1,
               train_s, 100.0 * waited / train_s);
    return 0;
}

/* ---- evaluation and the end of the run ---------------------------------------------------- */

/* The test images classified right, counted in batches of 1000 (the training flag left at its
 * default 0); -1 after an error. */
static double evaluate(const struct trainer_options *o, const struct run *r, tfc_session *s,
                       tfc_value *const *sources)
{
    tfc_batcher *eval;
    tfc_tensor *feeds[2] = {r->net.images, r->net.labels}, *hits = r->hits;
    double hit_count = 0;
    tfc_batcher_create(2, sources, 1000, 0, 0, &eval);
    for (int64_t i = 0; i < tfc_batcher_steps_per_epoch(eval); i++) {
        tfc_value *batch[2], *hv;
        tfc_batcher_next(eval, batch, NULL);
        if (tfc_session_run(s, 2, feeds, batch, 1, &hits, &hv, 0, NULL))
            return fprintf(stderr, "%s: %s\n", o->prog, tfc_session_errmsg(s)), -1;
        hit_count += tfc_value_get(hv, 0);
        tfc_value_destroy(hv);
    }
    tfc_batcher_destroy(eval);
    return hit_count;
}

/* The test accuracy and a final checkpoint (with the input position of the end) into the
 * store, which is closed. */
static int finish_store(const struct trainer_options *o, const struct run *r, tfc_session *s,
                        tfc_store *store, double accuracy)
{
    tfc_input_position pos = {o->seed, r->total / r->steps, r->total % r->steps};
    tfc_store_log_metric(store, r->total, "test_accuracy", accuracy);
    if (tfc_store_checkpoint(store, s, r->total, &pos) || tfc_store_flush(store))
        return fprintf(stderr, "%s: %s\n", o->prog, tfc_store_errmsg(store)), 1;
    tfc_store_close(store);
    printf("saved the model to %s\n", o->save);
    return 0;
}

/* Training, the test accuracy and the store's end, once the session is ready. */
static int train_and_evaluate(const struct trainer_options *o, const struct run *r,
                              tfc_session *s, tfc_store *store, tfc_value *const *data)
{
    if (train(o, r, s, store, &data[0])) return 1;
    double hit_count = evaluate(o, r, s, &data[2]);
    if (hit_count < 0) return 1;
    int64_t n_test = tfc_value_shape(data[2]).dims[0];
    printf("test accuracy %.2f%%\n", 100.0 * hit_count / (double)n_test);
    printf("test_accuracy=%.4f\n", hit_count / (double)n_test);
    return store ? finish_store(o, r, s, store, hit_count / (double)n_test) : 0;
}

int trainer_run(const struct trainer_options *o, trainer_build_fn build_net, void *ctx)
{
    tfc_value *data[4]; /* train images, labels, test images, labels */
    if (mlp_load_fashion_mnist(o->data, "train", &data[0], &data[1]) ||
        mlp_load_fashion_mnist(o->data, "t10k", &data[2], &data[3]))
        return fprintf(stderr, "%s: %s\n", o->prog, tfc_errmsg()), 1;
    tfc_ctx *tc;
    if (tfc_ctx_create(&tc)) return fprintf(stderr, "%s: %s\n", o->prog, tfc_errmsg()), 1;
    tfc_graph *g;
    tfc_graph_create(&g);
    tfc_graph_set_seed(g, o->seed);
    struct run r = {0};
    build(g, o, build_net, ctx, tfc_value_shape(data[0]).dims[0], &r);
    if (r.net.training && tfc_value_scalar(TFC_FLOAT32, 1.0, &r.training_on))
        return fprintf(stderr, "%s: %s\n", o->prog, tfc_errmsg()), 1;
    tfc_session *s;
    if (tfc_graph_status(g) || tfc_session_create(tc, g, &s) || tfc_session_init_variables(s)) {
        fprintf(stderr, "%s: %s\n", o->prog,
                tfc_graph_status(g) ? tfc_graph_errmsg(g) : tfc_errmsg());
        return 1;
    }
    tfc_store *store = NULL;
    if (o->save && save_model(o, g, &store)) return 1;
    if (train_and_evaluate(o, &r, s, store, data)) return 1;
    tfc_value_destroy(r.training_on);
    tfc_session_destroy(s);
    tfc_graph_destroy(g);
    tfc_ctx_destroy(tc);
    for (int i = 0; i < 4; i++) tfc_value_destroy(data[i]);
    return 0;
}
