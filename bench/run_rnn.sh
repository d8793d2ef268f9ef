#!/bin/bash
# run_rnn.sh: the RNN's training step (issue 13, item 6: Fashion-MNIST rows as a sequence of 28
# steps of 28 pixels, LSTM 128, dense 10, Adam, batch 128) on ours (bench/rnn_step) against
# PyTorch 1.13's nn.LSTM (bench/rnn_torch.py, Debian's python3-torch) on the same data, batch
# and sizes, interleaved in one run: REPEATS rounds, each running in turn
#   ours STARPU_NCPU=1, torch --threads 1, then ours STARPU_NCPU=2, torch --threads 2
# with the same environment (OPENBLAS_* and the rest as they are, STARPU_SILENT=1); then a
# table of medians over the rounds and ours/torch at 2 threads and at each side's best count
# (the target is at most 1.0). It records the machine, the load, the environment and the
# versions. A side that is missing or fails is reported and left out. Every run is capped at
# RUN_TIMEOUT seconds.
#
#   bench/run_rnn.sh [BUILD_DIR]      (default: build, as scripts/build.sh makes it)
#   REPEATS=3 STEPS=20 WARMUP=3 BATCH=128 RUN_TIMEOUT=300 PYTHON=/usr/bin/python3 \
#       LOGDIR=/tmp/x bench/run_rnn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
BATCH=${BATCH:-128}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
PYTHON=${PYTHON:-/usr/bin/python3}   # Debian's python3, which has PyTorch 1.13
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/run_rnn.XXXXXX)}
mkdir -p "$LOGDIR"
export STARPU_SILENT=1
make -s -C "$BUILD" bench/rnn_step >/dev/null 2>"$LOGDIR/make.log" \
    || echo "make bench/rnn_step failed (see $LOGDIR/make.log): ours is left out"
OURS=$BUILD/bench/rnn_step

echo "## machine"
echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1); $(nproc) cores online;" \
     "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## versions"
echo "StarPU: $(pkg-config --modversion starpu-1.3 2>/dev/null || echo '?');" \
     "OpenBLAS: $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?');" \
     "torch: $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable');" \
     "gcc: $(gcc -dumpfullversion)"
echo "## environment (the same for every side)"
for v in $(env | sed -n 's/^\(\(OPENBLAS\|STARPU\|OMP\|GOMP\|TFC\|MKL\)_[A-Za-z0-9_]*\)=.*/\1/p' | sort); do
    echo "$v=${!v}"
done
echo "steps: batch $BATCH, $WARMUP warm-up + $STEPS timed per run, $REPEATS rounds; logs: $LOGDIR"

# One run of one side at n threads in round r: its log, then its result line echoed.
run_side() {
    local side=$1 n=$2 r=$3 log="$LOGDIR/$1.$2.$3.log"
    case $side in
    ours)  [ -x "$OURS" ] || return 0
           timeout "$RUN_TIMEOUT" "$OURS" --workers "$n" --batch "$BATCH" --steps "$STEPS" \
               --warmup "$WARMUP" >"$log" 2>&1 ;;
    torch) timeout "$RUN_TIMEOUT" "$PYTHON" bench/rnn_torch.py --threads "$n" --batch "$BATCH" \
               --steps "$STEPS" --warmup "$WARMUP" >"$log" 2>&1 ;;
    esac || echo "$side at $n round $r: failed or timed out (exit $?, log $log)"
    grep -E '^rnn_torch |^tfc rnn_step_ms_median=' "$log" || true
}

echo "## rounds"
t0=$(date +%s)
for r in $(seq 1 "$REPEATS"); do
    for n in 1 2; do
        for side in ours torch; do run_side "$side" "$n" "$r"; done
    done
done
echo "load average after the rounds: $(cut -d' ' -f1-3 /proc/loadavg); they took $(( $(date +%s) - t0 )) s"

echo "## summary: medians over $REPEATS rounds"
"$PYTHON" - "$LOGDIR" "$REPEATS" <<'PY'
import statistics, sys
logdir, repeats = sys.argv[1], int(sys.argv[2])

def step_ms(side, line):
    f = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
    if side == "torch" and line.startswith("rnn_torch "):
        return float(f["ms_per_step"])
    if side == "ours" and line.startswith("tfc rnn_step_ms_median="):
        return float(line.split()[1].split("=")[1])
    return None

med = {}
print("| side | threads | rounds | ms/step (median of rounds) | min | max |")
print("|---|---|---|---|---|---|")
for side in ("ours", "torch"):
    for n in (1, 2):
        ms = []
        for r in range(1, repeats + 1):
            try:
                ms += [v for v in (step_ms(side, l) for l in open(f"{logdir}/{side}.{n}.{r}.log"))
                       if v is not None]
            except OSError:
                pass
        if ms:
            med[side, n] = statistics.median(ms)
            print(f"| {side} | {n} | {len(ms)} | {med[side, n]:.1f} | {min(ms):.1f} | {max(ms):.1f} |")
print()
if ("ours", 2) in med and ("torch", 2) in med:
    print(f"ours/torch at 2 threads: {med['ours', 2] / med['torch', 2]:.2f} (target <= 1.0)")
best = {s: min(v for (t, n), v in med.items() if t == s) for s in ("ours", "torch")
        if any(t == s for t, _ in med)}
if len(best) == 2:
    print(f"ours/torch at each side's best count: {best['ours'] / best['torch']:.2f}")
PY
