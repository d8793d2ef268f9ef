/* import.c: `tfc import MODEL.onnx MODEL.db [--trainable [--loss KIND --labels NAME ...]]`: an
 * ONNX model into a new model store (its graph and a "predict" signature of the graph's inputs
 * and outputs), so that `tfc info` and `tfc run` work on it. With --trainable the float
 * initializers become trainable variables, whose values are stored as the checkpoint of step 0;
 * with --loss too, a loss on an output, an optimizer's train op and a "train" signature like
 * the ones of models built in C, so that `tfc train` fine-tunes the imported model. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tool.h"

static const char import_usage[] =
    "usage: tfc import MODEL.onnx MODEL.db [--trainable [--loss KIND --labels NAME\n"
    "                  [--output NAME] [--optimizer adam|sgd] [--lr X]]]\n\n"
    "Imports an ONNX model (opsets up to 17; the op types of the README's list) into a new\n"
    "model store: graph inputs become placeholders, initializers constants, and the graph's\n"
    "inputs and outputs the \"predict\" signature that `tfc run` uses. Value-dependent\n"
    "arguments (Reshape's shape, Slice's bounds, ...) must be constants in the model.\n"
    "  --trainable       float initializers become trainable variables (stored as the\n"
    "                    checkpoint of step 0) instead of constants\n"
    "  --loss KIND       (with --trainable) adds a loss, a train op and the \"train\" signature\n"
    "                    that `tfc train` and `tfc eval` use: softmax_cross_entropy (the output\n"
    "                    is logits [batch, classes], the labels int32 class ids [batch]; metric\n"
    "                    accuracy) or mse (the labels have the output's dtype and shape)\n"
    "  --labels NAME     the name of the new labels placeholder (a feed of \"train\")\n"
    "  --output NAME     the tensor the loss is on: needed when the model has several outputs;\n"
    "                    any tensor of the imported graph (e.g. logits before a Softmax)\n"
    "  --optimizer KIND  adam (the default) or sgd\n"
    "  --lr X            the learning rate (default 0.001)\n"
    "MODEL.db must not exist yet.\n";

/* What the command line asks for; loss, labels and output are NULL when not given. */
typedef struct import_args {
    const char *onnx, *db;
    int trainable;
    const char *loss, *labels, *output;
    tfc_optimizer_kind optimizer;
    double lr;
    int tuned; /* --optimizer or --lr given (they need --loss) */
} import_args;

/* The value of option argv[*i], which must follow it. */
static const char *option_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "tfc import: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* One option at argv[*i] (moving *i past its value): 0, or TOOL_USAGE after saying why. */
static int parse_option(int argc, char **argv, int *i, import_args *a)
{
    const char *opt = argv[*i], *v = NULL;
    if (!strcmp(opt, "--trainable")) {
        a->trainable = 1;
        return 0;
    }
    if (strcmp(opt, "--loss") && strcmp(opt, "--labels") && strcmp(opt, "--output") &&
        strcmp(opt, "--optimizer") && strcmp(opt, "--lr")) {
        fprintf(stderr, "tfc import: unknown option '%s' (--trainable, --loss, --labels, "
                        "--output, --optimizer, --lr, --help)\n", opt);
        return TOOL_USAGE;
    }
    if (!(v = option_value(argc, argv, i))) return TOOL_USAGE;
    a->tuned |= !strcmp(opt, "--optimizer") || !strcmp(opt, "--lr");
    if (!strcmp(opt, "--loss")) {
        if (strcmp(v, "softmax_cross_entropy") && strcmp(v, "mse")) {
            fprintf(stderr, "tfc import: --loss '%s' is not a loss we make (softmax_cross_entropy, "
                            "mse)\n", v);
            return TOOL_USAGE;
        }
        a->loss = v;
    } else if (!strcmp(opt, "--labels")) {
        a->labels = v;
    } else if (!strcmp(opt, "--output")) {
        a->output = v;
    } else if (!strcmp(opt, "--optimizer")) {
        if (strcmp(v, "adam") && strcmp(v, "sgd")) {
            fprintf(stderr, "tfc import: --optimizer '%s' is not one we offer (adam, sgd)\n", v);
            return TOOL_USAGE;
        }
        a->optimizer = strcmp(v, "adam") ? TFC_OPT_SGD : TFC_OPT_ADAM;
    } else {
        char *end;
        a->lr = strtod(v, &end);
        if (end == v || *end || !(a->lr > 0 && a->lr < 1e3)) {
            fprintf(stderr, "tfc import: --lr '%s' is not a learning rate (a number > 0)\n", v);
            return TOOL_USAGE;
        }
    }
    return 0;
}

/* The training options hang together: --loss needs --trainable and --labels, and the options
 * of the loss are useless without it. */
static int check_training_args(const import_args *a)
{
    const char *why = NULL;
    if (a->loss && !a->trainable)
        why = "--loss needs --trainable (a loss on constants has nothing to train)";
    else if (a->loss && !a->labels)
        why = "--loss needs --labels NAME (the placeholder the loss compares the output with)";
    else if (!a->loss && (a->labels || a->output || a->tuned))
        why = "--labels, --output, --optimizer and --lr only go with --loss KIND";
    if (why) fprintf(stderr, "tfc import: %s\n", why);
    return why ? TOOL_USAGE : 0;
}

static int parse(int argc, char **argv, import_args *a)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(import_usage, stdout);
            return -1;
        }
        if (argv[i][0] == '-') {
            if (parse_option(argc, argv, &i, a)) return TOOL_USAGE;
        } else if (n_pos < 2) {
            *(n_pos++ ? &a->db : &a->onnx) = argv[i];
        } else {
            fprintf(stderr, "tfc import: one ONNX file and one store are expected, '%s' is a "
                            "third argument\n", argv[i]);
            return TOOL_USAGE;
        }
    }
    if (n_pos != 2) {
        fprintf(stderr, "tfc import: %s\n%s", n_pos ? "MODEL.db is missing" : "MODEL.onnx and "
                "MODEL.db are missing", import_usage);
        return TOOL_USAGE;
    }
    return check_training_args(a);
}

/* With --trainable: the variables' initializer values as the checkpoint of step 0. */
static int store_variables(tfc_store *st, tfc_graph *g, const tfc_onnx_model *m)
{
    tfc_ctx *ctx = NULL;
    tfc_session *s = NULL;
    int rc = TOOL_FAIL;
    if (tfc_ctx_create(&ctx)) {
        tool_error("import", "starting the runtime: %s", tfc_errmsg());
    } else if (tfc_session_create(ctx, g, &s)) {
        tool_error("import", "session: %s", tfc_errmsg());
    } else if (tfc_session_init_variables(s) || tfc_onnx_init_variables(s, m)) {
        tool_error("import", "setting the variables: %s", tfc_session_errmsg(s));
    } else if (tfc_store_checkpoint(st, s, 0, NULL) || tfc_store_flush(st)) {
        tool_error("import", "checkpoint: %s", tfc_store_errmsg(st));
    } else {
        rc = TOOL_OK;
    }
    tfc_session_destroy(s);
    tfc_ctx_destroy(ctx);
    return rc;
}

/* The tensor the loss is on: --output, else the model's one output. */
static tfc_tensor *loss_output(tfc_graph *g, const tfc_onnx_model *m, const char *name)
{
    const tfc_signature *p = m->predict;
    if (!name && p->n_outputs != 1) {
        tool_error("import", "--loss: the model has %d outputs (the first '%s'): name the one "
                   "the loss is on with --output NAME", p->n_outputs,
                   p->n_outputs ? p->outputs[0] : "none");
        return NULL;
    }
    tfc_tensor *t = tfc_graph_find(g, name ? name : p->outputs[0]);
    if (!t)
        tool_error("import", "--output '%s' is no tensor of the imported graph (its outputs: "
                   "'%s'%s)", name, p->outputs[0], p->n_outputs > 1 ? ", ..." : "");
    return t;
}

/* The labels placeholder and the loss (and the metric accuracy for class labels) on out;
 * *metric stays NULL for mse. NULL after saying why. */
static tfc_tensor *build_loss(tfc_graph *g, const import_args *a, tfc_tensor *out,
                              tfc_tensor **metric)
{
    tfc_shape s = tfc_tensor_shape(out);
    int classes = !strcmp(a->loss, "softmax_cross_entropy");
    if (tfc_graph_find(g, a->labels)) {
        tool_error("import", "--labels '%s' is already a tensor of the model: name another "
                   "placeholder", a->labels);
        return NULL;
    }
    if (classes && (s.rank != 2 || tfc_tensor_dtype(out) != TFC_FLOAT32)) {
        tool_error("import", "--loss softmax_cross_entropy: '%s' is not float32 logits of shape "
                   "[batch, classes] (rank %d): pick another --output, or --loss mse",
                   tfc_tensor_name(out), s.rank);
        return NULL;
    }
    tfc_tensor *y = classes
        ? tfc_placeholder(g, a->labels, TFC_INT32, tfc_shape_of(1, s.dims))
        : tfc_placeholder(g, a->labels, tfc_tensor_dtype(out), s);
    if (!classes) return tfc_reduce_mean(g, tfc_square(g, tfc_sub(g, out, y)), 0, NULL, 0);
    tfc_tensor *cls = tfc_cast(g, tfc_argmax(g, out, 1), TFC_INT32);
    *metric = tfc_reduce_mean(g, tfc_cast(g, tfc_equal(g, cls, y), TFC_FLOAT32), 0, NULL, 0);
    return tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, out, y), 0, NULL, 0);
}

/* With --loss: the loss, the optimizer's train op over the trainable variables the loss
 * depends on (advancing global_step) and the "train" signature `tfc train` reads (the
 * predict feeds and the labels; loss "loss", metric "accuracy", train_op "train"). */
static int add_training(tfc_graph *g, const import_args *a, const tfc_onnx_model *m,
                        tfc_signature *train)
{
    static const char *metrics[1] = {"accuracy"};
    if (m->n_variables == 0)
        return tool_error("import", "--loss: the model has no float initializers, so nothing "
                                    "to train");
    tfc_tensor *out = loss_output(g, m, a->output), *metric = NULL;
    tfc_tensor *loss = out ? build_loss(g, a, out, &metric) : NULL;
    if (!loss) return TOOL_FAIL;
    tfc_optimizer opt = tfc_optimizer_default(a->optimizer, a->lr);
    tfc_tensor *step = tfc_minimize(g, loss, 0, NULL, &opt, tfc_global_step(g));
    if (tfc_graph_status(g) || tfc_tensor_set_name(loss, "loss") ||
        tfc_tensor_set_name(step, "train") || (metric && tfc_tensor_set_name(metric, "accuracy")))
        return tool_error("import", "--loss %s on '%s': %s", a->loss, tfc_tensor_name(out),
                          tfc_graph_status(g) ? tfc_graph_errmsg(g) : tfc_errmsg());
    const tfc_signature *p = m->predict;
    train->feeds = malloc(sizeof *train->feeds * (size_t)(p->n_feeds + 1));
    if (!train->feeds) return tool_error("import", "out of memory");
    memcpy(train->feeds, p->feeds, sizeof *train->feeds * (size_t)p->n_feeds);
    train->feeds[p->n_feeds] = a->labels;
    train->n_feeds = p->n_feeds + 1;
    train->n_metrics = metric ? 1 : 0;
    train->metrics = metrics;
    train->loss = "loss";
    train->train_op = "train";
    return TOOL_OK;
}

/* The graph and signatures into the new store, and the variables as step 0. */
static int save(tfc_store *st, tfc_graph *g, const tfc_onnx_model *m, const tfc_signature *train)
{
    if (tfc_store_save_graph(st, g) || tfc_store_set_signature(st, "predict", m->predict) ||
        (train->loss && tfc_store_set_signature(st, "train", train)))
        return tool_error("import", "%s", tfc_store_errmsg(st));
    return m->n_variables ? store_variables(st, g, m) : TOOL_OK;
}

int cmd_import(int argc, char **argv)
{
    import_args a = {.optimizer = TFC_OPT_ADAM, .lr = 1e-3};
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (access(a.db, F_OK) == 0)
        return tool_error("import", "'%s' exists: importing writes a new store (remove it, or "
                                    "name another file)", a.db);
    tfc_graph *g = NULL;
    tfc_onnx_model *m = NULL;
    tfc_store *st = NULL;
    tfc_signature train = {0};
    tfc_onnx_options o = {.trainable = a.trainable};
    if (tfc_graph_create(&g)) return tool_error("import", "%s", tfc_errmsg());
    rc = TOOL_FAIL;
    if (tfc_onnx_import(g, a.onnx, &o, &m)) {
        tool_error("import", "%s", tfc_graph_errmsg(g));
    } else if (a.loss && add_training(g, &a, m, &train)) {
        /* said why */
    } else if (tfc_store_open(a.db, TFC_STORE_CREATE, &st)) {
        tool_error("import", "%s", tfc_errmsg());
    } else if (save(st, g, m, &train) == TOOL_OK) {
        printf("imported %s (opset %lld) into %s: %d nodes, %d inputs, %d outputs, %d variables"
               "%s%s\n", a.onnx, (long long)m->opset, a.db, tfc_graph_num_nodes(g),
               m->predict->n_feeds, m->predict->n_outputs, m->n_variables,
               a.loss ? "; \"train\" signature with loss " : "", a.loss ? a.loss : "");
        rc = TOOL_OK;
    }
    tfc_store_close(st);
    if (rc && st) unlink(a.db); /* no half-written store left behind */
    free(train.feeds);
    tfc_onnx_model_free(m);
    tfc_graph_destroy(g);
    return rc;
}
