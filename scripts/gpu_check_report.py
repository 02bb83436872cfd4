"""gpu-check.json: what scripts/gpu-check.sh's steps left in its work folder, as one JSON document.

    python3 scripts/gpu_check_report.py WORK OUT MODE BUDGET_S STARTED_EPOCH_S

Reads WORK/steps.jsonl (one line per step: name, status, rc, seconds, limit_s) and the steps'
outputs (WORK/<step>.out), and the run folders under WORK; writes OUT/gpu-check.json whole
(a temporary file renamed), then prints a few lines for the log.
"""
import glob
import json
import os
import re
import sys
import time
import tomllib


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def preflight(text):
    facts = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(": ")
        if not sep:
            facts.setdefault("nvcc_version", []).append(line.strip())
        elif key == "torch":
            facts.update(json.loads(value))
        elif key in facts:  # several GPUs
            facts[key] = facts[key] + "; " + value
        else:
            facts[key] = value
    return facts


def cuda_check(text):
    """cuda_check's outcome, counted from the PASS and FAIL lines it printed (one per case, each flushed as it
    ends), so that output cut short by a crash or the step's time limit still says how far it got. gpu-check
    runs it three times (the tile products, cases 1-7, then the tuning, each in a process of its own) into one
    output: the closing lines "N of M cases passed" are summed as a cross-check; "complete" says whether every process printed one and
    none crashed. A crash's own report (its CRASH line and the addresses after it) is kept whole."""
    if text is None:
        return None
    lines = text.splitlines()
    passes = [line for line in lines if line.startswith("PASS ")]
    failures = [line for line in lines if line.startswith("FAIL")]
    summaries = re.findall(r"^(\d+) of (\d+) cases passed$", text, re.MULTILINE)
    processes = max(1, sum(line.startswith("NVRTC") for line in lines))  # each starts with its libraries line
    crash = []
    for n, line in enumerate(lines):
        if line.startswith("CRASH"):
            crash = [line] + [later for later in lines[n + 1:n + 80] if later.startswith("  ")]
            break
    result = {
        "libraries": lines[0] if lines else "",
        "passed": len(passes),
        "cases": len(passes) + len(failures),
        "complete": len(summaries) >= processes and not crash,
        "failures": failures,
        "skipped": [line for line in lines if line.startswith("SKIP")],
        "notes": [line for line in lines if line.startswith("NOTE")],
    }
    if crash:
        result["crash"] = crash
    if summaries:
        passed, cases = sum(int(p) for p, _ in summaries), sum(int(c) for _, c in summaries)
        result["summary_line"] = f"{passed} of {cases} cases passed"
        if (passed, cases) != (result["passed"], result["cases"]):
            result["summary_disagrees"] = True
    if not result["complete"]:
        result["last_line"] = lines[-1] if lines else ""
    return result


def cuda_check_line(checked):
    line = f"cuda_check: {checked['passed']} of {checked['cases']} cases passed"
    if checked.get("crash"):
        line += f" before it crashed: {checked['crash'][0]}"
    elif not checked["complete"]:
        line += " before its output ended without the summary line (a crash or the time limit; see its last line)"
    elif checked.get("summary_disagrees"):
        line += f" (its own summary said: {checked['summary_line']})"
    return line


def natural_runs(work):
    runs = {}
    for summary_file in sorted(glob.glob(os.path.join(work, "runs", "*", "summary.json"))):
        run_dir = os.path.dirname(summary_file)
        summary = json.loads(read(summary_file) or "{}")
        metrics = [json.loads(line) for line in (read(os.path.join(run_dir, "metrics.jsonl")) or "").splitlines()
                   if line.strip()]
        name = os.path.basename(run_dir).rsplit("-", 1)[0]
        # The sink's curve: tokens seen, Sink_1 (%) and alpha_1 averaged over every layer and head.
        curve = []
        for m in metrics:
            alpha = [a for layer in m.get("alpha") or [] for a in layer if isinstance(a, (int, float))]
            curve.append([m.get("tokens"), (m.get("sink") or {}).get("1"),
                          round(sum(alpha) / len(alpha), 4) if alpha else None])
        formed = next((c[0] for c in curve if isinstance(c[1], (int, float)) and c[1] >= 10), None)
        runs[name] = {"status": summary.get("status"), "steps_done": summary.get("steps_done"),
                      "measurements": len(metrics), "sink_1_over_10_at_tokens": formed, "curve": curve,
                      "final": summary.get("final"), "detail": summary.get("detail")}
    return runs


# A run's progress line (runtime/training/progress.cpp): its tokens/s over the steps' own time since the process began.
PROGRESS = re.compile(r" step (\d+)/\d+ loss \S+ lr \S+ ([\d.]+)k tok/s")


def steady_tokens_per_s(run_dir):
    """A fresh run's training speed over the second half of what it logged: the time at each progress line recovered
    from the line's tokens/s (measurements and checkpoints left out, as the runtime leaves them), then the tokens
    between the line at half the last line's steps and the last line over the time between them, so that start-up
    and tuning do not count. None without two such lines, or where the run was resumed (its count restarts)."""
    try:
        train = tomllib.loads(read(os.path.join(run_dir, "plan.toml")) or "")["train"]
        tokens_per_step = int(train["batch"]) * int(train["context"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError):
        return None
    points = []  # (step, seconds of training up to it)
    for line in (read(os.path.join(run_dir, "log.txt")) or "").splitlines():
        match = PROGRESS.search(line)
        if not match:
            continue
        step, rate = int(match.group(1)), float(match.group(2)) * 1000
        if points and step <= points[-1][0]:
            return None
        if rate > 0:
            points.append((step, step * tokens_per_step / rate))
    if len(points) < 2:
        return None
    last = points[-1]
    middle = next(p for p in points if p[0] * 2 >= last[0])
    if middle is last:
        middle = points[-2]
    seconds = last[1] - middle[1]
    return round((last[0] - middle[0]) * tokens_per_step / seconds) if seconds > 0 else None


def sharing(work):
    """Runs sharing one GPU against one alone: the first plan's steady speed trained alone (WORK/alone) and beside
    the others (WORK/runs), every run's speed there and their sum; None where nothing trained alone."""
    alone_dirs = sorted(glob.glob(os.path.join(work, "alone", "*", "")))
    if not alone_dirs:
        return None
    name_of = lambda run_dir: os.path.basename(os.path.dirname(run_dir)).rsplit("-", 1)[0]
    run = name_of(alone_dirs[0])
    alone = steady_tokens_per_s(alone_dirs[0])
    shared = {name_of(d): steady_tokens_per_s(d) for d in sorted(glob.glob(os.path.join(work, "runs", "*", "")))}
    result = {"run": run, "alone_tokens_per_s": alone, "runs_at_once": len(shared), "shared_tokens_per_s": shared}
    known = [v for v in shared.values() if v]
    if known and len(known) == len(shared):
        result["total_tokens_per_s"] = sum(known)
    if alone and shared.get(run):
        result["shared_over_alone"] = round(shared[run] / alone, 3)
        # The N runs together against one run alone, if each slows beside the others as the measured one does.
        result["runs_at_once_over_one_alone"] = round(len(shared) * shared[run] / alone, 2)
    return result


def failed_measurements(table_text):
    """The tuning table's records of the measurements that faulted or hung (runtime/attention/cuda_tuning.h), each
    with its tiles in a line; [] where there is no table or it is not one."""
    try:
        table = json.loads(table_text or "{}")
    except json.JSONDecodeError:
        return []
    failed = table.get("failed", []) if isinstance(table, dict) else []
    out = []
    for f in failed if isinstance(failed, list) else []:
        if isinstance(f, dict):
            tiles = f.get("tiles", {})
            shape = ", ".join(f"{k} {v}" for k, v in tiles.items()) if isinstance(tiles, dict) else str(tiles)
            out.append({"key": f.get("key"), "kernel": f.get("kernel"), "tiles": shape, "why": f.get("why"),
                        "at": f.get("at")})
    return out


def main():
    work, out, mode, budget, started = sys.argv[1:6]
    steps = [json.loads(line) for line in (read(os.path.join(work, "steps.jsonl")) or "").splitlines() if line.strip()]
    report = {"mode": mode, "budget_s": int(budget), "elapsed_s": round(time.time() - int(started), 1),
              "steps": steps, "preflight": preflight(read(os.path.join(work, "preflight.txt")))}
    kernels = read(os.path.join(work, "kernels.out"))
    if kernels is not None:
        lines = kernels.splitlines()
        report["cuda_libraries"] = lines[0] if lines else ""
        report["kernel_cache"] = [line for line in lines if "kernel" in line]
    checked = cuda_check(read(os.path.join(work, "cuda_check.out")))
    if checked is not None:
        report["cuda_check"] = checked
    attention = read(os.path.join(work, "gpu_attention.out"))
    if attention is not None:
        report["gpu_attention"] = attention.splitlines()
    baselines = read(os.path.join(work, "baselines.json"))
    if baselines:
        report["attention_baselines"] = json.loads(baselines)
    captured = read(os.path.join(work, "captured_step.json"))
    if captured:
        report["captured_step"] = json.loads(captured)
    trained = read(os.path.join(work, "train-bench", "gpu_train_vs_pytorch.json"))
    if trained:
        report["train_vs_pytorch"] = json.loads(trained)
    if mode == "natural":
        report["natural_runs"] = natural_runs(work)
        shared = sharing(work)
        if shared:
            report["sharing_the_gpu"] = shared
    failed = failed_measurements(read(os.path.join(out, "tiles.json")))
    if failed:
        report["failed_measurements"] = failed
    target = os.path.join(out, "gpu-check.json")
    with open(target + ".tmp", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(target + ".tmp", target)
    for s in steps:
        print(f"   {s['name']:<18} {s['status']:<10} {s['seconds']:>8} s (limit {s['limit_s']} s)")
    if checked:
        print("   " + cuda_check_line(checked))
    for f in failed:
        print(f"   tuning could not measure {f['kernel']} with tiles {f['tiles']} ({f['key']}): {f['why']}")
    shared = report.get("sharing_the_gpu")
    if shared:
        print(f"   {shared['runs_at_once']} runs at once: {shared['run']} alone {shared['alone_tokens_per_s']} "
              f"tokens/s, beside the others {shared['shared_tokens_per_s'].get(shared['run'])}; all together "
              f"{shared.get('total_tokens_per_s')}, about {shared.get('runs_at_once_over_one_alone')}x one run alone")
    for name, run in report.get("natural_runs", {}).items():
        formed = run["sink_1_over_10_at_tokens"]
        print(f"   {name}: {run['status']} after {run['steps_done']} steps, {run['measurements']} measurements; "
              + (f"Sink_1 first >= 10 % at {formed} tokens" if formed is not None else "Sink_1 never >= 10 %"))


if __name__ == "__main__":
    main()
