#!/usr/bin/env python3
"""onnx_vs_ort.py: ours against ONNX Runtime on the same ONNX models (issue 14, items 5, 6).

1. Outputs: for each exported model (tfc export --with-variables of a trained store), ONNX
   Runtime's outputs on a test input against `tfc run` of the original store on the same input
   (max abs and max relative difference, and the argmax agreement).
2. Inference: each model imported by ours (bench/onnx_infer: tfc_onnx_import, a session) and
   by ONNX Runtime, at each batch, in interleaved rounds (ours, then onnxruntime, ROUNDS times),
   each round a median of RUNS runs after WARMUP; the figure is the median over the rounds.
   With --nopin, each round also times ours without TFC_PASS_PIN_CHAINS (before and after).
   Same threads: ours STARPU_NCPU=2 (one-thread BLAS per worker), onnxruntime
   intra_op_num_threads=2, inter_op_num_threads=1; OPENBLAS_* as the environment has them.
3. Import time of a large model: ours (tfc_onnx_import, in onnx_infer) against onnxruntime's
   InferenceSession creation, medians of ROUNDS.

    onnx_vs_ort.py --tfc build/src/tfc --infer build/bench/onnx_infer --work DIR \\
        --model mlp=DIR/mlp.onnx:DIR/mlp.db --model cnn=DIR/cnn.onnx:DIR/cnn.db \\
        --input DIR/x.npy --large DIR/big.onnx [--batches 1,128] [--rounds 5] [--runs 50]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort


def session(path):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 2
    o.inter_op_num_threads = 1
    return ort.InferenceSession(path, sess_options=o, providers=["CPUExecutionProvider"])


def check_outputs(args, name, onnx_path, db, x):
    s = session(onnx_path)
    feed = s.get_inputs()[0].name
    theirs = s.run(None, {feed: x})
    outdir = os.path.join(args.work, "out-" + name)
    subprocess.run([args.tfc, "run", db, "--data", "%s=%s" % (feed, args.input), "--out", outdir],
                   check=True, stdout=subprocess.DEVNULL)
    ok = True
    for meta, t in zip(s.get_outputs(), theirs):
        ours = np.load(os.path.join(outdir, meta.name.replace("/", "_") + ".npy"))
        diff = np.abs(ours.astype(np.float64) - t.astype(np.float64))
        rel = float((diff / np.maximum(1.0, np.abs(t))).max()) if diff.size else 0.0
        same_class = float((ours.argmax(-1) == t.argmax(-1)).mean()) if ours.ndim > 1 else 1.0
        good = rel <= 1e-4
        ok &= good
        print("outputs %s %s: shape %s, max abs diff %.3g, max rel diff %.3g, argmax agree %.4f: %s"
              % (name, meta.name, list(t.shape), float(diff.max()) if diff.size else 0.0, rel,
                 same_class, "match" if good else "MISMATCH"))
    return ok


def ours_round(args, path, batch, extra=()):
    r = subprocess.run([args.infer, "run", path, str(batch), str(args.runs), str(args.warmup)]
                       + list(extra),
                       check=True, capture_output=True, text=True,
                       env=dict(os.environ, STARPU_NCPU="2", STARPU_SILENT="1"))
    m = re.search(r"import_ms=([\d.]+) ms_median=([\d.]+) ms_min=([\d.]+)", r.stdout)
    if not m:
        sys.exit("onnx_infer printed no timing: " + r.stdout + r.stderr)
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def ort_round(s, x, runs, warmup):
    feed = s.get_inputs()[0].name
    ms = []
    for i in range(warmup + runs):
        t = time.perf_counter()
        s.run(None, {feed: x})
        if i >= warmup:
            ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms), min(ms)


def timing(args, name, path):
    s = session(path)
    features = [d for d in s.get_inputs()[0].shape[1:]]
    rows = []
    for b in args.batches:
        x = np.random.default_rng(1).random([b] + features, dtype=np.float32)
        ours, theirs, best_o, best_t, nopin = [], [], [], [], []
        for _ in range(args.rounds):
            _, med, best = ours_round(args, path, b)
            ours.append(med)
            best_o.append(best)
            if args.nopin:  # the same binary without the chain-pinning pass
                nopin.append(ours_round(args, path, b, ["nopin"])[1:])
            med, best = ort_round(s, x, args.runs, args.warmup)
            theirs.append(med)
            best_t.append(best)
        mo, mt = statistics.median(ours), statistics.median(theirs)
        bo, bt = min(best_o), min(best_t)
        rows.append((name, b, mo, mt, bo, bt))
        print("inference %s batch %d: ours %.3f ms, onnxruntime %.3f ms, ours/ort %.2f; fastest "
              "runs %.3f and %.3f ms (round medians: ours %s; ort %s)"
              % (name, b, mo, mt, mo / mt, bo, bt, " ".join("%.3f" % v for v in ours),
                 " ".join("%.3f" % v for v in theirs)))
        if nopin:
            print("inference %s batch %d without TFC_PASS_PIN_CHAINS: ours %.3f ms (%.2f of "
                  "onnxruntime), fastest run %.3f ms (round medians: %s)"
                  % (name, b, statistics.median(v[0] for v in nopin),
                     statistics.median(v[0] for v in nopin) / mt, min(v[1] for v in nopin),
                     " ".join("%.3f" % v[0] for v in nopin)))
    return rows


def import_time(args, path):
    size = os.path.getsize(path) / 2**20
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(ours_round(args, path, 1)[0] if args.import_runs else 0)
        t = time.perf_counter()
        session(path)
        theirs.append((time.perf_counter() - t) * 1e3)
    print("import %s (%.1f MiB): ours tfc_onnx_import %.1f ms, onnxruntime InferenceSession "
          "%.1f ms (medians of %d)" % (os.path.basename(path), size, statistics.median(ours),
                                       statistics.median(theirs), args.rounds))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tfc", required=True)
    p.add_argument("--infer", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--input", required=True, help="a .npy test input for the output check")
    p.add_argument("--model", action="append", default=[], help="NAME=MODEL.onnx:STORE.db")
    p.add_argument("--large", help="a large ONNX model whose import is timed")
    p.add_argument("--batches", default="1,128")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--nopin", action="store_true",
                   help="also time ours without the chain-pinning pass, in the same rounds")
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    args.import_runs = True
    print("onnxruntime %s, numpy %s, OPENBLAS: %s" % (
        ort.__version__, np.__version__,
        " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items())
                 if k.startswith("OPENBLAS")) or "(none set)"))
    x = np.load(args.input)
    ok = True
    models = []
    for m in args.model:
        name, rest = m.split("=", 1)
        onnx_path, db = rest.split(":", 1)
        models.append((name, onnx_path))
        ok &= check_outputs(args, name, onnx_path, db, x)
    rows = []
    for name, path in models:
        rows += timing(args, name, path)
    if args.large:
        import_time(args, args.large)
    print("| model | batch | ours ms | onnxruntime ms | ours / onnxruntime | fastest runs: ours, "
          "onnxruntime ms |")
    print("|---|---|---|---|---|---|")
    for name, b, mo, mt, bo, bt in rows:
        print("| %s | %d | %.3f | %.3f | %.2f | %.3f, %.3f |" % (name, b, mo, mt, mo / mt, bo, bt))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
