#include "kernels/kernel_spec.h"

#include <fmt/format.h>

#include "plan/symbolic.h"
#include "support/fnv1a.h"

namespace sink::kernels {

std::string KernelSpec::describe() const {
  return fmt::format(
             "score={} softmax={} normalize={} p={} alpha={} prefix={} window={} position_bias={} key_bias={} "
             "d_head={} {}",
             to_string(score), softmax(), norm->name, format_number(p), format_number(alpha), prefix, window,
             position_bias, key_bias, d_head, f64 ? "f64" : "f32") +
         (sink_logit ? " sink_logit" : "") +  // (absent before the field existed: earlier kernels keep their names)
         (!online && is_shifted_exp(score, norm->name) ? " direct" : "");  // (the direct form, forced by a test)
}

std::string KernelSpec::hash() const { return fnv1a_hex(describe()); }

ExprNode KernelSpec::score_derivative() const { return simplify(derivative(score)); }

namespace {

ExprNode var(const std::string& name) { return {ExprNode::Op::Var, 0, name, {}}; }
ExprNode num(double v) { return {ExprNode::Op::Number, v, "", {}}; }
ExprNode call(const std::string& f, ExprNode a, ExprNode b) { return {ExprNode::Op::Call, 0, f, {a, b}}; }
ExprNode bin(ExprNode::Op op, ExprNode a, ExprNode b) { return {op, 0, "", {a, b}}; }

// n, the number of sequence keys query i sees (the k* column and the sink logit not counted), in the 1-based
// i and the sequence length T that every kernel has: keys lo..hi with hi = max(i, min(prefix, T)) (a prefix is
// seen both ways) or i, and lo = max(1, i - window + 1) or 1. The reference path counts the allowed pairs
// instead, so the two check each other.
ExprNode visible_key_count(int64_t prefix, int64_t window) {
  using Op = ExprNode::Op;
  const ExprNode hi = prefix > 0 ? call("__max", var("i"), call("__min", num(prefix), var("T"))) : var("i");
  if (window <= 0) return hi;
  if (prefix <= 0) return call("__min", var("i"), num(window));
  const ExprNode lo = call("__max", num(1), bin(Op::Sub, var("i"), num(window - 1)));
  return bin(Op::Add, bin(Op::Sub, hi, lo), num(1));
}

}  // namespace

KernelSpec kernel_spec(const ModelConfig& model) {
  const AttentionConfig& a = model.attention;
  KernelSpec k;
  k.score = substitute(a.score, "n", visible_key_count(a.prefix, a.window));
  k.online = a.shifted_exp;
  k.norm = &normalizer_named(a.normalize);
  k.p = a.pnorm_p;
  k.alpha = a.scale;
  k.prefix = a.prefix;
  k.window = a.window;
  k.position_bias = model.position_term();
  k.key_bias = model.key_column();
  k.sink_logit = a.has_sink_logit();
  k.d_head = model.d_head;
  return k;
}

KernelSpec kernel_spec(const Plan& plan) { return kernel_spec(read_config(plan).model); }

}  // namespace sink::kernels
