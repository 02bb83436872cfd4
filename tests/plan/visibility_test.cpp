// The visibility rules (plan/visibility.h) against the mask written out by hand: causal, a prefix seen both ways,
// a window, and both, at every short length.
#include "plan/visibility.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

namespace {

using sink::ExprNode;

int64_t evaluate(const ExprNode& e, const std::map<std::string, int64_t>& values) {
  auto arg = [&](size_t k) { return evaluate(e.args.at(k), values); };
  switch (e.op) {
    case ExprNode::Op::Number: return static_cast<int64_t>(e.number);
    case ExprNode::Op::Var: return values.at(e.name);
    case ExprNode::Op::Neg: return -arg(0);
    case ExprNode::Op::Add: return arg(0) + arg(1);
    case ExprNode::Op::Sub: return arg(0) - arg(1);
    case ExprNode::Op::Call:
      if (e.name == "__min") return std::min(arg(0), arg(1));
      if (e.name == "__max") return std::max(arg(0), arg(1));
      if (e.name == "__if_pos") return arg(0) > 0 ? arg(1) : arg(2);
      break;
    default: break;
  }
  throw std::runtime_error("not an integer expression: " + to_string(e));
}

// Query i sees key j (0-based): causal; a prefix of p seen both ways by its own queries; a window of w keys.
bool visible(int64_t i, int64_t j, int64_t prefix, int64_t window) {
  bool ok = j <= i || (i < prefix && j < prefix);
  return ok && (window == 0 || i - j < window);
}

TEST(Visibility, TheRangesAreExactlyTheMaskAndNCountsIt) {
  for (int64_t prefix : {0, 1, 3, 5})
    for (int64_t window : {0, 1, 2, 4})
      for (int64_t T = 1; T <= 8; ++T) {
        SCOPED_TRACE(testing::Message() << "prefix " << prefix << ", window " << window << ", T " << T);
        const sink::Visibility v = sink::visibility(prefix, window);
        const ExprNode n = sink::visible_key_count(prefix, window);
        for (int64_t i = 0; i < T; ++i) {
          const int64_t lo = evaluate(v.first_key, {{"i", i}, {"T", T}});
          const int64_t hi = evaluate(v.last_key, {{"i", i}, {"T", T}});
          int64_t seen = 0;
          for (int64_t j = 0; j < T; ++j) {
            EXPECT_EQ(visible(i, j, prefix, window), lo <= j && j <= hi) << "query " << i << ", key " << j;
            seen += visible(i, j, prefix, window);
          }
          EXPECT_EQ(evaluate(n, {{"i", i + 1}, {"T", T}}), seen) << "n of query " << i;
        }
        for (int64_t j = 0; j < T; ++j) {
          const int64_t first = evaluate(v.first_query, {{"j", j}, {"T", T}});
          const int64_t last = evaluate(v.last_query, {{"j", j}, {"T", T}});
          EXPECT_LE(0, first);
          EXPECT_LT(last, T);
          for (int64_t i = 0; i < T; ++i)
            if (visible(i, j, prefix, window))
              EXPECT_TRUE(first <= i && i <= last) << "key " << j << " seen by query " << i << " outside the bound";
        }
      }
}

}  // namespace
