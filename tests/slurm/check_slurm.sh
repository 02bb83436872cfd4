#!/bin/bash
# `sinkc submit --slurm` on a real Slurm: a one-node cluster (slurmctld,
# slurmd, munge from Debian) started in a temporary folder, a sweep submitted
# as a job array, every run trained by Slurm, then resubmitted (nothing left).
# Then the time limit's warning: a run, trained by the runtime alone and by
# two torchrun workers (--gpus-per-run 2 on GPUs the node only declares, the
# plan on the CPU), gets Slurm's USR1, checkpoints, requeues itself and
# completes with the loss of an uninterrupted run.
#   check_slurm.sh BUILD_DIR     (KEEP=1: the cluster's folder and logs are kept)
# Skips (exit 77) without root or without the Debian packages slurmctld,
# slurmd, slurm-client and munge.
set -euo pipefail
build=$(cd "$1" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || skip "needs root to start slurmd"
for tool in slurmctld slurmd munged sbatch squeue; do
  command -v "$tool" > /dev/null || skip "$tool missing (apt install slurmctld slurmd slurm-client munge)"
done
# --gpus-per-run 2 starts torchrun as `sinkc run --workers` does: this build's PyTorch's.
torch_python=$(sed -n 's/^SINKLAB_TORCH_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt" 2> /dev/null)
"${torch_python:-python3}" -c 'import torch.distributed.run' 2> /dev/null ||
  skip "no torchrun in ${torch_python:-python3} (Debian: apt install python3-torch)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sinklab-slurm-XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  [[ -n ${KEEP:-} ]] || rm -rf "$tmp"
}
trap cleanup EXIT
export SINKLAB_KERNEL_CACHE=$tmp/kernels

# munge: a key and a socket of our own, so a system munged is not needed.
mkdir -p "$tmp/munge" && chmod 700 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/key"
munged --key-file="$tmp/munge/key" --socket="$tmp/munge/sock" --pid-file="$tmp/munge/pid" \
  --log-file="$tmp/munge/log" --seed-file="$tmp/munge/seed" --force
pids+=("$(cat "$tmp/munge/pid")")

port=$((20000 + RANDOM % 20000))
cpus=$(nproc)
mkdir -p "$tmp/state" "$tmp/spool"
cat > "$tmp/slurm.conf" << CONF
ClusterName=sinklabtest
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/sock,cred_expire=5
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
# A requeued job waits cred_expire seconds, then for the scheduler: both short here.
SchedulerParameters=sched_interval=1
MpiDefault=none
GresTypes=gpu
NodeName=localhost CPUs=$cpus Gres=gpu:2 State=UNKNOWN
PartitionName=sinklab Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
# Two GPUs for Slurm to place a --gres=gpu:2 task on; their files stand in for
# devices (/dev/null's numbers), which nothing opens: the plans train on the CPU.
for i in 0 1; do mknod "$tmp/gpu$i" c 1 3 2> /dev/null || touch "$tmp/gpu$i"; done
echo "NodeName=localhost Name=gpu File=$tmp/gpu[0-1]" > "$tmp/gres.conf"
export SLURM_CONF=$tmp/slurm.conf
slurmctld -f "$SLURM_CONF" -D > "$tmp/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -f "$SLURM_CONF" -D -N localhost > "$tmp/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  sinfo -h -o %T 2> /dev/null | grep -qE '^idle' && break
  sleep 1
done
sinfo -h -o %T | grep -qE '^idle' || { cat "$tmp/slurmctld.log" "$tmp/slurmd.log" 2> /dev/null | tail -30; fail "the node did not come up"; }

cat > "$tmp/spec.sink" << 'SPEC'
experiment base extends micro { train.steps = 40  measure.every = 20 }
sweep seeds over base { train.seed in [1, 2] }
SPEC
out=$tmp/runs
"$build/sinkc" submit "$tmp/spec.sink" --slurm --out "$out" --cpus-per-run 1 --time 10:00 | tee "$tmp/submit.txt"
job=$(sed -n 's/^submitted job array \([0-9]*\).*/\1/p' "$tmp/submit.txt")
[[ -n $job ]] || fail "no job id"
for _ in $(seq 240); do
  [[ -z $(squeue -h -j "$job" 2> /dev/null) ]] && break
  sleep 1
done
[[ -z $(squeue -h -j "$job") ]] || { squeue -j "$job"; fail "job $job still queued or running after 4 minutes"; }
completed=$(grep -l '"status": "completed"' "$out"/*/summary.json | wc -l)
if [[ $completed != 3 ]]; then
  tail -n 20 "$out"/.slurm/*.out
  fail "$completed of 3 runs completed under Slurm"
fi
"$build/sinkc" table "$out" --metric valid_loss
"$build/sinkc" submit "$tmp/spec.sink" --slurm --out "$out" | tee "$tmp/again.txt"
grep -q "nothing to submit: 3 runs already completed" "$tmp/again.txt" || fail "the resubmission did not skip the completed runs"

# The warning Slurm sends --signal-lead seconds before the time limit, sent now
# the way Slurm sends it (to the batch shell), to a run on one process and to
# the same run on two torchrun workers.
started=$SECONDS
cat > "$tmp/long.sink" << 'SPEC'
experiment long extends micro { train.steps = 600  measure.every = 200 }
SPEC
declare -A jobs
for g in 1 2; do
  "$build/sinkc" submit "$tmp/long.sink" --slurm --out "$tmp/gpus$g" --gpus-per-run "$g" --cpus-per-run 1 \
    --time 10:00 > "$tmp/submit$g.txt" || fail "submit --gpus-per-run $g: $(cat "$tmp/submit$g.txt")"
  jobs[$g]=$(sed -n 's/^submitted job array \([0-9]*\).*/\1/p' "$tmp/submit$g.txt")
  [[ -n ${jobs[$g]} ]] || fail "no job id for --gpus-per-run $g"
done
grep -q '^#SBATCH --gres=gpu:2$' "$tmp"/gpus2/.slurm/*.sbatch || fail "no --gres=gpu:2 in the script"
grep -q "'--nproc_per_node' '2'" "$tmp"/gpus2/.slurm/*.sbatch || fail "the script does not start 2 workers"
grep -q 'nproc_per_node' "$tmp"/gpus1/.slurm/*.sbatch && fail "one GPU per run should not go through torchrun"
for g in 1 2; do
  # Warned once it trains: its first progress line.
  for _ in $(seq 120); do
    grep -qE '^(\[default0\]:)?long step [0-9]+/600 loss [0-9.]+ lr [^ ]+ [0-9.]+k tok/s ETA ' \
      "$tmp"/gpus$g/.slurm/*.out 2> /dev/null && break
    sleep 0.5
  done
  grep -qE 'long step [0-9]+/600 loss' "$tmp"/gpus$g/.slurm/*.out ||
    { cat "$tmp"/gpus$g/.slurm/*.out; fail "no progress lines from --gpus-per-run $g"; }
  scancel --batch --signal=USR1 "${jobs[$g]}_0"
done
# The same run uninterrupted, on one process and on two, while the tasks requeue.
"$build/sinkc" run "$tmp/long.sink" --out "$tmp/reference1" > "$tmp/reference1.txt" 2>&1 &
reference1=$!
"$build/sinkc" run "$tmp/long.sink" --out "$tmp/reference2" --workers 2 > "$tmp/reference2.txt" 2>&1 &
reference2=$!
pids+=("$reference1" "$reference2")
wait $reference1 || fail "the uninterrupted run failed: $(tail "$tmp/reference1.txt")"
wait $reference2 || fail "the uninterrupted run on two workers failed: $(tail "$tmp/reference2.txt")"
for g in 1 2; do
  for _ in $(seq 300); do
    [[ -z $(squeue -h -j "${jobs[$g]}" 2> /dev/null) ]] && break
    sleep 1
  done
  [[ -z $(squeue -h -j "${jobs[$g]}") ]] || { squeue -j "${jobs[$g]}"; fail "job ${jobs[$g]} did not end"; }
  log=$(cat "$tmp"/gpus$g/.slurm/*.out)
  grep -q "requeued itself" <<< "$log" ||
    { echo "$log" | tail -30; fail "--gpus-per-run $g: the task did not requeue"; }
  grep -q "resumed at step" "$tmp"/gpus$g/long-*/log.txt || fail "--gpus-per-run $g: the run did not resume"
done
same_ends() {
  python3 - "$@" << 'PY'
import glob, json, sys
def final(out):
    [path] = glob.glob(out + "/long-*/summary.json")
    s = json.load(open(path))
    assert s["status"] == "completed", (path, s["status"])
    return s["steps_done"], s["final"]["valid_loss"]
ref1, one, ref2, two = (final(o) for o in sys.argv[1:])
print(f"valid_loss after {ref1[0]} steps: uninterrupted {ref1[1]}, requeued {one[1]}; "
      f"on 2 workers: uninterrupted {ref2[1]}, requeued {two[1]}")
assert one == ref1, (one, ref1)
assert two == ref2, (two, ref2)
PY
}
same_ends "$tmp"/{reference1,gpus1,reference2,gpus2} || fail "the requeued runs do not end where uninterrupted ones do"
echo "slurm: ok (job $job, 3 runs; warned, requeued and completed:" \
  "jobs ${jobs[1]}, ${jobs[2]} in $((SECONDS - started)) s)"
