#!/usr/bin/python3
"""rnn_torch.py: the PyTorch side of the RNN training step (bench/rnn_step on ours).

The network (issue 13, item 6): each Fashion-MNIST image as 28 rows of 28 pixels, nn.LSTM(28,
128, batch_first=True), its last hidden state through nn.Linear(128, 10), softmax
cross-entropy, Adam(lr=1e-3, torch's defaults otherwise), batch 128. Initialized as ours:
Glorot uniform kernels (input and recurrent, per whole [4*128, in] matrix), zero biases with
the forget gate's at 1 (torch has two bias vectors: b_ih holds it, b_hh stays zero). Real
batches: the training images of the gzipped idx files, a seeded permutation, the last partial
batch dropped (fashion_data.py, shared with the CNN benchmarks).

Measures ms per training step (zero_grad, forward, loss, backward, step, loss.item()): the
median, p10 and p90 of --steps timed steps after --warmup untimed ones. --threads T sets
torch.set_num_threads(T), torch.set_num_interop_threads(T) and OpenBLAS's thread count; the
OPENBLAS_* variables come from the environment, as for ours. Run with Debian's /usr/bin/python3
(PyTorch 1.13, python3-torch). The last line is machine-readable:
  rnn_torch ms_per_step=<median> threads=T batch=B ...
"""
import argparse
import statistics
import time

import numpy as np
import torch
from torch import nn

from cnn_torch import openblas
from fashion_data import DEFAULT_DATA, batch_indices, load_train

UNITS = 128


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, UNITS, batch_first=True)
        self.logits = nn.Linear(UNITS, 10)
        nn.init.xavier_uniform_(self.lstm.weight_ih_l0)
        nn.init.xavier_uniform_(self.lstm.weight_hh_l0)
        nn.init.zeros_(self.lstm.bias_ih_l0)
        nn.init.zeros_(self.lstm.bias_hh_l0)
        with torch.no_grad():
            self.lstm.bias_ih_l0[UNITS:2 * UNITS] = 1.0  # gates i, f, g, o: the forget bias
        nn.init.xavier_uniform_(self.logits.weight)
        nn.init.zeros_(self.logits.bias)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.logits(h[0])


def step_gflop(batch):
    """Multiply-adds x2 of the matmuls of one step, as bench/rnn_step counts them."""
    g = 4 * UNITS
    forward = 2 * batch * 28 * (28 * g + UNITS * g) + 2 * batch * UNITS * 10
    return (3 * forward - 2 * batch * 28 * 28 * g) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DEFAULT_DATA)
    o = ap.parse_args()
    if o.threads < 1 or o.steps < 1 or o.warmup < 0 or o.batch < 1:
        raise SystemExit("rnn_torch.py: --threads, --steps and --batch must be >= 1, "
                         "--warmup >= 0")
    torch.set_num_interop_threads(o.threads)
    torch.set_num_threads(o.threads)
    blas = openblas()
    if blas:
        blas.openblas_set_num_threads(o.threads)
    torch.manual_seed(o.seed)

    images, labels = load_train(o.data, o.batch, "rnn_torch.py")
    n = images.shape[0]
    x_all = torch.from_numpy(images.reshape(n, 28, 28))
    y_all = torch.from_numpy(labels.astype(np.int64))
    model = Net()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(o.seed)
    it = ((x_all[idx], y_all[idx])
          for idx in batch_indices(n, o.batch, lambda k: torch.randperm(k, generator=gen)))
    times, losses = [], []
    for i in range(o.warmup + o.steps):
        xb, yb = next(it)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if i >= o.warmup:
            times.append(time.perf_counter() - t0)
    q = sorted(times)
    p10, p90 = q[int(0.1 * (len(q) - 1) + 0.5)], q[int(0.9 * (len(q) - 1) + 0.5)]
    med = statistics.median(times)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.get_num_interop_threads()} interop, OpenBLAS threads "
          f"{blas.openblas_get_num_threads() if blas else -1}; loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f}")
    print(f"rnn_torch ms_per_step={med * 1e3:.3f} threads={o.threads} batch={o.batch} "
          f"steps={o.steps} warmup={o.warmup} p10_ms={p10 * 1e3:.3f} p90_ms={p90 * 1e3:.3f} "
          f"gflops={step_gflop(o.batch) / med:.1f} loss_first={losses[0]:.4f} "
          f"loss_last={losses[-1]:.4f} version={torch.__version__}")


if __name__ == "__main__":
    main()
