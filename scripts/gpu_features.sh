#!/bin/bash
# Sourced by the GPU scripts (gpu-check.sh, gpu-profile.sh).
# with_features [--unless-named] ENTRY...: SINKLAB_GPU_FEATURES (runtime/gpu_features.h: comma-separated names,
# name=off, name=MODE) with each ENTRY in place of what it said of that feature, the rest kept; --unless-named: only
# the ENTRYs whose feature it does not name yet (a choice the caller made stands).
with_features() {
  local unless_named=0 entry wanted asked=() out=()
  [[ ${1:-} == --unless-named ]] && unless_named=1 && shift
  IFS=', ' read -ra asked <<< "${SINKLAB_GPU_FEATURES:-}"
  for entry in "${asked[@]}"; do
    [[ -n $entry ]] || continue
    if ((!unless_named)); then
      for wanted; do [[ ${entry%%=*} == "${wanted%%=*}" ]] && continue 2; done
    fi
    out+=("$entry")
  done
  for wanted; do
    if ((unless_named)); then
      for entry in "${asked[@]}"; do [[ ${entry%%=*} == "${wanted%%=*}" ]] && continue 2; done
    fi
    out+=("$wanted")
  done
  (IFS=,; echo "${out[*]}")
}
