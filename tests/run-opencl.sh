#!/bin/sh
# run-opencl.sh: the op sweep (tests/test_ops) in device-coherence mode: every value a node
# produces is copied through a task pinned to StarPU's OpenCL worker (a CPU OpenCL device such
# as PoCL), so each edge of every test graph crosses memory nodes and a stale host read shows
# up as a wrong result. Exits with test_ops' status: 0 pass, 1 fail, 77 (skip) when StarPU
# finds no OpenCL device.
#
# automake runs this from the build directory (the script itself may live in the source
# directory); the test binary is the build directory's tests/test_ops.

bin=
for cand in "${builddir:-.}/tests/test_ops" "$(dirname "$0")/test_ops"; do
    if [ -f "$cand" ] && [ -x "$cand" ]; then
        bin=$cand
        break
    fi
done
if [ -z "$bin" ]; then
    echo "run-opencl.sh: tests/test_ops not found; run it from the build directory" >&2
    exit 99
fi

STARPU_OPENCL_ON_CPUS=1
STARPU_NCPU=1
TFC_TEST_HOP=opencl
TFC_TEST_SCHEDS=${TFC_TEST_SCHEDS:-"eager dmda"}
export STARPU_OPENCL_ON_CPUS STARPU_NCPU TFC_TEST_HOP TFC_TEST_SCHEDS
exec "$bin"
