#include "runtime/training/step_profile.h"

#include <fmt/format.h>

namespace sink::rt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<const char*, StepProfile::kParts> kPartNames = {"data",      "forward",     "backward",
                                                                     "optimizer", "measurement", "checkpoints"};

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

StepProfile::StepProfile(bool enabled, const torch::Device& device) : enabled_(enabled), device_(device) {}

void StepProfile::start() {
  if (!enabled_) return;
  synchronize();
  started_ = Clock::now();
}

void StepProfile::synchronize() const {
  if (device_.is_cuda()) torch::cuda::synchronize(device_.has_index() ? device_.index() : -1);
}

StepProfile::Scope::Scope(StepProfile& profile, Part part)
    : profile_(profile.enabled_ ? &profile : nullptr), part_(part) {
  if (!profile_) return;
  profile_->synchronize();  // what was queued before belongs to the part before
  began_ = Clock::now();
}

StepProfile::Scope::~Scope() {
  if (!profile_) return;
  profile_->synchronize();
  profile_->seconds_[part_] += since(began_);
}

nlohmann::json StepProfile::to_json(int64_t steps) const {
  const double total = since(started_);
  nlohmann::json parts = nlohmann::json::object();
  double covered = 0;
  for (int p = 0; p < kParts; ++p) parts[kPartNames[p]] = seconds_[p], covered += seconds_[p];
  // The parts are disjoint stretches of the total, so what is left is never negative but for rounding.
  parts["other"] = std::max(0.0, total - covered);
  return {{"steps", steps}, {"total_s", total}, {"parts", parts}};
}

std::string StepProfile::text(const std::string& run, int64_t steps) const {
  const nlohmann::json j = to_json(steps);
  const double total = j["total_s"];
  std::string out = fmt::format("profile of {}: {} steps in {:.3f} s{}\n", run, steps, total,
                                device_.is_cuda() ? " (each part synchronised with the GPU)" : "");
  std::vector<std::string> names(kPartNames.begin(), kPartNames.end());
  names.push_back("other");
  for (const auto& name : names) {
    const double s = j["parts"][name].get<double>();
    out += fmt::format("  {:<12} {:>9.3f} s  {:>5.1f}%  {:>9.3f} ms/step\n", name, s, total > 0 ? 100 * s / total : 0.0,
                       steps > 0 ? 1000 * s / steps : 0.0);
  }
  return out;
}

}  // namespace sink::rt
