#!/bin/bash
# Set up (with the test-only packages), build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every build folder here is configured afresh in CI; ccache (installed by setup.sh --tests) keeps the
# compiled objects between runs on one machine, whichever folder the clone is in (CCACHE_BASEDIR). The
# sloppiness lets it cache the translation units that use a precompiled header (all of LibTorch's). When each
# program compiled its own copy of that header (110 MB each in the cache), a run filled ccache's default 5 GB and
# evicted its own objects (the next run hit half of them); one copy a build now, 2.4 GB, and room to spare.
# CCACHE_NOHASHDIR: the sanitized build's objects carry debug information, whose compilation folder (the clone's)
# ccache would otherwise hash, missing in every clone but the one that stored them (their debug information then
# names that folder: no test reads it).
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true \
  CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-20G}
# Each leg's start, seconds from this script's: where the CI budget goes.
leg() { echo "== $1 (at ${SECONDS} s)"; }
leg "set-up and the Debian build"
scripts/setup.sh --tests
# The size in ccache's own configuration too: a build on this machine without this environment (by hand, or the
# node's build) would otherwise clean the cache down to the default 5 GB, evicting what CI stored.
ccache --max-size "$CCACHE_MAXSIZE" > /dev/null
# The CUDA kernels on the CPU emulation (CudaKernels.*, about half the runtime tests' time, and the step kernels'
# StepKernels.*) run in the torch 2.11 leg below, the one built as a GPU node builds.
leg "Debian tests"
ctest --test-dir build --output-on-failure -j2 -E '^(CudaKernels|StepKernels)\.' -LE 'gpucheck|node'
# The plan library and kernel emitters alone, configured without ANTLR,
# LibTorch or LLVM: the layering the runtime's portability rests on.
leg "the plan library alone"
cmake -S . -B build-plan -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKLAB_FRONTEND=OFF -DSINKLAB_RUNTIME=OFF > /dev/null
ninja -C build-plan plan_tests tokens_tests
ctest --test-dir build-plan --output-on-failure
# The parser fuzz target needs clang: its own build folder, where the front
# end, the results code and sinkc are built with ASan and UBSan; their tests
# run there again, sanitized, beside the 30 s fuzz run.
leg "the sanitized front end and the fuzz run"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSINKLAB_FUZZ=ON -DSINKLAB_RUNTIME=OFF \
  -DSINKLAB_UNITY_TESTS=ON -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 > /dev/null
ninja -C build-fuzz parse_fuzz lsp_fuzz sinkc front_tests results_tests results_fixture
UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-fuzz --output-on-failure -j2 -L 'front|results|fuzz'
# The GPU node's build against the pip PyTorch researchers run (torch 2.11 + CUDA 13, scripts/torch-venv.sh),
# the CUDA backend compiled in: scripts/pack-deps.sh, then scripts/setup-gpu.sh, as on a node (which
# scripts/gpu-check.sh runs), with the front end added, since the runtime's tests compile specs. Everything a
# node builds (the runtime, cuda_check, gpu_attention) compiles here against that LibTorch, and the runtime's
# tests that need no GPU run on it: the data-parallel ones under torch 2.11's torchrun, the CUDA kernels on
# the CPU emulation.
leg "the torch 2.11 build"
venv=$(scripts/torch-venv.sh)
# The archive a node without root installs from (its .deps/ is the one below; sinkc linked statically).
scripts/pack-node.sh build-node
PATH="$venv/bin:$PATH" scripts/setup-gpu.sh .deps build-torch2 -DSINKLAB_FRONTEND=ON -DSINKLAB_UNITY_TESTS=ON \
  -DSINKLAB_PYTHON="$venv/bin/python" \
  --target sinkc --target sinkc-runtime --target runtime_tests --target plan_tests --target cuda_check \
  --target gpu_attention
leg "torch 2.11 tests"
# Every runtime test but those of the orchestration of runs (sweeps, bisection, Slurm arrays, run locks), which
# trains through the same runtime either way, and of the files and programs outside it (exports, Hugging Face's
# checkpoints and transformers, the benchmarks' own checks): they ran on the Debian build above, once is enough.
ctest --test-dir build-torch2 --output-on-failure -j2 -L 'plan|runtime' \
  -E '^(Bisect|Sweep|SlurmSubmit|RunLock|StaleRuns|Export|ExportHf|HfCheckpoint|HfTransformers|Bench)\.'
leg "gpu-check rehearsed on the CPU"
# scripts/gpu-check.sh in a copy holding only what a GPU job receives, up to its first step that
# needs a GPU: the build, the kernel cache, the files it returns (tests/gpu/gpu_check_on_cpu.sh).
ctest --test-dir build-torch2 --output-on-failure -L gpucheck
leg "the node archive installed"
# That archive installed into a fresh prefix as on a node (scripts/install-node.sh), then a study from there.
ctest --test-dir build-torch2 --output-on-failure -L node
leg "done"
