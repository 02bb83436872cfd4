#include "results/table.h"

#include <algorithm>
#include <fmt/format.h>

namespace sink::results {

std::string short_status(const RunGroup& g) {
  size_t done = 0, stale = 0;
  for (const auto& r : g.runs) done += r.status == Status::Completed, stale += r.stale();
  // A stale run keeps its row and its numbers (what it measured when it was trained), marked.
  const std::string marked = stale == 0 ? "" : g.runs.size() == 1 ? ", stale" : fmt::format(", {} stale", stale);
  if (done == g.runs.size()) return "completed" + marked;
  if (g.runs.size() > 1) return fmt::format("{}/{} completed{}", done, g.runs.size(), marked);
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
      row.axis_data.push_back(it == fields.end() ? Value::none() : it->second);
    }
    row.status = short_status(g);
    row.seeds = g.runs.size();
    row.sink_from_proxy = sink_from_proxy(g);
    for (const auto& m : t.metrics) row.values.push_back(aggregate(g, m.id));
    t.rows.push_back(std::move(row));
  }
  return t;
}

namespace {

bool is_number(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Float; }

// An axis value as a cell: a number or a flag where the whole column holds numbers or flags (so that a data
// format's column has one type), its language syntax otherwise.
Cell axis_cell(const Value& v, const std::string& shown, Value::Kind column_kind) {
  if (v.kind == Value::Kind::None) return Cell::missing("");
  if (column_kind == Value::Kind::Bool) return Cell::of_flag(v.b, shown);
  if (column_kind == Value::Kind::Float || column_kind == Value::Kind::Int)
    return Cell::of_number(v.number(), shown, column_kind == Value::Kind::Int);
  return Cell::of_text(shown);
}

}  // namespace

DataTable ResultTable::data_table() const {
  DataTable t;
  t.columns.push_back({"run", "run", "", false, false});
  std::vector<Value::Kind> axis_kinds;
  for (size_t k = 0; k < axes.size(); ++k) {
    // One kind for the column: Int, Float (ints among floats too), Bool, or anything else as text.
    std::optional<Value::Kind> kind;
    for (const auto& r : rows) {
      const Value& v = r.axis_data[k];
      if (v.kind == Value::Kind::None) continue;
      if (!kind)
        kind = v.kind;
      else if (is_number(v) && (*kind == Value::Kind::Int || *kind == Value::Kind::Float))
        kind = v.kind == Value::Kind::Float ? v.kind : *kind;
      else if (v.kind != *kind)
        kind = Value::Kind::String;
    }
    axis_kinds.push_back(kind.value_or(Value::Kind::String));
    // Numbers right-aligned, as in the paper's tables; names and calls left.
    const bool numeric = axis_kinds.back() == Value::Kind::Int || axis_kinds.back() == Value::Kind::Float;
    t.columns.push_back({axes[k], axes[k], "", numeric, false});
  }
  t.columns.push_back({"seeds", "seeds", "", true, false});
  t.columns.push_back({"status", "status", "", false, false});
  for (const auto& m : metrics) t.columns.push_back({m.id, m.label, m.unit, true, true});
  const bool sinks = std::any_of(metrics.begin(), metrics.end(), [](auto& m) { return read_from_attention(m.id); });
  if (sinks) t.columns.push_back({"sink_from_proxy", "from proxy scores", "", false, false, Column::Shown::DataOnly});
  for (const auto& r : rows) {
    std::vector<Cell> cells = {Cell::of_text(r.name)};
    for (size_t k = 0; k < axes.size(); ++k)
      cells.push_back(axis_cell(r.axis_data[k], r.axis_values[k], axis_kinds[k]));
    cells.push_back(Cell::of_number(static_cast<double>(r.seeds), "", true));
    cells.push_back(Cell::of_text(r.status));
    // The status column already says why a row is unfinished or has no value: keep the cells short.
    for (size_t k = 0; k < metrics.size(); ++k)
      cells.push_back(Cell::of_aggregate(r.values[k], metrics[k].decimals, false, false));
    if (sinks) cells.push_back(Cell::of_flag(r.sink_from_proxy, r.sink_from_proxy ? "yes" : "no"));
    t.rows.push_back(std::move(cells));
  }
  return t;
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
