#!/bin/bash
# test_dist_mpi.sh: synchronous data-parallel training under mpirun (issue 15). tests/dist_mlp
# trains a small MLP for a few steps on N = 1, 2, 3 ranks (oversubscribed, one StarPU CPU
# worker each) and every rank's variables must be the bits of the one-process reference that
# computes the N slices in turn and sums them in rank order; with the variables sharded by
# size (hidden/kernel, 384 of the 652 bytes, split into row tiles owned by different ranks),
# sharded by size whole, and all on rank 0; tiled runs with SGD and momentum too. Then a rank killed with SIGKILL, and a rank returning from main
# after a failed step, must end the job with a non-zero status within seconds, and a rank stopped with SIGSTOP must end it within TFC_DIST_TIMEOUT
# (2 s here) plus a little, with a message naming the stopped rank and the step. Checkpoints
# taken on a ranks and restored on b (2 to 1, 1 to 3, 3 to 2, 2 to 2, 2 to 3: tiles of 2 and
# 3 ranks) go on with the bits of one
# process that changed its number of slices at that step. Exits 77 (skipped) without mpirun or with a library built without MPI.
set -u
. "$(dirname "$0")/lib_setup.sh"
prog=$build/tests/dist_mlp
need_built "$prog"
need_command mpirun
make_work dist
bg_signal=TERM # bg: an mpirun job, which passes the signal on to its ranks
export STARPU_NCPU=1 STARPU_NOPENCL=0
mpi_setup
fail=0
"$prog" local 1 size 0 "$work/probe" >/dev/null || { echo "FAIL: dist_mlp does not start"; exit 1; }
if ! $mpi 1 "$prog" mpi - size 0 "$work/probe" > "$work/probe.log" 2>&1; then
    if grep -q "built without StarPU-MPI" "$work/probe.log"; then
        echo "SKIP: the library was built without MPI"; exit 77
    fi
    echo "FAIL: one rank under mpirun"; cat "$work/probe.log"; exit 1
fi

steps=4
for n in 1 2 3; do
    "$prog" local $n size $steps "$work/ref$n" > "$work/ref$n.log" 2>&1 ||
        { echo "FAIL: reference of $n ranks"; cat "$work/ref$n.log"; fail=1; continue; }
    for owners in size whole rank0; do
        out=$work/run$n-$owners
        if ! timeout 120 $mpi $n "$prog" mpi - $owners $steps "$out" > "$out.log" 2>&1; then
            echo "FAIL: $n ranks, owners $owners: mpirun failed"; cat "$out.log"; fail=1; continue
        fi
        for r in $(seq 0 $((n - 1))); do
            if cmp -s "$work/ref$n" "$out.$r"; then
                echo "ok: $n ranks, owners $owners, rank $r: the reference's bits"
            else
                echo "FAIL: $n ranks, owners $owners, rank $r differs from the reference"; fail=1
            fi
        done
    done
    # the largest variable is tiled across the ranks (by default: more than 1/N of the bytes),
    # and the tiled run has the bits of the untiled one
    if [ $n -gt 1 ]; then
        if grep -q "^tiles: hidden/kernel in $n$" "$work/run$n-size.log"; then
            echo "ok: $n ranks: hidden/kernel split into $n tiles"
        else echo "FAIL: $n ranks: hidden/kernel not split into $n tiles"; cat "$work/run$n-size.log"; fail=1; fi
        grep -q "^tiles:" "$work/run$n-whole.log" && { echo "FAIL: $n ranks, whole: tiles"; fail=1; }
        cmp -s "$work/run$n-size.0" "$work/run$n-whole.0" ||
            { echo "FAIL: $n ranks: tiled and whole runs differ"; fail=1; }
    fi
done
# element-wise updates: a tile's update has the whole variable's bits with SGD and momentum too
for opt in sgd momentum; do
    DIST_MLP_OPT=$opt "$prog" local 3 whole $steps "$work/ref3$opt" > "$work/ref3$opt.log" 2>&1 ||
        { echo "FAIL: reference with $opt"; cat "$work/ref3$opt.log"; fail=1; continue; }
    out=$work/run3$opt
    DIST_MLP_OPT=$opt timeout 120 $mpi 3 "$prog" mpi - size $steps "$out" > "$out.log" 2>&1 ||
        { echo "FAIL: 3 ranks, $opt: mpirun failed"; cat "$out.log"; fail=1; continue; }
    grep -q "^tiles: hidden/kernel in 3$" "$out.log" || { echo "FAIL: 3 ranks, $opt: no tiles"; fail=1; }
    for r in 0 1 2; do
        if cmp -s "$work/ref3$opt" "$out.$r"; then echo "ok: 3 ranks, tiled, $opt, rank $r: the reference's bits"
        else echo "FAIL: 3 ranks, tiled, $opt, rank $r differs from the reference"; fail=1; fi
    done
    cmp -s "$work/ref3$opt" "$work/ref3" && { echo "FAIL: $opt gave Adam's bits"; fail=1; }
done
# bytes on the wire (StarPU-MPI's STARPU_COMM_STATS, printed per rank at shutdown) against the
# analytic minimum of the scheme: each variable's gradient goes once from every other rank to
# its owner and its new value once back, 2 (N - 1) |W| per step in all, |W| = 163 floats (652
# bytes); with the variables sharded by size whole (hidden/kernel 384 B to rank 0, out/kernel
# 192 B to rank 1, hidden/bias 64 B and out/bias 12 B to rank 2) rank r sends the others'
# gradients and N - 1 copies of its own variables: 268 + 768 = 1036, 460 + 384 = 844,
# 576 + 152 = 728 bytes; with hidden/kernel in 3 tiles of 128 B (out/kernel to rank 0, the
# tiles to 1, 2 and 0, hidden/bias to 1, out/bias to 2: 320, 192, 140 B), |W| + own bytes:
# 972, 844, 792, the busiest rank 64 B less
for spec in "2 size 652 652" "3 whole 1036 844 728" "3 size 972 844 792" "3 rank0 1304 652 652"; do
    set -- $spec
    n=$1 owners=$2
    shift 2
    STARPU_COMM_STATS=1 timeout 120 $mpi $n "$prog" mpi - $owners 10 "$work/bytes" > "$work/bytes.log" 2>&1 ||
        { echo "FAIL: $n ranks with STARPU_COMM_STATS"; cat "$work/bytes.log"; fail=1; continue; }
    for r in $(seq 0 $((n - 1))); do
        got=$(sed -n "s/^\[starpu_comm_stats\]\[$r\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p" "$work/bytes.log")
        want=$(( $1 * 10 ))
        shift
        if [ "$got" = "$want" ]; then echo "ok: $n ranks, owners $owners: rank $r sent $got bytes in 10 steps"
        else echo "FAIL: $n ranks, owners $owners: rank $r sent '$got' bytes in 10 steps, the minimum is $want"; fail=1; fi
    done
done

# checkpoints across ranks and restarts on another number of ranks: a checkpoint of step 3
# (rank 0 writes it, the owners having sent it their optimizer slots and counters), restored on
# b ranks up to step 6, must give every rank the bits of one process that ran 3 steps as a
# ranks, then 3 as b ranks. That process restarts from its own (one-process) checkpoint; that
# such a restart is exact shows against one uninterrupted process of 6 steps as 2 ranks.
"$prog" local 2 size 6 "$work/ref2x6" > "$work/ref2x6.log" 2>&1 &&
"$prog" local 2 size 3 "$work/part" "$work/local22.db" save > "$work/local22.log" 2>&1 &&
"$prog" local 2 size 6 "$work/local22" "$work/local22.db" resume >> "$work/local22.log" 2>&1 ||
    { echo "FAIL: one-process restart"; cat "$work/ref2x6.log" "$work/local22.log"; fail=1; }
if cmp -s "$work/ref2x6" "$work/local22"; then echo "ok: one process restarted at step 3: the bits of 6 steps uninterrupted"
else echo "FAIL: one process restarted at step 3 differs from 6 steps uninterrupted"; fail=1; fi
for ab in "2 1" "1 3" "3 2" "2 2" "2 3"; do
    set -- $ab
    a=$1 b=$2 ref=$work/ref$a$b out=$work/restart$a$b
    "$prog" local $a size 3 "$ref.part" "$ref.db" save > "$ref.log" 2>&1 &&
    "$prog" local $b size 6 "$ref" "$ref.db" resume >> "$ref.log" 2>&1 ||
        { echo "FAIL: reference of a restart from $a to $b ranks"; cat "$ref.log"; fail=1; continue; }
    timeout 120 $mpi $a "$prog" mpi - size 3 "$out.part" "$out.db" save > "$out.log" 2>&1 &&
    timeout 120 $mpi $b "$prog" mpi - size 6 "$out" "$out.db" resume >> "$out.log" 2>&1 ||
        { echo "FAIL: restart from $a to $b ranks: mpirun failed"; cat "$out.log"; fail=1; continue; }
    for r in $(seq 0 $((b - 1))); do
        if cmp -s "$ref" "$out.$r"; then echo "ok: checkpoint on $a ranks, restart on $b: rank $r has the reference's bits"
        else echo "FAIL: checkpoint on $a ranks, restart on $b: rank $r differs from the reference"; fail=1; fi
    done
done
cmp -s "$work/ref2x6" "$work/restart22.0" ||
    { echo "FAIL: 2 ranks restarted on 2 differ from one uninterrupted process"; fail=1; }

# tfc_dist_op_step (what `mpirun tfc train` runs): rank 0 runs the train op of tfc_minimize
# with the summed gradients fed in place of its own, the same bits as the reference
for n in 2 3; do
    out=$work/op$n
    timeout 120 $mpi $n "$prog" mpi - op $steps "$out" > "$out.log" 2>&1 ||
        { echo "FAIL: $n ranks, train op: mpirun failed"; cat "$out.log"; fail=1; continue; }
    for r in $(seq 0 $((n - 1))); do
        if cmp -s "$work/ref$n" "$out.$r"; then echo "ok: $n ranks, train op, rank $r: the reference's bits"
        else echo "FAIL: $n ranks, train op, rank $r differs from the reference"; fail=1; fi
    done
done

# backup workers: 3 ranks, rank 2 sleeping 300 ms in each step (a straggler). Without backups
# every step waits for it; with 1 backup rank 0 applies the first 2 gradients to arrive, so its
# steps must take well under the sleep, and one process replaying the recorded ranks of each
# step must give every rank's bits (the straggler's too: it takes the values late); the ranks
# come from the checkpoint's store, where rank 0 logged them as the metric dist/chosen.
ms() { sed -n "s/^rank 0 of 3: [0-9]* steps, \([0-9.]*\) ms per step.*/\1/p" "$1"; }
DIST_MLP_SLOW_RANK=2 DIST_MLP_SLOW_MS=300 timeout 120 $mpi 3 "$prog" mpi - size 6 "$work/slow0" > "$work/slow0.log" 2>&1 ||
    { echo "FAIL: a straggler without backups: mpirun failed"; cat "$work/slow0.log"; fail=1; }
DIST_MLP_BACKUPS=1 DIST_MLP_SLOW_RANK=2 DIST_MLP_SLOW_MS=300 timeout 120 $mpi 3 "$prog" mpi - size 6 "$work/slow1" "$work/slow1.db" save > "$work/slow1.log" 2>&1 ||
    { echo "FAIL: a straggler with 1 backup: mpirun failed"; cat "$work/slow1.log"; fail=1; }
# (the step times are printed, not asserted: a timed check failed under load, 392 against 344
# ms with 3 ranks on 2 busy cores; the masks below show the straggler was never applied)
without=$(ms "$work/slow0.log") with=$(ms "$work/slow1.log")
echo "info: a straggler sleeping 300 ms a step: rank 0's step '$without' ms without backups, '$with' ms with 1 (oversubscribed)"
if [ "$(wc -l < "$work/slow1.chosen")" = 6 ] && ! grep -qv '^3$' "$work/slow1.chosen"; then
    echo "ok: 1 backup: every step applied ranks 0 and 1 (mask 3), never the straggler"
else echo "FAIL: the ranks applied per step (masks) are not 6 lines of 3:"; cat "$work/slow1.chosen"; fail=1; fi
DIST_MLP_REPLAY=$work/slow1.db "$prog" local 3 size 6 "$work/replay" > "$work/replay.log" 2>&1 ||
    { echo "FAIL: the replay"; cat "$work/replay.log"; fail=1; }
for r in 0 1 2; do
    if cmp -s "$work/replay" "$work/slow1.$r"; then echo "ok: 1 backup: rank $r has the bits of the replay of the recorded ranks"
    else echo "FAIL: 1 backup: rank $r differs from the replay of the recorded ranks"; fail=1; fi
done
cmp -s "$work/replay" "$work/slow0.0" && { echo "FAIL: dropping the straggler changed no bit"; fail=1; }

# the reference of 2 ranks is not the one of 1 (the weighted sum of slices rounds otherwise):
# the comparisons above tell the rank counts apart
cmp -s "$work/ref1" "$work/ref2" && { echo "FAIL: the references of 1 and 2 ranks are equal"; fail=1; }

# a rank killed mid-training ends the whole job, non-zero, within seconds
$mpi 2 "$prog" mpi - size 1000000 "$work/kill" > "$work/kill.log" 2>&1 &
bg=$!
for _ in $(seq 100); do [ -s "$work/kill.1.pid" ] && break; sleep 0.1; done
if [ ! -s "$work/kill.1.pid" ]; then
    echo "FAIL: rank 1 did not start"; cat "$work/kill.log"; exit 1
fi
sleep 1
start=$(date +%s)
kill -KILL "$(cat "$work/kill.1.pid")"
for _ in $(seq 200); do kill -0 $bg 2>/dev/null || break; sleep 0.1; done
if kill -0 $bg 2>/dev/null; then
    echo "FAIL: the job still runs 20 s after rank 1 was killed"; fail=1
else
    wait $bg; rc=$?; bg=
    if [ $rc -eq 0 ]; then echo "FAIL: the job exited 0 after rank 1 was killed"; fail=1
    else echo "ok: killed rank 1: the job ended with status $rc after $(( $(date +%s) - start )) s"; fi
fi

# a rank whose step fails returns from main with its distributed context alive: it must not
# wait in MPI_Finalize for the others (which wait for it), so the job ends at once
start=$(date +%s)
DIST_MLP_FAIL_RANK=1 timeout 30 $mpi 2 "$prog" mpi - size 1000000 "$work/fail" > "$work/fail.log" 2>&1
rc=$?
if [ $rc -eq 124 ]; then echo "FAIL: the job still ran 30 s after rank 1 gave up"; fail=1
elif [ $rc -eq 0 ]; then echo "FAIL: the job exited 0 after rank 1 gave up"; fail=1
else echo "ok: rank 1 gave up: the job ended with status $rc after $(( $(date +%s) - start )) s"; fi

# a hung rank (SIGSTOP): the others wait for it at most TFC_DIST_TIMEOUT seconds
TFC_DIST_TIMEOUT=2 $mpi 2 "$prog" mpi - size 1000000 "$work/hang" > "$work/hang.log" 2>&1 &
bg=$!
for _ in $(seq 100); do [ -s "$work/hang.1.pid" ] && break; sleep 0.1; done
[ -s "$work/hang.1.pid" ] || { echo "FAIL: rank 1 did not start"; cat "$work/hang.log"; exit 1; }
sleep 1
start=$(date +%s)
kill -STOP "$(cat "$work/hang.1.pid")"
for _ in $(seq 200); do kill -0 $bg 2>/dev/null || break; sleep 0.1; done
if kill -0 $bg 2>/dev/null; then
    echo "FAIL: the job still runs 20 s after rank 1 was stopped (TFC_DIST_TIMEOUT=2)"; fail=1
    kill -KILL "$(cat "$work/hang.1.pid")"
else
    wait $bg; rc=$?; bg=
    if [ $rc -eq 0 ]; then echo "FAIL: the job exited 0 after rank 1 hung"; fail=1
    elif ! grep -Eq "rank 0: step [0-9]+: waited 2 s \(TFC_DIST_TIMEOUT\) for rank 1" "$work/hang.log"; then
        echo "FAIL: no message naming the hung rank and the step:"; cat "$work/hang.log"; fail=1
    else
        echo "ok: stopped rank 1: the job ended with status $rc after $(( $(date +%s) - start )) s:"
        grep "TFC_DIST_TIMEOUT" "$work/hang.log"
    fi
fi
exit $fail
