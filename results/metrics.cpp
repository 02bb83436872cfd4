#include "results/metrics.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <set>

#include "plan/run_record.h"

namespace sink::results {
namespace {

const std::vector<MetricDef>& fixed_metrics() {
  static const std::vector<MetricDef> m = {
      {"sink_star", "Sink_* (%)", 2, "%"},
      // Sink_1 counts heads past eps; this mean shows how far from eps they sit.
      {"alpha_1", "mean alpha_1 (layers x heads)", 3, ""},
      {"valid_loss", "valid loss (nats/token)", 4, "nats/token"},
      {"train_loss", "final train loss (nats/token)", 4, "nats/token"},
      {"massive_max", "max massive-activation ratio (x)", 2, "x"},
      // Gated attention: the mean gate over layers (the gated-attention paper reports gate sparsity).
      {"gate_mean", "mean attention gate", 3, ""},
      // A sink logit's own sink: heads whose logit takes more than eps of a row.
      {"sink_logit", "Sink_logit (%)", 2, "%"},
      {"max_activation", "max |activation|", 2, ""},
      // Section 3.1's geometry of token 1, means over layers x heads.
      {"k1_norm_ratio", "|k_1| / mean |k_t|", 3, ""},
      {"v1_norm_ratio", "|v_1| / mean |v_t|", 3, ""},
      {"q_k1_cos", "mean cos(q_t, k_1)", 3, ""},
      // Activation outliers (runtime/measurement/outliers.h): the largest over layers.
      {"kurtosis_max", "max kurtosis (residual)", 2, ""},
      {"attention_output_max", "max |attention out|", 2, ""},
      {"attention_kurtosis_max", "max kurtosis (attention out)", 2, ""},
      {"tokens_per_s", "tokens/s", 0, "tokens/s"},
  };
  return m;
}

MetricDef sink_metric(int k) { return {fmt::format("sink_{}", k), fmt::format("Sink_{} (%)", k), 2, "%"}; }

// What a sink costs (runtime/measurement/sink_costs.h), one metric per measured setting. The windowed and quantized
// losses as gaps over valid_loss: the same model on the same sequences, so a paired difference, then over seeds.
constexpr const char* kWindowedGap = "windowed_gap_";
constexpr const char* kQuantizedGap = "quantized_gap_";
constexpr const char* kLongerLoss = "longer_loss_";
MetricDef windowed_metric(int kept) {
  return {fmt::format("{}{}", kWindowedGap, kept), fmt::format("window gap, {} kept (nats)", kept), 4, "nats/token"};
}
MetricDef quantized_metric(const std::string& setting) {
  std::string upper = setting;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return {kQuantizedGap + setting, fmt::format("{} gap (nats)", upper), 4, "nats/token"};
}
MetricDef longer_metric(int factor) {
  return {fmt::format("{}{}", kLongerLoss, factor), fmt::format("loss at {}x context", factor), 4, "nats/token"};
}

// The whole number after `prefix` in id (at most 6 digits), or nullopt.
std::optional<int> number_after(const std::string& id, const char* prefix) {
  const std::string p = prefix;
  if (id.rfind(p, 0) != 0) return std::nullopt;
  const std::string digits = id.substr(p.size());
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  return std::stoi(digits);
}

// "w8a8": bits for weights and inputs.
bool is_quantization_setting(const std::string& s) {
  const auto a = s.find('a');
  auto digits = [](const std::string& d) {
    return !d.empty() && d.size() < 3 &&
           std::all_of(d.begin(), d.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  return s.size() > 3 && s[0] == 'w' && a != std::string::npos && digits(s.substr(1, a - 1)) && digits(s.substr(a + 1));
}

double largest(const std::vector<double>& values) {
  double m = NAN;
  for (double v : values)
    if (std::isfinite(v)) m = std::isnan(m) ? v : std::max(m, v);
  return m;
}

int64_t seed_number(const RunData& r) {
  auto it = r.plan.fields.find("train.seed");
  return it == r.plan.fields.end() ? 0 : it->second.i;
}

}  // namespace

std::vector<MetricDef> available_metrics(const std::vector<const RunData*>& runs) {
  std::set<int> positions, kept, factors;
  std::set<std::string> quantized;
  bool star = false, gated = false;
  for (const RunData* r : runs) {
    for (const auto& e : r->evals) {
      for (const auto& [k, v] : e.sink) positions.insert(k);
      for (const auto& [k, v] : e.windowed_loss) kept.insert(k);
      for (const auto& [k, v] : e.quantized_loss) quantized.insert(k);
      for (const auto& [k, v] : e.longer_context_loss) factors.insert(k);
      star = star || e.sink_star.has_value();
      gated = gated || !e.gate.empty();
    }
    // A run not evaluated yet still says what it will measure.
    if (auto it = r->plan.fields.find("measure.positions"); it != r->plan.fields.end())
      for (const auto& v : it->second.items) positions.insert(static_cast<int>(v.i));
  }
  std::vector<MetricDef> out;
  for (int k : positions) out.push_back(sink_metric(k));
  // The paper's metrics always; the others when some run measured them.
  static const std::set<std::string> when_measured = {
      "sink_logit", "max_activation", "k1_norm_ratio",        "v1_norm_ratio",
      "q_k1_cos",   "kurtosis_max",   "attention_output_max", "attention_kurtosis_max"};
  for (const auto& m : fixed_metrics()) {
    bool offered = m.id == "sink_star" ? star : m.id == "gate_mean" ? gated : !when_measured.count(m.id);
    for (const RunData* r : runs)
      for (const auto& e : r->evals)
        offered = offered || (when_measured.count(m.id) && !std::isnan(eval_metric_value(e, m.id)));
    if (offered) out.push_back(m);
  }
  // What a sink costs, after the losses they are gaps over (tokens/s stays last).
  const auto speed = out.end() - (out.empty() || out.back().id != "tokens_per_s" ? 0 : 1);
  std::vector<MetricDef> costs;
  for (int k : kept) costs.push_back(windowed_metric(k));
  for (const auto& q : quantized) costs.push_back(quantized_metric(q));
  for (int f : factors) costs.push_back(longer_metric(f));
  out.insert(speed, costs.begin(), costs.end());
  return out;
}

MetricDef metric_by_id(const std::string& id) {
  for (const auto& m : fixed_metrics())
    if (m.id == id) return m;
  if (id.rfind("sink_", 0) == 0) {
    std::string digits = id.substr(5);
    if (!digits.empty() && digits.size() < 7 &&
        std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
      return sink_metric(std::stoi(digits));
  }
  if (auto k = number_after(id, kWindowedGap)) return windowed_metric(*k);
  if (auto f = number_after(id, kLongerLoss)) return longer_metric(*f);
  if (id.rfind(kQuantizedGap, 0) == 0 && is_quantization_setting(id.substr(std::string(kQuantizedGap).size())))
    return quantized_metric(id.substr(std::string(kQuantizedGap).size()));
  throw ResultsError(fmt::format("unknown metric '{}': use {}", id, metric_ids_help()));
}

std::string metric_ids_help() {
  std::string out =
      "sink_K (K a measured position, e.g. sink_1), windowed_gap_K (K first tokens kept, e.g. windowed_gap_0), "
      "quantized_gap_wBaB (e.g. quantized_gap_w8a8), longer_loss_F (F times the context, e.g. longer_loss_2)";
  for (const auto& m : fixed_metrics()) out += ", " + m.id;
  return out;
}

double metric_value(const RunData& run, const std::string& id) {
  if (id == "tokens_per_s" && std::isfinite(run.tokens_per_s)) return run.tokens_per_s;
  const Eval* e = run.last();
  return e ? eval_metric_value(*e, id) : NAN;
}

double eval_metric_value(const Eval& e, const std::string& id) {
  if (id == "valid_loss") return e.valid_loss;
  if (id == "train_loss") return e.train_loss;
  if (id == "tokens_per_s") return e.tokens_per_s;
  if (id == "sink_star") return e.sink_star.value_or(NAN);
  if (id == "alpha_1") {
    double sum = 0;
    size_t n = 0;
    for (const auto& layer : e.alpha)
      for (double a : layer) sum += a, ++n;
    return n ? sum / static_cast<double>(n) : NAN;
  }
  if (id == "gate_mean") {
    if (e.gate.empty()) return NAN;
    double sum = 0;
    for (double g : e.gate) sum += g;
    return sum / static_cast<double>(e.gate.size());
  }
  if (id == "sink_logit") return e.sink_logit.value_or(NAN);
  auto table_mean = [&](const char* name) {
    auto it = e.head_tables.find(name);
    double sum = 0;
    size_t n = 0;
    if (it != e.head_tables.end())
      for (const auto& layer : it->second)
        for (double v : layer) sum += v, ++n;
    return n ? sum / static_cast<double>(n) : NAN;
  };
  if (id == "k1_norm_ratio") return table_mean(run_record::eval::kKeyNormRatio);
  if (id == "v1_norm_ratio") return table_mean(run_record::eval::kValueNormRatio);
  if (id == "q_k1_cos") return table_mean(run_record::eval::kQueryKeyCos);
  if (id == "max_activation") return largest(e.max_activation);
  if (id == "massive_max") {
    if (e.massive.empty()) return NAN;
    double m = -INFINITY;
    for (double v : e.massive)
      if (std::isfinite(v)) m = std::max(m, v);
    return std::isfinite(m) ? m : NAN;
  }
  if (id == "kurtosis_max") return largest(e.residual_kurtosis);
  if (id == "attention_output_max") return largest(e.attention_output_max);
  if (id == "attention_kurtosis_max") return largest(e.attention_output_kurtosis);
  auto at = [](const auto& map, const auto& k) {
    auto it = map.find(k);
    return it == map.end() ? NAN : it->second;
  };
  if (auto k = number_after(id, kWindowedGap)) return at(e.windowed_loss, *k) - e.valid_loss;
  if (auto f = number_after(id, kLongerLoss)) return at(e.longer_context_loss, *f);
  if (id.rfind(kQuantizedGap, 0) == 0)
    return at(e.quantized_loss, id.substr(std::string(kQuantizedGap).size())) - e.valid_loss;
  if (auto k = number_after(id, "sink_")) return at(e.sink, *k);
  return NAN;
}

std::vector<SeriesValue> eval_series(const Eval& e) {
  std::vector<SeriesValue> out;
  auto add = [&](std::string name, double v) {
    if (!std::isnan(v)) out.push_back({std::move(name), v});
  };
  for (const auto& [k, v] : e.sink) add(sink_metric(k).id, v);
  for (const auto& m : fixed_metrics()) add(m.id, eval_metric_value(e, m.id));
  for (const auto& [k, v] : e.windowed_loss) add(windowed_metric(k).id, v - e.valid_loss);
  for (const auto& [q, v] : e.quantized_loss) add(quantized_metric(q).id, v - e.valid_loss);
  for (const auto& [f, v] : e.longer_context_loss) add(longer_metric(f).id, v);
  // Not a result, so not a table column; a curve worth seeing beside the loss.
  add("lr", e.lr);
  auto per_head = [&](const std::string& id, const std::vector<std::vector<double>>& table) {
    for (size_t l = 0; l < table.size(); ++l)
      for (size_t h = 0; h < table[l].size(); ++h) add(fmt::format("{}/layer_{}/head_{}", id, l, h), table[l][h]);
  };
  per_head("alpha_1", e.alpha);
  per_head("alpha_star", e.alpha_star);
  for (size_t l = 0; l < e.massive.size(); ++l) add(fmt::format("massive/layer_{}", l), e.massive[l]);
  for (size_t l = 0; l < e.gate.size(); ++l) add(fmt::format("gate/layer_{}", l), e.gate[l]);
  for (size_t l = 0; l < e.max_activation.size(); ++l)
    add(fmt::format("max_activation/layer_{}", l), e.max_activation[l]);
  for (const auto& [name, table] : e.head_tables) per_head(name, table);
  auto per_layer = [&](const std::string& id, const std::vector<double>& values) {
    for (size_t l = 0; l < values.size(); ++l) add(fmt::format("{}/layer_{}", id, l), values[l]);
  };
  per_layer("residual_kurtosis", e.residual_kurtosis);
  per_layer("attention_output_max", e.attention_output_max);
  per_layer("attention_output_kurtosis", e.attention_output_kurtosis);
  return out;
}

std::vector<const RunData*> contributing_runs(const RunGroup& group, bool* partial) {
  std::vector<const RunData*> use;
  for (const auto& r : group.runs)
    if (r.status == Status::Completed) use.push_back(&r);
  *partial = false;
  if (use.empty()) {
    for (const auto& r : group.runs)
      if ((r.status == Status::Running || r.status == Status::Stopped || r.status == Status::Failed) && r.last())
        use.push_back(&r);
    *partial = !use.empty();
  }
  return use;
}

bool read_from_attention(const std::string& id) {
  // sink_logit is the logit's own share of a row, w(b) / Z: never a proxy.
  return id != "sink_logit" && (id.rfind("sink_", 0) == 0 || id == "alpha_1");
}

bool sink_from_proxy(const RunGroup& group) {
  return std::any_of(group.runs.begin(), group.runs.end(), [](const RunData& r) { return r.sink_from_proxy(); });
}

Aggregate aggregate(const RunGroup& group, const std::string& id) {
  Aggregate a;
  std::vector<const RunData*> use = contributing_runs(group, &a.partial);
  for (const RunData* r : use) {
    double v = metric_value(*r, id);
    if (!std::isfinite(v)) continue;
    a.values.push_back(v);
    a.proxy = a.proxy || (read_from_attention(id) && r->sink_from_proxy());
    if (a.partial) a.step = a.step == 0 ? r->last()->step : std::min(a.step, r->last()->step);
  }
  if (a.values.empty()) {
    if (!use.empty()) {
      a.partial = false;
      a.missing = "not measured";
      // A longer context the model cannot reach says why.
      if (auto f = number_after(id, kLongerLoss); f && use.front()->last())
        if (auto it = use.front()->last()->longer_context_missing.find(*f);
            it != use.front()->last()->longer_context_missing.end())
          a.missing = it->second;
    } else {
      std::set<std::string> why;
      for (const auto& r : group.runs) why.insert(status_name(r.status));
      for (const auto& w : why) a.missing += (a.missing.empty() ? "" : "/") + w;
    }
    return a;
  }
  double sum = 0;
  for (double v : a.values) sum += v;
  a.mean = sum / static_cast<double>(a.n());
  if (a.n() > 1) {
    double ss = 0;
    for (double v : a.values) ss += (v - a.mean) * (v - a.mean);
    a.std = std::sqrt(ss / static_cast<double>(a.n() - 1));
  }
  return a;
}

std::string format_aggregate(const Aggregate& a, int decimals) {
  if (a.values.empty()) return a.missing;
  std::string s = fmt::format("{:.{}f}", a.mean, decimals);
  if (a.n() > 1) s += fmt::format(" ± {:.{}f}", a.std, decimals);
  if (a.partial) s += fmt::format(" (step {})", a.step);
  return s;
}

std::string group_status(const RunGroup& group) {
  const size_t n = group.runs.size();
  size_t done = 0;
  for (const auto& r : group.runs) done += r.status == Status::Completed;
  if (n == 1) return group.first().status_text();
  std::string out =
      done == n ? fmt::format("{} seeds, completed", n) : fmt::format("{} of {} seeds completed", done, n);
  for (const auto& r : group.runs)
    if (r.status != Status::Completed || r.stale()) out += fmt::format("; seed {} {}", seed_number(r), r.status_text());
  return out;
}

}  // namespace sink::results
