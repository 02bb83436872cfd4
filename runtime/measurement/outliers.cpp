#include "runtime/measurement/outliers.h"

#include <cmath>

namespace sink::rt {

void Moments::add(const torch::Tensor& values) {
  auto x = values.detach().to(torch::kCPU, torch::kDouble).flatten();
  if (x.numel() == 0) return;
  if (!shifted_) shift_ = x.mean().item<double>(), shifted_ = true;
  auto d = x - shift_;
  auto d2 = d * d;
  n_ += static_cast<double>(x.numel());
  s1_ += d.sum().item<double>();
  s2_ += d2.sum().item<double>();
  s3_ += (d2 * d).sum().item<double>();
  s4_ += (d2 * d2).sum().item<double>();
  max_abs_ = std::max(max_abs_, x.abs().max().item<double>());
}

Moments& Moments::operator+=(const Moments& o) {
  if (o.n_ == 0) return *this;
  if (n_ == 0) return *this = o;
  // Re-centre o's sums on this shift: (y + c)^k expanded, y = x - o.shift, c = o.shift - shift.
  const double c = o.shift_ - shift_, c2 = c * c;
  s4_ += o.s4_ + 4 * c * o.s3_ + 6 * c2 * o.s2_ + 4 * c2 * c * o.s1_ + c2 * c2 * o.n_;
  s3_ += o.s3_ + 3 * c * o.s2_ + 3 * c2 * o.s1_ + c2 * c * o.n_;
  s2_ += o.s2_ + 2 * c * o.s1_ + c2 * o.n_;
  s1_ += o.s1_ + c * o.n_;
  n_ += o.n_;
  max_abs_ = std::max(max_abs_, o.max_abs_);
  return *this;
}

double Moments::excess_kurtosis() const {
  if (n_ == 0) return NAN;
  // Central moments from the shifted sums: m = mean of y = x - shift.
  const double m = s1_ / n_, e2 = s2_ / n_, e3 = s3_ / n_, e4 = s4_ / n_;
  const double var = e2 - m * m;
  const double m4 = e4 - 4 * m * e3 + 6 * m * m * e2 - 3 * m * m * m * m;
  return var > 0 ? m4 / (var * var) - 3 : NAN;
}

std::vector<double> excess_kurtosis(const std::vector<Moments>& layers) {
  std::vector<double> out;
  for (const auto& m : layers) out.push_back(m.excess_kurtosis());
  return out;
}

std::vector<double> max_abs(const std::vector<Moments>& layers) {
  std::vector<double> out;
  for (const auto& m : layers) out.push_back(m.max_abs());
  return out;
}

}  // namespace sink::rt
