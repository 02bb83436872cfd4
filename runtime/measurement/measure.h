// Sink metrics (PAPER-FACTS.md): alpha_k^{l,h} = mean attention that token k
// receives from the queries that can see it; Sink_k^eps = percentage of
// (sequence, layer, head) triples with alpha_k > eps; Sink_* the same on the
// k* column or sink token; the massive-activation ratio per layer.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "runtime/data/batches.h"
#include "runtime/interop/hf_model.h"
#include "runtime/measurement/outliers.h"
#include "runtime/training/model.h"

namespace sink::rt {

struct SinkReport {
  std::map<int64_t, double> sink;                     // position k (1-based) -> Sink_k^eps in %
  double sink_star = -1;                              // Sink_* in %, -1 when there is no extra column
  std::vector<std::vector<double>> alpha;             // [layer][head] mean alpha_1 (first measured position)
  std::vector<std::vector<double>> alpha_star;        // [layer][head] mean alpha_*, when present
  std::vector<double> massive;                        // per layer: |h_1| / mean_{t>1} |h_t|
  std::vector<double> gate;                           // per layer: mean gate value of a gated model
  double sink_logit = -1;                             // Sink_logit^eps in %, -1 without a sink logit
  std::vector<std::vector<double>> sink_logit_share;  // [layer][head] its mean share of a row
  std::vector<double> max_activation;                 // per layer: max |h| over tokens and channels
  // [layer][head], the first token's geometry (runtime/measurement/geometry.h)
  std::vector<std::vector<double>> key_norm_ratio, value_norm_ratio, query_key_cos;
  // per layer, with measure.outliers: every value of the residual stream (as max_activation reads it) and of the
  // attention's output (what it adds to the stream)
  std::vector<Moments> residual, attention_output;
  int64_t sequences = 0;
  bool sink_from_proxy = false;  // sink and alpha from the paper's proxy scores (plan/normalizers.h)
};

// attention: per layer [N, H, T, S] metric attention; S = T, or T + 1 with the
// extra column first. allowed: [T, S] pairs the mask permits. Positions are
// 1-based over the T query positions.
SinkReport sink_metrics(const std::vector<torch::Tensor>& attention, const torch::Tensor& allowed,
                        const std::vector<int64_t>& positions, double eps, bool extra_column);

// Runs the model on the measurement inputs and computes everything; the outliers with `outliers`.
SinkReport measure_model(Transformer& model, const torch::Tensor& inputs, const std::vector<int64_t>& positions,
                         double eps, bool massive, bool outliers = false);

// The same for a Hugging Face checkpoint (causal attention, no extra column),
// one layer at a time so that only one layer's attention is ever held.
SinkReport measure_hf_model(const HfModel& model, const torch::Tensor& inputs, const std::vector<int64_t>& positions,
                            double eps);

// From per layer shares [N, H, T] of the sink logit (queries from first_query
// on): Sink_logit^eps (% of sequence x layer x head whose mean share > eps)
// and the mean share per layer and head.
void sink_logit_metrics(const std::vector<torch::Tensor>& shares, int64_t first_query, double eps, SinkReport& r);

// |h_1| / mean_{t>1} |h_t| (l2 norms), averaged over sequences; hidden [N, T, d].
double massive_ratio(const torch::Tensor& hidden);

// Reports of disjoint sequence chunks of one measurement as one, weighted by
// their sequence counts.
SinkReport combine_chunks(const std::vector<SinkReport>& parts);

// The report under the names metrics.jsonl, summary.json and `sinkc measure
// --format json` share (plan/run_record.h). Full double precision.
nlohmann::json report_json(const SinkReport& r);

}  // namespace sink::rt
