#!/bin/bash
# Installs what a fresh Debian 12 machine lacks (idempotent), assembles the
# builtin corpus, and builds sinklab into build/.
#   scripts/setup.sh                 runtime + front end
#   scripts/setup.sh --tests         also what the test suite needs (clang for the fuzzer, chromium, and
#                                    torch 2.11 + transformers from PyPI in a virtual environment)
#   scripts/setup.sh --large-corpus  also builtin("large"), 245 MB of text for GPU runs (apt
#                                    fetches ~180 MB, the Linux source among it; never in CI)
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0 large_corpus=0
for arg in "$@"; do
  case $arg in
    --tests) tests=1 ;;
    --large-corpus) large_corpus=1 ;;
    *) echo "usage: scripts/setup.sh [--tests] [--large-corpus]"; exit 2 ;;
  esac
done

packages=(
  # toolchain
  cmake ninja-build g++ python3 git ca-certificates
  # front end
  antlr4 libantlr4-runtime-dev libtomlplusplus-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev
  # runtime: LibTorch needs a real BLAS (the reference libblas3 is ~30x slower); the runtime loads the OpenMP
  # build, which shares LibTorch's threads (runtime/CMakeLists.txt)
  libtorch-dev libopenblas0-pthread libopenblas0-openmp libzstd-dev zlib1g-dev
  # data-parallel training: the gloo headers LibTorch's c10d includes
  libgloo-dev
  # JIT attention kernels: LLVM 19 (ORC); its CMake config needs zstd
  llvm-19-dev
  # tokenizer
  libsentencepiece-dev sentencepiece
  # the builtin corpus: prose, reference, code, math
  bible-kjv fortunes python3.11-doc golang-1.19-src metamath-databases
)
if ((large_corpus)); then
  packages+=(linux-source-6.1 dict-gcide dict-foldoc dict-jargon wordnet-base perl-doc xz-utils)
fi
if ((tests)); then
  packages+=(clang-19 libclang-rt-19-dev python3-torch)
  # scripts/test.sh compiles through it: objects kept between runs on one machine
  packages+=(ccache)
  # `sinkc submit --slurm` against a real one-node Slurm (tests/slurm)
  packages+=(slurmctld slurmd slurm-client munge)
  # The report's browser test: Debian's chromium, driven over WebDriver by
  # Debian's chromedriver and selenium; Pillow reads the screenshots.
  packages+=(chromium chromium-driver python3-selenium python3-pil)
  # `sinkc lsp` through a real editor's LSP client (tests/editors/neovim_test.py)
  packages+=(neovim)
  # The C++ tree follows .clang-format (tests/style)
  packages+=(clang-format-19)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ ! -s data/builtin/default.jsonl ]]; then
  echo "setup: assembling the builtin corpus (data/builtin/default.jsonl)"
  /usr/bin/python3 scripts/build_corpus.py data/builtin/default.jsonl
fi
if ((large_corpus)) && [[ ! -s data/builtin/large.jsonl ]]; then
  echo "setup: assembling the large builtin corpus (data/builtin/large.jsonl, about half a minute)"
  /usr/bin/python3 scripts/build_corpus.py --large data/builtin/large.jsonl
fi

# Without --tests, only the two tools: the test suite and benchmarks are most of the build.
if ((tests)); then
  # The pip PyTorch 2.11 and transformers, in a virtual environment kept between runs (scripts/torch-venv.sh).
  venv=$(scripts/torch-venv.sh)
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKLAB_FUZZ=OFF -DSINKLAB_TESTS=ON \
    -DSINKLAB_UNITY_TESTS=ON -DSINKLAB_PYTHON="$venv/bin/python" > /dev/null
  ninja -C build
else
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKLAB_FUZZ=OFF > /dev/null
  ninja -C build sinkc sinkc-runtime
fi
