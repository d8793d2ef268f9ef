/* trainer.h: what the flagship examples (mnist_mlp, fashion_cnn) share around their networks:
 * the command line's common options, and a run: Fashion-MNIST loaded, Adam with a cosine-decayed
 * learning rate, the epochs with a progress bar, the test accuracy, and with --save a store the
 * `tfc` tool can take over. Each example builds its own network and names its own options. */
#ifndef TFC_EXAMPLES_TRAINER_H
#define TFC_EXAMPLES_TRAINER_H

#include <tfc-starpu/tfc.h>

struct trainer_options {
    const char *prog;   /* the program's name, for messages */
    const char *usage;  /* its options, for the usage line */
    int epochs, quiet;
    int64_t batch;
    int64_t max_steps;  /* training steps in all; 0: every step of every epoch */
    int count_steps;    /* 1: the summary lines count steps (a run --max-steps may end inside
                         * an epoch); 0: they give epochs and the training set's examples/s */
    uint64_t seed;
    double lr;
    const char *data;   /* the folder of the gzipped idx files */
    const char *save;   /* the store to save to, or NULL */
};

/* Defaults of the common options (batch 128, seed 1, lr 1e-3, the Debian package's folder). */
void trainer_defaults(struct trainer_options *o, const char *prog, const char *usage, int epochs);

/* An option of the command line: `takes` says what a good value is (NULL for a switch, which
 * set gets with value NULL); set stores value into target, or returns -1 when it is bad. */
struct trainer_flag {
    const char *name;
    const char *takes;
    int (*set)(const char *value, void *target);
    void *target;
};

/* Setters for an example's own flags: a switch (int 1), a count >= 0 (int64_t), a rate in
 * [0, 1) (double). */
int trainer_set_switch(const char *value, void *target);
int trainer_set_steps(const char *value, void *target);
int trainer_set_rate(const char *value, void *target);

/* Reads argv into o (the common options) and the example's own flags. Returns 0, or 2 after
 * printing a message and the usage line (--help prints the usage line alone). */
int trainer_parse(int argc, char **argv, const struct trainer_flag *own, int n_own,
                  struct trainer_options *o);

/* What an example's network gives the run. */
struct trainer_net {
    tfc_tensor *images, *labels; /* the placeholders fed with batches */
    tfc_tensor *labels_i32;      /* the labels as int32, for the accuracy */
    tfc_tensor *training;        /* a training flag fed 1 in training steps, or NULL */
    tfc_tensor *logits, *loss;
    int n_vars;                  /* the variables Adam trains; 0: the trainable set */
    tfc_tensor *const *vars;
};

/* Builds the network into g (only its own nodes: the run adds the metrics and optimizer
 * after it, as the node order is part of what the losses depend on) and fills net. */
typedef void (*trainer_build_fn)(tfc_graph *g, void *ctx, struct trainer_net *net);

/* The whole run after parsing; prints what the examples print and returns the exit status. */
int trainer_run(const struct trainer_options *o, trainer_build_fn build, void *ctx);

#endif
