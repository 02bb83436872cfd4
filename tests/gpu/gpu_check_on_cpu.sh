#!/bin/bash
# scripts/gpu-check.sh on the CPU, in a copy holding only what a GPU job receives: the tracked
# and the untracked-not-ignored files, and the carried .deps. There it must build the GPU node's way,
# fill the kernel cache, stop with exit 77 at the first step that needs a GPU, and leave OUT as a
# GPU job can return it: at most 8 files, none over 16 MiB, none more than two folders down, names of
# letters, digits, '.', '_' and '-', a gpu-check.json that parses and logs each step's seconds.
# --natural without the large corpus must stop before building, with exit 2; --step must build and stop with exit
# 77 at train_on_cuda. Then the natural-text call rehearsed whole at tiny scale: specs/text_emergence_ladder.sink
# compiled small, on the CPU and builtin("default") with a SentencePiece vocabulary of 512, packed as a GPU job
# carries it (scripts/pack-deps.sh --natural: the model trained here, the portable sinkc), its five runs trained at
# once in the copy after the copy's sinkc encoded with that model, and the one archive it returns unpacked by
# scripts/gpu-results.sh into run folders that `sinkc table` reads.
#   tests/gpu/gpu_check_on_cpu.sh SOURCE_DIR WORK_DIR PYTHON [SINKC]
# PYTHON: a Python with the pip PyTorch (scripts/torch-venv.sh); exit 77 (skip) without it or SOURCE_DIR/.deps.
# SINKC: the front end, to compile the rehearsal's plans; without it, or without SOURCE_DIR/build-portable/sinkc
# (scripts/pack-node.sh), the rehearsal is skipped, saying so, and the rest still runs.
set -euo pipefail
src=$(realpath "$1")
work=$2
python=${3:-}
sinkc=${4:-}
[[ -x $python ]] && "$python" -c 'import torch' 2> /dev/null ||
  { echo "SKIP: no Python with torch given (configure with -DSINKLAB_PYTHON=\$(scripts/torch-venv.sh)/bin/python)"; exit 77; }
[[ -d $src/.deps/include ]] || { echo "SKIP: no $src/.deps (scripts/pack-deps.sh .deps)"; exit 77; }
rm -rf "$work"
mkdir -p "$work/device"
copy=$(realpath "$work/device")
git -C "$src" ls-files -z --cached --others --exclude-standard |
  (cd "$src" && xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' | tar --null -T - -cf -) | tar -C "$copy" -xf -
cp -r "$src/.deps" "$copy/.deps"
echo "device copy: $(du -sh "$copy" | cut -f1) in $copy"
# The kernel cache filled with a sample of 40 kernels: all of them (539) are 6-7 minutes of NVRTC on two cores, and
# compiling every variant is CudaKernels.EveryVariantCompilesForSm80AndSm90's part.
export PATH="$(dirname "$python"):$PATH" CCACHE_BASEDIR=$copy TMPDIR=$work SINKLAB_FILL_CACHE_SAMPLE=40
set +e
(cd "$copy" && scripts/gpu-check.sh "$work/out-natural" --natural)
natural_rc=$?
(cd "$copy" && scripts/gpu-check.sh "$work/out" --budget 3000)
rc=$?
(cd "$copy" && scripts/gpu-check.sh "$work/out-step" --step --budget 3000)
step_rc=$?
natural_small_rc=skipped
if [[ -x $sinkc && -x $src/build-portable/sinkc ]]; then
  # Tiny runs of the ladder: what changes is only their size, the device and the corpus.
  tiny=(--set train.device=cpu --set 'data.corpus=builtin("default")' --set 'data.tokenizer=sentencepiece(vocab = 512)'
    --set model.d=32 --set model.heads=2 --set model.ffn_hidden=64 --set model.layers=1 --set train.steps=12
    --set train.batch=4 --set train.context=32 --set train.precision=fp32 --set train.checkpoint_every=0
    --set measure.every=6 --set measure.T=16 --set measure.sequences=4 --set 'optim.schedule=constant(warmup = 2)'
    --set train.log_every=2)
  "$sinkc" compile "$src/specs/text_emergence_ladder.sink" "${tiny[@]}" -o "$copy/plans/rehearsal" > /dev/null
  # Packed where apt is: into a copy of the carried folder, from the source folder, the models trained in a cache
  # of the test's own.
  cp -r "$src/.deps" "$work/deps-natural"
  (cd "$src" && SINKLAB_TOKEN_CACHE=$work/pack-tokens scripts/pack-deps.sh "$work/deps-natural" \
    --natural "$copy/plans/rehearsal")
  rm -rf "$copy/.deps" && cp -r "$work/deps-natural" "$copy/.deps"
  (cd "$copy" && scripts/gpu-check.sh "$work/out-natural-small" --natural --plans plans/rehearsal --budget 3000)
  natural_small_rc=$?
  scripts_dir=$src/scripts
  "$scripts_dir/gpu-results.sh" "$work/out-natural-small" "$work/natural-runs"
  "$sinkc" table "$work/natural-runs" > "$work/natural-table.txt"
  cat "$work/natural-table.txt"
else
  echo "SKIP (the natural-text rehearsal): no front end given or no $src/build-portable/sinkc (scripts/pack-node.sh)"
fi
set -e
ls -la "$work/out"
python3 - "$work/out" "$rc" "$work/out-natural" "$natural_rc" "$work" "$work/out-step" "$step_rc" \
  "$natural_small_rc" <<'PY'
import glob, json, os, re, sys
out, rc, natural_out, natural_rc, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
step_out, step_rc, natural_small_rc = sys.argv[6], int(sys.argv[7]), sys.argv[8]
problems = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        problems.append(what)
check(rc == 77, f"gpu-check exits 77 (no CUDA device) at its first GPU step: {rc}")
files = []
for root, dirs, names in os.walk(out):
    for n in dirs + names:
        check(re.fullmatch(r"[A-Za-z0-9._-]+", n) is not None, f"name {n!r} uses only letters, digits, '.', '_', '-'")
    for n in names:
        path = os.path.join(root, n)
        files.append(path)
        check(os.path.relpath(path, out).count(os.sep) <= 2, f"{path} is at most two folders below OUT")
        check(os.path.getsize(path) <= 16 << 20, f"{path} is at most 16 MiB")
check(0 < len(files) <= 8, f"{len(files)} files in OUT (at most 8)")
check(sum(os.path.getsize(f) for f in files) <= 64 << 20, "at most 64 MiB together")
report = json.load(open(os.path.join(out, "gpu-check.json")))
steps = {s["name"]: s for s in report["steps"]}
print(json.dumps(report["steps"], indent=1))
for name in ("preflight", "build", "kernels"):
    check(steps.get(name, {}).get("status") == "ok", f"step {name} ran and passed")
check(steps.get("cuda_check", {}).get("status") == "no_gpu", "cuda_check is where it stopped, for want of a GPU")
check(all(isinstance(s["seconds"], (int, float)) for s in report["steps"]), "every step's seconds logged")
check(report["budget_s"] == 3000 and 0 < report["elapsed_s"] <= report["budget_s"], "the budget and the time used logged")
check(report["preflight"].get("torch", "").startswith("2."), f"preflight names torch: {report['preflight'].get('torch')}")
check(any("0 failed" in line for line in report.get("kernel_cache", [])), f"kernel cache filled: {report.get('kernel_cache')}")
log = open(os.path.join(out, "gpu-check.log")).read()
check("runtime: CUDA attention backend" in log, "the build has the CUDA backend (CMake's line in the log)")
check("NVRTC" in log and "nvcc:" in log, "the log names NVRTC and nvcc")
check(not [d for d in os.listdir(work) if d.startswith("sinklab-gpu-check.")], "the temporary folder is removed")
check(natural_rc == 2, f"--natural without the large corpus stops before building with exit 2: {natural_rc}")
natural_log = open(os.path.join(natural_out, "gpu-check.log")).read()
check("--large-corpus" in natural_log and "== build" not in natural_log, "it says how to get the corpus, and built nothing")
check(step_rc == 77, f"--step exits 77 (no CUDA device) at its first GPU step: {step_rc}")
step_steps = {s["name"]: s for s in json.load(open(os.path.join(step_out, "gpu-check.json")))["steps"]}
check(step_steps.get("build", {}).get("status") == "ok" and "kernels" not in step_steps,
      f"--step builds, and runs none of the kernel checks: {list(step_steps)}")
check(step_steps.get("train_on_cuda", {}).get("status") == "no_gpu", "--step stops at train_on_cuda")
if natural_small_rc != "skipped":
    small = os.path.join(work, "out-natural-small")
    check(natural_small_rc == "0", f"the rehearsed natural call passed: exit {natural_small_rc}")
    names = sorted(os.listdir(small))
    check(len(names) <= 8 and "natural_runs.tar.gz" in names, f"it returns at most 8 files, the runs in one: {names}")
    small_log = open(os.path.join(small, "gpu-check.log")).read()
    check("no training" in small_log, "the copy's sinkc encoded with the model packed beside it, training none")
    small_report = json.load(open(os.path.join(small, "gpu-check.json")))
    runs = small_report.get("natural_runs", {})
    check(len(runs) == 5 and all(r["status"] == "completed" and r["measurements"] >= 2 for r in runs.values()),
          f"five runs completed, each measured twice or more: {runs}")
    small_steps = {s["name"]: s for s in small_report["steps"]}
    shared = small_report.get("sharing_the_gpu", {})
    # (Twelve steps of runs this small log speeds too coarse, 0.1k tokens/s, for every run's steady speed.)
    check(small_steps.get("alone", {}).get("status") == "ok" and shared.get("run") == "ladder_sigmoid_d384"
          and shared.get("runs_at_once") == 5 and len(shared.get("shared_tokens_per_s", {})) == 5
          and (shared.get("alone_tokens_per_s") or 0) > 0,
          f"the first plan trained alone first, its speed there against the five's: {shared}")
    unpacked = glob.glob(os.path.join(work, "natural-runs", "*", "metrics.jsonl"))
    check(len(unpacked) == 5, f"gpu-results.sh unpacked five run folders: {unpacked}")
    table = open(os.path.join(work, "natural-table.txt")).read()
    check(all(n in table for n in ("ladder_softmax_d256", "ladder_sigmoid_d384")), "sinkc table reads them")
sys.exit(1 if problems else 0)
PY
