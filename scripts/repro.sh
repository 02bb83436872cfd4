#!/bin/bash
# Runs a chosen subset of the paper's experiments at CPU scale, then prints
# each row's table. Runs already completed are cached (same plan hash).
#
#   scripts/repro.sh                 every row below
#   scripts/repro.sh sigmoid biases  only these rows
#   JOBS=2 OUT=runs scripts/repro.sh # parallel runs (one thread each), output folder
#
# Rows (spec:run, all on the presets tiny / tiny_text):
#   sigmoid       softmax vs sigmoid without normalization          (Table 6)
#   biases        sink token, KV, K and V biases                      (Table 4)
#   weight_decay  gamma 0, 0.1, 0.5, 2                                (Table 2)
#   lr            lr 3e-3 against 7.5e-4 at equal steps               (Table 9)
#   text_kstar    natural text with and without a k* column           (Table 4)
#   random        random x1, random x1 and x2 on natural text         (section 5)
#   fixed         a fixed token at position 1 on natural text         (Table 10)
#   repeat        the softmax run measured on one repeated token      (Appendix B)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
OUT=${OUT:-runs}
SET=(--set train.threads=1)

declare -A ROWS=(
  [sigmoid]="table6_attention_operation:op_softmax table6_attention_operation:op_sigmoid_nonorm"
  [biases]="table4_attention_biases:bias_none table4_attention_biases:bias_sink_token table4_attention_biases:bias_kv table4_attention_biases:bias_k table4_attention_biases:bias_v"
  [weight_decay]="table2_weight_decay:weight_decay.weight_decay=0.0 table2_weight_decay:weight_decay.weight_decay=0.1 table2_weight_decay:weight_decay.weight_decay=0.5 table2_weight_decay:weight_decay.weight_decay=2.0"
  [lr]="table9_lr_steps:lr_reference table9_lr_steps:lr.lr=0.00075"
  [random]="sec5_random_tokens:random_none sec5_random_tokens:random_x1 sec5_random_tokens:random_x1_x2"
  [text_kstar]="text_key_bias:text_plain text_key_bias:text_k_bias"
  [fixed]="table10_fixed_token_position:fix_none table10_fixed_token_position:fix_at_1"
  [repeat]="table6_attention_operation:op_softmax"
)
ORDER=(sigmoid biases weight_decay lr text_kstar random fixed repeat)
selected=("$@")
[[ ${#selected[@]} -eq 0 ]] && selected=("${ORDER[@]}")

jobs_list=()
for row in "${selected[@]}"; do
  [[ -n "${ROWS[$row]:-}" ]] || { echo "repro: unknown row '$row' (rows: ${ORDER[*]})" >&2; exit 2; }
  for item in ${ROWS[$row]}; do jobs_list+=("$item"); done
done
printf '%s\n' "${jobs_list[@]}" | sort -u | xargs -P "$JOBS" -I{} bash -c '
  spec=${1%%:*}; run=${1#*:}
  build/sinkc run "specs/$spec.sink" --run "$run" --out "$2" --set train.threads=1 | tail -1' _ {} "$OUT"

for row in "${selected[@]}"; do
  echo; echo "== $row"
  if [[ $row == repeat ]]; then
    dir=$(ls -d "$OUT"/op_softmax-* | head -1)
    # One token repeated, no BOS: RoPE gives every position the same hidden state (Appendix B).
    build/sinkc measure "$dir" --input repeat --bos without | tail -3
    continue
  fi
  first=${ROWS[$row]%% *}
  # The whole spec's table: the runs of this row, and the others as `not run`.
  build/sinkc table "specs/${first%%:*}.sink" --out "$OUT" "${SET[@]}" \
    --metric sink_1 --metric sink_star --metric valid_loss --metric tokens_per_s --format markdown
done
