#include "runtime/measurement/geometry.h"

namespace sink::rt {
namespace {

// ||x_1|| / mean_{t>1} ||x_t||, averaged over the batch: [H].
torch::Tensor first_norm_ratio(const torch::Tensor& x) {
  auto norms = x.norm(2, -1);  // [B, H, T]
  auto rest = norms.narrow(2, 1, norms.size(2) - 1).mean(2);
  return (norms.select(2, 0) / rest.clamp_min(1e-30)).mean(0);
}

}  // namespace

torch::Tensor first_token_geometry(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  torch::NoGradGuard no_grad;
  auto qd = q.to(torch::kDouble), kd = k.to(torch::kDouble), vd = v.to(torch::kDouble);
  const int64_t T = qd.size(2);
  auto k1 = kd.narrow(2, 0, 1);         // [B, H, 1, dh]
  auto later = qd.narrow(2, 1, T - 1);  // [B, H, T-1, dh]
  auto cos = (later * k1).sum(-1) / (later.norm(2, -1) * k1.norm(2, -1)).clamp_min(1e-30);
  return torch::stack({first_norm_ratio(kd), first_norm_ratio(vd), cos.mean(std::vector<int64_t>{0, 2})});
}

}  // namespace sink::rt
