#!/bin/bash
# run_dist.sh: the distributed training step's figures (issue 15, item 7; bench/RESULTS.md,
# "Distributed step"). From the build directory, after `make bench/dist_step`:
#     bench/run_dist.sh [STEPS] [BATCH]          (defaults 20 and 128, the flagship's batch)
# 1. the parameter bytes of the flagship MLP and the CNN, variable by variable;
# 2. N = 1, 2, 3 ranks under mpirun (--oversubscribe, STARPU_NCPU=1 per rank: on a machine with
#    fewer cores than ranks x 2 this is OVERSUBSCRIBED, the MPI thread busy-polls beside the
#    worker), owners by size and all on rank 0: per rank the median step and the bytes sent per
#    step, measured by StarPU-MPI (STARPU_COMM_STATS) and the analytic minimum (bench/dist_step.c);
# 3. one rank's compute at the slice of N ranks: 1 rank at batch BATCH/N, N = 1, 2, 4, 8, 16, five
#    rounds, the fastest of each kept and fitted as fixed + per_row x rows;
# 4. a model of the step on a cluster from (3) and the bytes (assumptions printed with it):
#        step(N) = compute(BATCH / N) + bytes(N) / bandwidth + per_message x messages(N)
#    for the MLP (compute measured in 3) and the CNN (compute CNN_STEP_MS at batch 128 on one
#    worker, from bench/run_cnn.sh, scaled linearly with the batch).
# Environment: BW_GBPS (default 100, InfiniBand EDR), MSG_US (default 17: 2 us of network
# latency + 15 us of StarPU-MPI's own per message, STARPU-NOTES 1.9), CNN_STEP_MS (default 160).
set -eu
steps=${1:-20} batch=${2:-128}
prog=bench/dist_step
[ -x "$prog" ] || { echo "run_dist.sh: $prog is not built (make bench/dist_step)" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "run_dist.sh: no mpirun" >&2; exit 1; }
mpi="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
export STARPU_NCPU=1 STARPU_SILENT=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "## machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(uname -r)"
echo "## $(mpirun --version | head -1), StarPU $(pkg-config --modversion starpu-1.3 2>/dev/null)"
echo "## $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
$prog params | tee "$out/params"

echo "## measured: mpirun -np N $prog OWNERS $steps $batch (STARPU_NCPU=1 per rank)"
for n in 1 2 3; do
    for owners in size rank0; do
        $mpi -np $n $prog $owners "$steps" "$batch" 2> "$out/err" | sort | tee -a "$out/measured" ||
            { cat "$out/err" >&2; exit 1; }
    done
done
echo "## compute: mpirun -np 1 $prog size $steps BATCH/N"
for round in 1 2 3 4 5; do # (the model takes each batch's fastest round: the machine is shared)
    for div in 1 2 4 8 16; do
        $mpi -np 1 $prog size "$steps" $((batch / div)) 2> "$out/err" | tee -a "$out/compute" ||
            { cat "$out/err" >&2; exit 1; }
    done
done
echo "## load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"

BATCH=$batch python3 - "$out/params" "$out/measured" "$out/compute" <<'PY'
import os, sys
params = {}
for line in open(sys.argv[1]):
    w = line.split()
    params[w[1]] = [int(x) for x in w[4:]]
rows = [dict(zip(l.split()[0::2], l.split()[1::2])) for l in open(sys.argv[2])]
print("\n| N | owners | rank | step ms (oversubscribed) | sent B/step | analytic B/step | messages |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['ranks']} | {r['owners']} | {r['rank']} | {float(r['step_ms']):.1f} | "
          f"{r['sent_B']} | {r['analytic_B']} | {r['msgs']} |")
bad = [r for r in rows if r['sent_B'] != r['analytic_B']]
print(f"\nmeasured = analytic on {len(rows) - len(bad)} of {len(rows)} rank lines")

batch = int(os.environ["BATCH"])
best = {}
for l in open(sys.argv[3]):
    b, t = int(l.split()[7]), float(l.split()[9])
    best[b] = min(t, best.get(b, t))
comp = sorted(best.items())
# compute(b) = fixed + per_row * b, least squares over the fastest rounds
n_, sx, sy = len(comp), sum(b for b, _ in comp), sum(t for _, t in comp)
sxx, sxy = sum(b * b for b, _ in comp), sum(b * t for b, t in comp)
per_row = (n_ * sxy - sx * sy) / (n_ * sxx - sx * sx)
fixed = max(0.0, (sy - per_row * sx) / n_)
print("\nMLP compute on one worker, fastest of 5 rounds (ms): " +
      ", ".join(f"batch {b}: {t:.2f}" for b, t in comp) +
      f"; fit: {fixed:.2f} ms + {per_row * 1e3:.1f} us per row")
def mlp_compute(b): return fixed + per_row * b
cnn_ms = float(os.environ.get("CNN_STEP_MS", "160"))
def cnn_compute(b): return cnn_ms * b / 128

def owners(sizes, n, rank0):  # sched/dist_train.c's choose_owners
    load, own = [0] * n, [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = 0 if rank0 else min(range(n), key=lambda q: (load[q], q))
        own[i] = r; load[r] += sizes[i]
    return load
def traffic(sizes, n, placement):
    """max over ranks of (bytes sent, messages sent + received) per step"""
    P = sum(sizes)
    if placement == "tiles":  # every variable split in N equal tiles, one per rank
        return 2 * (n - 1) * P / n, 4 * (n - 1)
    load = owners(sizes, n, placement == "rank0")
    worst = (0, 0)
    for r in range(n):
        sent = (P - load[r]) + (n - 1) * load[r]
        holders = sum(1 for q in range(n) if load[q] and q != r)
        msgs = 2 * holders + (2 * (n - 1) if load[r] else 0)
        worst = max(worst, (sent, msgs))
    return worst

bw = float(os.environ.get("BW_GBPS", "100")) * 1e9 / 8  # bytes/s
msg_s = float(os.environ.get("MSG_US", "17")) * 1e-6
print(f"\nmodel: one rank per 28-core node, {bw * 8 / 1e9:.0f} Gb/s links (full duplex, "
      f"non-blocking switch), {msg_s * 1e6:.0f} us per message; compute = one worker's step at "
      f"batch {batch}/N as measured here (x1) or 4 workers' (x4: Debian's STARPU_MAXCPUS, "
      "perfect scaling); speedup = step(1) / step(N)")
ns = [1, 2, 3, 4, 6, 8, 12, 16]
for model, sizes, compute in (("mlp", params["mlp"], mlp_compute), ("cnn", params["cnn"], cnn_compute)):
    print(f"\n{model}: P = {sum(sizes)} B; compute({batch}) = {compute(batch):.1f} ms on one worker")
    print("| N | compute ms | comm ms: size / rank0 / tiles | speedup x1: size / rank0 / tiles | speedup x4: size / rank0 / tiles |")
    print("|---|---|---|---|---|")
    for n in ns:
        c = compute(batch / n)
        comm = []
        for pl in ("size", "rank0", "tiles"):
            sent, msgs = traffic(sizes, n, pl)
            comm.append(1e3 * (sent / bw + msgs * msg_s) if n > 1 else 0.0)
        s1 = [compute(batch) / (c + x) for x in comm]
        s4 = [compute(batch) / 4 / (c / 4 + x) for x in comm]
        print(f"| {n} | {c:.1f} | " + " / ".join(f"{x:.2f}" for x in comm) + " | "
              + " / ".join(f"{x:.2f}" for x in s1) + " | " + " / ".join(f"{x:.2f}" for x in s4) + " |")
PY
