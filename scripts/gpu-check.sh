#!/bin/bash
# What a GPU machine can check today, in one call of well under 10 minutes,
# with its log in OUT_DIR:
#   1. builds the runtime against the machine's own PyTorch (scripts/setup-gpu.sh;
#      the folder .deps, headers and xz'd builtin corpora, comes from
#      scripts/pack-deps.sh, run where apt is; carry it, nothing else); CI builds
#      the same way against pip's torch 2.11 + CUDA 13 (scripts/test.sh, docs/TORCH2.md);
#   2. the plan library's tests, where GoogleTest is installed;
#   3. the CUDA backend (NVRTC kernels from kernels/emit_cuda.h) against the
#      reference path on the same GPU: forward and every gradient of every
#      variant in float, double, bf16 and half, a micro model trained on cpu and
#      cuda, a GPU checkpoint loaded on the CPU, a run stopped on the GPU
#      and resumed on the CPU, the GPU a process takes, plain softmax through
#      LibTorch's SDPA (the backend's dispatch) (build-gpu/tests/cuda_check);
#   4. a short training run with train.device = cuda through sinkc-runtime
#      (a plan compiled where the front end is: tests/plan/fixtures);
#   5. the older NVPTX forward port (tests/gpu/check_on_gpu.sh), when its
#      cases were prepared where LLVM 19's llc is and carried:
#        tests/gpu/check_on_gpu.sh prepare build gpu-cases
#
# Then the benchmarks (--no-bench leaves them out; --only-bench runs only
# them, after the build); a few minutes:
#   6. attention forward + backward, generated kernels against SDPA and the
#      composite LibTorch form (build-gpu/bench/gpu_attention);
#   7. paper_60m end to end against the same model in PyTorch
#      (bench/gpu_train_vs_pytorch.sh).
# --presets, alone: the natural-text sink runs (plans/gpu_natural_sink,
# softmax and sigmoid on gpu_text without a BOS, on builtin("large"): pack it
# with scripts/setup.sh --large-corpus first; up to 15 minutes each: more
# than one 10-minute call, so it trains under `timeout` and goes on with
# --resume on the next call); bring OUT_DIR/runs back and compare them with
# `sinkc diff` / `sinkc report` where the front end is.
# A machine is warm between calls and keeps build-gpu, so these can be separate calls:
#   scripts/gpu-check.sh OUT_DIR [--no-bench | --only-bench | --presets SECONDS] [CASES_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu-check.sh OUT_DIR [--no-bench | --only-bench | --presets SECONDS] [CASES_DIR]"
out=${1:?$usage}
shift
checks=1 bench=1 presets=0
case "${1:-}" in
  --no-bench) bench=0; shift ;;
  --bench) shift ;;  # the default; kept so older notes still work
  --only-bench) checks=0; shift ;;
  --presets) presets=${2:?$usage} checks=0 bench=0; shift 2 ;;
  -*) echo "$usage"; exit 2 ;;
esac
cases=${1:-gpu-cases}
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
if ((presets)); then
  if [[ ! -s data/builtin/large.jsonl ]]; then
    echo "== presets: no data/builtin/large.jsonl; where apt is: scripts/setup.sh --large-corpus && scripts/pack-deps.sh .deps"
    exit 2
  fi
  # rc 124: the time ran out; the runs checkpointed (every 2000 steps) and the next call resumes them.
  timeout --signal=INT "$presets" build-gpu/sinkc-runtime run plans/gpu_natural_sink --out "$out/runs" --resume \
    > "$out/presets.log" 2>&1
  echo "== presets: exit $? (124: time ran out, call again to resume)"
  for s in "$out"/runs/*/summary.json; do
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); f=s.get("final",{});
print(sys.argv[1], s.get("status"), "step", f.get("step"), "valid", f.get("valid_loss"), "sink", f.get("sink"))' "$s"
  done
fi
if ((checks)); then
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
fi
if ((bench)); then
  step gpu_attention build-gpu/bench/gpu_attention
  step gpu_train_vs_pytorch bench/gpu_train_vs_pytorch.sh build-gpu "$out/train-bench"
fi
exit $status
