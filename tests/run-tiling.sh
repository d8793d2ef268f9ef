#!/bin/sh
# run-tiling.sh: tiling (sched/tiling.c) beyond tests/test_tiling's own cases: the op sweep
# (tests/test_ops) with every matmul split into 2x2 tiles (TFC_TILE_MIN=1 TFC_TILE_SIZE=2) under
# eager and dmdas; the op and gradient sweeps (tests/test_grad) with 1x1 tiles, so that every
# convolution and pooling case (batches of 1 to 3) runs one task per image; then
# tests/test_tiling with StarPU's OpenCL worker (a CPU OpenCL device such as PoCL; its OpenCL
# case is skipped when StarPU finds none). Exits 0 when all pass, 1 on a
# failure. automake runs this from the build directory.

dir=
for cand in "${builddir:-.}/tests" "$(dirname "$0")"; do
    if [ -x "$cand/test_ops" ] && [ -x "$cand/test_tiling" ] && [ -x "$cand/test_grad" ]; then
        dir=$cand
        break
    fi
done
if [ -z "$dir" ]; then
    echo "run-tiling.sh: tests/test_ops, test_grad or test_tiling not found; run it from the build" \
         "directory" >&2
    exit 99
fi
unset TFC_TEST_HOP TFC_TEST_WHERE
# the sanitizer pass (make check-sanitizers) runs each sweep under one scheduler: the
# schedulers' coverage is the plain pass's; the sanitizers look for memory errors
scheds="eager dmdas"
[ -n "${SANITIZER_PASS:-}" ] && scheds=dmdas

echo "run-tiling.sh: test_ops with TFC_TILE_MIN=1 TFC_TILE_SIZE=2"
TFC_TILE_MIN=1 TFC_TILE_SIZE=2 TFC_TEST_SCHEDS="$scheds" "$dir/test_ops" || exit 1
echo "run-tiling.sh: test_ops and test_grad with TFC_TILE_MIN=1 TFC_TILE_SIZE=1"
# (the sanitizer pass leaves this sweep out: the tiling code it runs is the sweep above's)
if [ -z "${SANITIZER_PASS:-}" ]; then
    TFC_TILE_MIN=1 TFC_TILE_SIZE=1 TFC_TEST_SCHEDS="eager" "$dir/test_ops" || exit 1
fi
TFC_TILE_MIN=1 TFC_TILE_SIZE=1 "$dir/test_grad" || exit 1
echo "run-tiling.sh: test_tiling with STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=1"
STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=1 "$dir/test_tiling" || exit 1
exit 0
