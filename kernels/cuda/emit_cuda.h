// CUDA C++ for one attention variant: the forward, the backward's three
// kernels and the probe, specialized on the same KernelSpec as the CPU
// kernels (kernels/llvm/emit_llvm.h), compiled at run time by NVRTC, so a GPU
// node needs no LLVM. Text, like the LLVM IR: the compiler and the tests
// read it without a GPU.
//
// The FlashAttention-2 shape: a block owns a tile of rows (16 per warp on
// tensor cores, else one per thread) and streams the other side's rows
// through shared memory in tiles; softmax-like normalizers keep a running
// maximum (online), and the backward recomputes the attention from the
// forward's row statistics.
//   forward          query rows; key/value tiles in shared memory
//   backward_rows    delta_i = <dO_i, O_i>, the k* column and the sink logit, a row per thread
//   backward_keys    key rows: dk, dv (and the position-bias gradient)
//   backward_queries query rows: dq
//   probe            one element of the metric's score matrix per thread
// Layout per (batch x head) slice: [T, D] rows; stats [2, T]; delta, astar,
// dx_kstar, dsink [T]; dg [T] by distance. Arguments: kernels/kernel_abi.h.
#pragma once
#include <string>
#include <string_view>

#include "kernels/cuda/tile_choice.h"

namespace sink::kernels {

// Whether a source holds Hopper's arch-specific instructions, which NVRTC compiles for sm_90a, not sm_90.
bool needs_sm90a(std::string_view source);

// The source of `spec`'s kernels in `storage`, with `tiles` (default: cuda_tiles(spec, storage)).
std::string emit_cuda(const KernelSpec& spec, CudaStorage storage = CudaStorage::Real);
std::string emit_cuda(const KernelSpec& spec, CudaStorage storage, const CudaTiles& tiles);

}  // namespace sink::kernels
