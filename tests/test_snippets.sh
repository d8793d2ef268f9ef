#!/bin/bash
# test_snippets.sh: the C in the documentation compiles against the library just built and
# runs, so that it cannot drift from the API: the worked example at the top of src/tfc.h and
# every ```c block of README.md (```c is a complete program, ```c fragment the body of a main,
# which this script wraps). README's predict.c runs on a model store made by
# examples/make_model and trained one epoch by the tfc tool. Run by `make check` from the build
# directory (VPATH builds and distcheck too); TEST_CC, TEST_CFLAGS and TEST_LDFLAGS come from
# the makefile (the sanitizer flags of an --enable-sanitizers build).
set -u
build=$(pwd)
src=$(cd "${TFC_TEST_SRCDIR:?run by make check}/.." && pwd)
cc=${TEST_CC:-cc}
for p in "$build/libtool" "$build/libtfc-starpu.la" "$build/src/tfc" "$build/examples/make_model" \
         "$build/include/tfc-starpu/tfc.h"; do
    [ -e "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
done
work=$(mktemp -d "$build/tests/snippets.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
trap 'rm -rf "$work"' EXIT
limit=120 # seconds per program: a hang fails instead of blocking make check

# extract FILE: writes each C snippet of FILE (README.md or src/tfc.h) as $work/NAME.c, with a
# #line so that compiler messages point into FILE, and lists the names on stdout. A complete
# program is named after its opening comment ("/* predict.c: ..."), a fragment after its line.
extract() {
    awk -v file="$1" -v base="$(basename "$1")" -v dir="$work" '
    function open_snippet(line, wrap) {
        name = base "-" line
        out = dir "/" name ".c"
        if (wrap)
            printf "#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n" \
                   "#include <string.h>\n#include <tfc-starpu/tfc.h>\n\nint main(void)\n{\n" > out
        printf "#line %d \"%s\"\n", line + 1, file > out
        wrapped = wrap
        first = 1
    }
    function close_snippet() {
        if (wrapped) printf "    return 0;\n}\n" > out
        close(out)
        if (renamed != "") {
            system("mv \"" out "\" \"" dir "/" renamed ".c\"")
            name = renamed
        }
        print name
        out = ""
        renamed = ""
    }
    # README.md: fenced blocks
    base == "README.md" && out == "" && /^```c fragment[ \t]*$/ { open_snippet(NR, 1); next }
    base == "README.md" && out == "" && /^```c[ \t]*$/ { open_snippet(NR, 0); next }
    base == "README.md" && out != "" && /^```[ \t]*$/ { close_snippet(); next }
    # tfc.h: the indented lines after "Build first, compute later", up to the blank comment line
    base == "tfc.h" && /^ \* Build first, compute later/ { pending = 1; next }
    base == "tfc.h" && pending && out == "" && /^ \*   / { open_snippet(NR - 1, 1) }
    base == "tfc.h" && out != "" && !/^ \*   / { close_snippet(); pending = 0; next }
    out != "" {
        line = $0
        if (base == "tfc.h") line = substr(line, 6)
        if (first && match(line, /^\/\* [A-Za-z0-9_]+\.c: /))
            renamed = substr(line, 4, RLENGTH - 7)
        first = 0
        print line > out
    }
    END { if (out != "") { print "FAIL: unterminated snippet in " file > "/dev/stderr"; exit 1 } }
    ' "$1"
}

fail() {
    echo "FAIL: $*"
    for f in "$work"/out "$work"/err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}

names=$(extract "$src/src/tfc.h" && extract "$src/README.md") || fail "extracting the snippets"
[ -n "$(echo "$names" | grep '^tfc\.h-')" ] || fail "no worked example found in src/tfc.h"
[ -n "$(echo "$names" | grep '^README\.md-')" ] || fail "no \`\`\`c fragment found in README.md"
echo "$names" | grep -qx predict || fail "README.md has no predict.c"

# predict.c's model: a small store, trained one epoch so that it has a checkpoint
( cd "$work" && timeout $limit "$build/examples/make_model" . >out 2>err ) ||
    fail "examples/make_model"
timeout $limit "$build/src/tfc" train "$work/model.db" --data images="$work/train-images.idx" \
    --data labels="$work/train-labels.idx" --epochs 1 --batch 64 --quiet \
    >"$work/out" 2>"$work/err" || fail "tfc train of the model for predict.c"

for name in $names; do
    # shellcheck disable=SC2086 # TEST_CFLAGS and TEST_LDFLAGS are lists of flags
    "$build/libtool" --mode=link --tag=CC --quiet $cc -std=gnu11 -Wall -Werror \
        ${TEST_CFLAGS:-} -I"$build/include" -I"$src/src" -o "$work/$name" "$work/$name.c" \
        "$build/libtfc-starpu.la" ${TEST_LDFLAGS:-} >"$work/out" 2>"$work/err" ||
        fail "$name: does not compile"
    args=()
    case $name in
    predict) args=("$work/model.db" "$work/train-images.idx") ;;
    esac
    timeout $limit "$work/$name" "${args[@]}" >"$work/out" 2>"$work/err" ||
        fail "$name: exited with $?"
    # what each prints, checked loosely: the numbers are the library's business
    case $name in
    tfc.h-*) grep -Eq '^row 0: 0\.[0-9]{3} 0\.[0-9]{3}$' "$work/out" ||
        fail "$name: no 'row 0' line" ;;
    predict) [ "$(grep -Ec '^image [0-4]: class [0-3] \(p = [01]\.[0-9]{3}\)$' "$work/out")" = 5 ] ||
        fail "$name: not 5 predictions" ;;
    esac
    echo "ok: $name ($(head -n 1 "$work/out"))"
done
echo "PASS: $(echo "$names" | wc -w) snippets"
