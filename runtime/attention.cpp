#include "runtime/attention.h"

#include <cmath>

#include "plan/normalizers.h"
#include "runtime/score.h"

namespace sink::rt {

torch::Tensor allowed_pairs(int64_t T, int64_t prefix, int64_t window) {
  auto i = torch::arange(T).unsqueeze(1);
  auto j = torch::arange(T).unsqueeze(0);
  auto ok = j <= i;
  if (prefix > 0) ok = ok | ((i < prefix) & (j < prefix));
  if (window > 0) ok = ok & (i - j < window);
  return ok;
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

// Z = finish(sum_j term(s_ij)) over the allowed pairs (plan/normalizers.h),
// autograd through both: the kernels use the table's slope instead, so this
// checks it. A scale-free Z is taken as m Z(s / m), m = max |s| held
// constant: the same value and gradient, but terms of ratios in [0, 1]
// cannot overflow (the p-norm's |s|^(p-1) of a denormal s, p < 1).
static torch::Tensor normalize_rows(const NormalizerForm& norm, const torch::Tensor& s, const torch::Tensor& allowed) {
  auto m = torch::ones({1}, s.options());
  if (norm.row->scale_free) {
    m = s.detach().abs().amax(-1, true);
    m = torch::where(m == 0, torch::ones_like(m), m);
  }
  auto terms = eval_expr(norm.term, {{"s", s / m}}).expand_as(s).masked_fill(allowed.logical_not(), 0.0);
  return m * eval_expr(norm.finish, {{"P", terms.sum(-1, true)}});
}

AttentionOutput reference_attention(const AttentionConfig& cfg, const AttentionInputs& in, bool want_probe) {
  const int64_t T = in.q.size(2), dh = in.q.size(3);
  const double scale_qk = 1.0 / std::sqrt(static_cast<double>(dh));
  auto x = torch::matmul(in.q, in.k.transpose(-2, -1)) * scale_qk;
  if (in.bias) x = x + *in.bias;
  auto allowed = allowed_pairs(T, cfg.prefix, cfg.window).to(x.device());
  // 1-based positions; the k* column sits at position 0.
  auto pos_i = torch::arange(1, T + 1, x.options()).unsqueeze(1);
  auto pos_j = torch::arange(1, T + 1, x.options()).unsqueeze(0);
  if (in.k_star) {
    auto ks = in.k_star->unsqueeze(0).unsqueeze(2);  // [1, H|1, 1, dh]
    auto x_star = (in.q * ks).sum(-1, true) * scale_qk;  // [B, H, T, 1]
    x = torch::cat({x_star, x}, -1);
    allowed = torch::cat({torch::ones({T, 1}, allowed.options()), allowed}, -1);
    pos_j = torch::cat({torch::zeros({1, 1}, x.options()), pos_j}, -1);
  }
  torch::Tensor s, A, sink_share;
  const double inf = std::numeric_limits<double>::infinity();
  if (cfg.softmax) {
    // exp(qk) / sum exp(qk), max-subtracted.
    auto masked = x.masked_fill(allowed.logical_not(), -inf);
    if (in.sink_logit) {
      // One more column, b_h for every query, whose value is 0: dropped after the softmax.
      auto b = in.sink_logit->to(x.scalar_type()).view({1, -1, 1, 1}).expand({x.size(0), x.size(1), T, 1});
      auto with_sink = torch::softmax(torch::cat({b, masked}, -1), -1);
      sink_share = with_sink.narrow(-1, 0, 1).squeeze(-1);
      A = with_sink.narrow(-1, 1, masked.size(-1));
    } else {
      A = torch::softmax(masked, -1);
    }
    if (want_probe) s = torch::exp(masked - std::get<0>(masked.max(-1, true)));
    if (cfg.scale != 1) A = A * cfg.scale;
  } else if (cfg.softpick()) {
    // (e^x - 1) e^-c with c = max(0, row max): the same ratios, and neither
    // e^(x - c) nor e^-c can overflow. Masked pairs take no part in either sum.
    auto masked = x.masked_fill(allowed.logical_not(), -inf);
    auto c = std::get<0>(masked.max(-1, true)).clamp_min(0.0).detach();
    // Near x = 0 the difference cancels: e^-c expm1(x) there (the kernels do the same).
    auto near_zero = torch::expm1(masked.clamp(-0.5, 0.5)) * torch::exp(-c);
    auto u = torch::where(masked.abs() < 0.5, near_zero, torch::exp(masked - c) - torch::exp(-c));
    u = u.masked_fill(allowed.logical_not(), 0.0);
    s = torch::relu(u);
    auto Z = u.abs().sum(-1, true) + kSoftpickEps * torch::exp(-c);
    A = s * (cfg.scale / Z);
  } else {
    // s / ||s||_p is the same for exp(x - m): with the row max m, exp cannot
    // overflow however large the logits grow (kernel_spec.h, shifted_exp).
    // Masked pairs are -inf here, not x - m: exp of that could be inf, and its
    // backward 0 * inf = NaN although the pair is masked out below.
    auto shifted = [&] {
      auto masked = x.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
      return masked - std::get<0>(masked.max(-1, true)).detach();
    };
    s = eval_score(cfg.score, cfg.shifted_exp ? shifted() : x, pos_i, pos_j);
    s = s.expand_as(x).masked_fill(allowed.logical_not(), 0.0);
    auto Z = normalize_rows(normalizer_form(normalizer_named(cfg.normalize), cfg.pnorm_p), s, allowed);
    // An all-zero row (relu scores, say) has nothing to normalize.
    Z = torch::where(Z.abs() < 1e-30, torch::ones_like(Z), Z);
    A = s * (cfg.scale / Z);
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
    result.probe = metric_attention(cfg, s.detach(), A.detach(), allowed);
    if (sink_share.defined()) result.sink_share = sink_share.detach();
  }
  return result;
}

}  // namespace sink::rt
