#!/bin/bash
# run_scheds.sh: the same work under every StarPU scheduler we support, with calibrated
# performance models, side by side in one run (issue 5, benchmark (d)), and the speed-up from
# 1 to 2 CPU workers (benchmark (c)):
#   - the flagship MLP training step (bench/mlp_step: ms per step, and the loss after the timed
#     steps and the epoch's mean loss, which must be the same under every scheduler), and
#   - the 2048x2048x2048 float32 matmul node (bench/tiled_matmul, when built).
# First one calibration run under dmda fills the history-based models (STARPU_HOME in LOGDIR,
# STARPU_CALIBRATE=1); then REPEATS rounds, each running every scheduler in turn, then
# STARPU_NCPU=1 under lws; medians over rounds.
#
#   bench/run_scheds.sh [BUILD_DIR]     (default: build)
#   REPEATS=3 STEPS=100 WARMUP=20 SCHEDS="lws eager prio dmda dmdas" LOGDIR=/tmp/x \
#       bench/run_scheds.sh /tmp/b1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-20}
SCHEDS=${SCHEDS:-lws eager prio dmda dmdas}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/run_scheds.XXXXXX)}
mkdir -p "$LOGDIR"
export STARPU_SILENT=1 STARPU_HOME=$LOGDIR/starpu-home
mkdir -p "$STARPU_HOME"
make -s -C "$BUILD" bench >/dev/null
mlp=$BUILD/bench/mlp_step
mm=$BUILD/bench/tiled_matmul
[ -x "$mm" ] || mm=

echo "## machine"
echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1); nproc: $(nproc)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for v in OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE OPENBLAS_L2_SIZE STARPU_NCPU STARPU_WORKERS_NOBIND; do
    echo "$v=${!v-(unset)}"
done
echo "steps: $WARMUP warm-up + $STEPS timed; rounds: $REPEATS; logs: $LOGDIR"

run() { # log cmd...
    local log=$1; shift
    timeout "$RUN_TIMEOUT" "$@" >"$log" 2>&1 || echo "failed or timed out: $* (log $log)"
}
echo "## calibration (dmda, STARPU_CALIBRATE=1)"
STARPU_SCHED=dmda STARPU_CALIBRATE=1 run "$LOGDIR/calibrate.mlp.log" "$mlp" --steps 200 \
    --warmup 20 --profile 0
[ -n "$mm" ] && STARPU_SCHED=dmda STARPU_CALIBRATE=1 run "$LOGDIR/calibrate.mm.log" "$mm" 2048 3
t0=$(date +%s)
for r in $(seq 1 "$REPEATS"); do
    for s in $SCHEDS; do
        STARPU_SCHED=$s STARPU_NCPU=2 run "$LOGDIR/mlp.$s.2.$r.log" "$mlp" --steps "$STEPS" --warmup "$WARMUP" --profile 0
        [ -n "$mm" ] && STARPU_SCHED=$s STARPU_NCPU=2 run "$LOGDIR/mm.$s.2.$r.log" "$mm" 2048 7
    done
    STARPU_SCHED=lws STARPU_NCPU=1 run "$LOGDIR/mlp.lws.1.$r.log" "$mlp" --steps "$STEPS" \
        --warmup "$WARMUP" --profile 0
    [ -n "$mm" ] && STARPU_SCHED=lws STARPU_NCPU=1 run "$LOGDIR/mm.lws.1.$r.log" "$mm" 2048 7
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); rounds took $(( $(date +%s) - t0 )) s"

python3 - "$LOGDIR" "$REPEATS" "$SCHEDS" <<'PY'
import glob, re, statistics, sys
logdir, repeats, scheds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def fields(path, prefix):
    try:
        for line in open(path):
            if line.startswith(prefix + " "):
                out = {}
                for f in line.split()[1:]:
                    k, _, v = f.partition("=")
                    try:
                        out[k] = float(v)
                    except ValueError:
                        pass
                return out
    except OSError:
        pass
    return None

def med(kind, sched, ncpu, key, prefix):
    vals = [f[key] for r in range(1, repeats + 1)
            for f in [fields(f"{logdir}/{kind}.{sched}.{ncpu}.{r}.log", prefix)] if f and key in f]
    return (statistics.median(vals), vals) if vals else (None, [])

print("## MLP training step (2 CPU workers), medians over rounds")
print("| scheduler | step ms | epoch examples/s | loss after timed steps | epoch mean loss |")
print("|---|---|---|---|---|")
losses = set()
for s in scheds:
    m, _ = med("mlp", s, 2, "step_ms_median", "tfc")
    e, _ = med("mlp", s, 2, "epoch_examples_per_s", "tfc")
    f = fields(f"{logdir}/mlp.{s}.2.1.log", "tfc") or {}
    l1, le = f.get("loss_last"), f.get("epoch_loss")
    losses.add((l1, le))
    fmt = lambda v, p: "-" if v is None else f"{v:.{p}f}"
    print(f"| {s} | {fmt(m, 3)} | {fmt(e, 0)} | {fmt(l1, 9)} | {fmt(le, 9)} |")
print("same losses under every scheduler:", "yes" if len(losses) == 1 else f"NO: {losses}")
m1, _ = med("mlp", "lws", 1, "step_ms_median", "tfc")
m2, _ = med("mlp", "lws", 2, "step_ms_median", "tfc")
if m1 and m2:
    print(f"MLP step, lws: 1 worker {m1:.3f} ms, 2 workers {m2:.3f} ms: speed-up {m1 / m2:.2f}")
if glob.glob(f"{logdir}/mm.*.log"):
    print()
    print("## 2048^3 float32 matmul node (bench/tiled_matmul), medians over rounds")
    keys = ["tfc_ms", "bare_ms", "cblas2_ms", "untiled_ms", "vs_cblas2", "vs_bare"]
    print("| scheduler | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for s in scheds:
        row = [med("mm", s, 2, k, "tiled_matmul")[0] for k in keys]
        print(f"| {s} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in row) + " |")
    print("(vs_cblas2, vs_bare: their time over ours, targets >= 0.90 and >= 0.97)")
    for k in ("tfc_ms", "bare_ms"):
        a, b = med("mm", "lws", 1, k, "tiled_matmul")[0], med("mm", "lws", 2, k, "tiled_matmul")[0]
        if a and b:
            print(f"matmul {k}, lws: 1 worker {a:.2f}, 2 workers {b:.2f}: speed-up {a / b:.2f}")
PY
