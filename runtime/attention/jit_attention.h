// Attention through the kernels the CPU JIT compiles from the LLVM emitter's
// IR (kernels/llvm/emit_llvm.h), run over batch x heads with at::parallel_for.
// The autograd function and the probe are runtime/attention/generated_attention.h's.
#pragma once
#include <torch/torch.h>

#include "kernels/kernel_spec.h"
#include "plan/run_config.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/attention/generated_attention.h"

namespace sink::rt {

// The launcher of `spec`'s kernels for tensors like q: double runs the double kernels, all else float.
std::shared_ptr<const KernelLauncher> jit_launcher(kernels::KernelSpec spec, const torch::Tensor& q);

torch::Tensor jit_attention(const kernels::KernelSpec& spec, const AttentionCall& call);
AttentionProbe jit_probe(const kernels::KernelSpec& spec, const AttentionConfig& cfg, const AttentionCall& call);

}  // namespace sink::rt
