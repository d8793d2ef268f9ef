#!/bin/bash
# test_dist_tool.sh: `mpirun -np N tfc train` (issue 15, item 5), kept short: the model of
# examples/make_model trained on 1 rank under mpirun has the bits of `tfc train` without it
# (the checkpoint's data compared in the store); 2 ranks (oversubscribed, one StarPU CPU worker
# each) train one epoch with rank 0 alone writing the store and printing; 3 ranks train one, 2 resume
# from its checkpoint for a second epoch; the result, read by `tfc eval`, must be close to the
# one process's (the slices' gradients are summed in another order, so not its bits) and far
# from the model trained one epoch. Sharded owners (the default: each update on the owner of its
# variable or tile) must give the bits of TFC_DIST_OWNERS_RANK0=1 (rank 0 updates everything)
# on 2 ranks, on 3, and on 2 ranks resuming a 3-rank checkpoint (so the checkpoint holds the
# owners' optimizer slots), with the bytes each rank sends (STARPU_COMM_STATS) more balanced.
# Exits 77 (skipped) without mpirun or sqlite3, or with a library built without MPI.
set -u
. "$(dirname "$0")/lib_setup.sh"
tfc=$build/src/tfc
make_model=$build/examples/make_model
need_built "$tfc" "$make_model"
need_command mpirun
need_command sqlite3 "the checkpoints are compared with it"
make_work dist_tool
cd "$work"
export STARPU_NCPU=1
mpi_setup
fail=0
"$make_model" . > make.log 2>&1 || { echo "FAIL: make_model"; cat make.log; exit 1; }
data="--data images=train-images.idx --data labels=train-labels.idx"
test="--data images=test-x.npy --data labels=test-y.npy"
for f in straight one two two0 three three0; do cp model.db $f.db; done
# the latest checkpoint's variables, name and bytes in hex
dump() { sqlite3 "$1" "select v.name, hex(c.data) from variables v join variable_chunks c on
    c.variable = v.id where v.checkpoint = (select max(id) from checkpoints) order by v.name, c.seq"; }

TFC_DIST_OWNERS_RANK0=2 "$tfc" train straight.db $data --epochs 1 --quiet > bad.log 2>&1 ||
    grep -q "TFC_DIST_OWNERS_RANK0 must be 0 or 1, not '2'" bad.log ||
    { echo "FAIL: TFC_DIST_OWNERS_RANK0=2 was not refused by name:"; cat bad.log; fail=1; }
"$tfc" train straight.db $data --epochs 2 --batch 32 --quiet > straight.log 2>&1 ||
    { echo "FAIL: tfc train"; cat straight.log; exit 1; }
if ! timeout 120 $mpi 1 "$tfc" train one.db $data --epochs 2 --batch 32 --quiet > one.log 2>&1; then
    if grep -q "built without StarPU-MPI" one.log; then echo "SKIP: the library was built without MPI"; exit 77; fi
    echo "FAIL: mpirun -np 1 tfc train"; cat one.log; exit 1
fi
if [ -n "$(dump straight.db)" ] && [ "$(dump straight.db)" = "$(dump one.db)" ]; then
    echo "ok: 1 rank under mpirun: the checkpoint of step 64 has the bits of tfc train"
else echo "FAIL: 1 rank under mpirun: the checkpoint differs from tfc train's"; fail=1; fi

timeout 120 $mpi 2 "$tfc" train two.db $data --epochs 1 --batch 32 > two.out 2> two.err ||
    { echo "FAIL: mpirun -np 2 tfc train"; cat two.out two.err; exit 1; }
n_start=$(grep -c "no checkpoint: starting" two.out)
n_end=$(grep -c "trained to epoch 1, step 32" two.out)
n_progress=$(grep -c "^epoch 1/1: step 32/32" two.err)
if [ "$n_start$n_end$n_progress" = 111 ]; then echo "ok: 2 ranks: rank 0 alone printed the run and its progress"
else echo "FAIL: 2 ranks printed $n_start starts, $n_end ends, $n_progress progress lines (1 each wanted):"
    cat two.out two.err; fail=1; fi
"$tfc" info two.db > info.log 2>&1 && grep -q "step 32 " info.log && grep -q "loss .* at step 32 (32 values)" info.log ||
    { echo "FAIL: tfc info of the store 2 ranks trained:"; cat info.log; fail=1; }
one_epoch=$("$tfc" eval two.db $test 2>/dev/null | sed -n 's/^loss: //p')
same() { # same $what $a $b: the latest checkpoints of stores a and b have the same bits
    if [ -n "$(dump "$2")" ] && [ "$(dump "$2")" = "$(dump "$3")" ]; then echo "ok: $1: the bits of TFC_DIST_OWNERS_RANK0=1"
    else echo "FAIL: $1: the checkpoint differs from TFC_DIST_OWNERS_RANK0=1's"; fail=1; fi; }
rank0() { TFC_DIST_OWNERS_RANK0=1 timeout 120 $mpi "$@"; }
rank0 2 "$tfc" train two0.db $data --epochs 1 --batch 32 --quiet > two0.log 2>&1 ||
    { echo "FAIL: TFC_DIST_OWNERS_RANK0=1 mpirun -np 2 tfc train"; cat two0.log; exit 1; }
same "2 ranks, sharded owners" two.db two0.db

# bytes each rank sent per step (32 steps), and their max / min over the ranks
sent() { sed -n 's/^\[starpu_comm_stats\]\[\([0-9]*\)\] TOTAL:[[:space:]]*\([0-9.]*\) B.*/\1 \2/p' "$1" | sort -n |
    awk '{ b = $2 / 32; printf "rank %s %.0f B/step, ", $1, b; if (NR == 1 || b > hi) hi = b;
           if (NR == 1 || b < lo) lo = b } END { if (NR != 3 || lo <= 0) print "-"; else printf "max/min %.2f\n", hi / lo }'; }
STARPU_COMM_STATS=1 timeout 120 $mpi 3 "$tfc" train three.db $data --epochs 1 --batch 32 --quiet > three.log 2>&1 ||
    { echo "FAIL: mpirun -np 3 tfc train"; cat three.log; exit 1; }
STARPU_COMM_STATS=1 rank0 3 "$tfc" train three0.db $data --epochs 1 --batch 32 --quiet > three0.log 2>&1 ||
    { echo "FAIL: TFC_DIST_OWNERS_RANK0=1 mpirun -np 3 tfc train"; cat three0.log; exit 1; }
same "3 ranks, sharded owners" three.db three0.db
sharded=$(sent three.log) all0=$(sent three0.log)
echo "bytes sent, 3 ranks: sharded owners: $sharded; TFC_DIST_OWNERS_RANK0=1: $all0"
if awk -v a="${sharded##*max/min }" -v b="${all0##*max/min }" 'BEGIN { exit !(a + 0 > 0 && a + 0 < b + 0) }'; then
    echo "ok: 3 ranks: sharded owners send more evenly than rank 0 owning all"
else echo "FAIL: 3 ranks: sharded owners' traffic is not more balanced"; fail=1; fi

timeout 120 $mpi 2 "$tfc" train three.db $data --epochs 2 --batch 32 > resumed.out 2> resumed.err ||
    { echo "FAIL: mpirun -np 2 tfc train (resumed)"; cat resumed.out resumed.err; exit 1; }
grep -q "resuming from the checkpoint at step 32" resumed.out && grep -q "trained to epoch 2, step 64" resumed.out &&
    [ "$(grep -c "trained to" resumed.out)" = 1 ] ||
    { echo "FAIL: 2 ranks did not resume once from step 32:"; cat resumed.out resumed.err; fail=1; }
rank0 2 "$tfc" train three0.db $data --epochs 2 --batch 32 --quiet > resumed0.log 2>&1 ||
    { echo "FAIL: TFC_DIST_OWNERS_RANK0=1 mpirun -np 2 tfc train (resumed)"; cat resumed0.log; exit 1; }
same "2 ranks resuming a sharded 3-rank checkpoint" three.db three0.db
ref=$("$tfc" eval straight.db $test 2>/dev/null | sed -n 's/^loss: //p')
got=$("$tfc" eval three.db $test 2>/dev/null | sed -n 's/^loss: //p')
if awk -v a="$ref" -v b="$got" -v c="$one_epoch" 'BEGIN { d = a - b; if (d < 0) d = -d;
        e = c - b; if (e < 0) e = -e; exit !(a != "" && d < 1e-3 && e > 0.05) }'; then
    echo "ok: 3 ranks then 2 resumed: test loss $got, one process $ref (after one epoch $one_epoch)"
else echo "FAIL: 3 ranks then 2 resumed: test loss '$got', one process '$ref', after one epoch '$one_epoch'"; fail=1; fi
exit $fail
