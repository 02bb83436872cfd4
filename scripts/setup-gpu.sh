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
echo "setup-gpu: built $build/sinkc-runtime against $(python3 -c 'import torch; print(torch.__version__)')"
