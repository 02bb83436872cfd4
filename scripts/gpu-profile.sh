#!/bin/bash
# Timings and Nsight Compute on the generated attention kernels, for a short GPU call after
# scripts/gpu-check.sh on the same machine (whose build-gpu/ it reuses; on a bare machine it builds first, about
# 110 s). The steps run in the order of what they tell, each under `timeout` inside one budget, so that a call
# cut short keeps the answers that matter most.
#   scripts/gpu-profile.sh OUT [--variants 'softmax|sigmoid, no normalization'] [--D 64] [--T 2048]
#                              [--budget SECONDS]
# --budget: the whole call's seconds (default 570); a step that would start with less than 20 s left is skipped.
# OUT (at most 8 files; the build's log only where it failed, as build.txt):
#   anatomy.txt              bench/kernel_anatomy: the kernels' static instruction mix (and the build's last lines)
#   source.txt               their sources, for the line numbers ncu names
#   timing-default-tiles.txt bench/gpu_attention on the cases with the default tiles (SINKLAB_TUNE=0)
#   wgmma.txt                on compute capability 9.0: the same with the Hopper kernels forced (hopper=force),
#                            timed, then with the fused Hopper backward (and fused_backward=force), then their forward
#                            under Nsight Compute
#   wgmma-overlap.txt        on 9.0: the same with the overlapped forward (hopper=overlap), timed
#   timing.txt               the same cases with the tuning on (every candidate measured, the fused backward's
#                            among them, the fastest kept)
#   timing-fused.txt         the default tiles with the fused backward forced (fused_backward=force)
#   ncu.txt                  Nsight Compute on every kernel of the default tiles: duration, registers, occupancy,
#                            issue slots, the busiest pipe, its notes, the source lines with the most excess
#                            sectors and stalls
# Each timing line names the kernels that ran it and their tiles. The GPU features (hopper=..., fused_backward=...)
# are SINKLAB_GPU_FEATURES's entries (runtime/gpu_features.h), each step's in place of what the caller's said of the
# same feature; on compute capability 9.0 and later a fused backward also needs bulk_reduction (its bulk reduction of
# dQ is a row of its own), which every step that asks for the fused backward asks for too.
# Exit: 0, or the first failing step's code.
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu-profile.sh OUT [--variants 'a|b'] [--D 64] [--T 2048] [--budget SECONDS]"
out=${1:?$usage}
shift
variants="softmax|sigmoid, no normalization" D=64 T=2048 budget=570
while (($#)); do
  case $1 in
    --variants) variants=${2:?$usage}; shift ;;
    --D) D=${2:?$usage}; shift ;;
    --T) T=${2:?$usage}; shift ;;
    --budget) budget=${2:?$usage}; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out" || exit 2
out=$(realpath "$out")
deadline=$(($(date +%s) + budget))
export SINKLAB_KERNEL_CACHE=${SINKLAB_KERNEL_CACHE:-$(mktemp -d "${TMPDIR:-/tmp}/sinklab-profile.XXXXXX")}
status=0

# run CAP FILE COMMAND...: COMMAND under timeout (its cap, or what is left of the budget), its output appended
# to FILE; a step with less than 20 s left is skipped and says so in FILE.
run() {
  local cap=$1 file=$2
  shift 2
  local left=$((deadline - $(date +%s) - 5))
  local limit=$((cap < left ? cap : left))
  if ((limit < 20)); then
    echo "skipped, the budget is spent: $*" >> "$file"
    ((status)) || status=124
    return 124
  fi
  timeout --kill-after=10 "$limit" "$@" >> "$file" 2>&1
  local rc=$?
  ((rc == 0)) || echo "exit $rc after at most ${limit} s: $*" >> "$file"
  ((rc == 0 || status)) || status=$rc
  return $rc
}
bench() { run "$1" "$2" build-gpu/bench/gpu_attention --repeats 5 --D "$D" --T "$T" --variants "$variants"; }
# with_features: SINKLAB_GPU_FEATURES with some features set (scripts/gpu_features.sh).
source scripts/gpu_features.sh

if [[ ! -x build-gpu/bench/gpu_attention || ! -x build-gpu/bench/kernel_anatomy ]]; then
  capability=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))') || exit 77
  log=$(mktemp)
  if ! scripts/setup-gpu.sh .deps build-gpu -DSINKLAB_REQUIRE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${capability/./}" \
    -DTORCH_CUDA_ARCH_LIST="$capability" --target gpu_attention --target kernel_anatomy > "$log" 2>&1; then
    mv "$log" "$out/build.txt"
    exit 1
  fi
  { echo "built build-gpu:"; tail -n 3 "$log"; } > "$out/anatomy.txt"
  rm -f "$log"
fi
build-gpu/bench/kernel_anatomy --D "$D" --variants "$variants" >> "$out/anatomy.txt" 2>&1
build-gpu/bench/kernel_anatomy --D "$D" --variants "$variants" --source > "$out/source.txt" 2>&1
hopper=no
[[ $(python3 -c 'import torch; print("%d%d" % torch.cuda.get_device_capability(0))' 2> /dev/null) == 90 ]] &&
  hopper=yes
# The default tiles, then the Hopper kernels against them on the same shapes (the question the call answers
# first), then what the tuning and the fused backward buy.
SINKLAB_TUNE=0 bench 120 "$out/timing-default-tiles.txt"
if [[ $hopper == yes ]]; then
  SINKLAB_TUNE=0 SINKLAB_GPU_FEATURES=$(with_features hopper=force) bench 120 "$out/wgmma.txt"
  SINKLAB_TUNE=0 SINKLAB_GPU_FEATURES=$(with_features hopper=force fused_backward=force bulk_reduction) \
    bench 120 "$out/wgmma.txt"
  # The overlapped forward (the next tile's scores in flight through this tile's fold) against the line above.
  SINKLAB_TUNE=0 SINKLAB_GPU_FEATURES=$(with_features hopper=overlap) bench 120 "$out/wgmma-overlap.txt"
fi
# (the tuning measures the fused candidates only where the fused backward is on, as it did by default before)
SINKLAB_GPU_FEATURES=$(with_features --unless-named fused_backward bulk_reduction) bench 120 "$out/timing.txt"
SINKLAB_TUNE=0 SINKLAB_GPU_FEATURES=$(with_features fused_backward=force bulk_reduction) \
  bench 120 "$out/timing-fused.txt"
# Nsight Compute, last: the Hopper forward, then every kernel of the default tiles (SINKLAB_TUNE=0: the
# tuning's own launches would fill the count), each case's forward, backward_rows, backward_keys and
# backward_queries, twice (the warm-up and the measured call). The kernels keep their line numbers
# (SINKLAB_NVRTC_LINEINFO=1), so the source counters name the lines of the emitted source (source.txt).
once=(build-gpu/bench/gpu_attention --repeats 1 --D "$D" --T "$T" --variants "$variants")
if [[ $hopper == yes ]]; then
  SINKLAB_NVRTC_LINEINFO=1 SINKLAB_TUNE=0 SINKLAB_GPU_FEATURES=$(with_features hopper=force) \
    run 120 "$out/wgmma.txt" ncu --kernel-name regex:sink_forward --launch-count 4 --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
    --section SourceCounters "${once[@]}"
fi
SINKLAB_NVRTC_LINEINFO=1 SINKLAB_TUNE=0 run 240 "$out/ncu.txt" ncu --kernel-name regex:sink_ --launch-count 32 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  --section SchedulerStats --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis_Tables \
  "${once[@]}"
exit $status
