// Attention through the generated CUDA kernels (kernels/emit_cuda.h): a
// torch::autograd::Function whose forward and backward launch them on the
// call's tensors. Same inputs and results as reference_attention. bf16 and
// half inputs run the 16-bit-storage kernels (float arithmetic), double the
// double ones, anything else float.
#pragma once
#include <functional>
#include <memory>
#include <torch/torch.h>

#include "plan/kernel_spec.h"
#include "runtime/attention_backend.h"
#include "runtime/cuda_driver.h"

namespace sink::rt {

// Where a generated source runs for tensors on `device`: a loaded module.
// The name is part of the key under which a variant's module is kept, so
// one variant loaded by two loaders (the GPU, a CPU emulation) stays two.
struct KernelModules {
  std::string name;
  std::function<std::shared_ptr<KernelModule>(const std::string& source, const torch::Device& device)> load;
};

// CUDA devices: NVRTC and the driver (cuda::module_for).
KernelModules cuda_modules();

// The CUDA source of `spec`'s kernels for tensors of dtype `storage`, as the
// backend compiles it (gpu-check fills the kernel cache with these ahead of time).
std::string cuda_source_for(kernels::KernelSpec spec, torch::ScalarType storage);

// o [B, H, T, dh], differentiable in q, k, v, g, k*, v* and the sink logit.
torch::Tensor cuda_attention(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules);

// As jit_probe: [B, H, T, S] (k* column first) holding A for softmax, the raw scores s otherwise, and Z [B, H, T].
std::pair<torch::Tensor, torch::Tensor> cuda_probe(const kernels::KernelSpec& spec, const AttentionCall& call,
                                                   const KernelModules& modules);

// The sink logit's share of each row, exp(b - m) / l: [B, H, T].
torch::Tensor cuda_sink_share(const kernels::KernelSpec& spec, const AttentionCall& call, const KernelModules& modules);

}  // namespace sink::rt
