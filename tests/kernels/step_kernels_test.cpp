// The fused step kernels (kernels/cuda/residual_norm.cuh, kernels/cuda/gated_activation.cuh,
// kernels/cuda/split_heads.cuh) where no GPU is:
//  - NVRTC compiles them for sm_80 and sm_90 with no spilled register (skipped without the CUDA toolkit);
//  - run by the CPU emulation (tests/kernels/cuda_emulator.h) through their autograd functions
//    (runtime/training/step_kernels.h), each matches the LibTorch operations it replaces, computed in double from
//    the same inputs: the forward and every gradient, in float, bf16 and half storage, with rows and widths that
//    leave a warp's or a block's last pass partly empty, and with each block's threads in either order;
//  - a model with them trains the step the model without them does: the same loss and gradients.
#include <gtest/gtest.h>

#include "kernels/cuda/step_source.h"
#include "runtime/attention/cuda_driver.h"
#include "runtime/training/model.h"
#include "runtime/training/step_kernels.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/kernels/cuda_machine_code.h"
#include "tests/kernels/step_kernels_oracle.h"
#include "tests/runtime/runtime_test_util.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

std::shared_ptr<const StepKernels> emulated(ThreadOrder order = ThreadOrder::Together) {
  return register_step_kernels(cpu_emulated_modules(order));
}

void expect_passed(const std::vector<testing_step_kernels::Comparison>& comparisons) {
  for (const auto& c : comparisons)
    EXPECT_TRUE(c.passed()) << c.what << ": relative difference " << c.error << ", allowed " << c.allowed;
}

struct Shape {
  int64_t rows_a, rows_b, width;
};
// A row shorter than a warp, one with a partial last pass, several passes; 4 and 9 rows: the last block partly empty.
const Shape kShapes[] = {{1, 3, 20}, {3, 3, 48}, {2, 2, 96}};

}  // namespace

TEST(StepKernels, CompileForSm80AndSm90WithoutSpilling) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  for (auto storage : {kernels::CudaStorage::Real, kernels::CudaStorage::BFloat16, kernels::CudaStorage::Float16}) {
    std::vector<std::string> sources = {kernels::residual_norm_source(storage, 768, 1e-5),
                                        kernels::residual_norm_source(storage, 4096, 1e-6),
                                        kernels::residual_norm_source(storage, 768, 1e-5, true)};
    for (auto a : {kernels::GatedActivation::Relu, kernels::GatedActivation::Gelu, kernels::GatedActivation::Silu})
      sources.push_back(kernels::gated_activation_source(storage, a));
    sources.push_back(kernels::split_heads_source(storage, 12, 12, 64, true));
    sources.push_back(kernels::split_heads_source(storage, 16, 4, 128, false));
    for (size_t k = 0; k < sources.size(); ++k)
      for (int arch : {80, 90}) {
        const std::string& source = sources[k];
        SCOPED_TRACE(fmt::format("storage {} source {} sm_{}", static_cast<int>(storage), k, arch));
        std::string report;
        ASSERT_NO_THROW(cuda::compile_cubin(source, arch, &report)) << source.substr(source.size() - 200);
        const auto resources = testing_machine_code::read_assembler_report(report);
        EXPECT_FALSE(resources.empty()) << report;
        for (const auto& [kernel, r] : resources) {
          EXPECT_EQ(r.spill_stores, 0) << kernel;
          EXPECT_EQ(r.spill_loads, 0) << kernel << " sm_" << arch;
        }
      }
  }
}

TEST(StepKernels, ResidualNormIsTheAddAndTheNormForwardAndBackward) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(3);
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
    for (const Shape& shape : kShapes)
      for (bool through_stream : {true, false})
        for (bool layer_norm : {false, true}) {
          SCOPED_TRACE(fmt::format("{} {} [{}, {}, {}]{}", layer_norm ? "LayerNorm" : "RMSNorm", c10::toString(dtype),
                                   shape.rows_a, shape.rows_b, shape.width, through_stream ? "" : ", n alone used"));
          expect_passed(testing_step_kernels::residual_norm(
              *emulated(), torch::kCPU, dtype, {shape.rows_a, shape.rows_b, shape.width}, through_stream, layer_norm));
        }
}

// Rows past the backward's 1024 blocks x 4 warps: each warp takes a second row, and its dw (and db) sums both.
TEST(StepKernels, ResidualNormBackwardStridesOverMoreRowsThanItsBlocks) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(4);
  for (bool layer_norm : {false, true})
    expect_passed(testing_step_kernels::residual_norm(*emulated(ThreadOrder::Ascending), torch::kCPU, torch::kFloat,
                                                      {4096 + 37, 8}, false, layer_norm, 1e-6));
}

TEST(StepKernels, GatedActivationIsTheActivationTimesUpForwardAndBackward) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(5);
  for (Ffn act : {Ffn::relu, Ffn::gelu, Ffn::swish})
    for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
      for (const Shape& shape : kShapes)
        for (ThreadOrder order : {ThreadOrder::Together, ThreadOrder::Descending}) {
          SCOPED_TRACE(fmt::format("{} {} [{}, {}, 2 x {}] {}", name_of(act), c10::toString(dtype), shape.rows_a,
                                   shape.rows_b, shape.width, name_of(order)));
          expect_passed(testing_step_kernels::gated(*emulated(order), torch::kCPU, act, dtype,
                                                    {shape.rows_a, shape.rows_b, shape.width}));
        }
}

TEST(StepKernels, SplitHeadsIsTheViewTransposeAndRopeForwardAndBackward) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(6);
  struct Heads {
    int64_t B, T, heads, kv_heads, head_dim;
  };
  // One head; grouped-query heads; a row wider than a block (3 x 2 x 128 / 2 = 384 pairs), d_head 128.
  for (const Heads& h : {Heads{1, 5, 1, 1, 8}, Heads{2, 7, 4, 2, 6}, Heads{2, 3, 2, 2, 128}})
    for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
      for (bool rope : {true, false})
        for (ThreadOrder order : {ThreadOrder::Together, ThreadOrder::Descending}) {
          SCOPED_TRACE(fmt::format("{} B {} T {} H {} Hkv {} d {}{} {}", c10::toString(dtype), h.B, h.T, h.heads,
                                   h.kv_heads, h.head_dim, rope ? " RoPE" : "", name_of(order)));
          expect_passed(testing_step_kernels::split_heads(*emulated(order), torch::kCPU, dtype, h.B, h.T, h.heads,
                                                          h.kv_heads, h.head_dim, rope));
        }
}

// A pre-norm SwiGLU model with the step kernels against the same model without them: the loss and every
// parameter's gradient, in float (where the only differences are the order of the kernels' sums).
TEST(StepKernels, AModelWithThemTrainsTheStepWithout) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const char* body :
       {"model { ffn = swiglu  norm = rmsnorm }", "model { ffn = geglu  sink_token = true }",
        "model { ffn = reglu  norm = layernorm }", "model.ffn = relu", "model { heads = 4  kv_heads = 2  pe = alibi }",
        "model { pe = rope  placement = post }", "model { heads = 4  kv_heads = 1  pe = rope(theta = 100) }"}) {
    SCOPED_TRACE(body);
    auto cfg = sinktest::config_of(
        std::string("experiment a extends micro { model.vocab = 20  attention.backend = reference ") + body + " }");
    expect_passed(testing_step_kernels::model_step(cfg.model, emulated()));
  }
}
