// CUDA C++ for one attention variant: the forward, the backward's three
// kernels and the probe, specialized on the same KernelSpec as the CPU
// kernels (kernels/emit_llvm.h), compiled at run time by NVRTC, so a GPU
// node needs no LLVM. Text, like the LLVM IR: the compiler and the tests
// read it without a GPU.
//
// The FlashAttention-2 shape: a block of threads owns a tile of rows, one row
// per thread, and streams the other side's rows through shared memory in
// tiles; softmax-like normalizers keep a running maximum (online), and the
// backward recomputes the attention from the forward's row statistics.
//   forward        a query row per thread, key/value tiles in shared memory
//   backward_rows  delta_i = <dO_i, O_i>, the k* column and the sink logit per row
//   backward_keys  a key row per thread: dk, dv (and the position-bias gradient)
//   backward_queries a query row per thread: dq
//   probe          one element of the metric's score matrix per thread
// Layout per (batch x head) slice: [T, D] rows; stats [2, T]; delta, astar,
// sdxstar, dsink [T]; dg [T] by distance. Arguments: kernels/kernel_abi.h.
#pragma once
#include <string>

#include "plan/kernel_spec.h"

namespace sink::kernels {

// How q, k, v, o and their gradients are stored: as the kernel's real type
// (float, or double for spec.f64), or as bfloat16 or IEEE half with float
// arithmetic.
enum class CudaStorage { Real, BFloat16, Float16 };

// Threads per block and rows per shared-memory tile, chosen from d_head and
// the element size so each kernel's shared memory stays within 40 KiB (no
// opt-in needed on any GPU). The launcher and the emitter both read these.
struct CudaTiles {
  int forward_rows = 64, forward_keys = 32;  // threads (query rows); key rows per tile
  int key_rows = 32, key_queries = 32;       // backward_keys: threads (key rows); query rows per tile
  int query_rows = 32, query_keys = 32;      // backward_queries: threads (query rows); key rows per tile
  int row_threads = 128;                     // backward_rows and probe: threads per block
};
CudaTiles cuda_tiles(const KernelSpec& spec);

// The storage of a run's training passes (train.precision): bf16 autocast
// hands the kernels bf16 q, k and v. Measurements run in float.
CudaStorage training_storage(const std::string& precision);

std::string emit_cuda(const KernelSpec& spec, CudaStorage storage = CudaStorage::Real);

}  // namespace sink::kernels
