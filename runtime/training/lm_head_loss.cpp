#include "runtime/training/lm_head_loss.h"

#include <algorithm>

#include "runtime/training/device.h"
#include "runtime/training/model.h"

namespace sink::rt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A chunk's fp32 logits: 2^24 values, 64 MB. Large enough that each chunk's products keep a GPU busy
// (332 rows x 50,432 x d), small enough that the chunk's few temporaries stay a small part of a step.
constexpr int64_t kChunkLogits = int64_t(1) << 24;

struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  // features [N, d], weight [V, d], targets [N] long, row_weights [N], all on one device.
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor features, torch::Tensor weight,
                               torch::Tensor targets, torch::Tensor row_weights, int64_t chunk_rows, bool with_grad) {
    const int64_t rows = features.size(0);
    // fp32 statistics and gradient sums, or fp64 for fp64 inputs (the tests' finite differences).
    const auto wide = features.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    auto loss = torch::zeros({}, features.options().dtype(wide));
    torch::Tensor grad_features, grad_weight;
    if (with_grad) {
      grad_features = torch::empty_like(features);
      grad_weight = torch::zeros(weight.sizes(), weight.options().dtype(wide));
    }
    for (int64_t first = 0; first < rows; first += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - first);
      auto f = features.narrow(0, first, n);
      auto y = targets.narrow(0, first, n).unsqueeze(1);
      auto w = row_weights.narrow(0, first, n).to(wide);
      // In the autocast's precision where one is on (as `linear` is), the statistics in fp32.
      auto logits = torch::linear(f, weight).to(wide);
      auto log_norm = logits.logsumexp(-1);
      loss += ((log_norm - logits.gather(1, y).squeeze(1)) * w).sum();
      if (!with_grad) continue;
      // d loss / d logits = w_i (softmax_i - onehot(y_i)), formed in the logits' own memory.
      auto dlogits = logits.sub_(log_norm.unsqueeze(1)).exp_().mul_(w.unsqueeze(1));
      dlogits.scatter_add_(1, y, -w.unsqueeze(1));
      grad_features.narrow(0, first, n).copy_(torch::matmul(dlogits, weight));
      grad_weight.add_(torch::matmul(dlogits.t(), f));
    }
    ctx->saved_data["grad_features"] = grad_features;
    ctx->saved_data["grad_weight"] = grad_weight;
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& g = grads[0];
    auto grad_features = ctx->saved_data["grad_features"].toTensor();
    auto grad_weight = ctx->saved_data["grad_weight"].toTensor();
    const auto weight_dtype = ctx->saved_data["weight_dtype"].toScalarType();
    return {(grad_features * g).to(grad_features.scalar_type()), (grad_weight * g).to(weight_dtype), {}, {}, {}, {}};
  }
};

}  // namespace

int64_t cross_entropy_chunk_rows(int64_t vocab) {
  return std::max<int64_t>(1, kChunkLogits / std::max<int64_t>(1, vocab));
}

torch::Tensor linear_cross_entropy(const torch::Tensor& features, const torch::Tensor& weight,
                                   const torch::Tensor& targets, const torch::Tensor& row_weights, int64_t chunk_rows) {
  const auto device = features.device();
  auto flat = features.reshape({-1, features.size(-1)});
  const bool with_grad = torch::GradMode::is_enabled() && (features.requires_grad() || weight.requires_grad());
  return LinearCrossEntropy::apply(flat, weight, targets.reshape({-1}).to(device, torch::kLong),
                                   row_weights.reshape({-1}).to(device),
                                   chunk_rows > 0 ? chunk_rows : cross_entropy_chunk_rows(weight.size(0)), with_grad);
}

torch::Tensor mean_loss_weights(const torch::Tensor& targets, int64_t prefix) {
  auto options = targets.options().dtype(torch::kFloat);
  if (prefix <= 1) return torch::full(targets.sizes(), 1.0 / double(targets.numel()), options);
  auto keep = (torch::arange(targets.size(1), options) + 2 > double(prefix)).to(torch::kFloat);
  auto weights = keep.unsqueeze(0).expand(targets.sizes()).contiguous();
  return weights / weights.sum().clamp_min(1);
}

torch::Tensor lm_loss(Transformer& model, const torch::Tensor& tokens, const torch::Tensor& targets, int64_t prefix) {
  const auto on_device = to_device(targets, model.device);
  return model.operations->loss(model.features(tokens), model.head_weight(), on_device,
                                mean_loss_weights(on_device, prefix));
}

}  // namespace sink::rt
