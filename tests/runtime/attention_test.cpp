// reference_attention against oracles written as plain double loops over
// DESIGN.md §5:  x_ij = <q_i, k_j>/sqrt(dh) + g(i-j),  s_ij = score(x_ij, i, j),
// Z_i = normalize(s_i.) / alpha,  A_ij = s_ij / Z_i,  o_i = sum_j A_ij v_j (+ A_i* v*).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "runtime/attention/attention.h"
#include "runtime_test_util.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using sink::testing_variants::bin;
using sink::testing_variants::call;
using sink::testing_variants::num;
using sink::testing_variants::var;
using Op = sink::ExprNode::Op;

namespace {

using Score = std::function<double(double x, int i, int j)>;  // i, j 1-based; j = 0 is the k* column
using Mask = std::function<bool(int i, int j)>;               // 0-based query, key

struct Oracle {
  Score score;
  std::string normalize = "sum";
  double p = 1;
  double alpha = 1;
  Mask allowed = [](int i, int j) { return j <= i; };
  std::function<double(int i, int j)> bias;  // g, 0-based
};

struct OracleOut {
  std::vector<double> out;  // [B, H, T, dh] flattened
  std::vector<double> A;    // [B, H, T, S] flattened (S = T, or T + 1 with k* first)
};

double at(const torch::Tensor& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return t.index({a, b, c, d}).item<double>();
}

// Plain loops; k_star and v_star are [H, dh] (or [1, dh], broadcast) when given.
OracleOut oracle(const Oracle& o, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const std::optional<torch::Tensor>& k_star = {}, const std::optional<torch::Tensor>& v_star = {}) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dh = q.size(3);
  const int64_t S = T + (k_star ? 1 : 0);
  const double scale_qk = 1.0 / std::sqrt(double(dh));
  OracleOut r;
  r.out.assign(B * H * T * dh, 0.0);
  r.A.assign(B * H * T * S, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(S, 0.0);
        std::vector<bool> ok(S, false);
        int64_t col = 0;
        if (k_star) {
          const int64_t hs = k_star->size(0) == 1 ? 0 : h;
          double x = 0;
          for (int64_t c = 0; c < dh; ++c) x += at(q, b, h, i, c) * (*k_star)[hs][c].item<double>();
          s[0] = o.score(x * scale_qk, int(i + 1), 0);
          ok[0] = true;
          col = 1;
        }
        for (int64_t j = 0; j < T; ++j) {
          if (!o.allowed(int(i), int(j))) continue;
          double x = 0;
          for (int64_t c = 0; c < dh; ++c) x += at(q, b, h, i, c) * at(k, b, h, j, c);
          x *= scale_qk;
          if (o.bias) x += o.bias(int(i), int(j));
          s[col + j] = o.score(x, int(i + 1), int(j + 1));
          ok[col + j] = true;
        }
        double Z = 0;
        if (o.normalize == "sum") {
          for (int64_t j = 0; j < S; ++j) Z += ok[j] ? s[j] : 0;
        } else if (o.normalize == "none") {
          Z = 1;
        } else if (o.normalize == "abs_clamped") {
          for (int64_t j = 0; j < S; ++j) Z += ok[j] ? s[j] : 0;
          Z = std::max(std::fabs(Z), 1.0);
        } else {  // pnorm
          for (int64_t j = 0; j < S; ++j) Z += ok[j] ? std::pow(std::fabs(s[j]), o.p) : 0;
          Z = std::pow(Z, 1.0 / o.p);
        }
        for (int64_t j = 0; j < S; ++j) {
          const double A = ok[j] ? o.alpha * s[j] / Z : 0.0;
          r.A[((b * H + h) * T + i) * S + j] = A;
          for (int64_t c = 0; c < dh; ++c) {
            double value;
            if (k_star && j == 0) {
              if (!v_star) continue;
              value = (*v_star)[v_star->size(0) == 1 ? 0 : h][c].item<double>();
            } else {
              value = at(v, b, h, j - col, c);
            }
            r.out[((b * H + h) * T + i) * dh + c] += A * value;
          }
        }
      }
  return r;
}

std::vector<double> flat(const torch::Tensor& t) {
  auto c = t.to(torch::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t n = 0; n < got.size(); ++n)
    ASSERT_NEAR(got[n], want[n], tol * std::max(1.0, std::fabs(want[n]))) << what << " at flat index " << n;
}

struct Inputs {
  torch::Tensor q, k, v;
};

Inputs random_inputs(int64_t B, int64_t H, int64_t T, int64_t dh, double magnitude, uint64_t seed) {
  torch::manual_seed(seed);
  auto opt = torch::TensorOptions().dtype(torch::kDouble);
  return {torch::randn({B, H, T, dh}, opt) * magnitude, torch::randn({B, H, T, dh}, opt) * magnitude,
          torch::randn({B, H, T, dh}, opt)};
}

AttentionConfig config(sink::ExprNode score, const std::string& normalize = "sum") {
  AttentionConfig c;
  c.score = std::move(score);
  c.normalize = normalize;
  return c;
}

sink::ExprNode exp_qk() { return call("exp", {var("qk")}); }

}  // namespace

TEST(Attention, SoftmaxThreeByThreeByHand) {
  // One head, T = 3, d_head = 2: x = q k^T / sqrt(2), causal softmax by hand.
  const double qv[3][2] = {{1.0, 0.0}, {0.5, -1.0}, {2.0, 1.0}};
  const double kv[3][2] = {{0.0, 1.0}, {1.0, 1.0}, {-1.0, 0.5}};
  const double vv[3][2] = {{1.0, 2.0}, {3.0, -1.0}, {0.0, 4.0}};
  auto opt = torch::TensorOptions().dtype(torch::kDouble);
  auto q = torch::zeros({1, 1, 3, 2}, opt), k = torch::zeros({1, 1, 3, 2}, opt), v = torch::zeros({1, 1, 3, 2}, opt);
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 2; ++c) q[0][0][i][c] = qv[i][c], k[0][0][i][c] = kv[i][c], v[0][0][i][c] = vv[i][c];

  double A[3][3] = {}, out[3][2] = {};
  for (int i = 0; i < 3; ++i) {
    double x[3], m = -1e300, Z = 0;
    for (int j = 0; j <= i; ++j) {
      x[j] = (qv[i][0] * kv[j][0] + qv[i][1] * kv[j][1]) / std::sqrt(2.0);
      m = std::max(m, x[j]);
    }
    for (int j = 0; j <= i; ++j) Z += std::exp(x[j] - m);
    for (int j = 0; j <= i; ++j) A[i][j] = std::exp(x[j] - m) / Z;
    for (int j = 0; j <= i; ++j)
      for (int c = 0; c < 2; ++c) out[i][c] += A[i][j] * vv[j][c];
  }
  // Row 1 sees only key 1.
  EXPECT_DOUBLE_EQ(A[0][0], 1.0);

  for (bool softmax : {true, false}) {
    SCOPED_TRACE(softmax ? "softmax path" : "generic exp(qk) / sum path");
    auto cfg = config(exp_qk());
    cfg.shifted_exp = softmax;
    auto r = reference_attention(cfg, {q, k, v, {}, {}, {}}, true);
    ASSERT_EQ(r.out.sizes(), (std::vector<int64_t>{1, 1, 3, 2}));
    ASSERT_EQ(r.probe.sizes(), (std::vector<int64_t>{1, 1, 3, 3}));
    for (int i = 0; i < 3; ++i) {
      for (int c = 0; c < 2; ++c) EXPECT_NEAR(r.out[0][0][i][c].item<double>(), out[i][c], 1e-12) << i << "," << c;
      for (int j = 0; j < 3; ++j) EXPECT_NEAR(r.probe[0][0][i][j].item<double>(), A[i][j], 1e-12) << i << "," << j;
    }
  }
}

TEST(Attention, SoftmaxMultiHeadMatchesOracle) {
  auto in = random_inputs(2, 3, 5, 4, 1.0, 1);
  auto cfg = config(exp_qk());
  cfg.shifted_exp = true;
  auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
  Oracle o;
  o.score = [](double x, int, int) { return std::exp(x); };
  auto want = oracle(o, in.q, in.k, in.v);
  expect_close(flat(r.out), want.out, 1e-12, "out");
  expect_close(flat(r.probe), want.A, 1e-12, "probe");
}

TEST(Attention, SigmoidWithoutNormalization) {
  auto in = random_inputs(1, 2, 6, 4, 1.5, 2);
  auto cfg = config(call("sigmoid", {var("qk")}), "none");
  auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
  Oracle o;
  o.score = [](double x, int, int) { return 1.0 / (1.0 + std::exp(-x)); };
  o.normalize = "none";
  auto want = oracle(o, in.q, in.k, in.v);
  expect_close(flat(r.out), want.out, 1e-12, "out");
  // Unnormalized: rows do not sum to one (row i has i sigmoids in (0, 1)), the
  // probe is the proxy s / (sum s + 1e-8).
  std::vector<double> proxy = want.A;
  const int64_t T = 6;
  for (size_t row = 0; row < proxy.size() / T; ++row) {
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) sum += proxy[row * T + j];
    for (int64_t j = 0; j < T; ++j) proxy[row * T + j] /= sum + 1e-8;
  }
  expect_close(flat(r.probe), proxy, 1e-12, "probe");
  double last_row = 0;
  for (int64_t j = 0; j < T; ++j) last_row += want.A[(T - 1) * T + j];
  EXPECT_GT(last_row, 1.5);  // the oracle really is unnormalized
}

TEST(Attention, PNormNormalizer) {
  // score = qk can be negative; Z = (sum |s|^p)^(1/p).
  auto in = random_inputs(2, 2, 5, 4, 1.0, 3);
  for (double p : {1.0, 2.0, 3.5}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    auto cfg = config(var("qk"), "pnorm");
    cfg.pnorm_p = p;
    auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
    Oracle o;
    o.score = [](double x, int, int) { return x; };
    o.normalize = "pnorm";
    o.p = p;
    auto want = oracle(o, in.q, in.k, in.v);
    expect_close(flat(r.out), want.out, 1e-12, "out");
    // Signed scores: the probe is |s| / sum |s|.
    std::vector<double> proxy(want.A.size());
    const int64_t T = 5;
    for (size_t row = 0; row < proxy.size() / T; ++row) {
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) sum += std::fabs(want.A[row * T + j]);
      for (int64_t j = 0; j < T; ++j) proxy[row * T + j] = std::fabs(want.A[row * T + j]) / sum;
    }
    expect_close(flat(r.probe), proxy, 1e-12, "probe");
  }
}

TEST(Attention, AbsClampedNormalizer) {
  // Z = max(|sum s|, 1): small scores (|sum| < 1) are left alone, large ones divided.
  for (double magnitude : {0.05, 3.0}) {
    SCOPED_TRACE("magnitude " + std::to_string(magnitude));
    auto in = random_inputs(1, 2, 6, 4, magnitude, 4);
    auto cfg = config(var("qk"), "abs_clamped");
    auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, false);
    Oracle o;
    o.score = [](double x, int, int) { return x; };
    o.normalize = "abs_clamped";
    auto want = oracle(o, in.q, in.k, in.v);
    expect_close(flat(r.out), want.out, 1e-12, "out");
  }
  // The clamp matters: with tiny scores the result equals normalize = none.
  auto in = random_inputs(1, 1, 4, 4, 0.05, 5);
  auto clamped = reference_attention(config(var("qk"), "abs_clamped"), {in.q, in.k, in.v, {}, {}, {}}, false);
  auto none = reference_attention(config(var("qk"), "none"), {in.q, in.k, in.v, {}, {}, {}}, false);
  EXPECT_TRUE(torch::allclose(clamped.out, none.out, 0, 1e-14));
}

TEST(Attention, ScaleAlpha) {
  auto in = random_inputs(2, 2, 5, 4, 1.0, 6);
  for (bool softmax : {true, false}) {
    SCOPED_TRACE(softmax ? "softmax" : "generic");
    auto cfg = config(exp_qk());
    cfg.shifted_exp = softmax;
    cfg.scale = 2.5;
    auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
    Oracle o;
    o.score = [](double x, int, int) { return std::exp(x); };
    o.alpha = 2.5;
    auto want = oracle(o, in.q, in.k, in.v);
    expect_close(flat(r.out), want.out, 1e-12, "out");
    // Rows of A sum to alpha.
    auto rows = r.probe.sum(-1);
    EXPECT_TRUE(torch::allclose(rows, torch::full_like(rows, 2.5), 0, 1e-12));
  }
  // Sigmoid, normalized, alpha = 0.5.
  auto cfg = config(call("sigmoid", {var("qk")}));
  cfg.scale = 0.5;
  auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, false);
  Oracle o;
  o.score = [](double x, int, int) { return 1.0 / (1.0 + std::exp(-x)); };
  o.alpha = 0.5;
  expect_close(flat(r.out), oracle(o, in.q, in.k, in.v).out, 1e-12, "sigmoid out");
}

TEST(Attention, KStarColumnWithZeroAndNonZeroVStar) {
  const int64_t H = 2, dh = 4, T = 5;
  auto in = random_inputs(2, H, T, dh, 1.0, 7);
  auto opt = torch::TensorOptions().dtype(torch::kDouble);
  auto k_star = torch::randn({H, dh}, opt) * 2.0;
  auto v_zero = torch::zeros({H, dh}, opt);
  auto v_star = torch::randn({H, dh}, opt) * 3.0;
  for (bool softmax : {true, false}) {
    for (int variant = 0; variant < 3; ++variant) {  // v* zero, v* per head, v* shared [1, dh] with k* shared
      SCOPED_TRACE(std::string(softmax ? "softmax" : "generic") + " variant " + std::to_string(variant));
      auto cfg = config(exp_qk());
      cfg.shifted_exp = softmax;
      torch::Tensor ks = variant == 2 ? k_star.narrow(0, 0, 1) : k_star;
      torch::Tensor vs = variant == 0 ? v_zero : variant == 1 ? v_star : v_star.narrow(0, 1, 1);
      auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, ks, vs}, true);
      Oracle o;
      o.score = [](double x, int, int) { return std::exp(x); };
      auto want = oracle(o, in.q, in.k, in.v, ks, vs);
      ASSERT_EQ(r.probe.size(3), T + 1);
      expect_close(flat(r.out), want.out, 1e-12, "out");
      expect_close(flat(r.probe), want.A, 1e-12, "probe (k* column first)");
      // The k* column is visible to the first query too: its weight is < 1.
      EXPECT_LT(r.probe[0][0][0][1].item<double>(), 1.0);
    }
  }
  // With v* = 0 the k* column only takes mass away: out = (1 - A*) * plain attention on row 1
  // (query 1 sees key 1 and k* only).
  auto cfg = config(exp_qk());
  cfg.shifted_exp = true;
  auto with = reference_attention(cfg, {in.q, in.k, in.v, {}, k_star, v_zero}, true);
  auto a_star = with.probe.index({0, 0, 0, 0}).item<double>();
  for (int64_t c = 0; c < dh; ++c)
    EXPECT_NEAR(with.out[0][0][0][c].item<double>(), (1 - a_star) * in.v[0][0][0][c].item<double>(), 1e-12);
}

TEST(Attention, AllowedPairsPrefixAndWindow) {
  const int T = 7;
  for (int prefix : {0, 1, 3}) {
    for (int window : {0, 1, 2, 4}) {
      auto a = allowed_pairs(T, prefix, window);
      for (int i = 0; i < T; ++i)
        for (int j = 0; j < T; ++j) {
          bool want = j <= i || (i < prefix && j < prefix);
          if (window > 0) want = want && (i - j < window);
          EXPECT_EQ(a[i][j].item<bool>(), want)
              << "prefix " << prefix << " window " << window << " i " << i << " j " << j;
        }
    }
  }
}

TEST(Attention, PrefixAndWindowMasks) {
  const int64_t T = 6;
  auto in = random_inputs(1, 2, T, 4, 1.0, 8);
  struct Case {
    int prefix, window;
  };
  for (Case mc : {Case{3, 0}, Case{0, 2}, Case{3, 2}}) {
    for (bool softmax : {true, false}) {
      SCOPED_TRACE("prefix " + std::to_string(mc.prefix) + " window " + std::to_string(mc.window) +
                   (softmax ? " softmax" : " generic"));
      auto cfg = config(exp_qk());
      cfg.shifted_exp = softmax;
      cfg.rule = sink::visibility(mc.prefix, mc.window);
      auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
      Oracle o;
      o.score = [](double x, int, int) { return std::exp(x); };
      const int p = mc.prefix, w = mc.window;
      o.allowed = [p, w](int i, int j) {
        bool ok = j <= i || (i < p && j < p);  // hand-written, not allowed_pairs
        return w > 0 ? ok && i - j < w : ok;
      };
      auto want = oracle(o, in.q, in.k, in.v);
      expect_close(flat(r.out), want.out, 1e-12, "out");
      expect_close(flat(r.probe), want.A, 1e-12, "probe");
    }
  }
  // Inside the prefix, query 1 attends to a later token.
  auto cfg = config(exp_qk());
  cfg.shifted_exp = true;
  cfg.rule = sink::visibility(3, 0);
  auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
  EXPECT_GT(r.probe[0][0][0][2].item<double>(), 0.0);
  EXPECT_EQ(r.probe[0][0][0][3].item<double>(), 0.0);
}

TEST(Attention, ScoreUsingPositions) {
  // s = exp(qk - 0.3 * (i - j)) * (1 + j / i), normalized by the sum.
  auto in = random_inputs(2, 2, 6, 4, 1.0, 9);
  auto i = var("i"), j = var("j");
  auto decay = bin(Op::Sub, var("qk"), bin(Op::Mul, num(0.3), bin(Op::Sub, i, j)));
  auto score = bin(Op::Mul, call("exp", {decay}), bin(Op::Add, num(1), bin(Op::Div, j, i)));
  auto cfg = config(score);
  auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
  Oracle o;
  o.score = [](double x, int ii, int jj) { return std::exp(x - 0.3 * (ii - jj)) * (1.0 + double(jj) / ii); };
  auto want = oracle(o, in.q, in.k, in.v);
  expect_close(flat(r.out), want.out, 1e-12, "out");
  expect_close(flat(r.probe), want.A, 1e-12, "probe");

  // With a k* column, the column's j is 0.
  auto opt = torch::TensorOptions().dtype(torch::kDouble);
  auto ks = torch::randn({2, 4}, opt), vs = torch::randn({2, 4}, opt);
  auto r2 = reference_attention(cfg, {in.q, in.k, in.v, {}, ks, vs}, true);
  auto want2 = oracle(o, in.q, in.k, in.v, ks, vs);
  expect_close(flat(r2.out), want2.out, 1e-12, "out with k*");
}

TEST(Attention, KeyCountByHand) {
  // s = sigmoid(qk - log n), unnormalized: n, the keys query i sees, counted here from the hand-written mask.
  const int T = 6;
  auto in = random_inputs(1, 2, T, 4, 1.0, 10);
  auto cfg = config(call("sigmoid", {bin(Op::Sub, var("qk"), call("log", {var("n")}))}));
  cfg.normalize = "none";
  struct Case {
    int prefix, window;
  };
  for (Case mc : {Case{0, 0}, Case{0, 3}, Case{4, 0}, Case{9, 0}, Case{3, 2}}) {
    SCOPED_TRACE("prefix " + std::to_string(mc.prefix) + " window " + std::to_string(mc.window));
    cfg.rule = sink::visibility(mc.prefix, mc.window);
    auto r = reference_attention(cfg, {in.q, in.k, in.v, {}, {}, {}}, true);
    Oracle o;
    const int p = mc.prefix, w = mc.window;
    o.allowed = [p, w](int i, int j) {
      bool ok = j <= i || (i < p && j < p);
      return w > 0 ? ok && i - j < w : ok;
    };
    o.normalize = "none";
    o.score = [mask = o.allowed](double x, int i, int) {
      int n = 0;
      for (int j = 0; j < T; ++j) n += mask(i - 1, j);
      return 1 / (1 + std::exp(-(x - std::log(n))));
    };
    auto want = oracle(o, in.q, in.k, in.v);
    expect_close(flat(r.out), want.out, 1e-12, "out");
  }
}

TEST(Attention, PositionBiasIsAddedBeforeTheScore) {
  auto in = random_inputs(1, 2, 5, 4, 1.0, 10);
  // ALiBi-like g(i - j) = -0.5 (i - j), broadcast [1, 1, T, T].
  const int64_t T = 5;
  auto g = torch::zeros({1, 1, T, T}, torch::kDouble);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) g[0][0][i][j] = -0.5 * double(std::abs(i - j));
  for (bool softmax : {true, false}) {
    auto cfg = config(exp_qk());
    cfg.shifted_exp = softmax;
    auto r = reference_attention(cfg, {in.q, in.k, in.v, g, {}, {}}, false);
    Oracle o;
    o.score = [](double x, int, int) { return std::exp(x); };
    o.bias = [](int i, int j) { return -0.5 * std::abs(i - j); };
    expect_close(flat(r.out), oracle(o, in.q, in.k, in.v).out, 1e-12, softmax ? "softmax" : "generic");
  }
}

TEST(Attention, SoftmaxPathEqualsGenericPathOnModerateScores) {
  auto in = random_inputs(2, 3, 8, 8, 2.0, 11);
  auto soft = config(exp_qk());
  soft.shifted_exp = true;
  auto generic = config(exp_qk());
  generic.shifted_exp = false;
  auto a = reference_attention(soft, {in.q, in.k, in.v, {}, {}, {}}, true);
  auto b = reference_attention(generic, {in.q, in.k, in.v, {}, {}, {}}, true);
  EXPECT_TRUE(torch::allclose(a.out, b.out, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(a.probe, b.probe, 1e-12, 1e-12));
  // Gradients agree too.
  auto q1 = in.q.clone().requires_grad_(true), q2 = in.q.clone().requires_grad_(true);
  auto w = torch::randn_like(a.out);
  (reference_attention(soft, {q1, in.k, in.v, {}, {}, {}}, false).out * w).sum().backward();
  (reference_attention(generic, {q2, in.k, in.v, {}, {}, {}}, false).out * w).sum().backward();
  EXPECT_TRUE(torch::allclose(q1.grad(), q2.grad(), 1e-10, 1e-12));
}

TEST(Attention, SoftmaxPathStaysFiniteOnHugeScores) {
  // x ~ 1e4: exp overflows double (max ~ exp(709)); max-subtraction does not.
  const int64_t T = 6, dh = 4;
  auto in = random_inputs(1, 2, T, dh, 100.0, 12);  // <q, k> / 2 ~ 1e4
  auto x = torch::matmul(in.q, in.k.transpose(-2, -1)) / std::sqrt(double(dh));
  ASSERT_GT(x.abs().max().item<double>(), 5e3);

  auto soft = config(exp_qk());
  soft.shifted_exp = true;
  auto r = reference_attention(soft, {in.q, in.k, in.v, {}, {}, {}}, true);
  EXPECT_TRUE(torch::isfinite(r.out).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(r.probe).all().item<bool>());
  auto rows = r.probe.sum(-1);
  EXPECT_TRUE(torch::allclose(rows, torch::ones_like(rows), 0, 1e-12));

  // Oracle: max-subtracted by hand.
  std::vector<double> want_out;
  {
    // Hand softmax with max subtraction per row.
    const int64_t H = 2;
    want_out.assign(H * T * dh, 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> xs(i + 1);
        double m = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          xs[j] = x[0][h][i][j].item<double>();
          m = std::max(m, xs[j]);
        }
        double Z = 0;
        for (auto xv : xs) Z += std::exp(xv - m);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < dh; ++c)
            want_out[(h * T + i) * dh + c] += std::exp(xs[j] - m) / Z * in.v[0][h][j][c].item<double>();
      }
  }
  expect_close(flat(r.out), want_out, 1e-9, "out");

  // The same scores through the generic path: exp's clamp at 88 (every backend's, plan/score_functions.cpp)
  // keeps them finite, but every logit past 88 weighs the same there, which is not softmax: that is why the
  // softmax form exists.
  auto generic = config(exp_qk());
  auto g = reference_attention(generic, {in.q, in.k, in.v, {}, {}, {}}, false);
  EXPECT_TRUE(torch::isfinite(g.out).all().item<bool>());
  std::vector<double> generic_out = flat(g.out);
  double apart = 0;
  for (size_t n = 0; n < want_out.size(); ++n) apart = std::max(apart, std::abs(generic_out[n] - want_out[n]));
  EXPECT_GT(apart, 1e-3) << "the clamped generic path should differ from softmax on these scores";

  // Float32 too (the training dtype).
  auto rf = reference_attention(
      soft, {in.q.to(torch::kFloat), in.k.to(torch::kFloat), in.v.to(torch::kFloat), {}, {}, {}}, true);
  EXPECT_TRUE(torch::isfinite(rf.out).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(rf.probe).all().item<bool>());
  // Backward through the softmax path stays finite as well.
  auto q = in.q.clone().requires_grad_(true);
  reference_attention(soft, {q, in.k, in.v, {}, {}, {}}, false).out.sum().backward();
  EXPECT_TRUE(torch::isfinite(q.grad()).all().item<bool>());
}
