#!/bin/bash
# Run folders from what `scripts/gpu-check.sh OUT --natural` brought back: OUT holds
# <run>.summary.json and <run>.metrics.jsonl (gpu-check.sh returns 8 flat files at
# most); each becomes RUNS/<run>-<hash>/ with its plan from plans/gpu_natural_call,
# the folder `sinkc diff`, `sinkc report` and `sinkc table` read.
#   scripts/gpu-results.sh OUT RUNS
#   build/sinkc diff RUNS/natural_softmax-* RUNS/natural_sigmoid-*
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-results.sh OUT RUNS}
runs=${2:?usage: scripts/gpu-results.sh OUT RUNS}
found=0
for summary in "$out"/*.summary.json; do
  [[ -f $summary ]] || continue
  run=$(basename "$summary" .summary.json)
  plan=plans/gpu_natural_call/$run/plan.toml
  [[ -f $plan ]] || { echo "gpu-results: $summary: no $plan for it" >&2; exit 1; }
  hash=$(sed -n 's/^hash = "\(........\).*"/\1/p' "$plan")
  dir=$runs/$run-$hash
  mkdir -p "$dir"
  cp "$plan" "$dir/plan.toml"
  cp "$summary" "$dir/summary.json"
  [[ -f $out/$run.metrics.jsonl ]] && cp "$out/$run.metrics.jsonl" "$dir/metrics.jsonl"
  echo "gpu-results: $dir"
  found=$((found + 1))
done
((found)) || { echo "gpu-results: no <run>.summary.json in $out" >&2; exit 1; }
