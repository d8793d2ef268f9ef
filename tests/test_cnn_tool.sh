#!/bin/bash
# test_cnn_tool.sh: the flagship CNN (examples/fashion_cnn) saved after a few steps on a slice
# of Fashion-MNIST (512 training and 256 test rows, cut from the Debian package's files), then
# trained further, evaluated and run by the `tfc` tool without its C code: tfc info (the
# network's 3274634 parameters), train (resuming from the example's checkpoint in the middle of
# an epoch, to its end), eval, run (probabilities.npy of 256 rows). Skipped (77) when the data
# set is not installed. Run by `make check` from the build directory.
set -u
build=$(pwd)
tfc=$build/src/tfc
cnn=$build/examples/fashion_cnn
D=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
for p in "$tfc" "$cnn"; do
    [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
[ -r "$D/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $D"; exit 77; }
work=$(mktemp -d "$build/tests/cnn.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
cd "$work"
limit=300   # seconds per command: a hang fails instead of blocking make check

fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
run() { timeout $limit "$@" >out 2>err || fail "$* exited with $?"; }
has() { grep -q -- "$1" out || fail "no '$1' in the output of the last command"; }

# slice SPLIT ROWS: the first ROWS examples of a split as plain idx files under the names the
# example reads (the reader tells gzip from plain by content); a 4-byte big-endian count
be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }
slice() {
    { printf '\x00\x00\x08\x03'; be32 "$2"; be32 28; be32 28
      gzip -dc "$D/$1-images-idx3-ubyte.gz" | tail -c +17 | head -c $(($2 * 784)); } \
        >data/$1-images-idx3-ubyte.gz
    { printf '\x00\x00\x08\x01'; be32 "$2"
      gzip -dc "$D/$1-labels-idx1-ubyte.gz" | tail -c +9 | head -c "$2"; } \
        >data/$1-labels-idx1-ubyte.gz
}
mkdir data
slice train 512
slice t10k 256

# 2 steps of 128 rows (half of the first epoch), saved with a checkpoint
run "$cnn" --data data --max-steps 2 --batch 128 --quiet --save cnn.db
has "trained 2 steps"; has "^test_accuracy=0\.[0-9]*$"
echo "ok: fashion_cnn --max-steps 2 --save: $(grep test_accuracy= out)"

train_data="--data images=data/train-images-idx3-ubyte.gz --data labels=data/train-labels-idx1-ubyte.gz"
test_data="--data images=data/t10k-images-idx3-ubyte.gz --data labels=data/t10k-labels-idx1-ubyte.gz"
run "$tfc" info cnn.db
has "parameters: 3274634 in 8 variables"; has "train:"; has "predict:"; has "checkpoints: 1"
run "$tfc" train cnn.db $train_data --epochs 1 --batch 128 --quiet
has "resuming from the checkpoint at step 2 (epoch 0, batch 2 of 4)"
has "trained to epoch 1, step 4"
echo "ok: tfc train resumed the example's checkpoint: $(grep '^epoch 1/1' out)"
run "$tfc" eval cnn.db $test_data
has "checkpoint step: 4"; has "examples: 256"; has "^accuracy: 0\.[0-9]*$"
echo "ok: tfc eval: $(grep '^accuracy' out)"
run "$tfc" run cnn.db --data images=data/t10k-images-idx3-ubyte.gz --out pred
[ -s pred/probabilities.npy ] || fail "tfc run wrote no pred/probabilities.npy"
# a .npy of float32 [256, 10]: its header names the shape
head -c 128 pred/probabilities.npy | grep -aq "'shape': (256, 10)" ||
    fail "pred/probabilities.npy is not [256, 10]"
echo "ok: tfc run: probabilities [256, 10]"
echo "PASS"
