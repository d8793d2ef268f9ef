#!/bin/bash
# deps.sh: installs the Debian 12 packages tfc-starpu needs to build and test (as root);
# clang with its libFuzzer runtime and llvm's symbolizer are for scripts/fuzz.sh.
# protobuf-c (ONNX import) and libonnx-testdata (its conformance test) are optional too.
# libdnnl-dev (oneDNN) runs the CPU convolutions; the library builds without it (im2col).
# openmpi-bin and libopenmpi-dev: distributed training on StarPU-MPI (configure --enable-mpi).
# Safe to run again: when everything is installed it does nothing.
set -euo pipefail
PACKAGES="build-essential autoconf automake libtool pkg-config libstarpu-dev libopenblas-dev
  libhwloc-dev libsqlite3-dev sqlite3 libcunit1-dev zlib1g-dev pocl-opencl-icd
  ocl-icd-opencl-dev opencl-headers dataset-fashion-mnist libdnnl-dev
  clang libclang-rt-dev llvm protobuf-c-compiler libprotobuf-c-dev libonnx-testdata
  openmpi-bin libopenmpi-dev"
missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "==> installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq $missing
fi
