#include "runtime/attention/score.h"

#include <functional>
#include <optional>
#include <stdexcept>

#include "plan/score_functions.h"

namespace sink::rt {
namespace {

// The arithmetic both evaluators share; nullopt for the other node kinds.
std::optional<torch::Tensor> arithmetic(ExprNode::Op op, const std::function<torch::Tensor(size_t)>& arg) {
  using Op = ExprNode::Op;
  switch (op) {
    case Op::Neg: return -arg(0);
    case Op::Add: return arg(0) + arg(1);
    case Op::Sub: return arg(0) - arg(1);
    case Op::Mul: return arg(0) * arg(1);
    case Op::Div: return arg(0) / arg(1);
    case Op::Pow: return torch::pow(arg(0), arg(1));
    default: return std::nullopt;
  }
}

}  // namespace

torch::Tensor eval_expr(const ExprNode& e, const NamedTensors& vars) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return eval_expr(e.args.at(k), vars); };
  if (auto r = arithmetic(e.op, arg)) return *r;
  switch (e.op) {
    case Op::Number: return torch::full({}, e.number, vars.at(0).second.options());
    case Op::Var:
      for (const auto& [name, value] : vars)
        if (e.name == name) return value;
      break;
    case Op::Call: {
      // The language's functions expand into the primitives (plan/score_functions.h): the kernels'
      // safe forms, clamps included, and autograd through them; only the primitives have ops here.
      if (!primitive_arity(e.name)) return eval_expr(expand_score_functions(e), vars);
      const std::string& f = e.name;
      if (f == "__exp") return torch::exp(arg(0));
      if (f == "__expm1_small") return torch::expm1(arg(0));
      if (f == "__log") return torch::log(arg(0));
      if (f == "__log1p") return torch::log1p(arg(0));
      if (f == "__tanh") return torch::tanh(arg(0));
      if (f == "__sqrt") return torch::sqrt(arg(0));
      if (f == "__abs") return torch::abs(arg(0));
      if (f == "__min") return torch::minimum(arg(0), arg(1));
      if (f == "__max") return torch::maximum(arg(0), arg(1));
      if (f == "__if_pos") return torch::where(arg(0) > 0, arg(1), arg(2));
      if (f == "__mod") return torch::remainder(arg(0), arg(1));  // a - b floor(a / b)
      break;
    }
    default: break;
  }
  throw std::runtime_error("expression: unsupported node '" + to_string(e) + "'");
}

torch::Tensor eval_score(const ExprNode& e, const torch::Tensor& qk, const torch::Tensor& i, const torch::Tensor& j,
                         const torch::Tensor& n) {
  return eval_expr(e, {{"qk", qk}, {"i", i.to(qk.dtype())}, {"j", j.to(qk.dtype())}, {"n", n.to(qk.dtype())}});
}

torch::Tensor eval_vector(const ExprNode& e, int64_t d_head) {
  using Op = ExprNode::Op;
  auto arg = [&](size_t k) { return eval_vector(e.args.at(k), d_head); };
  if (auto r = arithmetic(e.op, arg)) return *r;
  switch (e.op) {
    case Op::Number: return torch::full({}, e.number, torch::kDouble);
    case Op::Var:
      if (e.name == "ones") return torch::ones({d_head}, torch::kDouble);
      if (e.name == "d_head") return torch::full({}, static_cast<double>(d_head), torch::kDouble);
      break;
    case Op::Call:
      if (e.name == "sqrt") return torch::sqrt(arg(0));
      if (e.name == "onehot") {
        auto k = static_cast<int64_t>(e.args.at(0).number);
        auto v = torch::zeros({d_head}, torch::kDouble);
        if (k >= 0 && k < d_head) v[k] = 1.0;
        return v;
      }
      break;
    default: break;
  }
  throw std::runtime_error("vector expression: unsupported node '" + to_string(e) + "'");
}

}  // namespace sink::rt
