"""The training step captured as CUDA graphs against the same step uncaptured (scripts/gpu-check.sh's captured_step).

    python3 scripts/captured_step_check.py RUNTIME PLANS WORK [--device cuda|cpu]

Trains the run in PLANS (a folder of one plan, as `sinkc compile` writes it, logging its loss at every step:
plans/gpu_captured_step) three ways with the sinkc-runtime RUNTIME, on the plan's device or --device:
  eager      the step as LibTorch runs it, operation by operation;
  buffers    on fixed buffers, never captured (cuda_graph=buffers);
  captured   on fixed buffers and, after its warm-up steps, replayed as two CUDA graphs (cuda_graph);
  again      on fixed buffers once more: whether the GPU repeats itself bit for bit at all;
  fused      on fixed buffers with the step kernels (step_kernels: the residual add with the RMSNorm,
             the gated FFN's activation, one CUDA kernel each way);
  fused_captured  the same, captured.
Each way's features are SINKLAB_GPU_FEATURES's entries (runtime/gpu_features.h), in place of what the caller's value
said of the same features (its others, such as gpu-check's hopper=tune, kept). Every way with fused_backward=off, so
that no gradient is summed by atomics (or, on compute capability 9.0, by bulk reductions) in an order of the moment.
Writes WORK/captured_step.json: each way's status, how its step ran (summary.json's "step"), its tokens/s and
its losses, then the comparisons. On a GPU both captured ways must say they were captured ("captured as two CUDA
graphs after ..."; a failed capture trains eagerly and says why, and would compare nothing). The captured losses
must equal the uncaptured ones bit for bit: a replay runs
the same kernels on the same addresses (unless the uncaptured run does not repeat itself either, which the report
then says). Against the eager step they may differ in the last bits, since the fused AdamW reads its rate as a
float on the GPU; the largest relative difference is reported. The step kernels sum in another order than
LibTorch's operations: their losses must stay within FUSED_TOLERANCE of the fixed buffers' (relative), and captured
they must equal themselves uncaptured bit for bit. On a CPU nothing is captured or fused, and all must agree
exactly. Exits 1 where a run failed or the losses differ.
"""
import json
import os
import re
import subprocess
import sys

# Each way: its cuda_graph entry (runtime/gpu_features.h), and whether the step kernels run.
WAYS = {"eager": ("cuda_graph=off", False), "buffers": ("cuda_graph=buffers", False), "captured": ("cuda_graph", False),
        "again": ("cuda_graph=buffers", False), "fused": ("cuda_graph=buffers", True),
        "fused_captured": ("cuda_graph", True)}
FUSED_TOLERANCE = 1e-3
# How a captured step's summary.json says it ran, once captured (runtime/training/training_step.h's how()).
CAPTURED = "captured as two CUDA graphs after "


def with_features(asked, wanted):
    """SINKLAB_GPU_FEATURES `asked` with each entry of `wanted` (name or name=word) in place of what it said of that
    feature, the rest kept."""
    names = {entry.split("=")[0] for entry in wanted}
    kept = [entry for entry in re.split(r"[,\s]+", asked or "") if entry and entry.split("=")[0] not in names]
    return ",".join(kept + list(wanted))


def plan_on(plans, work, device):
    """A copy of PLANS whose run trains on `device` (where it trains is not part of a plan's hash)."""
    (run,) = [d for d in os.listdir(plans) if os.path.isfile(os.path.join(plans, d, "plan.toml"))]
    text = open(os.path.join(plans, run, "plan.toml")).read()
    if device:
        text, n = re.subn(r'^device = ".*"$', f'device = "{device}"', text, count=1, flags=re.MULTILINE)
        if n != 1:
            sys.exit(f"{plans}/{run}/plan.toml has no line 'device = ...'")
    copy = os.path.join(work, "captured-step-plan")
    os.makedirs(os.path.join(copy, run), exist_ok=True)
    with open(os.path.join(copy, run, "plan.toml"), "w") as f:
        f.write(text)
    return copy


def train(runtime, plans, work, way):
    graph, fused = WAYS[way]
    wanted = ["fused_backward=off", graph, "step_kernels" if fused else "step_kernels=off"]
    env = dict(os.environ, SINKLAB_GPU_FEATURES=with_features(os.environ.get("SINKLAB_GPU_FEATURES"), wanted))
    out = os.path.join(work, f"captured-step-{way}")
    done = subprocess.run([runtime, "run", plans, "--out", out, "--no-progress"], env=env, capture_output=True,
                          text=True)
    result = {"exit": done.returncode, "output": (done.stdout + done.stderr).splitlines()[-8:]}
    runs = [d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, "summary.json"))] if os.path.isdir(
        out) else []
    if not runs:
        return result
    run = os.path.join(out, runs[0])
    summary = json.load(open(os.path.join(run, "summary.json")))
    losses = [json.loads(line) for line in open(os.path.join(run, "losses.jsonl")) if line.strip()]
    result.update(status=summary.get("status"), step=summary.get("step"), device=summary.get("device"),
                  step_kernels=summary.get("step_kernels"), tokens_per_s=summary.get("tokens_per_s"),
                  losses=[line["loss"] for line in losses])
    return result


def largest_relative_difference(a, b):
    return max((abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b)), default=None)


def main():
    args = sys.argv[1:]
    device = None
    if "--device" in args:
        at = args.index("--device")
        device = args[at + 1]
        del args[at:at + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    runtime, plans, work = args
    plans = plan_on(plans, work, device)
    ways = {way: train(runtime, plans, work, way) for way in WAYS}
    report = {"ways": ways}
    failed = [way for way, r in ways.items() if r.get("status") != "completed"]
    if not failed:
        eager, buffers, captured, again, fused, fused_captured = (ways[w]["losses"] for w in WAYS)
        report["captured_equals_buffers"] = captured == buffers and len(captured) > 3
        report["buffers_repeat_themselves"] = again == buffers
        report["largest_relative_difference_vs_eager"] = largest_relative_difference(captured, eager)
        report["fused_captured_equals_fused"] = fused_captured == fused
        report["largest_relative_difference_fused_vs_buffers"] = largest_relative_difference(fused, buffers)
        on_gpu = str(ways["captured"].get("device", "")).startswith("cuda")
        report["eager_must_match"] = not on_gpu
        report["captured_as_graphs"] = all(str(ways[w].get("step") or "").startswith(CAPTURED)
                                           for w in ("captured", "fused_captured"))
        fused_close = report["largest_relative_difference_fused_vs_buffers"] <= (FUSED_TOLERANCE if on_gpu else 0)
        report["passed"] = (report["captured_equals_buffers"] and (on_gpu or captured == eager)
                            and report["fused_captured_equals_fused"] and fused_close
                            and (report["captured_as_graphs"] or not on_gpu))
        speed = {way: r["tokens_per_s"] for way, r in ways.items()}
        if speed["eager"] and speed["captured"]:
            report["captured_speed_vs_eager"] = speed["captured"] / speed["eager"]
        if speed["captured"] and speed["fused_captured"]:
            report["fused_speed_vs_captured"] = speed["fused_captured"] / speed["captured"]
    else:
        report["passed"] = False
        report["failed"] = failed
    with open(os.path.join(work, "captured_step.json.tmp"), "w") as f:
        json.dump(report, f, indent=2)
    os.replace(os.path.join(work, "captured_step.json.tmp"), os.path.join(work, "captured_step.json"))
    for way, r in ways.items():
        print(f"{way:<9} {r.get('status')}: {r.get('step') or 'the eager step'}; {r.get('tokens_per_s') or 0:,.0f} "
              f"tokens/s")
    if failed:
        print(f"failed: {', '.join(failed)}")
        for way in failed:
            print("\n".join(f"  {line}" for line in ways[way]["output"]))
    else:
        print(f"captured = fixed buffers bit for bit: {report['captured_equals_buffers']} (fixed buffers run twice "
              f"equal: {report['buffers_repeat_themselves']}); largest relative difference from the eager step: "
              f"{report['largest_relative_difference_vs_eager']:.3g}; captured as CUDA graphs: "
              f"{report['captured_as_graphs']}")
        print(f"step kernels: captured = uncaptured bit for bit: {report['fused_captured_equals_fused']}; largest "
              f"relative difference from LibTorch's operations: "
              f"{report['largest_relative_difference_fused_vs_buffers']:.3g}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
