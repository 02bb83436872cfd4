#!/bin/bash
# End-to-end training throughput on one GPU: sinkc-runtime training
# plans/gpu_throughput (paper_60m in bf16, bench/gpu_60m.sink)
# against the same model in plain PyTorch with SDPA (bench/pytorch_twin.py),
# same shapes, batch, micro-batches and precision, run one after the other.
# Ours is the real run loop (data, metrics, everything), measured from the
# run's own metrics between its first and last measurement; the twin's
# after 3 warm-up steps.
#   bench/gpu_train_vs_pytorch.sh [BUILD_DIR=build-gpu] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
out=${2:-$(mktemp -d)}
plan=plans/gpu_throughput/gpu_60m_throughput/plan.toml
mkdir -p "$out"
"$build/sinkc-runtime" run plans/gpu_throughput --out "$out/runs" > "$out/runtime.log" 2>&1 || {
  tail -n 20 "$out/runtime.log"
  exit 1
}
run=$(ls -td "$out"/runs/gpu_60m_throughput-* | head -n 1)
python3 - "$plan" "$run" "$out" <<'PY'
import json, subprocess, sys, tomllib
plan, run, out = sys.argv[1:4]
p = tomllib.load(open(plan, "rb"))
m, t = p["model"], p["train"]
metrics = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
first, last = metrics[0], metrics[-1]
ours = (last["tokens"] - first["tokens"]) / (last["elapsed_s"] - first["elapsed_s"])
summary = json.load(open(f"{run}/summary.json"))
steps = t["steps"] - first["step"]
twin = subprocess.run(
    ["python3", "bench/pytorch_twin.py", *map(str, [m["d"], m["layers"], m["heads"], m["ffn_hidden"], t["context"],
     t["batch"], m["vocab"], steps, 16, "cuda", t["precision"], t["micro_batch"]])],
    check=True, capture_output=True, text=True)
theirs = json.loads(twin.stdout.strip().splitlines()[-1])
result = {"sinklab_tokens_per_s": ours, "pytorch_tokens_per_s": theirs["tokens_per_s"],
          "ratio": ours / theirs["tokens_per_s"], "sinklab_attention": summary.get("attention_backend"),
          "pytorch": theirs, "steps_measured": steps, "final_loss": last.get("train_loss")}
json.dump(result, open(f"{out}/gpu_train_vs_pytorch.json", "w"), indent=2)
print(f"paper_60m shapes, bf16, batch {t['batch']} x {t['context']} in micro-batches of {t['micro_batch']}:")
print(f"  sinklab ({result['sinklab_attention']}) {ours:,.0f} tokens/s, PyTorch {theirs['torch']} "
      f"(sdpa {theirs['sdpa']}) {theirs['tokens_per_s']:,.0f} tokens/s: {result['ratio']:.2f}x")
PY
