#!/usr/bin/python3
"""mlp_torch.py: the PyTorch side of bench/mlp_step.c.

The flagship network (784-256-128-10 ReLU MLP, nn.Linear, Glorot-uniform weights, zero biases),
torch.optim.Adam(lr=1e-3), CrossEntropyLoss, Fashion-MNIST read from the same gzipped idx files
(gzip + numpy, /255), batch 128, shuffled. Measures
  (a) ms per training step (zero_grad, forward, loss, backward, step, loss.item()): median of
      --steps timed steps after --warmup steps; also the same without loss.item();
  (b) examples/s of one full epoch end to end with its own batching (a fresh permutation,
      index the float32 tensors, 469 steps, the last one partial);
  (c) the fraction of that epoch spent building batches (there is no loader thread: the
      batching time is all waiting);
  (d) peak RSS (resource.getrusage).
--device cuda runs it on the GPU (for the GPU comparison on a device machine; steps are then
timed to a torch.cuda.synchronize()).
--threads N sets torch.set_num_threads(N) and OpenBLAS's thread count (torch's nn.Linear
runs OpenBLAS's sgemm here, whose own pool torch.set_num_threads does not size).
Run with Debian's /usr/bin/python3 (PyTorch 1.13). Last line: torch step_ms_median=...
"""
import argparse
import ctypes
import gzip
import os
import resource
import statistics
import time

import numpy as np
import torch
from torch import nn

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise SystemExit(f"{path}: not a uint8 idx file")
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    o = ap.parse_args()

    torch.set_num_threads(o.threads)
    blas = openblas()
    blas_before = blas.openblas_get_num_threads() if blas else -1
    if blas:
        blas.openblas_set_num_threads(o.threads)
    torch.manual_seed(o.seed)

    t_load = time.perf_counter()
    images = read_idx(os.path.join(o.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(o.data, "train-labels-idx1-ubyte.gz"))
    n = images.shape[0]
    x_all = torch.from_numpy(images.reshape(n, 784).astype(np.float32) / np.float32(255.0))
    y_all = torch.from_numpy(labels.astype(np.int64))
    del images
    dev = torch.device(o.device)
    x_all, y_all = x_all.to(dev), y_all.to(dev)
    sync = torch.cuda.synchronize if o.device == "cuda" else (lambda: None)
    t_load = time.perf_counter() - t_load

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10)).to(dev)
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(o.seed)

    def batches(drop_last):
        while True:
            perm = torch.randperm(n, generator=gen).to(dev)
            stop = n - n % o.batch if drop_last else n
            for i in range(0, stop, o.batch):
                idx = perm[i:i + o.batch]
                yield x_all[idx], y_all[idx]

    def step(xb, yb, fetch):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        if fetch:
            return loss.item()
        sync()
        return None

    # (a) step time: warm-up, then timed steps with the loss fetched, then without
    it = batches(True)
    t_fetch, t_nofetch, first_loss, last_loss = [], [], None, None
    for phase, count in ((0, o.warmup), (1, o.steps), (2, o.steps)):
        for _ in range(count):
            xb, yb = next(it)
            t0 = time.perf_counter()
            lv = step(xb, yb, phase != 2)
            dt = time.perf_counter() - t0
            if phase == 1:
                t_fetch.append(dt)
            elif phase == 2:
                t_nofetch.append(dt)
            if lv is not None:
                first_loss = lv if first_loss is None else first_loss
                last_loss = lv
    med = statistics.median(t_fetch) * 1e3
    med_nf = statistics.median(t_nofetch) * 1e3
    q = sorted(t_fetch)
    p10, p90 = q[int(0.1 * (len(q) - 1) + 0.5)] * 1e3, q[int(0.9 * (len(q) - 1) + 0.5)] * 1e3

    # (b), (c): one full epoch end to end, its own batching, the last batch partial
    t_epoch = time.perf_counter()
    waited = 0.0
    perm = torch.randperm(n, generator=gen).to(dev)
    seen, loss_sum, steps = 0, 0.0, 0
    for i in range(0, n, o.batch):
        t0 = time.perf_counter()
        idx = perm[i:i + o.batch]
        xb, yb = x_all[idx], y_all[idx]
        waited += time.perf_counter() - t0
        loss_sum += step(xb, yb, True)
        seen += xb.shape[0]
        steps += 1
    t_epoch = time.perf_counter() - t_epoch

    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    data_mb = (x_all.numel() * 4 + y_all.numel() * 8) / 1048576.0
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, OpenBLAS threads "
          f"{blas_before} -> {blas.openblas_get_num_threads() if blas else -1}; data loaded in "
          f"{t_load:.2f} s; loss {first_loss:.4f} -> {last_loss:.4f}; epoch mean loss "
          f"{loss_sum / steps:.4f} over {seen} examples; step ms p10 {p10:.3f} p90 {p90:.3f}")
    print(f"torch device={o.device} threads={o.threads} step_ms_median={med:.4f} "
          f"step_ms_mean={statistics.mean(t_fetch) * 1e3:.4f} step_nofetch_ms_median={med_nf:.4f} "
          f"epoch_s={t_epoch:.3f} epoch_examples_per_s={seen / t_epoch:.1f} "
          f"wait_frac={waited / t_epoch:.5f} peak_rss_mb={peak_rss_mb:.1f} data_mb={data_mb:.1f}")


if __name__ == "__main__":
    main()
