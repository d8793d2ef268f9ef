#!/bin/sh
# run-opencl.sh: the op sweep (tests/test_ops) on StarPU's OpenCL worker (a CPU OpenCL device
# such as PoCL), three times: in device-coherence mode (TFC_TEST_HOP=opencl: every value a node
# produces is copied through a task pinned to the OpenCL worker, so each edge crosses memory
# nodes and a stale host read shows up as a wrong result), with every op task that has an
# OpenCL kernel pinned to it (TFC_TEST_WHERE=opencl), and alternating OpenCL and CPU
# (TFC_TEST_WHERE=alternate). Then the gradient sweep (tests/test_grad) with every op task
# that has an OpenCL kernel pinned to the OpenCL worker, and the training tests (tests/test_train: SGD, XOR with Adam,
# and a small MLP whose losses and weights must equal a CPU-only run of it) with every session
# on the OpenCL worker and alternating, under each scheduler. Exits 0 when all pass, 1 on a
# failure, 77 (skip) when StarPU finds no OpenCL device.
#
# automake runs this from the build directory (the script itself may live in the source
# directory); the test binaries are the build directory's tests/test_ops, tests/test_grad and
# tests/test_train.

find_bin() {
    for cand in "${builddir:-.}/tests/$1" "$(dirname "$0")/$1"; do
        if [ -f "$cand" ] && [ -x "$cand" ]; then
            echo "$cand"
            return 0
        fi
    done
    echo "run-opencl.sh: tests/$1 not found; run it from the build directory" >&2
    return 1
}
bin=$(find_bin test_ops) || exit 99
train=$(find_bin test_train) || exit 99

STARPU_OPENCL_ON_CPUS=1
STARPU_NCPU=1
TFC_TEST_SCHEDS=${TFC_TEST_SCHEDS:-"eager dmda"}
export STARPU_OPENCL_ON_CPUS STARPU_NCPU TFC_TEST_SCHEDS
unset TFC_TEST_HOP TFC_TEST_WHERE

# The sanitizer pass (make check-sanitizers sets SANITIZER_PASS) looks for memory errors in
# the host code: every OpenCL kernel's host side runs in the TFC_TEST_WHERE=opencl passes, so
# it skips the device-coherence and alternating passes (the plain pass checks those results;
# under ASan they had made this script 12 of the sanitizer pass's minutes on 2 cores).
wheres="opencl alternate"
if [ -n "${SANITIZER_PASS:-}" ]; then
    wheres=opencl
else
    TFC_TEST_HOP=opencl "$bin"
    rc=$?
    [ $rc -eq 0 ] || exit $rc
fi
for where in $wheres; do
    echo "run-opencl.sh: TFC_TEST_WHERE=$where"
    TFC_TEST_WHERE=$where "$bin"
    rc=$?
    [ $rc -eq 0 ] || exit $rc
done
grad=$(find_bin test_grad) || exit 99
echo "run-opencl.sh: tests/test_grad, TFC_TEST_WHERE=opencl (the gradient sweep on the device)"
TFC_TEST_WHERE=opencl STARPU_SCHED=eager "$grad"
rc=$?
[ $rc -eq 0 ] || exit $rc
for where in $wheres; do
    for sched in $TFC_TEST_SCHEDS; do
        echo "run-opencl.sh: tests/test_train, TFC_TEST_WHERE=$where STARPU_SCHED=$sched"
        TFC_TEST_WHERE=$where STARPU_SCHED=$sched "$train"
        rc=$?
        [ $rc -eq 0 ] || exit $rc
    done
done
exit 0
