#!/bin/bash
# Set up (with the test-only packages), build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
ctest --test-dir build --output-on-failure -j2
# The plan library and kernel emitters alone, configured without ANTLR,
# LibTorch or LLVM: the layering the runtime's portability rests on.
cmake -S . -B build-plan -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKLAB_FRONTEND=OFF -DSINKLAB_RUNTIME=OFF > /dev/null
ninja -C build-plan plan_tests
ctest --test-dir build-plan --output-on-failure
# The parser fuzz target needs clang: its own build folder, where the front
# end, the results code and sinkc are built with ASan and UBSan; their tests
# run there again, sanitized, beside the 30 s fuzz run.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSINKLAB_FUZZ=ON -DSINKLAB_RUNTIME=OFF \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 > /dev/null
ninja -C build-fuzz parse_fuzz sinkc front_tests results_tests results_fixture
UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-fuzz --output-on-failure -j2 -L 'front|results|fuzz'
