#!/bin/bash
# Copies the header-only dependencies (fmt, toml++, nlohmann/json, CLI11) from
# this machine's Debian packages into DIR/include, for a machine that has a
# LibTorch but not these packages (a GPU node with a pip PyTorch and no apt).
# The runtime's CMake uses them with -DSINKLAB_DEPS_DIR=DIR (cmake/Dependencies.cmake).
#   scripts/pack-deps.sh .deps        (.deps/ is git-ignored)
set -euo pipefail
dir=${1:?usage: scripts/pack-deps.sh DIR}
mkdir -p "$dir/include"
for h in fmt toml++ nlohmann CLI; do
  [[ -d /usr/include/$h ]] || { echo "pack-deps: /usr/include/$h missing: run scripts/setup.sh first" >&2; exit 1; }
  rm -rf "${dir:?}/include/$h"
  cp -r "/usr/include/$h" "$dir/include/"
done
echo "pack-deps: $(du -sh "$dir" | cut -f1) in $dir/include (fmt, toml++, nlohmann, CLI11)"
