#!/bin/bash
# End-to-end training throughput: sinkc-runtime training
# plans/gpu_throughput (paper_60m in bf16, bench/gpu_60m.sink) against the
# same model in plain PyTorch with SDPA (bench/pytorch_twin.py), eager and
# under torch.compile: same shapes, batch, micro-batches, precision and a
# fused AdamW where PyTorch has one. Several interleaved rounds (sinklab,
# eager twin, compiled twin, again), so a machine that slows down or speeds
# up shifts all three alike; the report is the median of each round's
# ratios and their range. Each round's sinklab call also trains the same
# run with sigmoid attention without normalization (bench/gpu_60m.sink's
# gpu_60m_sigmoid: the generated kernels) and reports its time over softmax's;
# a second call trains both with the step captured as CUDA graphs
# (SINKLAB_GPU_FEATURES=cuda_graph, runtime/training/training_step.h), and a
# third captured with the step kernels too (step_kernels,
# runtime/training/step_kernels.h); the caller's other GPU features
# (runtime/gpu_features.h) stand in all three.
# sinklab's side is the real run loop (data, metrics, everything) in a fresh
# run each round, its speed read from the run's own metrics.jsonl: the
# tokens between its first and last measurement over train_s, the training
# time without the measurements (which the twin does not make). The twins
# start once, warm up (and compile) for 3 steps, then time a round of as
# many steps as sinklab's measured ones whenever asked (--serve).
# Where the time goes, per operator and kernel: after the rounds, one more
# sinklab run with --profile (its RUN/trace.json, 3 steps after 2 of warm-up),
# and the twins' traces of 3 steps after their warm-up (torch.profiler), each
# summed by `sinkc-runtime trace-table` into profile-tables.txt (and .json),
# with each side's peak memory.
#   bench/gpu_train_vs_pytorch.sh [--device cpu|cuda] [--tiny] [--rounds N] [BUILD_DIR=build-gpu] [OUT_DIR]
# --tiny: a model small enough for a CPU (d 64, 2 layers, 8 x 128 tokens a
# step, fp32, one thread each), compiled from bench/gpu_60m.sink with
# BUILD_DIR's sinkc: checks the script itself where there is no GPU; its
# numbers say nothing about a GPU. $SINKLAB_TORCH_PYTHON: the Python with
# PyTorch (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda tiny=0 rounds=3 positional=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --tiny) tiny=1; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) positional+=("$1"); shift ;;
  esac
done
build=${positional[0]:-build-gpu}
out=${positional[1]:-$(mktemp -d)}
python=${SINKLAB_TORCH_PYTHON:-python3}
mkdir -p "$out"
plans=plans/gpu_throughput
if [[ $tiny == 1 ]]; then
  plans=$out/plan
  "$build/sinkc" compile bench/gpu_60m.sink -o "$plans" --set model.d=64 --set model.layers=2 --set model.heads=4 \
    --set model.ffn_hidden=128 --set model.vocab=512 --set train.context=128 --set train.batch=8 \
    --set train.micro_batch=4 --set train.precision=fp32 --set train.threads=1 --set train.device="$device" \
    > "$out/compile.log"
elif [[ $device != cuda ]]; then
  plans=$out/plan
  "$build/sinkc" compile bench/gpu_60m.sink -o "$plans" --set train.device="$device" > "$out/compile.log"
fi
"$python" - "$build" "$plans" "$out" "$rounds" <<'PY'
import json, os, re, statistics, subprocess, sys, tomllib
build, plans, out, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
plan = tomllib.load(open(f"{plans}/gpu_60m_throughput/plan.toml", "rb"))
m, t, me = plan["model"], plan["train"], plan["measure"]
measured_steps = t["steps"] - me["every"]  # between the first measurement and the last
threads = t["threads"] or os.cpu_count()


def sinklab(r, captured=False, fused=False):
    tag = f"{r}-fused" if fused else f"{r}-captured" if captured else f"{r}"
    log = f"{out}/runtime-{tag}.log"
    # The step's two features in place of what SINKLAB_GPU_FEATURES said of them, its other entries kept.
    step = ["cuda_graph" if captured else "cuda_graph=off", "step_kernels" if fused else "step_kernels=off"]
    kept = [e for e in re.split(r"[,\s]+", os.environ.get("SINKLAB_GPU_FEATURES", ""))
            if e and e.split("=")[0] not in ("cuda_graph", "step_kernels")]
    env = dict(os.environ, SINKLAB_GPU_FEATURES=",".join(kept + step))
    with open(log, "w") as f:
        done = subprocess.run([f"{build}/sinkc-runtime", "run", plans, "--out", f"{out}/runs-{tag}"], stdout=f,
                              stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        sys.exit(f"sinkc-runtime failed (round {tag}):\n" + "".join(open(log).readlines()[-20:]))
    runs = f"{out}/runs-{tag}"

    def speed(name):
        run = os.path.join(runs, next(d for d in os.listdir(runs) if d.startswith(name + "-")))
        metrics = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
        first, last = metrics[0], metrics[-1]
        summary = json.load(open(f"{run}/summary.json"))
        return {"tokens_per_s": (last["tokens"] - first["tokens"]) / (last["train_s"] - first["train_s"]),
                "steps": last["step"] - first["step"], "attention": summary.get("attention_backend"),
                "final_loss": last.get("train_loss"), "step": summary.get("step", "eager"),
                "step_kernels": summary.get("step_kernels")}

    return {**speed("gpu_60m_throughput"), "sigmoid": speed("gpu_60m_sigmoid")}


def twin(compiled):
    args = [m["d"], m["layers"], m["heads"], m["ffn_hidden"], t["context"], t["batch"], m["vocab"], measured_steps,
            threads, t["device"], t["precision"], t["micro_batch"]]
    trace = f"--trace={out}/trace-{'compiled' if compiled else 'eager'}.json"
    return subprocess.Popen([sys.executable, "bench/pytorch_twin.py", "--serve", trace,
                             *(["--compile"] if compiled else []), *map(str, args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def twin_round(p):
    p.stdin.write("round\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


# Both warm up (and compile) side by side: none of that is timed.
twins = {"eager": twin(False), "compiled": twin(True)}
for name, p in twins.items():
    if not p.stdout.readline():
        sys.exit(f"the {name} twin (bench/pytorch_twin.py) ended before it was ready")
def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summary(rows):
    result = {"device": t["device"], "precision": t["precision"], "batch": t["batch"], "context": t["context"],
              "micro_batch": t["micro_batch"], "steps_per_round": measured_steps, "rounds": rows,
              "sinklab_tokens_per_s": spread([r["sinklab"]["tokens_per_s"] for r in rows]),
              "sinklab_attention": rows[0]["sinklab"]["attention"], "torch": rows[0]["eager"]["torch"],
              "optimizer_twin": rows[0]["eager"]["optimizer"],
              # The same run with sigmoid attention without normalization (generated kernels; softmax's is
              # SDPA's): its time over softmax's, per round.
              "sigmoid_tokens_per_s": spread([r["sinklab"]["sigmoid"]["tokens_per_s"] for r in rows]),
              "sigmoid_attention": rows[0]["sinklab"]["sigmoid"]["attention"],
              "sigmoid_time_vs_softmax": spread([r["sinklab"]["tokens_per_s"] / r["sinklab"]["sigmoid"]["tokens_per_s"]
                                                 for r in rows]),
              # The same two runs with the step captured as CUDA graphs (cuda_graph): how it ran, its
              # speed, and its speed over the eager step's in the same round.
              "captured_step": rows[0]["captured"]["step"],
              "captured_tokens_per_s": spread([r["captured"]["tokens_per_s"] for r in rows]),
              "captured_vs_eager_step": spread([r["captured"]["tokens_per_s"] / r["sinklab"]["tokens_per_s"]
                                                for r in rows]),
              "captured_sigmoid_time_vs_softmax": spread(
                  [r["captured"]["tokens_per_s"] / r["captured"]["sigmoid"]["tokens_per_s"] for r in rows]),
              # Captured with the step kernels: which ran, the speed over the captured step's, the final loss's
              # relative difference from the captured step's (the kernels sum in another order).
              "fused_step_kernels": rows[0]["fused"]["step_kernels"],
              "fused_tokens_per_s": spread([r["fused"]["tokens_per_s"] for r in rows]),
              "fused_vs_captured": spread([r["fused"]["tokens_per_s"] / r["captured"]["tokens_per_s"] for r in rows]),
              "fused_final_loss_vs_captured": spread(
                  [abs(r["fused"]["final_loss"] - r["captured"]["final_loss"]) / abs(r["captured"]["final_loss"])
                   for r in rows]),
              "fused_sigmoid_time_vs_softmax": spread(
                  [r["fused"]["tokens_per_s"] / r["fused"]["sigmoid"]["tokens_per_s"] for r in rows])}
    for name in twins:
        result[f"{name}_tokens_per_s"] = spread([r[name]["tokens_per_s"] for r in rows])
        result[f"ratio_vs_{name}"] = spread([r["sinklab"]["tokens_per_s"] / r[name]["tokens_per_s"] for r in rows])
        result[f"captured_ratio_vs_{name}"] = spread([r["captured"]["tokens_per_s"] / r[name]["tokens_per_s"]
                                                      for r in rows])
        result[f"fused_ratio_vs_{name}"] = spread([r["fused"]["tokens_per_s"] / r[name]["tokens_per_s"] for r in rows])
    return result


# Each round is written as it ends, so a call cut short by its time limit keeps the rounds it finished.
rows = []
for r in range(rounds):
    row = {"sinklab": sinklab(r), "captured": sinklab(r, captured=True), "fused": sinklab(r, True, fused=True)}
    for name, p in twins.items():
        row[name] = twin_round(p)
    rows.append(row)
    result = summary(rows)
    json.dump(result, open(f"{out}/gpu_train_vs_pytorch.json", "w"), indent=2)
    softmax, sigmoid = row["sinklab"]["tokens_per_s"], row["sinklab"]["sigmoid"]["tokens_per_s"]
    print(f"round {r + 1}: sinklab {softmax:,.0f}, eager {row['eager']['tokens_per_s']:,.0f}, "
          f"compiled {row['compiled']['tokens_per_s']:,.0f} tokens/s; sigmoid attention {sigmoid:,.0f} "
          f"({softmax / sigmoid:.2f}x softmax's time); captured step {row['captured']['tokens_per_s']:,.0f}, "
          f"with the step kernels {row['fused']['tokens_per_s']:,.0f}",
          flush=True)
for p in twins.values():
    p.stdin.close()
    p.wait()


# The three profiles: sinklab's run with --profile (synchronised per part, so not among the timed rounds).
def profiled_sinklab():
    runs = f"{out}/runs-profile"
    with open(f"{out}/runtime-profile.log", "w") as f:
        subprocess.run([f"{build}/sinkc-runtime", "run", plans, "--run", "gpu_60m_throughput", "--profile",
                        "--no-progress", "--out", runs], stdout=f, stderr=subprocess.STDOUT)
    run = os.path.join(runs, next(d for d in os.listdir(runs) if d.startswith("gpu_60m_throughput-")))
    return f"{run}/trace.json", json.load(open(f"{run}/summary.json")).get("peak_memory")


sinklab_trace, sinklab_peak = profiled_sinklab()
tables = {}
with open(f"{out}/profile-tables.txt", "w") as text:
    for name, path in [("sinklab", sinklab_trace), ("eager twin", f"{out}/trace-eager.json"),
                       ("compiled twin", f"{out}/trace-compiled.json")]:
        if not os.path.exists(path):
            text.write(f"== {name}: no trace ({path})\n")
            continue
        table = subprocess.run([f"{build}/sinkc-runtime", "trace-table", path, "--steps", "3", "--json"],
                               capture_output=True, text=True)
        if table.returncode != 0:
            text.write(f"== {name}: {table.stderr}\n")
            continue
        tables[name] = json.loads(table.stdout)
        text.write(f"== {name}\n")
        text.write(subprocess.run([f"{build}/sinkc-runtime", "trace-table", path, "--steps", "3"],
                                  capture_output=True, text=True).stdout + "\n")
json.dump(tables, open(f"{out}/profile-tables.json", "w"), indent=2)
result["peak_memory"] = {"sinklab": sinklab_peak, **{f"{name}_twin_bytes": rows[-1][name].get("peak_memory_bytes")
                                                    for name in twins}}
json.dump(result, open(f"{out}/gpu_train_vs_pytorch.json", "w"), indent=2)
print(f"d {m['d']}, {m['layers']} layers, {t['precision']}, batch {t['batch']} x {t['context']} in micro-batches of "
      f"{t['micro_batch']} on {t['device']}, {rounds} rounds of {measured_steps} steps, median (min-max):")
for name in twins:
    s = result[f"ratio_vs_{name}"]
    print(f"  sinklab ({result['sinklab_attention']}) / {name} twin (torch {result['torch']}): "
          f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})")
s = result["sigmoid_time_vs_softmax"]
print(f"  sinklab, sigmoid without normalization ({result['sigmoid_attention']}): {s['median']:.2f}x the time of "
      f"softmax ({s['min']:.2f}-{s['max']:.2f})")
for name in twins:
    s = result[f"captured_ratio_vs_{name}"]
    print(f"  sinklab, step {result['captured_step']} / {name} twin: {s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})")
s = result["captured_sigmoid_time_vs_softmax"]
print(f"  captured, sigmoid without normalization: {s['median']:.2f}x the time of softmax ({s['min']:.2f}-{s['max']:.2f})")
for name in twins:
    s = result[f"fused_ratio_vs_{name}"]
    print(f"  sinklab captured, step kernels ({result['fused_step_kernels']}) / {name} twin: {s['median']:.2f}x "
          f"({s['min']:.2f}-{s['max']:.2f})")
s = result["fused_final_loss_vs_captured"]
print(f"  step kernels' final loss against the captured step's: relative difference {s['max']:.2g} at most")
print(f"  peak memory: {result['peak_memory']}; per-operator and per-kernel tables: {out}/profile-tables.txt")
PY
