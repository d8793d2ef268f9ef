/* mnist_mlp.c: the flagship example. Trains a 784-256-128-10 ReLU network (mlp_model.c) with
 * Adam on Fashion-MNIST (Debian package dataset-fashion-mnist), with a progress bar per epoch
 * (plain lines when stderr is not a terminal), then prints the test accuracy and a final
 * machine-readable line test_accuracy=0.xxxx.
 *
 *   mnist_mlp [--epochs N] [--seed S] [--batch B] [--lr LR] [--data DIR] [--save MODEL.db]
 *             [--quiet]
 *
 * Defaults: 3 epochs at batch 128, Adam with the learning rate 1e-3 decayed along a cosine to
 * 2% of it. With --save, the model goes into a store (graph, "train" and "predict" signatures,
 * a final checkpoint, per-step metrics), which the `tfc` tool can then train further, evaluate,
 * run, draw and plot without this program. The run itself is trainer.c's, shared with
 * fashion_cnn.
 */
#include <tfc-starpu/tfc.h>
#include "mlp_model.h"
#include "trainer.h"

/* The network of mlp_model.c; Adam trains its six variables, listed. */
static void build_mlp(tfc_graph *g, void *ctx, struct trainer_net *net)
{
    struct mlp_model *m = ctx;
    mlp_model_build(g, TFC_UINT8, m);
    *net = (struct trainer_net){.images = m->images, .labels = m->labels,
                                .labels_i32 = m->labels_i32, .logits = m->logits,
                                .loss = m->loss, .n_vars = MLP_N_VARS, .vars = m->vars};
}

int main(int argc, char **argv)
{
    struct trainer_options o;
    trainer_defaults(&o, "mnist_mlp", "[--epochs N] [--seed S] [--batch B] [--lr LR] "
                     "[--data DIR] [--save MODEL.db] [--quiet]", 3);
    if (trainer_parse(argc, argv, NULL, 0, &o)) return 2;
    struct mlp_model m;
    return trainer_run(&o, build_mlp, &m);
}
