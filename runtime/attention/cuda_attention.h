// Attention through the generated CUDA kernels (kernels/cuda/emit_cuda.h),
// launched on the call's tensors; the autograd function and the probe are
// runtime/attention/generated_attention.h's. bf16 and half inputs run the
// 16-bit-storage kernels (float arithmetic), double the double ones,
// anything else float.
#pragma once
#include <functional>
#include <memory>
#include <torch/torch.h>

#include "kernels/kernel_spec.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/attention/cuda_driver.h"
#include "runtime/attention/generated_attention.h"

namespace sink::rt {

// Where a generated source runs for tensors on `device`: a loaded module.
// The name is part of the key under which a variant's module is kept, so
// one variant loaded by two loaders (the GPU, a CPU emulation) stays two.
struct KernelModules {
  std::string name;
  std::function<std::shared_ptr<KernelModule>(const std::string& source, const torch::Device& device)> load;
  bool tune = false;  // a variant's first forward measures its tiles (runtime/attention/cuda_tuning.h)
  // Optional: compiles a source ahead into the kernel cache, touching no device state, so that the tuning can
  // compile its candidates on several threads and still load and launch them all on the calling thread.
  std::function<void(const std::string& source, const torch::Device& device)> prepare;
  // Optional: the device's compute capability (major * 10 + minor); a GPU older than the tensor-core kernels
  // (kernels::kTensorCoreCapability) runs the scalar ones. Without it the tensor cores are assumed.
  std::function<int(const torch::Device& device)> capability;
};

// CUDA devices: NVRTC and the driver (cuda::module_for).
KernelModules cuda_modules();

// LibTorch's current stream on q's device for this thread (autograd's backward thread has its own, the forward's):
// the generated kernels queue there, behind the LibTorch work that made their inputs and inside a CUDA graph being
// captured. Null, the legacy default stream, for tensors off a GPU or a LibTorch without CUDA.
void* current_stream(const torch::Tensor& q);

// The CUDA source of `spec`'s kernels for tensors of dtype `storage`, as the
// backend compiles it (gpu-check fills the kernel cache with these ahead of time).
std::string cuda_source_for(kernels::KernelSpec spec, torch::ScalarType storage);

// The launcher of `spec`'s kernels for tensors like q, loaded by `modules`.
std::shared_ptr<const KernelLauncher> cuda_launcher(kernels::KernelSpec spec, const torch::Tensor& q,
                                                    const KernelModules& modules);

torch::Tensor cuda_attention(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules);
AttentionProbe cuda_probe(const kernels::KernelSpec& spec, const AttentionConfig& cfg, const AttentionCall& call,
                          const KernelModules& modules);

}  // namespace sink::rt
