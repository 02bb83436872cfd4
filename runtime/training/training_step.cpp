#include "runtime/training/training_step.h"

#include <ATen/autocast_mode.h>
#include <cstdlib>
#include <fmt/format.h>
#include <functional>

#include "runtime/training/evaluation.h"
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

// Eager steps before the capture: the first compiles and tunes the generated kernels and makes AdamW's moments,
// the later ones run as every step will (PyTorch's own recipe warms up a few iterations on the capture's stream).
constexpr int64_t kWarmUpSteps = 3;

}  // namespace

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
        loss = lm_loss(model, x.narrow(0, at, n), y.narrow(0, at, n), cfg.model.attention.prefix);
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

StepKind requested_step() {
  const char* v = std::getenv("SINKLAB_CUDA_GRAPH");
  const std::string asked = v ? v : "";
  return asked == "1" ? StepKind::captured : asked == "buffers" ? StepKind::fixed_buffers : StepKind::eager;
}

#if SINKLAB_TORCH_CUDA
struct CapturedStep::Graph {
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream stream;
  explicit Graph(c10::DeviceIndex device) : stream(c10::cuda::getStreamFromPool(false, device)) {}

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
struct CapturedStep::Graph {
  explicit Graph(c10::DeviceIndex) {}
};
#endif

std::string CapturedStep::unsupported(MultiTensorAdamW& opt, bool data_parallel, bool profiling,
                                      bool reference_attention_on_gpu) {
  if (data_parallel) return "the gradients are averaged across workers between the backward and the update";
  if (profiling) return "--profile times the step's parts apart";
  if (reference_attention_on_gpu) return "the reference attention path copies its mask to the GPU at every call";
  return opt.device_update_unsupported();
}

CapturedStep::CapturedStep(Transformer& model, MultiTensorAdamW& opt, const RunConfig& cfg, int64_t rows, bool capture)
    : model_(model), opt_(opt), cfg_(cfg), unprofiled_(false, model.device) {
  const auto on = torch::TensorOptions().device(model.device);
  x_ = torch::zeros({rows, cfg.train.context}, on.dtype(torch::kLong));
  y_ = torch::zeros({rows, cfg.train.context}, on.dtype(torch::kLong));
  // The fused CUDA kernel reads a float rate; the CPU's reads the tensor's value as a double, which keeps the CPU's
  // steps bit-identical to the eager ones that pass the rate as a number.
  lr_ = torch::zeros({}, on.dtype(model.device.is_cuda() ? torch::kFloat : torch::kDouble));
  loss_ = torch::zeros({}, on.dtype(torch::kFloat));
#if SINKLAB_TORCH_CUDA
  capture_ = capture && model.device.is_cuda();
#endif
  how_ = capture_   ? fmt::format("eager on fixed buffers for {} steps, then captured as a CUDA graph", kWarmUpSteps)
         : !capture ? "eager on fixed buffers, never captured (SINKLAB_CUDA_GRAPH=buffers)"
         : model.device.is_cuda() ? "eager on fixed buffers: this LibTorch was built without CUDA graphs"
                                  : "eager on fixed buffers (a CUDA graph only on a GPU)";
  if (capture_) graph_ = std::make_unique<Graph>(model.device.index());
}

CapturedStep::~CapturedStep() = default;

void CapturedStep::run_on_buffers() {
  for (auto& p : model_.parameters())
    if (p.grad().defined()) p.mutable_grad().zero_();  // in place: the graph keeps the gradients' addresses
  loss_.copy_(forward_backward(model_, cfg_, x_, y_, unprofiled_));
  if (cfg_.train.clip > 0) clip_gradient_norm(model_.parameters(), cfg_.train.clip);
  opt_.update_on_device(lr_);
}

torch::Tensor CapturedStep::step(const torch::Tensor& x, const torch::Tensor& y, double lr) {
  const bool to_gpu = model_.device.is_cuda();
  // From page-locked memory the copies are queued behind the previous step instead of waiting for it.
  x_.copy_(to_gpu ? x.pin_memory() : x, to_gpu);
  y_.copy_(to_gpu ? y.pin_memory() : y, to_gpu);
  lr_.fill_(lr);
#if SINKLAB_TORCH_CUDA
  if (capture_ && steps_ < kWarmUpSteps) {
    graph_->on_stream([&] { run_on_buffers(); });
  } else if (capture_ && steps_ == kWarmUpSteps) {
    capture_and_replay();
  } else if (capture_) {
    graph_->graph.replay();
  } else {
    run_on_buffers();
  }
#else
  run_on_buffers();
#endif
  opt_.count_update_on_host();
  ++steps_;
  return loss_.clone();
}

void CapturedStep::capture_and_replay() {
#if SINKLAB_TORCH_CUDA
  // Autocast's cached casts would be made inside the capture and freed after it; uncached, each cast is a node.
  const bool cached = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  // The warm-up's freed activations stay cached for ordinary allocations, where the capture's private pool cannot
  // reach them: handed back, a step sized to fill the GPU (micro_batch = auto) still fits once captured.
  c10::cuda::CUDACachingAllocator::emptyCache();
  try {
    graph_->on_stream([&] {
      graph_->graph.capture_begin();
      try {
        run_on_buffers();
      } catch (...) {
        // Out of capture mode before anything else runs on the stream; the capture's own error is the one to say.
        if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) try {
            graph_->graph.capture_end();
          } catch (const std::exception&) {
          }
        throw;
      }
      graph_->graph.capture_end();
    });
    at::autocast::set_autocast_cache_enabled(cached);
    graph_->graph.replay();  // the capture ran nothing: this step's work
    how_ = fmt::format("captured as a CUDA graph after {} eager steps on fixed buffers", kWarmUpSteps);
  } catch (const std::exception& e) {
    at::autocast::set_autocast_cache_enabled(cached);
    capture_ = false;  // the graph object stays, unused, until the run ends
    std::string what = e.what();
    if (const auto line = what.find('\n'); line != std::string::npos) what.resize(line);
    how_ = fmt::format("eager on fixed buffers: the capture failed ({})", what);
    run_on_buffers();
  }
#endif
}

}  // namespace sink::rt
