#!/bin/bash
# The long parser fuzz campaign of docs/FUZZING.md: parse_fuzz (ASan + UBSan,
# build-fuzz) over RUNS inputs, with the dictionary, seeds and options of
# ctest's 30 s `parse_fuzz`, niced, split over WORKERS processes. New inputs
# join build-fuzz/tests/fuzz/corpus; crashes land in .../artifacts. Prints
# the campaign's size, duration, coverage and findings.
#   scripts/fuzz-campaign.sh [RUNS] [WORKERS]      (default 1000000 2)
#   scripts/fuzz-campaign.sh --summary DIR         a campaign's numbers so far (or a finished one's)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz=build-fuzz/tests/fuzz

# DIR holds start (epoch seconds), end once finished, corpus_before and
# artifacts_before, and libFuzzer's fuzz-K.log of each worker.
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
  echo "findings: $(($(ls "$fuzz/artifacts" | wc -l) - $(cat "$work/artifacts_before"))) new in $fuzz/artifacts; logs in $work"
  grep -h -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|parse_fuzz: " "${logs[@]}" | sort | uniq -c || true
}

if [[ "${1:-}" == "--summary" ]]; then
  summary "$2"
  exit 0
fi
runs=${1:-1000000} workers=${2:-2}
[[ -x $fuzz/parse_fuzz ]] || { echo "no $fuzz/parse_fuzz: build it as scripts/test.sh does"; exit 2; }
work=$fuzz/campaign-$(date +%Y%m%d-%H%M%S)
mkdir -p "$work"
ls "$fuzz/corpus" | wc -l > "$work/corpus_before"
ls "$fuzz/artifacts" | wc -l > "$work/artifacts_before"
date +%s > "$work/start"
# libFuzzer's -jobs writes each worker's output to fuzz-K.log in the current folder.
# -timeout=30: the slowest legitimate input (a spec expanding to the 10,000-run
# limit) takes ~3.4 s of CPU under ASan, and over 10 s of wall time when the
# campaign shares the machine with a build; a hang still shows within 30 s.
(cd "$work" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  nice -n 10 ../parse_fuzz -jobs="$workers" -workers="$workers" -runs=$((runs / workers)) -timeout=30 \
  -rss_limit_mb=2048 -print_final_stats=1 -dict=../sink.dict -artifact_prefix=../artifacts/ \
  ../corpus ../../../../stdlib ../../../../tests/front/golden > campaign.log 2>&1) || true
date +%s > "$work/end"
summary "$work"
