#include "runtime/measurement/measure.h"

#include "plan/normalizers.h"
#include "plan/run_record.h"
#include "runtime/attention/attention.h"

namespace sink::rt {

SinkReport sink_metrics(const std::vector<torch::Tensor>& attention, const torch::Tensor& allowed,
                        const std::vector<int64_t>& positions, double eps, bool extra_column) {
  SinkReport r;
  if (attention.empty()) return r;
  const int64_t offset = extra_column ? 1 : 0;
  auto seen_by = allowed.to(torch::kDouble).sum(0);     // [S]: how many queries see each key
  std::map<int64_t, std::pair<int64_t, int64_t>> hits;  // position -> (heads over eps, total)
  int64_t star_hits = 0, star_total = 0;
  for (const auto& A : attention) {
    auto a = A.to(torch::kDouble).masked_fill(allowed.logical_not(), 0.0);
    auto alpha = a.sum(2) / seen_by.clamp_min(1.0);  // [N, H, S]
    r.sequences = alpha.size(0);
    for (int64_t k : positions) {
      const int64_t col = k - 1 + offset;
      if (col >= alpha.size(2)) continue;
      auto over = (alpha.select(2, col) > eps);
      hits[k].first += over.sum().item<int64_t>();
      hits[k].second += over.numel();
    }
    int64_t first = positions.empty() ? offset : positions.front() - 1 + offset;
    auto mean_first = alpha.select(2, std::min<int64_t>(first, alpha.size(2) - 1)).mean(0);
    r.alpha.emplace_back(mean_first.data_ptr<double>(), mean_first.data_ptr<double>() + mean_first.numel());
    if (extra_column) {
      auto over = alpha.select(2, 0) > eps;
      star_hits += over.sum().item<int64_t>();
      star_total += over.numel();
      auto mean_star = alpha.select(2, 0).mean(0).contiguous();
      r.alpha_star.emplace_back(mean_star.data_ptr<double>(), mean_star.data_ptr<double>() + mean_star.numel());
    }
  }
  for (auto& [k, ht] : hits) r.sink[k] = ht.second ? 100.0 * ht.first / ht.second : 0.0;
  if (extra_column) r.sink_star = star_total ? 100.0 * star_hits / star_total : 0.0;
  return r;
}

SinkReport measure_model(Transformer& model, const torch::Tensor& inputs, const std::vector<int64_t>& positions,
                         double eps, bool massive, bool outliers) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  ForwardResult f = model.probe(inputs, /*hidden=*/massive || outliers);
  if (was_training) model.train();
  // The metrics read tensors on the CPU, whatever device the model is on.
  for (auto* part : {&f.attention, &f.hidden, &f.gates, &f.sink_shares, &f.geometry, &f.attention_outputs})
    for (auto& t : *part) t = t.cpu();
  const auto& cfg = model.cfg;
  const int64_t T = inputs.size(1) + (cfg.sink_token ? 1 : 0);
  auto allowed = allowed_pairs(cfg.attention, T);
  const bool k_column = cfg.key_column();
  if (k_column) allowed = torch::cat({torch::ones({T, 1}, allowed.options()), allowed}, 1);

  std::vector<torch::Tensor> attention = f.attention;
  bool extra = k_column;
  if (cfg.sink_token) {
    // The sink token is position 0 of the sequence: queries over the real
    // tokens only, and its key column is the extra one.
    for (auto& A : attention) A = A.narrow(2, 1, T - 1);
    allowed = allowed.narrow(0, 1, T - 1);
    if (k_column) {
      // Both: k* column first, then x*; Sink_* reports x*, the stronger claim's column is k*.
      for (auto& A : attention) A = A.narrow(3, 1, A.size(3) - 1);
      allowed = allowed.narrow(1, 1, allowed.size(1) - 1);
    }
    extra = true;
  }
  SinkReport r = sink_metrics(attention, allowed, positions, eps, extra);
  r.sink_from_proxy = sink_from_proxy(cfg.attention.normalize, cfg.attention.differential);
  for (const auto& g : f.gates) r.gate.push_back(g.to(torch::kDouble).mean().item<double>());
  if (!f.sink_shares.empty()) sink_logit_metrics(f.sink_shares, cfg.sink_token ? 1 : 0, eps, r);
  for (const auto& g : f.geometry) {
    auto rows = g.to(torch::kDouble).contiguous();
    auto row = [&](int64_t k) {
      return std::vector<double>(rows[k].data_ptr<double>(), rows[k].data_ptr<double>() + rows.size(1));
    };
    r.key_norm_ratio.push_back(row(0));
    r.value_norm_ratio.push_back(row(1));
    r.query_key_cos.push_back(row(2));
  }
  // The real tokens' activations: not the sink token's, position 0 of the sequence.
  auto real = [&](const torch::Tensor& h) { return cfg.sink_token ? h.narrow(1, 1, h.size(1) - 1) : h; };
  for (const auto& h : f.hidden) {
    if (massive) r.massive.push_back(massive_ratio(real(h)));
    r.max_activation.push_back(real(h).abs().max().item<double>());
  }
  if (outliers)
    for (size_t l = 0; l < f.hidden.size(); ++l) {
      r.residual.emplace_back().add(real(f.hidden[l]));
      r.attention_output.emplace_back().add(real(f.attention_outputs.at(l)));
    }
  return r;
}

void sink_logit_metrics(const std::vector<torch::Tensor>& shares, int64_t first_query, double eps, SinkReport& r) {
  int64_t over = 0, total = 0;
  for (const auto& s : shares) {
    auto share = s.to(torch::kDouble);
    share = share.narrow(2, first_query, share.size(2) - first_query).mean(2);  // [N, H]
    over += (share > eps).sum().item<int64_t>();
    total += share.numel();
    auto per_head = share.mean(0).contiguous();
    r.sink_logit_share.emplace_back(per_head.data_ptr<double>(), per_head.data_ptr<double>() + per_head.numel());
  }
  r.sink_logit = total ? 100.0 * over / total : 0.0;
}

double massive_ratio(const torch::Tensor& hidden) {
  auto norms = hidden.to(torch::kDouble).norm(2, -1);  // [N, T]
  auto ratio = norms.select(1, 0) / norms.narrow(1, 1, norms.size(1) - 1).mean(1);
  return ratio.mean().item<double>();
}

SinkReport measure_hf_model(const HfModel& model, const torch::Tensor& inputs, const std::vector<int64_t>& positions,
                            double eps) {
  const int64_t T = inputs.size(1), layers = model.config().layers;
  const auto allowed = allowed_pairs(T, 0, model.config().sliding_window);
  SinkReport total;
  model.forward(inputs, [&](int64_t, const torch::Tensor& attention, const torch::Tensor& hidden) {
    SinkReport layer = sink_metrics({attention}, allowed, positions, eps, false);
    // Every layer has the same (sequence, head) count: the mean of the layers' percentages is the percentage.
    for (auto& [k, v] : layer.sink) total.sink[k] += v / double(layers);
    total.alpha.push_back(layer.alpha.at(0));
    total.massive.push_back(massive_ratio(hidden));
    total.max_activation.push_back(hidden.abs().max().item<double>());
    total.residual.emplace_back().add(hidden);
    total.sequences = layer.sequences;
  });
  return total;
}

SinkReport combine_chunks(const std::vector<SinkReport>& parts) {
  if (parts.empty()) return {};
  SinkReport r = parts[0];
  double total = 0;
  for (const auto& p : parts) total += double(p.sequences);
  auto weighted = [&](auto value) {
    double v = 0;
    for (const auto& p : parts) v += value(p) * double(p.sequences) / total;
    return v;
  };
  for (auto& [k, v] : r.sink)
    v = weighted([k = k](const SinkReport& p) { return p.sink.count(k) ? p.sink.at(k) : 0.0; });
  if (r.sink_star >= 0) r.sink_star = weighted([](const SinkReport& p) { return p.sink_star; });
  auto table = [&](std::vector<std::vector<double>> SinkReport::* member) {
    for (size_t l = 0; l < (r.*member).size(); ++l)
      for (size_t h = 0; h < (r.*member)[l].size(); ++h)
        (r.*member)[l][h] = weighted([&](const SinkReport& p) { return (p.*member)[l][h]; });
  };
  for (auto member : {&SinkReport::alpha, &SinkReport::alpha_star, &SinkReport::sink_logit_share,
                      &SinkReport::key_norm_ratio, &SinkReport::value_norm_ratio, &SinkReport::query_key_cos})
    table(member);
  if (r.sink_logit >= 0) r.sink_logit = weighted([](const SinkReport& p) { return p.sink_logit; });
  auto layers = [&](std::vector<double> SinkReport::* member) {
    for (size_t l = 0; l < (r.*member).size(); ++l)
      (r.*member)[l] = weighted([&](const SinkReport& p) { return (p.*member)[l]; });
  };
  layers(&SinkReport::massive);
  layers(&SinkReport::gate);
  // The largest activation of the whole measurement, not a mean of the chunks'.
  for (size_t l = 0; l < r.max_activation.size(); ++l)
    for (const auto& p : parts) r.max_activation[l] = std::max(r.max_activation[l], p.max_activation[l]);
  // The moments of all the chunks' values together.
  for (auto member : {&SinkReport::residual, &SinkReport::attention_output})
    for (size_t l = 0; l < (r.*member).size(); ++l)
      for (size_t p = 1; p < parts.size(); ++p) (r.*member)[l] += (parts[p].*member).at(l);
  r.sequences = static_cast<int64_t>(total);
  return r;
}

nlohmann::json report_json(const SinkReport& r) {
  nlohmann::json j;
  namespace key = run_record::eval;
  j[key::kSink] = nlohmann::json::object();
  for (const auto& [k, v] : r.sink) j[key::kSink][std::to_string(k)] = v;
  if (r.sink_star >= 0) j[key::kSinkStar] = r.sink_star;
  j[key::kAlpha] = r.alpha;
  if (!r.alpha_star.empty()) j[key::kAlphaStar] = r.alpha_star;
  if (!r.massive.empty()) j[key::kMassive] = r.massive;
  if (!r.gate.empty()) j[key::kGate] = r.gate;
  if (r.sink_logit >= 0) j[key::kSinkLogit] = r.sink_logit;
  if (!r.sink_logit_share.empty()) j[key::kSinkLogitShare] = r.sink_logit_share;
  if (!r.max_activation.empty()) j[key::kMaxActivation] = r.max_activation;
  if (!r.key_norm_ratio.empty()) j[key::kKeyNormRatio] = r.key_norm_ratio;
  if (!r.value_norm_ratio.empty()) j[key::kValueNormRatio] = r.value_norm_ratio;
  if (!r.query_key_cos.empty()) j[key::kQueryKeyCos] = r.query_key_cos;
  if (!r.residual.empty()) j[key::kResidualKurtosis] = excess_kurtosis(r.residual);
  if (!r.attention_output.empty()) {
    j[key::kAttentionOutputMax] = max_abs(r.attention_output);
    j[key::kAttentionOutputKurtosis] = excess_kurtosis(r.attention_output);
  }
  j[key::kSequences] = r.sequences;
  j[key::kSinkFromProxy] = r.sink_from_proxy;
  return j;
}

}  // namespace sink::rt
