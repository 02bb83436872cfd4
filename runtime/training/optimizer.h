// AdamW with decoupled weight decay on weight matrices and embeddings only
// (not on norm gains, k*, v*, the sink token or the T5 bucket table), and
// the learning-rate schedule.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/training/model.h"

namespace sink::rt {

// torch::optim::AdamW's options, state and checkpoints, with step() as a few
// multi-tensor operations per parameter group instead of six kernels per
// parameter: LibTorch's fused AdamW (one kernel) where it has one for the
// device (>= 2.4), else the same arithmetic as LibTorch's AdamW in
// `_foreach_` operations. Nothing is read back to the host: the step counts
// and bias corrections are host numbers, as in LibTorch's AdamW. amsgrad
// and a loss closure take LibTorch's own step.
class MultiTensorAdamW : public torch::optim::AdamW {
 public:
  enum class Kernel { foreach_, fused };
  // The fastest this LibTorch has; a test may ask for the other.
  static Kernel best_kernel();
  MultiTensorAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                   const torch::optim::AdamWOptions& defaults, Kernel kernel = best_kernel());
  torch::Tensor step(LossClosure closure = nullptr) override;
  Kernel kernel() const { return kernel_; }

  // The update of a step captured as a CUDA graph (runtime/training/training_step.h): the fused kernel, its
  // learning rate read from `lr` (a scalar tensor on the parameters' device) and each group's step count from a
  // tensor on the device that the update advances itself, so one capture replays at every step of the schedule.
  // The first call, made outside a capture, creates that count (from the host's) and any missing moments. Why it
  // cannot run (empty where it can): this LibTorch has no fused kernel with the rate on the device (it came with
  // 2.4), amsgrad, or a group's parameters that are not all alike or not all at one step count.
  std::string device_update_unsupported() const;
  void update_on_device(const torch::Tensor& lr);
  // The host's step counts (what a checkpoint saves) advanced by one update that update_on_device made, once per
  // step: a replayed graph runs none of the host's code.
  void count_update_on_host();

 private:
  // p's state, made (step 0, zero moments) where it has none yet.
  torch::optim::AdamWParamState& state_of(const torch::Tensor& p);
  Kernel kernel_;
  // fused: each device's step count as a tensor, which the kernel reads (it is the same for every parameter).
  std::map<std::string, torch::Tensor> step_counts_;
  // update_on_device: each group's step count, advanced on the device.
  std::vector<torch::Tensor> device_step_counts_;
};

std::unique_ptr<torch::optim::AdamW> make_optimizer(Transformer& model, const TrainConfig& cfg);
// Linear warm-up to lr over `warmup` steps, then constant or cosine to min_lr.
double learning_rate(const TrainConfig& cfg, int64_t step);
void set_learning_rate(torch::optim::Optimizer& opt, double lr);
// Scales the gradients so their joint L2 norm is at most max_norm, as
// LibTorch's clip_grad_norm_ does, but without reading the norm back to the
// host: that read would make the host wait for the GPU every step. The norms
// and the scaling are multi-tensor operations where LibTorch has them.
void clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace sink::rt
