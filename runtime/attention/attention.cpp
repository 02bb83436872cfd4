#include "runtime/attention/attention.h"

#include <cmath>

#include "plan/normalizers.h"
#include "runtime/attention/score.h"

namespace sink::rt {

torch::Tensor allowed_pairs(int64_t T, int64_t prefix, int64_t window) {
  auto i = torch::arange(T).unsqueeze(1);
  auto j = torch::arange(T).unsqueeze(0);
  auto ok = j <= i;
  if (prefix > 0) ok = ok | ((i < prefix) & (j < prefix));
  if (window > 0) ok = ok & (i - j < window);
  return ok;
}

torch::Tensor allowed_pairs(const AttentionConfig& cfg, int64_t T) {
  if (cfg.rule.of_range_alone()) return allowed_pairs(T, cfg.rule.prefix, cfg.rule.window);
  // A rule given as expressions, over every pair (in double: exact for any length a mask of T^2 can hold).
  const auto i = torch::arange(T, torch::kDouble).unsqueeze(1), j = torch::arange(T, torch::kDouble).unsqueeze(0);
  const auto length = torch::full({}, static_cast<double>(T), torch::kDouble);
  const NamedTensors query = {{"i", i}, {"T", length}}, pair = {{"i", i}, {"j", j}, {"T", length}};
  return (j >= eval_expr(cfg.rule.first_key, query)) & (j <= eval_expr(cfg.rule.last_key, query)) &
         (eval_expr(cfg.rule.pair, pair) > 0);
}

torch::Tensor metric_attention(const AttentionConfig& cfg, const torch::Tensor& s, const torch::Tensor& A,
                               const torch::Tensor& allowed) {
  auto sm = s.masked_fill(allowed.logical_not(), 0.0);
  bool nonnegative = (sm >= 0).all().item<bool>();
  // Softpick's rows may sum to less than 1 by design: what is left goes to no token, not to the others.
  if (normalizer_named(cfg.normalize).metric_reads_attention && nonnegative) return A;
  if (nonnegative) return sm / (sm.sum(-1, true) + 1e-8);
  auto a = sm.abs();
  return a / a.sum(-1, true).clamp_min(1e-30);
}

namespace {

// The names the normaliser's expressions read (plan/normalizers.h) for logits x: the score s, x itself and
// unit. Online (`shift`, the row max m, defined): s = score(x - m), unit = e^-m; directly: s = score(x), 1.
NamedTensors column_values(const AttentionConfig& cfg, const torch::Tensor& x, const torch::Tensor& shift,
                           const torch::Tensor& pos_i, const torch::Tensor& pos_j, const torch::Tensor& seen) {
  if (!shift.defined())
    return {{"s", eval_score(cfg.score, x, pos_i, pos_j, seen).expand_as(x)},
            {"x", x},
            {"unit", torch::ones({}, x.options())}};
  return {
      {"s", eval_score(cfg.score, x - shift, pos_i, pos_j, seen).expand_as(x)}, {"x", x}, {"unit", torch::exp(-shift)}};
}

const torch::Tensor& value_of(const NamedTensors& values, const std::string& name) {
  for (const auto& [n, v] : values)
    if (n == name) return v;
  throw std::logic_error("attention: no value named " + name);
}

}  // namespace

// Z = finish(sum_j term), A = alpha weight / Z over the allowed pairs (plan/normalizers.h), autograd through
// the expressions: the kernels use the table's slopes instead, so this checks them. Online, the row max m is
// held constant (its choice does not change A). Directly, a scale-free Z is taken as M Z(s / M, unit / M),
// M = max |s| held constant: the same value and gradient, but terms of ratios in [0, 1] cannot overflow (the
// p-norm's |s|^(p-1) of a denormal s, p < 1).
AttentionOutput reference_attention(const AttentionConfig& cfg, const AttentionInputs& in, bool want_probe) {
  const int64_t T = in.q.size(2), dh = in.q.size(3);
  const double scale_qk = 1.0 / std::sqrt(static_cast<double>(dh));
  auto x = torch::matmul(in.q, in.k.transpose(-2, -1)) * scale_qk;
  if (in.bias) x = x + *in.bias;
  auto allowed = allowed_pairs(cfg, T).to(x.device());
  // n: the keys each query sees, counted before the k* column and the sink logit join the row.
  auto seen = allowed.sum(-1, true).to(x.scalar_type());
  // 1-based positions; the k* column and the sink logit sit at position 0.
  auto pos_i = torch::arange(1, T + 1, x.options()).unsqueeze(1);
  auto pos_j = torch::arange(1, T + 1, x.options()).unsqueeze(0);
  auto add_column = [&](const torch::Tensor& column, bool first) {
    auto all = torch::ones({T, 1}, allowed.options());
    auto zero = torch::zeros({1, 1}, x.options());
    x = first ? torch::cat({column, x}, -1) : torch::cat({x, column}, -1);
    allowed = first ? torch::cat({all, allowed}, -1) : torch::cat({allowed, all}, -1);
    pos_j = first ? torch::cat({zero, pos_j}, -1) : torch::cat({pos_j, zero}, -1);
  };
  if (in.k_star) {
    auto ks = in.k_star->unsqueeze(0).unsqueeze(2);          // [1, H|1, 1, dh]
    add_column((in.q * ks).sum(-1, true) * scale_qk, true);  // [B, H, T, 1]
  }
  // The sink logit: one more column, last, of no value.
  const int64_t columns = x.size(-1);
  if (in.sink_logit)
    add_column(in.sink_logit->to(x.scalar_type()).view({1, -1, 1, 1}).expand({x.size(0), x.size(1), T, 1}), false);
  const NormalizerForm norm = normalizer_form(normalizer_named(cfg.normalize), cfg.pnorm_p);
  const auto hidden = allowed.logical_not();
  NamedTensors column;
  torch::Tensor scale;  // M of a scale-free row, taken directly
  if (cfg.shifted_exp) {
    // Masked pairs are -inf here: exp of x - m could be inf there, and its backward 0 * inf = NaN.
    auto masked = x.masked_fill(hidden, -std::numeric_limits<double>::infinity());
    auto m = std::get<0>(masked.max(-1, true)).clamp_min(norm.row->shift_floor).detach();
    column = column_values(cfg, masked, m, pos_i, pos_j, seen);
  } else {
    column = column_values(cfg, x, {}, pos_i, pos_j, seen);
    column[0].second = column[0].second.masked_fill(hidden, 0.0);
    if (norm.row->scale_free) {
      scale = column[0].second.detach().abs().amax(-1, true);
      scale = torch::where(scale == 0, torch::ones_like(scale), scale);
      for (auto& [name, value] : column)
        if (name != "x") value = value / scale;
    }
  }
  auto terms = eval_expr(norm.term, column).expand_as(x).masked_fill(hidden, 0.0);
  auto Z = eval_expr(norm.finish, {{"P", terms.sum(-1, true)}, {"unit", value_of(column, "unit")}});
  if (scale.defined()) Z = Z * scale;
  // An all-zero row (relu scores, say) has nothing to normalize.
  Z = torch::where(Z.abs() < 1e-30, torch::ones_like(Z), Z);
  auto w = eval_expr(norm.weight, column).expand_as(x).masked_fill(hidden, 0.0);
  if (scale.defined()) w = w * scale;
  auto A = w * (cfg.scale / Z);
  torch::Tensor sink_share;
  if (in.sink_logit) {
    sink_share = (w.narrow(-1, columns, 1) / Z).squeeze(-1);
    w = w.narrow(-1, 0, columns), A = A.narrow(-1, 0, columns), allowed = allowed.narrow(-1, 0, columns);
  }
  torch::Tensor out;
  if (in.k_star) {
    auto A_star = A.narrow(-1, 0, 1);
    auto A_tok = A.narrow(-1, 1, T);
    out = torch::matmul(A_tok, in.v);
    if (in.v_star) out = out + A_star * in.v_star->unsqueeze(0).unsqueeze(2);
  } else {
    out = torch::matmul(A, in.v);
  }
  AttentionOutput result{out, {}, {}};
  if (want_probe) {
    torch::NoGradGuard no_grad;
    result.probe = metric_attention(cfg, w.detach(), A.detach(), allowed);
    if (sink_share.defined()) result.sink_share = sink_share.detach();
  }
  return result;
}

torch::Tensor sink_logit_share(const AttentionConfig& cfg, const torch::Tensor& b, const torch::Tensor& Z,
                               const torch::Tensor& shift_or_sum) {
  const auto x = b.expand_as(Z), zero = torch::zeros_like(Z);
  const NamedTensors column = column_values(cfg, x, cfg.shifted_exp ? shift_or_sum : torch::Tensor(), zero, zero, zero);
  return eval_expr(normalizer_form(normalizer_named(cfg.normalize), cfg.pnorm_p).weight, column).expand_as(Z) / Z;
}

}  // namespace sink::rt
