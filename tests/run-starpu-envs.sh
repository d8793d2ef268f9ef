#!/bin/sh
# run-starpu-envs.sh: make check must pass under any valid STARPU_ setting a user may have
# exported, and a process may start StarPU several times with different workers (issue 11).
# Reruns the scheduler, report and environment tests and the op sweep (tests/test_ops under
# the setting's scheduler only) under six settings: 1 and 2 CPU workers, with and without the
# OpenCL device (PoCL, STARPU_OPENCL_ON_CPUS=1; skipped by the tests that need it when there is
# none), and the schedulers eager, lws, random, dmda, dmdas and prio. The fourth is the setting
# under which tests/test_sched used to abort (a profiling total kept from a StarPU with more
# workers). Each setting gets its own StarPU home, so bus models of different worker sets do
# not replace each other. Exits 0 when all pass, else the first failing program's status.
#
# automake runs this from the build directory (the script itself may live in the source
# directory); the test binaries are the build directory's.

find_bin() {
    for cand in "${builddir:-.}/tests/$1" "$(dirname "$0")/$1"; do
        if [ -f "$cand" ] && [ -x "$cand" ]; then
            echo "$cand"
            return 0
        fi
    done
    echo "run-starpu-envs.sh: tests/$1 not found; run it from the build directory" >&2
    return 1
}
progs=""
for p in test_sched test_report test_env test_ops; do
    bin=$(find_bin $p) || exit 99
    progs="$progs $bin"
done

home=${STARPU_HOME:-$PWD/tests/starpu-home/run-starpu-envs}
# the settings below say everything about workers and scheduler
unset STARPU_NCPU STARPU_NCPUS STARPU_NCUDA STARPU_NOPENCL STARPU_OPENCL_ON_CPUS STARPU_SCHED
unset TFC_TEST_HOP TFC_TEST_WHERE
# Under LeakSanitizer: a process that never loads PoCL (STARPU_NOPENCL=0) has hwloc unload its
# PCI plugin at StarPU's shutdown, leaving libpciaccess state reachable from nothing: a report
# with no frames (<unknown module>) that no suppression can name. Not ours; PCI is not needed.
if [ -n "${ASAN_OPTIONS+set}" ]; then
    HWLOC_PLUGINS_BLACKLIST=${HWLOC_PLUGINS_BLACKLIST:-hwloc_pci}
    export HWLOC_PLUGINS_BLACKLIST
fi
# The sanitizer pass (make check-sanitizers sets SANITIZER_PASS) keeps the first and the fifth
# setting: one CPU worker, and two with the OpenCL device under a perfmodel scheduler. The
# others differ in scheduling, which the plain pass checks; the sanitizers look for memory errors.
n=0
for setting in \
    "STARPU_NCPU=1 STARPU_SCHED=eager" \
    "STARPU_NCPU=2 STARPU_SCHED=lws" \
    "STARPU_NCPU=2 STARPU_SCHED=random" \
    "STARPU_OPENCL_ON_CPUS=1 STARPU_NOPENCL=1 STARPU_NCPU=1 STARPU_SCHED=dmda" \
    "STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=2 STARPU_SCHED=dmdas" \
    "STARPU_OPENCL_ON_CPUS=1 STARPU_NOPENCL=0 STARPU_NCPU=2 STARPU_SCHED=prio"; do
    n=$((n + 1))
    if [ -n "${SANITIZER_PASS:-}" ] && [ $n != 1 ] && [ $n != 5 ]; then
        continue
    fi
    sched=${setting##*STARPU_SCHED=}
    for bin in $progs; do
        echo "run-starpu-envs.sh: $setting: $(basename "$bin")"
        # shellcheck disable=SC2086 # the setting is a list of NAME=VALUE words
        env $setting STARPU_HOME="$home/$n" TFC_TEST_SCHEDS="$sched" "$bin"
        rc=$?
        if [ $rc -ne 0 ]; then
            echo "run-starpu-envs.sh: FAILED ($rc): $setting $(basename "$bin")"
            exit $rc
        fi
    done
done
exit 0
