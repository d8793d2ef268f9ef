"""fashion_data.py: the training data of the CNN benchmarks (cnn_tf.py, cnn_torch.py).

Both read the same batches as bench/cnn_step on ours: the training images of Fashion-MNIST's
gzipped idx files as float32 /255, a seeded permutation per epoch, the last partial batch of an
epoch dropped. Each side keeps its own random generator (numpy's, torch's) and tensor type; this
module has what they share, in plain numpy.
"""
import gzip
import os

import numpy as np

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path, prog):
    """The uint8 array of a gzipped idx file; prog names the program in the error."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise SystemExit(f"{prog}: {path}: not a uint8 idx file")
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load_train(data_dir, batch, prog):
    """The training set of data_dir: images as float32 [n, 28, 28] in [0, 1], labels as uint8
    [n]. Exits with a message when it has fewer than `batch` images."""
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), prog)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), prog)
    n = images.shape[0]
    if n < batch:
        raise SystemExit(f"{prog}: --batch {batch} is larger than the {n} images")
    return images.astype(np.float32) / np.float32(255), labels


def batch_indices(n, batch, permutation):
    """Endless index batches over n examples: permutation(n) gives each epoch's order (the
    caller's seeded generator), sliced into whole batches; the partial rest is dropped."""
    while True:
        perm = permutation(n)
        for i in range(0, n - n % batch, batch):
            yield perm[i:i + batch]
