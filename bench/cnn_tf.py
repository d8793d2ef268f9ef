#!/usr/bin/env python3
"""cnn_tf.py: the TensorFlow side of the CNN training step (bench/cnn_step on ours).

The same network as bench/cnn_torch.py (issue 12): Fashion-MNIST 28x28x1, conv 5x5 SAME 1->32
+ ReLU + 2x2 max pool, conv 5x5 SAME 32->64 + ReLU + 2x2 max pool, flatten, dense 3136->1024 +
ReLU, dropout 0.5, dense 1024->10, sparse softmax cross-entropy on the logits, Adam(lr=1e-3,
epsilon=1e-8 as torch's), batch 128; Glorot-uniform kernels and zero biases (Keras's
defaults). Activations are NHWC, TensorFlow's native CPU layout. The step is one tf.function
(forward, loss, gradients, Adam's update); the same real batches as the torch side: the
training images of the gzipped idx files, /255, a seeded permutation, the last partial batch of
an epoch dropped; each batch is made a tensor before its step's clock starts.

Measures ms per training step (the step, then reading the loss, which waits for it): the median,
p10 and p90 of --steps timed steps after --warmup untimed ones (the first traces the function).
--threads T sets TensorFlow's intra-op and inter-op thread pools to T. OPENBLAS_* come from the
environment as for ours (TensorFlow's own kernels, Eigen and oneDNN, do not use OpenBLAS).
Run with bench/.venv/bin/python (bench/peers-setup.sh makes it). The last line is
machine-readable:
  cnn_tf ms_per_step=<median> threads=T batch=B ...
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the import: no start-up chatter

import numpy as np
import tensorflow as tf

from fashion_data import DEFAULT_DATA, batch_indices, load_train


def network():
    L = tf.keras.layers
    conv = dict(padding="same", activation="relu", kernel_initializer="glorot_uniform",
                bias_initializer="zeros")
    return tf.keras.Sequential([
        tf.keras.Input(shape=(28, 28, 1)),
        L.Conv2D(32, 5, **conv), L.MaxPooling2D(2),
        L.Conv2D(64, 5, **conv), L.MaxPooling2D(2),
        L.Flatten(), L.Dense(1024, activation="relu"), L.Dropout(0.5), L.Dense(10)])


def step_gflop(batch):
    """As bench/cnn_torch.py counts it: forward, weight gradients, the input gradients that
    training needs (not conv1's)."""
    conv1 = 2 * batch * 32 * 1 * 25 * 28 * 28
    conv2 = 2 * batch * 64 * 32 * 25 * 14 * 14
    dense = 2 * batch * (3136 * 1024 + 1024 * 10)
    return (conv1 * 2 + conv2 * 3 + dense * 3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DEFAULT_DATA)
    o = ap.parse_args()
    if o.threads < 1 or o.steps < 1 or o.warmup < 0 or o.batch < 1:
        raise SystemExit("cnn_tf.py: --threads, --steps and --batch must be >= 1, --warmup >= 0")

    # before any op runs: the pools are sized when the runtime starts
    tf.config.threading.set_intra_op_parallelism_threads(o.threads)
    tf.config.threading.set_inter_op_parallelism_threads(o.threads)
    tf.keras.utils.set_random_seed(o.seed)

    images, labels = load_train(o.data, o.batch, "cnn_tf.py")
    n = images.shape[0]
    x_all = images.reshape(n, 28, 28, 1)
    y_all = labels.astype(np.int32)

    model = network()
    opt = tf.keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-8)
    opt.build(model.trainable_variables)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    rng = np.random.default_rng(o.seed)
    it = ((tf.constant(x_all[idx]), tf.constant(y_all[idx]))
          for idx in batch_indices(n, o.batch, rng.permutation))
    times, losses = [], []
    for i in range(o.warmup + o.steps):
        xb, yb = next(it)
        t0 = time.perf_counter()
        losses.append(float(train_step(xb, yb)))
        if i >= o.warmup:
            times.append(time.perf_counter() - t0)

    params = model.count_params()  # 3274634: the same network on every side
    q = sorted(times)
    p10, p90 = q[int(0.1 * (len(q) - 1) + 0.5)], q[int(0.9 * (len(q) - 1) + 0.5)]
    med = statistics.median(times)
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset: on by default on x86 Linux)")
    print(f"# tensorflow {tf.__version__}, keras {tf.keras.__version__}, intra-op "
          f"{tf.config.threading.get_intra_op_parallelism_threads()}, inter-op "
          f"{tf.config.threading.get_inter_op_parallelism_threads()}, TF_ENABLE_ONEDNN_OPTS="
          f"{onednn}; loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    print(f"cnn_tf ms_per_step={med * 1e3:.3f} threads={o.threads} batch={o.batch} "
          f"steps={o.steps} warmup={o.warmup} p10_ms={p10 * 1e3:.3f} p90_ms={p90 * 1e3:.3f} "
          f"mean_ms={statistics.mean(times) * 1e3:.3f} "
          f"gflops={step_gflop(o.batch) / med:.1f} params={params} loss_first={losses[0]:.4f} "
          f"loss_last={losses[-1]:.4f} version={tf.__version__}")


if __name__ == "__main__":
    main()
