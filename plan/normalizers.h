// The row normalisers of attention (`attention.normalize`), each written
// once. Attention is A_ij = alpha w(s_ij) / Z_i over the keys j query i
// sees, and a normaliser is five expressions over the backends' primitives
// (plan/score_functions.h):
//   term          each visible key's part of the row's sum P = sum_j term(s_ij)
//   finish        Z from P
//   weight        w(s), the numerator (s itself but for softpick's relu)
//   slope         dZ/ds_ij, written in its numerically safe form
//   weight_slope  dw/ds
// over the score s, the logit x (s = e^x where the score is exp(qk)), what 1
// becomes under the online form's shift, `unit`, and P, Z and the row's
// parameter p.
//
// The online form (FlashAttention's): where the score is exp(qk) and the row
// is scale-free (Z(c s, c unit) = c Z(s, unit)), every backend computes
// s = e^(x - m) and unit = e^-m with the running row maximum m (never below
// shift_floor), so no exp can overflow; softmax is `sum` in this form. A sink
// logit b is one more column, of score e^(b - m) and no value. The reference
// path (LibTorch ops, autograd through the expressions), the LLVM emitter,
// the CUDA emitter and the checker's table all read this one table; tests
// take every row through every backend and check the slopes against finite
// differences. See docs/ATTENTION-ALGEBRA.md.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "plan/value.h"

namespace sink {

// A number a normaliser takes, in (low, high]: `pnorm(p = 2)`.
struct NormalizerParameter {
  std::string name;
  double low = 0, high = 0;
  double default_value = 0;
};

struct Normalizer {
  std::string name;  // as `attention.normalize` spells it
  std::string formula;
  std::string source;  // where it comes from: the paper, or the design's own
  std::vector<NormalizerParameter> parameters;
  ExprNode term, finish, weight, slope, weight_slope;
  // Z(c s, c unit) = c Z(s, unit): A does not change when the scores are
  // scaled, so an exp(qk) score runs in the online form. Then
  // term(c s, c unit) = c^term_degree term(s, unit), and neither slope reads P
  // (the online form keeps the row maximum in its place).
  bool scale_free = false;
  ExprNode term_degree;
  // The online form's shift m starts here: softpick's 0 keeps unit = e^-m <= 1.
  double shift_floor = -std::numeric_limits<double>::infinity();
  // Z grows with the scores, so exp(qk) cannot run away under it.
  bool bounds_scores = true;
  // Nonnegative rows sum to at most 1 (what is left goes to no token), so the
  // sink metric reads A itself; otherwise it reads s / sum s.
  bool metric_reads_attention = false;
};

const std::vector<Normalizer>& normalizers();
const Normalizer* find_normalizer(const std::string& name);
const Normalizer& normalizer_named(const std::string& name);  // throws std::invalid_argument

// Whether a run's Sink values (and alpha) are computed from the paper's proxy scores, s / sum s or |s| / sum |s|,
// rather than from the attention itself: the normalisers whose rows are not attention that sums to at most 1
// (none, abs_clamped, pnorm, count: the paper marks these rows with an asterisk), and differential attention,
// whose A1 - lambda A2 can be negative. The runtime records it in every evaluation (run_record.h's
// sink_from_proxy); the results read it from the plan for runs recorded before it did. (The runtime reads the proxy
// also where scores under sum or softpick come out negative, which no score of a non-negative kind does.)
bool sink_from_proxy(const std::string& normalize, bool differential);

// A row's expressions with its parameters replaced by their values (p for
// pnorm): what a backend emits.
struct NormalizerForm {
  const Normalizer* row = nullptr;
  ExprNode term, finish, weight, slope, weight_slope;
  double term_degree = 1;
};
NormalizerForm normalizer_form(const Normalizer& n, double p);

// `e` with each variable named in `values` replaced by that expression.
ExprNode substitute_vars(const ExprNode& e, const std::vector<std::pair<std::string, ExprNode>>& values);

}  // namespace sink
