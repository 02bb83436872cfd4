#include "plan/score_functions.h"

#include <stdexcept>

#include "plan/expr_text.h"

namespace sink {
namespace {

ExprNode substitute(const ExprNode& e, const std::vector<ExprNode>& args) {
  if (e.op == ExprNode::Op::Var && (e.name == "x" || e.name == "y")) return args.at(e.name == "x" ? 0 : 1);
  ExprNode out = e;
  for (auto& a : out.args) a = substitute(a, args);
  return out;
}

}  // namespace

const std::vector<ScoreFunction>& score_functions() {
  struct Row {
    const char* name;
    int arity;
    bool positive;
    const char* value;
    const char* derivative;
    const char* description;
  };
  // exp is clamped at 88 (e^88 ~ 1.7e38, float's largest power of e): no inf, in every backend alike.
  static const Row rows[] = {
      {"exp", 1, false, "__exp(__min(x, 88))", "exp(x)", "e^x, its argument clamped at 88 (no overflow)"},
      {"sigmoid", 1, false, "1 / (1 + exp(-x))", "sigmoid(x) * (1 - sigmoid(x))", "1 / (1 + e^-x)"},
      {"elu", 1, false, "__if_pos(x, x, __exp(__min(x, 0)) - 1)", "__if_pos(x, 1, __exp(__min(x, 0)))",
       "x for x > 0, e^x - 1 otherwise"},
      {"relu", 1, false, "__if_pos(x, x, 0)", "__if_pos(x, 1, 0)", "max(x, 0)"},
      {"tanh", 1, false, "__tanh(x)", "1 - tanh(x) * tanh(x)", "the hyperbolic tangent"},
      {"softplus", 1, false, "__max(x, 0) + __log1p(__exp(-__abs(x)))", "sigmoid(x)", "log(1 + e^x), without overflow"},
      {"abs", 1, false, "__abs(x)", "__if_pos(x, 1, __if_pos(-x, -1, 0))", "|x|"},
      {"sqrt", 1, true, "__sqrt(x)", "0.5 / sqrt(x)", "the square root"},
      {"log", 1, true, "__log(x)", "1 / x", "the natural logarithm"},
      {"pow", 2, true, "x ^ y", "", "x to the power y (also written x ^ y)"},
      // Without a choice: for x > 0 the second part is 1 (its slope 0), for x <= 0 the first is 0, so neither
      // side is computed and dropped, and a kernel has no branch per score element (as __if_pos it had one).
      {"stablemax", 1, false, "__max(x, 0) + 1 / (1 - __min(x, 0))", "1 / (1 - __min(x, 0)) ^ 2",
       "x + 1 for x > 0, 1 / (1 - x) otherwise: under normalize = sum, StableMax (Prieto et al. 2025)"},
  };
  static const std::vector<ScoreFunction> table = [] {
    std::vector<ScoreFunction> out;
    for (const Row& r : rows)
      out.push_back({r.name, r.arity, r.positive, read_expr(r.value),
                     *r.derivative ? read_expr(r.derivative) : ExprNode{}, r.description});
    return out;
  }();
  return table;
}

const ScoreFunction* find_score_function(const std::string& name) {
  for (const auto& f : score_functions())
    if (f.name == name) return &f;
  return nullptr;
}

int primitive_arity(const std::string& name) {
  static const std::pair<const char*, int> primitives[] = {
      {"__exp", 1}, {"__expm1_small", 1}, {"__log", 1}, {"__log1p", 1},  {"__tanh", 1}, {"__sqrt", 1},
      {"__abs", 1}, {"__min", 2},         {"__max", 2}, {"__if_pos", 3}, {"__mod", 2}};
  for (const auto& [p, arity] : primitives)
    if (name == p) return arity;
  return 0;
}

ExprNode expand_score_functions(const ExprNode& e) {
  ExprNode out = e;
  for (auto& a : out.args) a = expand_score_functions(a);
  if (e.op != ExprNode::Op::Call || primitive_arity(e.name)) return out;
  const ScoreFunction* f = find_score_function(e.name);
  if (!f) throw std::invalid_argument("score expression: no function '" + e.name + "'");
  return expand_score_functions(substitute(f->value, out.args));
}

ExprNode score_function_derivative(const ScoreFunction& f, const ExprNode& argument) {
  if (f.arity != 1)
    throw std::logic_error("score_function_derivative: '" + f.name + "' takes " + std::to_string(f.arity));
  return substitute(f.derivative, {argument});
}

}  // namespace sink
