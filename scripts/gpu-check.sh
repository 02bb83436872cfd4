#!/bin/bash
# What a GPU machine can check today, in one call of well under 10 minutes,
# with its log in OUT_DIR:
#   1. builds the runtime against the machine's own PyTorch (scripts/setup-gpu.sh;
#      the header folder .deps comes from scripts/pack-deps.sh, run where apt is);
#   2. the plan library's tests, where GoogleTest is installed;
#   3. the CUDA backend (NVRTC kernels from kernels/emit_cuda.h) against the
#      reference path on the same GPU: forward and every gradient of every
#      variant in float, double and bf16, a micro model trained on cpu and
#      cuda, a GPU checkpoint loaded on the CPU (build-gpu/tests/cuda_check);
#   4. a short training run with train.device = cuda through sinkc-runtime
#      (a plan compiled where the front end is: tests/plan/fixtures);
#   5. the older NVPTX forward port (tests/gpu/check_on_gpu.sh), when its
#      cases were prepared where LLVM 19's llc is and carried:
#        tests/gpu/check_on_gpu.sh prepare build gpu-cases
#
# Not here yet (issue 11): the benchmarks against SDPA and the GPU preset runs.
#   scripts/gpu-check.sh OUT_DIR [CASES_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-check.sh OUT_DIR [CASES_DIR]}
cases=${2:-gpu-cases}
mkdir -p "$out"
status=0
step() {
  local name=$1; shift
  echo "== $name"
  if "$@" > "$out/$name.log" 2>&1; then echo "   ok"; else echo "   FAILED (see $out/$name.log)"; status=1; fi
  tail -n 5 "$out/$name.log" | sed 's/^/   /'
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1 || true
echo "GPU: $(cat "$out/gpu.txt")"
step build scripts/setup-gpu.sh .deps build-gpu
if [[ -x build-gpu/tests/plan_tests ]]; then
  step plan_tests build-gpu/tests/plan_tests
else
  echo "== plan_tests: skipped (GoogleTest is not installed here)"
fi
step cuda_backend build-gpu/tests/cuda_check
plan_dir=$(mktemp -d)
mkdir -p "$plan_dir/fixture"
sed -e 's/^device = "cpu"/device = "cuda"/' tests/plan/fixtures/fixture.plan.toml > "$plan_dir/fixture/plan.toml"
step train_on_cuda build-gpu/sinkc-runtime run "$plan_dir" --out "$out/runs"
if [[ -d $cases ]]; then
  step nvptx_forward tests/gpu/check_on_gpu.sh run "$cases"
else
  echo "== nvptx_forward: skipped ($cases/ missing: prepare it where LLVM 19 is, see above)"
fi
exit $status
