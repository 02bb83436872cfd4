// The oracle's result as GoogleTest expectations.
#pragma once
#include <gtest/gtest.h>

#include <random>

#include "tests/runtime/attention_oracle.h"

namespace sink::testing_variants {

inline void compare_with_reference(const Attend& attend, const Variant& v, double tol = 1e-5,
                                   torch::ScalarType dtype = torch::kFloat) {
  SCOPED_TRACE(v.name);
  const OracleResult r = measure_against_reference(attend, v, tol, dtype);
  ASSERT_TRUE(r.finite);
  ASSERT_TRUE(r.right_dtype);
  EXPECT_LT(r.forward, r.forward_allowed) << "forward";
  for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
}

// An oracle independent of the reference path: central differences of
// L = <w, attention(q, k, v, g, k*, v*, b)> through a backend's double kernels.
inline void expect_gradients_match_finite_differences(const Attend& attend, const Variant& v) {
  SCOPED_TRACE(v.name);
  torch::manual_seed(5);
  const int64_t B = 1, H = 2, T = v.T, D = v.D;
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  std::vector<torch::Tensor> params = {torch::randn({B, H, T, D}, opts), torch::randn({B, H, T, D}, opts),
                                       torch::randn({B, H, T, D}, opts), torch::randn({H, T}, opts) * 0.5,
                                       torch::randn({H, D}, opts),       torch::randn({H, D}, opts),
                                       torch::randn({H}, opts)};
  auto w = torch::randn({B, H, T, D}, opts);
  auto loss = [&](const std::vector<torch::Tensor>& p) {
    AttentionCall in{p[0],
                     p[1],
                     p[2],
                     v.position_bias ? p[3] : torch::Tensor(),
                     v.key_bias ? p[4] : torch::Tensor(),
                     v.key_bias ? p[5] : torch::Tensor(),
                     v.sink_logit ? p[6] : torch::Tensor()};
    return (attend(spec_of(v), in) * w).sum();
  };
  std::vector<torch::Tensor> leaves;
  for (auto& p : params) leaves.push_back(p.clone().requires_grad_(true));
  loss(leaves).backward();
  std::mt19937 rng(1);
  const double h = 1e-6;
  for (size_t n = 0; n < params.size(); ++n) {
    if ((n == 3 && !v.position_bias) || ((n == 4 || n == 5) && !v.key_bias) || (n == 6 && !v.sink_logit)) continue;
    ASSERT_TRUE(leaves[n].grad().defined()) << "input " << n;
    for (int probe = 0; probe < 6; ++probe) {
      const int64_t e = rng() % params[n].numel();
      auto shifted = [&](double by) {
        std::vector<torch::Tensor> p = params;
        p[n] = params[n].clone();
        p[n].view(-1)[e] += by;
        return loss(p).item<double>();
      };
      const double numeric = (shifted(h) - shifted(-h)) / (2 * h);
      const double analytic = leaves[n].grad().view(-1)[e].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << "input " << n << " element " << e;
    }
  }
}

}  // namespace sink::testing_variants
