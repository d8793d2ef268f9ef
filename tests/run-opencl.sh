#!/bin/sh
# run-opencl.sh: the op sweep (tests/test_ops) on StarPU's OpenCL worker (a CPU OpenCL device
# such as PoCL), three times: in device-coherence mode (TFC_TEST_HOP=opencl: every value a node
# produces is copied through a task pinned to the OpenCL worker, so each edge crosses memory
# nodes and a stale host read shows up as a wrong result), with every op task that has an
# OpenCL kernel pinned to it (TFC_TEST_WHERE=opencl), and alternating OpenCL and CPU
# (TFC_TEST_WHERE=alternate). Exits 0 when all pass, 1 on a failure, 77 (skip) when StarPU
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
TFC_TEST_SCHEDS=${TFC_TEST_SCHEDS:-"eager dmda"}
export STARPU_OPENCL_ON_CPUS STARPU_NCPU TFC_TEST_SCHEDS
unset TFC_TEST_HOP TFC_TEST_WHERE

TFC_TEST_HOP=opencl "$bin"
rc=$?
[ $rc -eq 0 ] || exit $rc
for where in opencl alternate; do
    echo "run-opencl.sh: TFC_TEST_WHERE=$where"
    TFC_TEST_WHERE=$where "$bin"
    rc=$?
    [ $rc -eq 0 ] || exit $rc
done
exit 0
