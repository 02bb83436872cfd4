// Sink metric oracles on hand-built attention matrices.
#include <gtest/gtest.h>

#include "plan/normalizers.h"
#include "runtime/attention/attention.h"
#include "runtime/measurement/measure.h"

using namespace sink;
using namespace sink::rt;

namespace {

// One layer, one sequence: A is [H, T, S].
std::vector<torch::Tensor> layer(const torch::Tensor& A) { return {A.unsqueeze(0)}; }

}  // namespace

TEST(Metrics, AlphaIsMeanOverQueriesThatSeeTheKey) {
  // T = 3, causal. Head 0 puts 0.9 on token 1 from every query; head 1 attends to itself.
  auto A = torch::zeros({2, 3, 3}, torch::kDouble);
  A[0][0][0] = 1.0;
  A[0][1][0] = 0.9, A[0][1][1] = 0.1;
  A[0][2][0] = 0.9, A[0][2][1] = 0.05, A[0][2][2] = 0.05;
  for (int i = 0; i < 3; ++i) A[1][i][i] = 1.0;
  auto allowed = allowed_pairs(3, 0, 0);
  auto r = sink_metrics(layer(A), allowed, {1, 2}, 0.3, false);
  // alpha_1: head 0 (1 + .9 + .9)/3 = .933 > .3; head 1: 1/3 = .333 > .3 -> 100 %.
  EXPECT_NEAR(r.alpha[0][0], (1.0 + 0.9 + 0.9) / 3, 1e-12);
  EXPECT_NEAR(r.alpha[0][1], 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(r.sink.at(1), 100.0);
  // alpha_2: head 0 (0.1 + 0.05)/2 = .075; head 1: (1 + 0)/2 = .5 -> 50 %.
  EXPECT_DOUBLE_EQ(r.sink.at(2), 50.0);
  auto strict = sink_metrics(layer(A), allowed, {1}, 0.34, false);
  EXPECT_DOUBLE_EQ(strict.sink.at(1), 50.0);
}

TEST(Metrics, WindowCountsOnlyQueriesInsideTheWindow) {
  // Window 2: key 1 is seen by queries 1 and 2 only.
  auto A = torch::zeros({1, 4, 4}, torch::kDouble);
  A[0][0][0] = 1.0;
  A[0][1][0] = 0.5, A[0][1][1] = 0.5;
  A[0][2][1] = 0.5, A[0][2][2] = 0.5;
  A[0][3][2] = 0.5, A[0][3][3] = 0.5;
  auto r = sink_metrics(layer(A), allowed_pairs(4, 0, 2), {1}, 0.3, false);
  EXPECT_NEAR(r.alpha[0][0], 0.75, 1e-12);  // (1 + .5) / 2, not / 4
}

TEST(Metrics, SinkStarReadsTheExtraColumn) {
  // S = T + 1 with the k* column first; every query gives it 0.8.
  const int T = 4;
  auto A = torch::zeros({2, T, T + 1}, torch::kDouble);
  for (int i = 0; i < T; ++i) {
    A[0][i][0] = 0.8, A[0][i][i + 1] = 0.2;
    A[1][i][0] = 0.1, A[1][i][1] = 0.9;
  }
  auto allowed = torch::cat({torch::ones({T, 1}, torch::kBool), allowed_pairs(T, 0, 0)}, 1);
  auto r = sink_metrics(layer(A), allowed, {1}, 0.3, true);
  EXPECT_DOUBLE_EQ(r.sink_star, 50.0);
  EXPECT_NEAR(r.alpha_star[0][0], 0.8, 1e-12);
  // Token 1: head 0 gets .2 from query 1 only -> .05; head 1 gets .9 -> .9.
  EXPECT_DOUBLE_EQ(r.sink.at(1), 50.0);
}

TEST(Metrics, ProxyScoresForUnnormalizedAttention) {
  sink::AttentionConfig cfg;
  cfg.normalize = "none";
  auto allowed = allowed_pairs(2, 0, 0);
  // Non-negative scores: s / (sum s + 1e-8).
  auto s = torch::tensor({{0.5, 0.0}, {0.3, 0.1}}, torch::kDouble);
  auto p = metric_attention(cfg, s, s, allowed);
  EXPECT_NEAR(p[1][0].item<double>(), 0.3 / (0.4 + 1e-8), 1e-12);
  EXPECT_NEAR(p[0][0].item<double>(), 0.5 / (0.5 + 1e-8), 1e-12);
  // Signed scores: |s| / sum |s|.
  auto signed_s = torch::tensor({{2.0, 0.0}, {-3.0, 1.0}}, torch::kDouble);
  auto q = metric_attention(cfg, signed_s, signed_s, allowed);
  EXPECT_NEAR(q[1][0].item<double>(), 0.75, 1e-12);
  EXPECT_NEAR(q[1][1].item<double>(), 0.25, 1e-12);
  // Sum-normalized non-negative: A itself (alpha scale kept).
  cfg.normalize = "sum";
  auto A = torch::tensor({{2.0, 0.0}, {1.0, 1.0}}, torch::kDouble);
  EXPECT_TRUE(torch::equal(metric_attention(cfg, A, A, allowed), A));
}

TEST(Metrics, TheProxyRuleRecordedIsTheOneTheMeasurementFollows) {
  // plan/normalizers.h's sink_from_proxy, which every evaluation records and the results read for runs recorded
  // before, against metric_attention itself: with non-negative scores, A is read as computed exactly where the
  // rule says no proxy.
  auto allowed = allowed_pairs(2, 0, 0);
  auto s = torch::tensor({{0.5, 0.0}, {0.3, 0.1}}, torch::kDouble);
  auto A = s * 3;  // not s's proxy, s / sum s
  for (const auto& n : sink::normalizers()) {
    sink::AttentionConfig cfg;
    cfg.normalize = n.name;
    EXPECT_EQ(sink::sink_from_proxy(n.name, false), !torch::equal(metric_attention(cfg, s, A, allowed), A)) << n.name;
    EXPECT_TRUE(sink::sink_from_proxy(n.name, true)) << n.name << ": differential attention reads |A1 - lambda A2|";
  }
  SinkReport r;
  EXPECT_EQ(report_json(r)["sink_from_proxy"], false);
  r.sink_from_proxy = true;
  EXPECT_EQ(report_json(r)["sink_from_proxy"], true);
}

TEST(Metrics, MasksCombine) {
  auto m = allowed_pairs(5, 3, 0);  // prefix 3: the first three see each other
  EXPECT_TRUE(m[0][2].item<bool>());
  EXPECT_FALSE(m[0][3].item<bool>());
  EXPECT_TRUE(m[4][0].item<bool>());
  auto w = allowed_pairs(5, 0, 2);
  EXPECT_TRUE(w[4][3].item<bool>());
  EXPECT_FALSE(w[4][2].item<bool>());
  auto both = allowed_pairs(6, 3, 2);
  EXPECT_TRUE(both[0][1].item<bool>());   // prefix, within window
  EXPECT_FALSE(both[5][3].item<bool>());  // outside the window
}
