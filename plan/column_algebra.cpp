#include "plan/column_algebra.h"

#include "plan/expr_text.h"

namespace sink {
namespace {

ExprNode number(double v) { return {ExprNode::Op::Number, v, "", {}}; }

}  // namespace

ColumnAlgebra column_algebra(const NormalizerForm& norm, double alpha, bool online) {
  // The formulas, over the variables of plan/column_algebra.h and the normaliser's expressions by name.
  const std::vector<std::pair<std::string, ExprNode>> parts = {
      {"alpha", number(alpha)}, {"weight", norm.weight}, {"weight_slope", norm.weight_slope}, {"slope", norm.slope}};
  const auto formula = [&](const char* text) { return substitute_vars(read_expr(text), parts); };
  ColumnAlgebra c;
  c.rescale = formula("__exp(m - m_new)");
  c.term_rescale = norm.term_degree == 1
                       ? formula("r")
                       : substitute_vars(formula("r ^ degree"), {{"degree", number(norm.term_degree)}});
  // (The comparison's form keeps a NaN Z: it is not below 1e-30.) Online, 1 is e^-shift under the shift.
  c.row_finish = substitute_vars(norm.finish, {{"unit", online ? read_expr("__exp(-shift)") : number(1)}});
  c.safe_divisor = formula("__if_pos(1e-30 - __abs(Z), 1, Z)");
  c.stored_divisor = formula("Z");
  c.stored_shift_or_sum = online ? formula("m") : formula("P");
  c.backward_shift = online ? formula("m_or_P + __log(Z)") : formula("m_or_P");
  c.backward_divisor = online ? formula("1") : formula("Z");
  // (1 / Z times ds first: where the weight and the slope are both s (softmax), that product is A's, and dx one
  // multiply more.)
  c.attention = formula("alpha * weight * inv_Z");
  c.logit_gradient = formula("(alpha * dx_scale * weight_slope * dA - delta * slope) * (inv_Z * ds)");
  return c;
}

}  // namespace sink
