#!/bin/bash
# test_onnx_finetune.sh: fine-tuning an imported ONNX model with `tfc train` (issue 14).
# make_model's MLP, trained one epoch, is exported with --with-variables; `tfc import
# --trainable --loss softmax_cross_entropy --labels labels --output <its logits>` gives a store
# with a "train" signature; `tfc train` runs one epoch on it, and `tfc eval` must show the loss
# fallen and the accuracy not down and above 0.5 (chance is 0.25); the fine-tuned store
# exports again, and that export imports and runs. Then, when Debian's Fashion-MNIST is there
# (the files test_cnn_tool.sh uses, sliced to 512 training and 256 test rows), mnist_mlp's
# saved MLP the same way: its loss on the test rows must fall and its accuracy rise above 0.3
# (chance is 0.1) after one epoch of `tfc train`. Also the errors: --loss without
# --trainable or --labels, an unknown kind, several outputs without --output, an --output that
# is no tensor, a labels name that is taken, logits of the wrong rank. Run by `make check` from
# the build directory.
set -u
build=$(pwd)
tfc=$build/src/tfc
make_model=$build/examples/make_model
mnist_mlp=$build/examples/mnist_mlp
D=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
for p in "$tfc" "$make_model" "$mnist_mlp"; do
    [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
work=$(mktemp -d "$build/tests/onnx-finetune.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
cd "$work"
limit=300

fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
run() { timeout $limit "$@" >out 2>err || fail "$* exited with $?"; }
# refuse STATUS NEEDLE CMD...: the command exits with STATUS, says NEEDLE on stderr and
# leaves no store behind
refuse() {
    local want=$1 needle=$2; shift 2
    rm -f ft.db
    timeout $limit "$@" >out 2>err
    local rc=$?
    [ $rc = "$want" ] || fail "$* exited with $rc, not $want"
    grep -q -- "$needle" err || fail "no '$needle' in the error of: $*"
    [ -e ft.db ] && fail "a failed import left ft.db: $*"
    return 0
}
# value KEY: the number after "KEY: " in out (tfc eval's report)
value() { sed -n "s/^$1: //p" out; }

data="--data images=train-images.idx --data labels=train-labels.idx"
run "$make_model" .
run "$tfc" train model.db $data --epochs 1 --batch 64
run "$tfc" export model.db m.onnx --with-variables
# the logits: the tensor that feeds the Split before the Softmax of "probabilities"
logits=$(grep -ao 'bias_add_[0-9]*' m.onnx | sort -t_ -k3 -n | tail -n 1)
[ -n "$logits" ] || fail "no logits tensor (bias_add_N) in the export"

refuse 2 "--loss needs --trainable" "$tfc" import m.onnx ft.db --loss mse --labels y
refuse 2 "--loss needs --labels" "$tfc" import m.onnx ft.db --trainable --loss mse
refuse 2 "--loss 'hinge' is not a loss" "$tfc" import m.onnx ft.db --trainable --loss hinge \
    --labels y
refuse 2 "only go with --loss" "$tfc" import m.onnx ft.db --trainable --labels y
refuse 2 "only go with --loss" "$tfc" import m.onnx ft.db --trainable --lr 0.1
refuse 2 "--optimizer 'lbfgs'" "$tfc" import m.onnx ft.db --trainable --loss mse --labels y \
    --optimizer lbfgs
refuse 2 "--lr '-1'" "$tfc" import m.onnx ft.db --trainable --loss mse --labels y --lr -1
refuse 1 "the model has 2 outputs" "$tfc" import m.onnx ft.db --trainable \
    --loss softmax_cross_entropy --labels y
refuse 1 "--output 'nosuch' is no tensor" "$tfc" import m.onnx ft.db --trainable \
    --loss softmax_cross_entropy --labels y --output nosuch
refuse 1 "--labels 'images' is already a tensor" "$tfc" import m.onnx ft.db --trainable \
    --loss softmax_cross_entropy --labels images --output "$logits"
refuse 1 "is not float32 logits" "$tfc" import m.onnx ft.db --trainable \
    --loss softmax_cross_entropy --labels y --output predict/class

# mse on the probabilities: labels of their dtype and shape, loss without metrics
run "$tfc" import m.onnx mse.db --trainable --loss mse --labels target --output probabilities \
    --optimizer sgd --lr 0.1
run "$tfc" info mse.db
grep -q "feeds    images, target" out || fail "the mse train signature does not feed target"
grep -q "metrics  (none)" out || fail "an mse train signature with metrics"

# fine-tuning the classifier
run "$tfc" import m.onnx ft.db --trainable --loss softmax_cross_entropy --labels labels \
    --output "$logits" --lr 0.01
run "$tfc" info ft.db
grep -q "train_op train" out || fail "no train op in the imported train signature"
run "$tfc" eval ft.db $data
loss0=$(value loss) acc0=$(value accuracy)
run "$tfc" train ft.db $data --epochs 1 --batch 64
grep -q "trained to epoch 1, step 16" out || fail "tfc train did not run 16 steps"
run "$tfc" eval ft.db $data
loss1=$(value loss) acc1=$(value accuracy)
echo "fine-tuning: loss $loss0 -> $loss1, accuracy $acc0 -> $acc1"
awk -v a="$loss0" -v b="$loss1" 'BEGIN { exit !(b < a) }' || fail "the loss did not fall"
awk -v a="$acc0" -v b="$acc1" 'BEGIN { exit !(b >= a && b > 0.5 && b <= 1) }' ||
    fail "the accuracy $acc1 is not sane (before: $acc0)"

# the fine-tuned store exports, and the export runs like the store
run "$tfc" export ft.db ft.onnx --with-variables
grep -q "checkpoint of step 16" out || fail "the export is not of the fine-tuned checkpoint"
run "$tfc" import ft.onnx back.db
run "$tfc" run ft.db --data images=test-x.npy --out ours
run "$tfc" run back.db --data images=test-x.npy --out back
for f in probabilities.npy predict_class.npy; do
    cmp -s "ours/$f" "back/$f" || fail "$f differs after the fine-tuned export and import"
done
[ -r "$D/train-images-idx3-ubyte.gz" ] || {
    echo "PASS: tfc import --loss, train, eval, export (no Fashion-MNIST in $D: its part skipped)"
    exit 0
}
# slice SPLIT ROWS: the first ROWS examples of a split as plain idx files (as test_cnn_tool.sh)
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
split_data() { echo "--data images=data/$1-images-idx3-ubyte.gz --data labels=data/$1-labels-idx1-ubyte.gz"; }
fashion=$(split_data train) test_rows=$(split_data t10k)
run "$mnist_mlp" --data data --epochs 1 --batch 128 --quiet --save mlp.db
run "$tfc" export mlp.db mlp.onnx --with-variables
run "$tfc" import mlp.onnx mlpft.db --trainable --loss softmax_cross_entropy --labels labels \
    --output logits/bias_add
run "$tfc" eval mlpft.db $test_rows
loss0=$(value loss) acc0=$(value accuracy)
run "$tfc" train mlpft.db $fashion --epochs 1 --batch 32 --quiet
run "$tfc" eval mlpft.db $test_rows
loss1=$(value loss) acc1=$(value accuracy)
echo "Fashion-MNIST MLP fine-tuning: test loss $loss0 -> $loss1, accuracy $acc0 -> $acc1"
awk -v a="$loss0" -v b="$loss1" 'BEGIN { exit !(b < a) }' ||
    fail "the Fashion-MNIST loss did not fall"
awk -v b="$acc1" 'BEGIN { exit !(b > 0.3 && b <= 1) }' ||
    fail "the Fashion-MNIST accuracy $acc1 is not sane"
run "$tfc" export mlpft.db mlpft.onnx --with-variables
echo "PASS: tfc import --loss, tfc train, tfc eval and tfc export of an imported ONNX model"
