#!/bin/bash
# test_cflow_train.sh: `tfc train` on a stored model whose loss is computed by a while_loop
# (tests/loop_model; issue 13, item 4): the tool runs the loop and its gradient loop from the
# store without the building code, the loss falls, and a run killed with SIGKILL after a
# checkpoint resumes to the same result as an uninterrupted one (`tfc eval` prints the same).
# Run by `make check` from the build directory; takes a few seconds.
set -u
. "$(dirname "$0")/lib_setup.sh"
tfc=$build/src/tfc
loop_model=$build/tests/loop_model
need_built "$tfc" "$loop_model"
make_work cflow-train
cd "$work"
limit=120
fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
ok() {
    timeout $limit "$tfc" "$@" >out 2>err || fail "tfc $* exited with $?"
}

timeout $limit "$loop_model" . >out 2>err || fail "loop_model failed"
cp loop.db straight.db
epochs=20
ok train straight.db --data x=x.npy --batch 4 --epochs $epochs --quiet
first=$(sed -n 's/^epoch 1\/[0-9]*: loss \([0-9.]*\),.*/\1/p' out)
last=$(sed -n "s/^epoch $epochs\\/[0-9]*: loss \\([0-9.]*\\),.*/\\1/p" out)
[ -n "$first" ] && [ -n "$last" ] || fail "no epoch losses in the output"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' ||
    fail "the loss did not fall: epoch 1 $first, epoch $epochs $last"
echo "ok: tfc train on a loop model: loss $first -> $last over $epochs epochs"

# killed (SIGKILL) after its first checkpoint, then resumed to the end
"$tfc" train loop.db --data x=x.npy --batch 4 --epochs $epochs --checkpoint-every 3 --quiet \
    >int.out 2>int.err &
bg=$!
for _ in $(seq 1 600); do
    grep -q "^checkpoint at step" int.out 2>/dev/null && break
    kill -0 $bg 2>/dev/null || break
    sleep 0.01
done
kill -9 $bg 2>/dev/null
wait $bg 2>/dev/null
bg=
grep -q "^checkpoint at step" int.out || { cat int.err; fail "the run wrote no checkpoint"; }
killed_at=$(grep "^checkpoint at step" int.out | tail -n 1)
ok train loop.db --data x=x.npy --batch 4 --epochs $epochs --checkpoint-every 3 --quiet
grep -q "trained to epoch $epochs\|nothing to do" out || fail "the resumed run did not finish"
ok eval straight.db --data x=x.npy
mv out straight.eval
ok eval loop.db --data x=x.npy
cmp -s out straight.eval || { diff out straight.eval; fail "resumed training differs"; }
echo "ok: killed after '$killed_at', resumed: the same result as an uninterrupted run:"
cat out
echo "PASS"
