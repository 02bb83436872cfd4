// The score language's functions (plan/score_functions.h) against finite
// differences, and the safe forms every backend shares: the reference path's
// value, its autograd gradient and the kernels' symbolic derivative, each
// taken from the table, must agree with a central difference of the value.
#include <gtest/gtest.h>

#include <cmath>
#include <torch/torch.h>

#include "plan/schema.h"
#include "plan/score_functions.h"
#include "plan/symbolic.h"
#include "runtime/attention/score.h"

namespace {

using sink::ExprNode;

ExprNode qk() { return {ExprNode::Op::Var, 0, "qk", {}}; }

// f(qk), or pow(qk, 1.5): the score expression of one function.
ExprNode applied(const sink::ScoreFunction& f) {
  std::vector<ExprNode> args = {qk()};
  if (f.arity == 2) args.push_back({ExprNode::Op::Number, 1.5, "", {}});
  return {ExprNode::Op::Call, 0, f.name, args};
}

// Points away from each function's kinks (relu, abs, elu at 0), inside its domain.
torch::Tensor points(const sink::ScoreFunction& f) {
  auto x = torch::tensor({-3.1, -1.3, -0.4, 0.3, 0.9, 2.2, 7.5}, torch::kDouble);
  return f.positive_domain ? x.abs() + 0.05 : x;
}

TEST(ScoreFunctions, ValueGradientAndSymbolicDerivativeAgreeWithFiniteDifferences) {
  const auto zeros = torch::zeros({7}, torch::kDouble);
  for (const auto& f : sink::score_functions()) {
    SCOPED_TRACE(f.name);
    const ExprNode e = applied(f);
    auto x = points(f).requires_grad_(true);
    auto value = sink::rt::eval_score(e, x, zeros, zeros, zeros);
    auto autograd = torch::autograd::grad({value.sum()}, {x})[0];
    const double h = 1e-6;
    auto xd = x.detach();
    auto central =
        (sink::rt::eval_score(e, xd + h, zeros, zeros, zeros) - sink::rt::eval_score(e, xd - h, zeros, zeros, zeros)) /
        (2 * h);
    auto symbolic = sink::rt::eval_score(sink::simplify(sink::derivative(e)), xd, zeros, zeros, zeros);
    EXPECT_TRUE(torch::allclose(autograd, central, 1e-6, 1e-7)) << autograd << central;
    EXPECT_TRUE(torch::allclose(symbolic, central, 1e-6, 1e-7)) << symbolic << central;
  }
}

TEST(ScoreFunctions, TheValuesAreTheUsualFunctions) {
  // An independent oracle for each safe form, where it is not clamped: LibTorch's own function.
  const auto zeros = torch::zeros({7}, torch::kDouble);
  for (const auto& f : sink::score_functions()) {
    SCOPED_TRACE(f.name);
    auto x = points(f);
    auto ours = sink::rt::eval_score(applied(f), x, zeros, zeros, zeros);
    torch::Tensor usual = f.name == "exp"         ? torch::exp(x)
                          : f.name == "sigmoid"   ? torch::sigmoid(x)
                          : f.name == "elu"       ? torch::elu(x)
                          : f.name == "relu"      ? torch::relu(x)
                          : f.name == "tanh"      ? torch::tanh(x)
                          : f.name == "softplus"  ? torch::log1p(torch::exp(x))
                          : f.name == "abs"       ? torch::abs(x)
                          : f.name == "sqrt"      ? torch::sqrt(x)
                          : f.name == "log"       ? torch::log(x)
                          : f.name == "pow"       ? torch::pow(x, 1.5)
                          : f.name == "stablemax" ? torch::where(x >= 0, x + 1, 1 / (1 - x))
                                                  : torch::Tensor();
    if (!usual.defined()) {
      ADD_FAILURE() << "no oracle for '" << f.name << "': add LibTorch's function here";
      continue;
    }
    EXPECT_TRUE(torch::allclose(ours, usual, 1e-12, 1e-12)) << ours << usual;
  }
}

TEST(ScoreFunctions, ExpIsClampedAt88InTheReferenceAsInTheKernels) {
  const auto big = torch::tensor({87.0, 88.0, 100.0, 1000.0}, torch::kFloat);
  const auto zeros = torch::zeros({4}, torch::kFloat);
  auto e = sink::rt::eval_score(applied(*sink::find_score_function("exp")), big, zeros, zeros, zeros);
  EXPECT_TRUE(torch::isfinite(e).all().item<bool>()) << e;
  EXPECT_FLOAT_EQ(e[2].item<float>(), std::exp(88.0f));
  EXPECT_FLOAT_EQ(e[3].item<float>(), std::exp(88.0f));
  auto s = sink::rt::eval_score(applied(*sink::find_score_function("sigmoid")), -big, zeros, zeros, zeros);
  EXPECT_TRUE(torch::isfinite(s).all().item<bool>()) << s;
}

TEST(ScoreFunctions, TheCheckerKnowsExactlyTheTablesFunctions) {
  std::vector<std::string> table;
  for (const auto& f : sink::score_functions()) {
    table.push_back(f.name);
    EXPECT_EQ(sink::primitive_arity(f.name), 0) << f.name << " is named like a primitive";
    EXPECT_TRUE(f.arity == 2 || !(f.derivative == ExprNode{})) << f.name << " has no derivative";
  }
  std::vector<std::string> checker;
  for (const auto& f : sink::score_rules().functions) checker.push_back(f.name);
  EXPECT_EQ(checker, table);
}

}  // namespace
