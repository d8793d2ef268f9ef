#!/usr/bin/env python3
"""torch_onnx.py: a model exported from PyTorch (torch.onnx.export) through our tool (issue 14):
a small CNN (conv 3x3 + ReLU + 2x2 max pool, conv + ReLU + global average pool, flatten, dense)
and an MLP with random weights are exported at ONNX opset 13 with a dynamic batch axis; then
`tfc import` stores each, `tfc run` computes it on a random batch, and the outputs must match
PyTorch's within rtol 1e-4 (same maths, different kernels and summation orders). The stored
model is exported back (`tfc export`) and, when onnxruntime imports, run there too.

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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tfc", required=True)
    p.add_argument("--work", default=None)
    args = p.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="torch_onnx.")
    ok = check(args, "torch_cnn", SmallCNN(), (4, 1, 28, 28))
    ok &= check(args, "torch_mlp", mlp(), (8, 20))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
