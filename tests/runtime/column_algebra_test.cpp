// The column algebra (plan/column_algebra.h), which every kernel emitter prints, against the row it stands for, in
// double: the online fold, a column at a time as the kernels fold them, gives each scale-free normaliser's direct Z
// and A; a column's logit gradient, from the backward's row statistics, is autograd's through A = alpha w / Z and
// agrees with central differences, online and direct; dx_scale scales it; the safe divisor keeps a NaN and only
// a near-zero Z becomes 1. (The kernels themselves are tested against the reference path: tests/kernels/.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <torch/torch.h>

#include "plan/column_algebra.h"
#include "runtime/attention/score.h"

namespace {

using sink::ColumnAlgebra;
using sink::ExprNode;
using sink::NormalizerForm;
using sink::rt::eval_expr;
using sink::rt::NamedTensors;

torch::Tensor number(double v) { return torch::full({}, v, torch::kDouble); }
double value(const ExprNode& e, const NamedTensors& values) { return eval_expr(e, values).item<double>(); }

// Rows of logits x (scores e^x): mixed signs, one near 0 (softpick's e^x - 1 there), one key alone.
std::vector<std::vector<double>> logit_rows() {
  return {{0.3, -1.2, 2.5, 0.7}, {-0.4, -3.0, 1.1}, {0.02, -0.01, 0.3, -0.2}, {1.6}, {0.05, 2.9, -2.2, 0.4, 1.3}};
}

std::vector<double> parameters_of(const sink::Normalizer& n) {
  return n.parameters.empty() ? std::vector<double>{1} : std::vector<double>{0.5, 2, 3};
}

// L = sum_j c_j A_j of a row of logits, A = alpha w(e^x) / Z(e^x), as the normaliser's expressions say, unshifted.
torch::Tensor direct_attention(const NormalizerForm& n, double alpha, const torch::Tensor& x) {
  const NamedTensors column = {{"s", torch::exp(x)}, {"x", x}, {"unit", number(1)}};
  const torch::Tensor P = eval_expr(n.term, column).expand_as(x).sum();
  const torch::Tensor Z = eval_expr(n.finish, {{"P", P}, {"unit", number(1)}});
  return alpha * eval_expr(n.weight, column).expand_as(x) / Z;
}

TEST(ColumnAlgebra, TheOnlineFoldGivesTheDirectRow) {
  int folded = 0;
  for (const auto& row : sink::normalizers()) {
    if (!row.scale_free) continue;
    for (double p : parameters_of(row)) {
      const NormalizerForm n = sink::normalizer_form(row, p);
      const ColumnAlgebra c = sink::column_algebra(n, 0.75, true);
      for (const auto& logits : logit_rows()) {
        SCOPED_TRACE(row.name + " p=" + std::to_string(p) + " x=" + torch::str(torch::tensor(logits)));
        // A column at a time: the shift grows to the row's maximum so far, the weights and the sum of terms so far
        // rescale, and the column's term and weight join them (kernels/cuda/columns.cuh's fold_column).
        double m = row.shift_floor, P = 0;
        std::vector<double> weights;
        for (double x : logits) {
          const double m_new = std::max(m, x);
          const double r = value(c.rescale, {{"m", number(m)}, {"m_new", number(m_new)}});
          P *= value(c.term_rescale, {{"r", number(r)}});
          for (double& w : weights) w *= r;
          const NamedTensors column = {
              {"s", number(std::exp(x - m_new))}, {"x", number(x)}, {"unit", number(std::exp(-m_new))}};
          P += value(n.term, column), weights.push_back(value(n.weight, column));
          m = m_new;
        }
        const double Z =
            value(c.safe_divisor, {{"Z", eval_expr(c.row_finish, {{"P", number(P)}, {"shift", number(m)}})}});
        const torch::Tensor expected = direct_attention(n, 0.75, torch::tensor(logits, torch::kDouble));
        for (size_t j = 0; j < logits.size(); ++j)
          EXPECT_NEAR(0.75 * weights[j] / Z, expected[j].item<double>(), 1e-12) << "key " << j;
        ++folded;
      }
    }
  }
  EXPECT_GE(folded, 20);  // sum, p-norm and softpick at least
}

TEST(ColumnAlgebra, TheLogitGradientIsAutogradsAndCentralDifferences) {
  const double alpha = 0.75, h = 1e-6;
  int checked = 0;
  for (const auto& row : sink::normalizers()) {
    for (bool online : {false, true}) {
      if (online && !row.scale_free) continue;
      for (double p : parameters_of(row)) {
        const NormalizerForm n = sink::normalizer_form(row, p);
        const ColumnAlgebra c = sink::column_algebra(n, alpha, online);
        for (const auto& logits : logit_rows()) {
          SCOPED_TRACE(row.name + (online ? " online" : " direct") + " p=" + std::to_string(p));
          const torch::Tensor x0 = torch::tensor(logits, torch::kDouble);
          const torch::Tensor dA = torch::linspace(-1.3, 0.9, x0.numel(), torch::kDouble);
          // The oracle: autograd and central differences of L = sum_j dA_j A_j.
          const torch::Tensor x = x0.clone().requires_grad_(true);
          const torch::Tensor L = (dA * direct_attention(n, alpha, x)).sum();
          const torch::Tensor autograd = L.requires_grad() ? torch::autograd::grad({L}, {x})[0] : torch::zeros_like(x0);
          // The forward's statistics, Z and m (online: the row's maximum, at least the shift floor) or P.
          const double m = online ? std::max(row.shift_floor, x0.max().item<double>()) : 0;
          const NamedTensors forward = {{"s", torch::exp(x0 - m)}, {"x", x0}, {"unit", number(std::exp(-m))}};
          const torch::Tensor P = eval_expr(n.term, forward).expand_as(x0).sum();
          const torch::Tensor Z =
              eval_expr(c.safe_divisor, {{"Z", eval_expr(c.row_finish, {{"P", P}, {"shift", number(m)}})}});
          // What the row stores, what the backward reads of it, then each column's A and dx.
          const NamedTensors finished = {{"Z", Z}, {"m", number(m)}, {"P", P}};
          const NamedTensors statistics = {{"Z", eval_expr(c.stored_divisor, finished)},
                                           {"m_or_P", eval_expr(c.stored_shift_or_sum, finished)}};
          const torch::Tensor divisor = eval_expr(c.backward_divisor, statistics);
          const torch::Tensor shift_or_sum = eval_expr(c.backward_shift, statistics);
          const torch::Tensor shift = online ? shift_or_sum : number(0), s = torch::exp(x0 - shift);
          NamedTensors column = {{"s", s},
                                 {"x", x0},
                                 {"unit", torch::exp(-shift)},
                                 {"Z", divisor},
                                 {"P", shift_or_sum},
                                 {"dA", dA},
                                 {"inv_Z", 1 / divisor},
                                 {"ds", s},
                                 {"dx_scale", number(1)}};
          const torch::Tensor A = eval_expr(c.attention, column).expand_as(x0);
          const torch::Tensor expected_A = direct_attention(n, alpha, x0);
          EXPECT_TRUE(torch::allclose(A, expected_A, 1e-10, 1e-12)) << A << expected_A;
          column.push_back({"delta", (dA * A).sum()});
          const torch::Tensor dx = eval_expr(c.logit_gradient, column).expand_as(x0);
          EXPECT_TRUE(torch::allclose(dx, autograd, 1e-9, 1e-12)) << dx << autograd;
          for (int64_t j = 0; j < x0.numel(); ++j) {
            auto loss_at = [&](double by) {
              torch::Tensor moved = x0.clone();
              moved[j] += by;
              return (dA * direct_attention(n, alpha, moved)).sum().item<double>();
            };
            const double central = (loss_at(h) - loss_at(-h)) / (2 * h);
            EXPECT_NEAR(dx[j].item<double>(), central, 1e-6 * std::max(1.0, std::abs(central))) << "key " << j;
          }
          // dx_scale: dx comes times it where delta does.
          NamedTensors scaled;
          for (const auto& [name, v] : column)
            scaled.push_back({name, name == "dx_scale" ? number(3) : name == "delta" ? 3 * v : v});
          EXPECT_TRUE(torch::allclose(eval_expr(c.logit_gradient, scaled).expand_as(x0), 3 * dx, 1e-12, 1e-14));
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 50);
}

TEST(ColumnAlgebra, OnlyANearZeroDivisorBecomesOne) {
  const ColumnAlgebra c = sink::column_algebra(sink::normalizer_form(sink::normalizer_named("sum"), 1), 1, true);
  auto safe = [&](double Z) { return value(c.safe_divisor, {{"Z", number(Z)}}); };
  EXPECT_EQ(safe(0), 1);
  EXPECT_EQ(safe(1e-31), 1);
  EXPECT_EQ(safe(-1e-31), 1);
  EXPECT_EQ(safe(2e-30), 2e-30);
  EXPECT_EQ(safe(-5), -5);
  EXPECT_TRUE(std::isnan(safe(std::numeric_limits<double>::quiet_NaN())));
}

}  // namespace
