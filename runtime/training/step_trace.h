// `sinkc run --profile`, per kernel: LibTorch's profiler over a few steady
// steps (after two of warm-up), saved as RUN/trace.json in the Chrome trace
// format (Perfetto and TensorBoard's profile view open it), and summed into
// a table of the top operators and GPU kernels (runtime/training/trace_table.h)
// that profile.json keeps and the run prints. Where LibTorch was built without
// Kineto (Debian's 1.13), the trace is written here from the profiler's own
// events: the CPU's operators, no GPU kernels.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <torch/torch.h>

namespace sink::rt {

class StepTrace {
 public:
  static constexpr int64_t kWarmupSteps = 2, kTracedSteps = 3;

  // Traces steps [first_step + warm-up, ... + kTracedSteps) of those this process runs, [first_step, steps),
  // fewer where the run is shorter. Nothing is traced unless enabled.
  StepTrace(bool enabled, const torch::Device& device, int64_t first_step, int64_t steps);
  ~StepTrace();
  void step_begins(int64_t step);
  // After the step's optimizer: ends the trace after its last step, writes `trace_path` and makes the table.
  void step_ended(int64_t step, const std::string& trace_path);
  // The table, once the traced steps ran (null before, or when the trace failed; `error` then says why).
  const nlohmann::json& table() const { return table_; }
  const std::string& error() const { return error_; }

 private:
  bool enabled_;
  torch::Device device_;
  int64_t first_traced_ = 0, last_traced_ = -1;
  bool active_ = false;
  nlohmann::json table_;
  std::string error_;
};

}  // namespace sink::rt
