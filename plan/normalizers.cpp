#include "plan/normalizers.h"

#include <stdexcept>

#include "plan/expr_text.h"

namespace sink {

const std::vector<Normalizer>& normalizers() {
  struct Row {
    const char* name;
    const char* formula;
    const char* source;
    std::vector<NormalizerParameter> parameters;
    const char* term;
    const char* finish;
    const char* slope;
    const char* term_degree;  // "" unless scale-free
    bool bounds_scores;
    bool metric_reads_attention;
  };
  // sign(x), for the slopes.
#define SIGN(x) "__if_pos(" x ", 1, __if_pos(-" x ", -1, 0))"
  static const Row rows[] = {
      {"sum", "Z = sum_j s_ij", "the paper", {}, "s", "P", "1", "1", true, true},
      {"none", "Z = 1", "the paper", {}, "0", "1", "0", "", false, false},
      {"abs_clamped", "Z = max(|sum_j s_ij|, 1)", "the paper", {}, "s", "__max(__abs(P), 1)",
       "__if_pos(__abs(P) - 1, " SIGN("P") ", 0)", "", true, false},
      // |s|^p with a zero slope at s = 0 (an exp that underflowed, where ds/dx = s takes the
      // gradient to 0): the inner select keeps autograd's pow away from 0^(p-1) = inf. The slope
      // is (|s| / Z)^(p-1) sign(s), not Z^(1-p) |s|^(p-1): |s| <= Z, so for p < 1 the ratio's
      // power cannot overflow where the two factors apart can.
      {"pnorm", "Z = (sum_j |s_ij|^p)^(1/p)", "the paper", {{"p", 0, 64, 1}},
       "__if_pos(__abs(s), __if_pos(__abs(s), __abs(s), 1) ^ p, 0)", "P ^ (1 / p)",
       "__if_pos(__abs(s), (__abs(s) / Z) ^ (p - 1) * " SIGN("s") ", 0)", "p", true, false},
      {"softpick", "A_ij = relu(e^x_ij - 1) / (sum_j |e^x_ij - 1| + eps), x the logits; score = exp(qk)",
       "Zuhri et al. 2025, Softpick", {}, "", "", "", "", true, true},
      {"count", "Z = n_i, the number of keys query i sees: relu(qk) / n is ReLU attention",
       "Wortsman et al. 2023, Replacing softmax with ReLU in Vision Transformers", {}, "1", "P", "0", "", false, false},
  };
#undef SIGN
  static const std::vector<Normalizer> table = [] {
    std::vector<Normalizer> out;
    for (const Row& r : rows) {
      Normalizer n;
      n.name = r.name, n.formula = r.formula, n.source = r.source, n.parameters = r.parameters;
      n.online_form = !*r.term;
      if (!n.online_form) n.term = read_expr(r.term), n.finish = read_expr(r.finish), n.slope = read_expr(r.slope);
      n.scale_free = *r.term_degree != 0;
      if (n.scale_free) n.term_degree = read_expr(r.term_degree);
      n.bounds_scores = r.bounds_scores, n.metric_reads_attention = r.metric_reads_attention;
      out.push_back(std::move(n));
    }
    return out;
  }();
  return table;
}

const Normalizer* find_normalizer(const std::string& name) {
  for (const auto& n : normalizers())
    if (n.name == name) return &n;
  return nullptr;
}

const Normalizer& normalizer_named(const std::string& name) {
  if (const Normalizer* n = find_normalizer(name)) return *n;
  throw std::invalid_argument("attention.normalize: no normaliser '" + name + "'");
}

ExprNode substitute_vars(const ExprNode& e, const std::vector<std::pair<std::string, ExprNode>>& values) {
  if (e.op == ExprNode::Op::Var)
    for (const auto& [name, value] : values)
      if (e.name == name) return value;
  ExprNode out = e;
  for (auto& a : out.args) a = substitute_vars(a, values);
  return out;
}

NormalizerForm normalizer_form(const Normalizer& n, double p) {
  ExprNode p_value;
  p_value.number = p;
  const std::vector<std::pair<std::string, ExprNode>> bound = {{"p", p_value}};
  NormalizerForm f;
  f.row = &n;
  if (n.online_form) return f;
  f.term = substitute_vars(n.term, bound), f.finish = substitute_vars(n.finish, bound);
  f.slope = substitute_vars(n.slope, bound);
  if (n.scale_free) {
    ExprNode degree = substitute_vars(n.term_degree, bound);
    if (degree.op != ExprNode::Op::Number)
      throw std::logic_error("normaliser " + n.name + ": term_degree must be a number or a parameter");
    f.term_degree = degree.number;
  }
  return f;
}

}  // namespace sink
