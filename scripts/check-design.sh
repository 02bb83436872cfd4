#!/bin/bash
# Checks one attention design on every backend in a few minutes, the fast loop for a new design:
#   scripts/check-design.sh 'sigmoid(qk - log(n))' none
#   scripts/check-design.sh 'tanh(qk) + n / 8' pnorm 2
# SCORE is what a spec writes as attention.score, NORMALIZE a row of attention.normalize (default sum), P its
# parameter where it takes one. Builds what the check needs in build/ (configured by scripts/setup.sh --tests),
# then runs Design.OneDesignOnEveryBackend (tests/runtime/design_test.cpp): the reference path against the CPU
# JIT (float, double, central differences) and the CUDA kernels on the CPU emulation (float; bf16 tensor cores
# at d_head 64), causal, with a window, a prefix, K and V biases and ALiBi.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: scripts/check-design.sh SCORE [NORMALIZE [P]]   e.g. scripts/check-design.sh 'sigmoid(qk - log(n))' none" >&2
  exit 2
fi
if [ ! -f build/build.ninja ]; then
  echo "check-design: no build/ here; run scripts/setup.sh --tests first" >&2
  exit 2
fi
cmake --build build --target runtime_tests > /dev/null
export SINKLAB_DESIGN_SCORE="$1" SINKLAB_DESIGN_NORMALIZE="${2:-sum}" SINKLAB_DESIGN_P="${3:-1}"
# Compiled kernels stay in the build folder, as the test suite keeps them.
export SINKLAB_KERNEL_CACHE="${SINKLAB_KERNEL_CACHE:-$PWD/build/test-kernel-cache}"
build/tests/runtime_tests --gtest_filter='Design.OneDesignOnEveryBackend' --gtest_brief=1
