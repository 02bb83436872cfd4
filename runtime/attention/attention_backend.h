// Attention backends behind one interface: the reference path (LibTorch, any
// device), the CPU JIT (kernels generated from the KernelSpec, compiled by
// LLVM ORC) and CUDA (kernels generated from the same KernelSpec, compiled by
// NVRTC). A model layer hands its heads, after phi and RoPE, to the backend
// its plan and device select.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <torch/torch.h>
#include <vector>

#include "plan/run_config.h"

namespace sink::rt {

struct AttentionCall {
  torch::Tensor q, k, v;     // [B, H, T, dh]; k, v already repeated for grouped-query heads
  torch::Tensor g;           // position term by distance |i - j|: [H, T], or undefined
  torch::Tensor k_star;      // the extra key column [H|1, dh], or undefined
  torch::Tensor v_star;      // its value [H|1, dh], with k_star (zeros for K biases)
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
  // The generated source this backend trains with at train.precision (LLVM
  // IR for the CPU JIT, CUDA C++ for CUDA), or "" when it runs none. A run
  // writes it to its directory (attention.ll, attention.cu).
  virtual std::string kernel_source(Precision precision = Precision::fp32) const { return ""; }
  virtual std::string kernel_file_name() const { return "attention.ll"; }
  // The kernels attend() has run, each "<kernels> <storage>" ("jit float", "cuda-tensor bf16", "sdpa bf16",
  // "reference float"), in the order they first ran: summary.json's provenance. What the backend's name
  // alone cannot say: which storage autocast gave them, and which of CUDA's kernels a dtype took.
  std::vector<std::string> kernels_run() const;

 protected:
  void note_kernels(const std::string& description);

 private:
  mutable std::mutex kernels_mutex_;
  std::vector<std::string> kernels_run_;
};

// How provenance names a storage dtype: float, double, bf16, half.
std::string storage_name(torch::ScalarType dtype);

// Fastest: on a GPU, plain causal softmax (KernelSpec::plain_causal_softmax)
// runs LibTorch's scaled_dot_product_attention where this LibTorch has it;
// its probes still come from the generated kernels. Generated: always the
// generated kernels (their checks and benchmarks).
enum class KernelChoice { Fastest, Generated };

// attention.backend = jit: the CPU JIT on a CPU device, the CUDA kernels on a
// CUDA device; reference anywhere: LibTorch. Any other pairing is an error
// that says what to change.
std::shared_ptr<AttentionBackend> make_attention_backend(const ModelConfig& cfg, const torch::Device& device,
                                                         KernelChoice choice = KernelChoice::Fastest);

// The CUDA kernels of `cfg`'s attention on `modules`' loader: a GPU's (cuda_modules()), or the tests' CPU emulation
// of one, which runs them on CPU tensors. No gate of the GPU features table: the caller chose these kernels.
struct KernelModules;
std::shared_ptr<AttentionBackend> make_cuda_backend(const ModelConfig& cfg, const KernelModules& modules,
                                                    KernelChoice choice = KernelChoice::Generated);

// LibTorch >= 2.0's scaled_dot_product_attention with the causal mask
// (q, k, v [B, H, T, dh]); has_sdpa() is false on older LibTorch (Debian's
// 1.13), where sdpa_causal_attention throws.
bool has_sdpa();
torch::Tensor sdpa_causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

}  // namespace sink::rt
