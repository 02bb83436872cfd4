#include "kernels/kernel_spec.h"

#include <fmt/format.h>

#include "plan/symbolic.h"
#include "plan/visibility.h"
#include "support/fnv1a.h"

namespace sink::kernels {

std::string KernelSpec::describe() const {
  return fmt::format(
             "score={} softmax={} normalize={} p={} alpha={} prefix={} window={} position_bias={} key_bias={} "
             "d_head={} {}",
             to_string(score), softmax(), norm->name, format_number(p), format_number(alpha), rule.prefix, rule.window,
             position_bias, key_bias, d_head, f64 ? "f64" : "f32") +
         (sink_logit ? " sink_logit" : "") +  // (absent before the field existed: earlier kernels keep their names)
         (!online && is_shifted_exp(score, norm->name) ? " direct" : "") +  // (the direct form, forced by a test)
         // (a rule beyond prefix and window, named by its expressions)
         (rule.of_range_alone() ? "" : " visibility: " + rule.describe());
}

std::string KernelSpec::hash() const { return fnv1a_hex(describe()); }

ExprNode KernelSpec::score_derivative() const { return simplify(derivative(score)); }

KernelSpec kernel_spec(const ModelConfig& model) {
  const AttentionConfig& a = model.attention;
  KernelSpec k;
  k.rule = a.rule;
  k.score = substitute(a.score, "n", a.rule.key_count);
  k.online = a.shifted_exp;
  k.norm = &normalizer_named(a.normalize);
  k.p = a.pnorm_p;
  k.alpha = a.scale;
  k.position_bias = model.position_term();
  k.key_bias = model.key_column();
  k.sink_logit = a.has_sink_logit();
  k.d_head = model.d_head;
  return k;
}

KernelSpec kernel_spec(const Plan& plan) { return kernel_spec(read_config(plan).model); }

}  // namespace sink::kernels
