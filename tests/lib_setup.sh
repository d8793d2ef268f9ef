# lib_setup.sh: the setup the end-to-end shell tests share, sourced first thing by each
# (`. "$(dirname "$0")/lib_setup.sh"`). They run from the build directory, as make check runs
# them; they check that the programs they run are built (FAIL otherwise), skip (77) without a
# command they need, work in a folder of their own removed at exit (after stopping a
# background job they left running), and start ranks under mpirun.
# Sets build (the build directory), bg (empty; a test puts the pid of a background job it
# runs there) and bg_signal (how the exit trap stops it: KILL; mpirun wants TERM, which it
# passes on to its ranks).
build=$(pwd)
bg=
bg_signal=KILL

# need_built PROG...: each must be an executable of the build, else FAIL (exit 1).
need_built() {
    for p; do
        [ -x "$p" ] || { echo "FAIL: $p is not built (run from the build directory)"; exit 1; }
    done
}

# need_command CMD [WHY]: SKIP (exit 77) when CMD is not on PATH.
need_command() {
    command -v "$1" >/dev/null || { echo "SKIP: no $1${2:+ ($2)}"; exit 77; }
}

# make_work NAME: work, a new folder build/tests/NAME.XXXXXX, removed at exit once $bg (when
# set) is stopped.
make_work() {
    work=$(mktemp -d "$build/tests/$1.XXXXXX") || { echo "FAIL: no temporary directory"; exit 1; }
    trap remove_work EXIT
}
remove_work() {
    [ -n "$bg" ] && kill "-$bg_signal" "$bg" 2>/dev/null
    rm -rf "$work"
}

# mpi_setup: mpi, the mpirun command line up to its number of ranks (oversubscribed: more
# ranks than cores here; as root, allowed). In the sanitizer run (scripts/test.sh) Open MPI
# leaks about 3000 objects per rank at exit, most from MCA components it has unloaded by then
# (stacks in "<unknown module>", so no suppression can name them): the ranks keep
# AddressSanitizer's checks without leak detection. (Checked by hand on 2 ranks: no leak stack
# passed through the library or tests/dist_mlp.)
# It also calibrates StarPU's bus in this test's STARPU_HOME with one process first: ranks that
# start on a fresh STARPU_HOME calibrate it at once and race on its files (STARPU-NOTES; seen
# in CI's sanitizer run: a rank's assertion reading bus/vm.affinity while another wrote it).
mpi_setup() {
    [ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
    mpi="mpirun --oversubscribe -np"
    [ "$(id -u)" = 0 ] && mpi="mpirun --allow-run-as-root --oversubscribe -np"
    if [ -x "$build/src/tfc" ]; then
        "$build/src/tfc" info --topology > /dev/null 2>&1 ||
            echo "note: calibrating StarPU's bus before the ranks failed; they will race on it"
    fi
    return 0
}
