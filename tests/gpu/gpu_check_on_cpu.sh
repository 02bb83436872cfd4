#!/bin/bash
# scripts/gpu-check.sh on the CPU, in a copy holding only what a GPU job receives: the tracked
# and the untracked-not-ignored files, and the carried .deps. There it must build the GPU node's way,
# fill the kernel cache, stop with exit 77 at the first step that needs a GPU, and leave OUT as a
# GPU job can return it: at most 8 files, none over 16 MiB, none more than two folders down, names of
# letters, digits, '.', '_' and '-', a gpu-check.json that parses and logs each step's seconds.
# --natural without the large corpus must stop before building, with exit 2; --step must build and stop with exit
# 77 at train_on_cuda.
#   tests/gpu/gpu_check_on_cpu.sh SOURCE_DIR WORK_DIR PYTHON
# PYTHON: a Python with the pip PyTorch (scripts/torch-venv.sh); exit 77 (skip) without it or SOURCE_DIR/.deps.
set -euo pipefail
src=$(realpath "$1")
work=$2
python=${3:-}
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
export PATH="$(dirname "$python"):$PATH" CCACHE_BASEDIR=$copy TMPDIR=$work
set +e
(cd "$copy" && scripts/gpu-check.sh "$work/out-natural" --natural)
natural_rc=$?
(cd "$copy" && scripts/gpu-check.sh "$work/out" --budget 3000)
rc=$?
(cd "$copy" && scripts/gpu-check.sh "$work/out-step" --step --budget 3000)
step_rc=$?
set -e
ls -la "$work/out"
python3 - "$work/out" "$rc" "$work/out-natural" "$natural_rc" "$work" "$work/out-step" "$step_rc" <<'PY'
import json, os, re, sys
out, rc, natural_out, natural_rc, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
step_out, step_rc = sys.argv[6], int(sys.argv[7])
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
sys.exit(1 if problems else 0)
PY
