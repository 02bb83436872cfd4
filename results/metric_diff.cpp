#include "results/metric_diff.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace sink::results {
namespace {

std::string signed_number(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  return fmt::format("{:+.{}f}", v, decimals);
}

std::string plain_number(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "-";
}

// Element-wise mean of the contributing seeds' alpha_1 tables; empty when
// there is none or the seeds disagree on the shape.
std::vector<std::vector<double>> mean_alpha(const RunGroup& g, bool* partial) {
  std::vector<std::vector<double>> sum;
  int n = 0;
  for (const RunData* r : contributing_runs(g, partial)) {
    const auto& alpha = r->last()->alpha;
    if (alpha.empty()) continue;
    if (n == 0)
      sum = alpha;
    else if (alpha.size() != sum.size())
      return {};
    else
      for (size_t l = 0; l < alpha.size(); ++l) {
        if (alpha[l].size() != sum[l].size()) return {};
        for (size_t h = 0; h < alpha[l].size(); ++h) sum[l][h] += alpha[l][h];
      }
    ++n;
  }
  for (auto& row : sum)
    for (auto& v : row) v /= n;
  return sum;
}

std::string shape(const std::vector<std::vector<double>>& t) {
  return fmt::format("{} layer{} x {} heads", t.size(), t.size() == 1 ? "" : "s", t.empty() ? 0 : t[0].size());
}

void diff_alpha(RunDiff& d, size_t top) {
  bool pa = false, pb = false;
  auto a = mean_alpha(d.a.group, &pa);
  auto b = mean_alpha(d.b.group, &pb);
  if (a.empty() || b.empty()) {
    d.alpha_note = fmt::format("no alpha_1 to compare: {} has none yet", a.empty() ? "A" : "B");
    return;
  }
  if (a.size() != b.size() || a[0].size() != b[0].size()) {
    d.alpha_note = fmt::format("not comparable: A has {}, B {}", shape(a), shape(b));
    return;
  }
  for (size_t l = 0; l < a.size(); ++l)
    for (size_t h = 0; h < a[l].size(); ++h) d.alpha.push_back({l, h, a[l][h], b[l][h]});
  std::stable_sort(d.alpha.begin(), d.alpha.end(),
                   [](const AlphaMove& x, const AlphaMove& y) { return std::fabs(x.b - x.a) > std::fabs(y.b - y.a); });
  if (d.alpha.size() > top) d.alpha.resize(top);
  if (pa || pb) d.alpha_note = "from unfinished runs: values at their last evaluation";
}

std::string side_line(const DiffSide& s) {
  return fmt::format("{} ({}): {}", s.target, s.group.name, group_status(s.group));
}

}  // namespace

DataTable metric_table(const RunDiff& d) {
  using Shown = Column::Shown;
  DataTable t;
  // A row per metric: the unit is a column of its own, not the columns'.
  t.columns = {{"metric", "metric", "", false, false, Shown::DataOnly},
               {"label", "metric", "", false, false, Shown::Everywhere},
               {"unit", "unit", "", false, false, Shown::DataOnly},
               {"a", "A", "", true, true, Shown::Everywhere},
               {"a_n", "A seeds", "", true, false, Shown::DataOnly},
               {"b", "B", "", true, true, Shown::Everywhere},
               {"b_n", "B seeds", "", true, false, Shown::DataOnly},
               {"delta", "delta (B - A)", "", true, false, Shown::Everywhere},
               {"noise", "seed noise", "", true, false, Shown::Everywhere},
               {"beyond_noise", "beyond noise", "", false, false, Shown::DataOnly},
               {"verdict", "beyond noise?", "", false, false, Shown::Everywhere},
               // The reader formats star such a value instead.
               {"a_from_proxy", "A from proxy scores", "", false, false, Shown::DataOnly},
               {"b_from_proxy", "B from proxy scores", "", false, false, Shown::DataOnly}};
  for (const auto& m : d.metrics) {
    const int decimals = m.metric.decimals;
    Cell beyond = m.verdict == "yes"  ? Cell::of_flag(true, "yes")
                  : m.verdict == "no" ? Cell::of_flag(false, "no")
                                      : Cell::missing("");
    t.rows.push_back(
        {Cell::of_text(m.metric.id), Cell::of_text(m.metric.label), Cell::of_text(m.metric.unit),
         Cell::of_aggregate(m.a, decimals, true, true), Cell::of_number(static_cast<double>(m.a.n()), "", true),
         Cell::of_aggregate(m.b, decimals, true, true), Cell::of_number(static_cast<double>(m.b.n()), "", true),
         Cell::of_number(m.delta, signed_number(m.delta, decimals)),
         Cell::of_number(m.noise, plain_number(m.noise, decimals)), beyond, Cell::of_text(m.verdict),
         Cell::of_flag(m.a.proxy, ""), Cell::of_flag(m.b.proxy, "")});
  }
  t.notes = {kNoiseRule};
  return t;
}

namespace {

nlohmann::ordered_json aggregate_json(const Aggregate& a) {
  nlohmann::ordered_json j;
  j["n"] = a.n();
  j["mean"] = a.mean;  // NaN is written as null
  j["std"] = a.std;
  j["values"] = a.values;
  j["partial"] = a.partial;
  j["from_proxy"] = a.proxy;
  if (a.partial) j["step"] = a.step;
  if (!a.missing.empty()) j["missing"] = a.missing;
  return j;
}

nlohmann::ordered_json side_json(const DiffSide& s) {
  nlohmann::ordered_json j;
  j["target"] = s.target;
  j["name"] = s.group.name;
  j["status"] = group_status(s.group);
  j["sink_from_proxy"] = sink_from_proxy(s.group);
  j["runs"] = nlohmann::ordered_json::array();
  for (const auto& r : s.group.runs) {
    nlohmann::ordered_json run;
    run["name"] = r.plan.name;
    run["hash"] = r.plan.hash();
    run["dir"] = r.dir;
    run["status"] = status_name(r.status);
    if (!r.reason.empty()) run["reason"] = r.reason;
    run["step"] = r.last() ? r.last()->step : 0;
    run["steps"] = r.steps_total();
    j["runs"].push_back(run);
  }
  return j;
}

}  // namespace

double pooled_std(const Aggregate& a, const Aggregate& b) {
  const double df = static_cast<double>(a.n()) + static_cast<double>(b.n()) - 2;
  if (a.n() == 0 || b.n() == 0 || df < 1) return NAN;
  double ss = 0;
  if (a.n() > 1) ss += (a.n() - 1) * a.std * a.std;
  if (b.n() > 1) ss += (b.n() - 1) * b.std * b.std;
  return std::sqrt(ss / df);
}

RunDiff diff_runs(DiffSide a, DiffSide b, size_t top_alpha) {
  RunDiff d{std::move(a), std::move(b), {}, {}, {}, {}};
  d.plan = diff_plans(d.a.group.first().plan, d.b.group.first().plan);
  std::vector<const RunData*> all;
  for (const auto* side : {&d.a, &d.b})
    for (const auto& r : side->group.runs) all.push_back(&r);
  for (const auto& metric : available_metrics(all)) {
    MetricRow row{metric, aggregate(d.a.group, metric.id), aggregate(d.b.group, metric.id), NAN, NAN, ""};
    if (row.a.n() && row.b.n()) {
      row.delta = row.b.mean - row.a.mean;
      row.noise = pooled_std(row.a, row.b);
    }
    if (!row.a.n() || !row.b.n())
      row.verdict = "n/a";
    else if (row.a.partial || row.b.partial)
      row.verdict = "n/a (unfinished)";
    else if (!std::isfinite(row.noise))
      row.verdict = "n/a (1 seed)";
    else
      row.verdict = std::fabs(row.delta) > kNoiseFactor * row.noise ? "yes" : "no";
    d.metrics.push_back(std::move(row));
  }
  diff_alpha(d, top_alpha);
  return d;
}

std::string render_text(const RunDiff& d) {
  std::string out = fmt::format("A  {}\nB  {}\n\n", side_line(d.a), side_line(d.b));
  if (d.plan.empty())
    out += "plan: identical\n";
  else
    out += fmt::format("plan: {} field{} differ{}\n{}", d.plan.size(), d.plan.size() == 1 ? "" : "s",
                       d.plan.size() == 1 ? "s" : "", render_changes(d.plan));
  out += "\nmetrics at the last evaluation (mean ± std over seeds)\n" + metric_table(d).render(Format::Text);
  out += "\nalpha_1 (mean attention on token 1) moved most, A -> B:\n";
  for (const auto& m : d.alpha)
    out += fmt::format("  layer {} head {}: {:.3f} -> {:.3f} ({:+.3f})\n", m.layer, m.head, m.a, m.b, m.b - m.a);
  if (!d.alpha_note.empty()) out += "  (" + d.alpha_note + ")\n";
  return out;
}

std::string render_markdown(const RunDiff& d) {
  std::string out = "## sinkc diff\n\n";
  out += fmt::format("- **A**: `{}`\n- **B**: `{}`\n\n", side_line(d.a), side_line(d.b));
  out += "### Plan\n\n";
  if (d.plan.empty()) out += "Identical plans.\n";
  for (const auto& c : d.plan) out += fmt::format("- `{}`: `{}` → `{}`\n", c.path, c.a, c.b);
  out += "\n### Metrics at the last evaluation (mean ± std over seeds)\n\n" + metric_table(d).render(Format::Markdown);
  out += "\n### alpha_1 moved most\n\n";
  if (!d.alpha.empty()) {
    TextTable t;
    t.header = {"layer", "head", "A", "B", "delta"};
    t.right = {true, true, true, true, true};
    for (const auto& m : d.alpha)
      t.rows.push_back({std::to_string(m.layer), std::to_string(m.head), plain_number(m.a, 3), plain_number(m.b, 3),
                        signed_number(m.b - m.a, 3)});
    out += t.markdown();
  }
  if (!d.alpha_note.empty()) out += "\n_" + d.alpha_note + "_\n";
  return out;
}

std::string render(const RunDiff& d, Format f) {
  switch (f) {
    case Format::Text: return render_text(d);
    case Format::Markdown: return render_markdown(d);
    case Format::Json: return to_json(d).dump(2) + "\n";
    case Format::Csv:
    case Format::Latex: return metric_table(d).render(f);
  }
  return "";
}

nlohmann::ordered_json to_json(const RunDiff& d) {
  nlohmann::ordered_json j;
  j["a"] = side_json(d.a);
  j["b"] = side_json(d.b);
  j["plan"] = nlohmann::ordered_json::array();
  for (const auto& c : d.plan) j["plan"].push_back({{"path", c.path}, {"a", c.a}, {"b", c.b}});
  j["noise_rule"] = kNoiseRule;
  j["metrics"] = nlohmann::ordered_json::array();
  for (const auto& m : d.metrics) {
    nlohmann::ordered_json row;
    row["id"] = m.metric.id;
    row["label"] = m.metric.label;
    row["a"] = aggregate_json(m.a);
    row["b"] = aggregate_json(m.b);
    row["delta"] = m.delta;
    row["noise"] = m.noise;
    row["beyond_noise"] = m.verdict == "yes"  ? nlohmann::ordered_json(true)
                          : m.verdict == "no" ? nlohmann::ordered_json(false)
                                              : nlohmann::ordered_json(nullptr);
    row["verdict"] = m.verdict;
    j["metrics"].push_back(row);
  }
  j["alpha"] = nlohmann::ordered_json::array();
  for (const auto& m : d.alpha)
    j["alpha"].push_back({{"layer", m.layer}, {"head", m.head}, {"a", m.a}, {"b", m.b}, {"delta", m.b - m.a}});
  if (!d.alpha_note.empty()) j["alpha_note"] = d.alpha_note;
  return j;
}

}  // namespace sink::results
