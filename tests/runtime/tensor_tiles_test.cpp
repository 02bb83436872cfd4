// The tensor-core kernels' tile operations (kernels/cuda/tile.cuh) on the CPU emulation, whose warp
// instructions follow the PTX ISA's definitions (tests/runtime/cuda_on_cpu.h): every fragment map checked
// against a plain matrix product. A wrong map in tile.cuh (an ldmatrix address, the accumulator-to-operand
// packing, a fragment's row or column) or in the emulation's reading of the ISA puts elements in the wrong
// place, and the products below disagree with LibTorch's.
#include <gtest/gtest.h>

#include "kernels/cuda_source.h"
#include "kernels/cuda_text.h"
#include "tests/runtime/cuda_emulator.h"

using namespace sink;
using namespace sink::testing_variants;

namespace {

// What the generated source defines before the tile operations, for D and the 16-bit type; with `hopper`, the
// Hopper kernels' too (kernels/cuda/tile_sm90.cuh).
std::string tile_prelude(int d, bool half, int threads, bool hopper = false) {
  return "typedef float real;\n" + (half ? kernels::cuda_fp16_storage() : kernels::cuda_bf16_storage()) +
         fmt::format(R"(#define SINK_INF ((real)__int_as_float(0x7f800000))
#define SINK_WGMMA {3}
constexpr int D = {0}, PITCH = D + 8, THREADS = {2};
constexpr bool HALF_MMA = {1}, POSITION_BIAS = false;
constexpr long long PREFIX = 0, WINDOW = 0;
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
const char* kProducts = R"(
extern "C" __global__ void products(const store_t* a, const store_t* b, float* abt, float* ab, float* rows,
                                    float* unused, long long T, long long, long long, long long) {
  __shared__ __align__(16) store_t tile[64][PITCH];
  unsigned fa[D / 16][4];
  load_a_rows(fa, a, 0, T);
  load_tile_async<64, THREADS>(tile, b, 0, 63);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  float s[8][4];
  zero(s);
  mma_abt<64>(s, fa, tile);
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) abt[frag_row(e) * 64 + frag_col(nb, e)] = s[nb][e];
  unsigned sa[4][4];
  as_a<64>(sa, s);
  float o[D / 8][4];
  zero(o);
  mma_ab<64>(o, sa, tile);
  for (int nb = 0; nb < D / 8; ++nb)
    for (int e = 0; e < 4; ++e) ab[frag_row(e) * D + frag_col(nb, e)] = o[nb][e];
  for (int h = 0; h < 2; ++h) {
    float most = -SINK_INF, sum = 0;
    for (int nb = 0; nb < 8; ++nb)
      for (int e = 2 * h; e < 2 * h + 2; ++e) most = r_fmax(most, s[nb][e]), sum += s[nb][e];
    most = quad_max(most), sum = quad_sum(sum);
    if (lane_id() % 4 == 0) rows[frag_row(2 * h) * 2] = most, rows[frag_row(2 * h) * 2 + 1] = sum;
  }
}
)";

// A warpgroup (four warps): A (rows 0..63 of a [rows, D] array; from `rows` on the last) times the 64 rows of B
// through the Hopper kernels' products, S = A B^T with B a K-major swizzled tile, then S rounded to 16 bits times
// the same tile read MN-major: S B.
const char* kHopperProducts = R"(
extern "C" __global__ void hopper_products(const store_t* a, const store_t* b, float* abt, float* ab, float* u1,
                                           float* u2, long long T, long long, long long, long long) {
  struct alignas(1024) Shared {
    store_t tile[64 * D];
  };
  Shared& shared = shared_block<Shared, sizeof(Shared) + 1008>();
  const int row0 = 16 * (threadIdx.x / 32);
  unsigned fa[1][D / 16][4];
  load_a_rows(fa[0], a, row0, T);
  load_tile_async<64, THREADS>(shared.tile, b, 0, 63);
  cp_async_commit();
  await_stage();
  float s[1][8][4];
  for (int nb = 0; nb < 8; ++nb)  // (NaN: issue_abt sets S, whatever its registers held)
    for (int e = 0; e < 4; ++e) s[0][nb][e] = __int_as_float(0x7fc00000);
  issue_abt<64, 1>(s, fa, shared.tile);
  await_products<0>(s);
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) abt[(row0 + frag_row(e)) * 64 + frag_col(nb, e)] = s[0][nb][e];
  unsigned sa[1][4][4];
  as_a<64>(sa[0], s[0]);
  float o[1][D / 8][4];
  zero(o[0]);
  mma_ab<64, 1>(o, sa, shared.tile);
  for (int nb = 0; nb < D / 8; ++nb)
    for (int e = 0; e < 4; ++e) ab[(row0 + frag_row(e)) * D + frag_col(nb, e)] = o[0][nb][e];
}
)";

void launch(const std::string& source, std::string_view symbol, unsigned threads, std::vector<torch::Tensor> args,
            int64_t T, ThreadOrder order = ThreadOrder::Ascending, int arch = 80, unsigned shared_bytes = 0) {
  CpuEmulatedModule module(host_compiled(source), order, arch);
  std::vector<rt::KernelBuffer> buffers;
  for (auto& t : args) buffers.push_back({t.data_ptr(), t.nbytes()});
  const std::array<int64_t, 4> sizes{T, 1, 0, 0};
  module.launch(symbol, {1, 1, threads, shared_bytes}, buffers, sizes);
}

}  // namespace

TEST(CudaTensorCores, FragmentMapsGiveThePlainMatrixProducts) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (bool half : {false, true})
    for (int d : {64, 96, 128}) {
      const auto dtype = half ? torch::kHalf : torch::kBFloat16;
      SCOPED_TRACE(fmt::format("d_head {}, {}", d, c10::toString(dtype)));
      torch::manual_seed(d + half);
      const int64_t rows = 13;  // rows 13..15 of the warp's 16 read row 12
      auto a = torch::randn({rows, d}).to(dtype), b = torch::randn({64, d}).to(dtype);
      auto abt = torch::full({16, 64}, NAN), ab = torch::full({16, d}, NAN), row_stats = torch::full({16, 2}, NAN);
      auto unused = torch::zeros({1});
      launch(tile_prelude(d, half, 32) + kProducts, "products", 32, {a, b, abt, ab, row_stats, unused}, rows);
      auto a16 = torch::cat({a, a.slice(0, rows - 1).expand({16 - rows, d})}).to(torch::kFloat);
      auto want_abt = torch::matmul(a16, b.to(torch::kFloat).t());
      EXPECT_TRUE(torch::allclose(abt, want_abt, 1e-5, 1e-4)) << (abt - want_abt).abs().max();
      // S B from the kernel's own S rounded to 16 bits: the packing, not the rounding, is under test.
      auto want_ab = torch::matmul(abt.to(dtype).to(torch::kFloat), b.to(torch::kFloat));
      EXPECT_TRUE(torch::allclose(ab, want_ab, 1e-5, 1e-3)) << (ab - want_ab).abs().max();
      EXPECT_TRUE(torch::equal(row_stats.select(1, 0), std::get<0>(abt.max(1))));
      EXPECT_TRUE(torch::allclose(row_stats.select(1, 1), abt.sum(1), 1e-5, 1e-3));
    }
}

// The same for the Hopper kernels' products: wgmma's descriptors, the swizzled tile and the warpgroup's
// fragments against LibTorch's products, at d_head 64 and 128 (128-byte swizzle, one and two pieces a row), 96
// (64-byte) and 32 (64-byte, one piece).
TEST(CudaTensorCores, WarpgroupProductsGiveThePlainMatrixProducts) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (bool half : {false, true})
    for (int d : {32, 64, 96, 128}) {
      const auto dtype = half ? torch::kHalf : torch::kBFloat16;
      SCOPED_TRACE(fmt::format("d_head {}, {}", d, c10::toString(dtype)));
      torch::manual_seed(d + half);
      const int64_t rows = 50;  // rows 50..63 of the warpgroup's 64 read row 49
      auto a = torch::randn({rows, d}).to(dtype), b = torch::randn({64, d}).to(dtype);
      auto abt = torch::full({64, 64}, NAN), ab = torch::full({64, d}, NAN), unused = torch::zeros({1});
      launch(tile_prelude(d, half, 128, true) + kHopperProducts, "hopper_products", 128,
             {a, b, abt, ab, unused, unused.clone()}, rows, ThreadOrder::Ascending, 90, 64 * d * 2 + 1008);
      auto a64 = torch::cat({a, a.slice(0, rows - 1).expand({64 - rows, d})}).to(torch::kFloat);
      auto want_abt = torch::matmul(a64, b.to(torch::kFloat).t());
      EXPECT_TRUE(torch::allclose(abt, want_abt, 1e-5, 1e-4)) << (abt - want_abt).abs().max();
      auto want_ab = torch::matmul(abt.to(dtype).to(torch::kFloat), b.to(torch::kFloat));
      EXPECT_TRUE(torch::allclose(ab, want_ab, 1e-5, 1e-3)) << (ab - want_ab).abs().max();
    }
}

// cp.async is a copy that lands at its wait_group: a tile read before the wait reads what was there before,
// and a wait for all but the newest group lands the older one only.
TEST(CudaTensorCores, AsynchronousCopiesLandAtTheirWait) {
  SKIP_WITHOUT_HOST_COMPILER();
  const char* kernel = R"(
extern "C" __global__ void copies(const store_t* a, const store_t* b, float* seen, float* u1, float* u2, float* u3,
                                  long long, long long, long long, long long) {
  __shared__ __align__(16) store_t first[D], second[D];
  for (int e = threadIdx.x; e < D; e += THREADS) first[e] = 7, second[e] = 7;
  __syncthreads();
  for (int c = threadIdx.x; c < D / 8; c += THREADS) cp_async_16(&first[8 * c], a + 8 * c, true);
  cp_async_commit();
  for (int c = threadIdx.x; c < D / 8; c += THREADS) cp_async_16(&second[8 * c], b + 8 * c, c % 2 == 0);
  cp_async_commit();
  if (threadIdx.x == 0) seen[0] = first[0], seen[1] = second[0];
  cp_async_wait<1>();
  if (threadIdx.x == 0) seen[2] = first[0], seen[3] = second[0];
  cp_async_wait<0>();
  __syncthreads();  // (second[8] is thread 1's copy)
  if (threadIdx.x == 0) seen[4] = second[0], seen[5] = second[8];
}
)";
  auto a = torch::full({64}, 100, torch::kShort), b = torch::full({64}, 200, torch::kShort);
  auto seen = torch::full({6}, -1.f), u = torch::zeros({1});
  launch(tile_prelude(64, false, 32) + kernel, "copies", 32, {a, b, seen, u, u.clone(), u.clone()}, 1);
  EXPECT_TRUE(torch::equal(seen, torch::tensor({7.f, 7.f, 100.f, 7.f, 200.f, 0.f}))) << seen;
}

// A warp's collective that only some lanes reach is named, as a divergent __syncthreads is.
TEST(CudaTensorCores, ACollectiveOnlySomeLanesReachIsNamed) {
  SKIP_WITHOUT_HOST_COMPILER();
  const char* kernel = R"(
extern "C" __global__ void divergent(const store_t* a, const store_t* b, float* out, float* u1, float* u2, float* u3,
                                     long long, long long, long long, long long) {
  float v = threadIdx.x;
  if (threadIdx.x < 16) v = shfl_xor(v, 1);
  out[threadIdx.x] = v;
}
)";
  auto a = torch::zeros({8}, torch::kShort), out = torch::zeros({32}), u = torch::zeros({1});
  try {
    launch(tile_prelude(64, false, 32) + kernel, "divergent", 32, {a, a.clone(), out, u, u.clone(), u.clone()}, 1);
    ADD_FAILURE() << "the divergent shuffle went unnoticed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("a warp's collective waited for lanes that had returned"), std::string::npos)
        << e.what();
  }
}

// dg's sums along diagonals (tile.cuh's diagonal_sum): each lane's elements of a 16 x 64 accumulator summed
// per diagonal c - r as backward_keys sums them (row 0 of column block k with row 1 of block k + 1), then
// along the chains of lanes that share a diagonal, added in the chains' first lanes: every diagonal's total.
TEST(CudaTensorCores, DiagonalSumsGiveEveryDiagonalsTotal) {
  SKIP_WITHOUT_HOST_COMPILER();
  const char* kernel = R"(
extern "C" __global__ void diagonals(const store_t* a, const store_t* b, float* m, float* out, float* u1, float* u2,
                                     long long, long long, long long, long long) {
  float v[8][4];
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) v[nb][e] = m[frag_row(e) * 64 + frag_col(nb, e)];
  for (int k = -1; k < 8; ++k)
    for (int e1 = 0; e1 < 2; ++e1) {
      const float total = diagonal_sum((k >= 0 ? v[k][e1] : 0.f) + (k + 1 < 8 ? v[k + 1][2 + e1] : 0.f));
      const int along = 8 * k + 2 * (lane_id() % 4) + e1 - lane_id() / 4;  // c - r, -15..63
      if (diagonal_head()) atomicAdd(&out[along + 15], total);
    }
}
)";
  torch::manual_seed(5);
  auto m = torch::randn({16, 64}), out = torch::zeros({79}), a = torch::zeros({8}, torch::kShort);
  auto u = torch::zeros({1});
  launch(tile_prelude(64, false, 32) + kernel, "diagonals", 32, {a, a.clone(), m, out, u, u.clone()}, 1);
  auto want = torch::zeros({79});
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 64; ++c) want[c - r + 15] += m[r][c];
  EXPECT_TRUE(torch::allclose(out, want, 1e-5, 1e-5)) << (out - want).abs().max();
}
