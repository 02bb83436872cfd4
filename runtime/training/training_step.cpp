#include "runtime/training/training_step.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <functional>

#include "runtime/gpu_features.h"
#include "runtime/training/device.h"
#include "runtime/training/lm_head_loss.h"
#include "runtime/training/precision.h"

#if SINKLAB_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace sink::rt {
namespace {

// Steps before the capture: the first compiles and tunes the generated kernels and makes AdamW's moments, the
// later ones run as every step will (PyTorch's own recipe warms up a few iterations on the capture's stream).
constexpr int64_t kWarmUpSteps = 3;

// The micro-batches of (x, y) forward and backward, each loss weighted by its share of the rows, so the gradients
// accumulated are the whole batch's (every sequence carries as many loss positions). The step's loss, unread.
torch::Tensor forward_backward(Transformer& model, const RunConfig& cfg, const torch::Tensor& x, const torch::Tensor& y,
                               StepProfile& profile) {
  const int64_t rows = x.size(0), micro = cfg.train.micro_batch > 0 ? std::min(cfg.train.micro_batch, rows) : rows;
  torch::Tensor step_loss;
  for (int64_t at = 0; at < rows; at += micro) {
    const int64_t n = std::min(micro, rows - at);
    torch::Tensor loss;
    {
      auto timed = profile.time(StepProfile::Forward);
      {
        AutocastScope autocast(cfg.train.precision, model.device);
        loss = lm_loss(model, x.narrow(0, at, n), y.narrow(0, at, n), cfg.model.attention.rule.prefix);
      }
      loss = loss.to(torch::kFloat) * (static_cast<double>(n) / rows);
    }
    {
      auto timed = profile.time(StepProfile::Backward);
      loss.backward();
    }
    step_loss = step_loss.defined() ? step_loss + loss.detach() : loss.detach();
  }
  return step_loss;
}

}  // namespace

StepMode requested_step_mode(const torch::Device& device) {
  const FeatureDecision graph = gpu_feature(
      GpuFeature::cuda_graph, device.is_cuda() ? gpu_capability(device.has_index() ? device.index() : 0) : 0);
  if (!graph.on) return StepMode::eager;
  return graph.mode == "buffers" ? StepMode::fixed_buffers : StepMode::captured;
}

#if SINKLAB_TORCH_CUDA
struct TrainingStep::Graphs {
  at::cuda::CUDAGraph graph[2];  // per Half
  c10::cuda::CUDAStream stream;
  explicit Graphs(c10::DeviceIndex device) : stream(c10::cuda::getStreamFromPool(false, device)) {}

  // `work` on the capture's stream, after everything queued so far on the current one, which then waits for it.
  void on_stream(const std::function<void()>& work) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(stream.device_index());
    at::cuda::CUDAEvent ready, done;
    ready.record(current);
    ready.block(stream);
    {
      c10::cuda::CUDAStreamGuard guard(stream);
      work();
    }
    done.record(stream);
    done.block(current);
  }
};
#else
struct TrainingStep::Graphs {
  explicit Graphs(c10::DeviceIndex) {}
};
#endif

std::string TrainingStep::capture_unsupported(MultiTensorAdamW& opt, bool profiling, bool reference_attention_on_gpu) {
  if (profiling) return "--profile times the step's parts apart";
  if (reference_attention_on_gpu) return "the reference attention path copies its mask to the GPU at every call";
  return opt.capture_unsupported();
}

TrainingStep::TrainingStep(Transformer& model, MultiTensorAdamW& opt, const RunConfig& cfg, DataParallel* workers,
                           StepProfile& profile, StepMode mode)
    : model_(model), opt_(opt), cfg_(cfg), workers_(workers), profile_(profile), mode_(mode) {
  loss_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(model.device));
#if SINKLAB_TORCH_CUDA
  capture_ = mode == StepMode::captured && model.device.is_cuda();
#endif
  const std::string average = workers ? ", the gradients' average between them" : "";
  how_ = mode == StepMode::eager ? ""
         : capture_
             ? fmt::format("on fixed buffers for {} steps, then captured as two CUDA graphs{}", kWarmUpSteps, average)
         : mode == StepMode::fixed_buffers ? "eager on fixed buffers, never captured (cuda_graph=buffers)"
         : model.device.is_cuda()          ? "eager on fixed buffers: this LibTorch was built without CUDA graphs"
                                           : "eager on fixed buffers (a CUDA graph only on a GPU)";
  if (capture_) graphs_ = std::make_unique<Graphs>(model.device.index());
}

TrainingStep::~TrainingStep() = default;

torch::Tensor TrainingStep::run(const torch::Tensor& x, const torch::Tensor& y, double lr) {
  {
    auto timed = profile_.time(StepProfile::Data);
    const bool fixed = mode_ != StepMode::eager;
    if (fixed && !x_.defined()) {
      x_ = torch::empty(x.sizes(), x.options().device(model_.device));
      y_ = torch::empty(y.sizes(), y.options().device(model_.device));
    }
    x_ = to_device(x, model_.device, fixed ? x_ : torch::Tensor());
    y_ = to_device(y, model_.device, fixed ? y_ : torch::Tensor());
  }
  opt_.set_learning_rate(lr);
  run_half(gradients);
  if (workers_) {
    auto timed = profile_.time(StepProfile::Optimizer);
    workers_->average_gradients(model_.parameters());
  }
  run_half(update);
  opt_.count_update();
  ++steps_;
  return loss_.clone();
}

void TrainingStep::launch_half(Half half) {
  if (half == gradients) {
    {
      auto timed = profile_.time(StepProfile::Optimizer);
      for (auto& p : model_.parameters())
        if (p.grad().defined()) p.mutable_grad().zero_();  // in place: a graph keeps the gradients' addresses
    }
    loss_.copy_(forward_backward(model_, cfg_, x_, y_, profile_));
    return;
  }
  auto timed = profile_.time(StepProfile::Optimizer);
  if (cfg_.train.clip > 0) clip_gradient_norm(model_.parameters(), cfg_.train.clip);
  opt_.update();
}

void TrainingStep::run_half(Half half) {
#if SINKLAB_TORCH_CUDA
  if (capture_ && steps_ < kWarmUpSteps) return graphs_->on_stream([&] { launch_half(half); });
  if (capture_ && steps_ == kWarmUpSteps) return capture_half(half);
  if (capture_) return graphs_->graph[half].replay();
#endif
  launch_half(half);
}

void TrainingStep::capture_half(Half half) {
#if SINKLAB_TORCH_CUDA
  // Autocast's cached casts would be made inside the capture and freed after it; uncached, each cast is a node.
  const bool cached = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  // The warm-up's freed activations stay cached for ordinary allocations, where the capture's private pool cannot
  // reach them: handed back, a step sized to fill the GPU (micro_batch = auto) still fits once captured.
  if (half == gradients) c10::cuda::CUDACachingAllocator::emptyCache();
  at::cuda::CUDAGraph& graph = graphs_->graph[half];
  try {
    graphs_->on_stream([&] {
      graph.capture_begin();
      try {
        launch_half(half);
      } catch (...) {
        // Out of capture mode before anything else runs on the stream; the capture's own error is the one to say.
        if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) try {
            graph.capture_end();
          } catch (const std::exception&) {
          }
        throw;
      }
      graph.capture_end();
    });
    at::autocast::set_autocast_cache_enabled(cached);
    graph.replay();  // the capture ran nothing: this step's work
    if (half == update)
      how_ = fmt::format("captured as two CUDA graphs after {} steps on fixed buffers{}", kWarmUpSteps,
                         workers_ ? ", the gradients' average between them" : "");
  } catch (const std::exception& e) {
    at::autocast::set_autocast_cache_enabled(cached);
    capture_ = false;  // the graphs stay, unused, until the run ends
    std::string what = e.what();
    if (const auto line = what.find('\n'); line != std::string::npos) what.resize(line);
    how_ = fmt::format("eager on fixed buffers: the capture failed ({})", what);
    launch_half(half);
  }
#else
  launch_half(half);
#endif
}

}  // namespace sink::rt
