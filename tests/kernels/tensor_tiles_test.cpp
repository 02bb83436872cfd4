// The tensor-core kernels' tile operations (kernels/cuda/tile.cuh) on the CPU emulation, whose warp
// instructions follow the PTX ISA's definitions (tests/kernels/cuda_on_cpu.h): every fragment map checked
// against a plain matrix product. A wrong map in tile.cuh (an ldmatrix address, the accumulator-to-operand
// packing, a fragment's row or column) or in the emulation's reading of the ISA puts elements in the wrong
// place, and the products below disagree with LibTorch's.
#include <gtest/gtest.h>

#include "tests/kernels/cuda_emulator.h"
#include "tests/kernels/tile_products.h"

using namespace sink;
using namespace sink::testing_variants;

namespace {

void launch(const std::string& source, std::string_view symbol, unsigned threads, std::vector<torch::Tensor> args,
            int64_t T, ThreadOrder order = ThreadOrder::Ascending, int arch = 80, unsigned shared_bytes = 0) {
  CpuEmulatedModule module(host_compiled(source), order, arch);
  std::vector<rt::KernelBuffer> buffers;
  for (auto& t : args) buffers.push_back({t.data_ptr(), t.nbytes()});
  const std::array<int64_t, 4> sizes{T, 1, 0, 0};
  module.launch(symbol, {1, 1, threads, shared_bytes}, buffers, sizes);
}

// A one-warp kernel that reads the 16 x 64 matrix m into an accumulator's fragments (v), runs `body` on them (with
// `extra`, a float array, at hand) and writes them to a matrix of the same shape through the same map, returned.
torch::Tensor through_fragments(std::string_view body, const torch::Tensor& m, const torch::Tensor& extra) {
  const std::string kernel = fmt::format(R"(
extern "C" __global__ void through_fragments(const store_t* a, const store_t* b, float* m, float* out, float* extra,
                                             float* unused, long long, long long, long long, long long) {{
  FloatTile<64> v;
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) v.frag[nb][e] = m[frag_row(e) * 64 + frag_col(nb, e)];
  {}
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) out[frag_row(e) * 64 + frag_col(nb, e)] = v.frag[nb][e];
}}
)",
                                         body);
  auto out = torch::zeros({16, 64}), a = torch::zeros({8}, torch::kShort), unused = torch::zeros({1});
  launch(tile_prelude(64, false, 32) + kernel, "through_fragments", 32, {a, a.clone(), m, out, extra, unused}, 1);
  return out;
}

}  // namespace

TEST(CudaTensorCores, FragmentMapsGiveThePlainMatrixProducts) {
  SKIP_WITHOUT_HOST_COMPILER();
  const auto modules = cpu_emulated_modules(ThreadOrder::Ascending, 80);
  for (const TileShape& shape : tile_shapes(false))
    for (const auto& [name, problem] : check_tile_products(modules, torch::kCPU, shape)) EXPECT_EQ(problem, "") << name;
}

// The same for the Hopper kernels' products: wgmma's descriptors, the swizzled tile and the warpgroup's
// fragments against LibTorch's products, at d_head 64 and 128 (128-byte swizzle, one and two pieces a row), 96
// (64-byte) and 32 (64-byte, one piece).
TEST(CudaTensorCores, WarpgroupProductsGiveThePlainMatrixProducts) {
  SKIP_WITHOUT_HOST_COMPILER();
  const auto modules = cpu_emulated_modules(ThreadOrder::Ascending, 90);
  for (const TileShape& shape : tile_shapes(true))
    for (const auto& [name, problem] : check_tile_products(modules, torch::kCPU, shape)) EXPECT_EQ(problem, "") << name;
}

// A misplaced element is named with the place its value belongs to, so that a layout error on a GPU says which.
TEST(CudaTensorCores, ADisagreementNamesWhereEachValueBelongs) {
  const auto want = torch::arange(32, torch::kFloat).reshape({4, 8});
  EXPECT_EQ(disagreement(want.clone(), want, 0, 0), "");
  auto swapped = want.clone();
  swapped[1][2] = want[3][5], swapped[3][5] = want[1][2], swapped[2][0] = 100, swapped[2][1] = NAN;
  EXPECT_EQ(disagreement(swapped, want, 1e-5, 1e-5),
            "4 of 32 elements wrong (1 NaN; largest error inf), rows 1-3, columns 0-2, 5; (1, 2) holds (3, 5)'s "
            "value; (2, 0) = 100, want 16, in no place of the product; (2, 1) = nan, want 17, in no place of the "
            "product; (3, 5) holds (1, 2)'s value");
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
  FloatTile<64> v;
  for (int nb = 0; nb < 8; ++nb)
    for (int e = 0; e < 4; ++e) v.frag[nb][e] = m[frag_row(e) * 64 + frag_col(nb, e)];
  for (int k = -1; k < 8; ++k)
    for (int e1 = 0; e1 < 2; ++e1) {
      const float total = diagonal_sum((k >= 0 ? v.frag[k][e1] : 0.f) + (k + 1 < 8 ? v.frag[k + 1][2 + e1] : 0.f));
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

// FloatTile::scale_row (tile.cuh): row h of each lane's two in a 16 x 64 accumulator times a factor per row, written
// back through the fragment map: every element of row r times factor[r], the other rows untouched.
TEST(CudaTensorCores, ScaleRowScalesExactlyItsRow) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(6);
  auto m = torch::randn({16, 64}), factor = torch::rand({16}) + 0.5;
  // The lower eight rows only, each by its own factor.
  auto out = through_fragments("v.scale_row(1, extra[lane_row(1)]);", m, factor);
  auto want = m.clone();
  for (int64_t r = 8; r < 16; ++r) want[r] *= factor[r];
  EXPECT_TRUE(torch::equal(out, want)) << (out - want).abs().max();
}

// FloatTile::map hands each element its row and column: here value + 100 row + column, against a plain loop.
TEST(CudaTensorCores, MapTileSeesEachElementsRowAndColumn) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(7);
  auto m = torch::randn({16, 64});
  auto out =
      through_fragments("v.map([&](float x, const Element& at) { return x + 100.f * lane_row(at.h) + at.col(); });", m,
                        torch::zeros({1}));
  auto want = m + 100 * torch::arange(16, torch::kFloat).unsqueeze(1) + torch::arange(64, torch::kFloat);
  EXPECT_TRUE(torch::equal(out, want)) << (out - want).abs().max();
}

// FloatTile's set, fill_row and pairs name an element by its row and column, never its registers: set writes
// 100 row + column everywhere; fill_row the lower eight rows from a vector by column, the upper untouched; pairs hands
// each pair of neighbours with its place, written here into a plain matrix that must equal the tile's.
TEST(CudaTensorCores, TileOperationsPlaceEachValueAtItsRowAndColumn) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(9);
  auto m = torch::randn({16, 64});
  auto set = through_fragments("v.set([&](const Element& at) { return 100.f * lane_row(at.h) + at.col(); });", m,
                               torch::zeros({1}));
  const auto rows = torch::arange(16, torch::kFloat).unsqueeze(1), cols = torch::arange(64, torch::kFloat);
  EXPECT_TRUE(torch::equal(set, (100 * rows + cols).expand({16, 64}))) << set;
  auto column_values = torch::randn({64});
  auto filled = through_fragments("v.fill_row(1, [&](int c) { return extra[c]; });", m, column_values);
  auto want = m.clone();
  want.slice(0, 8, 16).copy_(column_values.expand({8, 64}));
  EXPECT_TRUE(torch::equal(filled, want)) << (filled - want).abs().max();
  auto placed = torch::zeros({16, 64});
  through_fragments(
      "v.pairs([&](int r, int c, float x, float y) { extra[r * 64 + c] = x, extra[r * 64 + c + 1] = y; });", m, placed);
  EXPECT_TRUE(torch::equal(placed, m)) << (placed - m).abs().max();
}

// RowMax: each row's maximum, in each of the four lanes that hold the row, against LibTorch's; the maximum is
// placed at every column in turn across the rows, so each of the lane's chains and each lane is the winner once.
TEST(CudaTensorCores, RowMaxIsEachRowsMaximumInEveryLaneOfTheRow) {
  SKIP_WITHOUT_HOST_COMPILER();
  const char* kernel = R"(
extern "C" __global__ void row_maxima(const store_t* a, const store_t* b, float* m, float* out, float* unused,
                                      float* unused2, long long, long long, long long, long long) {
  FloatTile<32> v;
  for (int nb = 0; nb < 4; ++nb)
    for (int e = 0; e < 4; ++e) v.frag[nb][e] = m[frag_row(e) * 32 + frag_col(nb, e)];
  RowMax<32> maxima;
  for (int nb = 0; nb < 4; ++nb)
    for (int e = 0; e < 4; ++e) maxima.add(v.frag[nb][e], Element{e / 2, nb, e});
  for (int h = 0; h < 2; ++h) out[frag_row(2 * h) * 4 + lane_id() % 4] = maxima.of_row(h);
}
)";
  auto a = torch::zeros({8}, torch::kShort), u = torch::zeros({1});
  for (int64_t winner = 0; winner < 32; ++winner) {
    torch::manual_seed(8 + winner);
    auto m = -torch::rand({16, 32}) - 1, out = torch::zeros({16, 4});
    for (int64_t r = 0; r < 16; ++r) m[r][(winner + r) % 32] = 0.5 + r;  // one winner a row, columns all around
    launch(tile_prelude(64, false, 32) + kernel, "row_maxima", 32, {a, a.clone(), m, out, u, u.clone()}, 1);
    const auto want = std::get<0>(m.max(1)).unsqueeze(1).expand({16, 4});
    EXPECT_TRUE(torch::equal(out, want)) << "winner column " << winner << ": " << (out - want).abs().max();
  }
}
