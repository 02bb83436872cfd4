#!/bin/bash
# `sinkc submit --slurm` on a real Slurm: a one-node cluster (slurmctld,
# slurmd, munge from Debian) started in a temporary folder, a sweep submitted
# as a job array, every run trained by Slurm, then resubmitted (nothing left).
#   check_slurm.sh BUILD_DIR
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

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sinklab-slurm-XXXXXX")
chmod 755 "$tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  rm -rf "$tmp"
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
AuthInfo=socket=$tmp/munge/sock
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
MpiDefault=none
NodeName=localhost CPUs=$cpus State=UNKNOWN
PartitionName=sinklab Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
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
echo "slurm: ok (job $job, 3 runs)"
