// The normaliser table (plan/normalizers.h) on its own: each row's Z against
// the formula written independently here, its slope (what the kernels'
// backward uses) against central differences and against autograd through
// term and finish (what the reference path uses), the scale-free rows'
// homogeneity, and the schema reading the table (the checker:
// tests/front/normalizers_checker_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <torch/torch.h>

#include "plan/normalizers.h"
#include "plan/schema.h"
#include "runtime/attention/score.h"

namespace {

using sink::NormalizerForm;
using sink::rt::eval_expr;

// What the expressions read of a row of scores s, under the online form's unit (1: unshifted): the logit x
// with s = e^x unit, where a row reads it (the scores are then positive).
sink::rt::NamedTensors column(const torch::Tensor& s, double unit = 1) {
  return {{"s", s}, {"x", torch::log(s / unit)}, {"unit", torch::full({}, unit, s.options())}};
}

// Z = finish(sum_j term(s_j)) of one row of scores.
torch::Tensor row_z(const NormalizerForm& n, const torch::Tensor& s, double unit = 1) {
  auto P = eval_expr(n.term, column(s, unit)).expand_as(s).sum();
  return eval_expr(n.finish, {{"P", P}, {"unit", torch::full({}, unit, s.options())}});
}

// A row over the logit x itself (softpick) is defined for exp(qk), positive scores, alone.
bool over_logit(const sink::Normalizer& n) {
  return sink::mentions_var(n.term, "x") || sink::mentions_var(n.weight, "x");
}

// Each normaliser's Z as its formula says, written here apart from the table; none for a row not yet known.
std::optional<double> formula_z(const std::string& name, const torch::Tensor& s, double p) {
  if (name == "sum") return s.sum().item<double>();
  if (name == "none") return 1.0;
  if (name == "abs_clamped") return std::max(std::abs(s.sum().item<double>()), 1.0);
  if (name == "pnorm") return std::pow(s.abs().pow(p).sum().item<double>(), 1 / p);
  if (name == "count") return static_cast<double>(s.numel());
  if (name == "softpick") return (s - 1).abs().sum().item<double>() + 1e-8;  // the authors' eps
  return std::nullopt;
}

// Rows of scores: positive, near 1 (softpick's e^x - 1 near 0), signed, with an exact zero, and one of a single key.
std::vector<torch::Tensor> score_rows() {
  auto d = torch::kDouble;
  return {torch::tensor({0.3, 1.7, 0.05, 2.4}, d),
          torch::tensor({1.2, 0.9, 1.05}, d),
          torch::tensor({-0.8, 1.1, 0.6, -0.2, 0.9}, d),
          torch::tensor({0.0, 0.7, 1.3}, d),
          torch::tensor({0.45}, d),
          torch::tensor({-2.5, 0.5, -0.25}, d)};
}

std::vector<double> parameters_of(const sink::Normalizer& n) {
  return n.parameters.empty() ? std::vector<double>{1} : std::vector<double>{0.5, 1, 3};
}

// `check` on every direct row, each of its parameter values and every row of scores, traced.
void for_each_case(
    const std::function<void(const sink::Normalizer&, double, const NormalizerForm&, const torch::Tensor&)>& check) {
  for (const auto& row : sink::normalizers()) {
    for (double p : parameters_of(row)) {
      const NormalizerForm n = sink::normalizer_form(row, p);
      for (const auto& s : score_rows()) {
        if (over_logit(row) && (s <= 0).any().item<bool>()) continue;
        SCOPED_TRACE(row.name + " p=" + std::to_string(p) + " s=" + torch::str(s));
        check(row, p, n, s);
      }
    }
  }
}

TEST(Normalizers, EveryRowIsItsFormula) {
  for_each_case([](const sink::Normalizer& row, double p, const NormalizerForm& n, const torch::Tensor& s) {
    auto expected = formula_z(row.name, s, p);
    ASSERT_TRUE(expected) << "normaliser '" << row.name << "' has no independent formula in this test: add one";
    EXPECT_NEAR(row_z(n, s).item<double>(), *expected, 1e-12 * std::max(1.0, std::abs(*expected)));
  });
}

TEST(Normalizers, SlopesAgreeWithFiniteDifferencesAndAutograd) {
  const double h = 1e-6;
  for_each_case([&](const sink::Normalizer&, double, const NormalizerForm& n, const torch::Tensor& s0) {
    auto s = s0.clone().requires_grad_(true);
    auto Z = row_z(n, s);
    auto P = eval_expr(n.term, column(s0)).expand_as(s0).sum();
    // A constant Z (none) is no function of s at all: its gradient is 0.
    auto autograd = Z.requires_grad() ? torch::autograd::grad({Z}, {s}, {}, false, false, true)[0] : torch::Tensor();
    if (!autograd.defined()) autograd = torch::zeros_like(s0);
    auto values = column(s0);
    values.push_back({"Z", Z.detach()}), values.push_back({"P", P});
    auto slope = eval_expr(n.slope, values).expand_as(s0);
    auto weight_slope = eval_expr(n.weight_slope, values).expand_as(s0);
    for (int64_t j = 0; j < s0.numel(); ++j) {
      if (s0[j].item<double>() == 0) {
        // A zero score is an exp that underflowed: the slope there is 0 (the p-norm's limit through ds/dx = s).
        continue;
      }
      auto moved = [&](double by) {
        auto t = s0.clone();
        t[j] += by;
        return t;
      };
      const double central = (row_z(n, moved(h)).item<double>() - row_z(n, moved(-h)).item<double>()) / (2 * h);
      EXPECT_NEAR(slope[j].item<double>(), central, 1e-6 * std::max(1.0, std::abs(central))) << "key " << j;
      EXPECT_NEAR(autograd[j].item<double>(), central, 1e-6 * std::max(1.0, std::abs(central))) << "key " << j;
      auto weight = [&](const torch::Tensor& t) {
        return eval_expr(n.weight, column(t)).expand_as(t)[j].item<double>();
      };
      const double weight_central = (weight(moved(h)) - weight(moved(-h))) / (2 * h);
      EXPECT_NEAR(weight_slope[j].item<double>(), weight_central, 1e-6 * std::max(1.0, std::abs(weight_central)))
          << "weight, key " << j;
    }
  });
}

TEST(Normalizers, ScaleFreeRowsAreHomogeneousAndTheirSlopesReadNoP) {
  // exp(qk) runs as exp(qk - m) under a scale-free row: A must not see m, and the row state of the shifted
  // terms is rescaled by corr^term_degree as m grows. The backward stores m where P would be, so the slope
  // must not read P.
  int scale_free = 0;
  for (const auto& row : sink::normalizers()) {
    if (!row.scale_free) continue;
    ++scale_free;
    EXPECT_FALSE(sink::mentions_var(row.slope, "P")) << row.name;
    for (double p : parameters_of(row)) {
      const NormalizerForm n = sink::normalizer_form(row, p);
      auto s = torch::tensor({0.3, 1.7, 0.05, 2.4}, torch::kDouble);
      const double c = 0.0371;
      // Scaled with unit: (c s, c unit), the logit x unchanged.
      EXPECT_NEAR(row_z(n, s * c, c).item<double>(), c * row_z(n, s).item<double>(), 1e-12) << row.name << " p=" << p;
      auto term = [&](const torch::Tensor& x, double unit) { return eval_expr(n.term, column(x, unit)).expand_as(x); };
      EXPECT_TRUE(torch::allclose(term(s * c, c), std::pow(c, n.term_degree) * term(s, 1), 1e-12, 0)) << row.name;
    }
  }
  EXPECT_GE(scale_free, 3);  // sum, pnorm and softpick at least
}

TEST(Normalizers, TheSchemaOffersEveryRowWithItsParameters) {
  const sink::Field* f = sink::find_field("attention.normalize");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->spec.forms.size(), sink::normalizers().size());
  for (const auto& row : sink::normalizers()) {
    const auto* form = f->spec.form(row.name);
    ASSERT_TRUE(form) << row.name;
    ASSERT_EQ(form->params.size(), row.parameters.size()) << row.name;
    for (size_t k = 0; k < row.parameters.size(); ++k) EXPECT_EQ(form->params[k].name, row.parameters[k].name);
  }
}

}  // namespace
