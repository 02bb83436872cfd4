// Symbolic differentiation of score expressions with respect to qk, and the
// simplification that keeps the derivative readable in the emitted IR. Each
// function's derivative is the one written beside it in plan/score_functions.cpp,
// over the language's functions and the backends' primitives (__if_pos, ...).
#pragma once
#include "plan/value.h"

namespace sink {

ExprNode derivative(const ExprNode& e, const std::string& var = "qk");
ExprNode simplify(const ExprNode& e);
// e with every occurrence of the variable var replaced by value.
ExprNode substitute(const ExprNode& e, const std::string& var, const ExprNode& value);

}  // namespace sink
