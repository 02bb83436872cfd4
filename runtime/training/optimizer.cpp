#include "runtime/training/optimizer.h"

#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <torch/version.h>
#include <type_traits>

// `_foreach_mul_(tensors, scalar_tensor)`, which scales every gradient by a factor still on the device in one
// multi-tensor kernel, came with PyTorch 2.1; before it, one mul_ per gradient does the same.
#define SINKLAB_FOREACH_MUL_BY_TENSOR \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))

// `_fused_adamw_` has a CUDA kernel since PyTorch 2.0 and a CPU one since 2.4.
#define SINKLAB_FUSED_ADAMW (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace sink::rt {
namespace {

// The key of a parameter's state: LibTorch 1.13 keys it by the TensorImpl's
// address as text (c10::guts::to_string), 2.x by the address itself.
template <class Map>
typename Map::key_type state_key(const Map&, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream text;
    text << p.unsafeGetTensorImpl();
    return text.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

// One update's tensors: parameters of one group, on one device, at one step count.
struct Update {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  bool fusable = true;  // the fused kernel's restrictions: one dtype, dense and alike in layout
};

}  // namespace

torch::optim::AdamWParamState& MultiTensorAdamW::state_of(const torch::Tensor& p) {
  auto key = state_key(state_, p);
  auto found = state_.find(key);
  if (found == state_.end()) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    found = state_.emplace(key, std::move(fresh)).first;
  }
  return static_cast<torch::optim::AdamWParamState&>(*found->second);
}

MultiTensorAdamW::Kernel MultiTensorAdamW::best_kernel() {
#if SINKLAB_FUSED_ADAMW
  return Kernel::fused;
#else
  return Kernel::foreach_;
#endif
}

MultiTensorAdamW::MultiTensorAdamW(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                                   const torch::optim::AdamWOptions& defaults, Kernel kernel)
    : torch::optim::AdamW(groups, defaults), kernel_(kernel) {
  lr_ = param_groups_.empty() ? defaults.lr()
                              : static_cast<const torch::optim::AdamWOptions&>(param_groups_[0].options()).lr();
#if !SINKLAB_FUSED_ADAMW
  if (kernel_ == Kernel::fused) throw std::invalid_argument("this LibTorch has no fused AdamW (it came with 2.4)");
#endif
}

torch::Tensor MultiTensorAdamW::step(LossClosure closure) {
  if (closure) return torch::optim::AdamW::step(closure);
  for (auto& group : param_groups_)
    if (static_cast<torch::optim::AdamWOptions&>(group.options()).amsgrad()) return torch::optim::AdamW::step();
  update();
  count_update();
  return {};
}

void MultiTensorAdamW::set_learning_rate(double lr) {
  for (auto& group : param_groups_) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  lr_ = lr;
  for (auto& [device, rate] : rates_) rate.fill_(lr);  // a launch with the value, not a read
}

const torch::Tensor& MultiTensorAdamW::device_rate(const torch::Device& device) {
  torch::Tensor& rate = rates_[device.str()];
  // The fused CUDA kernel reads a float rate; the CPU's reads a double, the rate the foreach form is given.
  if (!rate.defined())
    rate = torch::full({}, lr_,
                       torch::TensorOptions().device(device).dtype(device.is_cuda() ? torch::kFloat : torch::kDouble));
  return rate;
}

void MultiTensorAdamW::update() {
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < param_groups_.size(); ++k) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(param_groups_[k].options());
    const double lr = options.lr(), wd = options.weight_decay(), eps = options.eps();
    const auto [beta1, beta2] = options.betas();
    // Keyed by the device, then the step count after this update: a group's parameters normally share both.
    std::map<std::string, std::map<int64_t, Update>> updates;
    for (auto& p : param_groups_[k].params()) {
      if (!p.grad().defined()) continue;
      auto& st = state_of(p);
      Update& u = updates[p.device().str()][st.step() + 1];
      const torch::Tensor& g = p.grad();
      u.fusable = u.fusable && p.scalar_type() == g.scalar_type() && p.is_contiguous() && g.is_contiguous() &&
                  st.exp_avg().is_contiguous() && st.exp_avg_sq().is_contiguous() &&
                  (u.params.empty() || u.params[0].scalar_type() == p.scalar_type());
      u.params.push_back(p);
      u.grads.push_back(g);
      u.exp_avgs.push_back(st.exp_avg());
      u.exp_avg_sqs.push_back(st.exp_avg_sq());
    }
    for (auto& [device, by_step] : updates) {
      const std::pair<size_t, std::string> counted{k, device};
      if (by_step.size() != 1) device_counts_.erase(counted);  // out of step: made again from the host's
      for (auto& [step, u] : by_step) {
#if SINKLAB_FUSED_ADAMW
        if (kernel_ == Kernel::fused && u.fusable) {
          torch::Tensor count;
          if (by_step.size() == 1) {
            torch::Tensor& kept = device_counts_[counted];
            if (!kept.defined())
              kept = torch::full({}, static_cast<double>(step - 1),
                                 torch::TensorOptions().dtype(torch::kFloat).device(u.params[0].device()));
            kept.add_(1);
            count = kept;
          } else {
            count = torch::full({}, static_cast<double>(step),
                                torch::TensorOptions().dtype(torch::kFloat).device(u.params[0].device()));
          }
          const std::vector<torch::Tensor> counts(u.params.size(), count);
          at::_fused_adamw_(u.params, u.grads, u.exp_avgs, u.exp_avg_sqs, {}, counts, device_rate(u.params[0].device()),
                            beta1, beta2, wd, eps, /*amsgrad=*/false,
                            /*maximize=*/false);
          continue;
        }
#endif
        // LibTorch's AdamW step, operation for operation, on every tensor at once.
        const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
        const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
        if (wd != 0) at::_foreach_mul_(u.params, 1 - lr * wd);
        at::_foreach_mul_(u.exp_avgs, beta1);
        at::_foreach_add_(u.exp_avgs, u.grads, 1 - beta1);
        at::_foreach_mul_(u.exp_avg_sqs, beta2);
        at::_foreach_addcmul_(u.exp_avg_sqs, u.grads, u.grads, 1 - beta2);
        std::vector<torch::Tensor> denom = at::_foreach_sqrt(u.exp_avg_sqs);
        at::_foreach_div_(denom, std::sqrt(bias_correction2));
        at::_foreach_add_(denom, eps);
        at::_foreach_addcdiv_(u.params, u.exp_avgs, denom, -lr / bias_correction1);
      }
    }
  }
}

void MultiTensorAdamW::count_update() {
  for (auto& group : param_groups_)
    for (auto& p : group.params())
      if (p.grad().defined()) {
        auto& st = state_of(p);
        st.step(st.step() + 1);
      }
}

std::string MultiTensorAdamW::capture_unsupported() const {
#if !SINKLAB_FUSED_ADAMW
  return "this LibTorch's AdamW has no fused kernel that reads its learning rate on the device (PyTorch 2.4 or later)";
#else
  if (kernel_ != Kernel::fused) return "the optimizer runs its foreach form, whose rate and counts are host numbers";
  for (const auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (options.amsgrad()) return "AdamW with amsgrad has no fused update here";
    std::optional<int64_t> steps;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;  // as update() does: no update, no step counted
      if (p.scalar_type() != group.params()[0].scalar_type() || p.device() != group.params()[0].device() ||
          !p.is_contiguous() || !p.grad().is_contiguous() || p.grad().scalar_type() != p.scalar_type())
        return "a group's parameters differ in type, device or layout";
      auto found = state_.find(state_key(state_, p));
      const int64_t at = found == state_.end() ? 0 : static_cast<torch::optim::AdamWParamState&>(*found->second).step();
      if (steps && *steps != at) return "a group's parameters are at different step counts";
      steps = at;
    }
  }
  return {};
#endif
}

std::unique_ptr<MultiTensorAdamW> make_optimizer(Transformer& model, const TrainConfig& cfg) {
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model.decayed_parameters(), options(cfg.weight_decay));
  auto rest = model.other_parameters();
  if (!rest.empty()) groups.emplace_back(rest, options(0.0));
  return std::make_unique<MultiTensorAdamW>(groups, torch::optim::AdamWOptions(cfg.lr));
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
  if (auto* ours = dynamic_cast<MultiTensorAdamW*>(&opt)) return ours->set_learning_rate(lr);
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
