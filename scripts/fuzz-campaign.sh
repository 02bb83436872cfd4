#!/bin/bash
# The long parser fuzz campaign of docs/TESTING.md: parse_fuzz over RUNS
# inputs, with the dictionary, seeds and options of ctest's 30 s
# `parse_fuzz`, niced, split over WORKERS processes. New inputs join
# build-fuzz/tests/fuzz/corpus; crashes land in .../artifacts. Prints the
# campaign's size, duration, coverage and findings.
#   scripts/fuzz-campaign.sh [--fast] [RUNS] [WORKERS]   (default 1000000 2)
#   scripts/fuzz-campaign.sh --summary DIR                a campaign's numbers so far (or a finished one's)
# By default the fuzzer is build-fuzz's (ASan + UBSan). --fast fuzzes with
# build-fuzz-ubsan's (UBSan only, configured with
# -DSINKLAB_FUZZ_SANITIZERS=undefined; about 4x the inputs per second), then
# replays the whole corpus through the ASan build, so every input the
# campaign kept has run under ASan as well.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz=build-fuzz/tests/fuzz

# DIR holds start (epoch seconds), end once finished, corpus_before and
# artifacts_before.txt (the artifacts' names), and libFuzzer's fuzz-K.log of each worker.
summary() {
  local work=$1 logs=("$1"/fuzz-*.log)
  local end now executed
  now=$(date +%s)
  end=$(cat "$work/end" 2> /dev/null || echo "$now")
  # Finished workers print their total; running ones, their latest "#N" line.
  executed=$(for log in "${logs[@]}"; do
    grep -h 'stat::number_of_executed_units' "$log" || grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#'
  done | awk '{n += $NF} END {print n + 0}')
  local seconds=$((end - $(cat "$work/start")))
  echo "inputs executed: $executed in $seconds s with ${#logs[@]} workers ($((executed / (seconds > 0 ? seconds : 1)))/s)$([[ -f $work/end ]] || echo ', still running')"
  echo "coverage: $(cat "${logs[@]}" | grep -o 'cov: [0-9]*' | awk '{if ($2 > m) m = $2} END {print m + 0}') edges," \
       "$(cat "${logs[@]}" | grep -o 'ft: [0-9]*' | awk '{if ($2 > m) m = $2} END {print m + 0}') features;" \
       "corpus $(cat "$work/corpus_before") -> $(ls "$fuzz/corpus" | wc -l) inputs"
  # libFuzzer also keeps inputs slower than 10 s (slow-unit-*): worth a look, not failures.
  local new
  if [[ -f $work/artifacts_before.txt ]]; then
    new=$(ls "$fuzz/artifacts" | comm -13 "$work/artifacts_before.txt" -)
  else  # a campaign from before the list was kept: the newest files, by count
    new=$(ls -t "$fuzz/artifacts" | head -n $(($(ls "$fuzz/artifacts" | wc -l) - $(cat "$work/artifacts_before"))))
  fi
  echo "findings: $(printf '%s' "$new" | grep -cv '^slow-unit-' || true) crashes, leaks, timeouts or out-of-memory;" \
       "$(printf '%s' "$new" | grep -c '^slow-unit-' || true) slow inputs (over 10 s); in $fuzz/artifacts; logs in $work"
  grep -h -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|parse_fuzz: " "${logs[@]}" | sort | uniq -c || true
}

if [[ "${1:-}" == "--summary" ]]; then
  summary "$2"
  exit 0
fi
fuzzer=$fuzz/parse_fuzz
if [[ "${1:-}" == "--fast" ]]; then
  fuzzer=build-fuzz-ubsan/tests/fuzz/parse_fuzz
  shift
fi
runs=${1:-1000000} workers=${2:-2}
for binary in "$fuzz/parse_fuzz" "$fuzzer"; do
  [[ -x $binary ]] || { echo "no $binary: configure and build it as docs/TESTING.md says"; exit 2; }
done
fuzzer_path=$(realpath "$fuzzer")
work=$fuzz/campaign-$(date +%Y%m%d-%H%M%S)
mkdir -p "$work"
ls "$fuzz/corpus" | wc -l > "$work/corpus_before"
ls "$fuzz/artifacts" > "$work/artifacts_before.txt"
date +%s > "$work/start"
# libFuzzer's -jobs writes each worker's output to fuzz-K.log in the current folder.
# -timeout=30: the slowest legitimate input (a spec expanding to the 10,000-run
# limit) takes ~3.4 s of CPU under ASan, and over 10 s of wall time when the
# campaign shares the machine with a build; a hang still shows within 30 s.
(cd "$work" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  nice -n 10 "$fuzzer_path" -jobs="$workers" -workers="$workers" -runs=$((runs / workers)) -timeout=30 \
  -rss_limit_mb=2048 -print_final_stats=1 -dict=../sink.dict -artifact_prefix=../artifacts/ \
  ../corpus ../../../../stdlib ../../../../tests/front/golden > campaign.log 2>&1) || true
date +%s > "$work/end"
if [[ $fuzzer != "$fuzz/parse_fuzz" ]]; then
  # -runs=0 executes each corpus file once and stops at the first crash.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    nice -n 10 "$fuzz/parse_fuzz" -runs=0 -timeout=30 -rss_limit_mb=2048 -artifact_prefix="$fuzz/artifacts/" \
    "$fuzz/corpus" > "$work/fuzz-replay-asan.txt" 2>&1 && replay=passed || replay=FAILED
  echo "ASan replay of the corpus ($(ls "$fuzz/corpus" | wc -l) inputs): $replay, log in $work/fuzz-replay-asan.txt"
fi
summary "$work"
