#!/bin/sh
# depcycles.sh: fails when files of the library depend on each other in a circle, by calls or by
# includes (STYLE.md: inside a folder, files do not call each other in circles; options flow
# down from the session, a job carries what it runs). Run by `make check` from the build
# directory; `tests/depcycles.sh [BUILDDIR [SRCDIR]]` by hand. Exits 0 when there is none, 1 on
# a circle, 99 when it cannot read the objects or sources (so it never passes on nothing).
#
# Calls: for each object of libtfc-core (DEPCYCLES_OBJECTS from Makefile.am, a name outside
# TFC_* since the library refuses TFC_ variables it does not know; else every .lo of the
# library's folders), nm gives the global symbols it defines and readelf the relocations of its
# code (.text* sections): file A depends on file B when A's code refers to a function or object
# that B defines. References held in initialised data do not count: a table of pointers (an op
# descriptor naming its gradient builder, a codelet naming its kernels and its can_execute hook,
# a writer job naming what it runs) is how a lower file runs a higher one without knowing it,
# which is what breaks a circle; counting it would make every op family a circle with its
# gradients. Includes: the #include "..." lines of the sources (.c, .h, .cu) of src/, graph/,
# sched/, store/ and codelets/, resolved as the compilers do (the including file's folder, then
# src/ and codelets/). Circles are the strongly connected components of the file graph (over
# the whole library, so a circle across folders shows too); each is printed with the symbols or
# includes that make it.
#
# How it was shown to fail: with the circles this check was written against (the pass setters'
# calls back into sched/session.c, opencl_common.c calling every OpenCL family's check, the
# store writer calling checkpoint.c and metrics.c) it exits 1 and names those files and symbols;
# a function in sched/priority.c that calls tfc_cache_evict (as its setter did), or an
# `#include "session_priv.h"` in sched/plan.h, makes it exit 1 again, naming the circle.
set -u

# Circles allowed for now: each only as exactly this set of files (one set per line, sorted),
# so it may shrink away but neither grow nor be joined. None: the last two (graph.c comparing
# node ops with &tfc_op_variable, store.c's SQL helpers used by schema.c) are gone.
known=''

me=depcycles.sh
build=${1:-.}
if [ $# -ge 2 ]; then
    top=$2
elif [ -n "${TFC_TEST_SRCDIR:-}" ]; then
    top=$TFC_TEST_SRCDIR/..
else
    top=$(dirname "$0")/..
fi
folders='src graph sched store codelets'
NM=${NM:-nm}
READELF=${READELF:-readelf}
for t in "$NM" "$READELF"; do
    command -v "$t" >/dev/null 2>&1 || { echo "$me: $t not found (binutils)"; exit 99; }
done
[ -f "$top/sched/session.c" ] || { echo "$me: no sources in $top"; exit 99; }

work=$(mktemp -d "${TMPDIR:-/tmp}/depcycles.XXXXXX") ||
    { echo "$me: no temporary directory"; exit 99; }
trap 'rm -rf "$work"' EXIT

# ---- the call graph's input: "D file symbol" (defined global), "L file symbol" (defined static:
# a reference to it stays in its file) and "R file symbol" (the file's code refers to it) ------
objs=${DEPCYCLES_OBJECTS:-}
if [ -z "$objs" ]; then
    for d in $folders; do
        for lo in "$build/$d"/*.lo; do [ -f "$lo" ] && objs="$objs ${lo#"$build"/}"; done
    done
fi
n_obj=0
for lo in $objs; do
    stem=${lo%.*}
    case $lo in
    *.lo) # libtool object: the PIC object, or the non-PIC one in a static-only build
        o=$(sed -n "s/^pic_object='\(.*\)'$/\1/p" "$build/$lo")
        if [ -z "$o" ] || [ "$o" = none ]; then
            o=$(sed -n "s/^non_pic_object='\(.*\)'$/\1/p" "$build/$lo")
        fi
        o=$(dirname "$build/$lo")/$o ;;
    *) o=$build/$lo ;;
    esac
    [ -f "$o" ] || { echo "$me: $o (from $lo) not found: build the library first"; exit 99; }
    name=$stem.c
    [ -f "$top/$name" ] || [ ! -f "$top/$stem.cu" ] || name=$stem.cu
    "$NM" -P "$o" | awk -v f="$name" '
        $2 ~ /^[TDBRVWGSC]$/ { print "D", f, $1 }
        $2 ~ /^[tdbrvgsc]$/ { print "L", f, $1 }' >> "$work/calls" ||
        { echo "$me: $NM failed on $o"; exit 99; }
    "$READELF" -rW "$o" | awk -v f="$name" '
        /^Relocation section / { code = ($3 ~ /^.\.rela?\.text/) ; next }
        code && $1 ~ /^[0-9a-f]+$/ && NF >= 5 { print "R", f, $5 }' >> "$work/calls" ||
        { echo "$me: $READELF failed on $o"; exit 99; }
    n_obj=$((n_obj + 1))
done
[ "$n_obj" -gt 0 ] ||
    { echo "$me: no library objects under $build (build the library first)"; exit 99; }

# ---- the include graph's input: "F file" for each source, "I file included-path" ----------------
n_src=0
for d in $folders; do
    for f in $(cd "$top" && find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) |
               sort); do
        echo "F $f" >> "$work/includes"
        awk -F'"' -v f="$f" '/^[ \t]*#[ \t]*include[ \t]*"/ { print "I", f, $2 }' "$top/$f" \
            >> "$work/includes"
        n_src=$((n_src + 1))
    done
done
[ "$n_src" -gt 0 ] || { echo "$me: no sources under $top"; exit 99; }

# ---- circles: strongly connected components of each graph ------------------------------------
known=$(printf '%s' "$known" | tr '\n' ';')
awk -v me="$me" -v known="$known" -v n_obj="$n_obj" -v n_src="$n_src" '
function norm(p,    n, i, k, part, out) {   # a/b/../c -> a/c
    n = split(p, part, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (part[i] == "." || part[i] == "") continue
        if (part[i] == ".." && k > 0 && stack[k] != "..") { k--; continue }
        stack[++k] = part[i]
    }
    out = ""
    for (i = 1; i <= k; i++) out = out (i > 1 ? "/" : "") stack[i]
    return out
}
function dirof(p) { return sub(/\/[^\/]*$/, "", p) ? p : "." }
function node(g, f) {
    if (!((g, f) in id)) { id[g, f] = ++nn[g]; name[g, nn[g]] = f }
    return id[g, f]
}
function edge(g, a, b, why,    i, j) {
    if (a == b) return
    i = node(g, a); j = node(g, b)
    if ((g, i, j) in adj) { whys[g, i, j] = whys[g, i, j] " " why; return }
    adj[g, i, j] = 1; reach[g, i, j] = 1; whys[g, i, j] = why; n_edges[g]++
}
function circles(g, what,    n, i, j, k, c, m, set, tag, bad) {
    n = nn[g]; bad = 0
    for (k = 1; k <= n; k++)              # transitive closure (Warshall): n is a few dozen
        for (i = 1; i <= n; i++)
            if ((g, i, k) in reach)
                for (j = 1; j <= n; j++)
                    if ((g, k, j) in reach) reach[g, i, j] = 1
    for (i = 1; i <= n; i++) {
        if ((g, i) in comp) continue
        comp[g, i] = i; m = 1; set = name[g, i]
        for (j = i + 1; j <= n; j++)
            if (((g, i, j) in reach) && ((g, j, i) in reach)) {
                comp[g, j] = i; m++; set = set " " name[g, j]
            }
        if (m < 2) continue
        set = sortwords(set)
        tag = "CIRCLE"
        if (what == "calls" && index(";" known ";", ";" set ";")) tag = "known circle (allowed)"
        else bad = 1
        printf "%s of %s: %s\n", tag, what, set
        for (c = 1; c <= n; c++) {
            if (!((g, c) in comp) || comp[g, c] != i) continue
            for (j = 1; j <= n; j++) {
                if (!((g, c, j) in adj) || !((g, j) in comp) || comp[g, j] != i) continue
                if (what == "includes")
                    printf "    %s includes %s\n", name[g, c], name[g, j]
                else
                    printf "    %s -> %s: %s\n", name[g, c], name[g, j],
                        first(sortwords(whys[g, c, j]), 6)
            }
        }
    }
    return bad
}
function first(s, m,    n, w, i, out) {   # the first m words of s, then "..."
    n = split(s, w, " "); out = w[1]
    for (i = 2; i <= n && i <= m; i++) out = out " " w[i]
    return n > m ? out " ..." : out
}
function sortwords(s,    n, w, i, j, t, out) {
    n = split(s, w, " ")
    for (i = 2; i <= n; i++) {            # insertion sort: a few words
        t = w[i]
        for (j = i - 1; j > 0 && w[j] > t; j--) w[j + 1] = w[j]
        w[j + 1] = t
    }
    out = w[1]; for (i = 2; i <= n; i++) out = out " " w[i]
    return out
}
# nodes numbered in input order, so that the report reads the same on every run
FILENAME ~ /calls$/ { node("calls", $2) }
FILENAME ~ /includes$/ { node("includes", $2) }
FILENAME ~ /calls$/ && $1 == "D" { if (!($3 in def)) def[$3] = $2; next }
FILENAME ~ /calls$/ && $1 == "L" { local[$2, $3] = 1; next }
FILENAME ~ /calls$/ && $1 == "R" { nref++; if (!(($2, $3) in local)) ref[$2 SUBSEP $3] = 1; next }
FILENAME ~ /includes$/ && $1 == "F" { src[$2] = 1; next }
FILENAME ~ /includes$/ && $1 == "I" { inc[++ni] = $2 SUBSEP $3; next }
END {
    if (!nref) { print me ": no code relocations read (LTO objects?): cannot check calls"; exit 99 }
    for (k in ref) { split(k, p, SUBSEP); if (p[2] in def) edge("calls", p[1], def[p[2]], p[2]) }
    for (i = 1; i <= ni; i++) {
        split(inc[i], p, SUBSEP)
        t = norm(dirof(p[1]) "/" p[2])
        if (!(t in src)) t = norm("src/" p[2])
        if (!(t in src)) t = norm("codelets/" p[2])
        if (t in src) edge("includes", p[1], t, p[2])
    }
    printf "%s: %d objects, %d dependencies between files by calls; %d sources, %d by includes\n",
        me, n_obj, n_edges["calls"], n_src, n_edges["includes"]
    bad = circles("calls", "calls") + circles("includes", "includes")
    exit bad ? 1 : 0
}' "$work/calls" "$work/includes"
