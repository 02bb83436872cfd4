#include "compiler/kernels/kernel_spec.h"

#include <fmt/format.h>

namespace sink::kernels {

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
  ExprNode softmax_score{ExprNode::Op::Call, 0, "exp", {ExprNode{ExprNode::Op::Var, 0, "qk", {}}}};
  k.softmax = k.score == softmax_score && k.normalize == "sum";
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
