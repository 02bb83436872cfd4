// Attention backends behind one interface: the reference path (LibTorch, any
// device) and the CPU JIT (kernels generated from the KernelSpec, compiled by
// LLVM ORC). A model layer hands its heads, after phi and RoPE, to the backend
// its plan and device select; a new backend (CUDA) is one more implementation
// of this interface, derived from the same kernels::kernel_spec.
#pragma once
#include <memory>
#include <string>
#include <torch/torch.h>

#include "plan/run_config.h"

namespace sink::rt {

struct AttentionCall {
  torch::Tensor q, k, v;  // [B, H, T, dh]; k, v already repeated for grouped-query heads
  torch::Tensor g;        // position term by distance |i - j|: [H, T], or undefined
  torch::Tensor k_star;   // the extra key column [H|1, dh], or undefined
  torch::Tensor v_star;   // its value [H|1, dh], with k_star (zeros for K biases)
  torch::Tensor sink_logit;  // [H]: a logit per head in the softmax denominator, or undefined
};

// What a measurement reads of one attention call.
struct AttentionProbe {
  torch::Tensor attention;   // the metric attention [B, H, T, S] (k* column first)
  torch::Tensor sink_share;  // [B, H, T]: the sink logit's share of each row, when there is one
};

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string name() const = 0;
  // o [B, H, T, dh], differentiable in every tensor of the call; with `probe`, also what a measurement reads.
  virtual torch::Tensor attend(const AttentionCall& call, AttentionProbe* probe) = 0;
  // The generated source this backend runs for the model's attention (LLVM
  // IR for the CPU JIT), or "" when it runs none. A run writes it to its
  // directory as attention.ll.
  virtual std::string kernel_source() const { return ""; }
};

// attention.backend = jit on a CPU device: the CPU JIT; reference anywhere:
// LibTorch. Any other pairing is an error that says what to change.
std::shared_ptr<AttentionBackend> make_attention_backend(const ModelConfig& cfg, const torch::Device& device);

}  // namespace sink::rt
