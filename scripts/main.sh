#!/bin/bash
# main.sh: the main job on a fresh Debian 12 machine (as root): installs the packages (the
# Fashion-MNIST data set among them), builds tfc-starpu, and trains the flagship example, a
# 784-256-128-10 MLP with Adam, for a short run (3 epochs; pass --epochs 10 for the full one).
# Extra arguments go to the example: bash scripts/main.sh --epochs 10 --seed 7
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/deps.sh
bash scripts/build.sh build
export STARPU_SILENT=${STARPU_SILENT:-1}
echo "==> examples/mnist_mlp $*"
build/examples/mnist_mlp --epochs 3 "$@"
