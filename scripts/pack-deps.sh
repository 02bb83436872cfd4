#!/bin/bash
# Copies the header-only dependencies (fmt, toml++, nlohmann/json, CLI11) from
# this machine's Debian packages into DIR/include, for a machine that has a
# LibTorch but not these packages (a GPU node with a pip PyTorch and no apt),
# with gloo's headers (libgloo-dev): LibTorch's ProcessGroupGloo.hpp includes
# them and a pip PyTorch does not ship them, so without them the node's
# runtime has no data-parallel training.
# The runtime's CMake uses them with -DSINKLAB_DEPS_DIR=DIR (cmake/Dependencies.cmake).
# The builtin corpora assembled here (data/builtin/*.jsonl) travel along
# xz-compressed (large.jsonl, 245 MB, becomes 51 MB: a GPU machine may take
# at most 64 MiB of carried files); scripts/setup-gpu.sh unpacks them with
# Python's lzma, which every PyTorch's Python has.
#   scripts/pack-deps.sh .deps        (.deps/ is git-ignored)
set -euo pipefail
dir=${1:?usage: scripts/pack-deps.sh DIR}
mkdir -p "$dir/include"
for h in fmt toml++ nlohmann CLI gloo; do
  [[ -d /usr/include/$h ]] || { echo "pack-deps: /usr/include/$h missing: run scripts/setup.sh first" >&2; exit 1; }
  rm -rf "${dir:?}/include/$h"
  cp -r "/usr/include/$h" "$dir/include/"
done
echo "pack-deps: $(du -sh "$dir/include" | cut -f1) in $dir/include (fmt, toml++, nlohmann, CLI11, gloo)"
mkdir -p "$dir/data/builtin"
for corpus in data/builtin/*.jsonl; do
  [[ -f $corpus ]] || continue
  packed=$dir/data/builtin/$(basename "$corpus").xz
  [[ $packed -nt $corpus ]] && continue  # packed already (xz -9 takes minutes)
  echo "pack-deps: compressing $corpus"
  xz -9 -T2 -c "$corpus" > "$packed.tmp" && mv "$packed.tmp" "$packed"
done
echo "pack-deps: $(du -sh "$dir" | cut -f1) in $dir in all"
