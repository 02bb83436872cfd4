// Which tiles a variant's CUDA kernels run with: the storage, the rows and keys a block and a tile take, the shared
// memory each kernel asks for, and the candidates a GPU measures (runtime/attention/cuda_tuning.h). The emitter
// (kernels/cuda/emit_cuda.h) prints a source for one such choice; this file chooses, as FlashAttention-3's
// tile_size.h does, so a new tile shape or GPU touches the choice and not the printer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel_spec.h"

namespace sink::kernels {

// How q, k, v, o and their gradients are stored: as the kernel's real type
// (float, or double for spec.f64), or as bfloat16 or IEEE half with float
// arithmetic.
enum class CudaStorage { Real, BFloat16, Float16 };

// Rows per block and per shared-memory tile, and threads per block, chosen from d_head, the storage and the
// element size so each kernel's shared memory stays within 48 KiB (no opt-in needed on any GPU). The
// launcher and the emitter both read these.
//
// 16-bit storage with d_head a multiple of 16 runs on tensor cores (kernels/cuda/*.cuh): the forward and the
// two backward kernels give each warp 16 rows of a 64-row block and stream tiles of 64 keys (queries), 32
// from d_head 96 on. The rest runs on the scalar kernels, a row per thread: float and double (what the
// checks compare), and a d_head that is not a multiple of 16 (the products' shape, m16n8k16, needs it).
//
// The fields a tuning table records, each once (type, name, default): the struct, same_as and the table's JSON
// (runtime/attention/cuda_tuning.cpp) are written from this list.
//   forward_rows, forward_keys    forward: query rows per block; key rows per tile
//   key_rows, key_queries         backward_keys: key rows per block; query rows per tile
//   query_rows, query_keys        backward_queries: query rows per block; key rows per tile
//   min_blocks   tensor cores: blocks per multiprocessor the registers must allow (__launch_bounds__)
//   row_frags    tensor cores: 16-row fragments per warp in the forward and backward_queries (1 or 2)
//   fused_dq     backward_keys also sums dQ (dS K per tile, atomically into a float dQ: FlashAttention-2's backward),
//                and backward_queries does not run: five products a tile pair instead of seven, for a float copy of
//                dQ and sums in no fixed order. The tuning measures it against the two kernels
//                (cuda_fused_candidates).
//   hopper       the products of the forward, backward_keys and backward_queries on Hopper's warpgroup multiplies
//                (wgmma, sm_90a: kernels/cuda/tile_sm90.cuh) instead of mma.sync. Only GPUs of compute capability
//                9.0 run them (cuda_hopper_candidates, cuda_hopper_fused_candidates).
//   overlap      with hopper: the products of the forward and backward_queries asynchronous, the next tile's scores
//                and this tile's O += W V (dQ += dS K) in flight while the warps fold (FlashAttention-3's
//                pipelining within a warpgroup), over three stages of tiles.
#define SINK_CUDA_TILE_FIELDS(FIELD) \
  FIELD(int, forward_rows, 64)       \
  FIELD(int, forward_keys, 32)       \
  FIELD(int, key_rows, 32)           \
  FIELD(int, key_queries, 32)        \
  FIELD(int, query_rows, 32)         \
  FIELD(int, query_keys, 32)         \
  FIELD(int, min_blocks, 0)          \
  FIELD(int, row_frags, 1)           \
  FIELD(bool, fused_dq, false)       \
  FIELD(bool, hopper, false)         \
  FIELD(bool, overlap, false)
#define SINK_CUDA_TILE_MEMBER(type, name, initial) type name = initial;
struct CudaTiles {
  bool tensor_cores = false;
  SINK_CUDA_TILE_FIELDS(SINK_CUDA_TILE_MEMBER)
  int row_threads = 128;  // backward_rows and probe: threads per block
  // Not a tile: whether backward_keys sums the position table's gradient dg (a learned table's, T5's; ALiBi's
  // is a constant). A source of its own where wanted, so the kernels without it hold no flag in a register.
  bool position_grad = false;
  // Threads per block of each kernel: a row per thread, or a warp per 16 rows (16 row_frags in the two
  // query-row kernels).
  int forward_threads() const { return threads(forward_rows, row_frags); }
  int key_threads() const { return threads(key_rows, 1); }
  int query_threads() const { return threads(query_rows, row_frags); }
  // Stages of key and value tiles the forward and backward_queries stream: the one after next on its way too
  // where the products overlap the fold.
  int streamed_stages() const { return tensor_cores && hopper && overlap ? 3 : 2; }
#define SINK_CUDA_TILE_SAME(type, name, initial) &&name == o.name
  bool same_as(const CudaTiles& o) const {
    return tensor_cores == o.tensor_cores && row_threads == o.row_threads &&
           position_grad == o.position_grad SINK_CUDA_TILE_FIELDS(SINK_CUDA_TILE_SAME);
  }
#undef SINK_CUDA_TILE_SAME
  std::string describe() const;  // "rows 64, stream 64, min_blocks 1" per kernel, for logs and the tuning table

 private:
  int threads(int rows, int frags) const { return tensor_cores ? 32 * rows / (16 * frags) : rows; }
};
// `capability`: the GPU's compute capability (major * 10 + minor) where it is known, else 0 (the source
// alone, as gpu-check fills the kernel cache: sm_80 or newer is assumed).
CudaTiles cuda_tiles(const KernelSpec& spec, CudaStorage storage = CudaStorage::Real, int capability = 0);

// The bytes of dynamic shared memory each tensor-core kernel's launch asks for: what its struct of shared arrays
// holds (a kernel that holds more fails to compile); 0 for the kernels whose arrays are static (backward_keys's,
// bound by registers before shared memory, but on Hopper and where it sums dQ; the scalar kernels').
struct CudaSharedBytes {
  int forward = 0, queries = 0, keys = 0;
  int of(std::string_view kernel_symbol) const;  // by the symbol (kernel_abi.h); 0 for the other kernels
};
CudaSharedBytes cuda_shared_bytes(const CudaTiles& tiles, int64_t d_head);
// The most any tile may ask for: what every GPU from sm_80 on gives a block (99 KiB on sm_86 and sm_89; the
// A100 163, the H100 227). Past 48 KiB a kernel opts in at launch.
constexpr int kCudaSharedLimit = 99 * 1024;
// What the GPUs that run the Hopper kernels give a block (compute capability 9.0: the H100 and H200).
constexpr int kHopperSharedLimit = 227 * 1024;

// The tiles a GPU may measure for the tensor-core kernels (runtime/attention/cuda_tuning.h), at most 8, the
// default (cuda_tiles) first; the scalar kernels' one choice otherwise.
std::vector<CudaTiles> cuda_tile_candidates(const KernelSpec& spec, CudaStorage storage);

// The tiles of a backward_keys that also sums dQ (fused_dq) a GPU may measure against the two backward
// kernels, at most 4, each with its shared memory (the block's K rows, a tile of dS and one of dQ's share in
// float besides the query tiles) within kCudaSharedLimit; none for the scalar kernels.
std::vector<CudaTiles> cuda_fused_candidates(const KernelSpec& spec, CudaStorage storage);
// The Hopper kernels (hopper) a GPU of compute capability 9.0 may measure against the other tiles, each kernel
// against its own, at most 4: forwards of 64 rows (a warpgroup of four warps) and 64-key tiles, waiting for each
// product or overlapping them with the fold; overlapped ones of 128 rows (two warpgroups), and 128-key tiles at
// d_head 64 and below where each score is exp or sigmoid of the product without a position term;
// the backward kernels with the default's tiles (64 rows, a warpgroup), but backward_keys's 64 queries a tile
// without a position table (its K and V rows in shared memory); the forward within kCudaSharedLimit, the backward
// kernels within kHopperSharedLimit. None for the scalar kernels and where d_head is not 32, 64, 96 or 128 (the
// widths of O += W V's wgmma).
std::vector<CudaTiles> cuda_hopper_candidates(const KernelSpec& spec, CudaStorage storage);
// The fused backward_keys on Hopper's products (hopper and fused_dq: FlashAttention-3's backward, dQ's share of a
// tile one warpgroup product of dS^T and K from shared memory) a GPU of compute capability 9.0 may measure with
// cuda_fused_candidates: one, 64 keys and 64-query tiles, without a position table (registers), where d_head is 32,
// 64, 96 or 128; within kHopperSharedLimit.
std::vector<CudaTiles> cuda_hopper_fused_candidates(const KernelSpec& spec, CudaStorage storage);
constexpr int kHopperCapability = 90;  // wgmma's sm_90a code runs on 9.0 alone (not on later GPUs)
// Every source a GPU of `capability` (0: any, as gpu-check fills the kernel cache) compiles to tune:
// cuda_tile_candidates, then cuda_fused_candidates, then (on 9.0) cuda_hopper_candidates and
// cuda_hopper_fused_candidates.
std::vector<CudaTiles> cuda_tuning_tiles(const KernelSpec& spec, CudaStorage storage, int capability = 0);
// The oldest GPUs the tensor-core kernels run on (compute capability 8.0, the A100): bf16 mma.sync m16n8k16
// and cp.async came with it. Older GPUs (V100 7.0, T4 7.5) run every storage on the scalar kernels.
constexpr int kTensorCoreCapability = 80;

// Why a variant in this storage runs on the scalar kernels (on a GPU of `capability`, 0: unknown, taken as
// new enough); empty where it runs on tensor cores.
std::string scalar_kernels_reason(const KernelSpec& spec, CudaStorage storage, int capability = 0);

// The storage of a run's training passes (train.precision): bf16 autocast
// hands the kernels bf16 q, k and v. Measurements run in float.
CudaStorage training_storage(Precision precision);

}  // namespace sink::kernels
