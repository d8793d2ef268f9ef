#!/bin/bash
# test_dist_bind_tool.sh: `tfc info --topology` under mpirun -np 2 (issue 15, item 6). Each rank
# starts a distributed context, whose ranks share the node's cores out (sched/dist_bind.c), and
# must print where its workers, the MPI thread and the loader run, or why nothing was bound
# (one rank alone on the node, with 2 cores or more, is bound: its worker and MPI thread must be
# on the planned PUs, as StarPU and the system report them):
# on a node with fewer than 2 cores per rank (this 2-core machine) it falls back to no binding,
# said once on stderr (by the node's first rank) and per rank in the report, StarPU binds no
# worker either, and the job still runs. With 4 cores or more the ranks' cores must differ. TFC_DIST_BIND=0 and the user's own
# binding (STARPU_WORKERS_NOBIND, which make check sets) leave StarPU alone, and say so. And
# tests/dist_mlp trained under the binding (1 rank bound, 2 ranks in the fallback) keeps the
# bits of its one-process reference.
# Exits 77 (skipped) without mpirun or with a library built without MPI.
set -u
. "$(dirname "$0")/lib_setup.sh"
tfc=$build/src/tfc
need_built "$tfc"
need_command mpirun
make_work bind
mpi_setup
mpi="$mpi 2"
export STARPU_NCPU=1
fail=0
run() { # run NAME ENV...: tfc info --topology on 2 ranks, stdout to NAME.out, stderr NAME.err
    local name=$1; shift
    env "$@" $mpi "$tfc" info --topology > "$work/$name.out" 2> "$work/$name.err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        if grep -q "built without StarPU-MPI" "$work/$name.err"; then
            echo "SKIP: the library was built without MPI"; exit 77
        fi
        echo "FAIL: $name: mpirun -np 2 tfc info --topology exited $rc"; cat "$work/$name.err"
        fail=1
    fi
}
want() { # want NAME REGEX: a line of NAME.out matches
    grep -Eq "$2" "$work/$1.out" || { echo "FAIL: $1: no line matching '$2'"; fail=1; }
}

run auto -u STARPU_WORKERS_NOBIND
grep -q "built without StarPU-MPI" "$work/auto.out" && { echo "SKIP: the library was built without MPI"; exit 77; }
cat "$work/auto.out" "$work/auto.err"
cores=$(grep -m1 '^rank 0: machine:' "$work/auto.out" | sed 's/.* \([0-9]*\) cores.*/\1/')
for r in 0 1; do want auto "^rank $r: StarPU workers: 1$"; done
if grep -q "binding: none" "$work/auto.out"; then
    # the fallback: only when a rank's share is under 2 cores, said per rank and once on stderr
    for r in 0 1; do
        want auto "^rank $r: binding: none: [0-9]+ cores? for [0-9]+ ranks? sharing (it|them): fewer than 2 per rank .* nothing is bound"
        want auto "^rank $r:   worker 0 .*: not bound \(too few cores\)"
    done
    [ "${cores:-0}" -lt 4 ] || grep -q "for 1 rank sharing it" "$work/auto.out" ||
        { echo "FAIL: $cores cores for 2 ranks, yet nothing was bound"; fail=1; }
    said=$(grep -c "^tfc: binding: none: " "$work/auto.err")
    [ "$said" = 1 ] || { echo "FAIL: the fallback was said $said times on stderr, not once"; fail=1; }
    echo "ok: $cores cores for 2 ranks: no binding, said once"
else
    for r in 0 1; do
        want auto "^rank $r: binding: .* shared by"
        want auto "^rank $r:   workers: core L#[0-9]+"
        want auto "^rank $r:   MPI thread: core L#[0-9]+"
    done
    taken=$(grep -E '^rank [01]:   (workers|MPI thread|loader):' "$work/auto.out" |
            grep -o 'core L#[0-9]*' | sort)
    [ -z "$(echo "$taken" | uniq -d)" ] ||
        { echo "FAIL: a core was given twice:"; echo "$taken" | uniq -d; fail=1; }
    # StarPU's worker sits on the PU the plan gave it
    for r in 0 1; do
        planned=$(sed -n "s/^rank $r:   workers: core L#[0-9]* (PU L#\([0-9]*\)).*/\1/p" "$work/auto.out")
        bound=$(sed -n "s/^rank $r:   worker 0 .*: PU L#\([0-9]*\),.*/\1/p" "$work/auto.out")
        [ -n "$planned" ] && [ "$planned" = "$bound" ] ||
            { echo "FAIL: rank $r: worker on PU L#$bound, planned PU L#$planned"; fail=1; }
    done
    echo "ok: $cores cores: each rank has cores of its own"
fi

# one rank with the node to itself (no launcher binding): its worker and MPI thread must run
# on the cores the plan names, read back from StarPU and from the system; StarPU makes as
# many CPU workers as the plan has cores for (STARPU_NCPU unset)
if [ "${cores:-0}" -ge 2 ]; then
    mpi="${mpi% -np 2} --bind-to none -np 1"
    run one -u STARPU_WORKERS_NOBIND -u STARPU_NCPU
    cat "$work/one.out"
    want one "^rank 0: binding: $cores of $cores cores shared by 1 rank"
    planned=$(sed -n 's/^rank 0:   workers: core L#[0-9]* (PU L#\([0-9]*\)).*/\1/p' "$work/one.out")
    bound=$(sed -n 's/^rank 0:   worker 0 .*: PU L#\([0-9]*\),.*/\1/p' "$work/one.out")
    [ -n "$planned" ] && [ "$planned" = "$bound" ] ||
        { echo "FAIL: one rank: worker 0 on PU L#$bound, planned PU L#$planned"; fail=1; }
    planned=$(sed -n 's/^rank 0:   MPI thread: core L#[0-9]* (PU L#\([0-9]*\)).*/\1/p' "$work/one.out")
    got=$(sed -n 's/^rank 0: MPI thread may run on PUs L#\([0-9]*\)$/\1/p' "$work/one.out")
    [ -n "$planned" ] && [ "$planned" = "$got" ] ||
        { echo "FAIL: one rank: the MPI thread runs on PUs L#$got, planned PU L#$planned"; fail=1; }
    workers=$(grep -c "^rank 0:   worker [0-9]" "$work/one.out")
    planned=$(grep "^rank 0:   workers:" "$work/one.out" | grep -o "core L#" | wc -l)
    [ "$workers" = "$planned" ] ||
        { echo "FAIL: one rank: $workers StarPU workers for $planned planned cores"; fail=1; }
    mpi="${mpi% --bind-to none -np 1} -np 2"
fi

# training under the binding (or its fallback) keeps the one-process bits (tests/dist_mlp)
prog=$build/tests/dist_mlp
if [ -x "$prog" ]; then
    "$prog" local 2 size 3 "$work/ref2" > /dev/null 2>&1 && "$prog" local 1 size 3 "$work/ref1" > /dev/null 2>&1 ||
        { echo "FAIL: dist_mlp's reference"; fail=1; }
    env -u STARPU_WORKERS_NOBIND $mpi "$prog" mpi - size 3 "$work/got2" > "$work/mlp2.log" 2>&1 ||
        { echo "FAIL: dist_mlp on 2 ranks"; cat "$work/mlp2.log"; fail=1; }
    env -u STARPU_WORKERS_NOBIND ${mpi% -np 2} --bind-to none -np 1 "$prog" mpi - size 3 "$work/got1" \
        > "$work/mlp1.log" 2>&1 || { echo "FAIL: dist_mlp on 1 rank"; cat "$work/mlp1.log"; fail=1; }
    for f in got2.0 got2.1 got1.0; do
        cmp -s "$work/ref${f:3:1}" "$work/$f" || { echo "FAIL: dist_mlp $f: not the reference's bits"; fail=1; }
    done
    [ $fail = 0 ] && echo "ok: dist_mlp under the binding (1 rank bound, 2 ranks fallback): the reference's bits"
fi

run off -u STARPU_WORKERS_NOBIND TFC_DIST_BIND=0
for r in 0 1; do want off "^rank $r: binding: off \(TFC_DIST_BIND=0\)"; done
grep -q "binding: none" "$work/off.err" && { echo "FAIL: TFC_DIST_BIND=0 still reports"; fail=1; }
run user STARPU_WORKERS_NOBIND=1
for r in 0 1; do want user "^rank $r: binding: left to StarPU \(STARPU_WORKERS_NOBIND is set\)"; done
[ $fail = 0 ] && echo "ok: TFC_DIST_BIND=0 and STARPU_WORKERS_NOBIND leave StarPU alone"
exit $fail
