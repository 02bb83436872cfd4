#include "plan/normalizers.h"

#include <limits>
#include <stdexcept>

#include "plan/expr_text.h"

namespace sink {

const std::vector<Normalizer>& normalizers() {
  constexpr double kNoFloor = -std::numeric_limits<double>::infinity();
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
    const char* weight = "s";
    const char* weight_slope = "1";
    double shift_floor = kNoFloor;
  };
  // sign(x), for the slopes.
#define SIGN(x) "__if_pos(" x ", 1, __if_pos(-" x ", -1, 0))"
  // Softpick's e^x - 1 of the logit, shifted like s: (e^x - 1) e^-m = s - unit. Near x = 0 that difference
  // cancels to a few digits (relative error eps / |x|), so there it is expm1(x) unit; the clamp keeps x in
  // __expm1_small's domain, and its unused side finite, so that autograd's zero through the select stays zero.
#define SOFTPICK_U "__if_pos(0.5 - __abs(x), __expm1_small(__min(__max(x, -0.5), 0.5)) * unit, s - unit)"
  static const Row rows[] = {
      {"sum", "Z = sum_j s_ij", "the paper", {}, "s", "P", "1", "1", true, true},
      {"none", "Z = 1", "the paper", {}, "0", "1", "0", "", false, false},
      {"abs_clamped",
       "Z = max(|sum_j s_ij|, 1)",
       "the paper",
       {},
       "s",
       "__max(__abs(P), 1)",
       "__if_pos(__abs(P) - 1, " SIGN("P") ", 0)",
       "",
       true,
       false},
      // |s|^p with a zero slope at s = 0 (an exp that underflowed, where ds/dx = s takes the
      // gradient to 0): the inner select keeps autograd's pow away from 0^(p-1) = inf. The slope
      // is (|s| / Z)^(p-1) sign(s), not Z^(1-p) |s|^(p-1): |s| <= Z, so for p < 1 the ratio's
      // power cannot overflow where the two factors apart can, and the ratio is held at 1e-30 and up:
      // a float |s| / Z that underflowed (logits a hundred apart) would raise 0 to p - 1 < 0, and
      // inf times ds/dx = s is NaN. Below 1e-30 the slope times s is under 1e-30p Z.
      {"pnorm",
       "Z = (sum_j |s_ij|^p)^(1/p)",
       "the paper",
       {{"p", 0, 64, 1}},
       "__if_pos(__abs(s), __if_pos(__abs(s), __abs(s), 1) ^ p, 0)",
       "P ^ (1 / p)",
       "__if_pos(__abs(s), __max(__abs(s) / Z, 1e-30) ^ (p - 1) * " SIGN("s") ", 0)",
       "p",
       true,
       false},
      // The authors' eps, 1e-8. With s = e^x: dZ/ds = sign(e^x - 1) = sign(x), dw/ds = [x > 0].
      {"softpick",
       "A_ij = relu(e^x_ij - 1) / (sum_j |e^x_ij - 1| + eps), x the logits; score = exp(qk)",
       "Zuhri et al. 2025, Softpick",
       {},
       "__abs(" SOFTPICK_U ")",
       "P + 1e-8 * unit",
       SIGN("x"),
       "1",
       true,
       true,
       "__max(" SOFTPICK_U ", 0)",
       "__if_pos(x, 1, 0)",
       0},
      {"count",
       "Z = n_i, the number of keys query i sees: relu(qk) / n is ReLU attention",
       "Wortsman et al. 2023, Replacing softmax with ReLU in Vision Transformers",
       {},
       "1",
       "P",
       "0",
       "",
       false,
       false},
  };
#undef SOFTPICK_U
#undef SIGN
  static const std::vector<Normalizer> table = [] {
    std::vector<Normalizer> out;
    for (const Row& r : rows) {
      Normalizer n;
      n.name = r.name, n.formula = r.formula, n.source = r.source, n.parameters = r.parameters;
      n.term = read_expr(r.term), n.finish = read_expr(r.finish), n.slope = read_expr(r.slope);
      n.weight = read_expr(r.weight), n.weight_slope = read_expr(r.weight_slope);
      n.scale_free = *r.term_degree != 0;
      if (n.scale_free) n.term_degree = read_expr(r.term_degree);
      if (n.scale_free && (mentions_var(n.slope, "P") || mentions_var(n.weight_slope, "P")))
        throw std::logic_error(std::string("normaliser ") + r.name + ": a scale-free row's slopes cannot read P");
      n.shift_floor = r.shift_floor;
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

bool sink_from_proxy(const std::string& normalize, bool differential) {
  const Normalizer* n = find_normalizer(normalize);
  return differential || !n || !n->metric_reads_attention;
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
  f.term = substitute_vars(n.term, bound), f.finish = substitute_vars(n.finish, bound);
  f.weight = substitute_vars(n.weight, bound), f.slope = substitute_vars(n.slope, bound);
  f.weight_slope = substitute_vars(n.weight_slope, bound);
  if (n.scale_free) {
    ExprNode degree = substitute_vars(n.term_degree, bound);
    if (degree.op != ExprNode::Op::Number)
      throw std::logic_error("normaliser " + n.name + ": term_degree must be a number or a parameter");
    f.term_degree = degree.number;
  }
  return f;
}

}  // namespace sink
