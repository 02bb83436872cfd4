// What a run measures of its model as it trains: the validation loss and the
// sink metrics (the measured part of a metrics.jsonl line) and, at the end,
// the attention maps for the report. Both run under the autocast the training
// steps run under (train.precision): a bf16 run is measured as it computes,
// and the measurement costs what a bf16 forward costs, not an fp32 one.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/data/batches.h"
#include "runtime/measurement/sink_costs.h"
#include "runtime/training/model.h"

namespace sink::rt {

// The validation loss over the first min(measure.sequences, 64) validation
// sequences, in chunks of 16, the sink metrics of measure.sequences
// measurement inputs, and what a sink costs on the same validation sequences
// (runtime/measurement/sink_costs.h): a metrics.jsonl line's measurements.
// `costs` keeps what the costs compile between evaluations; nullptr: this call's own.
nlohmann::json evaluate(Transformer& model, const Batches& batches, const RunConfig& cfg, SinkCosts* costs = nullptr);

// The attention of the heads with the largest alpha_1 on the first measurement
// sequence (at most 32 tokens, 4 heads), for the report's maps.
nlohmann::json attention_maps(Transformer& model, const Batches& batches, const RunConfig& cfg, bool bos);

}  // namespace sink::rt
