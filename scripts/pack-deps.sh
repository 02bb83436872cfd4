#!/bin/bash
# What a GPU machine needs beside the working tree, packed into DIR (carry it):
# - the header-only dependencies (fmt, toml++, nlohmann/json, CLI11) from this
#   machine's Debian packages, and gloo's headers (libgloo-dev): LibTorch's
#   ProcessGroupGloo.hpp includes them and a pip PyTorch does not ship them;
#   the runtime's CMake uses them with -DSINKLAB_DEPS_DIR=DIR (cmake/Dependencies.cmake);
# - the builtin corpora the GPU plans train on, xz-compressed (scripts/setup-gpu.sh
#   unpacks them with Python's lzma, which every PyTorch's Python has):
#   default.jsonl always (plans/gpu_throughput), large.jsonl with --large
#   (245 MB, 51 MB packed);
# - with --natural PLANS (gpu-check.sh --natural --plans PLANS): the corpora those plans name,
#   their SentencePiece models, trained here by `sinkc tokenize` (tokens/<key>/tokenizer.model: a
#   GPU job encodes with them in seconds instead of training for minutes), and the portable sinkc
#   that encodes there (bin/sinkc.xz, from build-portable/, which scripts/pack-node.sh builds).
# scripts/gpu-check.sh is built for a GPU job that takes at most 64 MiB of
# working tree and carried folders together: the total is printed, and over it
# this fails.
#   scripts/pack-deps.sh DIR [--large] [--natural PLANS]        (.deps/ is git-ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/pack-deps.sh DIR [--large] [--natural PLANS]"
dir=${1:?$usage}
shift
corpora=(default) natural=""
while (($#)); do
  case $1 in
    --large) corpora+=(large) ;;
    --natural) natural=${2:?$usage}; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if [[ -n $natural ]]; then
  [[ -d $natural ]] || { echo "pack-deps: no plans folder $natural" >&2; exit 2; }
  corpora+=($(sed -n 's/^corpus = { form = "builtin", name = "\([^"]*\)" }$/\1/p' "$natural"/*/plan.toml | sort -u))
fi
mkdir -p "$dir/include"
for h in fmt toml++ nlohmann CLI gloo; do
  [[ -d /usr/include/$h ]] || { echo "pack-deps: /usr/include/$h missing: run scripts/setup.sh first" >&2; exit 1; }
  rm -rf "${dir:?}/include/$h"
  cp -r "/usr/include/$h" "$dir/include/"
done
echo "pack-deps: $(du -sh "$dir/include" | cut -f1) in $dir/include (fmt, toml++, nlohmann, CLI11, gloo)"
mkdir -p "$dir/data/builtin"
rm -f "$dir"/data/builtin/*.tmp
for packed in "$dir"/data/builtin/*.jsonl.xz; do  # a corpus not asked for this time stays behind
  [[ -f $packed ]] || continue
  name=$(basename "$packed" .jsonl.xz)
  [[ " ${corpora[*]} " == *" $name "* ]] || { rm "$packed"; echo "pack-deps: dropped $packed (not asked for)"; }
done
for name in "${corpora[@]}"; do
  corpus=data/builtin/$name.jsonl
  if [[ ! -s $corpus ]]; then
    hint="scripts/setup.sh"
    [[ $name == large ]] && hint="scripts/setup.sh --large-corpus"
    echo "pack-deps: $corpus is missing, and the GPU plans train on it: run $hint first" >&2
    exit 1
  fi
  packed=$dir/data/builtin/$name.jsonl.xz
  if [[ ! $packed -nt $corpus ]]; then  # packed already otherwise (xz -9 takes minutes)
    echo "pack-deps: compressing $corpus"
    xz -9 -T2 -c "$corpus" > "$packed.tmp" && mv "$packed.tmp" "$packed"
  fi
  echo "pack-deps: $(du -h "$packed" | cut -f1) $packed"
done
if [[ -n $natural ]]; then
  sinkc=build-portable/sinkc
  [[ -x $sinkc ]] ||
    { echo "pack-deps: no $sinkc (the static sinkc with SentencePiece): run scripts/pack-node.sh build-node" >&2; exit 1; }
  rm -rf "${dir:?}/tokens" "$dir/bin"
  mkdir -p "$dir/tokens" "$dir/bin"
  # Tokenized in a cache kept here (runs/.cache/tokens, or SINKLAB_TOKEN_CACHE), so the models train once; only
  # the models travel: the ids are encoded again where the runs are.
  staging=$(mktemp -d "${TMPDIR:-/tmp}/sinklab-pack-tokens.XXXXXX")
  trap 'rm -rf "$staging"' EXIT
  log=$staging/tokenize.log
  SINKLAB_HOME=$PWD SINKLAB_TOKEN_CACHE=${SINKLAB_TOKEN_CACHE:-$PWD/runs/.cache/tokens} \
    "$sinkc" tokenize "$natural" --out "$staging" 2>&1 | tee "$log" >&2
  ((PIPESTATUS[0] == 0)) || { echo "pack-deps: sinkc tokenize $natural failed" >&2; exit 1; }
  # The entries it made or found, as it named them: "tokenizing ... into DIR ..." and "... in DIR (already there)".
  for entry in $(sed -n -e 's/^tokenizing .* into \([^ ]*\).*$/\1/p' \
    -e 's/^tokens: .* in \(.*\) (already there)$/\1/p' "$log" | sort -u); do
    [[ -f $entry/tokenizer.model ]] || continue  # bytes and llama2c need no model
    mkdir -p "$dir/tokens/$(basename "$entry")"
    cp "$entry/tokenizer.model" "$dir/tokens/$(basename "$entry")/"
    echo "pack-deps: the SentencePiece model of $entry"
  done
  xz -9 -T2 -c "$sinkc" > "$dir/bin/sinkc.xz"
  echo "pack-deps: $(du -h "$dir/bin/sinkc.xz" | cut -f1) $dir/bin/sinkc.xz (the portable sinkc, to encode with them)"
fi
# What travels: the tracked and the untracked-not-ignored files, and DIR.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2> /dev/null |
  awk '{s += $1} END {print s + 0}')
carried=$(du -sb "$dir" | cut -f1)
total=$((tree + carried))
limit=$((64 * 1024 * 1024))
awk -v t="$tree" -v c="$carried" -v d="$dir" 'BEGIN {
  printf "pack-deps: %.1f MiB working tree + %.1f MiB in %s = %.1f MiB of the 64 MiB a GPU job takes\n",
    t / 1048576, c / 1048576, d, (t + c) / 1048576 }'
((total <= limit)) || { echo "pack-deps: over the limit" >&2; exit 1; }
