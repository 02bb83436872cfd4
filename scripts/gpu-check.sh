#!/bin/bash
# Everything one GPU job can tell, from a bare machine, in one call of at
# most 10 minutes. Nothing survives between calls, and at most 8 files come
# back, 16 MiB each, at most two folders below OUT: so each call builds what it needs, every step
# runs under `timeout` inside one budget, and OUT holds at most 8 flat files.
# Run folders, checkpoints and the kernel cache live in a temporary folder.
#   scripts/gpu-check.sh OUT [--natural [--plans DIR] [--share K/N] [--alone SECONDS] | --step] [--budget SECONDS]
# --budget: the whole call's seconds (570, for a 10-minute call); each step's cap scales with it.
#
# The checks (default):
#   preflight         nvcc, the compiler, torch and its CUDA, the GPU: logged before anything is built
#   build             scripts/setup-gpu.sh with CUDA required and the GPU's architecture named (the path CI
#                     builds against pip's torch 2.11); only sinkc-runtime, cuda_check and gpu_attention
#   kernels           cuda_check --fill-cache: every kernel cuda_check runs, compiled by NVRTC on every core
#   tiles             the tensor-core products (mma.sync; wgmma on compute capability 9.0) against plain matrix
#                     products, each wrong element named (cuda_check's case 0, in a process of its own)
#   cuda_check        the CUDA backend against the reference path on the GPU (tests/gpu/cuda_check.cpp)
#   table_tiles       the fused and Hopper tiles a tuning may choose, against the same (a process of its own)
#   tune              the tensor-core kernels' tiles measured at the 60M model's shapes (its case 8: tiles.json)
#   train_on_cuda     the fixture run (tests/plan/fixtures) with train.device = cuda through sinkc-runtime
#   captured_step     the same plan's training step captured as CUDA graphs against the step uncaptured, each
#                     step's loss equal bit for bit, and with the step kernels (scripts/captured_step_check.py)
#   installed         (when build-node/ holds scripts/pack-node.sh's archive) the same run through the archive's
#                     portable sinkc beside the runtime installed into a prefix, as a node installs them
#   gpu_attention     benchmark: the generated kernels (tensor cores in bf16; each kernel's tiles printed) and
#                     SDPA, d_head 64, 128 and 96, T 2048 and 8192 (bench/gpu_attention.cpp)
#   train_vs_pytorch  benchmark: paper_60m's shapes end to end against PyTorch, and sigmoid attention against
#                     softmax in the same run loop (bench/gpu_train_vs_pytorch.sh)
#   baselines         benchmark, in the time left: FlexAttention and torch.compile of the composite on the same
#                     cases, in this node's Python, printed beside ours (bench/gpu_attention_baselines.py)
# --step: preflight, build (sinkc-runtime alone), train_on_cuda, captured_step, then train_vs_pytorch with three
#   rounds in the time left: the training step's call, short.
# --natural: preflight, build, tokenize, then the natural-text runs (--plans DIR, default plans/gpu_natural_call:
#   specs/text_emergence_ladder.sink, five runs on builtin("large") with a SentencePiece vocabulary), all at once
#   on the one GPU (sinkc-runtime run DIR --jobs N: each plans its micro-batch for its share of the memory) until
#   the budget ends; a run cut short keeps every measurement it made. The corpus and the tokenizer travel packed
#   (scripts/pack-deps.sh .deps --natural DIR): the corpus, the SentencePiece model trained where apt is, and the
#   portable sinkc, which encodes with that model here in seconds instead of training it for minutes. Plans that
#   train on the CPU (train.device = cpu) need no GPU: that is how CI rehearses the call. --share K/N: the K-th of
#   N calls that share DIR's plans (every N-th folder in name order from the K-th), for a table too large for one
#   call (plans/gpu_text_table). Before them, where there is more than one, the first plan trains alone for
#   --alone SECONDS (default 40; 0: not) and gpu-check.json compares its steady tokens/s there with its tokens/s
#   beside the others, and sums theirs: what N runs on one GPU give against one alone. The kernels it tunes are
#   then in the cache the runs share.
#
# OUT: gpu-check.log (every step's output), gpu-check.json (the preflight, each step's status and seconds,
# every figure), cuda_check.txt, tiles.json, gpu_attention.txt (ours and the baselines), train_vs_pytorch.json,
# train_profile.txt (the step's top operators and kernels beside both twins'); with --natural instead
# natural_runs.tar.gz, every run's folder without its checkpoints (scripts/gpu-results.sh OUT RUNS unpacks it for
# `sinkc diff`, `sinkc table` and `sinkc report`), however many runs the plans hold.
# Exit: 0 every step passed; 1 a step failed or ran out of time; 2 usage or a missing input; 77 no CUDA
# device, at the first step that needs one (everything before it ran and is reported).
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu-check.sh OUT [--natural [--plans DIR] [--share K/N] [--alone SECONDS] | --step]"
usage+=" [--budget SECONDS]"
out=${1:?$usage}
shift
mode=checks budget=570 natural_plans=plans/gpu_natural_call share=1/1 alone=40
while (($#)); do
  case $1 in
    --natural) mode=natural ;;
    --plans) natural_plans=${2:?$usage}; shift ;;
    --share) share=${2:?$usage}; shift ;;
    --alone) alone=${2:?$usage}; shift ;;
    --step) mode=step ;;
    --budget) budget=${2:?$usage}; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
[[ $alone =~ ^[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(realpath "$out")
started=$(date +%s)
deadline=$((started + budget))
work=$(mktemp -d "${TMPDIR:-/tmp}/sinklab-gpu-check.XXXXXX")
export work
trap 'rm -rf "$work"' EXIT
export SINKLAB_KERNEL_CACHE=${SINKLAB_KERNEL_CACHE:-$work/kernels}
# with_features: SINKLAB_GPU_FEATURES with some features set (scripts/gpu_features.sh).
source scripts/gpu_features.sh
# The GPU features are opt-in until a GPU call has run them (runtime/gpu_features.h): this call is where they are
# run, so its cases, its tuning and its runs ask for the Hopper (wgmma) kernels as tuning candidates (a crash or hang
# below turns them off from there on) and for the fused backward, as every run had it before the table; on compute
# capability 9.0 and later the fused backward needs its bulk reduction of dQ as well, a row of its own. The step's
# own features (step_kernels, cuda_graph) are asked for by the steps that compare them (captured_step).
export SINKLAB_GPU_FEATURES
SINKLAB_GPU_FEATURES=$(with_features --unless-named hopper=tune fused_backward bulk_reduction)
log=$out/gpu-check.log
: > "$log"
: > "$work/steps.jsonl"
status=0

say() { echo "$*" | tee -a "$log"; }
say "gpu-check: SINKLAB_GPU_FEATURES=$SINKLAB_GPU_FEATURES"

# step NAME CAP_SECONDS COMMAND...: runs COMMAND under timeout (its cap, or what is left of the budget less
# 15 s for the report), appends its output to the log and its outcome to steps.jsonl; returns its exit code.
step() {
  local name=$1 cap=$(($2 * budget / 570))  # caps are set for the 570 s of one call; --budget scales them
  shift 2
  local left=$((deadline - $(date +%s) - 15))
  local limit=$((cap < left ? cap : left))
  if ((limit < 5)); then
    say "== $name: skipped, the budget is spent"
    echo "{\"name\": \"$name\", \"status\": \"skipped\", \"rc\": null, \"seconds\": 0, \"limit_s\": 0}" >> "$work/steps.jsonl"
    status=1
    return 124
  fi
  say "== $name (at most ${limit} s)"
  local t0 rc
  t0=$(date +%s%N)
  if declare -F "$1" > /dev/null; then  # a function of this script: timeout runs programs
    timeout --kill-after=30 "$limit" bash -c "$(declare -f "$1"); \"\$@\"" "$1" "$@" > "$work/$name.out" 2>&1
  else
    timeout --kill-after=30 "$limit" "$@" > "$work/$name.out" 2>&1
  fi
  rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  local seconds=$((ms / 1000)).$(printf %03d $((ms % 1000)))
  cat "$work/$name.out" >> "$log"
  local outcome=ok
  case $rc in
    0) ;;
    77) outcome=no_gpu ;;
    124 | 137) outcome=timed_out status=1 ;;
    *) outcome=failed status=1 ;;
  esac
  say "== $name: $outcome (exit $rc, ${seconds} s)"
  ((rc == 0)) || tail -n 5 "$work/$name.out" | sed 's/^/   /'
  echo "{\"name\": \"$name\", \"status\": \"$outcome\", \"rc\": $rc, \"seconds\": $seconds, \"limit_s\": $limit}" \
    >> "$work/steps.jsonl"
  return $rc
}

# Writes gpu-check.json from what the steps left in $work, then exits with $1.
report() {
  # The tuning table as the last step left it: the training steps tune too, and record what failed there.
  [[ $mode == checks && -f $SINKLAB_KERNEL_CACHE/tiles.json ]] && cp "$SINKLAB_KERNEL_CACHE/tiles.json" "$out/tiles.json"
  python3 scripts/gpu_check_report.py "$work" "$out" "$mode" "$budget" "$started" >> "$log" 2>&1 ||
    say "gpu-check: the report could not be written (see above)"
  say "gpu-check: $(($(date +%s) - started)) s of the ${budget} s budget; exit $1; files in $out: $(ls "$out" | tr '\n' ' ')"
  exit "$1"
}

preflight() {
  echo "date: $(date -u +%FT%TZ)"; echo "host: ${HOSTNAME:-?}"; echo "cores: $(nproc)"
  echo "nvcc: $(command -v nvcc || echo "not on PATH")"; nvcc --version 2>&1 | tail -n 2
  echo "c++: $(c++ --version 2>&1 | head -n 1)"; echo "cmake: $(cmake --version 2>&1 | head -n 1)"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: no nvidia-smi"
  fi
  python3 - <<'PY'
import json, torch
cuda = torch.cuda.is_available()
facts = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": cuda,
         "device": torch.cuda.get_device_name(0) if cuda else None,
         "capability": "%d.%d" % torch.cuda.get_device_capability(0) if cuda else None}
print("torch:", json.dumps(facts))
PY
}
step preflight 60 preflight
cp "$work/preflight.out" "$work/preflight.txt"
if ! python3 -c 'import torch' 2> /dev/null; then
  say "gpu-check: the python3 on PATH has no torch: nothing to build against"
  report 2
fi
capability=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0) if torch.cuda.is_available() else "")')
gpu=yes
if [[ -z $capability ]]; then
  gpu=no capability=9.0  # an H100's, so the build and the kernel cache still run where there is no GPU
  say "gpu-check: torch sees no CUDA device; building for sm_90 up to the first step that needs one"
fi
arch=${capability/./}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ ! -x $nvcc ]]; then
  say "gpu-check: no nvcc (not on PATH, not in /usr/local/cuda/bin): the CUDA backend cannot be built"
  report 2
fi
if [[ ! -d .deps/include ]]; then
  say "gpu-check: no .deps/ (carry the folder scripts/pack-deps.sh .deps wrote where apt is)"
  report 2
fi
if [[ $mode == natural ]]; then
  # What the runs need and the call cannot make: each builtin corpus the plans name, packed or unpacked.
  [[ -d $natural_plans ]] || { say "gpu-check: no plans folder $natural_plans"; report 2; }
  if [[ $share != 1/1 ]]; then
    [[ $share =~ ^([0-9]+)/([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[1] <= BASH_REMATCH[2])) ||
      { say "gpu-check: --share takes K/N with 1 <= K <= N, not $share"; report 2; }
    mkdir -p "$work/plans"
    ls -d "$natural_plans"/*/ | sort | awk -v k="${BASH_REMATCH[1]}" -v n="${BASH_REMATCH[2]}" 'NR % n == k % n' |
      while read -r plan; do cp -r "$plan" "$work/plans/"; done
    [[ -n $(ls "$work/plans") ]] || { say "gpu-check: share $share of $natural_plans holds no plans"; report 2; }
    say "gpu-check: share $share of $natural_plans: $(ls "$work/plans" | tr '\n' ' ')"
    natural_plans=$work/plans
  fi
  devices=$(grep -h '^device = ' "$natural_plans"/*/plan.toml | sort -u)
  for name in $(sed -n 's/^corpus = { form = "builtin", name = "\([^"]*\)" }$/\1/p' "$natural_plans"/*/plan.toml |
    sort -u); do
    if [[ ! -s data/builtin/$name.jsonl && ! -s .deps/data/builtin/$name.jsonl.xz ]]; then
      flag="" && [[ $name == large ]] && flag=" --large-corpus"
      say "gpu-check: the plans in $natural_plans train on builtin(\"$name\"), which is not here: where apt is," \
        "scripts/setup.sh$flag && scripts/pack-deps.sh .deps --natural $natural_plans"
      report 2
    fi
  done
fi
targets=(--target sinkc-runtime)
[[ $mode == checks ]] && targets+=(--target cuda_check --target gpu_attention)
step build 330 scripts/setup-gpu.sh .deps build-gpu -DSINKLAB_REQUIRE_CUDA=ON \
  -DCUDAToolkit_ROOT="$(dirname "$(dirname "$nvcc")")" -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DTORCH_CUDA_ARCH_LIST="$capability" "${targets[@]}" || report 1
no_gpu() {
  say "gpu-check: no CUDA device; stopping at $1, the first step that needs one"
  echo "{\"name\": \"$1\", \"status\": \"no_gpu\", \"rc\": 77, \"seconds\": 0, \"limit_s\": 0}" >> "$work/steps.jsonl"
  report 77
}

# The fixture trained on the GPU, then the same plan's training step captured as two CUDA graphs (opt-in,
# SINKLAB_GPU_FEATURES=cuda_graph, until this passes on a GPU) against the step uncaptured: its 40 steps eager, on
# fixed buffers, captured and on fixed buffers again, the captured losses equal to the uncaptured ones bit for bit
# (scripts/captured_step_check.py; its captured_step.json goes into gpu-check.json).
training_runs() {
  mkdir -p "$work/fixture/fixture"
  sed -e 's/^device = "cpu"/device = "cuda"/' tests/plan/fixtures/fixture.plan.toml > "$work/fixture/fixture/plan.toml"
  step train_on_cuda 60 build-gpu/sinkc-runtime run "$work/fixture" --out "$work/runs" --no-progress
  step captured_step 90 python3 scripts/captured_step_check.py build-gpu/sinkc-runtime plans/gpu_captured_step \
    "$work" --device cuda
}
# training_benchmark CAP ROUNDS: paper_60m's step against both PyTorch twins (bench/gpu_train_vs_pytorch.sh), then
# the three per-operator and per-kernel tables (sinklab's profiled run, the eager and compiled twins), made after
# the timed rounds: a step cut short there keeps the ratios of the rounds it finished.
training_benchmark() {
  step train_vs_pytorch "$1" bench/gpu_train_vs_pytorch.sh --rounds "$2" build-gpu "$work/train-bench"
  [[ -f $work/train-bench/gpu_train_vs_pytorch.json ]] && cp "$work/train-bench/gpu_train_vs_pytorch.json" \
    "$out/train_vs_pytorch.json"
  [[ -f $work/train-bench/profile-tables.txt ]] && cp "$work/train-bench/profile-tables.txt" "$out/train_profile.txt"
  return 0
}

# --step: the training step alone, a short call.
if [[ $mode == step ]]; then
  [[ $gpu == yes ]] || no_gpu train_on_cuda
  training_runs
  left=$((deadline - $(date +%s) - 30))
  training_benchmark $(((left > 0 ? left : 0) * 570 / budget)) 3
  report $status
fi

if [[ $mode == natural ]]; then
  [[ $gpu == yes || $devices == 'device = "cpu"' ]] || no_gpu natural_runs
  # Every run's corpus tokenized once into a cache the runs share. SentencePiece is not in the runtime: the portable
  # sinkc (packed by pack-deps.sh --natural) encodes, with the models trained where apt is (packed beside it, each
  # in the folder named by its cache key), so nothing is trained here.
  export SINKLAB_TOKEN_CACHE=$work/tokens SINKLAB_HOME=$PWD natural_plans
  mkdir -p "$SINKLAB_TOKEN_CACHE"
  [[ -d .deps/tokens ]] && cp -r .deps/tokens/. "$SINKLAB_TOKEN_CACHE/"
  tokenize() {
    local sinkc=$work/sinkc
    if [[ -f .deps/bin/sinkc.xz ]]; then
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
        .deps/bin/sinkc.xz "$sinkc" && chmod +x "$sinkc" || return 1
    else
      sinkc=$(command -v sinkc) ||
        { echo "no .deps/bin/sinkc.xz (scripts/pack-deps.sh .deps --natural DIR) and no sinkc on PATH"; return 1; }
    fi
    "$sinkc" --version | head -n 1
    "$sinkc" tokenize "$natural_plans" --out "$work/runs" || return 1
    grep -h '"model"\|"tokens"\|"seconds"' "$SINKLAB_TOKEN_CACHE"/*/info.json
  }
  step tokenize 120 tokenize || report 1
  # Every run at once, on the one GPU (or on the CPU's cores, one thread each, in a rehearsal). When the budget ends,
  # timeout's SIGTERM reaches the runs too: each ends its step, checkpoints and records itself as interrupted,
  # keeping every measurement made by then.
  runs=$(ls -d "$natural_plans"/*/ | wc -l)
  # The first plan alone first, the others idle: against its speed beside them below, what sharing the GPU gives.
  if ((runs > 1 && alone > 0)); then
    before=$status
    step alone "$alone" build-gpu/sinkc-runtime run "$(ls -d "$natural_plans"/*/ | sort | head -n 1)plan.toml" \
      --out "$work/alone" --no-progress
    (($? == 124)) && status=$before  # cut off by its time, as planned
  fi
  left=$((deadline - $(date +%s) - 45))
  before=$status
  step natural_runs $(((left > 0 ? left : 0) * 570 / budget)) build-gpu/sinkc-runtime run "$natural_plans" \
    --out "$work/runs" --jobs "$runs" --no-progress
  (($? == 124)) && status=$before  # the budget ended the runs, as planned: they say how far they got
  # One file however many runs: each run's folder without its checkpoints.
  (cd "$work/runs" && find . -mindepth 2 -maxdepth 2 -type f \( -name plan.toml -o -name summary.json \
    -o -name metrics.jsonl -o -name losses.jsonl -o -name log.txt \) -print0 | sort -z |
    tar --null -T - -czf "$out/natural_runs.tar.gz")
  report $status
fi

# (SINKLAB_FILL_CACHE_SAMPLE=N: N kernels of the list, as the rehearsal on the CPU compiles; the tests compile all)
step kernels 120 build-gpu/tests/cuda_check --fill-cache "$arch" ${SINKLAB_FILL_CACHE_SAMPLE:+--sample "$SINKLAB_FILL_CACHE_SAMPLE"}
[[ $gpu == yes ]] || no_gpu cuda_check
step tiles 20 build-gpu/tests/cuda_check tiles
tiles_rc=$?
if ((tiles_rc != 0 && tiles_rc != 1)); then
  # Not a wrong product (exit 1: the cases and the tuning then show which kernels it reaches) but a crash or a
  # hang: every later step would meet it again in the Hopper kernels, each costing its whole time limit.
  SINKLAB_GPU_FEATURES=$(with_features hopper=off)
  say "gpu-check: the tile products ended with exit $tiles_rc; the Hopper (wgmma) kernels are left out from here on"
fi
step cuda_check 190 build-gpu/tests/cuda_check --no-tune --no-table-tiles
# The fused and Hopper tiles a tuning may choose, in a process and a time limit of their own: kernels that may never
# have run on this GPU, whose fault or hang would otherwise take the cases above, or all of the step's time, with it.
step table_tiles 60 build-gpu/tests/cuda_check table-tiles
table_rc=$?
if ((table_rc == 124 || table_rc == 137)) || grep -q '^CRASH.*wgmma' "$work/table_tiles.out" 2> /dev/null; then
  SINKLAB_GPU_FEATURES=$(with_features hopper=off)
  say "gpu-check: the fused and Hopper tiles' cases hung or crashed in a Hopper kernel; the Hopper (wgmma) kernels are left out from here on"
fi
cat "$work/tiles.out" "$work/cuda_check.out" "$work/table_tiles.out" > "$work/cases.out" 2> /dev/null
mv "$work/cases.out" "$work/cuda_check.out"
# The tensor-core kernels' tiles measured on this GPU (cuda_check's case 8, in a process of its own: a crash
# there leaves cases 1-7 reported), its lines counted with cuda_check's; it writes the table it prints.
step tune 90 build-gpu/tests/cuda_check tune
cat "$work/tune.out" >> "$work/cuda_check.out"
cp "$work/cuda_check.out" "$out/cuda_check.txt"
training_runs
# A node's install, where the call carried scripts/pack-node.sh's archive (build-node/): the runtime installed
# into a prefix beside the archive's portable sinkc, which then trains the same run on the GPU from there.
archive=$(ls build-node/sinklab-*-linux-*.tar.gz 2> /dev/null | head -n 1)
installed() {
  cmake --install build-gpu --prefix "$work/prefix" > /dev/null || return 1
  tar -xzf "$1" -O --wildcards '*/portable/bin/sinkc' > "$work/prefix/bin/sinkc" || return 1
  chmod +x "$work/prefix/bin/sinkc" && "$work/prefix/bin/sinkc" --version &&
    "$work/prefix/bin/sinkc" run "$work/fixture" --out "$work/installed-runs" --no-progress
}
[[ -n $archive ]] && step installed 60 installed "$archive"
# The tiles cuda_check measured (its table) where it measured them, else those sinklab ships for this GPU
# (data/tuning/tiles.json, entries measured at these kernels), else the defaults: measuring every benchmark variant's
# 8 candidates would not fit the call. d_head 96 too (the 60M model's), for the rate across d_head; the baselines
# reach 64 and 128 first.
step gpu_attention 120 env SINKLAB_TUNE=0 build-gpu/bench/gpu_attention --repeats 5 --D 64,128,96 --T 2048,8192 \
  --json "$work/ours.json"
# Training before the baselines: three calls measured the baselines, whose budget was then spent before the
# training comparison finished; now the baselines take what is left.
training_benchmark 210 2
# (Its own budget well inside the step's limit: a case it starts, torch.compile included, may take 30 s.)
left=$((deadline - $(date +%s) - 60))
baseline_budget=$((100 * budget / 570))
step baselines 150 python3 bench/gpu_attention_baselines.py "$work/ours.json" --repeats 5 \
  --budget $((left < baseline_budget ? (left > 0 ? left : 0) : baseline_budget)) \
  --json "$work/baselines.json"
cat "$work/gpu_attention.out" "$work/baselines.out" > "$out/gpu_attention.txt" 2> /dev/null
report $status
