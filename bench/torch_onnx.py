#!/usr/bin/env python3
"""torch_onnx.py: a model exported from PyTorch (torch.onnx.export) through our tool (issue 14):
a small CNN (conv 3x3 + ReLU + 2x2 max pool, conv + ReLU + global average pool, flatten, dense)
and an MLP with random weights are exported at ONNX opset 13 with a dynamic batch axis; then
`tfc import` stores each, `tfc run` computes it on a random batch, and the outputs must match
PyTorch's within rtol 1e-4 (same maths, different kernels and summation orders). The stored
model is exported back (`tfc export`) and, when onnxruntime imports, run there too. The MLP
(logits out) is then fine-tuned: `tfc import --trainable --loss softmax_cross_entropy`, one
`tfc train` SGD step matched against torch.optim.SGD's, more epochs lower the loss.

    python3 bench/torch_onnx.py --tfc build/src/tfc [--work DIR]

Needs PyTorch with its ONNX exporter (Debian's python3-torch, or torch from PyPI); says so and
exits 77 when torch does not import.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import torch.nn as nn
except ImportError:
    print("torch_onnx.py: torch does not import here (install python3-torch): skipped")
    sys.exit(77)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.relu(self.c2(x)).mean(dim=(2, 3))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


def mlp():
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh(),
                         nn.Linear(32, 5))


def check(args, name, model, shape):
    torch.manual_seed(0)
    model.eval()
    x = torch.rand(*shape)
    onnx_path = os.path.join(args.work, name + ".onnx")
    db = os.path.join(args.work, name + ".db")
    torch.onnx.export(model, x, onnx_path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, opset_version=13)
    with torch.no_grad():
        want = model(x).numpy()
    np.save(os.path.join(args.work, name + "-x.npy"), x.numpy())
    if os.path.exists(db):
        os.remove(db)
    subprocess.run([args.tfc, "import", onnx_path, db], check=True)
    out = os.path.join(args.work, name + "-out")
    subprocess.run([args.tfc, "run", db, "--data", "input=" + os.path.join(args.work, name + "-x.npy"),
                    "--out", out], check=True, stdout=subprocess.DEVNULL)
    got = np.load(os.path.join(out, "output.npy"))
    diff = float(np.abs(got - want).max())
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-6)
    print("%s: PyTorch %s -> tfc import/run: max abs diff %.3g: %s"
          % (name, torch.__version__, diff, "match" if ok else "MISMATCH"))
    back = os.path.join(args.work, name + "-back.onnx")
    subprocess.run([args.tfc, "export", db, back], check=True, stdout=subprocess.DEVNULL)
    try:
        import onnxruntime as ort
        r = ort.InferenceSession(back, providers=["CPUExecutionProvider"]).run(None, {"input": x.numpy()})[0]
        ok_back = np.allclose(r, want, rtol=1e-4, atol=1e-6)
        print("%s: exported back by tfc export, run by onnxruntime %s: %s"
              % (name, ort.__version__, "match" if ok_back else "MISMATCH"))
        ok &= ok_back
    except ImportError:
        print("%s: exported back to %s (onnxruntime not importable: not run)" % (name, back))
    return ok


def finetune(args, model):
    """The MLP's export imported with --trainable --loss softmax_cross_entropy (its output is
    logits): `tfc train` with SGD, one step on the whole batch, must give the outputs of one
    torch.optim.SGD step on the same batch (same loss, same gradient); then more epochs must
    lower the loss that `tfc eval` reports, and the fine-tuned store exports."""
    torch.manual_seed(1)
    n, lr = 64, 0.1
    x = torch.rand(n, 20)
    y = torch.randint(0, 5, (n,), dtype=torch.int32)
    xf, yf = (os.path.join(args.work, f) for f in ("ft-x.npy", "ft-y.npy"))
    np.save(xf, x.numpy())
    np.save(yf, y.numpy())
    db = os.path.join(args.work, "torch_mlp-ft.db")
    if os.path.exists(db):
        os.remove(db)
    subprocess.run([args.tfc, "import", os.path.join(args.work, "torch_mlp.onnx"), db,
                    "--trainable", "--loss", "softmax_cross_entropy", "--labels", "labels",
                    "--optimizer", "sgd", "--lr", str(lr)], check=True, stdout=subprocess.DEVNULL)
    data = ["--data", "input=" + xf, "--data", "labels=" + yf]
    subprocess.run([args.tfc, "train", db] + data + ["--batch", str(n), "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y.long()).backward()
    opt.step()
    with torch.no_grad():
        want = model(x).numpy()
    out = os.path.join(args.work, "torch_mlp-ft-out")
    subprocess.run([args.tfc, "run", db, "--data", "input=" + xf, "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    got = np.load(os.path.join(out, "output.npy"))
    ok = np.allclose(got, want, rtol=1e-4, atol=1e-5)
    diff = float(np.abs(got - want).max())
    print("torch_mlp: one SGD step of tfc train after tfc import --loss vs torch.optim.SGD: "
          "max abs diff %.3g: %s" % (diff, "match" if ok else "MISMATCH"))

    def loss():
        r = subprocess.run([args.tfc, "eval", db] + data, check=True, capture_output=True,
                           text=True).stdout
        return float([l for l in r.splitlines() if l.startswith("loss: ")][0][6:])
    before = loss()
    subprocess.run([args.tfc, "train", db] + data + ["--batch", "16", "--epochs", "20", "--quiet"],
                   check=True, stdout=subprocess.DEVNULL)
    after = loss()
    subprocess.run([args.tfc, "export", db, os.path.join(args.work, "torch_mlp-ft.onnx"),
                    "--with-variables"], check=True, stdout=subprocess.DEVNULL)
    print("torch_mlp: fine-tuned 19 more epochs by tfc train: loss %.4f -> %.4f: %s; exported"
          % (before, after, "falls" if after < before else "DOES NOT FALL"))
    return ok and after < before


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tfc", required=True)
    p.add_argument("--work", default=None)
    args = p.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="torch_onnx.")
    ok = check(args, "torch_cnn", SmallCNN(), (4, 1, 28, 28))
    model = mlp()
    ok &= check(args, "torch_mlp", model, (8, 20))
    ok &= finetune(args, model)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
