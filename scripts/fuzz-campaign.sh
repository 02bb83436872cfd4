#!/bin/bash
# The long parser fuzz campaign of docs/FUZZING.md: parse_fuzz (ASan + UBSan,
# build-fuzz) over RUNS inputs, with the dictionary, seeds and options of
# ctest's 30 s `parse_fuzz`, niced, split over WORKERS processes. New inputs
# join build-fuzz/tests/fuzz/corpus; crashes land in .../artifacts. Prints
# the campaign's size, duration, coverage and findings.
#   scripts/fuzz-campaign.sh [RUNS] [WORKERS]      (default 1000000 2)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000} workers=${2:-2}
fuzz=build-fuzz/tests/fuzz
[[ -x $fuzz/parse_fuzz ]] || { echo "no $fuzz/parse_fuzz: build it as scripts/test.sh does"; exit 2; }
work=$fuzz/campaign-$(date +%Y%m%d-%H%M%S)
mkdir -p "$work"
before=$(ls "$fuzz/corpus" | wc -l)
found_before=$(ls "$fuzz/artifacts" | wc -l)
start=$(date +%s)
# libFuzzer's -jobs writes each worker's output to fuzz-K.log in the current folder.
(cd "$work" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  nice -n 10 ../parse_fuzz -jobs="$workers" -workers="$workers" -runs=$((runs / workers)) -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -dict=../sink.dict -artifact_prefix=../artifacts/ \
  ../corpus ../../../../stdlib ../../../../tests/front/golden > campaign.log 2>&1) || true
seconds=$(($(date +%s) - start))
executed=$(cat "$work"/fuzz-*.log | awk '/stat::number_of_executed_units/ {n += $2} END {print n + 0}')
coverage=$(cat "$work"/fuzz-*.log | grep -o 'cov: [0-9]*' | awk '{if ($2 > m) m = $2} END {print m + 0}')
features=$(cat "$work"/fuzz-*.log | grep -o 'ft: [0-9]*' | awk '{if ($2 > m) m = $2} END {print m + 0}')
echo "inputs executed: $executed in ${seconds} s with $workers workers ($((executed / (seconds > 0 ? seconds : 1)))/s)"
echo "coverage: $coverage edges, $features features; corpus $before -> $(ls "$fuzz/corpus" | wc -l) inputs"
echo "findings: $(($(ls "$fuzz/artifacts" | wc -l) - found_before)) new in $fuzz/artifacts; logs in $work"
grep -h -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|parse_fuzz: " "$work"/fuzz-*.log | sort | uniq -c || true
