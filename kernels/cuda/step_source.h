// The CUDA source of the fused operations around the attention in a training step (kernels/cuda/residual_norm.cuh,
// kernels/cuda/gated_activation.cuh, kernels/cuda/split_heads.cuh): each text after the constants it is specialized on,
// as the attention's sources are (kernels/cuda/emit_cuda.h). Float arithmetic over storage in float, bf16 or IEEE half.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/cuda/tile_choice.h"

namespace sink::kernels {

// Each kernel's symbol and arguments: kernels/kernel_abi.h (kResidualNormForward, ...).

// The residual add and RMSNorm (or, centered, LayerNorm) over rows of `width` with `eps`.
std::string residual_norm_source(CudaStorage storage, int64_t width, double eps, bool centered = false);

enum class GatedActivation { Relu = 0, Gelu = 1, Silu = 2 };  // ReGLU, GeGLU, SwiGLU
std::string gated_activation_source(CudaStorage storage, GatedActivation activation);

// The stacked projection's q (`heads` of `head_dim`), k and v (`kv_heads` each) into head-major tensors, RoPE on q
// and k where `rope`.
std::string split_heads_source(CudaStorage storage, int64_t heads, int64_t kv_heads, int64_t head_dim, bool rope);

}  // namespace sink::kernels
