#!/bin/bash
# test_dist_tool.sh: `mpirun -np N tfc train` (issue 15, item 5), kept short: the model of
# examples/make_model trained on 1 rank under mpirun has the bits of `tfc train` without it
# (the checkpoint's data compared in the store); 2 ranks (oversubscribed, one StarPU CPU worker
# each) train one epoch with rank 0 alone writing the store and printing, then 3 ranks resume
# from its checkpoint for a second epoch; the result, read by `tfc eval`, must be close to the
# one process's (the slices' gradients are summed in another order, so not its bits) and far
# from the model trained one epoch. Exits 77 (skipped) without mpirun or sqlite3, or with a
# library built without MPI.
set -u
build=$(pwd)
tfc=$build/src/tfc
make_model=$build/examples/make_model
for p in "$tfc" "$make_model"; do
    [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
command -v sqlite3 >/dev/null || { echo "SKIP: no sqlite3 (the checkpoints are compared with it)"; exit 77; }
work=$(mktemp -d "$build/tests/dist_tool.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
cd "$work"
export STARPU_NCPU=1
# Open MPI keeps allocations at exit that LeakSanitizer reports (as in test_dist_mpi.sh)
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
mpi="mpirun --oversubscribe -np"
[ "$(id -u)" = 0 ] && mpi="mpirun --allow-run-as-root --oversubscribe -np"
fail=0
"$make_model" . > make.log 2>&1 || { echo "FAIL: make_model"; cat make.log; exit 1; }
data="--data images=train-images.idx --data labels=train-labels.idx"
test="--data images=test-x.npy --data labels=test-y.npy"
for f in straight one two; do cp model.db $f.db; done
# the latest checkpoint's variables, name and bytes in hex
dump() { sqlite3 "$1" "select v.name, hex(c.data) from variables v join variable_chunks c on
    c.variable = v.id where v.checkpoint = (select max(id) from checkpoints) order by v.name, c.seq"; }

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

timeout 120 $mpi 3 "$tfc" train two.db $data --epochs 2 --batch 32 > three.out 2> three.err ||
    { echo "FAIL: mpirun -np 3 tfc train (resumed)"; cat three.out three.err; exit 1; }
grep -q "resuming from the checkpoint at step 32" three.out && grep -q "trained to epoch 2, step 64" three.out &&
    [ "$(grep -c "trained to" three.out)" = 1 ] ||
    { echo "FAIL: 3 ranks did not resume once from step 32:"; cat three.out three.err; fail=1; }
ref=$("$tfc" eval straight.db $test 2>/dev/null | sed -n 's/^loss: //p')
got=$("$tfc" eval two.db $test 2>/dev/null | sed -n 's/^loss: //p')
if awk -v a="$ref" -v b="$got" -v c="$one_epoch" 'BEGIN { d = a - b; if (d < 0) d = -d;
        e = c - b; if (e < 0) e = -e; exit !(a != "" && d < 1e-3 && e > 0.05) }'; then
    echo "ok: 2 ranks then 3 resumed: test loss $got, one process $ref (after one epoch $one_epoch)"
else echo "FAIL: 2 ranks then 3 resumed: test loss '$got', one process '$ref', after one epoch '$one_epoch'"; fail=1; fi
exit $fail
