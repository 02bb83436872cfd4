// The CPU's fused step operations (runtime/training/cpu_step_operations.h, kernels in cpu_kernels.h) against the
// LibTorch operations they replace, computed in double from the same inputs: the forward and every gradient, with
// rows and element counts that leave a vector partly empty and span several of the backward's partial sums; the
// same bits at one and two threads; a model with them trains the step the model with LibTorch's operations does.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <cmath>
#include <limits>

#include "runtime/training/cpu_kernels.h"
#include "runtime/training/cpu_step_operations.h"
#include "runtime/training/model.h"
#include "tests/kernels/step_kernels_oracle.h"
#include "tests/runtime/runtime_test_util.h"

using namespace sink;
using namespace sink::rt;
using testing_step_kernels::compare;

namespace {

void expect_passed(const std::vector<testing_step_kernels::Comparison>& comparisons) {
  for (const auto& c : comparisons)
    EXPECT_TRUE(c.passed()) << c.what << ": relative difference " << c.error << ", allowed " << c.allowed;
}

// The threads LibTorch splits work over, for as long as this lives.
class Threads {
 public:
  explicit Threads(int n) : before_(at::get_num_threads()) { at::set_num_threads(n); }
  ~Threads() { at::set_num_threads(before_); }

 private:
  int before_;
};

}  // namespace

TEST(CpuStepOperations, ResidualRmsIsTheAddAndTheNormForwardAndBackward) {
  torch::manual_seed(3);
  const CpuStepOperations ops;
  // A row of one vector, of several; rows past the backward's parts of 64 (4 x 70 = 280: five parts, the last short).
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 3, 8}, {3, 5, 64}, {4, 70, 24}, {2, 9, 128}})
    for (bool through_stream : {true, false}) {
      SCOPED_TRACE(fmt::format("[{}]{}", fmt::join(shape, ", "), through_stream ? "" : ", n alone used"));
      auto x = torch::zeros(shape), r = torch::zeros(shape), w = torch::ones({shape.back()});
      ASSERT_TRUE(CpuStepOperations::residual_rms_fits(x, r, w, torch::Tensor()));
      expect_passed(testing_step_kernels::residual_norm(ops, torch::kCPU, torch::kFloat, shape, through_stream));
    }
}

TEST(CpuStepOperations, WhatTheFusedNormDoesNotTakeRunsLibTorchs) {
  const auto x = torch::randn({2, 3, 16}), w = torch::ones({16});
  EXPECT_FALSE(CpuStepOperations::residual_rms_fits(x, x, w, torch::zeros({16})));  // LayerNorm
  EXPECT_FALSE(CpuStepOperations::residual_rms_fits(x.to(torch::kDouble), x.to(torch::kDouble), w.to(torch::kDouble),
                                                    torch::Tensor()));
  EXPECT_FALSE(CpuStepOperations::residual_rms_fits(x.narrow(2, 0, 12), x.narrow(2, 0, 12), w.narrow(0, 0, 12),
                                                    torch::Tensor()));  // a row not a multiple of 8
  // LayerNorm through the operations: LibTorch's, bit for bit.
  const CpuStepOperations ops;
  const auto b = torch::randn({16});
  auto [s, n] = ops.residual_norm(x, x, w, b, 1e-5);
  EXPECT_TRUE(torch::equal(n, torch::layer_norm(x + x, {16}, w, b, 1e-5)));
  // And the double stream of the finite-difference checks.
  const auto x64 = x.to(torch::kDouble), w64 = w.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(ops.residual_norm(x64, x64, w64, torch::Tensor(), 1e-5).second,
                           rms_norm(x64 + x64, w64, 1e-5, RmsNormForm::composite)));
}

TEST(CpuStepOperations, SwiGluIsSiluTimesUpForwardAndBackward) {
  torch::manual_seed(5);
  // 91 elements: the last vector 3 of 8; 19,800: many vectors per thread's part.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 7, 13}, {2, 300, 33}}) {
    SCOPED_TRACE(fmt::format("[{}]", fmt::join(shape, ", ")));
    auto gate = (torch::randn(shape) * 4).requires_grad_(), up = torch::randn(shape).requires_grad_();
    ASSERT_TRUE(CpuStepOperations::swiglu_fits(gate, up, Ffn::swish));
    EXPECT_FALSE(CpuStepOperations::swiglu_fits(gate, up, Ffn::gelu));
    const auto dh = torch::randn(shape);
    auto h = CpuStepOperations::swiglu(gate, up);
    auto grads = torch::autograd::grad({h}, {gate, up}, {dh});
    auto g64 = gate.detach().to(torch::kDouble).requires_grad_(), u64 = up.detach().to(torch::kDouble).requires_grad_();
    auto h64 = torch::silu(g64) * u64;
    auto want = torch::autograd::grad({h64}, {g64, u64}, {dh.to(torch::kDouble)});
    expect_passed({compare("h", h, h64.detach(), 2e-6), compare("d gate", grads[0], want[0], 2e-6),
                   compare("d up", grads[1], want[1], 2e-6)});
  }
}

TEST(CpuStepOperations, RopeHeadsIsTheViewTransposeAndRopeForwardAndBackward) {
  torch::manual_seed(6);
  struct Heads {
    int64_t B, T, heads, head_dim;
  };
  for (const Heads& h : {Heads{1, 5, 1, 8}, Heads{2, 7, 4, 16}, Heads{2, 3, 2, 128}}) {
    SCOPED_TRACE(fmt::format("B {} T {} H {} d {}", h.B, h.T, h.heads, h.head_dim));
    auto x = torch::randn({h.B, h.T, h.heads * h.head_dim}).requires_grad_();
    // Tables longer than the sequence, as the model's are after a longer one.
    const auto [cos, sin] = testing_step_kernels::random_rope_tables(h.T + 3, h.head_dim, torch::kCPU);
    ASSERT_TRUE(CpuStepOperations::rope_heads_fits(x, cos, h.heads));
    const auto q = CpuStepOperations::rope_heads(x, cos, sin, h.heads);
    const auto seed = torch::randn(q.sizes());
    const auto dx = torch::autograd::grad({q}, {x}, {seed})[0];
    auto x64 = x.detach().to(torch::kDouble).requires_grad_();
    const auto want = apply_rope(x64.view({h.B, h.T, h.heads, h.head_dim}).transpose(1, 2),
                                 cos.narrow(0, 0, h.T).to(torch::kDouble), sin.narrow(0, 0, h.T).to(torch::kDouble));
    const auto want_dx = torch::autograd::grad({want}, {x64}, {seed.to(torch::kDouble)})[0];
    EXPECT_TRUE(q.is_contiguous());
    expect_passed({compare("q", q, want.detach(), 2e-7), compare("dx", dx, want_dx, 2e-7)});
  }
  const auto x = torch::randn({1, 4, 12});
  EXPECT_FALSE(CpuStepOperations::rope_heads_fits(x, torch::ones({4, 12}), 1));  // d_head 12
  EXPECT_FALSE(CpuStepOperations::rope_heads_fits(x, torch::Tensor(), 3));       // no RoPE
}

TEST(CpuStepOperations, ExpIsWithinTwoUnitsInTheLastPlace) {
  const auto x = torch::linspace(-87, 88, 100003);
  auto got = torch::empty_like(x);
  cpu::exp_each(x.data_ptr<float>(), x.numel(), got.data_ptr<float>());
  const auto want = torch::exp(x.to(torch::kDouble));
  const double worst = ((got.to(torch::kDouble) - want).abs() / want).max().item<double>();
  EXPECT_LE(worst, 2 * std::ldexp(1.0, -23)) << "relative error";
  float odd[3] = {std::numeric_limits<float>::quiet_NaN(), -1000, 1000}, out[3];
  cpu::exp_each(odd, 3, out);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_GE(out[1], 0);
  EXPECT_LT(out[1], 1e-37);
  EXPECT_TRUE(std::isfinite(out[2]));
}

// dw is summed over a fixed split of the rows, not per thread: the same bits at any thread count, as are the rest.
TEST(CpuStepOperations, TheSameBitsAtOneAndTwoThreads) {
  torch::manual_seed(8);
  const CpuStepOperations ops;
  const auto x = torch::randn({8, 300, 64}).requires_grad_(), r = torch::randn({8, 300, 64}).requires_grad_();
  const auto w = (torch::rand({64}) + 0.5).requires_grad_();
  const auto dn = torch::randn({8, 300, 64});
  auto run = [&](int threads) {
    Threads scoped(threads);
    auto [s, n] = ops.residual_norm(x, r, w, torch::Tensor(), 1e-5);
    auto h = CpuStepOperations::swiglu(s, n);
    return torch::autograd::grad({h}, {x, r, w}, {dn});
  };
  const auto one = run(1), two = run(2);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << "gradient " << i;
}

// Models with the CPU's operations against the same models with LibTorch's: the loss and every parameter's gradient
// in float (where the only differences are the order of the sums and the activation's exp), with what does not fit
// (LayerNorm, GELU, d_head 4, no RoPE) falling back.
TEST(CpuStepOperations, AModelWithThemTrainsTheStepWithout) {
  for (const char* body :
       {"model { ffn = swiglu  norm = rmsnorm }", "model { d = 32  heads = 2  kv_heads = 1  sink_token = true }",
        "model { ffn = geglu  norm = layernorm }", "model { heads = 4 }", "model { pe = alibi }",
        "model { pe = rope  placement = post }"}) {
    SCOPED_TRACE(body);
    auto cfg = sinktest::config_of(
        std::string("experiment a extends micro { model.vocab = 20  attention.backend = reference ") + body + " }");
    const auto chosen = Transformer(cfg.model).operations;
    ASSERT_NE(dynamic_cast<const CpuStepOperations*>(chosen.get()), nullptr) << "the CPU's by default";
    expect_passed(testing_step_kernels::model_step(cfg.model, chosen, 3, 11));
  }
  const auto cfg = sinktest::config_of("experiment a extends tiny_text { }");
  EXPECT_EQ(Transformer(cfg.model).fused_operations(),
            "residual add + RMSNorm, swiglu's activation, q and k into heads with RoPE");
}
