// `sinkc table`: one row per run of a sweep (its seeds aggregated), the
// sweep axes (and a few other fields the runs differ in) as columns, then
// the metrics: the shape of the paper's tables.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "results/data_table.h"
#include "results/metrics.h"

namespace sink::results {

struct ResultTable {
  // Dotted paths: the sweep axes in sweep order, then up to three other
  // fields in which the runs differ.
  std::vector<std::string> axes;
  std::vector<MetricDef> metrics;
  struct Row {
    std::string name;                      // the run, without `.seed=K`
    std::vector<std::string> axis_values;  // the run's own values, language syntax
    std::vector<Value> axis_data;          // the same as values: numbers stay numbers in CSV and JSON
    std::string status;                    // short: completed, running (step 750/1500), diverged, 2/3 done...
    size_t seeds = 1;
    std::vector<Aggregate> values;  // one per metric
    bool sink_from_proxy = false;   // its Sink values from the paper's proxy scores
  };
  std::vector<Row> rows;

  // Columns: run, the axes, seeds, status, then each metric (mean, and `<id>_std` in the data formats); proxy
  // Sink values starred, or in the data formats a `sink_from_proxy` column where a metric reads attention.
  DataTable data_table() const;
  TextTable text_table() const { return data_table().reader_table(); }
};

// `metric_ids` empty: every metric the runs carry.
ResultTable build_table(const std::vector<RunGroup>& groups, const std::vector<std::string>& metric_ids);
// Orders runs found in a folder as a spec would: by spec file, sweep, then
// by each axis value (numbers numerically, so 2 comes before 10).
void sort_like_sweeps(std::vector<RunGroup>& groups);
std::string short_status(const RunGroup& group);

}  // namespace sink::results
