#pragma once
// The step kernels (runtime/training/step_kernels.h, and the CPU's: cpu_step_operations.h) against the LibTorch
// operations they replace, computed in double from the same inputs: the forward and every gradient, each difference
// relative to the oracle's largest magnitude beside what the storage's rounding allows. Shared by the emulation's
// tests (tests/kernels/step_kernels_test.cpp), the CPU's (tests/runtime/cpu_step_operations_test.cpp) and the GPU's
// check (tests/gpu/cuda_check.cpp).
#include <fmt/format.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "runtime/training/model.h"
#include "runtime/training/step_kernels.h"

namespace sink::testing_step_kernels {

struct Comparison {
  std::string what;
  double error = 0, allowed = 0;  // relative to the oracle's largest magnitude
  bool passed() const { return error <= allowed; }
};

// One unit in bf16's or half's last place, twice for the values that pass through two roundings; float's sums.
inline double storage_rounding(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? 1.6e-2 : dtype == torch::kHalf ? 2e-3 : 2e-5;
}

inline Comparison compare(const std::string& what, const torch::Tensor& got, const torch::Tensor& want,
                          double allowed) {
  if (!got.defined() || got.sizes() != want.sizes()) return {what + ": missing or misshapen", 1e300, allowed};
  const double scale = std::max(want.abs().max().item<double>(), 1e-12);
  return {what, (got.to(torch::kDouble).cpu() - want.cpu()).abs().max().item<double>() / scale, allowed};
}

// s = x + r and n = RMSNorm(s) * w (or, layer_norm, LayerNorm(s) * w + b) over rows of `width` on `device`, r and n
// in `dtype`; with the stream's own gradient or (through_stream false) n's alone.
inline std::vector<Comparison> residual_norm(const rt::StepOperations& kernels, torch::Device device,
                                             torch::ScalarType dtype, std::vector<int64_t> shape, bool through_stream,
                                             bool layer_norm = false, double eps = 1e-5) {
  const auto on = torch::TensorOptions().device(device);
  // An offset on the stream: LayerNorm's mean is then far from 0, which a one-pass variance would cancel away.
  auto x = (torch::randn(shape, on) + (layer_norm ? 3.0 : 0.0)).requires_grad_();
  auto r = (torch::randn(shape, on) * 2).to(dtype).requires_grad_();
  auto w = (torch::rand({shape.back()}, on) + 0.5).requires_grad_();
  auto b = layer_norm ? torch::randn({shape.back()}, on).requires_grad_() : torch::Tensor();
  const auto ds = torch::randn(shape, on), dn = torch::randn(shape, on).to(dtype);
  auto [s, n] = kernels.residual_norm(x, r, w, b, eps);
  std::vector<torch::Tensor> inputs = {x, r, w};
  if (layer_norm) inputs.push_back(b);
  auto grads =
      through_stream ? torch::autograd::grad({s, n}, inputs, {ds, dn}) : torch::autograd::grad({n}, inputs, {dn});
  std::vector<torch::Tensor> doubles;
  for (const auto& t : inputs) doubles.push_back(t.detach().to(torch::kDouble).requires_grad_());
  auto s64 = doubles[0] + doubles[1];
  // (RMSNorm's formula, on a GPU too, where rms_norm's default would be LibTorch's own operator)
  auto n64 = layer_norm ? torch::layer_norm(s64, {shape.back()}, doubles[2], doubles[3], eps)
                        : rt::rms_norm(s64, doubles[2], eps, rt::RmsNormForm::composite);
  auto want = through_stream
                  ? torch::autograd::grad({s64, n64}, doubles, {ds.to(torch::kDouble), dn.to(torch::kDouble)})
                  : torch::autograd::grad({n64}, doubles, {dn.to(torch::kDouble)});
  const double rounding = storage_rounding(dtype);
  std::vector<Comparison> out = {
      {"the stream is the add, bit for bit", torch::equal(s, x.detach() + r.detach()) ? 0.0 : 1.0, 0},
      {"n's dtype is r's", n.scalar_type() == dtype && grads[1].scalar_type() == dtype ? 0.0 : 1.0, 0},
      compare("n", n, n64.detach(), rounding),
      compare("dx", grads[0], want[0], 2e-5),
      compare("dr", grads[1], want[1], rounding),
      compare("dw", grads[2], want[2], 2e-5)};
  if (layer_norm) out.push_back(compare("db", grads[3], want[3], 2e-5));
  return out;
}

// act(gate) * up from gate_up [..., 2 width] in `dtype`, and its gradient.
inline std::vector<Comparison> gated(const rt::StepKernels& kernels, torch::Device device, Ffn act,
                                     torch::ScalarType dtype, std::vector<int64_t> shape) {
  const auto on = torch::TensorOptions().device(device);
  auto doubled = shape;
  doubled.back() *= 2;
  auto gate_up = (torch::randn(doubled, on) * 2).to(dtype).requires_grad_();
  const auto dh = torch::randn(shape, on).to(dtype);
  auto h = kernels.gated_activation(gate_up, act);
  auto grad = torch::autograd::grad({h}, {gate_up}, {dh})[0];
  auto gu64 = gate_up.detach().to(torch::kDouble).requires_grad_();
  auto parts = gu64.chunk(2, -1);
  auto a = act == Ffn::relu ? torch::relu(parts[0]) : act == Ffn::gelu ? torch::gelu(parts[0]) : torch::silu(parts[0]);
  auto h64 = a * parts[1];
  auto want = torch::autograd::grad({h64}, {gu64}, {dh.to(torch::kDouble)})[0];
  const double rounding = storage_rounding(dtype);
  return {{"h's and its gradient's dtype", h.scalar_type() == dtype && grad.scalar_type() == dtype ? 0.0 : 1.0, 0},
          compare("h", h, h64.detach(), rounding),
          compare("d gate_up", grad, want, rounding)};
}

// RoPE's tables as the model's rope_tables lays them out, [T, head_dim] float, at random angles: each pair's cos on
// both its channels, its sin negated on the first.
inline std::pair<torch::Tensor, torch::Tensor> random_rope_tables(int64_t T, int64_t head_dim, torch::Device device) {
  auto angles = torch::rand({T, head_dim / 2}, torch::kDouble) * 6.3;
  auto cos = torch::stack({torch::cos(angles), torch::cos(angles)}, -1).flatten(-2);
  auto sin = torch::stack({-torch::sin(angles), torch::sin(angles)}, -1).flatten(-2);
  return {cos.to(device, torch::kFloat), sin.to(device, torch::kFloat)};
}

// q [B, H, T, d], k and v [B, Hkv, T, d] from qkv [B, T, (H + 2 Hkv) d] in `dtype`, RoPE on q and k where `rope`,
// and qkv's gradient from all three; the oracle is the model's eager path in double (a view, a transpose, apply_rope).
inline std::vector<Comparison> split_heads(const rt::StepKernels& kernels, torch::Device device,
                                           torch::ScalarType dtype, int64_t B, int64_t T, int64_t heads,
                                           int64_t kv_heads, int64_t head_dim, bool rope) {
  const auto on = torch::TensorOptions().device(device);
  const int64_t width = (heads + 2 * kv_heads) * head_dim;
  auto qkv = torch::randn({B, T, width}, on).to(dtype).requires_grad_();
  torch::Tensor cos, sin;
  if (rope) std::tie(cos, sin) = random_rope_tables(T, head_dim, device);
  const auto got = kernels.split_heads(qkv, cos, sin, heads, kv_heads);
  std::vector<torch::Tensor> seeds;
  for (const auto& t : got) seeds.push_back(torch::randn(t.sizes(), on).to(dtype));
  const auto grad = torch::autograd::grad(got, {qkv}, seeds)[0];
  auto qkv64 = qkv.detach().to(torch::kDouble).requires_grad_();
  const auto parts = qkv64.split_with_sizes({heads * head_dim, kv_heads * head_dim, kv_heads * head_dim}, -1);
  std::vector<torch::Tensor> want;
  for (int part = 0; part < 3; ++part) {
    auto t = parts[part].view({B, T, part == 0 ? heads : kv_heads, head_dim}).transpose(1, 2);
    if (rope && part < 2) t = rt::apply_rope(t, cos.to(torch::kDouble), sin.to(torch::kDouble));
    want.push_back(t);
  }
  std::vector<torch::Tensor> seeds64;
  for (const auto& t : seeds) seeds64.push_back(t.to(torch::kDouble));
  const auto want_grad = torch::autograd::grad(want, {qkv64}, seeds64)[0];
  const double rounding = storage_rounding(dtype);
  bool laid_out = true;
  for (const auto& t : got) laid_out = laid_out && t.is_contiguous() && t.scalar_type() == dtype;
  return {{"q, k, v contiguous in qkv's dtype", laid_out && grad.scalar_type() == dtype ? 0.0 : 1.0, 0},
          compare("q", got[0], want[0].detach(), rounding),
          compare("k", got[1], want[1].detach(), rounding),
          compare("v, a copy", got[2], want[2].detach(), 0.0),
          compare("d qkv", grad, want_grad, rounding)};
}

// A model of `cfg` (vocabulary 20) with `operations` against the same model with LibTorch's: the loss and every
// parameter's gradient on one batch, in float (where the only differences are the order of the sums).
inline std::vector<Comparison> model_step(const ModelConfig& cfg, std::shared_ptr<const rt::StepOperations> operations,
                                          int64_t B = 2, int64_t T = 9) {
  torch::manual_seed(7);
  rt::Transformer plain(cfg);
  plain.operations = rt::library_operations();
  torch::manual_seed(7);
  rt::Transformer fused(cfg);
  fused.operations = std::move(operations);
  const auto tokens = torch::randint(20, {B, T}), targets = torch::randint(20, {B, T});
  auto loss_of = [&](rt::Transformer& m) {
    auto logits = m.forward(tokens).logits;
    return torch::nn::functional::cross_entropy(logits.reshape({-1, 20}), targets.reshape({-1}));
  };
  auto want = loss_of(plain), got = loss_of(fused);
  want.backward(), got.backward();
  std::vector<Comparison> out = {{"the loss", std::abs(got.item<double>() - want.item<double>()), 1e-5}};
  auto p = plain.named_parameters(), f = fused.named_parameters();
  for (const auto& item : p)
    out.push_back(compare(item.key(), f[item.key()].grad(), item.value().grad().to(torch::kDouble), 1e-4));
  return out;
}

}  // namespace sink::testing_step_kernels
