// The visibility rules (plan/visibility.h) against the mask written out by hand: causal, a prefix seen both ways,
// a window, both, a window that keeps the first tokens in sight, and a dilated window, at every short length; a
// plan's fields to its rule.
#include "plan/visibility.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "plan/plan.h"

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
    case ExprNode::Op::Div: return arg(0) / arg(1);  // (exact where the rules divide)
    case ExprNode::Op::Call:
      if (e.name == "__min") return std::min(arg(0), arg(1));
      if (e.name == "__max") return std::max(arg(0), arg(1));
      if (e.name == "__if_pos") return arg(0) > 0 ? arg(1) : arg(2);
      if (e.name == "__mod") return (arg(0) % arg(1) + arg(1)) % arg(1);
      break;
    default: break;
  }
  throw std::runtime_error("not an integer expression: " + to_string(e));
}

// Query i sees key j (0-based): causal; a prefix of p seen both ways by its own queries; a window of w keys, under
// which the first `kept` keys stay seen.
bool visible(int64_t i, int64_t j, int64_t prefix, int64_t window, int64_t kept = 0) {
  bool ok = j <= i || (i < prefix && j < prefix);
  return ok && (window == 0 || i - j < window || j < kept);
}

// The rule a plan with these fields asks for.
sink::Visibility rule_of(int64_t prefix, int64_t window, int64_t kept, int64_t dilation = 1) {
  sink::Plan plan;
  plan.fields["loss.prefix"] = sink::Value::of_int(prefix);
  plan.fields["loss.window"] = window > 0 ? sink::Value::of_int(window) : sink::Value{};
  plan.fields["loss.window_keeps"] = sink::Value::of_int(kept);
  plan.fields["loss.window_dilation"] = sink::Value::of_int(dilation);
  return sink::visibility(plan);
}

// The bounds hold every visible pair and never fall: checked for `v` against `visible` at length T.
template <class Visible>
void expect_bounds_hold(const sink::Visibility& v, int64_t T, Visible visible) {
  for (int64_t at = 1; at < T; ++at) {
    EXPECT_LE(evaluate(v.first_key, {{"i", at - 1}, {"T", T}}), evaluate(v.first_key, {{"i", at}, {"T", T}}));
    EXPECT_LE(evaluate(v.last_key, {{"i", at - 1}, {"T", T}}), evaluate(v.last_key, {{"i", at}, {"T", T}}));
    EXPECT_LE(evaluate(v.first_query, {{"j", at - 1}, {"T", T}}), evaluate(v.first_query, {{"j", at}, {"T", T}}));
    EXPECT_LE(evaluate(v.last_query, {{"j", at - 1}, {"T", T}}), evaluate(v.last_query, {{"j", at}, {"T", T}}));
  }
  for (int64_t j = 0; j < T; ++j) {
    const int64_t first = evaluate(v.first_query, {{"j", j}, {"T", T}});
    const int64_t last = evaluate(v.last_query, {{"j", j}, {"T", T}});
    EXPECT_LE(0, first);
    EXPECT_LT(last, T);
    for (int64_t i = 0; i < T; ++i)
      if (visible(i, j)) EXPECT_TRUE(first <= i && i <= last) << "key " << j << " seen by query " << i;
  }
}

// The rule's pairs and n against `visible` at length T.
template <class Visible>
void expect_mask(const sink::Visibility& v, int64_t T, Visible visible) {
  for (int64_t i = 0; i < T; ++i) {
    const int64_t lo = evaluate(v.first_key, {{"i", i}, {"T", T}});
    const int64_t hi = evaluate(v.last_key, {{"i", i}, {"T", T}});
    int64_t seen = 0;
    for (int64_t j = 0; j < T; ++j) {
      const bool in_rule = lo <= j && j <= hi && evaluate(v.pair, {{"i", i}, {"j", j}, {"T", T}}) > 0;
      EXPECT_EQ(visible(i, j), in_rule) << "query " << i << ", key " << j;
      seen += visible(i, j);
    }
    EXPECT_EQ(evaluate(v.key_count, {{"i", i + 1}, {"T", T}}), seen) << "n of query " << i;
  }
  expect_bounds_hold(v, T, visible);
}

TEST(Visibility, TheRulesAreExactlyTheMaskAndNCountsIt) {
  for (int64_t prefix : {0, 1, 3, 5})
    for (int64_t window : {0, 1, 2, 4})
      for (int64_t kept : {0, 1, 3})
        for (int64_t T = 1; T <= 8; ++T) {
          SCOPED_TRACE(testing::Message()
                       << "prefix " << prefix << ", window " << window << ", kept " << kept << ", T " << T);
          const sink::Visibility v = rule_of(prefix, window, kept);
          // A window's kept keys are checked per pair; every other rule is a range.
          EXPECT_EQ(v.checks_pairs(), window > 0 && kept > 0);
          if (kept == 0) EXPECT_EQ(v, sink::visibility(prefix, window));
          expect_mask(v, T, [&](int64_t i, int64_t j) { return visible(i, j, prefix, window, kept); });
        }
}

// A dilated window: the w keys i, i - d, ..., i - (w - 1) d, none before the sequence.
TEST(Visibility, ADilatedWindowSeesEveryDthKey) {
  for (int64_t window : {1, 2, 3, 5})
    for (int64_t dilation : {2, 3})
      for (int64_t T = 1; T <= 17; ++T) {
        SCOPED_TRACE(testing::Message() << "window " << window << ", dilation " << dilation << ", T " << T);
        const sink::Visibility v = rule_of(0, window, 0, dilation);
        EXPECT_TRUE(v.checks_pairs());
        expect_mask(v, T, [&](int64_t i, int64_t j) {
          return j <= i && (i - j) % dilation == 0 && (i - j) / dilation < window;
        });
      }
  EXPECT_EQ(rule_of(0, 4, 0, 1), sink::visibility(0, 4)) << "dilation 1 is the plain window";
  EXPECT_EQ(rule_of(0, 0, 0, 3), sink::visibility(0, 0)) << "without a window the dilation changes nothing";
}

TEST(Visibility, ARuleSaysWhatItIs) {
  EXPECT_EQ(sink::visibility(0, 0).describe(), "keys [0, i] of query i, queries [j, T - 1] of key j, n = i");
  const std::string kept = rule_of(0, 4, 2).describe();
  EXPECT_NE(kept.find("pairs where"), std::string::npos) << kept;
  EXPECT_NE(kept, rule_of(0, 4, 3).describe());
}

// The rule is the one thing a run carries of its visibility: the plan's prefix and window ride in it (the loss's
// prefix, an export's window), and it knows whether it is their range alone.
TEST(Visibility, ARuleCarriesThePrefixAndWindowItWasWrittenFrom) {
  for (int64_t prefix : {0, 3})
    for (int64_t window : {0, 4}) {
      SCOPED_TRACE(testing::Message() << "prefix " << prefix << ", window " << window);
      const sink::Visibility plain = rule_of(prefix, window, 0);
      EXPECT_EQ(plain.prefix, prefix);
      EXPECT_EQ(plain.window, window);
      EXPECT_TRUE(plain.of_range_alone());
      const sink::Visibility kept = rule_of(prefix, window, 2);
      EXPECT_EQ(kept.prefix, prefix);
      EXPECT_EQ(kept.window, window);
      EXPECT_EQ(kept.of_range_alone(), window == 0) << "kept keys change only a window";
    }
  const sink::Visibility dilated = rule_of(0, 4, 0, 3);
  EXPECT_EQ(dilated.window, 4) << "the window's keys, not the span its range covers";
  EXPECT_FALSE(dilated.of_range_alone());
  EXPECT_FALSE(sink::streaming_window(8, 1).of_range_alone());
  EXPECT_EQ(sink::streaming_window(8, 0), sink::visibility(0, 8));
}

}  // namespace
