#!/bin/bash
# test_tool.sh: the `tfc` tool end to end on a small model made by examples/make_model (a
# 16-16-4 MLP on synthetic 4x4 images): info, train with checkpoints, training runs stopped by
# SIGTERM and SIGINT (exit 143/130 after a checkpoint), resuming to the end (bit for bit the
# result of an uninterrupted run), a checkpoint that fails (file size limit, full disk: exit 1
# at once, naming the cause; the store resumes from its last announced checkpoint), eval, run
# (.npy outputs), dot, plot (SVG and PNG), and misuse (exit 2 or 1 with a message). Run by
# `make check` from the build directory; takes a few seconds.
set -u
build=$(pwd)
tfc=$build/src/tfc
make_model=$build/examples/make_model
for p in "$tfc" "$make_model"; do
    [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
work=$(mktemp -d "$build/tests/tool.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
bg=
cleanup() {
    [ -n "$bg" ] && kill "$bg" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
limit=60   # seconds per command: a hang fails instead of blocking make check

fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
# ok CMD...: runs the tool, which must exit 0 (stdout in ./out, stderr in ./err).
ok() {
    timeout $limit "$tfc" "$@" >out 2>err
    local rc=$?
    [ $rc -eq 0 ] || fail "tfc $* exited with $rc"
}
# bad RC WORD CMD...: the tool must exit with RC and say WORD on stderr.
bad() {
    local want=$1 word=$2
    shift 2
    timeout $limit "$tfc" "$@" >out 2>err
    local rc=$?
    [ $rc -eq "$want" ] || fail "tfc $* exited with $rc, expected $want"
    grep -qi -- "$word" err || fail "tfc $*: no '$word' in the error message"
    echo "ok: misuse rejected ($rc): $(head -n 1 err)"
}
has() { grep -q -- "$1" "${2:-out}" || fail "no '$1' in the output of the last command"; }

timeout $limit "$make_model" "$work" >out 2>err || fail "make_model failed"
train_data="--data images=train-images.idx --data labels=train-labels.idx"
test_data="--data images=test-x.npy --data labels=test-y.npy"

# ---- help, version, info ----
ok --version; has "tfc"
ok --help; has "usage: tfc COMMAND"; has "scaled to \[0,1\]"
for c in info train eval run dot plot; do ok $c --help; has "usage: tfc $c"; done
ok info model.db
has "graph: [0-9]* nodes"; has "parameters: 340 in 4 variables"; has "hidden/kernel/adam_m"
has "train:"; has "predict:"; has "checkpoints: 0"
echo "ok: info"

# ---- train 2 epochs (32 steps each), checkpoints every 10 steps, keep 3 ----
ok train model.db $train_data --epochs 2 --batch 32 --checkpoint-every 10 --keep 3 --quiet
has "no checkpoint: starting from initialized"; has "epoch 2/2"; has "step 64"
ok info model.db
has "checkpoints: 3"; has "step 64 "; has "loss .* at step 64 (64 values)"
echo "ok: train 2 epochs"

cp model.db straight.db   # trained again below without interruption, for comparison

# stopped FILE DB: after a run that a failed checkpoint stopped (exit 1, its output in out and
# err), checks that it stopped at once, announced only committed checkpoints, and left DB
# valid: it resumes from the last checkpoint announced, and every step then has its metrics
# once. Sets `last`.
stopped() {
    local at failed
    at=$(sed -n 's/.*stopped at step \([0-9]*\):.*/\1/p' err)
    failed=$(sed -n 's/.*checkpoint of step \([0-9]*\) .*not written.*/\1/p' err)
    last=$(sed -n 's/^checkpoint at step \([0-9]*\) .*/\1/p' out | tail -n 1)
    [ -n "$at" ] && [ -n "$failed" ] && [ -n "$last" ] ||
        fail "$1: no step, failed checkpoint or checkpoint announced"
    # the third checkpoint call waits for the failed one: at most 2 x 5 steps go on
    [ "$at" -le $((failed + 10)) ] ||
        fail "$1: checkpoint $failed failed, training went on to step $at"
    [ "$last" -lt "$failed" ] || fail "$1: announced checkpoint $last, but $failed failed"
    grep -q "^checkpoint at step $failed " out && fail "$1: the failed checkpoint was announced"
    mv out "$1.out"; mv err "$1.err"
    ok info "$2"; has "step $last "
    ok train "$2" $train_data --epochs $((last / 32 + 2)) --batch 32 --checkpoint-every 5 --quiet
    has "resuming from the checkpoint at step $last "
    local end=$(((last / 32 + 2) * 32))
    ok info "$2"; has "loss .* at step $end ($end values)"
}

# ---- a checkpoint past the file size limit (ulimit -f) stops training at once ----
cp model.db fsize.db
( ulimit -f $(($(wc -c <fsize.db) / 1024 + 300))   # KiB: room for a few checkpoints
  exec timeout $limit "$tfc" train fsize.db $train_data --epochs 2000 --batch 32 \
      --checkpoint-every 5 --keep 3 --quiet >out 2>err )
rc=$?
[ $rc -eq 1 ] || fail "training past the file size limit exited with $rc, expected 1"
has "file size limit (RLIMIT_FSIZE" err; has "store 'fsize.db'" err
stopped fsize fsize.db
echo "ok: file size limit -> stopped at once: $(head -n 1 fsize.err)"

# ---- a full disk: a small tmpfs in a private mount namespace, where the sandbox allows it ----
ns=
if unshare -m true 2>/dev/null; then ns="unshare -m"
elif unshare -rm true 2>/dev/null; then ns="unshare -rm"
fi
mkdir mnt
cp model.db full.db
if [ -n "$ns" ]; then
    $ns bash -c 'mount -t tmpfs -o size=512k tmpfs mnt || exit 77
        cp full.db mnt/ || exit 3
        timeout "$@" >out 2>err
        rc=$?
        rm -f full.db*; cp mnt/full.db* . || exit 3   # the store as it was left
        exit $rc' _ $limit "$tfc" train mnt/full.db $train_data --epochs 2000 --batch 32 \
        --checkpoint-every 5 --keep 3 --quiet
    rc=$?
else
    rc=77
fi
if [ $rc -eq 77 ]; then
    echo "ok: SKIPPED the full disk (the sandbox refuses a private tmpfs mount)"
else
    [ $rc -eq 1 ] || fail "training on a full disk exited with $rc, expected 1"
    has "disk full" err; has "store 'mnt/full.db'" err
    stopped full full.db
    echo "ok: full disk -> stopped at once: $(head -n 1 full.err)"
fi

# interrupt SIGNAL DB: starts a long training run (2000 epochs: tens of seconds at least) in
# the background, sends SIGNAL once it has written a checkpoint, and waits (output in int.*).
interrupt() {
    "$tfc" train "$2" $train_data --epochs 2000 --batch 32 --checkpoint-every 5 --keep 3 \
        >int.out 2>int.err &
    bg=$!
    for _ in $(seq 600); do
        grep -q "^checkpoint at step" int.out 2>/dev/null && break
        kill -0 $bg 2>/dev/null || break
        sleep 0.05
    done
    grep -q "^checkpoint at step" int.out || { cat int.err; fail "the run wrote no checkpoint"; }
    kill -"$1" $bg
    wait $bg
    rc=$?
    bg=
}

# ---- SIGTERM: exit 143 after a checkpoint (on a copy of the model) ----
cp model.db term.db
interrupt TERM term.db
[ $rc -eq 143 ] || { cat int.out int.err; fail "run stopped by SIGTERM exited with $rc, expected 143"; }
has "stopped by SIGTERM" int.err; has "^interrupted: checkpoint at step" int.out
echo "ok: SIGTERM -> exit 143 with a checkpoint"

# ---- SIGINT: exit 130 after a checkpoint ----
interrupt INT model.db
[ $rc -eq 130 ] || { cat int.out int.err; fail "interrupted run exited with $rc, expected 130"; }
has "resuming from the checkpoint at step 64" int.out
has "stopped by SIGINT" int.err
line=$(grep "^interrupted: checkpoint at step" int.out)
stopped=$(echo "$line" | sed -n 's/.* step \([0-9]*\) (epoch \([0-9]*\), batch \([0-9]*\)).*/\1/p')
epoch=$(echo "$line" | sed -n 's/.* step \([0-9]*\) (epoch \([0-9]*\), batch \([0-9]*\)).*/\2/p')
batch=$(echo "$line" | sed -n 's/.* step \([0-9]*\) (epoch \([0-9]*\), batch \([0-9]*\)).*/\3/p')
[ -n "$stopped" ] || { cat int.out; fail "no checkpoint at the interruption"; }
[ "$stopped" -gt 64 ] && [ "$stopped" -eq $((epoch * 32 + batch)) ] ||
    fail "interrupted at step $stopped, epoch $epoch, batch $batch"
ok info model.db
has "step $stopped "
echo "ok: SIGINT -> exit 130 with a checkpoint at step $stopped (epoch $epoch, batch $batch)"

# ---- resume and finish: two more epochs in all ----
end=$((epoch + 2))
ok train model.db $train_data --epochs $end --batch 32 --checkpoint-every 5 --keep 3 --quiet
has "resuming from the checkpoint at step $stopped (epoch $epoch, batch $batch of 32)"
has "trained to epoch $end, step $((end * 32))"
ok info model.db
has "checkpoints: 3"; has "step $((end * 32)) "
has "loss .* at step $((end * 32)) ($((end * 32)) values)"  # no step logged twice or skipped
ok train model.db $train_data --epochs $end --batch 32
has "nothing to do"
echo "ok: resumed at step $stopped and finished at step $((end * 32))"

# the interrupted and resumed run ends where an uninterrupted one does, bit for bit
ok train straight.db $train_data --epochs $end --batch 32 --checkpoint-every 5 --keep 3 --quiet
ok eval straight.db $test_data
mv out straight.eval
ok eval model.db $test_data
cmp -s out straight.eval || { diff out straight.eval; fail "resumed training differs"; }
echo "ok: the same result as an uninterrupted run"

# ---- eval on held-out .npy data (float32 images, int64 labels) ----
ok eval model.db $test_data
has "examples: 256"; has "checkpoint step: $((end * 32))"
acc=$(sed -n 's/^accuracy: //p' out)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || fail "eval accuracy ${acc:-none} < 0.9"
echo "ok: eval accuracy $acc"

# ---- run: outputs as .npy files, or printed ----
ok run model.db --data images=test-x.npy --out pred --batch 100
# a .npy file: magic, version, little-endian header length, header, data
npy_check() { # FILE SHAPE DATA_BYTES
    [ -f "$1" ] || fail "$1 is missing"
    [ "$(head -c 6 "$1" | od -An -c | tr -d ' ')" = "223NUMPY" ] || fail "$1: not a .npy file"
    local hlen size
    hlen=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' ')
    size=$(wc -c <"$1")
    [ "$size" -eq $((10 + hlen + $3)) ] || fail "$1: $size bytes, expected $((10 + hlen + $3))"
    head -c $((10 + hlen)) "$1" | grep -q "'shape': $2" || fail "$1: shape is not $2"
}
npy_check pred/probabilities.npy "(256, 4)" $((256 * 4 * 4))
npy_check pred/predict_class.npy "(256,)" $((256 * 8))
ok run model.db --data images=train-images.idx --rows 3
has "probabilities: float32 \[1024, 4\]"; has "predict/class: int64 \[1024\]"; has "  \[2\]"
echo "ok: run"

# ---- dot ----
ok dot model.db
[ "$(head -c 7 out)" = digraph ] || fail "dot output does not start with digraph"
has "style=dashed"; has "label=\"1\""
if command -v dot >/dev/null; then
    dot -Tsvg <out >/dev/null 2>err || fail "Graphviz rejects the DOT output"
    echo "ok: dot (checked by Graphviz)"
else
    echo "ok: dot (Graphviz not installed: syntax not checked)"
fi

# ---- plot ----
ok plot model.db -o curves.svg
has "2 metrics"
grep -q "<svg xmlns=\"http://www.w3.org/2000/svg\"" curves.svg || fail "no SVG root element"
grep -q "</svg>" curves.svg || fail "SVG not closed"
grep -q ">accuracy</text>" curves.svg || fail "no accuracy panel in the SVG"
ok plot model.db -o curves.png --metric loss
[ "$(head -c 8 curves.png | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] ||
    fail "curves.png has no PNG signature"
[ "$(tail -c 8 curves.png | head -c 4)" = IEND ] || fail "curves.png does not end with IEND"
echo "ok: plot (SVG and PNG)"

# ---- misuse ----
bad 2 "usage"
bad 2 "unknown command" frobnicate model.db
bad 2 "unknown option" train model.db --bogus 1
bad 2 "missing MODEL" info
bad 2 "unexpected argument" info model.db other.db
bad 2 "--epochs" train model.db $train_data --epochs 0
bad 2 "NAME=FILE" train model.db --data images
bad 2 "-o FILE" plot model.db
bad 1 "no such file" info missing.db
echo "not a database, just text, long enough to be read as a header" >junk.db
bad 1 "junk.db" info junk.db
bad 1 "not a feed" train model.db $train_data --data pixels=test-x.npy
bad 1 "labels" train model.db --data images=train-images.idx
bad 1 "no 'train' signature" train predict-only.db $train_data
bad 1 "images" eval model.db --data images=missing.npy --data labels=test-y.npy
bad 1 "feed 'images'" eval model.db --data images=test-y.npy --data labels=test-y.npy
bad 1 "rows" eval model.db --data images=test-x.npy --data labels=train-labels.idx
bad 1 "no metric 'nosuch'" plot model.db -o x.svg --metric nosuch
echo "PASS"
