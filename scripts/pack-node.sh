#!/bin/bash
# One archive from which a GPU node with no root, apt or network installs sinklab (scripts/install-node.sh):
# the tracked files of this working tree, the packed dependencies (scripts/pack-deps.sh: header-only
# libraries, gloo's headers, the builtin corpus) and sinkc, the front end, linked statically. The front end
# needs ANTLR's C++ runtime, which no PyPI package has, so it is built here, where Debian's packages are, as
# one file that runs on any x86-64 Linux; the runtime is built on the node, against the node's own PyTorch.
#   scripts/pack-node.sh OUT_DIR [--large]   ->  OUT_DIR/sinklab-VERSION-linux-ARCH.tar.gz
# (--large packs the large builtin corpus too, as pack-deps.sh does.)
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/pack-node.sh OUT_DIR [--large]"
out=${1:?$usage}
shift
mkdir -p "$out"
out=$(realpath "$out")
scripts/pack-deps.sh .deps "$@" | grep -v '^pack-deps: .* of the 64 MiB' || true
[[ -d .deps/include/fmt ]] || { echo "pack-node: scripts/pack-deps.sh failed" >&2; exit 1; }

# SentencePiece, linked into sinkc so that a node tokenizes where its front end runs (sinkc tokenize): Debian
# ships no static library, so it is built from PyPI's source distribution of the pinned version, once.
spm_version=0.2.1
spm=$PWD/build-portable/sentencepiece-$spm_version
if [[ ! -f $spm/root/lib/libsentencepiece_train.a ]]; then
  rm -rf "$spm" && mkdir -p "$spm"
  python3 -m pip download --quiet --no-deps --no-binary :all: "sentencepiece==$spm_version" -d "$spm"
  tar -xzf "$spm/sentencepiece-$spm_version.tar.gz" -C "$spm"
  cmake -S "$spm/sentencepiece-$spm_version/sentencepiece" -B "$spm/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSPM_ENABLE_SHARED=OFF -DSPM_ENABLE_TCMALLOC=OFF -DCMAKE_INSTALL_PREFIX="$spm/root" > /dev/null
  cmake --build "$spm/build" --target install > /dev/null
fi
# fmt and toml++ header-only from .deps (Debian ships no static fmt), ANTLR's static library, -static.
PKG_CONFIG_PATH="$spm/root/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
  cmake -S . -B build-portable -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKLAB_PORTABLE=ON -DSINKLAB_RUNTIME=OFF \
  -DSINKLAB_TESTS=OFF -DSINKLAB_DEPS_DIR="$PWD/.deps" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_tomlplusplus=ON > build-portable/configure.log ||
  { cat build-portable/configure.log >&2; exit 1; }
grep -q "SentencePiece linked into sinkc 1" build-portable/configure.log ||
  { grep -i sentencepiece build-portable/configure.log >&2; echo "pack-node: SentencePiece not linked" >&2; exit 1; }
cmake --build build-portable --target sinkc
sinkc=build-portable/sinkc
# ldd exits non-zero on a static executable; anything it lists would be a library the node may lack.
if libraries=$(ldd "$sinkc" 2>&1); then
  echo "pack-node: $sinkc is not static; it needs:" >&2
  echo "$libraries" >&2
  exit 1
fi
version=$("$sinkc" --version | head -1 | cut -d' ' -f2)
name=sinklab-$version-linux-$(uname -m)
stage=$(mktemp -d "${TMPDIR:-/tmp}/sinklab-pack-XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/$name
mkdir -p "$root/portable/bin"
# The working tree as a GPU job receives it: tracked files and untracked ones git does not ignore (a tracked
# file deleted here is left out).
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$root"
cp -r .deps "$root/.deps"
install -m 755 -s "$sinkc" "$root/portable/bin/sinkc"
# No .git travels: the commit goes as a file, which the runtime's build reads for its provenance.
commit=$(git rev-parse HEAD)
git diff --quiet HEAD -- || commit+="+modified"
echo "$commit" > "$root/SOURCE_COMMIT"
tar -C "$stage" -czf "$out/$name.tar.gz.tmp" "$name"
mv "$out/$name.tar.gz.tmp" "$out/$name.tar.gz"
echo "pack-node: $out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1); sinkc $version, commit $commit)"
