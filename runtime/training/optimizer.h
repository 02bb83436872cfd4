// AdamW with decoupled weight decay on weight matrices and embeddings only
// (not on norm gains, k*, v*, the sink token or the T5 bucket table), and
// the learning-rate schedule.
#pragma once
#include <memory>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/training/model.h"

namespace sink::rt {

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
