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

// torch::optim::AdamW's options, state and checkpoints, with its update written once (update()) as a few
// multi-tensor operations per parameter group instead of six kernels per parameter: LibTorch's fused AdamW (one
// kernel) where it has one for the device (>= 2.4), else the same arithmetic as LibTorch's AdamW in `_foreach_`
// operations. Nothing is read back to the host. The fused kernel reads its learning rate from a tensor on the device
// (set_learning_rate fills it) and each group's step count from a tensor on the device that the update advances
// itself, so a step captured as a CUDA graph replays at every step of the schedule; the host's step counts (what a
// checkpoint saves) advance apart (count_update), since a replayed graph runs none of the host's code. amsgrad and a
// loss closure take LibTorch's own step.
class MultiTensorAdamW : public torch::optim::AdamW {
 public:
  enum class Kernel { foreach_, fused };
  // The fastest this LibTorch has; a test may ask for the other.
  static Kernel best_kernel();
  MultiTensorAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                   const torch::optim::AdamWOptions& defaults, Kernel kernel = best_kernel());
  // torch::optim's step: update(), then count_update().
  torch::Tensor step(LossClosure closure = nullptr) override;
  Kernel kernel() const { return kernel_; }

  // Every group's learning rate: the options' number, and the tensor on each device that the fused kernel reads
  // (one rate for every group, as the schedule sets it).
  void set_learning_rate(double lr);
  // One AdamW update of every parameter that has a gradient, at the host's step counts plus one.
  void update();
  // The host's step counts advanced by one update.
  void count_update();
  // Why update() cannot be captured as part of a CUDA graph (empty where it can): this LibTorch has no fused kernel
  // with the rate on the device (it came with 2.4), amsgrad, or a group whose parameters are not all alike or not
  // all at one step count (the update would then launch with numbers from the host).
  std::string capture_unsupported() const;

 private:
  // p's state, made (step 0, zero moments) where it has none yet.
  torch::optim::AdamWParamState& state_of(const torch::Tensor& p);
  // The learning-rate tensor of `device`, made from the options' rate where there is none yet.
  const torch::Tensor& device_rate(const torch::Device& device);
  Kernel kernel_;
  double lr_ = 0;
  std::map<std::string, torch::Tensor> rates_;  // per device: the rate the fused kernel reads
  // Per group and device: the step count the fused kernel reads, advanced on the device by each update; made from
  // the host's count where there is none (a fresh or resumed run), dropped where the group's counts diverge.
  std::map<std::pair<size_t, std::string>, torch::Tensor> device_counts_;
};

std::unique_ptr<MultiTensorAdamW> make_optimizer(Transformer& model, const TrainConfig& cfg);
// Linear warm-up to lr over `warmup` steps, then constant or cosine to min_lr.
double learning_rate(const TrainConfig& cfg, int64_t step);
// Every group's rate (a MultiTensorAdamW's device tensors too).
void set_learning_rate(torch::optim::Optimizer& opt, double lr);
// Scales the gradients so their joint L2 norm is at most max_norm, as
// LibTorch's clip_grad_norm_ does, but without reading the norm back to the
// host: that read would make the host wait for the GPU every step. The norms
// and the scaling are multi-tensor operations where LibTorch has them.
void clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace sink::rt
