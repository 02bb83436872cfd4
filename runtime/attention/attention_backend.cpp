#include "runtime/attention/attention_backend.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <mutex>
#include <torch/version.h>

#include "kernels/kernel_spec.h"
#include "kernels/llvm/emit_llvm.h"
#include "runtime/attention/attention.h"
#if SINKLAB_HAVE_JIT
#include "runtime/attention/jit_attention.h"
#endif
#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/generated_attention.h"
#include "runtime/gpu_features.h"

namespace sink::rt {
namespace {

// g [H, T] by distance -> the bias g(|i - j|) [1, H, T, T] that the
// reference adds to the logits; indexing keeps g's gradient.
torch::Tensor bias_from_distance(const torch::Tensor& g, int64_t T) {
  auto i = torch::arange(T, g.options().dtype(torch::kLong)).unsqueeze(1);
  auto j = torch::arange(T, g.options().dtype(torch::kLong)).unsqueeze(0);
  return g.index({torch::indexing::Slice(), (i - j).abs()}).unsqueeze(0);
}

// o, and with `probe` what a measurement reads, from one backend's generated kernels.
torch::Tensor attend_generated(const std::shared_ptr<const KernelLauncher>& launcher, const AttentionConfig& cfg,
                               const AttentionCall& call, AttentionProbe* probe) {
  torch::Tensor out = generated_attention(launcher, call);
  if (probe) *probe = generated_probe(*launcher, cfg, call);
  return out;
}

class ReferenceBackend : public AttentionBackend {
 public:
  explicit ReferenceBackend(const AttentionConfig& cfg) : cfg_(cfg) {}
  std::string name() const override { return "reference"; }

  torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) override {
    note_kernels("reference " + storage_name(call.q.scalar_type()));
    AttentionInputs in{call.q, call.k, call.v, {}, {}, {}, {}};
    if (call.g.defined()) in.bias = bias_from_distance(call.g, call.q.size(2));
    if (call.k_star.defined()) {
      in.k_star = call.k_star;
      in.v_star = call.v_star;
    }
    if (call.sink_logit.defined()) in.sink_logit = call.sink_logit;
    AttentionOutput o = reference_attention(cfg_, in, probe != nullptr);
    if (probe) *probe = {o.probe, o.sink_share};
    return o.out;
  }

 private:
  AttentionConfig cfg_;
};

#if SINKLAB_HAVE_JIT
class CpuJitBackend : public AttentionBackend {
 public:
  explicit CpuJitBackend(const ModelConfig& cfg) : cfg_(cfg.attention), kernel_(kernels::kernel_spec(cfg)) {}
  std::string name() const override { return "jit"; }
  std::string kernel_source(Precision) const override { return kernels::emit_llvm(kernel_); }

  torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) override {
    auto launcher = jit_launcher(kernel_, call.q);
    note_kernels(launcher->description());
    return attend_generated(launcher, cfg_, call, probe);
  }

 private:
  AttentionConfig cfg_;
  kernels::KernelSpec kernel_;
};
#endif

// attention.backend = jit on a CUDA device: the same KernelSpec through the
// CUDA emitter, compiled by NVRTC (a build without the CUDA toolkit's headers
// says so when it is asked for).
class CudaBackend : public AttentionBackend {
 public:
  CudaBackend(const ModelConfig& cfg, KernelChoice choice, KernelModules modules)
      : cfg_(cfg.attention),
        kernel_(kernels::kernel_spec(cfg)),
        sdpa_(choice == KernelChoice::Fastest && has_sdpa() && kernel_.plain_causal_softmax()),
        modules_(std::move(modules)) {}
  // summary.json says which one trained.
  std::string name() const override { return sdpa_ ? "cuda+sdpa" : "cuda"; }
  std::string kernel_source(Precision precision) const override {
    return kernels::emit_cuda(kernel_, kernels::training_storage(precision));
  }
  std::string kernel_file_name() const override { return "attention.cu"; }

  torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) override {
    if (sdpa_ && !probe) {
      note_kernels("sdpa " + storage_name(call.q.scalar_type()));
      return sdpa_causal_attention(call.q, call.k, call.v);
    }
    auto launcher = cuda_launcher(kernel_, call.q, modules_);
    note_kernels(launcher->description());
    return attend_generated(launcher, cfg_, call, probe);
  }

 private:
  AttentionConfig cfg_;
  kernels::KernelSpec kernel_;
  bool sdpa_;
  KernelModules modules_;
};

}  // namespace

std::shared_ptr<AttentionBackend> make_cuda_backend(const ModelConfig& cfg, const KernelModules& modules,
                                                    KernelChoice choice) {
  return std::make_shared<CudaBackend>(cfg, choice, modules);
}

std::vector<std::string> AttentionBackend::kernels_run() const {
  std::lock_guard<std::mutex> lock(kernels_mutex_);
  return kernels_run_;
}

void AttentionBackend::note_kernels(const std::string& description) {
  std::lock_guard<std::mutex> lock(kernels_mutex_);
  if (std::find(kernels_run_.begin(), kernels_run_.end(), description) == kernels_run_.end())
    kernels_run_.push_back(description);
}

std::string storage_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat: return "float";
    case torch::kDouble: return "double";
    case torch::kBFloat16: return "bf16";
    case torch::kHalf: return "half";
    default: return c10::toString(dtype);
  }
}

#if TORCH_VERSION_MAJOR >= 2
bool has_sdpa() { return true; }
torch::Tensor sdpa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
}
#else
bool has_sdpa() { return false; }
torch::Tensor sdpa_causal_attention(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) {
  throw std::logic_error("scaled_dot_product_attention needs LibTorch >= 2.0");
}
#endif

std::shared_ptr<AttentionBackend> make_attention_backend(const ModelConfig& cfg, const torch::Device& device,
                                                         KernelChoice choice) {
  const Backend wanted = cfg.attention.backend;
  if (wanted == Backend::reference) return std::make_shared<ReferenceBackend>(cfg.attention);
#if SINKLAB_HAVE_JIT
  if (wanted == Backend::jit && device.is_cpu()) return std::make_shared<CpuJitBackend>(cfg);
#else
  if (wanted == Backend::jit && device.is_cpu())
    throw std::runtime_error(
        "attention.backend = jit: this build has no CPU JIT (LLVM 19 was not found when it was "
        "configured); set attention.backend = reference, or rebuild with llvm-19-dev");
#endif
  if (wanted == Backend::jit && device.is_cuda()) {
    // The generated kernels of a rule that checks pairs (loss.window_keeps) have run on the CPU's emulation of the
    // GPU: the reference path runs such a rule until the table (runtime/gpu_features.h) lets them run.
    const FeatureDecision pair_kernels =
        gpu_feature(GpuFeature::pair_rule_kernels, gpu_capability(device.has_index() ? device.index() : 0));
    if (cfg.attention.rule.checks_pairs() && !pair_kernels.on) {
      static std::once_flag said;
      std::call_once(said, [&] {
        std::cerr << "sinklab: visibility " << cfg.attention.rule.describe()
                  << ": the reference attention runs it; its generated kernels are " << pair_kernels.why << "\n";
      });
      return std::make_shared<ReferenceBackend>(cfg.attention);
    }
    return make_cuda_backend(cfg, cuda_modules(), choice);
  }
  throw std::runtime_error(
      fmt::format("attention.backend = {} has no kernels for device {} in this build; "
                  "set attention.backend = reference to run there",
                  name_of(wanted), device.str()));
}

}  // namespace sink::rt
