// The tensor-core kernels' tiles as parameters (kernels::cuda_tile_candidates) on the CPU emulation: every candidate
// fits and differs; kernels of three different tiles together (as a tuned launcher runs them) still match the
// reference; the fused backward runs only where runtime/gpu_features.h's table or its override lets it; each kernel
// asks for the shared memory it uses. The tuning's table: cuda_tuning_table_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <thread>

#include "kernels/cuda/emit_cuda.h"
#include "kernels/kernel_abi.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/cuda_tuning.h"
#include "runtime/gpu_features.h"
#include "support/installation.h"
#include "support/remove_tree.h"
#include "tests/gpu_features_asked.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/runtime/attention_oracle_expect.h"
#include "tests/runtime/cuda_tuning_modules.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

// Three variants of different kernels in bf16 and half: a window with k* and v* (k*'s term starts dQ), ALiBi
// with a prefix, the sink logit and a learned table (dg), and sigmoid without normalization at `sigmoid_d`.
std::vector<std::pair<Variant, torch::ScalarType>> three_variants(int64_t sigmoid_d) {
  return {
      {{.name = "softmax, window 50, KV biases", .window = 50, .key_bias = true, .learned_v = true, .T = 150, .D = 64},
       torch::kBFloat16},
      {{.name = "softmax, ALiBi, prefix, sink logit",
        .prefix = 20,
        .position_bias = true,
        .T = 150,
        .D = 96,
        .sink_logit = true,
        .position_grad = true},
       torch::kHalf},
      {{.name = "sigmoid, no norm",
        .score = call("sigmoid", {var("qk")}),
        .normalize = "none",
        .T = 101,
        .D = sigmoid_d},
       torch::kBFloat16},
  };
}

}  // namespace

TEST(CudaKernels, TileCandidatesFitDifferAndStartWithTheDefault) {
  for (int64_t d : {16, 64, 96, 128}) {
    SCOPED_TRACE("d_head " + std::to_string(d));
    const auto spec = spec_of(Variant{.name = "softmax", .D = d});
    const auto candidates = kernels::cuda_tile_candidates(spec, kernels::CudaStorage::BFloat16);
    ASSERT_GE(candidates.size(), 4u);
    ASSERT_LE(candidates.size(), 8u);
    EXPECT_TRUE(candidates[0].same_as(kernels::cuda_tiles(spec, kernels::CudaStorage::BFloat16)));
    for (size_t a = 0; a < candidates.size(); ++a) {
      EXPECT_TRUE(candidates[a].tensor_cores);
      const kernels::CudaSharedBytes bytes = kernels::cuda_shared_bytes(candidates[a], d);
      EXPECT_LE(std::max(bytes.forward, bytes.queries), kernels::kCudaSharedLimit);
      for (size_t b = a + 1; b < candidates.size(); ++b) EXPECT_FALSE(candidates[a].same_as(candidates[b]));
      // Every candidate's source is a different text: each compiles to kernels of its own.
      if (a > 0)
        EXPECT_NE(kernels::emit_cuda(spec, kernels::CudaStorage::BFloat16, candidates[a]),
                  kernels::emit_cuda(spec, kernels::CudaStorage::BFloat16, candidates[0]));
    }
  }
  EXPECT_EQ(
      kernels::cuda_tile_candidates(spec_of(Variant{.name = "softmax", .D = 64}), kernels::CudaStorage::Real).size(),
      1u)
      << "the scalar kernels have one choice";
}

// The forward, dK/dV and dQ from sources of three different tiles, read from the table as a tuned GPU would:
// half tiles with registers for 3 blocks for dK/dV; for the first variant registers for 4 blocks in the forward
// and 32 rows per warp (two fragments) in 128-row blocks for dQ, for the others the wide candidate's key tiles
// in both (128 keys at d_head 64, 64 for dQ at d_head 96: past 48 KiB of shared memory).
TEST(CudaKernels, KernelsOfDifferentTilesTogetherMatchTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-mixed-tiles");
  const auto variants = three_variants(64);
  const KernelModules modules = emulated_modules("mixed tiles", false);
  auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
    return cuda_attention(s, call, modules);
  };
  for (size_t n = 0; n < variants.size(); ++n) {
    const auto& [v, dtype] = variants[n];
    SCOPED_TRACE(v.name);
    const auto spec = spec_of(v);
    const auto storage = dtype == torch::kHalf ? kernels::CudaStorage::Float16 : kernels::CudaStorage::BFloat16;
    const auto candidates = kernels::cuda_tile_candidates(spec, storage);
    ASSERT_EQ(candidates.size(), 8u);
    auto find = [&](auto wanted) {
      const auto it = std::find_if(candidates.begin(), candidates.end(), wanted);
      EXPECT_NE(it, candidates.end());
      return it == candidates.end() ? candidates[0] : *it;
    };
    const kernels::CudaTiles wide = find([&](const kernels::CudaTiles& t) {
      return t.query_keys == 2 * candidates[0].query_keys && t.forward_rows == 64;
    });
    const KernelTiles mixed{n == 0 ? find([](const kernels::CudaTiles& t) { return t.min_blocks == 4; }) : wide,
                            find([&](const kernels::CudaTiles& t) {
                              return t.min_blocks == 3 && t.key_queries == std::max(16, candidates[0].key_queries / 2);
                            }),
                            n == 0 ? find([&](const kernels::CudaTiles& t) {
                              return t.row_frags == 2 && t.query_keys == candidates[0].query_keys;
                            })
                                   : wide};
    ASSERT_EQ(mixed.forward.forward_rows, 64);
    ASSERT_EQ(mixed.keys.key_rows, 64);
    ASSERT_EQ(mixed.queries.query_rows, n == 0 ? 128 : 64);
    if (n > 0) ASSERT_GT(kernels::cuda_shared_bytes(mixed.queries, v.D).queries, 48 * 1024) << wide.describe();
    remember_tiles(tuning_key("CPU emulation", spec, storage), mixed);
    const SixteenBitResult r = measure_sixteen_bit(attend, v, dtype);
    EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
    for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
  }
}

// The fused backward (backward_keys summing dQ too, as a tuned launcher may choose where fused_backward is on)
// against the reference: k*'s term as dQ's start, a learned position table's dg beside the atomics, d_head
// 64/96/128, ragged T, and the first and the last fused candidate (different key blocks and query tiles).
TEST(CudaKernels, FusedBackwardMatchesTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-fused-backward");
  const sinktest::GpuFeaturesAsked asked(sinktest::kFusedBackwardOn90);  // (on sm_90 its bulk reduction too)
  const auto variants = three_variants(128);
  // dQ's share by per-element atomic additions (sm_80) and by the copy engine's bulk reductions (sm_90).
  for (int arch : {80, 90}) {
    const KernelModules modules = emulated_modules(fmt::format("fused backward, sm_{}", arch), false, arch);
    auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
      return cuda_attention(s, call, modules);
    };
    for (size_t n = 0; n < variants.size(); ++n) {
      const auto& [v, dtype] = variants[n];
      const bool last = n > 0;
      SCOPED_TRACE(fmt::format("{}, sm_{}", v.name, arch));
      const auto spec = spec_of(v);
      const auto storage = dtype == torch::kHalf ? kernels::CudaStorage::Float16 : kernels::CudaStorage::BFloat16;
      const auto fused = kernels::cuda_fused_candidates(spec, storage);
      ASSERT_GE(fused.size(), 2u);
      const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
      const kernels::CudaTiles& keys = last ? fused.back() : fused.front();
      ASSERT_TRUE(keys.fused_dq);
      remember_tiles(tuning_key("CPU emulation", spec, storage), KernelTiles{defaults, defaults, defaults, keys});
      const SixteenBitResult r = measure_sixteen_bit(attend, v, dtype);
      EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << "), tiles "
                              << keys.describe();
      for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name << ", " << keys.describe();
      // The fused backward_keys ran, not the two kernels in its place (which would pass as well, and check nothing).
      const std::string in_use = cuda_launcher(spec, torch::zeros({1, 1, v.T, v.D}, dtype), modules)->kernels_in_use();
      EXPECT_NE(in_use.find("fused dQ"), std::string::npos) << in_use;
    }
  }
}

// SINKLAB_GPU_FEATURES's fused_backward overrides the table: force runs a fused backward where none was measured
// faster (no backward_queries launch), off runs the two backward kernels where the table has a fused one; right both
// ways.
TEST(CudaKernels, FusedBackwardCanBeForcedOnOrOff) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-fused-choice");
  const auto [v, dtype] = three_variants(64)[0];
  const auto spec = spec_of(v);
  const auto storage = kernels::CudaStorage::BFloat16;
  const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
  std::map<std::string, int> launches;
  const KernelModules modules = watched_modules(
      "fused on or off", [&](std::string_view symbol, LaunchShape&) { ++launches[std::string(symbol)]; });
  auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
    return cuda_attention(s, call, modules);
  };
  const std::string queries(kernels::abi::kCudaBackwardQueriesSymbol), keys(kernels::abi::kCudaBackwardKeysSymbol);
  for (const char* setting : {"fused_backward=force", "fused_backward=off"}) {
    SCOPED_TRACE(std::string("SINKLAB_GPU_FEATURES=") + setting);
    const bool on = std::string(setting).ends_with("=force");
    // The table says the opposite of the setting.
    KernelTiles table{defaults, defaults, defaults};
    if (!on) table.fused = kernels::cuda_fused_candidates(spec, storage).back();
    remember_tiles(tuning_key("CPU emulation", spec, storage), table);
    launches.clear();
    SixteenBitResult r;
    {
      const sinktest::GpuFeaturesAsked asked(setting);
      r = measure_sixteen_bit(attend, v, dtype);
    }
    EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
    for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
    EXPECT_GT(launches[keys], 0);
    EXPECT_EQ(launches[queries] > 0, !on) << launches[queries] << " launches of " << queries;
  }
}

// The fused backward_keys is opt-in (runtime/gpu_features.h's row fused_backward) until a GPU check has run it:
// where SINKLAB_GPU_FEATURES does not name it, a tuning measures no fused candidate, and a fused choice the table
// holds does not run (the two backward kernels do), unless the row itself lets it (today it does not); with
// fused_backward=off the same whatever the row says; with fused_backward the tuning measures the fused candidates
// and the table's fused choice runs. (On compute capability 8.0: no bulk reduction is involved.)
TEST(CudaKernels, FusedBackwardIsMeasuredAndRunOnlyWhereAllowed) {
  SKIP_WITHOUT_HOST_COMPILER();
  const Variant v{.name = "softmax", .T = 40, .D = 64};
  const auto spec = spec_of(v);
  const auto storage = kernels::CudaStorage::BFloat16;
  const std::string key = tuning_key("CPU emulation", spec, storage);
  const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
  const kernels::CudaTiles fused = kernels::cuda_fused_candidates(spec, storage).back();
  ASSERT_TRUE(fused.fused_dq);
  const std::string queries(kernels::abi::kCudaBackwardQueriesSymbol);
  const bool row_allows =
      decide_gpu_feature(kGpuFeatureRows[static_cast<size_t>(GpuFeature::fused_backward)], 80, "", kernel_text_hash())
          .on;
  struct Setting {
    const char* features;  // SINKLAB_GPU_FEATURES ("": unset)
    bool runs, tune;
  };
  int n = 0;
  for (const Setting& setting : {Setting{"", row_allows, true}, Setting{"fused_backward=off", false, false},
                                 Setting{"fused_backward", true, true}}) {
    SCOPED_TRACE(fmt::format("SINKLAB_GPU_FEATURES='{}'", setting.features));
    const KernelCacheHere cache(fmt::format("sinklab-fused-allowed-{}", n++));
    const sinktest::GpuFeaturesAsked asked(setting.features);
    EXPECT_EQ(fused_backward_allowed(80), setting.runs);
    if (setting.tune) {
      // A tuning, and which sources it loads: a fused candidate's is printed with FUSED_DQ true.
      auto fused_loads = std::make_shared<int>(0);
      const KernelModules tuning{
          fmt::format("fused allowed, tuning '{}'", setting.features),
          [fused_loads](const std::string& source, const torch::Device&) -> std::shared_ptr<KernelModule> {
            if (source.find("constexpr bool FUSED_DQ = true;") != std::string::npos) ++*fused_loads;
            return std::make_shared<CpuEmulatedModule>(host_compiled(source), ThreadOrder::Ascending, 80);
          },
          true, nullptr, [](const torch::Device&) { return 80; }};
      ::testing::internal::CaptureStderr();
      const SixteenBitResult tuned = measure_sixteen_bit(
          [&](const kernels::KernelSpec& s, const AttentionCall& call) { return cuda_attention(s, call, tuning); }, v,
          torch::kBFloat16);
      const std::string said = ::testing::internal::GetCapturedStderr();
      EXPECT_TRUE(tuned.passed()) << "forward " << tuned.forward << " (< " << tuned.forward_allowed << ")";
      EXPECT_EQ(*fused_loads > 0, setting.runs) << *fused_loads << " fused sources loaded; " << said;
      const auto remembered = remembered_tiles(key);
      ASSERT_TRUE(remembered.has_value()) << "the tuning wrote nothing";
      EXPECT_EQ(remembered->seconds.count("fused_backward_keys") > 0, setting.runs) << "a fused backward measured";
      if (!setting.runs) EXPECT_FALSE(remembered->fused.has_value()) << remembered->fused->describe();
    }
    // A table whose choice is a fused backward_keys (as a tuning that measured it, or another sinklab, wrote it).
    const KernelTiles table{defaults, defaults, defaults, fused};
    remember_tiles(key, table);
    const auto runs = fused_backward(table, spec, storage, 80);
    EXPECT_EQ(runs.has_value(), setting.runs);
    if (runs) EXPECT_TRUE(runs->same_as(fused)) << runs->describe();
    std::map<std::string, int> launches;
    const KernelModules modules =
        watched_modules(fmt::format("fused allowed, table '{}'", setting.features),
                        [&](std::string_view symbol, LaunchShape&) { ++launches[std::string(symbol)]; });
    const SixteenBitResult r = measure_sixteen_bit(
        [&](const kernels::KernelSpec& s, const AttentionCall& call) { return cuda_attention(s, call, modules); }, v,
        torch::kBFloat16);
    EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
    for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
    EXPECT_EQ(launches[queries] == 0, setting.runs) << launches[queries] << " launches of " << queries;
  }
}

// The tensor-core kernels keep their tiles in dynamic shared memory, whose size only the launch gives (on a GPU a
// kernel that used more would read and write past its block's). Asked for exactly what the launcher asks, every
// test above passes; asked for 16 bytes less, each kernel stops on the emulation, naming both sizes. At d_head
// 128 the forward's 64-key tiles take past the 48 KiB a static array may.
TEST(CudaKernels, TensorCoreKernelsUseTheSharedMemoryTheirLaunchAsksFor) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-shared-memory");
  const Variant v{.name = "softmax", .T = 40, .D = 128};
  const auto spec = spec_of(v);
  const kernels::CudaTiles tiles = kernels::cuda_tiles(spec, kernels::CudaStorage::BFloat16);
  const kernels::CudaSharedBytes bytes = kernels::cuda_shared_bytes(tiles, v.D);
  EXPECT_GT(bytes.forward, 48 * 1024) << tiles.describe();
  EXPECT_GT(bytes.queries, 0);
  EXPECT_EQ(kernels::cuda_shared_bytes(kernels::cuda_tiles(spec, kernels::CudaStorage::Real), v.D).forward, 0)
      << "the scalar kernels' arrays are static";
  const KernelModules modules = watched_modules("short shared memory", [](std::string_view, LaunchShape& shape) {
    if (shape.shared_bytes > 0) shape.shared_bytes -= 16;
  });
  auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
    return cuda_attention(s, call, modules);
  };
  try {
    measure_sixteen_bit(attend, v, torch::kBFloat16);
    ADD_FAILURE() << "a forward with too little shared memory ran";
  } catch (const std::exception& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(fmt::format("it uses {} bytes of dynamic shared memory, its launch asked for {}",
                                       bytes.forward, bytes.forward - 16)),
              std::string::npos)
        << message;
  }
}
