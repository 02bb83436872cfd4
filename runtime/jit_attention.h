// Attention through the generated kernels: a torch::autograd::Function whose
// forward and backward call the JIT-compiled code over batch x heads with
// at::parallel_for. Same inputs and results as reference_attention.
#pragma once
#include <torch/torch.h>

#include "plan/kernel_spec.h"
#include "plan/run_config.h"

namespace sink::rt {

struct JitInputs {
  torch::Tensor q, k, v;  // [B, H, T, dh]
  torch::Tensor g;        // position bias by distance [H, T], or undefined
  torch::Tensor k_star;   // [H|1, dh], or undefined
  torch::Tensor v_star;   // [H|1, dh] (zeros for K biases), with k_star
  torch::Tensor sink_logit;  // [H]: a logit per head in the softmax denominator, or undefined
};

torch::Tensor jit_attention(const kernels::KernelSpec& spec, const JitInputs& in);

// Scores for the sink metric: [B, H, T, S] (k* column first) holding the
// normalized attention for softmax, the raw scores s otherwise, and Z [B, H, T].
std::pair<torch::Tensor, torch::Tensor> jit_probe(const kernels::KernelSpec& spec, const JitInputs& in);

// The share of each query's attention that the sink logit takes, exp(b - m) / l: [B, H, T].
torch::Tensor jit_sink_share(const kernels::KernelSpec& spec, const JitInputs& in);

}  // namespace sink::rt
