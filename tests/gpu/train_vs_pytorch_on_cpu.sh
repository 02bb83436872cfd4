#!/bin/bash
# bench/gpu_train_vs_pytorch.sh on the CPU (--device cpu --tiny, two rounds): sinklab's run loop and both
# PyTorch twins, eager and compiled, in interleaved rounds, and the JSON with each ratio's median and range
# (and the sigmoid run's time over softmax's); the three per-operator tables (a profiled sinklab run's trace and
# the twins' torch.profiler traces, each summed by `sinkc-runtime trace-table`) and the peak memory.
# It checks the script; its numbers say nothing about a GPU.
#   tests/gpu/train_vs_pytorch_on_cpu.sh SOURCE_DIR BUILD_DIR WORK_DIR PYTHON
# PYTHON: a Python with torch >= 2 (for torch.compile); exit 77 (skip) without it or without BUILD_DIR/sinkc.
set -euo pipefail
src=$1 build=$2 work=$3 python=${4:-}
[[ -x $python ]] && "$python" -c 'import torch, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2> /dev/null ||
  { echo "SKIP: no Python with torch >= 2 given (configure with -DSINKLAB_PYTHON=...)"; exit 77; }
[[ -x $build/sinkc ]] || { echo "SKIP: no $build/sinkc (the front end compiles the tiny plan)"; exit 77; }
rm -rf "$work"
SINKLAB_TORCH_PYTHON=$python "$src/bench/gpu_train_vs_pytorch.sh" --device cpu --tiny --rounds 2 "$build" "$work"
"$python" - "$work/gpu_train_vs_pytorch.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["device"] == "cpu" and len(r["rounds"]) == 2, r
assert r["sinklab_tokens_per_s"]["median"] > 0, r
s = r["sigmoid_time_vs_softmax"]  # the sigmoid run beside softmax's, each round
assert 0 < s["min"] <= s["median"] <= s["max"], s
assert all(row["sinklab"]["sigmoid"]["steps"] == row["sinklab"]["steps"] for row in r["rounds"]), r
# The captured step's call (on the CPU its fixed buffers, uncaptured): the same curve as the eager step's.
assert r["captured_step"] == "eager on fixed buffers (a CUDA graph only on a GPU)" or \
    r["captured_step"].startswith("eager, not captured"), r["captured_step"]
for row in r["rounds"]:
    for run in (row["sinklab"], row["sinklab"]["sigmoid"]):
        assert run["step"] == "eager", run
    assert row["captured"]["final_loss"] == row["sinklab"]["final_loss"], row
    assert row["captured"]["sigmoid"]["final_loss"] == row["sinklab"]["sigmoid"]["final_loss"], row
assert r["captured_vs_eager_step"]["median"] > 0, r
# The step kernels' call: on the CPU no CUDA kernel runs, and the CPU's fused operations run in every call, so the
# same curve again.
assert r["fused_step_kernels"] == "residual add + RMSNorm, swiglu's activation, q and k into heads with RoPE", \
    r["fused_step_kernels"]
for row in r["rounds"]:
    assert row["fused"]["final_loss"] == row["captured"]["final_loss"], row
assert r["fused_final_loss_vs_captured"]["max"] == 0 and r["fused_vs_captured"]["median"] > 0, r
for name in ("eager", "compiled"):
    s = r[f"ratio_vs_{name}"]
    assert 0 < s["min"] <= s["median"] <= s["max"], (name, s)
    assert all(row[name]["compile"] == (name == "compiled") for row in r["rounds"]), name
    assert all(row[name]["micro_batch"] == r["micro_batch"] for row in r["rounds"]), name
import os
tables = json.load(open(os.path.join(os.path.dirname(sys.argv[1]), "profile-tables.json")))
assert set(tables) == {"sinklab", "eager twin", "compiled twin"}, tables.keys()
for name, t in tables.items():
    assert t["steps"] == 3 and t["wall_ms"] > 0 and t["operators"], (name, t)
    assert any("mm" in row["name"] or "linear" in row["name"] for row in t["operators"]), (name, t["operators"])
assert r["peak_memory"]["sinklab"]["bytes"] > 0, r["peak_memory"]
print("ok: two interleaved rounds, ratios", r["ratio_vs_eager"]["median"], r["ratio_vs_compiled"]["median"])
PY
