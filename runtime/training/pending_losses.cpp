#include "runtime/training/pending_losses.h"

#include <cmath>

namespace sink::rt {

void PendingLosses::add(int64_t step, torch::Tensor loss) {
  if (losses_.empty()) first_step_ = step;
  losses_.push_back(loss.detach().reshape({}));
}

PendingLosses::Read PendingLosses::read() {
  Read r;
  if (losses_.empty()) return r;
  // In double on the host, in step order: the sum a per-step read would give.
  const auto host = torch::stack(losses_).to(torch::kCPU).to(torch::kDouble).contiguous();
  const double* values = host.data_ptr<double>();
  for (int64_t k = 0; k < host.numel(); ++k) {
    if (!std::isfinite(values[k])) {
      r.first_non_finite = first_step_ + k;
      r.last = values[k];
      break;
    }
    r.sum += values[k];
    r.count += 1;
    r.last = values[k];
  }
  losses_.clear();
  return r;
}

}  // namespace sink::rt
