// The operations of a training step around the attention, behind one interface, the way AttentionBackend puts the
// attention behind one: the residual add with the norm after it, a gated FFN's hidden layer, the projection of q, k
// and v into heads with RoPE, and the LM head's loss. Its default is LibTorch's own operations, on every device;
// StepKernels (runtime/training/step_kernels.h) runs each as one kernel each way on a GPU where it fits, and
// CpuStepOperations (cpu_step_operations.h) on the CPU, each this default where it does not. The model's blocks
// call these and nothing else for them, so the model is written once whichever runs.
#pragma once
#include <array>
#include <string>
#include <torch/torch.h>
#include <torch/version.h>
#include <vector>

#include "plan/run_config.h"

// `at::rms_norm` came with PyTorch 2.4; on CUDA it dispatches to one fused kernel each way
// (`aten::_fused_rms_norm`, 2.8), which Debian's LibTorch 1.13 lacks.
#define SINKLAB_LIBRARY_RMS_NORM (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace sink::rt {

// RMSNorm, x / sqrt(mean(x^2) + eps) * weight, over the last dimension, the one every model here computes: as four
// LibTorch operations (composite), or as LibTorch's own operator (library: one fused kernel each way on a GPU,
// aten::_fused_rms_norm; PyTorch 2.4 on, it throws where this LibTorch has none). for_device: the library's on a GPU
// where it has one, else the composite, whose bits the CPU's tests and runs were measured with.
enum class RmsNormForm { for_device, composite, library };
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps,
                       RmsNormForm form = RmsNormForm::for_device);
// RMSNorm where `bias` is undefined, else LayerNorm with gain `weight` and bias `bias`.
torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps);

// Several projections of one input, x W_1^T, x W_2^T, ... (q, k and v; a gated FFN's gate and up): each its own
// product, or, `stacked`, one product with the weights stacked and its output split. Stacked, a GPU launches one GEMM
// where it launched several, and the backward forms x's gradient in one product where it summed several. Each output
// element is the same dot product either way, summed in the GEMM's order. A GPU stacks them; the CPU keeps its
// products, whose results the CPU's tests and runs were measured with.
std::vector<torch::Tensor> project(const torch::Tensor& x, const std::vector<torch::Tensor>& weights, bool stacked);

// RoPE: each interleaved pair (x_2m, x_2m+1) of x's last dimension rotated by its angle, as llama2.c does, from
// Transformer::rope_tables: x cos + (x with each pair swapped) sin, four operations (a swap, two products, a sum)
// where the pairs' own formula, (a cos - b sin, a sin + b cos) stacked, takes seven; the same numbers, bit for bit,
// forward and backward. In x's dtype: under bf16 autocast fp32 tables would promote q and k back to fp32, and the
// attention backend would then run its fp32 kernels.
torch::Tensor apply_rope(const torch::Tensor& x, torch::Tensor cos, torch::Tensor sin);

// act(gate) for an FFN's activation alone: relu, gelu or swish.
torch::Tensor activation(const torch::Tensor& gate, Ffn act);

class StepOperations {
 public:
  virtual ~StepOperations() = default;

  // What these operations fuse for a model of `cfg`, for the log ("residual add + RMSNorm, swiglu's activation");
  // "" for LibTorch's own.
  virtual std::string fused(const ModelConfig& cfg) const;

  // s = x + r and n = norm(s, w, b, eps) (RMSNorm where b is undefined): s in x's dtype, n in r's.
  virtual std::pair<torch::Tensor, torch::Tensor> residual_norm(const torch::Tensor& x, const torch::Tensor& r,
                                                                const torch::Tensor& w, const torch::Tensor& b,
                                                                double eps) const;

  // x w^T: a block's other projections (the attention's output and gate, the FFN's down and ungated up
  // projections), here so that a measurement can quantize what each one reads (runtime/measurement/sink_costs.h).
  virtual torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w) const;

  // A gated FFN's hidden layer, act(x w1^T) * (x w3^T).
  virtual torch::Tensor gated_hidden(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w3,
                                     Ffn act) const;

  // q [B, heads, T, d_head], k and v [B, kv_heads, T, d_head] from x [B, T, d] and the projections' weights, q and k
  // turned by RoPE where cos and sin (Transformer::rope_tables) are defined.
  virtual std::array<torch::Tensor, 3> heads(const torch::Tensor& x, const torch::Tensor& wq, const torch::Tensor& wk,
                                             const torch::Tensor& wv, const torch::Tensor& cos,
                                             const torch::Tensor& sin, int64_t heads, int64_t kv_heads) const;

  // The LM head and its cross-entropy (runtime/training/lm_head_loss.h's linear_cross_entropy).
  virtual torch::Tensor loss(const torch::Tensor& features, const torch::Tensor& weight, const torch::Tensor& targets,
                             const torch::Tensor& row_weights) const;

 protected:
  // The heads from the projections' outputs q [B, T, heads d_head], k and v [B, T, kv_heads d_head]: a view, a
  // transpose, RoPE.
  static std::array<torch::Tensor, 3> into_heads(const std::vector<torch::Tensor>& qkv, const torch::Tensor& cos,
                                                 const torch::Tensor& sin, int64_t heads, int64_t kv_heads);
};

// LibTorch's own operations: the default, on every device.
std::shared_ptr<const StepOperations> library_operations();

}  // namespace sink::rt
