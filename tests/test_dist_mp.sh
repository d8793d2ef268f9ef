#!/bin/bash
# test_dist_mp.sh: model parallelism across ranks (issue 15). tests/dist_mp builds an MLP whose
# layer l runs on rank l ("rank:l" placement scopes), fetches its forward values, trains it a
# few SGD steps and fetches its variables; under mpirun every rank's output must be the bits
# of the same graph in one process without rank hints (one StarPU CPU worker on both sides):
# 2 layers on 2 ranks, and a 3-rank pipeline; then 2 workers per rank on a batch that tiling
# and the row split would take, which leave a split plan whole. Then the bytes rank 0 and
# rank 1 send per training step (STARPU_COMM_STATS) against the analytic count, and a rank
# hint >= the number of ranks; Adam on 3 ranks (its slots on their variable's rank, the step
# counter on rank 0) and its bytes per step on 2; a checkpoint of the 2-rank split gathers
# every variable and slot, and a restart from it continues bit for bit. Exits 77 (skipped)
# without mpirun or with a library built without MPI.
set -u
build=$(pwd)
prog=$build/tests/dist_mp
[ -x "$prog" ] || { echo "FAIL: $prog is not built (run from the build directory)"; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
work=$(mktemp -d "$build/tests/distmp.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
export STARPU_NCPU=1 STARPU_NOPENCL=0
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" # Open MPI's own
mpi="mpirun --oversubscribe -np"
[ "$(id -u)" = 0 ] && mpi="mpirun --allow-run-as-root --oversubscribe -np"
if ! $mpi 1 "$build/tests/dist_mlp" mpi - size 0 "$work/probe" > "$work/probe.log" 2>&1; then
    grep -q "built without StarPU-MPI" "$work/probe.log" && { echo "SKIP: the library was built without MPI"; exit 77; }
    echo "FAIL: one rank under mpirun"; cat "$work/probe.log"; exit 1
fi
fail=0
steps=4
for n in 2 3; do
    "$prog" local $n $steps "$work/ref$n" > "$work/ref$n.log" 2>&1 ||
        { echo "FAIL: one process, $n layers"; cat "$work/ref$n.log"; fail=1; continue; }
    out=$work/mp$n
    if ! timeout 120 $mpi $n "$prog" mpi $n $steps "$out" > "$out.log" 2>&1; then
        echo "FAIL: $n layers on $n ranks: mpirun failed"; cat "$out.log"; fail=1; continue
    fi
    for r in $(seq 0 $((n - 1))); do
        if cmp -s "$work/ref$n" "$out.$r"; then
            echo "ok: $n layers on $n ranks, rank $r: forward, $steps SGD steps and variables have the one-process bits"
        else
            echo "FAIL: $n layers on $n ranks, rank $r differs from one process"; fail=1
        fi
    done
done
# Adam: its slots live on their variable's rank; its step counter (no hint: rank 0) goes to
# the ranks of the variables it updates each step
DIST_MP_ADAM=1 "$prog" local 3 $steps "$work/adam" > "$work/adam.log" 2>&1 ||
    { echo "FAIL: one process, Adam"; cat "$work/adam.log"; fail=1; }
if ! DIST_MP_ADAM=1 timeout 120 $mpi 3 -x DIST_MP_ADAM "$prog" mpi 3 $steps "$work/adam-mp" > "$work/adam-mp.log" 2>&1; then
    echo "FAIL: Adam on 3 ranks: mpirun failed"; cat "$work/adam-mp.log"; fail=1
else
    for r in 0 1 2; do
        if cmp -s "$work/adam" "$work/adam-mp.$r"; then echo "ok: Adam, 3 layers on 3 ranks, rank $r: the one-process bits"
        else echo "FAIL: Adam, 3 layers on 3 ranks, rank $r differs from one process"; fail=1; fi
    done
fi
# a rank hint beyond the job: 3 layers on 2 ranks fail on every rank, naming the node and the size
if timeout 120 $mpi 2 "$prog" mpi 3 1 "$work/over" > "$work/over.log" 2>&1; then
    echo "FAIL: rank:2 on 2 ranks ran"; fail=1
elif [ "$(grep -c "node 'layer2/kernel': placement 'rank:2' names rank 2, but the job has 2 ranks (0 to 1)" "$work/over.log")" = 2 ]; then
    echo "ok: rank:2 on 2 ranks fails on both ranks, naming the node and the job's size"
else
    echo "FAIL: rank:2 on 2 ranks: not the expected message on both ranks"; cat "$work/over.log"; fail=1
fi
# A split plan is neither tiled nor split into chains of rows (a tile is a partition of a
# StarPU handle, which the transfers of whole values cannot send): with 2 CPU workers per rank,
# a batch of 128 rows (the row split takes inference plans from 64) and every matmul tiled by
# size (TFC_TILE_MIN=1), every run failed with "tiled nodes are not supported across ranks".
# Now each rank's steps run whole, with the bits of one untiled process.
DIST_MP_ROWS=128 TFC_TILE_MIN=0 TFC_ROW_SPLIT_MIN=0 "$prog" local 2 $steps "$work/tref" > "$work/tref.log" 2>&1 ||
    { echo "FAIL: one process, batch 128, untiled"; cat "$work/tref.log"; fail=1; }
if ! DIST_MP_ROWS=128 STARPU_NCPU=2 TFC_TILE_MIN=1 timeout 120 $mpi 2 -x DIST_MP_ROWS -x STARPU_NCPU -x TFC_TILE_MIN \
        "$prog" mpi 2 $steps "$work/tmp" > "$work/tmp.log" 2>&1; then
    echo "FAIL: 2 layers on 2 ranks, 2 workers each, batch 128, TFC_TILE_MIN=1: mpirun failed"; cat "$work/tmp.log"; fail=1
else
    for r in 0 1; do
        if cmp -s "$work/tref" "$work/tmp.$r"; then
            echo "ok: 2 workers per rank, batch 128, TFC_TILE_MIN=1, rank $r: untiled, the one-process bits"
        else
            echo "FAIL: 2 workers per rank, batch 128, TFC_TILE_MIN=1, rank $r differs from one untiled process"; fail=1
        fi
    done
fi
# Bytes on the wire for 2 layers (batch 32, hidden 12, 4 classes; float32): a training step sends
# the hidden activations (32 x 12) from rank 0 to rank 1 and their gradient back (32 x 12),
# 1536 bytes each way, plus the fetched loss (4 bytes) from rank 1 to rank 0. Runs of 1 and 6
# steps (the same forward, variable fetches and start) differ by 5 steps.
for k in 1 6; do
    STARPU_COMM_STATS=1 timeout 120 $mpi 2 "$prog" mpi 2 $k "$work/bytes$k" > "$work/bytes$k.log" 2>&1
    rc=$?
    [ $rc -le 1 ] || { echo "FAIL: 2 ranks with STARPU_COMM_STATS"; cat "$work/bytes$k.log"; fail=1; }
done
for spec in "0 1536" "1 1540"; do
    set -- $spec
    a=$(sed -n "s/^\[starpu_comm_stats\]\[$1\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p" "$work/bytes1.log")
    b=$(sed -n "s/^\[starpu_comm_stats\]\[$1\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p" "$work/bytes6.log")
    if [ -n "$a" ] && [ -n "$b" ] && [ $(( (b - a) / 5 )) = "$2" ] && [ $(( (b - a) % 5 )) = 0 ]; then
        echo "ok: rank $1 sends $2 bytes per training step (the activations or their gradient$([ "$1" = 1 ] && echo ', and the loss'))"
    else
        echo "FAIL: rank $1 sent '$a' bytes in 1 step and '$b' in 6: want $2 more per step"; fail=1
    fi
done
# Adam on 2 ranks: the slots stay with their variables, so a step sends what SGD's does plus
# the 8-byte step counter (rank 0 to rank 1); before the slots took their variable's rank,
# layer1's moments (2 x (12 x 4 + 4) floats) went to rank 0 and back each step
for k in 1 6; do
    DIST_MP_ADAM=1 STARPU_COMM_STATS=1 timeout 120 $mpi 2 -x DIST_MP_ADAM "$prog" mpi 2 $k "$work/abytes$k" > "$work/abytes$k.log" 2>&1
    rc=$?
    [ $rc -le 1 ] || { echo "FAIL: Adam on 2 ranks with STARPU_COMM_STATS"; cat "$work/abytes$k.log"; fail=1; }
done
DIST_MP_ADAM=1 "$prog" local 2 6 "$work/aref6" > "$work/aref6.log" 2>&1 ||
    { echo "FAIL: one process, Adam, 6 steps"; cat "$work/aref6.log"; fail=1; }
for r in 0 1; do
    if cmp -s "$work/aref6" "$work/abytes6.$r"; then echo "ok: Adam, 2 layers on 2 ranks, rank $r: the one-process bits"
    else echo "FAIL: Adam, 2 layers on 2 ranks, rank $r differs from one process"; fail=1; fi
done
for spec in "0 1544" "1 1540"; do
    set -- $spec
    a=$(sed -n "s/^\[starpu_comm_stats\]\[$1\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p" "$work/abytes1.log")
    b=$(sed -n "s/^\[starpu_comm_stats\]\[$1\] TOTAL:[[:space:]]*\([0-9]*\)\..*/\1/p" "$work/abytes6.log")
    if [ -n "$a" ] && [ -n "$b" ] && [ $(( (b - a) / 5 )) = "$2" ] && [ $(( (b - a) % 5 )) = 0 ]; then
        echo "ok: Adam: rank $1 sends $2 bytes per training step (no optimizer slot crosses ranks)"
    else
        echo "FAIL: Adam: rank $1 sent '$a' bytes in 1 step and '$b' in 6: want $2 more per step"; fail=1
    fi
done
# Checkpoints of the split: 2 layers on 2 ranks, Adam, a checkpoint after 2 of 4 steps (every
# rank takes it, into its own store); its variables, slots and step counter are those of one
# process after 2 steps (ck.0 restored in one process, 0 steps), and 2 ranks restarted from it
# end 2 steps later with the uninterrupted run's bits.
export DIST_MP_ADAM=1
for k in 2 4; do
    "$prog" local 2 $k "$work/cref$k" > "$work/cref$k.log" 2>&1 || { echo "FAIL: one process, $k steps"; cat "$work/cref$k.log"; fail=1; }
done
if ! DIST_MP_CKPT=$work/ck DIST_MP_CKPT_AT=2 timeout 120 $mpi 2 -x DIST_MP_ADAM -x DIST_MP_CKPT -x DIST_MP_CKPT_AT \
        "$prog" mpi 2 4 "$work/cfull" > "$work/cfull.log" 2>&1; then
    echo "FAIL: 2 ranks with a checkpoint"; cat "$work/cfull.log"; fail=1
elif ! DIST_MP_RESTORE=$work/ck timeout 120 $mpi 2 -x DIST_MP_ADAM -x DIST_MP_RESTORE \
        "$prog" mpi 2 2 "$work/crest" > "$work/crest.log" 2>&1; then
    echo "FAIL: 2 ranks restarted from the checkpoint"; cat "$work/crest.log"; fail=1
else
    for r in 0 1; do
        if DIST_MP_RESTORE=$work/ck.$r "$prog" local 2 0 "$work/cload$r" > "$work/cload$r.log" 2>&1 &&
           cmp -s "$work/cref2.vars" "$work/cload$r.vars"; then
            echo "ok: rank $r's checkpoint after 2 steps holds one process's variables, slots and step count"
        else
            echo "FAIL: rank $r's checkpoint after 2 steps differs from one process (stale values?)"; cat "$work/cload$r.log"; fail=1
        fi
        if cmp -s "$work/cref4" "$work/cfull.$r"; then
            echo "ok: rank $r: taking the checkpoint left the 4 steps with one process's bits"
        else
            echo "FAIL: rank $r: 4 steps with a checkpoint differ from one process"; fail=1
        fi
        if cmp -s "$work/cfull.vars.$r" "$work/crest.vars.$r"; then
            echo "ok: rank $r: restarted from the checkpoint, 2 more steps end with the uninterrupted run's bits"
        else
            echo "FAIL: rank $r: the restart from the checkpoint ends elsewhere than the uninterrupted run"; fail=1
        fi
    done
fi
unset DIST_MP_ADAM
exit $fail
