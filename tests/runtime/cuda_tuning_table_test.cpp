// The tuning's table on the CPU emulation (runtime/attention/cuda_tuning.h): a launcher told to tune measures, writes
// its choice to the table, and a later one reads it; a candidate whose results or row statistics differ from the
// default tiles' is not kept; a GPU older than the tensor-core kernels runs the scalar ones; the shipped table answers
// what this machine has not measured, read whole; an entry measured on other kernels is not read.
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

// A launcher whose loader tunes measures every candidate on its first forward (on the emulation the times
// mean nothing, but the choice is one of the candidates and the results stay right), writes the choice to
// the table under this device, this variant and this storage, and a second process's lookup reads it. A
// candidate that fails to launch is said and skipped (here the wide candidate's 72 KiB at d_head 64, on a
// "GPU" that gives a block 48).
TEST(CudaKernels, TuningWritesItsChoiceForTheNextProcess) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-tuning");
  // (the Hopper tiles and the fused backward_keys measured beside the others, as an opted-in H100 does)
  const HopperKernelsOptedIn opted_in(sinktest::kFusedBackwardOn90);
  const Variant v{
      .name = "sigmoid, no norm", .score = call("sigmoid", {var("qk")}), .normalize = "none", .T = 40, .D = 64};
  const auto spec = spec_of(v);
  const std::string key = tuning_key("CPU emulation", spec, kernels::CudaStorage::Float16);
  EXPECT_FALSE(remembered_tiles(key).has_value());
  const auto every = kernels::cuda_tile_candidates(spec, kernels::CudaStorage::Float16);
  ASSERT_TRUE(std::any_of(every.begin(), every.end(), [&](const kernels::CudaTiles& c) {
    return kernels::cuda_shared_bytes(c, v.D).forward > 48 * 1024;
  })) << "no candidate past 48 KiB to fail";
  // A Hopper "GPU" that gives a block 48 KiB of shared memory: a launch asking for more fails.
  const KernelModules modules = watched_modules(
      "tuning",
      [](std::string_view symbol, LaunchShape& shape) {
        if (shape.shared_bytes > 48 * 1024)
          throw std::runtime_error(fmt::format("{} asks for {} bytes of shared memory a block; this GPU gives 49152",
                                               symbol, shape.shared_bytes));
      },
      true, 90);
  auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
    return cuda_attention(s, call, modules);
  };
  ::testing::internal::CaptureStderr();
  const SixteenBitResult r = measure_sixteen_bit(attend, v, torch::kHalf);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
  EXPECT_NE(said.find("forward with tiles"), std::string::npos) << said;
  EXPECT_NE(said.find("this GPU gives 49152"), std::string::npos) << said;
  EXPECT_NE(said.find(", wgmma, overlapped skipped"), std::string::npos) << "the Hopper kernels measured too: " << said;
  const auto remembered = remembered_tiles(key);
  ASSERT_TRUE(remembered.has_value()) << "nothing in " << (cache.dir() / "tiles.json").string();
  EXPECT_LE(kernels::cuda_shared_bytes(remembered->forward, v.D).forward, 48 * 1024) << remembered->forward.describe();
  EXPECT_LE(kernels::cuda_shared_bytes(remembered->queries, v.D).queries, 48 * 1024) << remembered->queries.describe();
  const auto candidates = kernels::cuda_tuning_tiles(spec, kernels::CudaStorage::Float16);  // (fused ones too)
  for (const auto* chosen : {&remembered->forward, &remembered->keys, &remembered->queries})
    EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [&](const kernels::CudaTiles& c) {
      return c.same_as(*chosen) && !c.fused_dq;
    })) << chosen->describe();
  if (remembered->fused)  // (where the emulation's times made a fused backward_keys the faster)
    EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [&](const kernels::CudaTiles& c) {
      return c.same_as(*remembered->fused) && c.fused_dq;
    })) << remembered->fused->describe();
  // What the measurement found is in the table: each kernel's seconds, the fused backward_keys's among them.
  for (const char* kernel : {"forward", "backward_keys", "backward_queries", "fused_backward_keys"})
    EXPECT_GT(remembered->seconds.count(kernel) ? remembered->seconds.at(kernel) : 0.0, 0.0) << kernel;
  // A table that is not one reads as empty (and is measured again), never as an error.
  std::ofstream(cache.dir() / "tiles.json") << "not json";
  EXPECT_FALSE(remembered_tiles(key).has_value());
}

// A tuning candidate whose results differ from the default tiles' is never kept, however fast. Here every fused
// backward_keys loses dQ's share (its additions removed, as a GPU might behave where no emulation looked), and
// backward_queries is slowed until a fused backward would win on time: the tuning says each fused candidate was
// skipped, keeps the two kernels, and training stays right.
TEST(CudaKernels, TuningKeepsNoCandidateWhoseResultsDiffer) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-tuning-wrong");
  const sinktest::GpuFeaturesAsked asked("fused_backward");  // (the fused candidates measured)
  const Variant v{.name = "softmax", .T = 40, .D = 64};
  const auto spec = spec_of(v);
  const auto storage = kernels::CudaStorage::BFloat16;
  const std::string add = "red_add_pair(&dq_sum";
  const Watch slow_queries = [](std::string_view symbol, LaunchShape&) {
    if (symbol == kernels::abi::kCudaBackwardQueriesSymbol) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  const KernelModules modules{"tuning, fused backward without dQ",
                              [&](const std::string& source, const torch::Device&) -> std::shared_ptr<KernelModule> {
                                std::string wrong = source;
                                if (wrong.find("constexpr bool FUSED_DQ = true;") != std::string::npos) {
                                  const size_t at = wrong.find(add);
                                  if (at == std::string::npos) throw std::logic_error("no dQ addition to remove");
                                  wrong.replace(at, add.size(), "drop_pair(&dq_sum");
                                  wrong =
                                      "__device__ __forceinline__ void drop_pair(float*, float, float) {}\n" + wrong;
                                }
                                return std::make_shared<WatchedModule>(host_compiled(wrong), slow_queries, 80);
                              },
                              true};
  auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
    return cuda_attention(s, call, modules);
  };
  ::testing::internal::CaptureStderr();
  const SixteenBitResult r = measure_sixteen_bit(attend, v, torch::kBFloat16);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
  for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
  EXPECT_NE(said.find("fused backward_keys with tiles"), std::string::npos) << said;
  EXPECT_NE(said.find("its results differ from the default tiles'"), std::string::npos) << said;
  const auto remembered = remembered_tiles(tuning_key("CPU emulation", spec, storage));
  ASSERT_TRUE(remembered.has_value());
  EXPECT_FALSE(remembered->fused.has_value()) << remembered->fused->describe();
  EXPECT_EQ(remembered->seconds.count("fused_backward_keys"), 0u) << "a skipped candidate's time was kept";
  EXPECT_GT(remembered->seconds.count("backward_queries") ? remembered->seconds.at("backward_queries") : 0.0, 0.3)
      << "backward_queries was not slowed: the fused candidates were not the faster";
}

// A forward candidate whose row statistics differ from the default tiles' is never kept either, though its output
// is right: the backward reads the statistics. Here each candidate's source but the default tiles' writes one of a
// row's two statistics wrong, every other candidate Z (doubled), the others the second (the running maximum, moved by
// 100), O untouched: the tuning says each of those forward candidates was skipped, keeps the default forward, and
// training stays right. (Each statistic is compared apart: either one wrong is caught.)
TEST(CudaKernels, TuningKeepsNoForwardWhoseRowStatisticsDiffer) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-tuning-statistics");
  const Variant v{.name = "softmax", .T = 40, .D = 64};
  const auto spec = spec_of(v);
  const auto storage = kernels::CudaStorage::BFloat16;
  const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
  const std::string default_source = kernels::emit_cuda(spec, storage, defaults);
  // (kernels/cuda/forward.cuh's one write of a row's statistics)
  const std::string written =
      "stats[rows.row[f][h]] = finished.divisor, stats[T + rows.row[f][h]] = finished.shift_or_sum;";
  const std::string wrong_writes[] = {
      "stats[rows.row[f][h]] = finished.divisor * (real)2, stats[T + rows.row[f][h]] = finished.shift_or_sum;",
      "stats[rows.row[f][h]] = finished.divisor, stats[T + rows.row[f][h]] = finished.shift_or_sum + (real)100;"};
  ASSERT_NE(default_source.find(written), std::string::npos) << "the forward no longer writes its statistics so";
  // Each tile candidate's source (but the default tiles') as this test changes it.
  auto changed = std::make_shared<std::map<std::string, std::string>>();
  std::vector<kernels::CudaTiles> wrong;
  for (const auto& c : kernels::cuda_tile_candidates(spec, storage)) {
    if (c.same_as(defaults)) continue;
    std::string source = kernels::emit_cuda(spec, storage, c);
    ASSERT_NE(source, default_source) << c.describe();
    source.replace(source.find(written), written.size(), wrong_writes[wrong.size() % 2]);
    changed->emplace(kernels::emit_cuda(spec, storage, c), std::move(source));
    wrong.push_back(c);
  }
  ASSERT_GE(wrong.size(), 2u) << "a candidate of each wrong statistic";
  auto default_loads = std::make_shared<int>(0);
  const auto load = [=](const std::string& source, const torch::Device&) -> std::shared_ptr<KernelModule> {
    if (source == default_source) ++*default_loads;
    const auto it = changed->find(source);
    return std::make_shared<CpuEmulatedModule>(host_compiled(it == changed->end() ? source : it->second),
                                               ThreadOrder::Ascending, 80);
  };
  const KernelModules modules{"tuning, forward statistics wrong", load, true, nullptr,
                              [](const torch::Device&) { return 80; }};
  ::testing::internal::CaptureStderr();
  const SixteenBitResult r = measure_sixteen_bit(
      [&](const kernels::KernelSpec& s, const AttentionCall& call) { return cuda_attention(s, call, modules); }, v,
      torch::kBFloat16);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_GT(*default_loads, 0) << "the default tiles' source was never loaded as this test printed it";
  EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
  for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
  for (size_t k = 0; k < wrong.size(); ++k) {
    const std::string skipped = "forward with tiles " + wrong[k].describe() + " skipped: its results differ";
    EXPECT_NE(said.find(skipped), std::string::npos)
        << (k % 2 ? "the running maximum" : "Z") << " wrong, not caught: " << skipped << "\nnot in:\n"
        << said;
  }
  const auto remembered = remembered_tiles(tuning_key("CPU emulation", spec, storage));
  ASSERT_TRUE(remembered.has_value());
  EXPECT_TRUE(remembered->forward.same_as(defaults)) << remembered->forward.describe();
}

// A GPU older than the tensor-core kernels (a T4, compute capability 7.5: no bf16 mma.sync m16n8k16, no
// cp.async) runs bf16 on the scalar kernels, right against the reference, and says so once; the same variant on
// an sm_80 "GPU" runs on tensor cores.
TEST(CudaKernels, AGpuOlderThanTheTensorCoreKernelsRunsTheScalarOnes) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-old-gpu");
  const Variant v{.name = "softmax", .T = 40, .D = 64};
  const auto spec = spec_of(v);
  const auto on_a_gpu_of = [&](int capability) {
    KernelModules modules = emulated_modules(fmt::format("capability {}", capability), false);
    modules.capability = [capability](const torch::Device&) { return capability; };
    return modules;
  };
  const KernelModules t4 = on_a_gpu_of(75), a100 = on_a_gpu_of(80);
  const auto q = torch::zeros({1, 1, v.T, v.D}, torch::kBFloat16);
  ::testing::internal::CaptureStderr();
  const std::string on_t4 = cuda_launcher(spec, q, t4)->description();
  const SixteenBitResult r = measure_sixteen_bit(
      [&](const kernels::KernelSpec& s, const AttentionCall& call) { return cuda_attention(s, call, t4); }, v,
      torch::kBFloat16);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(on_t4, "cuda bf16");
  EXPECT_EQ(cuda_launcher(spec, q, a100)->description(), "cuda-tensor bf16");
  EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
  EXPECT_NE(said.find("compute capability 7.5; the tensor-core kernels need 8.0 or newer"), std::string::npos) << said;
  const auto tiles = kernels::cuda_tiles(spec, kernels::CudaStorage::BFloat16, 75);
  EXPECT_FALSE(tiles.tensor_cores);
  EXPECT_TRUE(kernels::cuda_tiles(spec, kernels::CudaStorage::BFloat16, 90).tensor_cores);
  EXPECT_TRUE(kernels::cuda_tiles(spec, kernels::CudaStorage::BFloat16).tensor_cores) << "unknown: assumed new";
}

// The table sinklab ships (data/tuning/tiles.json) answers a key the kernel cache's table lacks; a measurement
// made here (the cache's table) wins over it. Without a GPU or the emulation: the lookup alone.
TEST(CudaKernels, ShippedTilesAnswerWhatThisMachineHasNotMeasured) {
  const KernelCacheHere cache("sinklab-shipped-tiles");
  const auto home = std::filesystem::temp_directory_path() / ("sinklab-shipped-tiles-" + std::to_string(getpid()));
  std::filesystem::create_directories(home / "data" / "tuning");
  const std::string key = "Test GPU | a variant | bf16 storage | d_head 64";
  const auto tiles_json = [](int forward_keys, int min_blocks) {
    return nlohmann::json{
        {"forward_rows", 64}, {"forward_keys", forward_keys}, {"key_rows", 64}, {"key_queries", 32}, {"query_rows", 64},
        {"query_keys", 32},   {"min_blocks", min_blocks},     {"row_frags", 1}};
  };
  nlohmann::json shipped;
  shipped[key] = {{"kernels", kernel_text_hash()},
                  {"forward", tiles_json(128, 2)},
                  {"backward_keys", tiles_json(64, 3)},
                  {"backward_queries", tiles_json(64, 1)}};
  // The same tiles measured on other kernels: not these kernels' tiles.
  const std::string stale_key = "Test GPU | a stale variant | bf16 storage | d_head 64";
  shipped[stale_key] = shipped[key];
  shipped[stale_key]["kernels"] = "0123456789abcdef";
  std::ofstream(home / "data" / "tuning" / "tiles.json") << shipped.dump();
  const char* before = std::getenv("SINKLAB_HOME");
  const std::string old_home = before ? before : "";
  setenv("SINKLAB_HOME", home.c_str(), 1);
  const auto from_shipped = remembered_tiles(key);
  const bool stale_answered = remembered_tiles(stale_key).has_value();
  const char* tune_before = std::getenv("SINKLAB_TUNE");
  const std::string old_tune = tune_before ? tune_before : "";
  setenv("SINKLAB_TUNE", "1", 1);  // measure here: the shipped table does not answer
  const bool shipped_answered_tune_1 = remembered_tiles(key).has_value();
  if (old_tune.empty())
    unsetenv("SINKLAB_TUNE");
  else
    setenv("SINKLAB_TUNE", old_tune.c_str(), 1);
  EXPECT_FALSE(remembered_tiles("Test GPU | another variant | bf16 storage | d_head 64").has_value());
  // Measured here: the cache's table answers from now on.
  KernelTiles measured = from_shipped.value_or(KernelTiles{});
  measured.forward.forward_keys = 32;
  remember_tiles(key, measured);
  const auto after_measuring = remembered_tiles(key);
  if (old_home.empty())
    unsetenv("SINKLAB_HOME");
  else
    setenv("SINKLAB_HOME", old_home.c_str(), 1);
  sink::remove_tree(home);
  ASSERT_TRUE(from_shipped.has_value()) << "the shipped table was not read";
  EXPECT_EQ(from_shipped->forward.forward_keys, 128);
  EXPECT_EQ(from_shipped->forward.min_blocks, 2);
  EXPECT_EQ(from_shipped->keys.min_blocks, 3);
  EXPECT_TRUE(from_shipped->forward.tensor_cores);
  EXPECT_FALSE(shipped_answered_tune_1) << "SINKLAB_TUNE=1 should pass over the shipped table";
  EXPECT_FALSE(stale_answered) << "the shipped table answered with tiles measured on other kernels";
  ASSERT_TRUE(after_measuring.has_value());
  EXPECT_EQ(after_measuring->forward.forward_keys, 32);
}

// Every entry of the table this tree ships reads as tiles, each within the shared memory every GPU from sm_80
// on gives a block, under a key of the form tuning_key writes. As shipped, an entry answers where it was measured at
// these kernels (its "kernels" is kernel_text_hash()) and nowhere else; its tiles are read here as if it had been (a
// copy stamped with this hash, in the cache's table, which answers first).
TEST(CudaKernels, TheShippedTilesTableReadsWhole) {
  const KernelCacheHere cache("sinklab-shipped-table");  // an empty cache: every answer is the shipped table's
  const auto path = shipped_tuning_table();
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no shipped table at " << path.string();
  const nlohmann::json table = nlohmann::json::parse(in);
  ASSERT_FALSE(table.empty());
  for (const auto& [key, entry] : table.items())
    EXPECT_EQ(remembered_tiles(key).has_value(), entry.value("kernels", std::string()) == kernel_text_hash()) << key;
  nlohmann::json stamped = table;
  for (auto& entry : stamped) entry["kernels"] = kernel_text_hash();
  std::filesystem::create_directories(cache.dir());
  std::ofstream(tuning_table_path()) << stamped.dump();
  const std::regex key_form(R"((.+) \| (.+) \| (bf16|half) storage \| d_head (\d+))");
  for (const auto& [key, entry] : table.items()) {
    std::smatch parts;
    ASSERT_TRUE(std::regex_match(key, parts, key_form)) << key;
    const auto tiles = remembered_tiles(key);
    ASSERT_TRUE(tiles.has_value()) << key;
    const int64_t d = std::stoll(parts[4]);
    EXPECT_LE(kernels::cuda_shared_bytes(tiles->forward, d).forward, kernels::kCudaSharedLimit) << key;
    EXPECT_LE(kernels::cuda_shared_bytes(tiles->queries, d).queries, kernels::kCudaSharedLimit) << key;
  }
}

// An entry of the table measured on other kernel text (its "kernels" another hash, or none, as every sinklab before
// the hash wrote) is not these kernels' tiles: remembered_tiles does not return it, and a launcher runs the default
// tiles; the same entry at kernel_text_hash() is read, and run. Written by hand, under the key a launcher on the
// emulation looks up.
TEST(CudaKernels, TilesRememberedForOtherKernelsAreNotReused) {
  const KernelCacheHere cache("sinklab-tuning-other-kernels");
  const Variant v{.name = "softmax", .T = 40, .D = 64};
  const auto spec = spec_of(v);
  const auto storage = kernels::CudaStorage::BFloat16;
  const std::string key = tuning_key("CPU emulation", spec, storage);
  const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
  const auto candidates = kernels::cuda_tile_candidates(spec, storage);
  const auto described = [](const kernels::CudaTiles& t) { return describe_kernels(KernelTiles{t, t, t}, {}); };
  const auto other = std::find_if(candidates.begin(), candidates.end(),
                                  [&](const kernels::CudaTiles& c) { return described(c) != described(defaults); });
  ASSERT_NE(other, candidates.end()) << "no candidate whose kernels are told apart from the default tiles'";
  const kernels::CudaTiles measured = *other;
  // The table holding `measured` for every kernel, at kernel text `hash` (none where nullopt): as remember_tiles
  // writes it, the hash then changed.
  const auto write_table = [&](const std::optional<std::string>& hash) {
    std::filesystem::remove(tuning_table_path());
    remember_tiles(key, KernelTiles{measured, measured, measured});
    nlohmann::json table = nlohmann::json::parse(std::ifstream(tuning_table_path()));
    nlohmann::json& entry = table.at(key);
    entry.erase("kernels");
    if (hash) entry["kernels"] = *hash;
    std::ofstream(tuning_table_path()) << table.dump(1);
  };
  std::string other_hash = kernel_text_hash();
  other_hash.back() = other_hash.back() == '0' ? '1' : '0';
  write_table(other_hash);
  EXPECT_FALSE(remembered_tiles(key).has_value()) << "tiles measured at kernel text " << other_hash << " reused";
  write_table(std::nullopt);
  EXPECT_FALSE(remembered_tiles(key).has_value()) << "tiles measured before the kernel text was recorded reused";
  write_table(kernel_text_hash());
  const auto read = remembered_tiles(key);
  ASSERT_TRUE(read.has_value()) << "tiles measured at these kernels were not read";
  EXPECT_TRUE(read->forward.same_as(measured)) << read->forward.describe();
  EXPECT_TRUE(read->keys.same_as(measured)) << read->keys.describe();
  EXPECT_TRUE(read->queries.same_as(measured)) << read->queries.describe();
  EXPECT_FALSE(read->fused.has_value());

  // What a launcher runs from each table (launchers are kept per loader name: a fresh one for each).
  SKIP_WITHOUT_HOST_COMPILER();
  const auto q = torch::zeros({1, 1, v.T, v.D}, torch::kBFloat16);
  const auto runs = [&](const std::string& name) {
    return cuda_launcher(spec, q, emulated_modules("other kernels' tiles, " + name, false))->kernels_in_use();
  };
  write_table(other_hash);
  const std::string from_other = runs("another hash");
  write_table(kernel_text_hash());
  const std::string from_these = runs("this hash");
  EXPECT_TRUE(from_other.ends_with(": " + described(defaults))) << from_other;
  EXPECT_TRUE(from_these.ends_with(": " + described(measured))) << from_these;
}
