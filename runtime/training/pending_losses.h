// The training loss of each step, kept on the device that computed it until
// a log line, a measurement or a checkpoint needs it on the host. Reading
// each step's loss as it comes would make the host wait for the GPU every
// step; here it waits once per read, for all the steps since the last one.
#pragma once
#include <cstdint>
#include <optional>
#include <torch/torch.h>
#include <vector>

namespace sink::rt {

class PendingLosses {
 public:
  void add(int64_t step, torch::Tensor loss);
  bool empty() const { return losses_.empty(); }

  struct Read {
    double sum = 0;  // of the finite steps before the first non-finite one
    int64_t count = 0;
    double last = NAN;
    std::optional<int64_t> first_non_finite;  // the 0-based step
  };
  // One transfer of every pending loss; leaves none pending.
  Read read();

 private:
  int64_t first_step_ = 0;
  std::vector<torch::Tensor> losses_;
};

}  // namespace sink::rt
