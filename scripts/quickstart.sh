#!/bin/bash
# Set up, then check and run the quickstart spec on the builtin corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/sinkc check specs/quickstart.sink
if [[ -x build/runtime/sinkc-runtime || -x build/sinkc-runtime ]]; then
  build/sinkc run specs/quickstart.sink --out runs/
else
  build/sinkc plan specs/quickstart.sink
fi
