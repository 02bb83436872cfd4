// One attention design through every backend, in minutes: the score expression in SINKLAB_DESIGN_SCORE
// (as a spec writes `attention.score`) under the row SINKLAB_DESIGN_NORMALIZE (with SINKLAB_DESIGN_P for a
// row that takes one), against the reference path: the CPU JIT in float and double, central differences of
// the JIT's double kernels, the CUDA kernels on the CPU emulation in float and, at d_head 64, the
// tensor-core kernels in bf16. Causal, a window with a prefix and KV biases, ALiBi, a prefix longer than
// the sequence. Without the variables it checks sigmoid(qk - log(n)) unnormalized (Ramapuram et al., 2024).
// scripts/check-design.sh runs it; docs/ATTENTION-ALGEBRA.md is the guide.
#include <gtest/gtest.h>

#include <cstdlib>

#include "plan/expr_text.h"
#include "plan/normalizers.h"
#include "plan/schema.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/jit_attention.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/runtime/attention_oracle_expect.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

std::string environment(const char* name, const std::string& otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? value : otherwise;
}

// The design under test at the sizes that reach every code path: key blocks and a masked tail, a window
// with a prefix (K and V biases too), a position term, a prefix longer than the sequence, wide heads.
std::vector<Variant> design_variants(const ExprNode& score, const std::string& normalize, double p) {
  std::vector<Variant> out = {
      {.name = "causal, T 20", .T = 20},
      {.name = "window 3 + prefix 2, KV biases, T 20",
       .prefix = 2,
       .window = 3,
       .key_bias = true,
       .learned_v = true,
       .T = 20},
      {.name = "ALiBi / T5 position term, T 13", .position_bias = true, .T = 13},
      {.name = "prefix 12 beyond T 9", .prefix = 12},
      {.name = "d_head 64, T 83, window 40", .window = 40, .T = 83, .D = 64},
  };
  for (auto& v : out) v.score = score, v.normalize = normalize, v.p = p;
  return out;
}

}  // namespace

TEST(Design, OneDesignOnEveryBackend) {
  const std::string text = environment("SINKLAB_DESIGN_SCORE", "sigmoid(qk - log(n))");
  const std::string normalize =
      environment("SINKLAB_DESIGN_NORMALIZE", std::getenv("SINKLAB_DESIGN_SCORE") ? "sum" : "none");
  const double p = std::stod(environment("SINKLAB_DESIGN_P", "1"));
  ExprNode score;
  try {
    score = read_expr(text);
  } catch (const std::exception& e) {
    FAIL() << "SINKLAB_DESIGN_SCORE = " << text << ": " << e.what();
  }
  const std::string wrong = expr_violation(score, score_rules());
  ASSERT_EQ(wrong, "") << "SINKLAB_DESIGN_SCORE = " << text;
  ASSERT_NE(find_normalizer(normalize), nullptr) << "SINKLAB_DESIGN_NORMALIZE = " << normalize << " is no row";
  std::cout << "design: attention.score = " << text << ", attention.normalize = " << normalize << "\n";

  const Attend emulated = [](const kernels::KernelSpec& spec, const AttentionCall& call) {
    return cuda_attention(spec, call, cpu_emulated_modules());
  };
  const bool cuda = have_host_compiler();
  if (!cuda) std::cout << "SKIP the CUDA kernels: no host C++ compiler (c++) to run them on the CPU\n";
  for (const Variant& v : design_variants(score, normalize, p)) {
    compare_with_reference(jit_attention, v);
    compare_with_reference(jit_attention, v, 1e-9, torch::kDouble);
    expect_gradients_match_finite_differences(jit_attention, v);
    if (!cuda) continue;
    compare_with_reference(emulated, v);
    if (v.D % 16 != 0) continue;
    SCOPED_TRACE(v.name + ", tensor cores in bf16");
    const SixteenBitResult r = measure_sixteen_bit(emulated, v, torch::kBFloat16);
    EXPECT_LT(r.forward, r.forward_allowed) << "the reference's own error: " << r.own;
    for (const auto& [name, error] : r.grads)
      EXPECT_LT(error, r.grads_allowed) << name << "; the reference's own gradients move " << r.grads_own;
  }
}
