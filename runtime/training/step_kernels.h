// The operations around the attention that a GPU step runs as one kernel each way where eager LibTorch runs
// several (kernels/cuda/step_source.h): the residual add with the norm after it (RMSNorm or LayerNorm), a gated
// FFN's activation with its product, and the split of the stacked q, k, v projection into heads with RoPE. Each is an
// autograd function over kernels loaded by a KernelModules: NVRTC and the driver on a GPU, the CPU emulation in the
// tests, which check them against the LibTorch operations they replace.
//
// They are the step's operations (runtime/training/step_operations.h) where they fit, and LibTorch's elsewhere (a
// float64 stream, shapes the kernels do not take). Off until a GPU check has run them (cuda_check case 9,
// captured_step) and the row step_kernels of runtime/gpu_features.h says so (step_kernels_for).
#pragma once
#include <memory>
#include <torch/torch.h>
#include <utility>
#include <vector>

#include "plan/run_config.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/training/step_operations.h"

namespace sink::rt {

class StepKernels : public StepOperations {
 public:
  explicit StepKernels(KernelModules modules) : modules_(std::move(modules)) {}  // (register_step_kernels)

  // The step's operations: each kernel where it fits, else LibTorch's (StepOperations). The gated FFN's gate and up
  // come from one stacked product either way, computed once.
  std::string fused(const ModelConfig& cfg) const override;
  std::pair<torch::Tensor, torch::Tensor> residual_norm(const torch::Tensor& x, const torch::Tensor& r,
                                                        const torch::Tensor& w, const torch::Tensor& b,
                                                        double eps) const override;
  torch::Tensor gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                             Ffn act) const override;
  std::array<torch::Tensor, 3> heads(const torch::Tensor& x, const torch::Tensor& wq, const torch::Tensor& wk,
                                     const torch::Tensor& wv, const torch::Tensor& cos, const torch::Tensor& sin,
                                     int64_t heads, int64_t kv_heads) const override;

  // Whether residual_norm's kernel takes these: s = x + r and n = norm(s) over the last dimension, s in x's dtype
  // (float), n in r's; the norm RMSNorm, s / sqrt(mean(s^2) + eps) * w, where b is undefined, else LayerNorm.
  bool residual_norm_fits(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w,
                          const torch::Tensor& b) const;

  // The kernels themselves, where they fit. act(gate) * up from gate_up [..., 2 width] (the gate, then up, in each
  // row), activation relu, gelu or swish.
  bool gated_fits(const torch::Tensor& gate_up) const;
  torch::Tensor gated_activation(const torch::Tensor& gate_up, Ffn activation) const;

  // q [B, H, T, d_head], k and v [B, Hkv, T, d_head], contiguous, from the stacked projection qkv [B, T, (H + 2 Hkv)
  // d_head]; q and k turned by RoPE where cos and sin (rope_tables' [T, d_head] float tables) are defined.
  bool split_fits(const torch::Tensor& qkv, const torch::Tensor& cos, int64_t heads, int64_t kv_heads,
                  int64_t head_dim) const;
  std::vector<torch::Tensor> split_heads(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                                         int64_t heads, int64_t kv_heads) const;

  // The loaded module of `source` for tensors on `device`, loaded once per process.
  std::shared_ptr<KernelModule> module(const std::string& source, const torch::Device& device) const;
  const std::string& name() const { return modules_.name; }

 private:
  KernelModules modules_;
};

// The one StepKernels of `modules` (by its name) in this process, which the autograd functions find again.
std::shared_ptr<const StepKernels> register_step_kernels(KernelModules modules);

// The step kernels a model on `device` runs: NVRTC's where the device is a GPU, this runtime has the CUDA backend
// and the row step_kernels of runtime/gpu_features.h lets them run; else none.
std::shared_ptr<const StepKernels> step_kernels_for(const torch::Device& device);

}  // namespace sink::rt
