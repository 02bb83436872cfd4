#include "kernels/cuda/tile_choice.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

#include "kernels/kernel_abi.h"

namespace sink::kernels {
namespace {

// Halves `rows` until `bytes(rows)` fits the shared-memory budget.
int fit(int rows, size_t (*bytes)(int rows, int64_t d, size_t element), int64_t d, size_t element) {
  constexpr size_t kBudget = 40 * 1024;
  while (rows > 1 && bytes(rows, d, element) > kBudget) rows /= 2;
  return rows;
}

}  // namespace

std::string scalar_kernels_reason(const KernelSpec& spec, CudaStorage storage, int capability) {
  if (storage == CudaStorage::Real) return spec.f64 ? "double storage" : "float storage";
  if (spec.d_head % 16 != 0) return fmt::format("d_head {} is not a multiple of 16", spec.d_head);
  if (capability > 0 && capability < kTensorCoreCapability)
    return fmt::format("a GPU of compute capability {}.{}; the tensor-core kernels need {}.{} or newer",
                       capability / 10, capability % 10, kTensorCoreCapability / 10, kTensorCoreCapability % 10);
  return {};
}

namespace {

// backward_keys's static shared memory: two stages of [rows][d + 8] Q and dO tiles and four float rows (Z, 1 / Z,
// the shift, D); with fused_dq also the block's K rows, a [block][rows + 8] tile of dS^T and the tile's dQ share
// in float, [rows][d + 8] (what sm_90's bulk reductions read).
int backward_keys_shared_bytes(const CudaTiles& t, int64_t d) {
  const int rows = t.key_queries, pitch = static_cast<int>(d + 8);
  const int fused_rows = t.fused_dq ? t.key_rows : 1, dq_rows = t.fused_dq ? rows : 1;  // (one row otherwise)
  return 2 * 2 * rows * pitch * 2 + 2 * 4 * rows * 4 + fused_rows * pitch * 2 + fused_rows * (rows + 8) * 2 +
         dq_rows * pitch * 4;
}
constexpr int kStaticSharedLimit = 48 * 1024;

// Whether every tensor-core kernel of these tiles fits the shared memory a block may have (backward_keys's static
// arrays within 48 KiB; fused_dq's are dynamic).
bool fits_shared_memory(const CudaTiles& t, int64_t d) {
  const CudaSharedBytes bytes = cuda_shared_bytes(t, d);
  return std::max({bytes.forward, bytes.queries, bytes.keys}) <= kCudaSharedLimit &&
         (t.fused_dq || backward_keys_shared_bytes(t, d) <= kStaticSharedLimit);
}

}  // namespace

std::vector<CudaTiles> cuda_tile_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  if (!chosen.tensor_cores) return {chosen};
  std::vector<CudaTiles> out = {chosen};
  const int64_t d = spec.d_head;
  // Rows per block 64 or 128; each kernel's streamed tiles the default's or half of them (16 rows at least: one
  // fragment), or the query-row kernels' twice them where that fits (FlashAttention-2's 128-key forward tiles at
  // d_head 64, 72 KiB; 64-key tiles for backward_queries from d_head 96 on); 16 or 32 rows per warp in the
  // query-row kernels (two fragments: each shared-memory read of a key tile feeds twice the products, for twice
  // the registers); registers for one block per multiprocessor, 168 a thread (three blocks of 4 warps: at d_head
  // 64 the backward kernels fit them with half tiles, where they otherwise take 250 and run two), or 128 (16 warps
  // a multiprocessor: the forward fits them without spilling, the backward kernels spill and lose).
  enum class Stream { Half, Default, Wide };
  struct Shape {
    int rows;
    Stream stream;
    int row_frags, min_blocks;
  };
  const Shape shapes[] = {{64, Stream::Half, 1, 1},  {64, Stream::Half, 1, 3},     {128, Stream::Default, 1, 1},
                          {128, Stream::Half, 1, 1}, {128, Stream::Default, 2, 1}, {64, Stream::Default, 1, 4},
                          {64, Stream::Wide, 1, 1}};
  for (const Shape& shape : shapes) {
    const auto part = [&](int stream) { return shape.stream == Stream::Half ? std::max(16, stream / 2) : stream; };
    CudaTiles t = chosen;
    t.forward_rows = t.key_rows = t.query_rows = shape.rows;
    t.forward_keys = part(chosen.forward_keys);
    t.key_queries = part(chosen.key_queries), t.query_keys = part(chosen.query_keys);
    if (shape.stream == Stream::Wide) {  // twice the query-row kernels' key tiles, each where it fits
      t.forward_keys *= 2, t.query_keys *= 2;
      const CudaSharedBytes bytes = cuda_shared_bytes(t, d);
      if (bytes.forward > kCudaSharedLimit) t.forward_keys /= 2;
      if (bytes.queries > kCudaSharedLimit) t.query_keys /= 2;
    }
    t.row_frags = shape.row_frags, t.min_blocks = shape.min_blocks;
    if (!fits_shared_memory(t, d)) continue;
    const bool known = std::any_of(out.begin(), out.end(), [&](const CudaTiles& o) { return o.same_as(t); });
    if (!known && out.size() < 8) out.push_back(t);
  }
  return out;
}

std::vector<CudaTiles> cuda_fused_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  if (!chosen.tensor_cores) return {};
  const int64_t d = spec.d_head;
  // Key rows per block and query rows per tile: 64 or 128 keys (a block of 128 sums into dQ half as often) with
  // the default's queries or half of them (dQ's operands take registers the default's tile leaves), then a
  // quarter; 16 query rows at least (one fragment of dQ's rows). (32 keys, two warps, spilled at d_head 128.)
  const std::pair<int, int> shapes[] = {{64, 1}, {64, 2}, {128, 1}, {128, 2}, {64, 4}};  // (keys, divisor)
  std::vector<CudaTiles> out;
  for (const auto& [block, divisor] : shapes) {
    CudaTiles t = chosen;
    t.fused_dq = true;
    t.key_rows = block, t.key_queries = chosen.key_queries / divisor;
    if (t.key_queries >= 16 && fits_shared_memory(t, d) && out.size() < 4) out.push_back(t);
  }
  return out;
}

std::vector<CudaTiles> cuda_hopper_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  const int64_t d = spec.d_head;
  if (!chosen.tensor_cores || d % 32 != 0 || d > 128) return {};
  // (rows, keys, overlap): FlashAttention-3's forward has two or three warpgroups of 64 rows and 128-key tiles at
  // d_head 64, a producer warp and its products overlapping the fold; here one or two warpgroups, no producer warp.
  // 128-key tiles at d_head 64 alone: past it their scores and O's sums spill (ALiBi with k* and the sink logit at
  // d_head 96), and the pipelined form holds a tile's scores more. And only where each score is exp or sigmoid of
  // the product, without a position term: at d_head 64 ALiBi's forward spilled 64 bytes, softplus(x) (1 + tanh x)'s
  // 152, and p-norm's and softpick's took 243 of the 255 registers.
  const bool light_scores = !spec.position_bias && spec.score.op == ExprNode::Op::Call &&
                            (spec.score.name == "exp" || spec.score.name == "sigmoid") && spec.score.args.size() == 1 &&
                            spec.score.args[0].op == ExprNode::Op::Var && spec.score.args[0].name == "qk";
  struct Shape {
    int rows, keys;
    bool overlap;
  };
  const Shape shapes[] = {{64, 64, false}, {64, 64, true}, {128, 64, true}, {128, 128, true}};
  std::vector<CudaTiles> out;
  for (const Shape& shape : shapes) {
    if (shape.keys > 64 && (d > 64 || !light_scores)) continue;
    // The backward kernels' tiles the default's (64 rows, a warpgroup), but backward_keys's 64 queries a tile at
    // every d_head: its K and V rows in shared memory leave the registers for them (the default's 32 at d_head 96
    // and 16 at 128 hold those rows in registers), where no position table takes them.
    CudaTiles t = chosen;
    t.hopper = true, t.forward_rows = shape.rows, t.forward_keys = shape.keys, t.row_frags = 1;
    t.overlap = shape.overlap;
    if (!spec.position_bias) t.key_queries = 64;
    const CudaSharedBytes bytes = cuda_shared_bytes(t, d);
    if (bytes.forward <= kCudaSharedLimit && std::max(bytes.keys, bytes.queries) <= kHopperSharedLimit)
      out.push_back(t);
  }
  return out;
}

std::vector<CudaTiles> cuda_hopper_fused_candidates(const KernelSpec& spec, CudaStorage storage) {
  const CudaTiles chosen = cuda_tiles(spec, storage);
  const int64_t d = spec.d_head;
  // One warpgroup of 64 keys and 64-query tiles (dQ's share is then one warpgroup product); its K and V rows in
  // shared memory (the products' A), its dK and dV sums, a tile's scores and gradients and dQ's share in
  // registers: 190-255 at d_head 64-128 without spilling (HopperFusedBackwardSpillsNothing), and not offered with
  // a position table, whose per-element reads take the registers the default's half tiles leave it.
  if (!chosen.tensor_cores || d % 32 != 0 || d > 128 || spec.position_bias) return {};
  CudaTiles t = chosen;
  t.hopper = true, t.fused_dq = true, t.key_rows = 64, t.key_queries = 64;
  if (cuda_shared_bytes(t, d).keys > kHopperSharedLimit) return {};
  return {t};
}

std::vector<CudaTiles> cuda_tuning_tiles(const KernelSpec& spec, CudaStorage storage, int capability) {
  std::vector<CudaTiles> out = cuda_tile_candidates(spec, storage);
  const std::vector<CudaTiles> fused = cuda_fused_candidates(spec, storage);
  out.insert(out.end(), fused.begin(), fused.end());
  if (capability == 0 || capability == kHopperCapability) {
    const std::vector<CudaTiles> hopper = cuda_hopper_candidates(spec, storage);
    out.insert(out.end(), hopper.begin(), hopper.end());
    const std::vector<CudaTiles> hopper_fused = cuda_hopper_fused_candidates(spec, storage);
    out.insert(out.end(), hopper_fused.begin(), hopper_fused.end());
  }
  return out;
}
CudaTiles cuda_tiles(const KernelSpec& spec, CudaStorage storage, int capability) {
  const int64_t d = spec.d_head;
  CudaTiles t;
  if (scalar_kernels_reason(spec, storage, capability).empty()) {
    // 16 rows per warp, four warps; two stages of two tiles of [rows][d + 8] 16-bit numbers (in dynamic shared
    // memory: 68 KiB for the forward's 64 keys at d_head 128, as FlashAttention-2's tiles take).
    t.tensor_cores = true;
    t.forward_rows = t.key_rows = t.query_rows = 64;
    t.min_blocks = 1;  // as many registers as a kernel needs: none spills (NVRTC's default aims at 128 and spills)
    t.forward_keys = 64;
    t.key_queries = t.query_keys = d <= 64 ? 64 : 32;
    // backward_keys holds the warp's K and V rows and its dK and dV sums in registers: 16 queries a tile
    // from d_head 128 on, or the registers spill.
    if (d >= 128) t.key_queries = 16;
    // With a position table, per-element reads of it the compiler hoists: half the queries a tile, or the
    // registers spill (ALiBi at d_head 64 and 96 on sm_90).
    if (spec.position_bias) t.key_queries = d <= 64 ? 32 : 16;
    // Past d_head 128, smaller tiles where they would not fit (d_head 192's 64-key tiles take 100 KiB).
    const auto over = [&](int CudaSharedBytes::* kernel) { return cuda_shared_bytes(t, d).*kernel > kCudaSharedLimit; };
    while (t.forward_keys > 16 && over(&CudaSharedBytes::forward)) t.forward_keys /= 2;
    while (t.key_queries > 16 && backward_keys_shared_bytes(t, d) > kStaticSharedLimit) t.key_queries /= 2;
    while (t.query_keys > 16 && over(&CudaSharedBytes::queries)) t.query_keys /= 2;
    if (!fits_shared_memory(t, d))
      throw std::runtime_error(fmt::format("CUDA kernels: d_head {} exceeds the tensor-core tiles' shared memory", d));
    return t;
  }
  const size_t element = spec.f64 ? 8 : 4;
  // forward: key and value tiles; backward_keys: its own k, v rows (padded
  // to d + 1, conflict-free) and query/dO tiles; backward_queries: its own q,
  // dO rows and key/value tiles.
  t.forward_keys = fit(32, [](int r, int64_t d, size_t e) { return 2 * r * d * e; }, d, element);
  t.key_queries =
      fit(32, [](int r, int64_t d, size_t e) { return (2 * 32 * (d + 1) + 2 * r * d + 3 * r) * e; }, d, element);
  t.query_keys = fit(32, [](int r, int64_t d, size_t e) { return (2 * 32 * (d + 1) + 2 * r * d) * e; }, d, element);
  if (t.key_queries < 4 || t.query_keys < 4) {  // d_head in the hundreds: fewer own rows
    t.key_rows = t.query_rows = 8;
    t.key_queries =
        fit(32, [](int r, int64_t d, size_t e) { return (2 * 8 * (d + 1) + 2 * r * d + 3 * r) * e; }, d, element);
    t.query_keys = fit(32, [](int r, int64_t d, size_t e) { return (2 * 8 * (d + 1) + 2 * r * d) * e; }, d, element);
  }
  return t;
}

CudaSharedBytes cuda_shared_bytes(const CudaTiles& t, int64_t d) {
  if (!t.tensor_cores) return {};
  // Two stages of two [rows][d + 8] tiles of 16-bit numbers (backward_keys's are static but where it sums dQ). The
  // Hopper kernels' are [rows][d], swizzled (backward_keys's beside four float rows a stage), in a struct of
  // 1024-byte alignment (its size a multiple of it) from the 1024-byte boundary the kernel finds (warp_sm80.cuh's
  // shared_block: up to 1008 bytes on).
  const auto tiles = [&](int rows) { return 2 * 2 * rows * static_cast<int>(d + 8) * 2; };
  // The Hopper backward_keys also holds the block's K and V rows, swizzled; fused, a tile of dS^T too and dQ's share
  // in float, [rows][d + 8].
  const auto hopper = [&](int rows, int float_rows, int stages, bool keys = false) {
    const int block = !keys ? 0
                            : 2 * t.key_rows * static_cast<int>(d) * 2 +
                                  (t.fused_dq ? t.key_rows * rows * 2 + rows * static_cast<int>(d + 8) * 4 : 0);
    return (stages * 2 * rows * static_cast<int>(d) * 2 + float_rows * stages * rows * 4 + block + 1023) / 1024 * 1024 +
           1024 - 16;
  };
  if (t.hopper)
    return {hopper(t.forward_keys, 0, t.streamed_stages()), hopper(t.query_keys, 0, t.streamed_stages()),
            hopper(t.key_queries, 4, 2, true)};
  return {tiles(t.forward_keys), tiles(t.query_keys), t.fused_dq ? backward_keys_shared_bytes(t, d) : 0};
}

int CudaSharedBytes::of(std::string_view kernel_symbol) const {
  return kernel_symbol == abi::kForwardSymbol               ? forward
         : kernel_symbol == abi::kCudaBackwardQueriesSymbol ? queries
         : kernel_symbol == abi::kCudaBackwardKeysSymbol    ? keys
                                                            : 0;
}

CudaStorage training_storage(Precision precision) {
  return precision == Precision::bf16 ? CudaStorage::BFloat16 : CudaStorage::Real;
}

std::string CudaTiles::describe() const {
  return fmt::format("forward {}x{}, backward_keys {}x{}, backward_queries {}x{}, min_blocks {}, row_frags {}{}{}{}{}",
                     forward_rows, forward_keys, key_rows, key_queries, query_rows, query_keys, min_blocks, row_frags,
                     position_grad ? ", dg" : "", fused_dq ? ", fused dQ" : "", hopper ? ", wgmma" : "",
                     hopper && overlap ? ", overlapped" : "");
}

}  // namespace sink::kernels
