// train.precision = bf16: the forward pass under LibTorch's autocast in
// bfloat16, for the run's device type. Matmuls (and so the generated
// attention kernels, which then get bf16 q, k, v) run in bf16; reductions,
// the loss, the weights and the optimizer state stay in fp32, as PyTorch's
// torch.autocast does. The scope restores what it found, so a caller's own
// autocast setting survives.
#pragma once
#include <torch/torch.h>

#include "plan/choices.h"

namespace sink::rt {

class AutocastScope {
 public:
  AutocastScope(Precision precision, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

}  // namespace sink::rt
