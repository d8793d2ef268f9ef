#!/bin/bash
# test_cflow_killnine.sh: a stored model with a while_loop trains and resumes through `tfc train`
# after SIGKILL with the same bits (issue 13, "done when"). tests/loop_model writes a model whose
# loss is a recurrent while_loop whose body reads the trained variables (w, u, b), so training
# runs the loop's gradient loop; once with SGD and once with Adam (optimizer slots in the
# checkpoints). For each, a chain of runs is killed with SIGKILL KILLS times, each after it has
# announced a drawn number of checkpoints and a drawn delay (so some kills land mid-step or
# mid-checkpoint), and resumed with the same command; the next run must resume from the last
# checkpoint announced or a later one (stdout goes to a file, so announcements may lag their
# commits), and is itself killed right after it says so (but for the last), and the chain's final checkpoint must hold the same
# variables, byte for byte (sqlite3 hex of the blobs, optimizer slots and global step
# included), as an uninterrupted run's. One CPU worker (STARPU_NCPU=1), no CUDA or OpenCL.
# CFLOW_KILL_SEED=N replays the drawn schedule (the machine's timing still varies).
# Run by `make check` from the build directory; takes a few seconds. Exits 77 without sqlite3.
set -u
. "$(dirname "$0")/lib_setup.sh"
tfc=$build/src/tfc
loop_model=$build/tests/loop_model
need_built "$tfc" "$loop_model"
need_command sqlite3 "the checkpoints are compared with it"
make_work cflow-killnine
cd "$work"
STARPU_NCPU=1 STARPU_NCUDA=0 STARPU_NOPENCL=0
export STARPU_NCPU STARPU_NCUDA STARPU_NOPENCL
seed=${CFLOW_KILL_SEED:-$(( $$ % 32768 ))}
RANDOM=$seed
echo "kill schedule seed: $seed (CFLOW_KILL_SEED=$seed replays it)"
limit=120
KILLS=3
train_args=(--data x=x.npy --batch 4 --epochs 40 --checkpoint-every 3 --keep 4 --quiet)
fail() {
    echo "FAIL: $*"
    for f in out err; do [ -s "$f" ] && { echo "--- $f:"; tail -n 20 "$f"; }; done
    exit 1
}
# the latest checkpoint: its step, then every variable's name, dtype, shape and bytes in hex
dump() {
    sqlite3 "$1" "select step from checkpoints where id = (select max(id) from checkpoints);
        select v.name, v.dtype, v.shape, hex(c.data) from variables v join variable_chunks c
        on c.variable = v.id where v.checkpoint = (select max(id) from checkpoints)
        order by v.name, c.seq"
}
announced() { local n; n=$(grep -c "^checkpoint at step" "$1" 2>/dev/null); echo "${n:-0}"; }

# one run on $1 killed with SIGKILL after it announced $2 checkpoints and $3 more seconds;
# sets killed_step to the last step it announced (0 when it finished first: no kill landed)
killed_run() {
    rm -f run.out run.err # the shell truncates them in the child: no stale lines meanwhile
    "$tfc" train "$1" "${train_args[@]}" >run.out 2>run.err &
    bg=$!
    for _ in $(seq 1 3000); do
        [ "$(announced run.out)" -ge "$2" ] && break
        kill -0 $bg 2>/dev/null || break
        sleep 0.005
    done
    sleep "$3"
    kill -9 $bg 2>/dev/null
    wait $bg 2>/dev/null
    local rc=$?
    bg=
    [ "$(announced run.out)" -ge 1 ] || {
        cat run.out run.err
        fail "a run wrote no checkpoint before the kill (exit status $rc; 137: the kill)"
    }
    killed_step=$(sed -n 's/^checkpoint at step \([0-9]*\) .*/\1/p' run.out | tail -n 1)
    grep -q "^trained to epoch" run.out && killed_step=0
    return 0
}

for opt in sgd adam; do
    mkdir "$opt" && cd "$opt" || fail "no directory $opt"
    timeout $limit "$loop_model" . $opt >out 2>err || fail "loop_model . $opt failed"
    cp loop.db straight.db
    timeout $limit "$tfc" train straight.db "${train_args[@]}" >out 2>err ||
        fail "$opt: uninterrupted tfc train exited with $?"
    grep -q "^trained to epoch 40, step 160" out || fail "$opt: the uninterrupted run did not finish"
    dump straight.db >straight.dump
    for v in w u b global_step; do
        grep -q "^$v|" straight.dump || fail "$opt: variable $v is not in the checkpoint"
    done
    [ $opt = sgd ] || [ "$(wc -l <straight.dump)" -gt 6 ] || fail "$opt: no optimizer slots checkpointed"

    landed=0 finished=0
    for k in $(seq 1 $KILLS); do
        need=$(( 1 + RANDOM % 4 ))
        delay=$(printf '0.%03d' $(( RANDOM % 40 )))
        killed_run loop.db $need "$delay"
        [ "$killed_step" -gt 0 ] || { echo "$opt: run $k finished before its kill"; continue; }
        landed=$((landed + 1))
        # the next run resumes from the last announced checkpoint, or from one committed after
        # it whose announcement the kill cut off; it is killed as soon as it says so (not under
        # timeout: the SIGKILL must reach tfc itself), but for the last, which runs to the end
        if [ $k -lt $KILLS ]; then
            rm -f out err
            "$tfc" train loop.db "${train_args[@]}" >out 2>err &
            bg=$!
            for _ in $(seq 1 3000); do
                grep -q "^resuming from" out 2>/dev/null && break
                kill -0 $bg 2>/dev/null || break
                sleep 0.005
            done
            kill -9 $bg 2>/dev/null
            wait $bg 2>/dev/null
            rc=$?
            bg=
            grep -q "^resuming from" out || fail "$opt: the run after kill $k said nothing of a resume (exit status $rc; 137: the kill)"
        else
            timeout $limit "$tfc" train loop.db "${train_args[@]}" >out 2>err ||
                fail "$opt: the resumed tfc train exited with $?"
            finished=1
        fi
        resumed=$(sed -n 's/^resuming from the checkpoint at step \([0-9]*\) .*/\1/p' out)
        [ -n "$resumed" ] && [ "$resumed" -ge "$killed_step" ] ||
            fail "$opt: killed after the checkpoint of step $killed_step, the next run resumed from '${resumed}'"
        echo "$opt: run $k killed after $need checkpoint(s) + ${delay}s (last announced: step $killed_step), the next resumed from step $resumed"
    done
    if [ $finished = 0 ]; then
        timeout $limit "$tfc" train loop.db "${train_args[@]}" >out 2>err ||
            fail "$opt: the resumed tfc train exited with $?"
    fi
    [ $landed -ge 1 ] || fail "$opt: no kill landed before the end of a run"
    grep -q "trained to epoch 40\|nothing to do" out || fail "$opt: the resumed chain did not finish"
    dump loop.db >chain.dump
    if ! cmp -s straight.dump chain.dump; then
        diff straight.dump chain.dump | cut -c1-160
        fail "$opt: after $landed SIGKILLs the final variables differ from an uninterrupted run's"
    fi
    echo "ok: $opt: $landed SIGKILLs, resumed: the checkpoint of step $(head -n 1 chain.dump) has the bits of an uninterrupted run ($(($(wc -l <chain.dump) - 1)) variables)"
    cd "$work"
done
echo "PASS"
