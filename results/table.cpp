#include "results/table.h"

#include <algorithm>
#include <fmt/format.h>

namespace sink::results {

std::string short_status(const RunGroup& g) {
  size_t done = 0;
  for (const auto& r : g.runs) done += r.status == Status::Completed;
  if (done == g.runs.size()) return "completed";
  if (g.runs.size() > 1) return fmt::format("{}/{} completed", done, g.runs.size());
  const RunData& r = g.first();
  if (r.status == Status::Running || r.status == Status::Stopped || r.status == Status::Failed)
    return fmt::format("{} (step {}/{})", status_name(r.status), r.last() ? r.last()->step : 0, r.steps_total());
  return status_name(r.status);
}

// Fields the runs do not all share, beyond the sweep axes: the knobs of
// experiments set beside a sweep (table 9's lr x steps rows). The seed and
// the seed count are not: seeds are aggregated into a row, counted in its own
// column.
std::vector<std::string> fields_that_differ(const std::vector<RunGroup>& groups, const std::vector<std::string>& axes) {
  std::vector<std::string> out;
  if (groups.size() < 2) return out;
  for (const auto& [path, value] : groups.front().first().plan.fields) {
    if (path == "train.seed" || path == "train.seeds" || std::find(axes.begin(), axes.end(), path) != axes.end())
      continue;
    for (const auto& g : groups) {
      const auto& fields = g.first().plan.fields;
      if (auto it = fields.find(path); it == fields.end() || !(it->second == value)) {
        out.push_back(path);
        break;
      }
    }
  }
  return out;
}

ResultTable build_table(const std::vector<RunGroup>& groups, const std::vector<std::string>& metric_ids) {
  ResultTable t;
  for (const auto& g : groups)
    for (const auto& [path, v] : g.first().plan.sweep_point)
      if (std::find(t.axes.begin(), t.axes.end(), path) == t.axes.end()) t.axes.push_back(path);
  // A few more columns read well; more (runs of unrelated specs) would not.
  constexpr size_t kMostExtraColumns = 3;
  if (auto extra = fields_that_differ(groups, t.axes); extra.size() <= kMostExtraColumns)
    t.axes.insert(t.axes.end(), extra.begin(), extra.end());
  if (metric_ids.empty()) {
    std::vector<const RunData*> all;
    for (const auto& g : groups)
      for (const auto& r : g.runs) all.push_back(&r);
    t.metrics = available_metrics(all);
  } else {
    for (const auto& id : metric_ids) t.metrics.push_back(metric_by_id(id));
  }
  for (const auto& g : groups) {
    ResultTable::Row row;
    row.name = g.name;
    // Each run's own value, also where it is not a point of that sweep.
    for (const auto& axis : t.axes) {
      const auto& fields = g.first().plan.fields;
      auto it = fields.find(axis);
      row.axis_values.push_back(it == fields.end() ? "" : it->second.str());
    }
    row.status = short_status(g);
    row.seeds = g.runs.size();
    for (const auto& m : t.metrics) row.values.push_back(aggregate(g, m.id));
    t.rows.push_back(std::move(row));
  }
  return t;
}

TextTable ResultTable::text_table() const {
  TextTable t;
  t.header.push_back("run");
  t.right.push_back(false);
  for (size_t k = 0; k < axes.size(); ++k) {
    // Numbers right-aligned, as in the paper's tables; names and calls left.
    bool numeric = true;
    for (const auto& r : rows)
      numeric = numeric &&
                (r.axis_values[k].empty() || r.axis_values[k].find_first_not_of("0123456789.e+-") == std::string::npos);
    t.header.push_back(axes[k]);
    t.right.push_back(numeric);
  }
  t.header.push_back("seeds"), t.right.push_back(true);
  t.header.push_back("status"), t.right.push_back(false);
  for (const auto& m : metrics) t.header.push_back(m.label), t.right.push_back(true);
  for (const auto& r : rows) {
    std::vector<std::string> cells = {r.name};
    cells.insert(cells.end(), r.axis_values.begin(), r.axis_values.end());
    cells.push_back(std::to_string(r.seeds));
    cells.push_back(r.status);
    for (size_t k = 0; k < metrics.size(); ++k) {
      // The status column already says why a row is unfinished or has no
      // value: keep the cells short.
      Aggregate v = r.values[k];
      v.partial = false;
      cells.push_back(v.values.empty() ? "-" : format_aggregate(v, metrics[k].decimals));
    }
    t.rows.push_back(std::move(cells));
  }
  return t;
}

nlohmann::ordered_json ResultTable::json() const {
  nlohmann::ordered_json j;
  j["axes"] = axes;
  j["metrics"] = nlohmann::ordered_json::array();
  for (const auto& m : metrics) j["metrics"].push_back({{"id", m.id}, {"label", m.label}});
  j["rows"] = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json row;
    row["run"] = r.name;
    nlohmann::ordered_json point = nlohmann::ordered_json::object();
    for (size_t k = 0; k < axes.size(); ++k) point[axes[k]] = r.axis_values[k];
    row["sweep_point"] = point;
    row["seeds"] = r.seeds;
    row["status"] = r.status;
    nlohmann::ordered_json values = nlohmann::ordered_json::object();
    for (size_t k = 0; k < metrics.size(); ++k) {
      const Aggregate& a = r.values[k];
      nlohmann::ordered_json v = {{"mean", a.mean}, {"std", a.std}, {"n", a.n()}};
      if (a.partial) v["step"] = a.step;
      if (!a.missing.empty()) v["missing"] = a.missing;
      values[metrics[k].id] = v;
    }
    row["values"] = values;
    j["rows"].push_back(row);
  }
  return j;
}

namespace {

// Compares axis values the way a reader expects: numbers by value.
int compare_values(const Value& a, const Value& b) {
  bool na = a.kind == Value::Kind::Int || a.kind == Value::Kind::Float;
  bool nb = b.kind == Value::Kind::Int || b.kind == Value::Kind::Float;
  if (na && nb) return a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
  if (na != nb) return na ? -1 : 1;
  return a.str().compare(b.str());
}

std::string sweep_name(const RunGroup& g) {
  const std::string& n = g.name;
  return g.first().plan.sweep_point.empty() ? "" : n.substr(0, n.find('.'));
}

}  // namespace

void sort_like_sweeps(std::vector<RunGroup>& groups) {
  std::stable_sort(groups.begin(), groups.end(), [](const RunGroup& x, const RunGroup& y) {
    const Plan& a = x.first().plan;
    const Plan& b = y.first().plan;
    if (a.source != b.source) return a.source < b.source;
    if (sweep_name(x) != sweep_name(y)) return sweep_name(x) < sweep_name(y);
    if (a.sweep_point.empty() || b.sweep_point.empty()) return x.name < y.name;
    for (size_t k = 0; k < a.sweep_point.size() && k < b.sweep_point.size(); ++k) {
      if (a.sweep_point[k].first != b.sweep_point[k].first) return a.sweep_point[k].first < b.sweep_point[k].first;
      if (int c = compare_values(a.sweep_point[k].second, b.sweep_point[k].second); c != 0) return c < 0;
    }
    return x.name < y.name;
  });
}

}  // namespace sink::results
