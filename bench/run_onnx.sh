#!/bin/bash
# run_onnx.sh: ours against ONNX Runtime on the same ONNX models (issue 14, items 5 and 6). Trains
# the flagship MLP one epoch (examples/mnist_mlp) and the flagship CNN STEPS steps
# (examples/fashion_cnn) on Fashion-MNIST, exports both with `tfc export --with-variables`,
# writes a large MLP (784-4096-4096-2048-10, about 113 MB of float32 weights) with
# bench/onnx_infer, then runs bench/onnx_vs_ort.py: ONNX Runtime's outputs against `tfc run` of
# the stored models, inference of the imported models at batch 1 and 128 (interleaved rounds,
# medians; ours STARPU_NCPU=2, onnxruntime intra_op_num_threads=2; OPENBLAS_* as the
# environment has them), and the large model's import time. It records the machine and the
# versions. onnxruntime must import in ORT_PYTHON (bench/.venv: bench/peers-setup.sh installs it).
# TFC_ROW_SPLIT_MIN=64 in the environment times ours with the MLP split into a chain of rows per
# worker (off by default: bench/RESULTS.md, ONNX run 4).
#
#   bench/run_onnx.sh [BUILD_DIR]       (default: build)
#   ROUNDS=5 RUNS=50 WARMUP=5 STEPS=100 BATCHES=1,128 LARGE=784,4096,4096,2048,10 NOPIN=1 \
#       ORT_PYTHON=bench/.venv/bin/python WORK=/tmp/x bench/run_onnx.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${ROUNDS:-5}
RUNS=${RUNS:-50}
WARMUP=${WARMUP:-5}
STEPS=${STEPS:-100}
BATCHES=${BATCHES:-1,128}
LARGE=${LARGE:-784,4096,4096,2048,10}
ORT_PYTHON=${ORT_PYTHON:-bench/.venv/bin/python}
NOPIN=${NOPIN:-0}   # 1: each round also times ours without TFC_PASS_PIN_CHAINS
WORK=${WORK:-$(mktemp -d /tmp/run_onnx.XXXXXX)}
D=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p "$WORK"
export STARPU_SILENT=1

"$ORT_PYTHON" -c 'import onnxruntime' 2>/dev/null || {
    echo "run_onnx.sh: onnxruntime does not import in $ORT_PYTHON: run bench/peers-setup.sh" \
         "(or ORT_PYTHON=a python that has it)" >&2; exit 1; }
[ -r "$D/t10k-images-idx3-ubyte.gz" ] || { echo "run_onnx.sh: no Fashion-MNIST in $D" >&2; exit 1; }
make -s -C "$BUILD" bench examples/mnist_mlp examples/fashion_cnn src/tfc >/dev/null

echo "## machine"
echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1); $(nproc) cores online;" \
     "memory $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo);" \
     "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "StarPU $(pkg-config --modversion starpu-1.3 2>/dev/null || echo '?'), OpenBLAS" \
     "$(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?')," \
     "python $("$ORT_PYTHON" -c 'import sys; print(sys.version.split()[0])')"

echo "## models (in $WORK)"
[ -s "$WORK/mlp.db" ] || "$BUILD/examples/mnist_mlp" --epochs 1 --quiet --data "$D" --save "$WORK/mlp.db" | tail -1
[ -s "$WORK/cnn.db" ] || "$BUILD/examples/fashion_cnn" --max-steps "$STEPS" --quiet --data "$D" --save "$WORK/cnn.db" | tail -1
for m in mlp cnn; do
    "$BUILD/src/tfc" export "$WORK/$m.db" "$WORK/$m.onnx" --with-variables | head -1
done
[ -s "$WORK/big.onnx" ] || "$BUILD/bench/onnx_infer" mlp "$WORK/big.onnx" "$LARGE"
# the first 256 test images as float32 [256, 784] in [0, 1]
"$ORT_PYTHON" - "$D/t10k-images-idx3-ubyte.gz" "$WORK/x.npy" <<'PY'
import gzip, sys, numpy as np
raw = np.frombuffer(gzip.open(sys.argv[1]).read()[16:], dtype=np.uint8)
np.save(sys.argv[2], (raw[:256 * 784].reshape(256, 784) / np.float32(255)).astype(np.float32))
PY

echo "## ours against onnxruntime"
"$ORT_PYTHON" bench/onnx_vs_ort.py --tfc "$BUILD/src/tfc" --infer "$BUILD/bench/onnx_infer" \
    --work "$WORK" --input "$WORK/x.npy" --batches "$BATCHES" --rounds "$ROUNDS" --runs "$RUNS" \
    --warmup "$WARMUP" --model "mlp=$WORK/mlp.onnx:$WORK/mlp.db" \
    --model "cnn=$WORK/cnn.onnx:$WORK/cnn.db" --large "$WORK/big.onnx" \
    $([ "$NOPIN" = 1 ] && echo --nopin)
