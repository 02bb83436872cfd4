#include "runtime/training/optimizer.h"

#include <cmath>
#include <torch/version.h>

// `_foreach_mul_(tensors, scalar_tensor)`, which scales every gradient by a factor still on the device in one
// multi-tensor kernel, came with PyTorch 2.1; before it, one mul_ per gradient does the same.
#define SINKLAB_FOREACH_MUL_BY_TENSOR \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))

namespace sink::rt {

std::unique_ptr<torch::optim::AdamW> make_optimizer(Transformer& model, const TrainConfig& cfg) {
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model.decayed_parameters(), options(cfg.weight_decay));
  auto rest = model.other_parameters();
  if (!rest.empty()) groups.emplace_back(rest, options(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(cfg.lr));
}

double learning_rate(const TrainConfig& cfg, int64_t step) {
  if (cfg.warmup > 0 && step < cfg.warmup)
    return cfg.lr * static_cast<double>(step + 1) / static_cast<double>(cfg.warmup);
  if (cfg.schedule != Schedule::cosine) return cfg.lr;
  const double span = std::max<int64_t>(1, cfg.steps - cfg.warmup);
  const double progress = std::min(1.0, static_cast<double>(step - cfg.warmup) / span);
  return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + std::cos(M_PI * progress));
}

void set_learning_rate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

void clip_gradient_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  // Every gradient's norm in one call: on a GPU a multi-tensor kernel or a few, not one reduction per
  // parameter (a 60M model has about a hundred); on the CPU the same per-tensor norms as before.
  const std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  const auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm();
  const auto scale = (max_norm / (total + 1e-6)).clamp_max(1.0);
  torch::NoGradGuard no_grad;
#if SINKLAB_FOREACH_MUL_BY_TENSOR
  at::_foreach_mul_(grads, scale);
#else
  for (auto& g : grads) g.mul_(scale);
#endif
}

}  // namespace sink::rt
