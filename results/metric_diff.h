// `sinkc diff A B`: which knob changed (the plan diff), which metric moved
// and whether the move is larger than seed noise, and which heads' alpha_1
// moved most. Built once, printed as text, markdown, JSON, CSV or LaTeX.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/data_table.h"
#include "results/metrics.h"
#include "results/plan_diff.h"

namespace sink::results {

// The noise rule, stated in every output so that a reader knows what
// "beyond noise" means. The noise of a metric is the pooled standard
// deviation of the two runs' seeds; it needs a second seed on one side.
inline constexpr double kNoiseFactor = 2.0;
inline constexpr const char* kNoiseRule =
    "seed noise = pooled standard deviation of the seeds of A and B; a delta is beyond noise when |delta| > 2 x noise";

struct DiffSide {
  std::string target;  // as the user named it: a run directory, or SPEC:RUN
  RunGroup group;
};

struct MetricRow {
  MetricDef metric;
  Aggregate a, b;
  double delta = NAN;   // mean B - mean A
  double noise = NAN;   // pooled seed standard deviation
  std::string verdict;  // "yes", "no", or "n/a (why)"
};

struct AlphaMove {
  size_t layer = 0, head = 0;
  double a = NAN, b = NAN;
};

struct RunDiff {
  DiffSide a, b;
  std::vector<FieldChange> plan;
  std::vector<MetricRow> metrics;
  std::vector<AlphaMove> alpha;  // largest |b - a| first
  std::string alpha_note;        // why `alpha` is empty, or that it is partial
};

// Pooled sample standard deviation of two sets of seeds; NaN when neither
// side has two values.
double pooled_std(const Aggregate& a, const Aggregate& b);
RunDiff diff_runs(DiffSide a, DiffSide b, size_t top_alpha = 5);

// The metric rows: metric, A, B, delta, seed noise, beyond noise?; the data formats add the metric's id and unit,
// `a_std`/`b_std` and the seed counts, and `beyond_noise` as true, false or null.
DataTable metric_table(const RunDiff& d);

std::string render_text(const RunDiff& d);
std::string render_markdown(const RunDiff& d);
nlohmann::ordered_json to_json(const RunDiff& d);
// text and markdown: the whole diff; json: to_json; csv and latex: one table, metric_table's.
std::string render(const RunDiff& d, Format f);

}  // namespace sink::results
