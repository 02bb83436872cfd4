#!/bin/bash
# Run folders from what `scripts/gpu-check.sh OUT --natural` brought back: OUT/natural_runs.tar.gz holds each
# run's folder (<run>-<hash>/ with plan.toml, summary.json, metrics.jsonl, losses.jsonl, log.txt; no
# checkpoints), unpacked into RUNS, the folder `sinkc diff`, `sinkc table` and `sinkc report` read.
#   scripts/gpu-results.sh OUT RUNS
#   build/sinkc table RUNS && build/sinkc report RUNS
set -euo pipefail
out=${1:?usage: scripts/gpu-results.sh OUT RUNS}
runs=${2:?usage: scripts/gpu-results.sh OUT RUNS}
archive=$out/natural_runs.tar.gz
[[ -f $archive ]] || { echo "gpu-results: no $archive" >&2; exit 1; }
mkdir -p "$runs"
# Only run folders, one level down: a damaged or foreign archive cannot write elsewhere.
listing=$(tar -tzf "$archive") || { echo "gpu-results: $archive is not a gzip'd tar" >&2; exit 1; }
if grep -qvE '^(\./)?([A-Za-z0-9._=-]+/)?([A-Za-z0-9._=-]+)?$' <<< "$listing" ||
  grep -qE '(^|/)\.\.(/|$)' <<< "$listing"; then
  echo "gpu-results: $archive holds paths other than run folders' files" >&2
  exit 1
fi
tar -xzf "$archive" -C "$runs"
found=0
for summary in "$runs"/*/summary.json; do
  [[ -f $summary ]] || continue
  echo "gpu-results: $(dirname "$summary")"
  found=$((found + 1))
done
((found)) || { echo "gpu-results: no run's summary.json in $archive" >&2; exit 1; }
