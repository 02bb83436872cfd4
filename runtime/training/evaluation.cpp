#include "runtime/training/evaluation.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "plan/run_record.h"
#include "runtime/measurement/measure.h"
#include "runtime/training/precision.h"

namespace sink::rt {
using json = nlohmann::json;
namespace eval_key = run_record::eval;

json evaluate(Transformer& model, const Batches& batches, const RunConfig& cfg, SinkCosts* costs) {
  torch::NoGradGuard no_grad;
  AutocastScope autocast(cfg.train.precision, model.device);
  model.eval();
  json m;
  const int64_t n_valid = std::min<int64_t>(cfg.measure.sequences, 64), chunk = 16;
  auto [x, y] = batches.valid(n_valid);
  m[eval_key::kValidLoss] = chunked_loss(model, x, y, cfg.model.attention.rule.prefix, chunk);
  std::optional<SinkCosts> own;
  if (!costs) costs = &own.emplace(cfg);
  m.update(costs->measure(model, batches, x, y, chunk));

  const bool bos = measures_with_bos(cfg.measure.bos, cfg.data);
  auto inputs = batches.measure_inputs(cfg.measure.sequences, cfg.measure.T, cfg.measure.input, bos);
  std::vector<SinkReport> parts;
  for (int64_t b = 0; b < inputs.size(0); b += 25)
    parts.push_back(measure_model(model, inputs.narrow(0, b, std::min<int64_t>(25, inputs.size(0) - b)),
                                  cfg.measure.positions, cfg.measure.eps, cfg.measure.massive_activations,
                                  cfg.measure.outliers));
  auto report = report_json(combine_chunks(parts));
  report.erase(eval_key::kSequences);
  m.update(report);
  model.train();
  return m;
}

json attention_maps(Transformer& model, const Batches& batches, const RunConfig& cfg, bool bos) {
  torch::NoGradGuard no_grad;
  AutocastScope autocast(cfg.train.precision, model.device);
  const int64_t T = std::min<int64_t>(32, cfg.measure.T);
  auto x = batches.measure_inputs(1, T, cfg.measure.input, bos);
  model.eval();
  ForwardResult f = model.probe(x);
  model.train();
  const bool k_column = cfg.model.key_column();
  std::vector<std::tuple<double, int64_t, int64_t>> heads;  // (alpha_1, layer, head)
  std::vector<torch::Tensor> maps;
  for (size_t l = 0; l < f.attention.size(); ++l) {
    auto A = f.attention[l][0];  // [H, T', S]
    if (cfg.model.sink_token) A = A.narrow(1, 1, A.size(1) - 1).narrow(2, 1, A.size(2) - 1);
    if (k_column) A = A.narrow(2, 1, A.size(2) - 1);
    maps.push_back(A);
    for (int64_t h = 0; h < A.size(0); ++h) heads.emplace_back(A[h].select(1, 0).mean().item<double>(), l, h);
  }
  std::sort(heads.rbegin(), heads.rend());
  json out = {{"tokens", std::vector<int64_t>(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + T)},
              {"maps", json::array()}};
  for (size_t k = 0; k < std::min<size_t>(4, heads.size()); ++k) {
    auto [alpha, l, h] = heads[k];
    auto A = maps[l][h].to(torch::kCPU, torch::kDouble).contiguous();
    std::vector<std::vector<double>> rows(A.size(0));
    for (int64_t i = 0; i < A.size(0); ++i)
      rows[i].assign(A[i].data_ptr<double>(), A[i].data_ptr<double>() + A.size(1));
    out["maps"].push_back({{"layer", l}, {"head", h}, {"A", rows}});
  }
  return out;
}

}  // namespace sink::rt
