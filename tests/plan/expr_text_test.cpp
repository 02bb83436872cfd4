// The plan library's expression reader against the canonical writer
// (to_string) and against trees built by hand.
#include <gtest/gtest.h>

#include "plan/expr_text.h"
#include "plan/schema.h"

namespace {

using sink::ExprNode;
using Op = ExprNode::Op;

ExprNode num(double v) { return {Op::Number, v, "", {}}; }
ExprNode var(const std::string& n) { return {Op::Var, 0, n, {}}; }
ExprNode bin(Op op, ExprNode a, ExprNode b) { return {op, 0, "", {std::move(a), std::move(b)}}; }
ExprNode neg(ExprNode a) { return {Op::Neg, 0, "", {std::move(a)}}; }
ExprNode call(const std::string& n, std::vector<ExprNode> args) { return {Op::Call, 0, n, std::move(args)}; }

TEST(ExprText, PrecedenceAndAssociativityFollowTheGrammar) {
  EXPECT_EQ(sink::read_expr("-x^2"), neg(bin(Op::Pow, var("x"), num(2))));
  EXPECT_EQ(sink::read_expr("2^3^2"), bin(Op::Pow, num(2), bin(Op::Pow, num(3), num(2))));
  EXPECT_EQ(sink::read_expr("a^-b"), bin(Op::Pow, var("a"), neg(var("b"))));
  EXPECT_EQ(sink::read_expr("a - b - c"), bin(Op::Sub, bin(Op::Sub, var("a"), var("b")), var("c")));
  EXPECT_EQ(sink::read_expr("a / b * c"), bin(Op::Mul, bin(Op::Div, var("a"), var("b")), var("c")));
  EXPECT_EQ(sink::read_expr("-a * b"), bin(Op::Mul, neg(var("a")), var("b")));
  EXPECT_EQ(sink::read_expr("a + b * c"), bin(Op::Add, var("a"), bin(Op::Mul, var("b"), var("c"))));
  EXPECT_EQ(sink::read_expr("pow(qk, 2) + 1e-05"), bin(Op::Add, call("pow", {var("qk"), num(2)}), num(1e-05)));
  EXPECT_EQ(sink::read_expr(" .5 "), num(0.5));
}

TEST(ExprText, ReadsBackWhatTheWriterWrites) {
  const std::vector<ExprNode> trees = {
      call("exp", {var("qk")}),
      call("sigmoid", {bin(Op::Sub, var("qk"), call("log", {num(64)}))}),
      bin(Op::Add, call("elu", {var("qk")}), num(1)),
      bin(Op::Div, num(20), bin(Op::Mul, var("ones"), call("sqrt", {var("d_head")}))),
      bin(Op::Sub, var("a"), bin(Op::Sub, var("b"), var("c"))),
      bin(Op::Div, var("a"), bin(Op::Mul, var("b"), var("c"))),
      bin(Op::Pow, bin(Op::Pow, var("a"), var("b")), var("c")),
      bin(Op::Pow, neg(var("a")), num(2)),
      neg(neg(var("x"))),
      bin(Op::Mul, num(0.125), bin(Op::Add, var("i"), neg(var("j")))),
      call("pow", {call("abs", {var("qk")}), num(1.5)}),
  };
  for (const auto& t : trees) {
    const std::string text = sink::to_string(t);
    EXPECT_EQ(sink::read_expr(text), t) << text;
  }
}

TEST(ExprText, MalformedTextIsAnErrorWithItsOffset) {
  for (const char* bad : {"", "exp(", "qk +", "(qk", "qk)", "1 2", "exp(qk,", "#", "sigmoid(qk) )"}) {
    try {
      sink::read_expr(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
    }
  }
}

TEST(ExprText, RulesNameTheFirstViolation) {
  EXPECT_EQ(sink::expr_violation(sink::read_expr("sigmoid(qk) + i / j"), sink::score_rules()), "");
  EXPECT_EQ(sink::expr_violation(sink::read_expr("exp(q)"), sink::score_rules()), "unknown variable 'q'");
  EXPECT_EQ(sink::expr_violation(sink::read_expr("expp(qk)"), sink::score_rules()), "unknown function 'expp'");
  EXPECT_EQ(sink::expr_violation(sink::read_expr("pow(qk)"), sink::score_rules()), "'pow' takes 2 arguments");
  EXPECT_EQ(sink::expr_violation(sink::read_expr("5 * onehot(0)"), sink::vector_rules()), "");
  EXPECT_EQ(sink::expr_violation(sink::read_expr("exp(qk)"), sink::vector_rules()), "unknown function 'exp'");
}

}  // namespace
