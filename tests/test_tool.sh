#!/bin/bash
# test_tool.sh: the `tfc` tool end to end on a small model made by examples/make_model (a
# 16-16-4 MLP on synthetic 4x4 images): info, train with checkpoints, training runs stopped by
# SIGTERM and SIGINT (exit 143/130 after a checkpoint), resuming to the end (bit for bit the
# result of an uninterrupted run), a checkpoint that fails (file size limit, full disk: exit 1
# at once, naming the cause; the store resumes from its last announced checkpoint), eval, run
# (.npy outputs), dot, plot (SVG and PNG), one training writer per store (a second refused
# naming the first, a killed one taken over, in exclusive mode too), read-only commands that
# leave the store one unchanged file, an empty file, and misuse (exit 2 or 1 with a message);
# then progress lines in a log file (no \r, no escape codes), and info and plot showing a
# metric no signature names, with its gap left a gap; then train --val-data (val_* per
# epoch, as eval computes them), early stopping (and its count across resumes), and plot's
# axis labels, legend, x axis end and --log-y; the training flag (tests/flag_model) fed 1 by
# train, left 0 by eval and validation. Run by `make check` from the build
# directory; takes a few seconds.
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
    rm -f int.out int.err # a previous run's output would end the wait below early
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

# ---- one training writer per store ----
# train_bg DB: a long training run in the background (pid in $bg, output in bg.*), returning
# once it has written a checkpoint. TFC_STORE_EXCLUSIVE set for the call reaches it.
train_bg() {
    rm -f bg.out bg.err # the run truncates them only once started: no earlier run's lines
    "$tfc" train "$1" $train_data --epochs 2000 --batch 32 --checkpoint-every 5 --keep 3 \
        --quiet >bg.out 2>bg.err &
    bg=$!
    for _ in $(seq 600); do
        grep -q "^checkpoint at step" bg.out 2>/dev/null && break
        kill -0 $bg 2>/dev/null || break
        sleep 0.05
    done
    grep -q "^checkpoint at step" bg.out || { cat bg.err; fail "the background run wrote no checkpoint"; }
}
host=$(hostname)
cp model.db lock.db
train_bg lock.db
bad 1 "already being trained by process $bg on host '$host'" train lock.db $train_data
ok info lock.db   # readers need no lock
has "checkpoints: "
kill -KILL $bg
wait $bg 2>/dev/null
bg=
# the killed run may have gone on for epochs: train one beyond its last checkpoint's epoch
last=$(sqlite3 lock.db "SELECT max(step) FROM checkpoints")
target=$((last / 32 + 2))
ok train lock.db $train_data --epochs $target --batch 32 --quiet
has "resuming from the checkpoint at step"; has "trained to epoch $target"
echo "ok: a second trainer is refused naming the first; one killed by SIGKILL is taken over"

# exclusive locking mode (NFS, Lustre): the second cannot even open the store, and is told who
# holds it (after the 5 s busy timeout)
cp model.db excl.db
TFC_STORE_EXCLUSIVE=1 train_bg excl.db
TFC_STORE_EXCLUSIVE=1 bad 1 "process $bg on host '$host'" train excl.db $train_data
kill -TERM $bg
wait $bg
rc=$?
bg=
[ $rc -eq 143 ] || fail "the exclusive trainer exited with $rc after SIGTERM, expected 143"
[ "$(ls excl.db*)" = excl.db ] || fail "the exclusive trainer left $(ls excl.db*)"
echo "ok: exclusive mode: a second trainer is refused naming the first"

# ---- read-only commands leave the store one file, byte for byte as it was ----
mkdir ro
cp model.db ro/model.db
sum=$(cksum <ro/model.db)
unchanged() { # what ran
    [ "$(ls ro)" = model.db ] || fail "$1 left $(ls ro | tr '\n' ' ')beside the store"
    [ "$(cksum <ro/model.db)" = "$sum" ] || fail "$1 changed the store's bytes"
}
for c in "info ro/model.db" "eval ro/model.db $test_data" "dot ro/model.db" \
         "run ro/model.db --data images=test-x.npy --out ro-pred" "plot ro/model.db -o ro.svg"; do
    ok $c
    unchanged "tfc $c"
    TFC_STORE_EXCLUSIVE=1 ok $c
    unchanged "TFC_STORE_EXCLUSIVE=1 tfc $c"
done
# beside a running trainer: its files stay while it runs, and go with it
cp model.db ro/model.db
train_bg ro/model.db
ok info ro/model.db
has "checkpoints: "
kill -TERM $bg
wait $bg
bg=
[ "$(ls ro)" = model.db ] || fail "a trainer and a reader left $(ls ro | tr '\n' ' ')"
echo "ok: info, eval, dot, run and plot leave the store one file, unchanged"

# ---- an empty file is not a store, and stays empty ----
: >empty.db
bad 1 "empty file (0 bytes)" train empty.db $train_data
[ ! -s empty.db ] && [ "$(ls empty.db*)" = empty.db ] || fail "train changed the empty file"
bad 1 "empty file (0 bytes)" info empty.db
[ ! -s empty.db ] && [ "$(ls empty.db*)" = empty.db ] || fail "info changed the empty file"

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

# ---- progress with stderr in a file: plain lines, no carriage return or escape code ----
cp model.db progress.db
ok train progress.db $train_data --epochs $((end + 1)) --batch 32
has "^epoch $((end + 1))/$((end + 1)): step 32/32, loss [0-9.]*, [0-9]* ex/s" err
[ "$(tr -d '\r\033' <err | wc -c)" -eq "$(wc -c <err)" ] ||
    fail "carriage returns or escape codes in progress to a file: $(od -c err | head -n 2)"
echo "ok: progress in a log file: plain lines"

# ---- every recorded metric in info and plot; a gap in a series stays a gap ----
command -v sqlite3 >/dev/null || fail "the sqlite3 shell (package sqlite3) is not installed"
cp model.db metrics.db
# val_loss, which no signature names: steps 1 to 10 and 41 to 50 (30 steps missing between)
sqlite3 metrics.db "WITH RECURSIVE s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k < 50)
    INSERT INTO metrics(step, name, value, time) SELECT k, 'val_loss', 1.0 / k, 0 FROM s
    WHERE k <= 10 OR k > 40" || fail "sqlite3 could not add a metric to metrics.db"
ok info metrics.db
has "val_loss .* at step 50 (20 values), from step 1"; has "accuracy .* from step 1"
ok plot metrics.db -o metrics.svg
has "3 metrics"
# polylines of a panel's first path: each starts with a move (M)
polylines() {
    awk -v t=">$1</text>" 'index($0, t) { p = 1 } p && /^<path/ { print; exit }' metrics.svg |
        grep -o 'M[0-9]' | wc -l
}
[ "$(polylines val_loss)" -eq 2 ] ||
    fail "val_loss (a gap of 30 steps) is drawn as $(polylines val_loss) polylines, expected 2"
[ "$(polylines accuracy)" -eq 1 ] ||
    fail "accuracy (no gap) is drawn as $(polylines accuracy) polylines, expected 1"
ok plot metrics.db -o metrics.png; has "3 metrics"
echo "ok: info and plot list val_loss (not in a signature); its gap stays a gap"

# ---- validation in train: val_loss and val_accuracy per epoch, as eval computes them ----
mkdir val
timeout $limit "$make_model" val >out 2>err || fail "make_model val failed"
# labels all 0 (int64, the header of test-y.npy): a set the model gets worse on as it learns
hlen=$(od -An -tu2 -j8 -N2 test-y.npy | tr -d ' ')
{ head -c $((10 + hlen)) test-y.npy; head -c $((256 * 8)) /dev/zero; } >const-y.npy
val_data="--val-data images=test-x.npy --val-data labels=test-y.npy"
const_data="--val-data images=test-x.npy --val-data labels=const-y.npy"
cp val/model.db val/es.db
cp val/model.db val/resumed.db
ok train val/model.db $train_data $val_data --epochs 3 --batch 32 --quiet
has "^epoch 3/3: loss [0-9.]*, accuracy [0-9.]*, val_loss [0-9.]*, val_accuracy [0-9.]*, 32 steps"
ok info val/model.db
has "val_loss .* at step 96 (3 values), from step 32"
has "val_accuracy .* at step 96 (3 values), from step 32"
[ "$(sqlite3 val/model.db "SELECT group_concat(step) FROM (SELECT step FROM metrics
    WHERE name = 'val_loss' ORDER BY step)")" = "32,64,96" ] || fail "val_loss not at steps 32,64,96"
# the last epoch's values are those eval gives for the last checkpoint, in batches of 32
stored=$(sqlite3 val/model.db "SELECT value FROM metrics WHERE name = 'val_loss' AND step = 96")
ok eval val/model.db --data images=test-x.npy --data labels=test-y.npy --batch 32
evald=$(sed -n 's/^loss: //p' out)
awk -v a="$stored" -v b="$evald" 'BEGIN { d = a - b; exit !(d < 5e-7 && d > -5e-7) }' ||
    fail "val_loss at step 96 is $stored, eval says $evald"
echo "ok: train --val-data: val_loss and val_accuracy at steps 32, 64, 96 (as eval: $evald)"

# ---- early stopping: patience 2 on the constant-label set; a resumed run counts on ----
ok train val/es.db $train_data $const_data --epochs 30 --batch 32 --early-stop 2 --quiet
stop=$(sed -n 's/^stopped early at epoch \([0-9]*\), step \([0-9]*\): val_loss has not fallen for 2 epochs.*/\1/p' out)
[ -n "$stop" ] && [ "$stop" -lt 30 ] || fail "no early stop before epoch 30"
has "^checkpoint at step $((stop * 32)) "
# the stop is where the stored values say: the first epoch with 2 epochs since the best
want=$(sqlite3 val/es.db "SELECT value FROM metrics WHERE name = 'val_loss' ORDER BY step" |
    awk 'NR == 1 || $1 < best { best = $1; since = 0; next } { if (++since == 2) { print NR; exit } }')
[ "$stop" = "$want" ] || fail "stopped at epoch $stop, the stored val_loss says epoch ${want:-none}"
ok info val/es.db; has "step $((stop * 32)) "
ok train val/es.db $train_data $const_data --epochs 30 --batch 32 --early-stop 2 --quiet
has "^already stopped early at epoch $stop,"
# resumed after every epoch: the count comes from the store, so it stops at the same epoch
for e in $(seq 1 $stop); do
    ok train val/resumed.db $train_data $const_data --epochs $e --batch 32 --early-stop 2 --quiet
done
has "^stopped early at epoch $stop, step $((stop * 32)):"
ok train val/resumed.db $train_data $const_data --epochs 30 --batch 32 --early-stop 2 \
    --early-stop-metric accuracy --quiet   # watching val_accuracy (maximized): goes on
has "^epoch $((stop + 1))/30"
echo "ok: early stopping at epoch $stop, the same after a resume at every epoch"

bad 2 "--early-stop" train val/es.db $train_data $const_data --early-stop 0
bad 2 "--early-stop needs --val-data" train val/es.db $train_data --early-stop 2
bad 2 "--early-stop-metric nosuch" train val/es.db $train_data $const_data --early-stop 2 \
    --early-stop-metric nosuch
bad 2 "--early-stop-metric val_loss needs --early-stop" train val/es.db $train_data \
    $const_data --early-stop-metric val_loss
bad 2 "--val-data needs NAME=FILE" train val/es.db $train_data --val-data images
bad 1 "no --val-data labels=FILE" train val/es.db $train_data --val-data images=test-x.npy

# ---- plot: axis labels, legend, the x axis ending at the last step, --log-y ----
ok plot val/model.db -o val.svg
# xtick LABEL...: the x tick labels of the first panel of FILE
xticks() { grep -o 'class="xtick"[^>]*>[0-9.]*<' "$1" | sed 's/.*>\([0-9.]*\)</\1/'; }
grep -q 'class="xlabel"[^>]*>step</text>' val.svg || fail "no x axis label 'step'"
for m in loss accuracy val_loss val_accuracy; do
    grep -q "class=\"ylabel\"[^>]*>$m</text>" val.svg || fail "no y axis label '$m'"
done
grep -q '>raw (not smoothed)</text>' val.svg || fail "no legend 'raw (not smoothed)'"
grep -q '>per epoch (not smoothed)</text>' val.svg || fail "no legend for the val metrics"
last=$(xticks val.svg | sort -n | tail -n 1)
[ "$last" = 96 ] || fail "the x axis ends at ${last:-nothing}, the last step is 96"
# a long series: raw values under their moving average, its window named (2% of the values)
cp val/model.db long.db   # 500 values of a noisy metric, at steps 1 to 500
sqlite3 long.db "WITH RECURSIVE s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k < 500)
    INSERT INTO metrics(step, name, value, time) SELECT k, 'noisy', 1.0 / k + (k % 7) * 0.01, 0
    FROM s" || fail "sqlite3 could not add a metric to long.db"
ok plot long.db -o long.svg --metric noisy
grep -q '>raw</text>' long.svg || fail "no legend 'raw' for a smoothed series"
grep -q ">moving average of 10 values</text>" long.svg ||
    fail "no legend 'moving average of 10 values' (500 values: 2%)"
[ "$(grep -c '^<path' long.svg)" -eq 2 ] || fail "long.svg: not 2 lines (raw, average)"
[ "$(xticks long.svg | sort -n | tail -n 1)" = 500 ] ||
    fail "the x axis of long.svg does not end at the last step, 500"
# --log-y: powers of ten, the scale in the label; values <= 0 left out with a note
ok plot val/model.db -o log.svg --log-y --metric loss
grep -q 'class="ylabel"[^>]*>loss (log scale)</text>' log.svg || fail "no 'loss (log scale)' label"
# every tick is 1, 2 or 5 times a power of ten (as %g writes them), and there are some
ticks=$(grep -o 'class="ytick"[^>]*>[0-9.e+-]*<' log.svg | sed 's/.*>\(.*\)</\1/')
[ -n "$ticks" ] || fail "no y ticks on the log axis"
odd=$(echo "$ticks" | grep -Ev '^((0\.0*)?[125]0*|[125]e[-+][0-9]+)$')
[ -z "$odd" ] || fail "log axis ticks that are not 1, 2 or 5 times a power of ten: $odd"
ok plot val/model.db -o log.png --log-y
[ "$(head -c 8 log.png | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "log.png: no PNG"
cp val/model.db signed.db
sqlite3 signed.db "INSERT INTO metrics(step, name, value, time) VALUES
    (1, 'margin', -1, 0), (2, 'margin', 0, 0), (3, 'margin', 0.5, 0), (4, 'margin', 2, 0),
    (1, 'negative', -1, 0), (2, 'negative', 0, 0)" || fail "sqlite3 could not add metrics"
ok plot signed.db -o signed.svg --log-y --metric margin
has "metric 'margin' has 2 values <= 0 (of 4), left out of its line" err
[ "$(grep -A 3 '>margin (log scale)</text>' signed.svg | grep -m 1 '^<path' | grep -o '[ML]' | wc -l)" -eq 2 ] ||
    fail "margin on a log scale: not 2 points drawn"
bad 1 "metric 'negative' has no value > 0" plot signed.db -o neg.svg --log-y --metric negative
ok plot signed.db -o signed.svg --metric negative   # linear: drawn
bad 2 "--log-y takes no value" plot signed.db -o x.svg --log-y=1
echo "ok: plot: axis labels, legend, x axis ending at step $last, --log-y"
# ---- the training flag: train feeds it 1, eval and validation leave its default 0 ----
flag_model=$build/tests/flag_model
[ -x "$flag_model" ] || fail "$flag_model is not built"
mkdir flag && timeout $limit "$flag_model" flag >out 2>err || fail "flag_model failed"
ok train flag/flag.db --data x=flag/x.npy --val-data x=flag/x.npy --batch 4 --epochs 1 --quiet
has "flag_seen 1.0000, val_loss [0-9.]*, val_flag_seen 0.0000"
ok eval flag/flag.db --data x=flag/x.npy
has "flag_seen: 0.000000"
echo "ok: the training flag is 1 in training steps, 0 in eval and validation"
echo "PASS"
