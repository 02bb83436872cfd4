#!/bin/bash
# The NVPTX forward kernel against the reference path on a real GPU.
#   tests/gpu/check_on_gpu.sh prepare BUILD_DIR CASES_DIR   here: cases, PTX, sm_90 cubins
#   tests/gpu/check_on_gpu.sh run CASES_DIR                 on the GPU machine (CuPy)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  prepare)
    "$2/tests/ptx_fixtures" "$3"
    for c in "$3"/case*/; do
      /usr/lib/llvm-19/bin/llc -O3 -march=nvptx64 -mcpu=sm_90 -mattr=+ptx80 "$c/forward.ll" -o "$c/forward.ptx"
      ptxas -arch=sm_90 "$c/forward.ptx" -o "$c/forward.cubin"
    done
    echo "assembled $(ls "$3"/case*/forward.cubin | wc -l) kernels";;
  run)
    python3 "$here/check_ptx.py" "$2" "${3:-1e-4}";;
  *)
    echo "usage: $0 prepare BUILD_DIR CASES_DIR | run CASES_DIR [TOLERANCE]" >&2; exit 2;;
esac
