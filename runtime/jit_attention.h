// Attention through the generated kernels: a torch::autograd::Function whose
// forward and backward call the JIT-compiled code over batch x heads with
// at::parallel_for. Same inputs and results as reference_attention.
#pragma once
#include <torch/torch.h>

#include "plan/kernel_spec.h"
#include "plan/run_config.h"
#include "runtime/attention_backend.h"

namespace sink::rt {

torch::Tensor jit_attention(const kernels::KernelSpec& spec, const AttentionCall& in);

// Scores for the sink metric: [B, H, T, S] (k* column first) holding the
// normalized attention for softmax, the raw scores s otherwise, and Z [B, H, T].
std::pair<torch::Tensor, torch::Tensor> jit_probe(const kernels::KernelSpec& spec, const AttentionCall& in);

// The share of each query's attention that the sink logit takes, exp(b - m) / l: [B, H, T].
torch::Tensor jit_sink_share(const kernels::KernelSpec& spec, const AttentionCall& in);

}  // namespace sink::rt
