#!/bin/bash
# device-check.sh [CARRY_DIR]: runs on a GPU device machine (CUDA, no StarPU, no network) from
# the repository root, with CARRY_DIR (default .devcarry, made by scripts/device-pack.sh)
# carried along. Logs go to $OUT (or /tmp/devout). Steps, each with its own time limit:
#   0. the convolutions: tests/test_conv_cudnn (cuDNN and the own CUDA kernels against the CPU,
#      1-3-D, float32 and float64, with counters that say cuDNN ran); the op sweep's conv cases
#      then reach cuDNN in step 1 (TFC_CONV_BACKEND unset: auto); STEPS=convown runs the whole
#      CUDA op sweep again with TFC_CONV_BACKEND=im2col (the own conv kernels only);
#   1. the CUDA op sweep: every op task pinned to the CUDA worker (TFC_TEST_WHERE=cuda),
#      compared with float64 references, and the gradient sweep the same way;
#   1b. the op sweep again with every matmul split into 2x2 tiles (tiling.c's partitions and
#      the kernels' leading dimensions on the GPU), pinned to the CUDA worker;
#   2. the other test programs with the CUDA worker present under dmda (the scheduler places);
#   2b. the CNN training step (bench/cnn_step, cuDNN convolutions; dmda, 4 CPU + 1 CUDA worker)
#      beside PyTorch's same network on the GPU (bench/cnn_torch.py --device cuda), interleaved;
#   3. the flagship MLP step (bench/mlp_step) with CPU workers only and with the GPU, beside
#      PyTorch on the same GPU and CPU (bench/mlp_torch.py --device cuda|cpu), interleaved.
# STEPS=... picks a subset (conv ops grad tiles tests cnn mlp convown; default all but convown);
# DEVICE_TESTS=... the programs of step 2.
set -uo pipefail
carry=${1:-.devcarry}
out=${OUT:-/tmp/devout}
mkdir -p "$out" /tmp/dc
tar -C /tmp/dc -xJf "$carry/payload.tar.xz" || exit 1
cudalibs=
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libcusparse.so.12 \
         libnvJitLink.so.13; do
    d=$(find /usr/local /usr/lib /opt -name "$n" 2>/dev/null | head -1 | xargs -r dirname)
    [ -n "$d" ] && case ":$cudalibs:" in *":$d:"*) ;; *) cudalibs=$cudalibs:$d ;; esac
    [ -n "$d" ] || echo "device-check: $n not found"
done
export LD_LIBRARY_PATH=/tmp/dc/lib$cudalibs
export STARPU_HOME=/tmp/dc/starpu-home STARPU_SILENT=1 TFC_TEST_SRCDIR=$PWD/tests
mkdir -p "$STARPU_HOME"
bin=/tmp/dc/bin
steps=${STEPS:-conv ops grad tiles tests cnn mlp}
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
deadline=${DEADLINE:-480} # seconds: later steps are cut short or skipped, so that the logs
                          # come back inside the device call's limit
run() { # name limit cmd...: runs with a limit, logs to $out/name.log, notes the result
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    (( limit > deadline - SECONDS )) && limit=$((deadline - SECONDS))
    (( limit < 10 )) && { note "$name: skipped (deadline)"; return; }
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    note "$name: rc=$rc in $((SECONDS - t0)) s ($(grep -E 'passed|failed|Run Summary|asserts' "$out/$name.log" | tail -2 | tr -s ' \n' ' '))"
}
note "machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1); $(nproc) cores"
note "cpu: $(grep -m1 "model name" /proc/cpuinfo); OPENBLAS env: $(env | grep ^OPENBLAS | tr "\n" " ")"
ldd "$bin/test_ops" | grep -E "not found|cuda|cublas|starpu" | tee -a "$summary"
# StarPU measures the bus once per STARPU_HOME: do it first, outside the tests' limits.
t0=$SECONDS
STARPU_NCUDA=1 timeout 150 "$bin/mlp_step" --data "$PWD/$carry/fashion-mnist" --steps 5 --warmup 5 \
    --profile 0 --device cuda >"$out/first_start.log" 2>&1
note "first start (bus calibration, one epoch on the GPU): rc=$? in $((SECONDS - t0)) s"

case " $steps " in *" conv "*)
    if [ -x "$bin/test_conv_cudnn" ]; then
        run conv_cudnn 90 env STARPU_NCUDA=1 "$bin/test_conv_cudnn"
    else
        note "conv_cudnn: test_conv_cudnn was not packed"
    fi ;; esac
case " $steps " in *" convown "*)
    run ops_cuda_own_conv 180 env TFC_CONV_BACKEND=im2col TFC_TEST_WHERE=cuda \
        TFC_TEST_SCHEDS=dmdas "$bin/test_ops" ;; esac
case " $steps " in *" ops "*)
    run ops_cuda 180 env TFC_TEST_WHERE=cuda TFC_TEST_SCHEDS=dmdas "$bin/test_ops" ;; esac
case " $steps " in *" grad "*)
    run grad_cuda 150 env TFC_TEST_WHERE=cuda STARPU_SCHED=dmdas "$bin/test_grad" ;; esac
case " $steps " in *" tiles "*)
    run tiles_cuda 150 env TFC_TEST_WHERE=cuda TFC_TEST_SCHEDS=dmdas TFC_TILE_MIN=1 \
        TFC_TILE_SIZE=2 "$bin/test_ops" ;; esac
case " $steps " in *" tests "*)
    for t in ${DEVICE_TESTS:-test_value test_graph test_plan test_session test_sched test_report \
             test_optim test_train test_errors test_env test_passes test_tiling test_control_flow \
             test_layers test_cflow_grad test_rnn}; do
        [ -x "$bin/$t" ] && run "$t" 60 env STARPU_SCHED=dmda "$bin/$t"
    done ;; esac
case " $steps " in *" cnn "*)
    data=$PWD/$carry/fashion-mnist
    for r in 1 2 3; do # warm-up 30: dmda first calibrates each whole step on a CPU worker too
        [ -x "$bin/cnn_step" ] && run "cnn_tfc_gpu.$r" 90 env STARPU_SCHED=dmda STARPU_NCPU=4 \
            STARPU_NCUDA=1 "$bin/cnn_step" --data "$data" --steps 30 --warmup 30
        run "cnn_torch_gpu.$r" 90 python3 bench/cnn_torch.py --device cuda --data "$data" \
            --steps 30 --warmup 10
    done
    grep -h 'ms_per_step\|ms/step\|median' "$out"/cnn_*.log | tee -a "$summary" ;; esac
case " $steps " in *" mlp "*)
    data=$PWD/$carry/fashion-mnist
    for r in 1 2 3; do
        run "mlp_tfc_gpu.$r" 120 env STARPU_SCHED=dmda STARPU_NCPU=4 STARPU_NCUDA=1 \
            "$bin/mlp_step" --data "$data" --steps 200 --warmup 60 --device cuda \
            --profile "$([ $r = 1 ] && echo 100 || echo 0)"
        run "mlp_tfc_gpu_dmda.$r" 120 env STARPU_SCHED=dmda STARPU_NCPU=4 STARPU_NCUDA=1 \
            "$bin/mlp_step" --data "$data" --steps 200 --warmup 60 \
            --profile "$([ $r = 1 ] && echo 100 || echo 0)"
        run "mlp_torch_gpu.$r" 120 python3 bench/mlp_torch.py --device cuda --data "$data" \
            --steps 200 --warmup 60
        run "mlp_tfc_cpu.$r" 120 env STARPU_SCHED=lws STARPU_NCPU=2 STARPU_NCUDA=0 \
            "$bin/mlp_step" --data "$data" --steps 200 --warmup 20 --profile 0
        run "mlp_torch_cpu.$r" 120 python3 bench/mlp_torch.py --threads 2 --data "$data" \
            --steps 200 --warmup 20
    done
    grep '^tfc \|^torch ' "$out"/mlp_*.log | tee -a "$summary" ;; esac
note "done"
