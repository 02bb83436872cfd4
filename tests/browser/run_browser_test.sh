#!/bin/bash
# ctest `browser_report`: writes a synthetic set of runs, renders their
# `sinkc report` in headless chromium and checks every chart drew
# (check_report.py, over WebDriver). A missing browser, driver or Python
# module is a failure, not a skip: scripts/setup.sh --tests installs them all
# from Debian's packages.
#   run_browser_test.sh SINKC RESULTS_FIXTURE WORK_DIR
set -euo pipefail
sinkc=$1 fixture=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)

command -v "${CHROMIUM:-/usr/bin/chromium}" > /dev/null || { echo "FAIL: chromium is not installed (scripts/setup.sh --tests installs it)"; exit 1; }
command -v "${CHROMEDRIVER:-/usr/bin/chromedriver}" > /dev/null || {
  echo "FAIL: chromedriver is not installed (Debian's chromium-driver; scripts/setup.sh --tests installs it)"
  exit 1
}
/usr/bin/python3 -c 'import selenium, PIL' 2> /dev/null || {
  echo "FAIL: python3-selenium or python3-pil is missing (scripts/setup.sh --tests installs them)"
  exit 1
}

rm -rf "$work"
mkdir -p "$work/runs" "$work/home"
"$fixture" "$work/runs"
"$sinkc" report "$work/runs" -o "$work/report.html" --title "sinklab report (browser test fixture)"
# chromium and chromedriver write caches and crash dumps under the home folder: keep them in the work folder.
export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config XDG_CACHE_HOME=$work/home/.cache
# 3 curves + 1 massive for the sweep, 4 + 1 for the experiments (Sink_*),
# 8 alpha_1 heatmaps and 1 alpha_* (k_bias).
/usr/bin/python3 "$here/check_report.py" "$work/report.html" "$work" 18
