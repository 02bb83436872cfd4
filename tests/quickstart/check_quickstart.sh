#!/bin/bash
# ctest quickstart_direction: the quickstart's spec at reduced size, the direction it claims. 500 steps and one
# seed a side (measured: softmax's Sink_1 74.75 % at step 500, 100 % at 750; sigmoid's 0 % at both, its spread
# over seeds 0-20 % only near step 250), read by the verdict the quickstart prints; then the verdict's other
# answer, on bars that overlap.
#   check_quickstart.sh SINKC SOURCE_DIR WORK_DIR
set -euo pipefail
sinkc=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
smaller=(--set train.steps=500 --set train.seeds=1 --set measure.every=500)
if ! "$sinkc" run "$src/specs/quickstart.sink" --out "$work/runs" --jobs 2 "${smaller[@]}" > "$work/run.log" 2>&1; then
  cat "$work/run.log"
  exit 1
fi
"$sinkc" table "$src/specs/quickstart.sink" --out "$work/runs" "${smaller[@]}" --format json > "$work/table.json"
python3 "$src/scripts/quickstart_verdict.py" "$work/table.json" quick_softmax quick_sigmoid | tee "$work/verdict.txt"
tr '\n' ' ' < "$work/verdict.txt" | grep -q "noise bars (mean ± one standard deviation) are apart"

# The report the quickstart writes: every run of the spec, and the train loss as finely as the runs logged it (every
# train.log_every = 10 steps: 50 points a run), not only at the measurements.
"$sinkc" report "$src/specs/quickstart.sink" --out "$work/runs" "${smaller[@]}" -o "$work/report.html"
python3 - "$work/report.html" <<'PY'
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
for run in ("quick_softmax", "quick_sigmoid"):
    assert run in html, f"{run} is not in the report"
start = html.index('data-chart="train_loss:')
points = html[start:html.index("</figure>", start)].count("<circle")
assert points >= 2 * 50, f"the train-loss chart has {points} points, not the logged losses' 100"
print(f"ok: the report shows both runs, {points} train-loss points")
PY

# Bars that overlap: exit 1, and the text says the run does not show the contrast.
cat > "$work/overlap.json" <<'JSON'
{"rows": [{"run": "quick_softmax", "seeds": 2, "sink_1": 30.0, "sink_1_std": 20.0, "valid_loss": 2.30},
          {"run": "quick_sigmoid", "seeds": 2, "sink_1": 12.0, "sink_1_std": 9.0, "valid_loss": 2.31}]}
JSON
set +e
python3 "$src/scripts/quickstart_verdict.py" "$work/overlap.json" quick_softmax quick_sigmoid > "$work/overlap.txt"
status=$?
set -e
cat "$work/overlap.txt"
[ "$status" -eq 1 ] || { echo "FAIL: overlapping bars exited $status, not 1"; exit 1; }
tr '\n' ' ' < "$work/overlap.txt" | grep -q "does not show the contrast" || { echo "FAIL: the overlap was not said"; exit 1; }
echo "ok: the quickstart's direction holds at 500 steps, and an overlap is reported as one"
