#include "runtime/training/step_operations.h"

#include <stdexcept>

#include "runtime/training/lm_head_loss.h"

namespace sink::rt {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps, RmsNormForm form) {
  if (form == RmsNormForm::for_device)
    form = SINKLAB_LIBRARY_RMS_NORM && x.is_cuda() ? RmsNormForm::library : RmsNormForm::composite;
  if (form == RmsNormForm::composite) return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * weight;
#if SINKLAB_LIBRARY_RMS_NORM
  return at::rms_norm(x, {x.size(-1)}, weight, eps);
#else
  throw std::logic_error("this LibTorch has no rms_norm (it came with 2.4)");
#endif
}

torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
  return bias.defined() ? torch::layer_norm(x, {x.size(-1)}, weight, bias, eps) : rms_norm(x, weight, eps);
}

std::vector<torch::Tensor> project(const torch::Tensor& x, const std::vector<torch::Tensor>& weights, bool stacked) {
  std::vector<torch::Tensor> out;
  if (!stacked || weights.size() == 1) {
    for (const auto& w : weights) out.push_back(torch::linear(x, w));
    return out;
  }
  std::vector<int64_t> rows;
  for (const auto& w : weights) rows.push_back(w.size(0));
  return torch::linear(x, torch::cat(weights, 0)).split_with_sizes(rows, -1);
}

torch::Tensor apply_rope(const torch::Tensor& x, torch::Tensor cos, torch::Tensor sin) {
  cos = cos.to(x.scalar_type()), sin = sin.to(x.scalar_type());
  const auto swapped = x.unflatten(-1, {x.size(-1) / 2, 2}).flip(-1).flatten(-2);
  return x * cos + swapped * sin;
}

torch::Tensor activation(const torch::Tensor& gate, Ffn act) {
  return act == Ffn::relu ? torch::relu(gate) : act == Ffn::gelu ? torch::gelu(gate) : torch::silu(gate);
}

std::string StepOperations::fused(const ModelConfig&) const { return ""; }

std::pair<torch::Tensor, torch::Tensor> StepOperations::residual_norm(const torch::Tensor& x, const torch::Tensor& r,
                                                                      const torch::Tensor& w, const torch::Tensor& b,
                                                                      double eps) const {
  auto sum = x + r;
  return {sum, norm(sum, w, b, eps)};
}

torch::Tensor StepOperations::linear(const torch::Tensor& x, const torch::Tensor& w) const {
  return torch::linear(x, w);
}

torch::Tensor StepOperations::gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                                           Ffn act) const {
  const auto gate_up = project(x, {w1, w3}, x.is_cuda());
  return activation(gate_up[0], act) * gate_up[1];
}

std::array<torch::Tensor, 3> StepOperations::heads(const torch::Tensor& x, const torch::Tensor& wq,
                                                   const torch::Tensor& wk, const torch::Tensor& wv,
                                                   const torch::Tensor& cos, const torch::Tensor& sin, int64_t heads,
                                                   int64_t kv_heads) const {
  return into_heads(project(x, {wq, wk, wv}, x.is_cuda()), cos, sin, heads, kv_heads);
}

torch::Tensor StepOperations::loss(const torch::Tensor& features, const torch::Tensor& weight,
                                   const torch::Tensor& targets, const torch::Tensor& row_weights) const {
  return linear_cross_entropy(features, weight, targets, row_weights);
}

std::array<torch::Tensor, 3> StepOperations::into_heads(const std::vector<torch::Tensor>& qkv, const torch::Tensor& cos,
                                                        const torch::Tensor& sin, int64_t heads, int64_t kv_heads) {
  const int64_t B = qkv[0].size(0), T = qkv[0].size(1), dh = qkv[0].size(2) / heads;
  auto q = qkv[0].view({B, T, heads, dh}).transpose(1, 2);
  auto k = qkv[1].view({B, T, kv_heads, dh}).transpose(1, 2);
  auto v = qkv[2].view({B, T, kv_heads, dh}).transpose(1, 2);
  if (cos.defined()) q = apply_rope(q, cos, sin), k = apply_rope(k, cos, sin);
  return {q, k, v};
}

std::shared_ptr<const StepOperations> library_operations() {
  static const auto library = std::make_shared<const StepOperations>();
  return library;
}

}  // namespace sink::rt
