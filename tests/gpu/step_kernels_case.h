// cuda_check's case 9 (tests/gpu/cuda_check.cpp): the step kernels (runtime/training/step_kernels.h) on the GPU,
// the emulation's comparisons (tests/kernels/step_kernels_oracle.h) at the 60M model's widths (d 512, a SwiGLU's
// 1,536 wide), at a ragged one, and past the blocks' strides.
#pragma once
#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/step_source.h"
#include "runtime/attention/cuda_attention.h"
#include "tests/gpu/crash_report.h"
#include "tests/kernels/step_kernels_oracle.h"

namespace sink::gpu_check {

// Every source case 9 compiles, for the kernel cache to fill ahead (cuda_check --fill-cache).
inline std::vector<std::string> step_kernel_sources() {
  std::vector<std::string> sources;
  for (auto storage : {kernels::CudaStorage::Real, kernels::CudaStorage::BFloat16, kernels::CudaStorage::Float16}) {
    for (int64_t width : {512, 100, 64})
      for (bool centered : {false, true})
        sources.push_back(kernels::residual_norm_source(storage, width, 1e-5, centered));
    for (auto a : {kernels::GatedActivation::Relu, kernels::GatedActivation::Gelu, kernels::GatedActivation::Silu})
      sources.push_back(kernels::gated_activation_source(storage, a));
    for (bool rope : {true, false}) sources.push_back(kernels::split_heads_source(storage, 8, 8, 64, rope));
    sources.push_back(kernels::split_heads_source(storage, 16, 4, 128, true));
  }
  return sources;
}

// Each comparison's line through `report` (name, passed, detail).
inline void step_kernels_case(const std::function<void(const std::string&, bool, const std::string&)>& report) {
  namespace check = sink::testing_step_kernels;
  const auto kernels = rt::register_step_kernels(rt::cuda_modules());
  torch::manual_seed(9);
  auto one = [&](const std::string& name, const std::vector<check::Comparison>& comparisons) {
    bool passed = true;
    std::string detail;
    for (const auto& c : comparisons) {
      passed = passed && c.passed();
      if (!c.passed() || c.allowed > 0) detail += fmt::format("{} {:.1e} (< {:.0e}); ", c.what, c.error, c.allowed);
      if (!c.passed() && c.allowed == 0) detail += c.what + " FAILED; ";
    }
    report(name, passed, detail);
  };
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    const std::string storage = c10::toString(dtype);
    for (int64_t width : {512, 100}) {
      now_running(fmt::format("step kernels, residual norm, {}, width {}", storage, width));
      for (bool through : {true, false})
        for (bool layer_norm : {false, true})
          one(fmt::format("step kernels: residual + {} [{}] 4 x 2048 x {}{}", layer_norm ? "LayerNorm" : "RMSNorm",
                          storage, width, through ? "" : ", n alone"),
              check::residual_norm(*kernels, torch::kCUDA, dtype, {4, 2048, width}, through, layer_norm));
    }
    for (Ffn act : {Ffn::relu, Ffn::gelu, Ffn::swish}) {
      now_running(fmt::format("step kernels, gated {}, {}", name_of(act), storage));
      one(fmt::format("step kernels: gated {} [{}] 4 x 2048 x 1536", name_of(act), storage),
          check::gated(*kernels, torch::kCUDA, act, dtype, {4, 2048, 1536}));
    }
    now_running(fmt::format("step kernels, q k v into heads, {}", storage));
    for (bool rope : {true, false})
      one(fmt::format("step kernels: q k v into 8 heads of 64{} [{}] 4 x 2048", rope ? ", RoPE" : "", storage),
          check::split_heads(*kernels, torch::kCUDA, dtype, 4, 2048, 8, 8, 64, rope));
    one(fmt::format("step kernels: q k v into 16 heads, 4 kv heads, of 128, RoPE [{}] 2 x 1024", storage),
        check::split_heads(*kernels, torch::kCUDA, dtype, 2, 1024, 16, 4, 128, true));
  }
  // Past the backward's 1,024 blocks of 4 rows and the gated kernels' 65,535 rows: the blocks stride.
  now_running("step kernels, striding");
  one("step kernels: residual + RMSNorm [bf16] 70000 x 64, striding",
      check::residual_norm(*kernels, torch::kCUDA, torch::kBFloat16, {70000, 64}, true));
  one("step kernels: gated swish [bf16] 70000 x 64, striding",
      check::gated(*kernels, torch::kCUDA, Ffn::swish, torch::kBFloat16, {70000, 64}));
  one("step kernels: q k v into 8 heads of 64, RoPE [bf16] 70 x 1024, striding",
      check::split_heads(*kernels, torch::kCUDA, torch::kBFloat16, 70, 1024, 8, 8, 64, true));
}

}  // namespace sink::gpu_check
