// The step's operations on the CPU (runtime/training/step_operations.h): the residual add with RMSNorm after it,
// SwiGLU's activation with its product, and q and k into head-major rows with RoPE, each one fused kernel each way
// (runtime/training/cpu_kernels.h) over LibTorch's threads, as autograd functions. Where a call does not fit them
// (float64, bf16 or half, LayerNorm, ReLU or GELU gates, no RoPE, a row width not a multiple of 8) it runs
// LibTorch's operations, the default. The matrix products stay LibTorch's, one per projection, as on the default.
#pragma once
#include <memory>
#include <string>

#include "runtime/training/step_operations.h"

namespace sink::rt {

class CpuStepOperations : public StepOperations {
 public:
  std::string fused(const ModelConfig& cfg) const override;
  std::pair<torch::Tensor, torch::Tensor> residual_norm(const torch::Tensor& x, const torch::Tensor& r,
                                                        const torch::Tensor& w, const torch::Tensor& b,
                                                        double eps) const override;
  torch::Tensor gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                             Ffn act) const override;
  std::array<torch::Tensor, 3> heads(const torch::Tensor& x, const torch::Tensor& wq, const torch::Tensor& wk,
                                     const torch::Tensor& wv, const torch::Tensor& cos, const torch::Tensor& sin,
                                     int64_t heads, int64_t kv_heads) const override;

  // The fused functions themselves, for the tests: each requires what its *_fits says.
  static bool residual_rms_fits(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& w,
                                const torch::Tensor& b);
  static std::pair<torch::Tensor, torch::Tensor> residual_rms(const torch::Tensor& x, const torch::Tensor& r,
                                                              const torch::Tensor& w, double eps);
  static bool swiglu_fits(const torch::Tensor& gate, const torch::Tensor& up, Ffn act);
  static torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);
  // x [B, T, heads d_head] -> [B, heads, T, d_head], contiguous, RoPE'd by the tables [>= T, d_head].
  static bool rope_heads_fits(const torch::Tensor& x, const torch::Tensor& cos, int64_t heads);
  static torch::Tensor rope_heads(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                  int64_t heads);
};

// The step's operations for a model on `device`: these on the CPU, else none.
std::shared_ptr<const StepOperations> cpu_step_operations_for(const torch::Device& device);

}  // namespace sink::rt
