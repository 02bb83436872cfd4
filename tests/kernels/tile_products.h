// The tensor-core kernels' products (kernels/cuda/tile.cuh on mma.sync, tile_sm90.cuh on wgmma) checked against
// plain matrix products, on whatever runs the kernels: the CPU emulation (tests/kernels/tensor_tiles_test.cpp) or
// a GPU (cuda_check's "tiles" case). On a GPU a wrong fragment map, descriptor or swizzle shows here first and
// element by element, where the attention kernels' cases can only say that the attention is wrong: a layout
// error moves values to other places of the product, so each misplaced element is named with the place its
// value belongs to.
#pragma once
#include <fmt/format.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_source.h"
#include "kernels/cuda/cuda_text.h"
#include "runtime/attention/cuda_attention.h"

namespace sink::testing_variants {

// What the generated source defines before the tile operations, for D and the 16-bit type; with `hopper`, the
// Hopper kernels' too (kernels/cuda/tile_sm90.cuh).
inline std::string tile_prelude(int d, bool half, int threads, bool hopper = false) {
  return "typedef float real;\n" +
         kernels::cuda_storage(half ? kernels::CudaStorage::Float16 : kernels::CudaStorage::BFloat16) +
         fmt::format(R"(#define SINK_INF ((real)__int_as_float(0x7f800000))
#define SINK_WGMMA {3}
constexpr int D = {0}, PITCH = D + 8, THREADS = {2};
constexpr bool HALF_MMA = {1}, POSITION_BIAS = false;
#define SCALE_QK ((real)1)
__device__ __forceinline__ real r_fmax(real a, real b) {{ return a > b ? a : b; }}
__device__ __forceinline__ long long imin(long long a, long long b) {{ return a < b ? a : b; }}
__device__ __forceinline__ long long distance(long long i, long long j) {{ return i > j ? i - j : j - i; }}
)",
                     d, half ? "true" : "false", threads, hopper ? 1 : 0) +
         kernels::cuda_text::kWarpSm80 + kernels::cuda_text::kTile +
         (hopper ? std::string(kernels::cuda_text::kWarpSm90) + kernels::cuda_text::kTileSm90 : std::string());
}

// One warp: A (rows 0..15 of a [rows, D] array; rows from `rows` on read the last) times the 64 rows of B,
// S = A B^T through the fragments; then S, rounded to 16 bits as an A operand, times B: S B; and each
// row's maximum and sum over the four lanes that hold it.
inline constexpr const char* kWarpProducts = R"(
extern "C" __global__ void products(const store_t* a, const store_t* b, float* abt, float* ab, float* rows,
                                    float* unused, long long T, long long, long long, long long) {
  __shared__ __align__(16) store_t tile[64][PITCH];
  PackedTile<D> fa;
  load_a_rows(fa, a, 0, T);
  load_tile_async<64, THREADS>(tile, b, 0, 63);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  FloatTile<64> s;
  s.zero();
  mma_abt<64>(s, fa, tile);
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) abt[frag_row(e) * 64 + frag_col(nb, e)] = s.frag[nb][e];
  PackedTile<64> sa;
  as_a(sa, s);
  FloatTile<D> o;
  o.zero();
  mma_ab<64>(o, sa, tile);
  for (int nb = 0; nb < D / 8; ++nb)
    for (int e = 0; e < 4; ++e) ab[frag_row(e) * D + frag_col(nb, e)] = o.frag[nb][e];
  for (int h = 0; h < 2; ++h) {
    float most = -SINK_INF, sum = 0;
    for (int nb = 0; nb < 8; ++nb)
      for (int e = 2 * h; e < 2 * h + 2; ++e) most = r_fmax(most, s.frag[nb][e]), sum += s.frag[nb][e];
    most = quad_max(most), sum = quad_sum(sum);
    if (lane_id() % 4 == 0) rows[frag_row(2 * h) * 2] = most, rows[frag_row(2 * h) * 2 + 1] = sum;
  }
}
)";

// A warpgroup (four warps): A (rows 0..63 of a [rows, D] array; from `rows` on the last) times the 64 rows of B
// through the Hopper kernels' products, S = A B^T with B a K-major swizzled tile, then S rounded to 16 bits times
// the same tile read MN-major: S B; S, stored to a swizzled tile of its own, read back by the products as the
// transpose of A: S^T B (the fused backward's dQ = dS K from dS^T); and S = A B^T with A read from a swizzled tile
// too (the fused backward's S^T = K Q^T), where A's rows from `rows` on are zeros.
inline constexpr const char* kWarpgroupProducts = R"(
extern "C" __global__ void hopper_products(const store_t* a, const store_t* b, float* abt, float* ab, float* atb,
                                           float* abt_shared, long long T, long long, long long, long long) {
  struct alignas(1024) Shared {
    store_t tile[64 * D], s_tile[64 * 64], a_tile[64 * D];
  };
  Shared& shared = shared_block<Shared, sizeof(Shared) + 1008>();
  const int row0 = 16 * (threadIdx.x / 32);
  PackedTile<D> fa[1];
  load_a_rows(fa[0], a, row0, T);
  load_tile_async<64, THREADS>(shared.tile, b, 0, 63);
  load_tile_async<64, THREADS>(shared.a_tile, a, 0, T - 1);
  cp_async_commit();
  await_stage();
  FloatTile<64> s[1];
  for (int nb = 0; nb < 8; ++nb)  // (NaN: issue_abt sets S, whatever its registers held)
    for (int e = 0; e < 4; ++e) s[0].frag[nb][e] = __int_as_float(0x7fc00000);
  issue_abt<64, 1>(s, fa, shared.tile);
  await_products<0>(s);
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) abt[(row0 + frag_row(e)) * 64 + frag_col(nb, e)] = s[0].frag[nb][e];
  PackedTile<64> sa[1];
  as_a(sa[0], s[0]);
  FloatTile<D> o[1];
  o[0].zero();
  mma_ab<64, 1>(o, sa, shared.tile);
  for (int nb = 0; nb < D / 8; ++nb)
    for (int e = 0; e < 4; ++e) ab[(row0 + frag_row(e)) * D + frag_col(nb, e)] = o[0].frag[nb][e];
  store_swizzled<64, 64>(shared.s_tile, row0, sa[0]);
  async_proxy_fence();
  __syncthreads();
  for (int nb = 0; nb < D / 8; ++nb)  // (NaN: the first product sets the sums)
    for (int e = 0; e < 4; ++e) o[0].frag[nb][e] = __int_as_float(0x7fc00000);
  issue_atb<64>(o[0], shared.s_tile, shared.tile);
  await_products<0>(o);
  for (int nb = 0; nb < D / 8; ++nb)
    for (int e = 0; e < 4; ++e) atb[(row0 + frag_row(e)) * D + frag_col(nb, e)] = o[0].frag[nb][e];
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) s[0].frag[nb][e] = __int_as_float(0x7fc00000);
  issue_abt<64>(s[0], shared.a_tile, shared.tile);
  await_products<0>(s);
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) abt_shared[(row0 + frag_row(e)) * 64 + frag_col(nb, e)] = s[0].frag[nb][e];
}
)";

// The shapes checked: every d_head of the kernels in both 16-bit types; for the warpgroup also 32, whose rows
// are one 64-byte swizzled piece (64 and 128: 128-byte swizzle, one and two pieces a row; 96: 64-byte).
struct TileShape {
  bool warpgroup;  // the Hopper products (wgmma, sm_90a) instead of mma.sync
  int d;
  bool half;
  std::string describe() const {
    return fmt::format("{} products, d_head {}, {}", warpgroup ? "wgmma" : "mma.sync", d, half ? "half" : "bf16");
  }
  std::string source() const {
    return warpgroup ? tile_prelude(d, half, 128, true) + kWarpgroupProducts
                     : tile_prelude(d, half, 32) + kWarpProducts;
  }
};
inline std::vector<TileShape> tile_shapes(bool warpgroup) {
  std::vector<TileShape> shapes;
  for (bool half : {false, true})
    for (int d : warpgroup ? std::vector<int>{32, 64, 96, 128} : std::vector<int>{64, 96, 128})
      shapes.push_back({warpgroup, d, half});
  return shapes;
}

// Ranges of sorted indices, "0-15, 32, 40-47".
inline std::string index_ranges(const std::vector<int64_t>& sorted) {
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ", ", sorted[i]);
    if (j > i) out += fmt::format("-{}", sorted[j]);
    i = j + 1;
  }
  return out;
}

// "" where `got` and `want` (2-d, float) agree within rtol and atol; else how many elements disagree, in which
// rows and columns, and for the first few the place of `want` their value belongs to, if any.
inline std::string disagreement(const torch::Tensor& got, const torch::Tensor& want, double rtol, double atol) {
  const auto wrong = ~torch::isclose(got, want, rtol, atol);
  const int64_t count = wrong.sum().item<int64_t>();
  if (count == 0) return "";
  auto sorted_indices = [](const torch::Tensor& any) {
    const auto at = any.nonzero().flatten();
    return std::vector<int64_t>(at.data_ptr<int64_t>(), at.data_ptr<int64_t>() + at.numel());
  };
  std::string out = fmt::format("{} of {} elements wrong ({} NaN; largest error {:.3g}), rows {}, columns {}", count,
                                got.numel(), got.isnan().sum().item<int64_t>(),
                                (got - want).abs().nan_to_num(INFINITY, INFINITY).max().item<double>(),
                                index_ranges(sorted_indices(wrong.any(1))), index_ranges(sorted_indices(wrong.any(0))));
  const auto places = wrong.nonzero();
  const auto flat_want = want.flatten();
  for (int64_t k = 0; k < std::min<int64_t>(places.size(0), 4); ++k) {
    const int64_t r = places[k][0].item<int64_t>(), c = places[k][1].item<int64_t>();
    const double value = got[r][c].item<double>();
    const auto distance = (flat_want - value).abs();
    const int64_t nearest = distance.argmin().item<int64_t>();
    const bool found = distance[nearest].item<double>() <= atol + rtol * std::abs(value);
    out += found
               ? fmt::format("; ({}, {}) holds ({}, {})'s value", r, c, nearest / want.size(1), nearest % want.size(1))
               : fmt::format("; ({}, {}) = {:.4g}, want {:.4g}, in no place of the product", r, c, value,
                             want[r][c].item<double>());
  }
  return out;
}

// One product of one shape: its name, and what was wrong ("" when right).
struct TileProductCheck {
  std::string name, problem;
};

// Runs `shape`'s kernel by `modules` on `device` and checks S = A B^T, S B (from the kernel's own S rounded to
// 16 bits: the packing, not the rounding, is under test) and, on mma.sync, the row maxima and sums, on wgmma S^T B
// and S again with A from shared memory. `loose`
// scales the tolerances for a GPU, whose tensor cores add in an order of their own.
inline std::vector<TileProductCheck> check_tile_products(const rt::KernelModules& modules, const torch::Device& device,
                                                         const TileShape& shape, double loose = 1) {
  const auto dtype = shape.half ? torch::kHalf : torch::kBFloat16;
  const int64_t block_rows = shape.warpgroup ? 64 : 16;
  const int64_t rows = shape.warpgroup ? 50 : 13;  // the block's rows past these read the last one
  torch::manual_seed(shape.d + shape.half);
  const auto a = torch::randn({rows, shape.d}).to(dtype), b = torch::randn({64, shape.d}).to(dtype);
  const auto on = [&](const torch::Tensor& t) { return t.to(device); };
  auto abt = on(torch::full({block_rows, 64}, NAN)), ab = on(torch::full({block_rows, shape.d}, NAN));
  // (the third output: the row maxima and sums on mma.sync, S^T B on wgmma)
  auto third = on(shape.warpgroup ? torch::full({64, shape.d}, NAN) : torch::full({block_rows, 2}, NAN));
  auto fourth = on(shape.warpgroup ? torch::full({block_rows, 64}, NAN) : torch::zeros({1}));  // (wgmma: A shared)
  auto a_on = on(a), b_on = on(b);
  std::vector<rt::KernelBuffer> buffers;
  for (torch::Tensor* t : {&a_on, &b_on, &abt, &ab, &third, &fourth}) buffers.push_back({t->data_ptr(), t->nbytes()});
  const std::array<int64_t, 4> sizes{rows, 1, 0, 0};
  const unsigned threads = shape.warpgroup ? 128 : 32;
  const unsigned shared_bytes = shape.warpgroup ? 2 * 64 * shape.d * 2 + 64 * 64 * 2 + 1008 : 0;
  auto module = modules.load(shape.source(), device);
  module->launch(shape.warpgroup ? "hopper_products" : "products", {1, 1, threads, shared_bytes}, buffers, sizes);
  module->synchronize();
  abt = abt.cpu(), ab = ab.cpu(), third = third.cpu(), fourth = fourth.cpu();

  const auto a_block = torch::cat({a, a.slice(0, rows - 1).expand({block_rows - rows, shape.d})}).to(torch::kFloat);
  const auto want_abt = torch::matmul(a_block, b.to(torch::kFloat).t());
  const auto want_ab = torch::matmul(abt.to(dtype).to(torch::kFloat), b.to(torch::kFloat));
  const std::string name = shape.describe();
  std::vector<TileProductCheck> checks{{name + ": S = A B^T", disagreement(abt, want_abt, 1e-5 * loose, 1e-4 * loose)},
                                       {name + ": S B", disagreement(ab, want_ab, 1e-5 * loose, 1e-3 * loose)}};
  if (shape.warpgroup) {
    const auto want_atb = torch::matmul(abt.to(dtype).to(torch::kFloat).t(), b.to(torch::kFloat));
    checks.push_back({name + ": S^T B", disagreement(third, want_atb, 1e-5 * loose, 1e-3 * loose)});
    checks.push_back({name + ": S = A B^T, A from shared memory",
                      disagreement(fourth.slice(0, 0, rows), want_abt.slice(0, 0, rows), 1e-5 * loose, 1e-4 * loose)});
  } else {
    const auto maxima = std::get<0>(abt.max(1, true)), sums = abt.sum(1, true);
    checks.push_back(
        {name + ": row maxima and sums", disagreement(third.slice(1, 0, 1), maxima, 0, 0) +
                                             disagreement(third.slice(1, 1, 2), sums, 1e-5 * loose, 1e-3 * loose)});
  }
  return checks;
}

}  // namespace sink::testing_variants
