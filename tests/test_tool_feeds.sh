#!/bin/bash
# test_tool_feeds.sh: `tfc run` passes feeds that are not batched whole: a model
# (tests/feeds_model) with a batched feed x [-1, 3], a scalar s and a vector v [2] runs with
# every batch size (the whole feeds in each batch), with a [1] file for the scalar, an int32
# file for the float vector (converted by value), and with --whole x (x unbatched too); a whole
# file of the wrong shape, a missing whole feed and --whole of no feed are errors naming them;
# then ONNX's expanded Range model (a Loop; scalar inputs only), imported and run.
# Run by `make check` from the build directory; takes a few seconds.
set -u
build=$(pwd)
tfc=$build/src/tfc
model=$build/tests/feeds_model
for p in "$tfc" "$model"; do
    [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
work=$(mktemp -d "$build/tests/feeds.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
cd "$work"
limit=60

fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
ok() {
    timeout $limit "$tfc" "$@" >out 2>err
    local rc=$?
    [ $rc -eq 0 ] || fail "tfc $* exited with $rc"
}
bad() {
    local want=$1 word=$2
    shift 2
    timeout $limit "$tfc" "$@" >out 2>err
    local rc=$?
    [ $rc -eq "$want" ] || fail "tfc $* exited with $rc, expected $want"
    grep -q -- "$word" err || fail "tfc $*: no '$word' in the error message"
    echo "ok: rejected ($rc): $(head -n 1 err)"
}
has() { grep -q -- "$1" "${2:-out}" || fail "no '$1' in the output of the last command"; }

timeout $limit "$model" "$work" >out 2>err || fail "feeds_model failed"

# y = x * s over every row, z = v + s once, whatever the batch
for b in 256 3 1; do
    ok run feeds.db --data x=x.npy --data s=s.npy --data v=v.npy --batch $b --rows 4
    has "^y: float32 \[4, 3\]"; has "^  \[0\] 2 4 6$"; has "^  \[3\] 20 22 24$"
    has "^z: float32 \[2\]"; has "^  \[0\] 12$"; has "^  \[1\] 22$"
    echo "ok: scalar and vector whole beside batches of $b"
done
ok run feeds.db --data x=x.npy --data s=s1.npy --data v=vi.npy --out pred --batch 3
has "^y: float32 \[4, 3\] -> pred/y.npy"; has "^z: float32 \[2\] -> pred/z.npy"
[ -s pred/y.npy ] && [ -s pred/z.npy ] || fail "no pred/y.npy or pred/z.npy"
echo "ok: a [1] file for the scalar, int32 for float, --out"
ok run feeds.db --data x=x.npy --data s=s.npy --data v=v.npy --whole x --batch 1
has "^y: float32 \[4, 3\]"; has "^  \[3\] 20 22 24$"
echo "ok: --whole x"

bad 1 "feed 'v' is passed whole (not batched): v3.npy holds shape \[3\], the placeholder takes \[2\]" \
    run feeds.db --data x=x.npy --data s=s.npy --data v=v3.npy
bad 1 "no --data s=FILE for feed 's'" run feeds.db --data x=x.npy --data v=v.npy
bad 1 "--whole w: not a feed" run feeds.db --data x=x.npy --data s=s.npy --data v=v.npy --whole w
bad 2 "--whole needs a feed NAME" run feeds.db --data x=x.npy --whole
bad 1 "--data w: 'w' is not a feed" run feeds.db --data x=x.npy --data s=s.npy --data v=v.npy --data w=v.npy

# an imported ONNX model of scalar inputs only, with a Loop: ONNX's expanded Range (start,
# limit, delta) from libonnx-testdata, when the package is there and tfc imports ONNX
range=/usr/share/libonnx-testdata/data/node/test_range_float_type_positive_delta_expanded/model.onnx
if [ -f "$range" ] && timeout $limit "$tfc" import "$range" range.db >out 2>err; then
    ok run range.db --data start=one.npy --data limit=five.npy --data delta=s.npy
    has "float32 \[2\]"; has "^  \[0\] 1$"; has "^  \[1\] 3$"
    echo "ok: Range(1, 5, 2) through an imported Loop, every feed a scalar"
else
    echo "note: no libonnx-testdata or no ONNX import: the imported Loop model is not run"
fi
echo "PASS: test_tool_feeds"
