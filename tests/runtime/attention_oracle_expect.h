// The oracle's result as GoogleTest expectations.
#pragma once
#include <gtest/gtest.h>

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

}  // namespace sink::testing_variants
