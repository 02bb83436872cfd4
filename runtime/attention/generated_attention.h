// Attention through generated kernels, written once for every backend that
// generates them. A backend (the CPU JIT, CUDA) implements KernelLauncher:
// how its kernels want their tensors, and how to run the forward, the
// backward and the probe of one compiled variant. The autograd function, the
// gradient reductions and the probes' measurement are here.
#pragma once
#include <memory>
#include <string>
#include <torch/torch.h>

#include "plan/run_config.h"
#include "runtime/attention/attention_backend.h"

namespace sink::rt {

// A call's tensors as the kernels read them (dtype, layout); empty ones undefined.
struct KernelTensors {
  torch::Tensor q, k, v, g, k_star, v_star, sink;
};

// The backward's results. The shared parameters' are partial sums per (batch, head) slice, [B, H, n]:
// the launcher need not know their shapes.
struct SliceGradients {
  torch::Tensor dq, dk, dv;
  torch::Tensor dg, dk_star, dv_star, dsink;
};

class KernelLauncher {
 public:
  virtual ~KernelLauncher() = default;
  // One per compiled variant (spec, storage, device): the backward finds its forward's launcher by it.
  virtual const std::string& key() const = 0;
  // What summary.json's provenance calls these kernels: "<kernels> <storage>" ("jit float", "cuda-tensor bf16").
  virtual const std::string& description() const = 0;
  // Which kernels the calls run now, with their tiles where they have a choice: a benchmark's "what was timed".
  virtual std::string kernels_in_use() const { return description(); }
  virtual KernelTensors prepare(const AttentionCall& call) const = 0;
  // o [B, H, T, dh] and the row statistics [B, H, 2, >= T] (m or Z, then P or l).
  virtual std::pair<torch::Tensor, torch::Tensor> forward(const KernelTensors& in) const = 0;
  // position_grad: whether g (the position term's table) wants its gradient. ALiBi's is a constant: its dg,
  // an atomic addition per pair on a GPU, is skipped there (dg is then undefined; a CPU launcher may return it).
  virtual SliceGradients backward(const KernelTensors& in, const torch::Tensor& o, const torch::Tensor& stats,
                                  const torch::Tensor& dout, bool position_grad) const = 0;
  // [B, H, T, S] (k* column first): A for the shifted-exp forms, the raw scores s otherwise.
  virtual torch::Tensor probe(const KernelTensors& in, const torch::Tensor& stats) const = 0;
};

// o [B, H, T, dh], differentiable in q, k, v, g, k*, v* and the sink logit.
torch::Tensor generated_attention(const std::shared_ptr<const KernelLauncher>& launcher, const AttentionCall& call);

// What a measurement reads, as reference_attention's probe computes it.
AttentionProbe generated_probe(const KernelLauncher& launcher, const AttentionConfig& cfg, const AttentionCall& call);

}  // namespace sink::rt
