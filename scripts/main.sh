#!/bin/bash
# main.sh: the main job on a fresh Debian 12 machine (as root): installs the packages, builds
# tfc-starpu and runs the example programs. Until the training issue lands the flagship is the
# linear regression trained by hand-written updates, plus a two-layer forward pass.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/deps.sh
bash scripts/build.sh build
export STARPU_SILENT=${STARPU_SILENT:-1}
echo "==> examples/two_layer"
build/examples/two_layer 8
echo "==> examples/linreg"
build/examples/linreg
