// Where a run's time goes (`sinkc run --profile`): the training loop's wall
// time split into the data, the forward passes, the backward passes, the
// optimizer (zeroing, averaging across workers, clipping, the step), the
// measurements and the checkpoints; what none of them covers (reading the
// losses, the progress line) is "other". On a GPU each part is bounded by a
// synchronisation, so that it is charged the device's time and not only the
// time the host took to queue it; that changes the run's pace, which is why
// it is asked for. Without --profile nothing is timed or synchronised.
#pragma once
#include <array>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <torch/torch.h>

namespace sink::rt {

class StepProfile {
 public:
  enum Part { Data, Forward, Backward, Optimizer, Measurement, Checkpoints, kParts };

  StepProfile(bool enabled, const torch::Device& device);
  bool enabled() const { return enabled_; }
  void start();  // the loop begins: the total runs from here

  // Charges the time until it is destroyed to `part`.
  class Scope {
   public:
    Scope(StepProfile& profile, Part part);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepProfile* profile_;  // null when the profile is off
    Part part_;
    std::chrono::steady_clock::time_point began_;
  };
  Scope time(Part part) { return Scope(*this, part); }

  // {"steps", "total_s", "parts": {"data": s, ..., "other": s}}: the parts sum to the total.
  nlohmann::json to_json(int64_t steps) const;
  // The same as lines for a terminal: seconds, share, milliseconds per step.
  std::string text(const std::string& run, int64_t steps) const;

 private:
  void synchronize() const;
  bool enabled_;
  torch::Device device_;
  std::chrono::steady_clock::time_point started_;
  std::array<double, kParts> seconds_{};
};

}  // namespace sink::rt
