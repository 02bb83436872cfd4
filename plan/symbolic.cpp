#include "plan/symbolic.h"

#include <cmath>
#include <stdexcept>

#include "plan/score_functions.h"

namespace sink {
namespace {

using Op = ExprNode::Op;

ExprNode num(double v) { return {Op::Number, v, "", {}}; }
ExprNode call(const std::string& f, std::vector<ExprNode> args) { return {Op::Call, 0, f, std::move(args)}; }
ExprNode bin(Op op, ExprNode a, ExprNode b) { return {op, 0, "", {std::move(a), std::move(b)}}; }
ExprNode neg(ExprNode a) { return {Op::Neg, 0, "", {std::move(a)}}; }
ExprNode mul(ExprNode a, ExprNode b) { return bin(Op::Mul, std::move(a), std::move(b)); }
ExprNode add(ExprNode a, ExprNode b) { return bin(Op::Add, std::move(a), std::move(b)); }
ExprNode sub(ExprNode a, ExprNode b) { return bin(Op::Sub, std::move(a), std::move(b)); }
ExprNode div(ExprNode a, ExprNode b) { return bin(Op::Div, std::move(a), std::move(b)); }

bool is_num(const ExprNode& e, double v) { return e.op == Op::Number && e.number == v; }

// d/dx f(u) as a function of u (the chain rule multiplies by u'): the table's derivative (plan/score_functions.h).
ExprNode outer(const std::string& f, const ExprNode& u) {
  const ScoreFunction* function = find_score_function(f);
  // A primitive (or a name the checker would refuse) has no derivative here: the table's values are
  // differentiated through their written derivatives, never through their primitives.
  if (!function || function->arity != 1) throw std::logic_error("plan/symbolic.cpp: no derivative for '" + f + "'");
  return score_function_derivative(*function, u);
}

}  // namespace

ExprNode derivative(const ExprNode& e, const std::string& var) {
  // What does not mention var is constant in it: a primitive of positions (n's __max, __min) has no
  // written derivative and needs none.
  if (!mentions_var(e, var)) return num(0);
  switch (e.op) {
    case Op::Number: return num(0);
    case Op::Var: return num(e.name == var ? 1 : 0);
    case Op::Neg: return neg(derivative(e.args[0], var));
    case Op::Add: return add(derivative(e.args[0], var), derivative(e.args[1], var));
    case Op::Sub: return sub(derivative(e.args[0], var), derivative(e.args[1], var));
    case Op::Mul: return add(mul(derivative(e.args[0], var), e.args[1]), mul(e.args[0], derivative(e.args[1], var)));
    case Op::Div: {
      const auto& a = e.args[0];
      const auto& b = e.args[1];
      return div(sub(mul(derivative(a, var), b), mul(a, derivative(b, var))), mul(b, b));
    }
    case Op::Pow:
    case Op::Call:
      if (e.op == Op::Pow || e.name == "pow") {
        const auto& a = e.args[0];
        const auto& b = e.args[1];
        ExprNode db = derivative(b, var);
        ExprNode power = e.op == Op::Pow ? e : bin(Op::Pow, a, b);
        // d a^b = b a^(b-1) a'  (+ a^b ln(a) b' when the exponent varies)
        ExprNode term = mul(mul(b, bin(Op::Pow, a, sub(b, num(1)))), derivative(a, var));
        if (simplify(db).op == Op::Number && simplify(db).number == 0) return term;
        return add(term, mul(mul(power, call("log", {a})), db));
      }
      return mul(outer(e.name, e.args[0]), derivative(e.args[0], var));
  }
  return num(0);
}

ExprNode simplify(const ExprNode& in) {
  ExprNode e = in;
  for (auto& a : e.args) a = simplify(a);
  auto all_numbers = [&] {
    for (const auto& a : e.args)
      if (a.op != Op::Number) return false;
    return !e.args.empty();
  };
  switch (e.op) {
    case Op::Neg:
      if (e.args[0].op == Op::Number) return num(-e.args[0].number);
      if (e.args[0].op == Op::Neg) return e.args[0].args[0];
      return e;
    case Op::Add:
      if (all_numbers()) return num(e.args[0].number + e.args[1].number);
      if (is_num(e.args[0], 0)) return e.args[1];
      if (is_num(e.args[1], 0)) return e.args[0];
      return e;
    case Op::Sub:
      if (all_numbers()) return num(e.args[0].number - e.args[1].number);
      if (is_num(e.args[1], 0)) return e.args[0];
      if (is_num(e.args[0], 0)) return simplify(neg(e.args[1]));
      return e;
    case Op::Mul:
      if (all_numbers()) return num(e.args[0].number * e.args[1].number);
      if (is_num(e.args[0], 0) || is_num(e.args[1], 0)) return num(0);
      if (is_num(e.args[0], 1)) return e.args[1];
      if (is_num(e.args[1], 1)) return e.args[0];
      return e;
    case Op::Div:
      if (all_numbers() && e.args[1].number != 0) return num(e.args[0].number / e.args[1].number);
      if (is_num(e.args[0], 0)) return num(0);
      if (is_num(e.args[1], 1)) return e.args[0];
      return e;
    case Op::Pow:
      if (all_numbers()) return num(std::pow(e.args[0].number, e.args[1].number));
      if (is_num(e.args[1], 1)) return e.args[0];
      if (is_num(e.args[1], 0)) return num(1);
      return e;
    default: return e;
  }
}

ExprNode substitute(const ExprNode& e, const std::string& var, const ExprNode& value) {
  if (e.op == Op::Var) return e.name == var ? value : e;
  ExprNode out = e;
  for (auto& a : out.args) a = substitute(a, var, value);
  return out;
}

}  // namespace sink
