#!/bin/bash
# run_cnn.sh: the CNN's training step (issue 12: Fashion-MNIST, two 5x5 conv + pool layers,
# dense 3136->1024, dropout, dense 1024->10, Adam, batch 128) on ours (bench/cnn_step) against
# PyTorch 1.13 (bench/cnn_torch.py, Debian's python3-torch) and TensorFlow (bench/cnn_tf.py,
# tensorflow-cpu in bench/.venv), side by side in one run: REPEATS rounds, each running in turn
#   ours STARPU_NCPU=1, torch --threads 1, tf --threads 1, then the same at 2
# with the same environment (OPENBLAS_* and the rest as they are, STARPU_SILENT=1); then the
# convolution op against one same-shape cblas_sgemm (bench/conv_op --workers 1, 2) unless
# CONV_OP=0; then a table of medians over the rounds, ours over the faster peer with each side
# at its best thread count (the target is at most 0.8), and the scaling from 1 to 2. It records
# the machine, the environment and the versions. bench/peers-setup.sh runs first (it installs
# python3-torch and makes the venv the first time; SETUP=0 skips it). A side whose program is
# missing or fails is reported and left out of the table. Every program run is capped at
# RUN_TIMEOUT seconds. BASE=path adds a side 'base': another build's cnn_step (say main's, before
# a change) run in the same rounds as ours, right after it, so that the two meet the same load;
# the summary then gives ours/base. Ours' result line is 'tfc cnn_step_ms_median=...' (or, as first
# announced, 'cnn_step ms_per_step=...'); the peers print 'cnn_torch|cnn_tf ms_per_step=...'.
#
#   bench/run_cnn.sh [BUILD_DIR]      (default: build, as scripts/build.sh makes it)
#   REPEATS=3 STEPS=30 WARMUP=5 BATCH=128 RUN_TIMEOUT=300 CONV_OP=1 SETUP=1 OURS=path BASE=path \
#       PYTHON=/usr/bin/python3 TF_PYTHON=bench/.venv/bin/python LOGDIR=/tmp/x \
#       bench/run_cnn.sh /tmp/b1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
BATCH=${BATCH:-128}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
CONV_OP=${CONV_OP:-1}
SETUP=${SETUP:-1}
PYTHON=${PYTHON:-/usr/bin/python3}            # Debian's python3, which has PyTorch 1.13
TF_PYTHON=${TF_PYTHON:-bench/.venv/bin/python}  # the venv with tensorflow-cpu
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/run_cnn.XXXXXX)}
mkdir -p "$LOGDIR"
export STARPU_SILENT=1 TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

[ "$SETUP" = 0 ] || bench/peers-setup.sh | tail -1
make -s -C "$BUILD" bench >/dev/null 2>"$LOGDIR/make.log" \
    || echo "make bench failed (see $LOGDIR/make.log): missing programs are left out"
OURS=${OURS:-$BUILD/bench/cnn_step}   # another build's cnn_step: absolute, or from the top
BASE=${BASE:-}                        # optional: a baseline build's cnn_step, the side 'base'
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "base: no $BASE: left out"; BASE=; }
[ -x "$OURS" ] || echo "ours: no $OURS (examples/cnn_model.c and bench/cnn_step.c not built):" \
                       "left out of the table"

echo "## machine"
echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
echo "cores: $(nproc) online ($(lscpu | sed -n 's/^Core(s) per socket:[[:space:]]*//p' | head -1)" \
     "per socket, $(lscpu | sed -n 's/^Thread(s) per core:[[:space:]]*//p' | head -1) thread(s) per core);" \
     "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## versions"
echo "StarPU: $(pkg-config --modversion starpu-1.3 2>/dev/null || echo '?')"
echo "OpenBLAS: $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?')" \
     "($("$PYTHON" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_config.restype = ctypes.c_char_p; print(l.openblas_get_config().decode())' 2>/dev/null || echo '?'))"
echo "torch: $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable')," \
     "python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')," \
     "numpy $("$PYTHON" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo '?')"
echo "tensorflow: $("$TF_PYTHON" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null || echo 'not importable')," \
     "python $("$TF_PYTHON" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo '?')," \
     "numpy $("$TF_PYTHON" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo '?')"
echo "gcc: $(gcc -dumpfullversion)"
echo "## environment (the same for every side)"
# every variable these runtimes read (TF_CLI_* is Terraform's, not TensorFlow's)
for v in $(env | sed -n 's/^\(\(OPENBLAS\|STARPU\|OMP\|GOMP\|TF\|TFC\|MKL\)_[A-Za-z0-9_]*\)=.*/\1/p' \
           | grep -v '^TF_CLI_' | sort); do
    echo "$v=${!v}"
done
for v in OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OMP_NUM_THREADS STARPU_SCHED \
         STARPU_WORKERS_NOBIND TF_ENABLE_ONEDNN_OPTS; do
    [ -n "${!v+x}" ] || echo "$v=(unset)"
done
echo "threads: ours STARPU_NCPU=N; torch --threads N (torch.set_num_threads, interop and" \
     "OpenBLAS's pool); tf --threads N (intra-op and inter-op pools)"
echo "steps: batch $BATCH, $WARMUP warm-up + $STEPS timed per run, $REPEATS rounds; logs: $LOGDIR"

# One run of one side at n threads in round r: its log, then its result line echoed.
run_side() {
    local side=$1 n=$2 r=$3 log="$LOGDIR/$1.$2.$3.log"
    case $side in
    ours|base)
           local bin=$OURS
           [ "$side" = ours ] || bin=$BASE
           [ -n "$bin" ] && [ -x "$bin" ] || return 0
           STARPU_NCPU=$n timeout "$RUN_TIMEOUT" "$bin" --batch "$BATCH" --steps "$STEPS" \
               --warmup "$WARMUP" >"$log" 2>&1 ;;
    torch) timeout "$RUN_TIMEOUT" "$PYTHON" bench/cnn_torch.py --threads "$n" --batch "$BATCH" \
               --steps "$STEPS" --warmup "$WARMUP" >"$log" 2>&1 ;;
    tf)    timeout "$RUN_TIMEOUT" "$TF_PYTHON" bench/cnn_tf.py --threads "$n" --batch "$BATCH" \
               --steps "$STEPS" --warmup "$WARMUP" >"$log" 2>&1 ;;
    esac || echo "$side at $n round $r: failed or timed out (exit $?, log $log)"
    grep -E '^(cnn_step|cnn_torch|cnn_tf) |^tfc cnn_step_ms_median=' "$log" || true
}

echo "## rounds"
t0=$(date +%s)
for r in $(seq 1 "$REPEATS"); do
    for n in 1 2; do
        for side in ours base torch tf; do run_side "$side" "$n" "$r"; done
    done
done
echo "load average after the rounds: $(cut -d' ' -f1-3 /proc/loadavg); they took $(( $(date +%s) - t0 )) s"
echo "## details (round 1)"
for f in "$LOGDIR"/*.1.log; do
    [ -e "$f" ] && grep -E '^# |^CNN training step' "$f" \
        | sed "s|^\(# \)\{0,1\}|    $(basename "$f" .1.log): |" || true
done

if [ "$CONV_OP" != 0 ]; then
    echo "## the convolution op against one same-shape cblas_sgemm (bench/conv_op)"
    for n in 1 2; do
        if [ -x "$BUILD/bench/conv_op" ]; then
            timeout "$RUN_TIMEOUT" "$BUILD/bench/conv_op" --workers "$n" --batch "$BATCH" \
                >"$LOGDIR/conv_op.$n.log" 2>&1 || echo "conv_op --workers $n: failed (an error or a wrong result) or timed out"
            grep -E '^(#|conv_op)' "$LOGDIR/conv_op.$n.log" || true
        else
            echo "no $BUILD/bench/conv_op"
        fi
    done
fi

echo "## summary: medians over $REPEATS rounds"
"$PYTHON" - "$LOGDIR" "$REPEATS" "$BATCH" <<'PY'
import glob, statistics, sys
logdir, repeats, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tags = {"ours": "cnn_step", "base": "cnn_step", "torch": "cnn_torch", "tf": "cnn_tf"}

def fields(line):
    out = {}
    for f in line.split()[1:]:
        k, _, v = f.partition("=")
        try:
            out[k] = float(v)
        except ValueError:
            pass
    return out

def step_ms(side, line):
    """The median ms per step on a result line, or None. cnn_step prints it as
    'tfc cnn_step_ms_median=...' (the brief announced 'cnn_step ms_per_step=...': both read)."""
    f = fields(line)
    if line.startswith(tags[side] + " ") and "ms_per_step" in f:
        return f["ms_per_step"]
    if side in ("ours", "base") and line.startswith("tfc ") and "cnn_step_ms_median" in f:
        return f["cnn_step_ms_median"]
    return None

runs = {}
for side, tag in tags.items():
    for n in (1, 2):
        ms = []
        for r in range(1, repeats + 1):
            try:
                for line in open(f"{logdir}/{side}.{n}.{r}.log"):
                    if step_ms(side, line) is not None:
                        ms.append(step_ms(side, line))
            except OSError:
                pass
        if ms:
            runs[side, n] = ms
# forward, weight gradients, and the input gradients training needs (not conv1's)
gflop = (2 * batch * 32 * 25 * 784 * 2 + 2 * batch * 64 * 32 * 25 * 196 * 3
         + 2 * batch * (3136 * 1024 + 1024 * 10) * 3) / 1e9
print(f"step: {gflop:.2f} GFLOP at batch {batch} (forward, weight gradients, conv2's and the "
      f"dense layers' input gradients)")
print("| side | threads | rounds | ms/step (median of rounds) | min | max | GFLOP/s |")
print("|---|---|---|---|---|---|---|")
med = {}
for (side, n), ms in sorted(runs.items()):
    med[side, n] = statistics.median(ms)
    print(f"| {side} | {n} | {len(ms)} | {med[side, n]:.1f} | {min(ms):.1f} | {max(ms):.1f} | "
          f"{gflop / med[side, n] * 1e3:.1f} |")
print()
best = {}
for side in tags:
    ns = [n for n in (1, 2) if (side, n) in med]
    if ns:
        n = min(ns, key=lambda n: med[side, n])
        best[side] = (n, med[side, n])
peers = [s for s in ("torch", "tf") if s in best]
if "ours" in best and peers:
    fp = min(peers, key=lambda s: best[s][1])
    ratio = best["ours"][1] / best[fp][1]
    print(f"ours/faster peer = {ratio:.2f} (target <= 0.8: {'met' if ratio <= 0.8 else 'not met'}); "
          f"ours at its best STARPU_NCPU={best['ours'][0]}: {best['ours'][1]:.1f} ms, {fp} at its "
          f"best --threads {best[fp][0]}: {best[fp][1]:.1f} ms")
    for s in peers:
        print(f"ours/{s} at each side's best count: {best['ours'][1] / best[s][1]:.2f}")
elif peers:
    print("ours: no result, so no ratio")
if "ours" in best and "base" in best:
    print(f"ours/base at each one's best count: {best['ours'][1] / best['base'][1]:.2f}")
for side in tags:
    if (side, 1) in med and (side, 2) in med:
        print(f"scaling {side} 1 -> 2: {med[side, 1] / med[side, 2]:.2f}x")
conv = []
for path in sorted(glob.glob(f"{logdir}/conv_op.*.log")):
    for line in open(path):
        if line.startswith("conv_op "):
            f = dict(x.split("=", 1) for x in line.split()[1:])
            conv.append(f)
if conv:
    print()
    print("| layer | direction | workers | ms | GFLOP/s | sgemm ms | sgemm GFLOP/s | ratio | tasks/run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in conv:
        print(f"| {f['layer']} | {f['dir']} | {f['workers']} | {f['ms']} | {f['gflops']} | "
              f"{f['sgemm_ms']} | {f['sgemm_gflops']} | {f['ratio']} | {f['tasks_per_run']} |")
    for w in sorted({f["workers"] for f in conv}):
        rs = [float(f["ratio"]) for f in conv if f["workers"] == w]
        print(f"conv op / same-shape sgemm at {w} worker(s): {min(rs):.2f} to {max(rs):.2f}, "
              f"{sum(r >= 0.8 for r in rs)} of {len(rs)} directions at the 0.8 target or above")
PY
