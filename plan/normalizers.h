// The row normalisers of attention (`attention.normalize`), each written
// once. Attention is A_ij = alpha s_ij / Z_i over the keys j query i sees,
// and a "direct" normaliser is three expressions over the backends'
// primitives (plan/score_functions.h):
//   term    each visible key's part of the row's sum P = sum_j term(s_ij)   (over s, p)
//   finish  Z from P                                                        (over P, p)
//   slope   dZ/ds_ij, written in its numerically safe form                  (over s, Z, P, p)
// The reference path (LibTorch ops, autograd through term and finish), the
// LLVM emitter, the CUDA emitter and the checker's table all read this one
// table; tests take every row through every backend and check `slope`
// against finite differences of finish(sum term).
//
// Softmax (exp(qk) under sum) and softpick keep a running row maximum
// (the online form of FlashAttention) and are written in each backend; so is
// the sink logit, which joins softmax's denominator. See
// docs/ATTENTION-ALGEBRA.md.
#pragma once
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
  // Hand-written in each backend with a running row maximum (softpick); the
  // expressions below are empty.
  bool online_form = false;
  ExprNode term, finish, slope;
  // Z(c s) = c Z(s): A does not change when the scores are scaled, so an
  // exp(qk) score runs as exp(qk - m) with the row maximum m, which cannot
  // overflow. Then term(c s) = c^term_degree term(s).
  bool scale_free = false;
  ExprNode term_degree;
  // Z grows with the scores, so exp(qk) cannot run away under it.
  bool bounds_scores = true;
  // Nonnegative rows sum to at most 1 (what is left goes to no token), so the
  // sink metric reads A itself; otherwise it reads s / sum s.
  bool metric_reads_attention = false;
};

const std::vector<Normalizer>& normalizers();
const Normalizer* find_normalizer(const std::string& name);
const Normalizer& normalizer_named(const std::string& name);  // throws std::invalid_argument

// A row's expressions with its parameters replaced by their values (p for
// pnorm): what a backend emits.
struct NormalizerForm {
  const Normalizer* row = nullptr;
  ExprNode term, finish, slope;
  double term_degree = 1;
};
NormalizerForm normalizer_form(const Normalizer& n, double p);

// `e` with each variable named in `values` replaced by that expression.
ExprNode substitute_vars(const ExprNode& e, const std::vector<std::pair<std::string, ExprNode>>& values);

}  // namespace sink
