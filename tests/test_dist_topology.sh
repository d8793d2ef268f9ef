#!/bin/bash
# test_dist_topology.sh: `tfc info --topology` (issue 15, item 6). It must print hwloc's view of
# the node (packages, cores, NUMA nodes, GPUs, the CPUs the process may run on) and one line per
# StarPU worker with the PU it is bound to; with STARPU_WORKERS_GETBIND=1 under a launcher's
# binding (taskset here, as mpirun or srun bind a rank) the worker must be on a PU the process
# may run on, which is how a rank's binding is checked before a job. Extra arguments are a
# usage error. make check sets STARPU_WORKERS_NOBIND=1: the binding check unsets it.
set -u
tfc=$(pwd)/src/tfc
[ -x "$tfc" ] || { echo "FAIL: $tfc is not built (run from the build directory)"; exit 1; }
fail=0
out=$(STARPU_NCPU=1 "$tfc" info --topology 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: tfc info --topology exited $rc"; exit 1; }
for want in "^machine: [0-9]+ packages?, [0-9]+ cores, [0-9]+ processing units" \
            "NUMA node L#0" "GPUs?:? " "this process may run on PUs L#" "^StarPU workers: 1$" \
            "worker 0 .*CPU_WORKER"; do
    echo "$out" | grep -Eq "$want" || { echo "FAIL: no line matching '$want'"; fail=1; }
done
"$tfc" info --topology extra > /dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: tfc info --topology extra exited $rc, not 2 (usage)"; fail=1; }

cpus=$(nproc --all 2>/dev/null || echo 1)
if command -v taskset > /dev/null && [ "$cpus" -ge 2 ]; then
    last=$((cpus - 1))
    out=$(env -u STARPU_WORKERS_NOBIND STARPU_NCPU=1 STARPU_WORKERS_GETBIND=1 \
          taskset -c $last "$tfc" info --topology 2>&1)
    allowed=$(echo "$out" | sed -n 's/^this process may run on PUs L#\([0-9]*\)$/\1/p')
    bound=$(echo "$out" | sed -n 's/.*worker 0 .*: PU L#\([0-9]*\),.*/\1/p')
    if [ -n "$allowed" ] && [ "$bound" = "$allowed" ]; then
        echo "ok: bound by taskset to CPU $last (PU L#$allowed): StarPU's worker is on PU L#$bound"
    else
        echo "FAIL: bound by taskset to CPU $last (PU L#$allowed), worker on PU L#$bound:"
        echo "$out"; fail=1
    fi
else
    echo "note: no taskset or one CPU: the binding check is skipped"
fi
exit $fail
