#!/usr/bin/python3
"""cnn_torch.py: the PyTorch side of the CNN training step (bench/cnn_step on ours).

The network (issue 12): Fashion-MNIST 1x28x28, conv 5x5 SAME 1->32 + ReLU + 2x2 max pool,
conv 5x5 SAME 32->64 + ReLU + 2x2 max pool, flatten, dense 3136->1024 + ReLU, dropout 0.5,
dense 1024->10, softmax cross-entropy, Adam(lr=1e-3, torch's defaults otherwise), batch 128.
Every kernel Glorot-uniform (xavier_uniform_, fans from the kernel's shape, as Keras does),
every bias zero. Real batches: the training images of the gzipped idx files (gzip + numpy,
/255), a seeded permutation, the last partial batch of an epoch dropped.

Measures ms per training step (zero_grad, forward, loss, backward, step, loss.item(), which
waits for the step): the median, p10 and p90 of --steps timed steps after --warmup untimed ones.
--threads T sets torch.set_num_threads(T), torch.set_num_interop_threads(T) and OpenBLAS's
thread count (Debian's torch does its GEMMs in the system OpenBLAS, whose pool
torch.set_num_threads does not size); OPENBLAS_* come from the environment, as for ours.
Run with Debian's /usr/bin/python3 (PyTorch 1.13, python3-torch; bench/peers-setup.sh installs
it). The last line is machine-readable:
  cnn_torch ms_per_step=<median> threads=T batch=B ...
"""
import argparse
import ctypes
import statistics
import time

import numpy as np
import torch
from torch import nn

from fashion_data import DEFAULT_DATA, batch_indices, load_train


def openblas():
    """The OpenBLAS that torch's BLAS calls go to (the same library as ours), or None."""
    for name in ("libopenblas.so.0", "libopenblasp-r0.3.21.so"):
        try:
            lib = ctypes.CDLL(name)
            lib.openblas_get_num_threads.restype = ctypes.c_int
            return lib
        except OSError:
            continue
    return None


def network():
    model = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(1024, 10))
    for m in model:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


def step_gflop(batch):
    """Multiply-adds x2 of one step: forward, the weight gradients, and the input gradients
    that training needs (not conv1's: its input is the image)."""
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
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    o = ap.parse_args()
    if o.threads < 1 or o.steps < 1 or o.warmup < 0 or o.batch < 1:
        raise SystemExit("cnn_torch.py: --threads, --steps and --batch must be >= 1, "
                         "--warmup >= 0")

    # interop first: it can only be set before any parallel work starts
    torch.set_num_interop_threads(o.threads)
    torch.set_num_threads(o.threads)
    blas = openblas()
    if blas:
        blas.openblas_set_num_threads(o.threads)
    torch.manual_seed(o.seed)

    images, labels = load_train(o.data, o.batch, "cnn_torch.py")
    n = images.shape[0]
    dev = torch.device(o.device)  # cuda: the GPU comparison on a device machine
    sync = torch.cuda.synchronize if o.device == "cuda" else (lambda: None)
    x_all = torch.from_numpy(images.reshape(n, 1, 28, 28)).to(dev)
    y_all = torch.from_numpy(labels.astype(np.int64)).to(dev)

    model = network().to(dev)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(o.seed)
    it = ((x_all[idx], y_all[idx])
          for idx in batch_indices(n, o.batch, lambda k: torch.randperm(k, generator=gen).to(dev)))
    times, losses = [], []
    for i in range(o.warmup + o.steps):
        xb, yb = next(it)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # .item() waits for the GPU too
        sync()
        if i >= o.warmup:
            times.append(time.perf_counter() - t0)

    params = sum(p.numel() for p in model.parameters())  # 3274634: the same network on every side
    q = sorted(times)
    p10, p90 = q[int(0.1 * (len(q) - 1) + 0.5)], q[int(0.9 * (len(q) - 1) + 0.5)]
    med = statistics.median(times)
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.get_num_interop_threads()} interop, OpenBLAS threads "
          f"{blas.openblas_get_num_threads() if blas else -1}, mkldnn "
          f"{torch.backends.mkldnn.is_available()}; loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    print(f"cnn_torch device={o.device} ms_per_step={med * 1e3:.3f} threads={o.threads} batch={o.batch} "
          f"steps={o.steps} warmup={o.warmup} p10_ms={p10 * 1e3:.3f} p90_ms={p90 * 1e3:.3f} "
          f"mean_ms={statistics.mean(times) * 1e3:.3f} "
          f"gflops={step_gflop(o.batch) / med:.1f} params={params} loss_first={losses[0]:.4f} "
          f"loss_last={losses[-1]:.4f} version={torch.__version__}")


if __name__ == "__main__":
    main()
