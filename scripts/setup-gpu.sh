#!/bin/bash
# Builds the runtime on a machine that has a PyTorch with CUDA and the CUDA
# toolkit but no apt, ANTLR, LLVM or Debian -dev packages (a GPU node). Needs
# no network: LibTorch is the PyTorch's own (the python3 on PATH), the
# header-only dependencies come from a folder packed elsewhere with
# scripts/pack-deps.sh (default .deps), and are taken from there even where
# this machine has them installed, so a build here is a GPU node's build.
# Plans are compiled where the front end is (`sinkc compile SPEC -o plans/`)
# and run here with build-gpu/sinkc-runtime run plans/.
#   scripts/setup-gpu.sh [DEPS_DIR] [BUILD_DIR] [-DOPTION=VALUE...] [--target NAME...]
# CI builds this way against the pip PyTorch 2.11 (scripts/test.sh), adding
# -DSINKLAB_FRONTEND=ON, since the runtime's tests compile specs.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$(realpath "${1:-.deps}")
build=${2:-build-gpu}
shift $(($# < 2 ? $# : 2))
options=() targets=()
while (($#)); do
  case $1 in
    -D*) options+=("$1") ;;
    --target) targets+=(--target "${2:?--target needs a name}"); shift ;;
    *) echo "usage: scripts/setup-gpu.sh [DEPS_DIR] [BUILD_DIR] [-DOPTION=VALUE...] [--target NAME...]" >&2; exit 2 ;;
  esac
  shift
done
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
# TorchConfig looks for libtorch.so and libc10.so in the system's folders before its own, and would take a
# Debian LibTorch's (/usr/lib) where one is installed too: name them. (Adding the torch folder to the prefix
# path instead makes other packages find the protobuf headers bundled in torch/include.)
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
# A pip LibTorch may be built with either C++ ABI; CMake takes it from TorchConfig.
# The packed headers, never the installed packages: as on a GPU node.
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DSINKLAB_DEPS_DIR="$deps" \
  -DTORCH_LIBRARY="$torch_lib/libtorch.so" -Dc10_LIBRARY="$torch_lib/libc10.so" \
  -DC10_CUDA_LIBRARY="$torch_lib/libc10_cuda.so" -DCAFFE2_NVRTC_LIBRARY="$torch_lib/libcaffe2_nvrtc.so" \
  -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON -DCMAKE_DISABLE_FIND_PACKAGE_tomlplusplus=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
  -DSINKLAB_FRONTEND=OFF -DSINKLAB_RUNTIME=ON -DSINKLAB_TESTS=ON "${options[@]}"
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
# The builtin corpora packed beside the headers, where they are not unpacked yet.
for packed in "$deps"/data/builtin/*.jsonl.xz; do
  [[ -f $packed ]] || continue
  corpus=data/builtin/$(basename "$packed" .xz)
  [[ -s $corpus ]] && continue
  mkdir -p data/builtin
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"), 1 << 20)' \
    "$packed" "$corpus.tmp" && mv "$corpus.tmp" "$corpus"
  echo "setup-gpu: unpacked $corpus ($(du -h "$corpus" | cut -f1))"
done
echo "setup-gpu: built $build against torch $(python3 -c 'import torch; print(torch.__version__)')"
