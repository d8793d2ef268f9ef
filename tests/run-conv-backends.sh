#!/bin/sh
# run-conv-backends.sh: the op sweep (tests/test_ops) and the gradient sweep (tests/test_grad)
# with TFC_CONV_BACKEND=im2col, so that their convolution cases (1-3 spatial dims, strides,
# pads, SAME_*, dilations, groups) check the im2col kernels too; the plain runs of those
# programs check oneDNN's where the build has it (TFC_CONV_BACKEND=auto). oneDNN's verbose
# mode is on: a convolution it ran means the variable was not obeyed. Exits 0 when all pass, 1
# on a failure. automake runs this from the build directory.

dir=
for cand in "${builddir:-.}/tests" "$(dirname "$0")"; do
    if [ -x "$cand/test_ops" ] && [ -x "$cand/test_grad" ]; then
        dir=$cand
        break
    fi
done
if [ -z "$dir" ]; then
    echo "run-conv-backends.sh: tests/test_ops or tests/test_grad not found; run it from the" \
         "build directory" >&2
    exit 99
fi
unset TFC_TEST_HOP TFC_TEST_WHERE
# one scheduler in the sanitizer pass (make check-sanitizers), as in run-tiling.sh
scheds="eager dmdas"
[ -n "${SANITIZER_PASS:-}" ] && scheds=dmdas
log=$(mktemp "${TMPDIR:-/tmp}/run-conv-backends.XXXXXX") || exit 99
trap 'rm -f "$log"' EXIT

for prog in test_ops test_grad; do
    echo "run-conv-backends.sh: $prog with TFC_CONV_BACKEND=im2col"
    TFC_CONV_BACKEND=im2col ONEDNN_VERBOSE=1 TFC_TEST_SCHEDS="$scheds" "$dir/$prog" \
        > "$log" 2>&1
    rc=$?
    grep -v '^onednn_verbose' "$log"
    [ $rc -eq 0 ] || exit 1
    if grep -q '^onednn_verbose,exec,cpu,convolution' "$log"; then
        echo "run-conv-backends.sh: $prog ran convolutions through oneDNN with" \
             "TFC_CONV_BACKEND=im2col:" >&2
        grep '^onednn_verbose,exec,cpu,convolution' "$log" | head -3 >&2
        exit 1
    fi
done
exit 0
