#!/bin/bash
# ctest `browser_report`: writes a synthetic set of runs, renders their
# `sinkc report` in headless chromium and checks every chart drew
# (check_report.mjs). A missing browser or node module is a failure, not a
# skip: CI installs both (scripts/setup.sh --tests, scripts/test.sh).
#   run_browser_test.sh SINKC RESULTS_FIXTURE WORK_DIR
set -euo pipefail
sinkc=$1 fixture=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)

command -v "${CHROMIUM:-/usr/bin/chromium}" > /dev/null || { echo "FAIL: chromium is not installed (scripts/setup.sh --tests installs it)"; exit 1; }
command -v node > /dev/null || { echo "FAIL: node is not installed (scripts/setup.sh --tests installs it)"; exit 1; }
[[ -d "$here/node_modules/playwright-core" ]] || {
  echo "FAIL: playwright-core is missing: npm ci --prefix tests/browser (scripts/test.sh runs it)"
  exit 1
}

rm -rf "$work"
mkdir -p "$work/runs"
"$fixture" "$work/runs"
"$sinkc" report "$work/runs" -o "$work/report.html" --title "sinklab report (browser test fixture)"
# 3 curves + 1 massive for the sweep, 4 + 1 for the experiments (Sink_*),
# 8 alpha_1 heatmaps and 1 alpha_* (k_bias).
node "$here/check_report.mjs" "$work/report.html" "$work" 18
