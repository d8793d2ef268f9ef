#!/bin/bash
# test_onnx_export_tool.sh: `tfc export` end to end. make_model's store, trained one epoch by
# `tfc train`, is exported with --with-variables, imported back with `tfc import`, and both
# stores are run by `tfc run` on the same file: the .npy outputs must be the same bytes. Also
# the errors: --with-variables on a store without a checkpoint, a missing store, misuse; and
# the export without --with-variables (variables as graph inputs, which the import then makes
# placeholders of). Run by `make check` from the build directory.
set -u
build=$(pwd)
tfc=$build/src/tfc
make_model=$build/examples/make_model
for p in "$tfc" "$make_model"; do
    [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
work=$(mktemp -d "$build/tests/onnx-export.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
cd "$work"
limit=300

fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
run() { timeout $limit "$@" >out 2>err || fail "$* exited with $?"; }
# refuse STATUS NEEDLE CMD...: the command exits with STATUS and says NEEDLE on stderr
refuse() {
    local want=$1 needle=$2; shift 2
    timeout $limit "$@" >out 2>err
    local rc=$?
    [ $rc = "$want" ] || fail "$* exited with $rc, not $want"
    grep -q -- "$needle" err || fail "no '$needle' in the error of: $*"
}

run "$make_model" .
refuse 1 "has no checkpoint" "$tfc" export model.db m.onnx --with-variables
[ -e m.onnx ] && fail "a failed export left m.onnx"
refuse 1 "nosuch.db" "$tfc" export nosuch.db m.onnx
refuse 2 "unknown option '--bad'" "$tfc" export model.db m.onnx --bad
refuse 2 "MODEL.onnx is missing" "$tfc" export model.db

run "$tfc" train model.db --data images=train-images.idx --data labels=train-labels.idx \
    --epochs 1 --batch 64
run "$tfc" export model.db m.onnx --with-variables
grep -q "checkpoint of step 16" out || fail "the export does not name the checkpoint's step"
run "$tfc" import m.onnx m.db
run "$tfc" run model.db --data images=test-x.npy --out ours
run "$tfc" run m.db --data images=test-x.npy --out back
for f in probabilities.npy predict_class.npy; do
    cmp -s "ours/$f" "back/$f" || fail "$f differs after export and import"
done

# without --with-variables the variables are graph inputs: placeholders once imported
run "$tfc" export model.db inputs.onnx
run "$tfc" import inputs.onnx inputs.db
run "$tfc" info inputs.db
grep -q "hidden/kernel" out || fail "the variable hidden/kernel is no graph input of the export"
echo "PASS: tfc export round trip (bitwise), errors"
