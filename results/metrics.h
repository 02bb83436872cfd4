// The metrics diff, table and report compare, read off a run's last
// evaluation, and their aggregation over the seeds of a run.
#pragma once
#include <string>
#include <vector>

#include "results/run_data.h"

namespace sink::results {

struct MetricDef {
  std::string id;     // sink_1, sink_star, valid_loss, train_loss, massive_max, tokens_per_s
  std::string label;  // "Sink_1 (%)": name and unit
  int decimals = 3;
  std::string unit;  // "%", "nats/token", "x", "tokens/s"; empty for a plain number
};

// Every metric the runs carry: Sink_k for the union of measured positions,
// Sink_* where any run has it, then the losses, massive activations, speed.
std::vector<MetricDef> available_metrics(const std::vector<const RunData*>& runs);
// `id` as typed by a user (sink_1, sink_star, valid_loss, ...); throws
// ResultsError naming the valid ids.
MetricDef metric_by_id(const std::string& id);
std::string metric_ids_help();

// NaN when the run has no such value (not evaluated yet, not measured).
double metric_value(const RunData& run, const std::string& id);
// The same at one evaluation: a point of the metric's curve.
double eval_metric_value(const Eval& e, const std::string& id);

// One number of an evaluation under its series name, for exporters that draw
// every curve (TensorBoard): the metric ids above for the headline numbers,
// `lr`, and `alpha_1/layer_L/head_H`, `alpha_star/layer_L/head_H`,
// `massive/layer_L`, `gate/layer_L` (0-based, as the report labels them) for the per-layer
// and per-head values the headline numbers summarize.
struct SeriesValue {
  std::string name;
  double value = NAN;
};
// Every series of `e` in a fixed order; NaN (not measured, or written as
// null) is left out, so a series only has points where it was measured.
std::vector<SeriesValue> eval_series(const Eval& e);

// A metric over the seeds of a run. Completed seeds count; when none has
// completed, the unfinished ones' latest values do, marked partial: those
// still going, stopped, or failed (a full disk, a crash: what they measured
// before is sound). Diverged seeds never count: their numbers are not results.
struct Aggregate {
  std::vector<double> values;
  double mean = NAN;
  double std = NAN;      // sample standard deviation (n - 1); NaN with one value
  bool partial = false;  // values from runs still going: at `step`, not the end
  int64_t step = 0;
  std::string missing;  // when there is no value: why ("not run", "diverged", ...)
  // From the paper's proxy scores in some seed (RunData::sink_from_proxy): a Sink value or alpha of
  // unnormalized attention, which the paper marks with an asterisk.
  bool proxy = false;
  size_t n() const { return values.size(); }
};
Aggregate aggregate(const RunGroup& group, const std::string& id);
// Metrics read off the attention a measurement sees (Sink_k, Sink_*, alpha_1): those the proxy scores stand in for.
bool read_from_attention(const std::string& id);
// Some run of the group has its Sink values from the proxy scores.
bool sink_from_proxy(const RunGroup& group);
// The seeds `aggregate` reads; *partial tells whether they are unfinished.
std::vector<const RunData*> contributing_runs(const RunGroup& group, bool* partial);

// "66.00", "66.00 ± 1.20", "0.00 (step 750)", or the reason there is none.
std::string format_aggregate(const Aggregate& a, int decimals);
// "completed", "3 seeds, completed", "2 of 3 seeds completed; seed 2 diverged: ...".
std::string group_status(const RunGroup& group);

}  // namespace sink::results
