// Symbolic differentiation of score expressions with respect to qk, and the
// simplification that keeps the derivative readable in the emitted IR.
// Internal functions the derivative needs besides the language's own:
// __step(x) = x > 0 ? 1 : 0, __sign(x).
#pragma once
#include "plan/value.h"

namespace sink::kernels {

ExprNode derivative(const ExprNode& e, const std::string& var = "qk");
ExprNode simplify(const ExprNode& e);

}  // namespace sink::kernels
