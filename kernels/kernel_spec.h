// The attention part of a run that a kernel is specialized on: everything
// the generated code depends on, and a hash that names the kernel. Derived
// by one function, which `sinkc compile` (attention.ll) and every runtime
// backend call, so the kernel a run uses is the one compile writes.
#pragma once
#include <string>

#include "plan/normalizers.h"
#include "plan/plan.h"
#include "plan/run_config.h"
#include "plan/visibility.h"

namespace sink::kernels {

struct KernelSpec {
  // Over qk, i, j (1-based positions) and T (the sequence length): the language's n, the keys query i sees,
  // is written in i and T here, so a backend has no n to compute.
  ExprNode score;
  // The online form: s = exp(qk - m), with the running row maximum m (plan/normalizers.h).
  bool online = false;
  const Normalizer* norm = &normalizer_named("sum");  // the row of attention.normalize
  double p = 1;                                       // its parameter, where it takes one
  double alpha = 1;                                   // rows sum to alpha
  Visibility rule = visibility(0, 0);                 // which keys each query sees (AttentionConfig::rule)
  bool position_bias = false;                         // g(i - j) from a per-head table indexed by distance (ALiBi, T5)
  bool key_bias = false;                              // the k* column (with v*)
  bool sink_logit = false;  // a per-head logit b_h: one more column, of no value (the online form)
  int64_t d_head = 0;
  bool f64 = false;  // double precision (finite-difference checks), else float

  bool softmax() const { return online && is_softmax(score, norm->name); }
  NormalizerForm normalizer() const { return normalizer_form(*norm, p); }
  // ds/dqk, simplified: the one derivative every emitter uses (plan/symbolic.h).
  ExprNode score_derivative() const;
  // softmax(qk / sqrt(d_head)) v under the causal mask and nothing else: what
  // LibTorch's scaled_dot_product_attention computes, so a backend may run it.
  bool plain_causal_softmax() const {
    return softmax() && alpha == 1 && rule.prefix <= 1 && rule.window == 0 && rule.of_range_alone() && !position_bias &&
           !key_bias && !sink_logit;
  }

  std::string describe() const;
  std::string hash() const;  // 16 hex digits, of describe()
};

// The kernel a model's attention needs.
KernelSpec kernel_spec(const ModelConfig& model);
KernelSpec kernel_spec(const Plan& plan);

}  // namespace sink::kernels
