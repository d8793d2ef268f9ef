#!/bin/bash
# run_mlp.sh: the flagship MLP's training step, tfc-starpu (bench/mlp_step) against PyTorch
# (bench/mlp_torch.py), side by side in one run: REPEATS rounds, each running in turn
#   tfc STARPU_NCPU=1, torch --threads 1, tfc STARPU_NCPU=2, torch --threads 2
# with the same environment (OPENBLAS_* and the rest left as they are, STARPU_SILENT=1), then a
# table of medians over the rounds, the ratios tfc/torch with each side at its best thread
# count, and where tfc's step time goes (profiling records of round 1). About 2 to 4 minutes
# on 2 idle cores; more on a busy machine, but every program run is capped at RUN_TIMEOUT
# seconds so that the whole stays under about 10 minutes.
#
#   bench/run_mlp.sh [BUILD_DIR]      (default: build, as scripts/build.sh makes it)
#   REPEATS=3 STEPS=200 WARMUP=20 RUN_TIMEOUT=150 PYTHON=/usr/bin/python3 LOGDIR=/tmp/x \
#       bench/run_mlp.sh /tmp/b1
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEATS=${REPEATS:-3}
STEPS=${STEPS:-200}
WARMUP=${WARMUP:-20}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
PYTHON=${PYTHON:-/usr/bin/python3}   # Debian's python3, which has PyTorch 1.13
LOGDIR=${LOGDIR:-$(mktemp -d /tmp/run_mlp.XXXXXX)}
mkdir -p "$LOGDIR"
export STARPU_SILENT=1

make -s -C "$BUILD" bench >/dev/null
[ -x "$BUILD/bench/mlp_step" ] || { echo "no $BUILD/bench/mlp_step" >&2; exit 1; }

echo "## machine"
echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
echo "nproc: $(nproc); memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## versions"
echo "StarPU: $(pkg-config --modversion starpu-1.3 2>/dev/null || echo '?')"
echo "OpenBLAS: $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?')" \
     "($("$PYTHON" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0"); l.openblas_get_config.restype = ctypes.c_char_p; print(l.openblas_get_config().decode())' 2>/dev/null || echo '?'))"
echo "torch: $("$PYTHON" -c 'import torch; print(torch.__version__)'), python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
echo "gcc: $(gcc -dumpfullversion)"
echo "## environment (the same for both sides)"
for v in OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_VERBOSE OMP_NUM_THREADS \
         OMP_WAIT_POLICY MKL_NUM_THREADS STARPU_SCHED STARPU_WORKERS_NOBIND STARPU_WORKERS_CPUID \
         STARPU_HOME STARPU_SILENT; do
    echo "$v=${!v-(unset)}"
done
echo "STARPU_NCPU: set per run (1, 2); torch: --threads N (torch.set_num_threads and OpenBLAS's pool)"
echo "steps: $WARMUP warm-up + $STEPS timed (fetching the loss) + $STEPS timed (not fetching)"
echo "logs: $LOGDIR"

t0=$(date +%s)
for r in $(seq 1 "$REPEATS"); do
    for n in 1 2; do
        STARPU_NCPU=$n timeout "$RUN_TIMEOUT" "$BUILD/bench/mlp_step" --steps "$STEPS" \
            --warmup "$WARMUP" --profile "$([ "$r" = 1 ] && echo 100 || echo 0)" \
            >"$LOGDIR/tfc.$n.$r.log" || echo "tfc STARPU_NCPU=$n round $r: failed or timed out"
        grep '^tfc ' "$LOGDIR/tfc.$n.$r.log" || true
        timeout "$RUN_TIMEOUT" "$PYTHON" bench/mlp_torch.py --threads "$n" --steps "$STEPS" \
            --warmup "$WARMUP" >"$LOGDIR/torch.$n.$r.log" \
            || echo "torch --threads $n round $r: failed or timed out"
        grep '^torch ' "$LOGDIR/torch.$n.$r.log" || true
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); rounds took $(( $(date +%s) - t0 )) s"

echo "## where tfc's step time goes (round 1, profiling records over 100 steps)"
for n in 1 2; do
    echo "STARPU_NCPU=$n:"
    grep '^# ' "$LOGDIR/tfc.$n.1.log" | sed 's/^# /    /' || true
done
echo "## torch details (round 1)"
for n in 1 2; do grep '^# ' "$LOGDIR/torch.$n.1.log" | sed 's/^# /    /' || true; done

echo "## summary: medians over $REPEATS rounds"
"$PYTHON" - "$LOGDIR" "$REPEATS" <<'PY'
import statistics, sys
logdir, repeats = sys.argv[1], int(sys.argv[2])
runs, counts = {}, {}
for side in ("tfc", "torch"):
    for n in (1, 2):
        rows = []
        for r in range(1, repeats + 1):
            try:
                for line in open(f"{logdir}/{side}.{n}.{r}.log"):
                    if line.startswith(side + " "):
                        rows.append({k: float(v) for k, v in
                                     (f.split("=") for f in line.split()[1:])
                                     if k != "device"})
            except OSError:
                pass
        if rows:
            runs[side, n] = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
            counts[side, n] = len(rows)
keys = [("step_ms_median", "step ms (median)"), ("step_ms_mean", "step ms (mean)"),
        ("step_nofetch_ms_median", "step ms, no fetch"), ("epoch_examples_per_s", "epoch ex/s"),
        ("wait_frac", "input wait"), ("peak_rss_mb", "peak RSS MB")]
print("| side | threads | rounds | " + " | ".join(k[1] for k in keys) + " |")
print("|---|---|---|" + "---|" * len(keys))
for (side, n), m in runs.items():
    print(f"| {side} | {n} | {counts[side, n]} | " + " | ".join(
        f"{m[k]:.4f}" if k == "wait_frac" else f"{m[k]:.0f}" if k.startswith(("epoch", "peak"))
        else f"{m[k]:.3f}" for k, _ in keys) + " |")

def best(side, key, lower):
    ns = [n for n in (1, 2) if (side, n) in runs]
    n = (min if lower else max)(ns, key=lambda n: runs[side, n][key])
    return n, runs[side, n][key]

print()
for key, name, lower in (("step_ms_median", "step time (median)", True),
                         ("step_nofetch_ms_median", "step time without the fetch", True),
                         ("epoch_examples_per_s", "epoch throughput", False)):
    if not any(s == "tfc" for s, _ in runs) or not any(s == "torch" for s, _ in runs):
        break
    (nt, t), (nq, p) = best("tfc", key, lower), best("torch", key, lower)
    print(f"{name}: tfc/torch = {t / p:.2f} ({'< 1' if lower else '> 1'} means tfc is faster; "
          f"tfc at its best STARPU_NCPU={nt}: {t:.{3 if lower else 0}f}, torch at its best "
          f"--threads {nq}: {p:.{3 if lower else 0}f})")
for n in (1, 2):
    if ("tfc", n) in runs and ("torch", n) in runs:
        a, b = runs["tfc", n], runs["torch", n]
        print(f"same count {n}: tfc/torch step time {a['step_ms_median'] / b['step_ms_median']:.2f},"
              f" epoch throughput {a['epoch_examples_per_s'] / b['epoch_examples_per_s']:.2f}")
m = next((v for (s, n), v in runs.items() if s == "tfc"), None)
if m:
    print(f"tfc analytic footprint of the step (params + grads + Adam m and v + activations and "
          f"their grads at batch 128): {m['model_mb']:.2f} MB; training set in memory "
          f"{m['data_mb']:.0f} MB")
PY
