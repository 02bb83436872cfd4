#include "compiler/kernels/kernel_spec.h"

#include <fmt/format.h>

namespace sink::kernels {

namespace {
const ExprNode& exp_of_qk() {
  static const ExprNode e{ExprNode::Op::Call, 0, "exp", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}};
  return e;
}
}  // namespace

bool KernelSpec::shifted_exp() const { return normalize == "pnorm" && score == exp_of_qk(); }

std::string KernelSpec::describe() const {
  return fmt::format("score={} softmax={} normalize={} p={} alpha={} prefix={} window={} position_bias={} key_bias={} d_head={} {}",
                     to_string(score), softmax, normalize, format_number(p), format_number(alpha), prefix, window,
                     position_bias, key_bias, d_head, f64 ? "f64" : "f32");
}

std::string KernelSpec::hash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : describe()) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

KernelSpec kernel_spec(const Plan& plan) {
  KernelSpec k;
  k.score = *plan.at("attention.score").expr;
  const Value& norm = plan.at("attention.normalize");
  k.normalize = norm.s;
  if (k.normalize == "pnorm") k.p = norm.arg("p")->number();
  k.alpha = plan.number("attention.scale");
  k.softmax = k.score == exp_of_qk() && k.normalize == "sum";
  k.prefix = plan.integer("loss.prefix");
  const Value& window = plan.at("loss.window");
  k.window = window.kind == Value::Kind::Int ? window.i : 0;
  const std::string pe = plan.choice("model.pe");
  k.position_bias = pe == "alibi" || pe == "relative";
  const std::string biases = plan.choice("model.biases");
  k.key_bias = biases == "k" || biases == "kv";
  k.d_head = plan.integer("model.d") / plan.integer("model.heads");
  return k;
}

}  // namespace sink::kernels
