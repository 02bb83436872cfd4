// The most memory a run held, for summary.json: on a CPU the process's peak
// resident set (VmHWM), which Linux lets a process reset, so that each run of
// a sweep trained in one process gets its own; on a GPU the most LibTorch's
// caching allocator had allocated, where LibTorch has CUDA compiled in (its
// statistics' peak reset at the run's start).
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace sink::rt {

class PeakMemory {
 public:
  // Starts a new peak from now, where the system allows it.
  explicit PeakMemory(const torch::Device& device);
  // {"bytes": N, "of": what was measured}, or null when nothing could be read.
  nlohmann::json read() const;

 private:
  torch::Device device_;
  bool reset_ = false;  // the peak counts from this run's start, not the process's
};

// The process's peak resident set in bytes (VmHWM of /proc/self/status), or -1.
int64_t process_peak_resident_bytes();

}  // namespace sink::rt
