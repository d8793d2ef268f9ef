#!/bin/sh
# test_cflow_opencl.sh: gradients through cond and while_loop (tests/test_cflow_grad: finite
# differences in float64, the unrolled and static twins, training, stored loops, nesting) on
# StarPU's OpenCL worker (a CPU OpenCL device such as PoCL): with every op task that has an
# OpenCL kernel pinned to it (TFC_TEST_WHERE=opencl; the twins bit for bit) and alternating
# OpenCL and CPU (TFC_TEST_WHERE=alternate; the twins within the tolerance test_cflow_grad.c
# states). The op and gradient sweeps' cond/while cases run under OpenCL in run-opencl.sh.
# Exits 0 when both pass, 1 on a failure, 77 (skip) when StarPU finds no OpenCL device.
# automake runs this from the build directory; the test binary is its tests/test_cflow_grad.
bin=${builddir:-.}/tests/test_cflow_grad
[ -x "$bin" ] || { echo "test_cflow_opencl.sh: $bin not found; run it from the build directory" >&2; exit 99; }
STARPU_OPENCL_ON_CPUS=1
STARPU_NCPU=1
export STARPU_OPENCL_ON_CPUS STARPU_NCPU
unset STARPU_NOPENCL
for where in opencl alternate; do
    echo "test_cflow_opencl.sh: tests/test_cflow_grad, TFC_TEST_WHERE=$where"
    TFC_TEST_WHERE=$where "$bin"
    rc=$?
    [ $rc -eq 0 ] || exit $rc
done
exit 0
