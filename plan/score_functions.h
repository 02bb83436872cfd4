// The score language's functions (exp, sigmoid, ...), each written once: its
// value as the numerically safe form every backend computes (exp clamped at
// 88, softplus without overflow), and its derivative. Both are expressions
// over the backends' primitives:
//   arithmetic (+ - * / ^ and unary -) and the calls __exp, __expm1_small, __log,
//   __log1p, __tanh, __sqrt, __abs, __min(a, b), __max(a, b), __if_pos(c, a, b)
//   (a where c > 0, else b), __mod(a, b) (a - b floor(a / b), for b > 0: the
//   visibility rules' positions, plan/visibility.h). __expm1_small(a) is e^a - 1 for |a| <= 1/2 only
//   (the code backends emit its series alone, no exp beside it): clamp its
//   argument.
// and over the language's own functions, which expand in turn. The checker's
// table (score_rules), the reference path (LibTorch ops), the LLVM and the
// CUDA emitters and the symbolic derivative all read this table: a backend
// implements the primitives, never a language function.
#pragma once
#include <string>
#include <vector>

#include "plan/value.h"

namespace sink {

struct ScoreFunction {
  std::string name;
  int arity = 1;
  // Defined for positive arguments only (sqrt, log, pow): tests draw those.
  bool positive_domain = false;
  // Over the variables x (and y, the second argument).
  ExprNode value;
  // d value / dx; none for pow, whose derivative the chain rule's ^ rule gives.
  ExprNode derivative;
  std::string description;
};

const std::vector<ScoreFunction>& score_functions();
const ScoreFunction* find_score_function(const std::string& name);

// Whether `name` is a backend primitive (__exp, ..., __if_pos), and its argument count (0: not one).
int primitive_arity(const std::string& name);

// `e` with every call of a language function replaced by its value, recursively: primitives only.
ExprNode expand_score_functions(const ExprNode& e);
// The derivative of f at `argument` (the outer part of the chain rule), as written in the table.
ExprNode score_function_derivative(const ScoreFunction& f, const ExprNode& argument);

}  // namespace sink
