// The attention kernels' oracle: a variant's forward and every gradient
// against the LibTorch reference path in double, with the tolerance scaled
// by the reference's own error in the kernels' precision. Shared by the CPU
// JIT tests, the CUDA kernels' tests and the GPU check (no GoogleTest there:
// tests/runtime/attention_oracle_expect.h turns a result into expectations).
#pragma once
#include <array>
#include <functional>
#include <string>
#include <torch/torch.h>
#include <utility>
#include <vector>

#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/attention.h"
#include "runtime/attention/attention_backend.h"
#include "tests/runtime/jit_variants.h"

namespace sink::testing_variants {

using rt::AttentionCall;
using rt::AttentionInputs;
using rt::reference_attention;

// The kernels under test: o for a spec and call, differentiable.
using Attend = std::function<torch::Tensor(const kernels::KernelSpec&, const rt::AttentionCall&)>;

// Normwise relative error: max |a - b| / max(|b|, floor).
inline double rel_error(const torch::Tensor& a, const torch::Tensor& b, double floor = 1e-12) {
  auto diff = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
  auto scale = b.to(torch::kDouble).abs().max().item<double>();
  return diff / std::max(scale, floor);
}

// Gradients that are zero in exact arithmetic (one visible key: dA - D = 0)
// come out as rounding noise; with O(1) inputs, 1e-2 is their scale.
inline double grad_error(const torch::Tensor& a, const torch::Tensor& b) { return rel_error(a, b, 1e-2); }

// How far a kernel's forward and gradients are from the reference, and how far they may be.
struct OracleResult {
  bool finite = false, right_dtype = false;
  double forward = 0, forward_allowed = 0;
  std::vector<std::pair<std::string, double>>
      grads;  // dq, dk, dv, and dg, dk*, dv*, d sink logit where the variant has them
  double grads_allowed = 0;
  bool passed() const {
    if (!finite || !right_dtype || !(forward < forward_allowed)) return false;
    for (const auto& [name, error] : grads)
      if (!(error < grads_allowed)) return false;
    return true;
  }
};

// dtype: the kernels' precision (float as in training; double for the tight
// check); device: where both the kernels and the reference run.
inline OracleResult measure_against_reference(const Attend& attend, const Variant& v, double tol = 1e-5,
                                              torch::ScalarType dtype = torch::kFloat,
                                              torch::Device device = torch::kCPU) {
  OracleResult result;
  const double gtol = dtype == torch::kDouble ? tol : std::max(v.grad_tol, tol * 10);
  torch::manual_seed(7);
  const int64_t B = 2, H = 3, T = v.T, D = v.D;
  auto make = [&](std::vector<int64_t> shape, double scale = 1) {
    return (torch::randn(shape, torch::kDouble) * scale).to(device).requires_grad_(true);
  };
  auto q = make({B, H, T, D}, v.q_scale), k = make({B, H, T, D}, v.q_scale), v_ = make({B, H, T, D});
  auto g = make({H, T}, 0.5);
  auto ks = make({H, D}), vs = make({H, D});
  auto dout = torch::randn({B, H, T, D}, torch::kDouble).to(device);
  auto sink = make({H});  // drawn last: the paper's variants see the inputs they always did

  // Reference in double: the oracle.
  AttentionInputs ref_in{q, k, v_, {}, {}, {}};
  if (v.position_bias) {
    auto i = torch::arange(T, torch::TensorOptions().device(device)).view({T, 1});
    auto j = torch::arange(T, torch::TensorOptions().device(device)).view({1, T});
    ref_in.bias = g.index({torch::indexing::Slice(), (i - j).abs()}).unsqueeze(0);  // [1, H, T, T]
  }
  if (v.key_bias) {
    ref_in.k_star = ks;
    ref_in.v_star = v.learned_v ? vs : torch::zeros({H, D}, vs.options().requires_grad(false));
  }
  if (v.sink_logit) ref_in.sink_logit = sink;
  auto ref = reference_attention(config_of(v), ref_in, false).out;
  std::vector<torch::Tensor> inputs = {q, k, v_, g, ks, vs, sink};
  auto ref_grads = torch::autograd::grad({ref}, inputs, {dout}, true, false, true);

  // The reference path itself in dtype: how ill-conditioned the case is.
  // Huge logits (error ~ eps * |x|) may err up to 10x the reference's own
  // error: the kernels take D = <dO, O> (one pass, as FlashAttention) where
  // the reference sums A dA over the row, and that differs by rounding.
  auto f = [&](const torch::Tensor& t) { return t.detach().to(dtype).requires_grad_(true); };
  std::vector<torch::Tensor> same_precision;
  for (auto& t : inputs) same_precision.push_back(f(t));
  AttentionInputs low_in{same_precision[0], same_precision[1], same_precision[2], {}, {}, {}};
  if (v.position_bias) low_in.bias = ref_in.bias->detach().to(dtype);
  if (v.key_bias) low_in.k_star = same_precision[4], low_in.v_star = ref_in.v_star->detach().to(dtype);
  if (v.sink_logit) low_in.sink_logit = same_precision[6];
  auto low = reference_attention(config_of(v), low_in, false).out;
  auto low_grads =
      torch::autograd::grad({low}, {same_precision[0], same_precision[1]}, {dout.to(dtype)}, false, false, true);
  const double slack = 10 * std::max(grad_error(low_grads[0], ref_grads[0]), grad_error(low_grads[1], ref_grads[1]));

  // Generated kernels in dtype.
  auto qf = f(q), kf = f(k), vf = f(v_), gf = f(g), ksf = f(ks), vsf = f(vs), sinkf = f(sink);
  AttentionCall in{
      qf,
      kf,
      vf,
      v.position_bias ? gf : torch::Tensor(),
      v.key_bias ? ksf : torch::Tensor(),
      v.key_bias ? (v.learned_v ? vsf : torch::zeros({H, D}, vsf.options().requires_grad(false))) : torch::Tensor(),
      v.sink_logit ? sinkf : torch::Tensor()};
  auto out = attend(spec_of(v), in);
  result.finite = torch::isfinite(out).all().item<bool>();
  result.right_dtype = out.scalar_type() == dtype;
  result.forward = rel_error(out, ref);
  result.forward_allowed = tol;
  if (!result.finite) return result;
  out.backward(dout.to(dtype));
  result.grads_allowed = std::max(gtol, slack);
  result.grads = {{"dq", grad_error(qf.grad(), ref_grads[0])},
                  {"dk", grad_error(kf.grad(), ref_grads[1])},
                  {"dv", grad_error(vf.grad(), ref_grads[2])}};
  if (v.position_bias) result.grads.push_back({"dg", grad_error(gf.grad(), ref_grads[3])});
  if (v.key_bias) {
    result.grads.push_back({"dk*", grad_error(ksf.grad(), ref_grads[4])});
    if (v.learned_v) result.grads.push_back({"dv*", grad_error(vsf.grad(), ref_grads[5])});
  }
  if (v.sink_logit) result.grads.push_back({"d sink logit", grad_error(sinkf.grad(), ref_grads[6])});
  return result;
}

// 16-bit storage (bf16, half): inputs, output and gradients rounded to the
// storage's significand, arithmetic in float. The forward is compared with
// the reference in double on the same rounded inputs, and may err twice the
// reference's own error when its float output is rounded the same way (the
// kernels sum in another order), never less than one unit in the last
// place; the gradients with the reference's in float on the same rounded
// inputs, within three units in the last place or three times as far as the
// reference's own gradients move when q, k and v move by half a unit in the
// last place (large logits make the gradients that sensitive: the kernels
// read back O rounded to 16 bits, in D = <dO, O>). The tensor-core kernels
// round once more (the products' 16-bit operands): one unit more each.
inline double unit_in_last_place(torch::ScalarType storage) { return storage == torch::kHalf ? 1.0 / 2048 : 1.0 / 256; }

struct SixteenBitResult {
  bool right_dtype = false;
  double forward = 0, own = 0, forward_allowed = 0;
  std::vector<std::pair<std::string, double>> grads;  // dq, dk, dv, and dg where the variant learns g
  double grads_allowed = 0, grads_own = 0;
  bool passed() const {
    if (!right_dtype || !(forward < forward_allowed)) return false;
    for (const auto& [name, error] : grads)
      if (!(error < grads_allowed)) return false;
    return true;
  }
};

inline SixteenBitResult measure_sixteen_bit(const Attend& attend, const Variant& v, torch::ScalarType storage,
                                            torch::Device device = torch::kCPU, int64_t B = 2, int64_t H = 2) {
  // Inputs drawn on the CPU whatever the device: a GPU checks the very numbers the CPU emulation did.
  torch::manual_seed(3);
  const auto on = torch::TensorOptions().device(device);
  auto drawn = [&](std::vector<int64_t> shape, double scale = 1) { return (torch::randn(shape) * scale).to(device); };
  auto q = drawn({B, H, v.T, v.D}, v.q_scale), k = drawn({B, H, v.T, v.D}, v.q_scale);
  auto val = drawn({B, H, v.T, v.D}), dout = drawn({B, H, v.T, v.D});
  auto g = drawn({H, v.T}, 0.5), ks = drawn({H, v.D}), sink = drawn({H});
  auto vs = v.learned_v ? drawn({H, v.D}) : torch::zeros({H, v.D}, on);
  auto low = [&](const torch::Tensor& t) { return t.to(storage); };

  // g as leaves of their own for the kernels and the float reference, wanting a gradient where the variant's
  // table is learned.
  auto g_kernels = g.clone().requires_grad_(v.position_grad), g_float = g.clone().requires_grad_(v.position_grad);
  auto reference_on = [&](torch::ScalarType real, const torch::Tensor& q_, const torch::Tensor& k_,
                          const torch::Tensor& v_, const torch::Tensor& g_) {
    auto r = [&](const torch::Tensor& t) { return t.to(real); };
    AttentionInputs in{q_, k_, v_, {}, {}, {}};
    if (v.position_bias) {
      auto i = torch::arange(v.T, on).view({v.T, 1}), j = torch::arange(v.T, on).view({1, v.T});
      in.bias = r(g_).index({torch::indexing::Slice(), (i - j).abs()}).unsqueeze(0);
    }
    if (v.key_bias) in.k_star = r(ks), in.v_star = r(vs);
    if (v.sink_logit) in.sink_logit = r(sink);
    return reference_attention(config_of(v), in, false).out;
  };
  auto rounded = [&](torch::ScalarType real) {
    return std::array{low(q).to(real), low(k).to(real), low(val).to(real)};
  };
  const auto in_double = rounded(torch::kDouble), in_float = rounded(torch::kFloat);
  auto exact = reference_on(torch::kDouble, in_double[0], in_double[1], in_double[2], g);
  SixteenBitResult result;
  result.own = rel_error(low(reference_on(torch::kFloat, in_float[0], in_float[1], in_float[2], g)), exact);
  // The tensor-core kernels round the weights (forward), A and dS (backward) to the storage type before their
  // products, as FlashAttention does: one more unit in the last place than the scalar kernels' one rounding.
  const int roundings = kernels::cuda_tiles(spec_of(v), storage == torch::kHalf ? kernels::CudaStorage::Float16
                                                                                : kernels::CudaStorage::BFloat16)
                                .tensor_cores
                            ? 2
                            : 1;
  result.forward_allowed = std::max(2 * result.own, roundings * unit_in_last_place(storage));

  auto call_with = [&](const torch::Tensor& q_, const torch::Tensor& k_, const torch::Tensor& v_) {
    return AttentionCall{q_,
                         k_,
                         v_,
                         v.position_bias ? g_kernels : torch::Tensor(),
                         v.key_bias ? ks : torch::Tensor(),
                         v.key_bias ? vs : torch::Tensor(),
                         v.sink_logit ? sink : torch::Tensor()};
  };
  auto ql = low(q).requires_grad_(true), kl = low(k).requires_grad_(true), vl = low(val).requires_grad_(true);
  auto out = attend(spec_of(v), call_with(ql, kl, vl));
  result.right_dtype = out.scalar_type() == storage;
  result.forward = rel_error(out, exact);
  out.backward(low(dout));
  auto qf = low(q).to(torch::kFloat).requires_grad_(true), kf = low(k).to(torch::kFloat).requires_grad_(true),
       vf = low(val).to(torch::kFloat).requires_grad_(true);
  // Against the reference's gradients in float from the same rounded inputs: an oracle that compiles nothing.
  reference_on(torch::kFloat, qf, kf, vf, g_float).backward(low(dout).to(torch::kFloat));
  result.right_dtype = result.right_dtype && ql.grad().scalar_type() == storage;
  result.grads = {{"dq", grad_error(ql.grad(), qf.grad())},
                  {"dk", grad_error(kl.grad(), kf.grad())},
                  {"dv", grad_error(vl.grad(), vf.grad())}};
  if (v.position_grad) result.grads.push_back({"dg", grad_error(g_kernels.grad(), g_float.grad())});

  // How far the reference's float gradients move when its inputs move by half a unit in the last place: the
  // worst of three moves, drawn on the CPU whatever the device. With very large scores one draw's answer
  // ranged over more than 10x, and a gentle draw on a GPU (its own generator) once allowed 50x less than
  // the same case on the CPU.
  auto reference_grads = [&](double jitter, uint64_t draw) {
    auto generator = at::detail::createCPUGenerator(1000 + draw);
    std::vector<torch::Tensor> in;
    for (const auto& t : rounded(torch::kFloat)) {
      auto noise = at::rand(t.sizes(), generator, torch::kFloat).to(t.device());
      auto moved = t * (1 + jitter * unit_in_last_place(storage) * (noise * 2 - 1));
      in.push_back(moved.detach().requires_grad_(true));
    }
    auto o = reference_on(torch::kFloat, in[0], in[1], in[2], g);
    return torch::autograd::grad({o}, in, {low(dout).to(torch::kFloat)});
  };
  const auto still = reference_grads(0, 0);
  for (uint64_t draw = 1; draw <= 3; ++draw) {
    const auto moved = reference_grads(0.5, draw);
    for (size_t n = 0; n < 3; ++n) result.grads_own = std::max(result.grads_own, grad_error(moved[n], still[n]));
  }
  result.grads_allowed = (2 + roundings) * std::max(unit_in_last_place(storage), result.grads_own);
  return result;
}

}  // namespace sink::testing_variants
