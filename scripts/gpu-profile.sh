#!/bin/bash
# Nsight Compute on the generated attention kernels, for a short GPU call after scripts/gpu-check.sh on the
# same machine (whose build-gpu/ it reuses; on a bare machine it builds first, about 110 s).
#   scripts/gpu-profile.sh OUT [--variants 'softmax|sigmoid, no normalization'] [--D 64] [--T 2048]
# OUT: ncu.txt (per kernel: duration, registers, occupancy, issue slots, the busiest pipe, Nsight's notes, the
# source lines with the most excess sectors and stalls),
# anatomy.txt (bench/kernel_anatomy: the same kernels' static instruction mix), source.txt (their sources) and
# timing.txt
# (bench/gpu_attention on the same cases, not under the profiler, with the tuning on) and
# timing-default-tiles.txt (the same with SINKLAB_TUNE=0) and timing-fused.txt (the default tiles with the fused
# backward forced, SINKLAB_FUSED_DQ=1: dQ summed by backward_keys, no backward_queries) and, on an H100 or H200,
# wgmma.txt (the default tiles with the Hopper kernels forced, SINKLAB_WGMMA=1, timed, then the forward under
# Nsight Compute: one file, as a GPU call returns at most 8) and wgmma-overlap.txt (the same with the overlapped
# forward, SINKLAB_WGMMA=overlap, timed).
# Exit: 0, or the first failing step's code.
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu-profile.sh OUT [--variants 'a|b'] [--D 64] [--T 2048]"
out=${1:?$usage}
shift
variants="softmax|sigmoid, no normalization" D=64 T=2048
while (($#)); do
  case $1 in
    --variants) variants=${2:?$usage}; shift ;;
    --D) D=${2:?$usage}; shift ;;
    --T) T=${2:?$usage}; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out" || exit 2
out=$(realpath "$out")
export SINKLAB_KERNEL_CACHE=${SINKLAB_KERNEL_CACHE:-$(mktemp -d "${TMPDIR:-/tmp}/sinklab-profile.XXXXXX")}
if [[ ! -x build-gpu/bench/gpu_attention || ! -x build-gpu/bench/kernel_anatomy ]]; then
  capability=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0))') || exit 77
  scripts/setup-gpu.sh .deps build-gpu -DSINKLAB_REQUIRE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${capability/./}" \
    -DTORCH_CUDA_ARCH_LIST="$capability" --target gpu_attention --target kernel_anatomy > "$out/build.txt" 2>&1 ||
    exit 1
fi
build-gpu/bench/kernel_anatomy --D "$D" --variants "$variants" > "$out/anatomy.txt" 2>&1
# The sources the profiled kernels were compiled from, for the line numbers ncu names.
build-gpu/bench/kernel_anatomy --D "$D" --variants "$variants" --source > "$out/source.txt" 2>&1
# The default tiles (SINKLAB_TUNE=0: the tuning's own launches would fill the count): each case's forward,
# backward_rows, backward_keys and backward_queries, twice (the warm-up and the measured call).
# The kernels keep their line numbers (SINKLAB_NVRTC_LINEINFO=1), so the source counters name the lines of
# sinklab_attention.cu (the emitted source: bench/kernel_anatomy --source) behind excess sectors and stalls.
SINKLAB_NVRTC_LINEINFO=1 SINKLAB_TUNE=0 timeout 240 ncu --kernel-name regex:sink_ --launch-count 32 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  --section SchedulerStats --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis_Tables \
  build-gpu/bench/gpu_attention --repeats 1 --D "$D" --T "$T" --variants "$variants" > "$out/ncu.txt" 2>&1
rc=$?
timeout 120 build-gpu/bench/gpu_attention --repeats 5 --D "$D" --T "$T" --variants "$variants" > "$out/timing.txt" 2>&1
tuned=$?
# The default tiles beside the tuned ones, same process kind and shapes: what the tuning bought.
SINKLAB_TUNE=0 timeout 120 build-gpu/bench/gpu_attention --repeats 5 --D "$D" --T "$T" --variants "$variants" \
  > "$out/timing-default-tiles.txt" 2>&1
defaults=$?
# The same with the fused backward on every variant: against the line above, what fusing dQ buys.
SINKLAB_TUNE=0 SINKLAB_FUSED_DQ=1 timeout 120 build-gpu/bench/gpu_attention --repeats 5 --D "$D" --T "$T" \
  --variants "$variants" > "$out/timing-fused.txt" 2>&1
fused=$?
# The Hopper kernels (wgmma) against the line before the last, where the GPU runs it (compute capability 9.0).
if [[ $(python3 -c 'import torch; print("%d%d" % torch.cuda.get_device_capability(0))' 2> /dev/null) == 90 ]]; then
  SINKLAB_TUNE=0 SINKLAB_WGMMA=1 timeout 120 build-gpu/bench/gpu_attention --repeats 5 --D "$D" --T "$T" \
    --variants "$variants" > "$out/wgmma.txt" 2>&1
  # The overlapped forward (the next tile's scores in flight through this tile's fold) against the line above.
  SINKLAB_TUNE=0 SINKLAB_WGMMA=overlap timeout 120 build-gpu/bench/gpu_attention --repeats 5 --D "$D" --T "$T" \
    --variants "$variants" > "$out/wgmma-overlap.txt" 2>&1
  SINKLAB_NVRTC_LINEINFO=1 SINKLAB_TUNE=0 SINKLAB_WGMMA=1 timeout 120 ncu --kernel-name regex:sink_forward \
    --launch-count 4 --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section SourceCounters \
    build-gpu/bench/gpu_attention --repeats 1 --D "$D" --T "$T" --variants "$variants" >> "$out/wgmma.txt" 2>&1
fi
exit $((rc ? rc : tuned ? tuned : defaults ? defaults : fused))
