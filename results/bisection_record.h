// What `sinkc bisect` found, as it prints it (text, markdown, JSON) and as
// it keeps it beside the runs (OUT/bisections/A-vs-B.METRIC.json) for
// `sinkc report`: written and read here only.
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/plan_diff.h"
#include "results/text_table.h"

namespace sink::results {

// One difference between A and B: a field, or fields the checker ties together.
struct BisectionChange {
  std::string id;  // c1, c2, ...
  std::vector<FieldChange> fields;
  std::string text() const;  // "attention.score: exp(qk) -> sigmoid(qk) + attention.normalize: sum -> none"
};

// One configuration tried: A with some of B's changes.
struct BisectionTrial {
  std::vector<std::string> applied;  // change ids
  std::string side;                  // A, B, between, rejected, failed
  bool given = false;                // A or B themselves
  double mean = NAN, std = NAN;
  size_t seeds = 0;
  std::string value;  // as printed: "66.00 ± 1.20", or why there is none
  std::string note;   // why rejected or failed
};

struct BisectionSet {
  std::vector<std::string> changes;
  bool found = false, one_minimal = false;
};

struct BisectionRecord {
  std::string a, b;  // as the user named them
  std::string metric_id, metric_label;
  std::string noise_rule;
  std::vector<BisectionChange> changes;
  std::vector<BisectionTrial> trials;  // A and B first
  BisectionSet from_a, from_b;         // applied to A / taken from B
  bool no_single_change = false, budget_exhausted = false;
  size_t runs_trained = 0, runs_cached = 0;
  std::string attribution;  // the answer in one sentence
};

nlohmann::ordered_json to_json(const BisectionRecord& r);
// Throws ResultsError naming `where` and the key on anything else.
BisectionRecord bisection_from_json(const nlohmann::json& j, const std::string& where);

TextTable trials_table(const BisectionRecord& r);
std::string render_text(const BisectionRecord& r, bool markdown);
std::string render_html(const BisectionRecord& r);

// Kept as folder/bisections/NAME.METRIC.json, replacing an earlier one; returns the path.
std::string save_bisection(const BisectionRecord& r, const std::string& folder, const std::string& name);
// Every bisection kept in folder/bisections/, by file name; unreadable ones are listed in `skipped`.
std::vector<BisectionRecord> load_bisections(const std::string& folder, std::vector<std::string>* skipped = nullptr);

}  // namespace sink::results
