#!/bin/bash
# Builds the runtime on a machine that has a PyTorch with CUDA and the CUDA
# toolkit but no apt, ANTLR, LLVM or Debian -dev packages (a GPU node). Needs
# no network: LibTorch is the PyTorch's own, the header-only dependencies come
# from a folder packed elsewhere with scripts/pack-deps.sh (default .deps).
# Plans are compiled where the front end is (`sinkc compile SPEC -o plans/`)
# and run here with build-gpu/sinkc-runtime run plans/.
#   scripts/setup-gpu.sh [DEPS_DIR] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$(realpath "${1:-.deps}")
build=${2:-build-gpu}
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
# A pip LibTorch may be built with either C++ ABI; CMake takes it from TorchConfig.
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DSINKLAB_DEPS_DIR="$deps" \
  -DSINKLAB_FRONTEND=OFF -DSINKLAB_RUNTIME=ON -DSINKLAB_TESTS=ON
cmake --build "$build" -j "$(nproc)"
echo "setup-gpu: built $build/sinkc-runtime against $(python3 -c 'import torch; print(torch.__version__)')"
