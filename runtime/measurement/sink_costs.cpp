#include "runtime/measurement/sink_costs.h"

#include <fmt/format.h>

#include "plan/run_record.h"
#include "plan/visibility.h"
#include "runtime/training/lm_head_loss.h"
#include "runtime/training/step_operations.h"

namespace sink::rt {
namespace {
using json = nlohmann::json;
namespace key = run_record::eval;

// LibTorch's operations with every projection's input and weight fake-quantized: the blocks' linear layers as a
// b-bit integer kernel would compute them (the LM head's loss is not overridden: it stays unquantized).
class QuantizedOperations : public StepOperations {
 public:
  explicit QuantizedOperations(int64_t bits) : bits_(bits) {}
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) const override {
    return torch::linear(fake_quantize(x, bits_), fake_quantize(w, bits_));
  }
  torch::Tensor gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                             Ffn act) const override {
    return StepOperations::gated_hidden(fake_quantize(x, bits_), fake_quantize(w1, bits_), fake_quantize(w3, bits_),
                                        act);
  }
  std::array<torch::Tensor, 3> heads(const torch::Tensor& x, const torch::Tensor& wq, const torch::Tensor& wk,
                                     const torch::Tensor& wv, const torch::Tensor& cos, const torch::Tensor& sin,
                                     int64_t heads, int64_t kv_heads) const override {
    return StepOperations::heads(fake_quantize(x, bits_), fake_quantize(wq, bits_), fake_quantize(wk, bits_),
                                 fake_quantize(wv, bits_), cos, sin, heads, kv_heads);
  }

 private:
  int64_t bits_;
};

// The model runs `backend` or `operations` for as long as this lives; the ones it had after.
class ModelSwap {
 public:
  explicit ModelSwap(Transformer& model) : model_(model), backend_(model.backend), operations_(model.operations) {}
  ~ModelSwap() {
    use(backend_);
    model_.operations = operations_;
  }
  void use(const std::shared_ptr<AttentionBackend>& backend) { model_.use_attention(backend); }
  void use(std::shared_ptr<const StepOperations> operations) { model_.operations = std::move(operations); }

 private:
  Transformer& model_;
  std::shared_ptr<AttentionBackend> backend_;
  std::shared_ptr<const StepOperations> operations_;
};

}  // namespace

torch::Tensor fake_quantize(const torch::Tensor& v, int64_t bits) {
  const double levels = static_cast<double>((int64_t{1} << (bits - 1)) - 1);
  // In fp32 whatever v's dtype (bf16 holds no integer past 256), back in v's; the scale stays on the device.
  const auto x = v.to(torch::kFloat);
  const auto scale = (x.detach().abs().max() / levels).clamp_min(1e-30);
  return ((x / scale).round().clamp(-levels, levels) * scale).to(v.scalar_type());
}

std::string longer_context_obstacle(const ModelConfig& model, int64_t length) {
  // The sink token takes a position before the sequence's first.
  const int64_t positions = length + (model.sink_token ? 1 : 0);
  if (model.pe == PosEmbedding::learned && positions > model.max_positions)
    return fmt::format("learned absolute positions: the model has {}, {} asked", model.max_positions, positions);
  return "";
}

double chunked_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y, int64_t prefix, int64_t chunk) {
  // Summed on the device in double, read once: one wait for the GPU, the same sum as the host's.
  torch::Tensor loss = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(model.device));
  int64_t chunks = 0;
  for (int64_t b = 0; b < x.size(0); b += chunk, ++chunks) {
    const int64_t n = std::min<int64_t>(chunk, x.size(0) - b);
    loss += lm_loss(model, x.narrow(0, b, n), y.narrow(0, b, n), prefix).to(torch::kDouble);
  }
  return loss.item<double>() / static_cast<double>(std::max<int64_t>(1, chunks));
}

double quantized_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y, int64_t prefix, int64_t chunk,
                      int64_t bits) {
  ModelSwap swap(model);
  swap.use(std::make_shared<const QuantizedOperations>(bits));
  return chunked_loss(model, x, y, prefix, chunk);
}

double SinkCosts::windowed_loss(Transformer& model, const torch::Tensor& x, const torch::Tensor& y, int64_t chunk,
                                int64_t keep) {
  auto& backend = windowed_[keep];
  if (!backend) {
    // The model's attention in every other respect; causal under the window.
    ModelConfig windowed = model.cfg;
    AttentionConfig& a = windowed.attention;
    a.rule = streaming_window(cfg_.measure.window_size(cfg_.train.context), keep);
    backend = make_backend_ ? make_backend_(windowed) : make_attention_backend(windowed, model.device);
  }
  ModelSwap swap(model);
  swap.use(backend);
  return chunked_loss(model, x, y, 0, chunk);
}

json SinkCosts::measure(Transformer& model, const Batches& batches, const torch::Tensor& x, const torch::Tensor& y,
                        int64_t chunk) {
  const MeasureConfig& ms = cfg_.measure;
  const int64_t prefix = cfg_.model.attention.rule.prefix, context = cfg_.train.context;
  json m = json::object();
  // A prefix LM's prefix is seen both ways: no causal window says what its loss would be.
  if (ms.windowed_loss && !ms.window_keeps.empty() && prefix == 0) {
    json losses = json::object();
    for (int64_t keep : ms.window_keeps) losses[std::to_string(keep)] = windowed_loss(model, x, y, chunk, keep);
    m[key::kWindowedLoss] = {{"window", ms.window_size(context)}, {"loss", losses}};
  }
  if (!ms.quantized_bits.empty()) {
    json losses = json::object();
    for (int64_t bits : ms.quantized_bits)
      losses[fmt::format("w{}a{}", bits, bits)] = quantized_loss(model, x, y, prefix, chunk, bits);
    m[key::kQuantizedLoss] = losses;
  }
  if (!ms.longer_contexts.empty()) {
    json losses = json::object();
    for (int64_t factor : ms.longer_contexts) {
      const int64_t length = factor * context;
      std::string why = longer_context_obstacle(cfg_.model, length);
      if (why.empty() && batches.valid_tokens() > 0 && batches.valid_tokens() <= length)
        why = fmt::format("the validation text holds {} tokens, not {}", batches.valid_tokens(), length + 1);
      if (!why.empty()) {
        losses[std::to_string(factor)] = why;
        continue;
      }
      // As many tokens as the trained length's loss reads, in sequences `factor` times as long.
      const int64_t n = std::max<int64_t>(1, x.size(0) / factor);
      auto [long_x, long_y] = batches.valid(n, length);
      losses[std::to_string(factor)] =
          chunked_loss(model, long_x, long_y, prefix, std::max<int64_t>(1, chunk / factor));
    }
    m[key::kLongerContextLoss] = losses;
  }
  return m;
}

}  // namespace sink::rt
