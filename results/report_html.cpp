#include "results/report_html.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "results/data_table.h"
#include "results/metrics.h"
#include "results/plan_diff.h"
#include "results/svg.h"
#include "results/table.h"

namespace sink::results {
namespace {

constexpr const char* kStyle = R"(
body { font-family: system-ui, 'DejaVu Sans', sans-serif; margin: 24px 32px; color: #222; background: #fafafa; }
h1 { margin-bottom: 4px; } h2 { margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { margin: 20px 0 8px; font-size: 16px; }
.meta { color: #555; margin-top: 0; }
nav a { margin-right: 16px; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
figure.chart { margin: 0; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 6px; }
figure.chart svg { display: block; }
figcaption { font-size: 12px; color: #555; max-width: 600px; padding: 4px 2px 0; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; white-space: nowrap; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #eee; padding: 1px 4px; border-radius: 3px; }
.note { color: #555; font-size: 13px; }
)";

// Runs overlaid in one set of charts: a sweep's points, or the experiments
// of one spec file.
struct ChartGroup {
  std::string title;
  std::string prefix;  // trimmed from legend names: the sweep's "name."
  std::vector<const RunData*> runs;
};

std::string sweep_of(const RunData& r) {
  return r.plan.sweep_point.empty() ? "" : r.plan.name.substr(0, r.plan.name.find('.'));
}

std::vector<ChartGroup> chart_groups(const std::vector<RunData>& runs) {
  std::vector<ChartGroup> groups;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (const auto& r : runs) {
    auto key = std::make_pair(r.plan.source, sweep_of(r));
    auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) {
      std::string where = r.plan.source.empty() ? "" : " (" + r.plan.source + ")";
      if (!key.second.empty())
        groups.push_back({"sweep " + key.second + where, key.second + ".", {}});
      else
        groups.push_back({r.plan.source.empty() ? "runs" : r.plan.source, "", {}});
    }
    groups[it->second].runs.push_back(&r);
  }
  return groups;
}

std::string legend_name(const RunData& r, const std::string& prefix) {
  std::string name = r.plan.name.rfind(prefix, 0) == 0 ? r.plan.name.substr(prefix.size()) : r.plan.name;
  if (r.status != Status::Completed) name += fmt::format(" ({})", status_name(r.status));
  if (r.stale()) name += " (stale)";
  return name;
}

// A run's tokens per training step (batch x context), read off its measurements: 0 where none says (a run that
// has not measured yet, or one recorded without the count).
double tokens_per_step(const RunData& r) {
  for (const auto& e : r.evals)
    if (e.step > 0 && e.tokens > 0) return static_cast<double>(e.tokens) / static_cast<double>(e.step);
  return 0;
}

// The curves' x axis: tokens seen where every run of the group says how many a step trains (a sink forms after
// so many tokens, and runs of different batch sizes or contexts compare there), training steps otherwise.
struct XAxis {
  std::string label;
  std::vector<double> per_step;  // x per training step, one per run of the group
};

XAxis x_axis_of(const ChartGroup& g) {
  XAxis tokens{"tokens seen", {}};
  for (const RunData* r : g.runs) {
    tokens.per_step.push_back(tokens_per_step(*r));
    if (tokens.per_step.back() <= 0) return {"training step", std::vector<double>(g.runs.size(), 1.0)};
  }
  return tokens;
}

// Seeds of one run share a color and differ by dash pattern.
std::vector<svg::Series> series_of(const ChartGroup& g, const XAxis& x, double (*value)(const Eval&, int), int arg) {
  std::vector<svg::Series> out;
  std::map<std::string, size_t> colors;
  std::map<std::string, int> dashes;
  for (size_t k = 0; k < g.runs.size(); ++k) {
    const RunData* r = g.runs[k];
    std::string base = seed_base(r->plan.name);
    size_t color = colors.emplace(base, colors.size()).first->second;
    svg::Series s{legend_name(*r, g.prefix), {}, color, dashes[base]++};
    for (const auto& e : r->evals) s.points.emplace_back(static_cast<double>(e.step) * x.per_step[k], value(e, arg));
    out.push_back(std::move(s));
  }
  return out;
}

// The training loss as finely as the run logged it (losses.jsonl, every train.log_every steps); for a run that
// logged none (one from before the file), the evaluations' means.
std::vector<svg::Series> train_loss_series(const ChartGroup& g, const XAxis& x, std::vector<svg::Series> means) {
  for (size_t k = 0; k < g.runs.size() && k < means.size(); ++k)
    if (!g.runs[k]->losses.empty()) {
      means[k].points.clear();
      for (const auto& [step, loss] : g.runs[k]->losses)
        means[k].points.emplace_back(static_cast<double>(step) * x.per_step[k], loss);
    }
  return means;
}

double train_loss(const Eval& e, int) { return e.train_loss; }
double valid_loss(const Eval& e, int) { return e.valid_loss; }
double sink_at(const Eval& e, int k) {
  auto it = e.sink.find(k);
  return it == e.sink.end() ? NAN : it->second;
}
double sink_star(const Eval& e, int) { return e.sink_star.value_or(NAN); }
double sink_logit(const Eval& e, int) { return eval_metric_value(e, "sink_logit"); }
double gate_mean(const Eval& e, int) { return eval_metric_value(e, "gate_mean"); }
double query_key_cos(const Eval& e, int) { return eval_metric_value(e, "q_k1_cos"); }

bool has_points(const std::vector<svg::Series>& series) {
  for (const auto& s : series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(y)) return true;
  return false;
}

std::string figure(const std::string& id, const std::string& svg_text, const std::string& caption) {
  return fmt::format("<figure class=\"chart\" data-chart=\"{}\">\n{}<figcaption>{}</figcaption>\n</figure>\n",
                     html_escape(id), svg_text, caption);
}

double eps_of(const RunData& r) {
  auto it = r.plan.fields.find("measure.eps");
  return it == r.plan.fields.end() ? NAN : it->second.number();
}

std::string curves_section(const std::vector<ChartGroup>& groups) {
  std::string out =
      "<section id=\"curves\">\n<h2>Training curves</h2>\n"
      "<p class=\"note\">x: tokens seen (training steps x batch x context; training steps for runs that do not "
      "record it). Seeds of a run share a color (other seeds dashed). "
      "Train loss is each logged step's (every train.log_every steps); in runs that logged none, the mean over the "
      "steps since the previous evaluation.</p>\n";
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const ChartGroup& g = groups[gi];
    const XAxis x = x_axis_of(g);
    auto curve = [&](double (*value)(const Eval&, int), int arg) { return series_of(g, x, value, arg); };
    std::string charts;
    auto add = [&](const std::string& id, const std::string& title, const std::string& y_label,
                   std::vector<svg::Series> s, double y_min, double y_max, const std::string& caption) {
      if (!has_points(s)) return;
      svg::LineChart c{title, x.label, y_label, std::move(s), y_min, y_max};
      charts += figure(fmt::format("{}:{}", id, gi), svg::line_chart(c), caption);
    };
    add("train_loss", "Train loss", "train loss (nats/token)", train_loss_series(g, x, curve(train_loss, 0)), NAN, NAN,
        "Cross-entropy on training batches.");
    add("valid_loss", "Validation loss", "valid loss (nats/token)", curve(valid_loss, 0), NAN, NAN,
        "Cross-entropy on held-out sequences.");
    std::set<int> positions;
    bool star = false;
    for (const RunData* r : g.runs)
      for (const auto& e : r->evals) {
        for (const auto& [k, v] : e.sink) positions.insert(k);
        star = star || e.sink_star.has_value();
      }
    const double eps = g.runs.empty() ? NAN : eps_of(*g.runs.front());
    // Runs whose Sink values are proxy scores: starred in the legend, the footnote in the caption.
    std::string proxy_note;
    auto starred = [&](std::vector<svg::Series> s) {
      for (size_t k = 0; k < s.size() && k < g.runs.size(); ++k)
        if (g.runs[k]->sink_from_proxy())
          s[k].name += "*", proxy_note = std::string(" ") + html_escape(kProxyNote) + ".";
      return s;
    };
    for (int k : positions) {
      auto series = starred(curve(sink_at, k));
      add(fmt::format("sink_{}", k), fmt::format("Sink_{} over training", k), fmt::format("Sink_{} (%)", k),
          std::move(series), 0, 100,
          fmt::format(
              "Percentage of (sequence, layer, head) triples whose mean attention on token {} exceeds eps = {}.{}", k,
              eps, proxy_note));
    }
    if (star) {
      auto series = starred(curve(sink_star, 0));
      add("sink_star", "Sink_* over training", "Sink_* (%)", std::move(series), 0, 100,
          "The same on the k* column or the sink token." + proxy_note);
    }
    add("sink_logit", "Sink_logit over training", "Sink_logit (%)", curve(sink_logit, 0), 0, 100,
        fmt::format("Percentage of (sequence, layer, head) triples whose sink logit takes more than eps = {} of a row.",
                    eps));
    add("gate_mean", "Mean attention gate", "mean gate", curve(gate_mean, 0), 0, 1,
        "Gated attention: the mean gate value over layers (near 0: heads switched off).");
    add("q_k1_cos", "Queries against token 1's key", "mean cos(q_t, k_1)", curve(query_key_cos, 0), -1, 1,
        "Mean cosine between the queries and token 1's key, over layers and heads (the paper's Section 3.1: a sink "
        "comes from a small angle, not a large norm).");
    out += fmt::format("<h3>{}</h3>\n", html_escape(g.title));
    out += charts.empty() ? "<p class=\"note\">No evaluation yet.</p>\n"
                          : "<div class=\"charts\">\n" + charts + "</div>\n";
  }
  return out + "</section>\n";
}

std::string massive_section(const std::vector<ChartGroup>& groups) {
  std::string out =
      "<section id=\"massive\">\n<h2>Massive activations</h2>\n"
      "<p class=\"note\">Per layer, at the last evaluation: the norm of the first token's hidden state over the mean "
      "norm of the other tokens' (|h_1| / mean |h_t&gt;1|). Seeds are averaged.</p>\n";
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const ChartGroup& g = groups[gi];
    svg::BarChart c{"Massive-activation ratio per layer", "layer", "|h_1| / mean |h_t>1| (x)", {}, {}};
    size_t layers = 0;
    std::vector<std::string> order;
    std::map<std::string, std::pair<std::vector<double>, int>> sums;  // seed base -> per-layer sums, count
    for (const RunData* r : g.runs) {
      if (!r->last() || r->last()->massive.empty()) continue;
      std::string base = seed_base(r->plan.name);
      if (!sums.count(base)) order.push_back(base);
      auto& [sum, n] = sums[base];
      const auto& m = r->last()->massive;
      sum.resize(std::max(sum.size(), m.size()), 0.0);
      for (size_t l = 0; l < m.size(); ++l) sum[l] += m[l];
      ++n;
      layers = std::max(layers, m.size());
    }
    if (order.empty()) continue;
    for (size_t l = 0; l < layers; ++l) c.categories.push_back(std::to_string(l));
    for (size_t k = 0; k < order.size(); ++k) {
      auto& [sum, n] = sums[order[k]];
      for (auto& v : sum) v /= n;
      std::string name = order[k].rfind(g.prefix, 0) == 0 ? order[k].substr(g.prefix.size()) : order[k];
      if (n > 1) name += fmt::format(" (mean of {} seeds)", n);
      c.bars.push_back({name, sum, k});
    }
    out += fmt::format("<h3>{}</h3>\n<div class=\"charts\">\n", html_escape(g.title));
    out += figure(fmt::format("massive:{}", gi), svg::bar_chart(c),
                  "A ratio far above 1 marks a massive activation on token 1.");
    out += "</div>\n";
  }
  return out + "</section>\n";
}

std::string maps_section(const std::vector<RunData>& runs) {
  std::string out =
      "<section id=\"maps\">\n<h2>Attention maps on one probe sequence</h2>\n"
      "<p class=\"note\">Attention (or proxy scores) of the heads with the largest alpha_1 on the first "
      "measurement sequence, rows = queries, columns = keys, written at the end of a run. A bright first "
      "column is a first-token sink.</p>\n<div class=\"charts\">\n";
  bool any = false;
  for (size_t k = 0; k < runs.size(); ++k)
    for (size_t m = 0; m < runs[k].maps.size(); ++m) {
      const AttentionMap& map = runs[k].maps[m];
      double hi = 1;
      for (const auto& row : map.A)
        for (double v : row) hi = std::max(hi, std::isfinite(v) ? v : 0.0);
      svg::Heatmap h{fmt::format("{}: layer {} head {}", runs[k].plan.name, map.layer, map.head),
                     "query i",
                     "key j",
                     "A",
                     map.A,
                     0,
                     hi};
      out += figure(fmt::format("map:{}:{}", k, m), svg::heatmap(h), "0-based positions");
      any = true;
    }
  if (!any) out += "<p class=\"note\">No run has finished with attention maps yet.</p>\n";
  return out + "</div>\n</section>\n";
}

std::string alpha_section(const std::vector<RunData>& runs) {
  std::string out =
      "<section id=\"alpha\">\n<h2>alpha_1 per layer and head</h2>\n"
      "<p class=\"note\">Mean attention that token 1 receives from the queries that see it, at the last evaluation "
      "(proxy scores for unnormalized attention); runs with a k* column or sink token also get a map of alpha_*. "
      "Same color scale, 0 to 1, in every map.</p>\n<div class=\"charts\">\n";
  std::string missing;
  for (size_t k = 0; k < runs.size(); ++k) {
    const RunData& r = runs[k];
    if (!r.last() || r.last()->alpha.empty()) {
      missing += (missing.empty() ? "" : ", ") + r.plan.name + " (" + status_name(r.status) + ")";
      continue;
    }
    const bool proxy = r.sink_from_proxy();
    svg::Heatmap h{r.plan.name + (proxy ? "*" : ""), "layer", "head", "alpha_1", r.last()->alpha, 0, 1};
    std::string caption = r.status == Status::Completed ? fmt::format("completed, step {}", r.last()->step)
                                                        : html_escape(r.status_text());
    if (proxy) caption += std::string(". ") + html_escape(kProxyNote);
    out += figure(fmt::format("alpha:{}", k), svg::heatmap(h), caption);
    // With a k* column or a sink token the sink may move there (Table 4).
    if (!r.last()->alpha_star.empty()) {
      svg::Heatmap star{r.plan.name + " (k*)", "layer", "head", "alpha_*", r.last()->alpha_star, 0, 1};
      out += figure(fmt::format("alpha_star:{}", k), svg::heatmap(star),
                    "Mean attention on the k* column or sink token. " + caption);
    }
  }
  out += "</div>\n";
  if (!missing.empty()) out += "<p class=\"note\">No alpha_1 yet: " + html_escape(missing) + ".</p>\n";
  return out + "</section>\n";
}

std::string plan_section(const std::vector<RunData>& runs) {
  std::string out = "<section id=\"plans\">\n<h2>Plan differences</h2>\n";
  if (runs.size() < 2) return out + "<p class=\"note\">One run: nothing to compare.</p>\n</section>\n";
  const RunData& ref = runs.front();
  out += fmt::format(
      "<p>Every field that differs from the first run, <code>{}</code> ({}), in the language's syntax.</p>\n",
      html_escape(ref.plan.name), html_escape(ref.plan.hash().substr(0, 8)));
  TextTable t;
  t.header = {"run", "field", ref.plan.name, "this run"};
  for (size_t k = 1; k < runs.size(); ++k) {
    auto changes = diff_plans(ref.plan, runs[k].plan);
    if (changes.empty()) t.rows.push_back({runs[k].plan.name, "(identical plan)", "", ""});
    for (const auto& c : changes) t.rows.push_back({runs[k].plan.name, c.path, c.a, c.b});
  }
  return out + t.html() + "</section>\n";
}

}  // namespace

std::string render_report(const std::vector<RunData>& runs, const ReportOptions& options) {
  auto groups = chart_groups(runs);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", html_escape(options.title), kStyle);
  out += fmt::format("<h1>{}</h1>\n", html_escape(options.title));
  std::string targets;
  for (const auto& t : options.targets) targets += (targets.empty() ? "" : ", ") + html_escape(t);
  out += fmt::format("<p class=\"meta\">{} run{}{}. Generated by <code>sinkc report</code>.</p>\n", runs.size(),
                     runs.size() == 1 ? "" : "s", targets.empty() ? "" : " from " + targets);
  out +=
      "<nav><a href=\"#runs\">Runs</a><a href=\"#curves\">Curves</a><a href=\"#massive\">Massive activations</a>"
      "<a href=\"#alpha\">alpha_1 heatmaps</a><a href=\"#maps\">Attention maps</a><a href=\"#plans\">Plan "
      "differences</a></nav>\n";

  auto table = build_table(group_seeds(runs), {});
  out +=
      "<section id=\"runs\">\n<h2>Runs</h2>\n<p class=\"note\">Last evaluation of each run; seeds of a run as mean ± "
      "std.</p>\n";
  out += table.text_table().html() + "</section>\n";
  out += curves_section(groups);
  out += massive_section(groups);
  out += alpha_section(runs);
  out += maps_section(runs);
  out += plan_section(runs);
  if (!options.bisections.empty()) {
    out +=
        "<section id=\"bisections\">\n<h2>Bisections</h2>\n<p class=\"note\">Which of the fields two runs differ in "
        "move a metric (<code>sinkc bisect</code>): every configuration tried, and the answer.</p>\n";
    for (const auto& b : options.bisections) out += render_html(b);
    out += "</section>\n";
  }
  out +=
      "<section id=\"not-here\">\n<h2>Not in this report</h2>\n<p class=\"note\">Attention maps of single heads on a "
      "probe "
      "sequence need the trained model (LibTorch), which this torch-free report does not load: "
      "<code>sinkc measure RUN</code> prints alpha per head from a run's checkpoint.</p>\n</section>\n";
  return out + "</body>\n</html>\n";
}

}  // namespace sink::results
