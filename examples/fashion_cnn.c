/* fashion_cnn.c: the flagship CNN example. Trains the network of cnn_model.c (two 5x5
 * convolutions with 32 and 64 channels, each with ReLU and 2x2 max pooling, a 1024-unit dense
 * layer with dropout, 10 outputs; batch norm optional) with Adam on Fashion-MNIST (Debian
 * package dataset-fashion-mnist), with a progress bar per epoch (plain lines when stderr is not
 * a terminal), then prints the test accuracy and a final machine-readable line
 * test_accuracy=0.xxxx. Training steps feed the graph's training flag 1; evaluation leaves it 0.
 *
 *   fashion_cnn [--epochs N] [--max-steps N] [--seed S] [--batch B] [--lr LR] [--data DIR]
 *               [--save MODEL.db] [--dropout RATE] [--batch-norm] [--quiet]
 *
 * Defaults: 10 epochs at batch 128, Adam with the learning rate 1e-3 decayed along a cosine
 * to 2% of it. --max-steps N stops after N training steps in all (a short run for CI; the
 * learning rate then decays over those N steps). --dropout RATE (default 0.5; 0: none) drops
 * the dense layer's units in training steps; --batch-norm puts a batch norm layer before each
 * conv ReLU.
 *
 * With --save, the model goes into a store (graph, "train" and "predict" signatures, a final
 * checkpoint, per-step metrics), which the `tfc` tool can then train further, evaluate, run,
 * draw and plot without this program. The run itself is trainer.c's, shared with mnist_mlp.
 */
#include <tfc-starpu/tfc.h>
#include "cnn_model.h"
#include "trainer.h"

struct cnn_example {
    struct cnn_config net;
    struct cnn_model m;
};

/* The network of cnn_model.c; Adam trains the trainable set (under batch norm: gamma and
 * beta, not the moving statistics). */
static void build_cnn(tfc_graph *g, void *ctx, struct trainer_net *net)
{
    struct cnn_example *c = ctx;
    struct cnn_model *m = &c->m;
    cnn_model_build(g, TFC_UINT8, &c->net, m);
    *net = (struct trainer_net){.images = m->images, .labels = m->labels,
                                .labels_i32 = m->labels_i32, .training = m->training,
                                .logits = m->logits, .loss = m->loss};
}

int main(int argc, char **argv)
{
    struct trainer_options o;
    struct cnn_example c = {.net = {.dropout = 0.5}};
    trainer_defaults(&o, "fashion_cnn", "[--epochs N] [--max-steps N] [--seed S] [--batch B] "
                     "[--lr LR] [--data DIR] [--save MODEL.db] [--dropout RATE] [--batch-norm] "
                     "[--quiet]", 10);
    o.count_steps = 1;
    const struct trainer_flag own[] = {
        {"--max-steps", "a whole number, 0 or more", trainer_set_steps, &o.max_steps},
        {"--dropout", "a rate in [0, 1)", trainer_set_rate, &c.net.dropout},
        {"--batch-norm", NULL, trainer_set_switch, &c.net.batch_norm},
    };
    if (trainer_parse(argc, argv, own, sizeof own / sizeof *own, &o)) return 2;
    return trainer_run(&o, build_cnn, &c);
}
