// A tuning that a kernel takes down (runtime/attention/cuda_tuning.h's failed measurements): a process killed
// while measuring tiles, or a fault that loses the device's context, is recorded in the table, and later tunings
// on that GPU do not measure those tiles again (nor any Hopper tiles, where they were Hopper tiles), so that one
// bad kernel costs one run, not every run. The kernels here launch on a stand-in GPU that computes nothing (each
// launch zeroes its buffers): what is checked is which tiles launch, not what they compute.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kernels/cuda/emit_cuda.h"
#include "kernels/kernel_abi.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/cuda_tuning.h"
#include "runtime/gpu_features.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

constexpr auto kStorage = kernels::CudaStorage::BFloat16;

// Which tiles each source was emitted with, for every source a tuning on compute capability 9.0 loads.
std::map<std::string, kernels::CudaTiles> tiles_by_source(const kernels::KernelSpec& spec) {
  std::map<std::string, kernels::CudaTiles> out;
  for (const auto& c : kernels::cuda_tuning_tiles(spec, kStorage, kernels::kHopperCapability))
    out.emplace(kernels::emit_cuda(spec, kStorage, c), c);
  return out;
}

// What a stand-in launch is shown: its kernel and tiles. It may throw (a refused launch) or end the process.
using OnLaunch = std::function<void(std::string_view symbol, const kernels::CudaTiles& tiles)>;

class StandInModule : public KernelModule {
 public:
  StandInModule(kernels::CudaTiles tiles, std::string gpu, OnLaunch on_launch, std::function<void()> on_sync)
      : tiles_(tiles), gpu_(std::move(gpu)), on_launch_(std::move(on_launch)), on_sync_(std::move(on_sync)) {}
  void launch(std::string_view symbol, LaunchShape, std::span<const KernelBuffer> buffers,
              std::span<const int64_t>) override {
    on_launch_(symbol, tiles_);
    for (const KernelBuffer& b : buffers)
      if (b.data) std::memset(b.data, 0, b.bytes);
  }
  void synchronize() override { on_sync_(); }
  std::string device_name() const override { return gpu_; }

 private:
  kernels::CudaTiles tiles_;
  std::string gpu_;
  OnLaunch on_launch_;
  std::function<void()> on_sync_;
};

// Modules on a stand-in Hopper GPU named `gpu`, measuring, under a loader name of their own (a fresh launcher,
// as in a new process).
KernelModules stand_in_modules(
    const std::string& name, const kernels::KernelSpec& spec, const std::string& gpu, OnLaunch on_launch,
    std::function<void()> on_sync = [] {}) {
  auto sources = std::make_shared<std::map<std::string, kernels::CudaTiles>>(tiles_by_source(spec));
  return {name,
          [=](const std::string& source, const torch::Device&) -> std::shared_ptr<KernelModule> {
            const auto it = sources->find(source);
            const kernels::CudaTiles tiles = it == sources->end() ? kernels::cuda_tiles(spec, kStorage) : it->second;
            return std::make_shared<StandInModule>(tiles, gpu, on_launch, on_sync);
          },
          true, nullptr, [](const torch::Device&) { return kernels::kHopperCapability; }};
}

// One forward of `spec` through a launcher of `modules` (its first: the tuning).
void first_forward(const kernels::KernelSpec& spec, const KernelModules& modules) {
  const int64_t T = 40, D = spec.d_head;
  auto q = torch::zeros({1, 2, T, D}, torch::kBFloat16);
  const auto launcher = cuda_launcher(spec, q, modules);
  launcher->forward(launcher->prepare({q, q.clone(), q.clone(), {}, {}, {}, {}}));
}

// The tiles launched per kernel symbol, as "symbol | tiles".
struct Launches {
  std::shared_ptr<std::set<std::string>> seen = std::make_shared<std::set<std::string>>();
  OnLaunch recorder() const {
    return [seen = seen](std::string_view symbol, const kernels::CudaTiles& t) {
      seen->insert(std::string(symbol) + " | " + t.describe());
    };
  }
  bool any(const std::function<bool(const std::string&)>& which) const {
    return std::any_of(seen->begin(), seen->end(), which);
  }
};

nlohmann::json failures(const KernelCacheHere& cache) {
  std::ifstream in(cache.dir() / "tiles.json");
  const nlohmann::json table = nlohmann::json::parse(in, nullptr, false);
  return table.is_object() && table.contains("failed") ? table.at("failed") : nlohmann::json::array();
}

size_t journals_left(const KernelCacheHere& cache) {
  std::error_code ec;
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(cache.dir() / "measuring", ec)) ++n;
  return n;
}

const kernels::KernelSpec kSoftmax = spec_of({.name = "softmax", .T = 40, .D = 64});

}  // namespace

// A process killed while it measured a candidate's forward (as a kernel that faults the process, or hangs until
// it is stopped, ends it) leaves that candidate out of the next tuning on the GPU, which records why; the other
// candidates are measured as before.
TEST(CudaTuningDeathTest, TilesAProcessDiedMeasuringAreNotMeasuredAgain) {
  GTEST_FLAG_SET(death_test_style, "fast");  // (the child needs the parent's kernel cache folder)
  const HopperKernelsOptedIn opted_in;       // (the Hopper tiles are measured where a user opted in)
  const KernelCacheHere cache("sinklab-tuning-died");
  const auto candidates = kernels::cuda_tile_candidates(kSoftmax, kStorage);
  ASSERT_GE(candidates.size(), 3u);
  const kernels::CudaTiles doomed = candidates[2];
  const OnLaunch dies = [&](std::string_view symbol, const kernels::CudaTiles& t) {
    if (symbol == kernels::abi::kForwardSymbol && t.same_as(doomed)) std::raise(SIGKILL);
  };
  EXPECT_EXIT(first_forward(kSoftmax, stand_in_modules("dies", kSoftmax, "Stand-in H100", dies)),
              ::testing::KilledBySignal(SIGKILL), "");
  EXPECT_EQ(journals_left(cache), 1u) << "the killed process's journal";
  EXPECT_EQ(failures(cache).size(), 0u) << "recorded before the next tuning looked";

  Launches next;
  ::testing::internal::CaptureStderr();
  first_forward(kSoftmax, stand_in_modules("after the crash", kSoftmax, "Stand-in H100", next.recorder()));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(next.any([&](const std::string& s) { return s.ends_with(" | " + doomed.describe()); })) << said;
  EXPECT_TRUE(next.any([&](const std::string& s) { return s.ends_with(" | " + candidates[1].describe()); }));
  EXPECT_TRUE(next.any([&](const std::string& s) { return s.find(", wgmma") != std::string::npos; }))
      << "a crash of mma.sync tiles keeps the Hopper ones";
  EXPECT_NE(said.find("tiles " + doomed.describe() + " not measured"), std::string::npos) << said;
  EXPECT_NE(said.find("the process measuring it ended before the measurement did"), std::string::npos) << said;
  const nlohmann::json failed = failures(cache);
  ASSERT_EQ(failed.size(), 1u) << failed.dump(1);
  EXPECT_EQ(failed[0].at("kernel"), "forward");
  EXPECT_EQ(failed[0].at("gpu"), "Stand-in H100");
  EXPECT_EQ(failed[0].at("key"), tuning_key("Stand-in H100", kSoftmax, kStorage));
  EXPECT_EQ(journals_left(cache), 0u) << "collected, and the second tuning's own removed";
  EXPECT_TRUE(failed_before("Stand-in H100", tuning_key("Stand-in H100", kSoftmax, kStorage), candidates[1]).empty());
}

// A process killed measuring Hopper tiles (here the fused backward_keys) leaves every Hopper candidate out of the
// later tunings on that GPU, of this variant and of others; mma.sync tiles are still measured there, and another
// GPU (which never crashed) still measures the Hopper ones.
TEST(CudaTuningDeathTest, OneHopperCrashLeavesOutEveryHopperTilesOnThatGpu) {
  GTEST_FLAG_SET(death_test_style, "fast");
  // (the Hopper tiles, the fused backward_keys among them, are measured where a user opted in to both)
  const HopperKernelsOptedIn opted_in(sinktest::kFusedBackwardOn90);
  const KernelCacheHere cache("sinklab-tuning-hopper-died");
  const auto hopper_fused = kernels::cuda_hopper_fused_candidates(kSoftmax, kStorage);
  ASSERT_EQ(hopper_fused.size(), 1u);
  const OnLaunch dies = [&](std::string_view symbol, const kernels::CudaTiles& t) {
    if (symbol == kernels::abi::kCudaBackwardKeysSymbol && t.same_as(hopper_fused[0])) std::raise(SIGKILL);
  };
  EXPECT_EXIT(first_forward(kSoftmax, stand_in_modules("hopper dies", kSoftmax, "Stand-in H100", dies)),
              ::testing::KilledBySignal(SIGKILL), "");
  const auto wgmma = [](const std::string& s) { return s.find(", wgmma") != std::string::npos; };
  const kernels::KernelSpec sigmoid =
      spec_of({.name = "sigmoid", .score = call("sigmoid", {var("qk")}), .normalize = "none", .T = 40, .D = 64});
  for (const auto& spec : {kSoftmax, sigmoid}) {
    Launches next;
    ::testing::internal::CaptureStderr();
    first_forward(spec, stand_in_modules("after a Hopper crash", spec, "Stand-in H100", next.recorder()));
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_FALSE(next.any(wgmma)) << spec.describe() << ": " << said;
    EXPECT_TRUE(next.any([](const std::string& s) { return s.find(", wgmma") == std::string::npos; }));
    EXPECT_NE(said.find("no Hopper tiles are measured here since"), std::string::npos) << said;
  }
  Launches elsewhere;
  first_forward(sigmoid, stand_in_modules("another GPU", sigmoid, "Stand-in H200", elsewhere.recorder()));
  EXPECT_TRUE(elsewhere.any(wgmma)) << "another GPU's tuning left the Hopper tiles out";
  EXPECT_EQ(failures(cache).size(), 1u) << failures(cache).dump(1);
}

// A fault that loses the device's context (every later call fails, as after an illegal address) ends the run with
// an error that says what was measured, records it, and the next process skips those tiles. A launch the GPU
// refuses without losing the context (too much shared memory) is skipped for that tuning alone, unrecorded.
TEST(CudaTuning, AFaultThatLosesTheDeviceEndsTheRunAndIsRecorded) {
  const KernelCacheHere cache("sinklab-tuning-lost");
  const auto candidates = kernels::cuda_tile_candidates(kSoftmax, kStorage);
  ASSERT_GE(candidates.size(), 4u);
  const kernels::CudaTiles refused = candidates[1], faulting = candidates[3];
  auto lost = std::make_shared<bool>(false);
  const std::string fault = "CUDA: cuCtxSynchronize failed: an illegal memory access was encountered (700)";
  const OnLaunch launch = [=](std::string_view symbol, const kernels::CudaTiles& t) {
    if (*lost) throw std::runtime_error(fault);
    if (symbol == kernels::abi::kCudaBackwardQueriesSymbol && t.same_as(refused))
      throw std::runtime_error("CUDA: cuLaunchKernel failed: too many resources requested for launch (701)");
    if (symbol == kernels::abi::kCudaBackwardQueriesSymbol && t.same_as(faulting)) *lost = true;
  };
  const auto sync = [=] {
    if (*lost) throw std::runtime_error(fault);
  };
  ::testing::internal::CaptureStderr();
  std::string error;
  EXPECT_FALSE(device_context_lost());
  try {
    first_forward(kSoftmax, stand_in_modules("faults", kSoftmax, "Stand-in H100", launch, sync));
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(error.find("measuring backward_queries with tiles " + faulting.describe()), std::string::npos) << error;
  EXPECT_NE(error.find("lost the device"), std::string::npos) << error;
  EXPECT_NE(error.find("run again"), std::string::npos) << error;
  EXPECT_TRUE(device_context_lost()) << "sinkc run would start the next run on a GPU that cannot run it";
  EXPECT_NE(said.find("too many resources requested for launch"), std::string::npos) << said;
  const nlohmann::json failed = failures(cache);
  ASSERT_EQ(failed.size(), 1u) << failed.dump(1);
  EXPECT_EQ(failed[0].at("kernel"), "backward_queries");
  EXPECT_NE(failed[0].at("why").get<std::string>().find("illegal memory access"), std::string::npos);
  EXPECT_EQ(journals_left(cache), 0u);
  const std::string key = tuning_key("Stand-in H100", kSoftmax, kStorage);
  EXPECT_NE(failed_before("Stand-in H100", key, faulting), "");
  EXPECT_EQ(failed_before("Stand-in H100", key, refused), "") << "a refused launch is not a failure to remember";

  Launches next;
  ::testing::internal::CaptureStderr();
  first_forward(kSoftmax, stand_in_modules("after the fault", kSoftmax, "Stand-in H100", next.recorder()));
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(next.any([&](const std::string& s) { return s.ends_with(" | " + faulting.describe()); }));
  EXPECT_TRUE(next.any([&](const std::string& s) { return s.ends_with(" | " + refused.describe()); }));
  EXPECT_TRUE(remembered_tiles(key).has_value()) << "the second tuning wrote its choice";
}

// A measurement that has not returned after the journal's patience is said once on stderr (a kernel that hangs
// never returns: the process must be stopped, and the next tuning skips the tiles it names).
TEST(CudaTuning, AMeasurementThatHangsIsSaid) {
  const KernelCacheHere cache("sinklab-tuning-hangs");
  const kernels::CudaTiles tiles = kernels::cuda_tiles(kSoftmax, kStorage);
  ::testing::internal::CaptureStderr();
  {
    MeasurementJournal journal("Stand-in H100", "a key", std::chrono::seconds(1));
    journal.measuring("forward", tiles);
    std::this_thread::sleep_for(std::chrono::milliseconds(1600));
    journal.done();
    journal.measuring("backward_keys", tiles);
    journal.done();  // (at once: said of nothing)
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("measuring forward with tiles " + tiles.describe() + " (a key) has taken 1 s"), std::string::npos)
      << said;
  EXPECT_EQ(said.find("measuring backward_keys"), std::string::npos) << said;
  EXPECT_EQ(journals_left(cache), 0u);
  EXPECT_EQ(MeasurementJournal::collect_abandoned(), 0) << "a journal that ended well is no failure";
}

// hopper=off (what gpu-check sets when the warpgroup tile products crash or hang) keeps the tuning from measuring
// Hopper tiles at all, not only from running them; so does leaving SINKLAB_GPU_FEATURES unset while the table's row
// hopper does not let them run (a user's first run never measures, and so never keeps, code that never ran); tune
// measures them.
TEST(CudaTuning, HopperTilesAreMeasuredOnlyWhereAllowed) {
  const KernelCacheHere cache("sinklab-tuning-no-wgmma");
  const auto wgmma = [](const std::string& s) { return s.find(", wgmma") != std::string::npos; };
  Launches zero, unset, tune;
  {
    const sinktest::GpuFeaturesAsked asked("hopper=off");
    first_forward(kSoftmax, stand_in_modules("no wgmma", kSoftmax, "Stand-in H100", zero.recorder()));
  }
  bool allowed_unset = false;
  {
    const sinktest::GpuFeaturesAsked asked("");
    allowed_unset = hopper_kernels_allowed(kernels::kHopperCapability);
    first_forward(kSoftmax, stand_in_modules("wgmma unset", kSoftmax, "Stand-in H100 NVL", unset.recorder()));
  }
  {
    const sinktest::GpuFeaturesAsked asked("hopper=tune");
    EXPECT_TRUE(hopper_kernels_allowed(kernels::kHopperCapability));
    first_forward(kSoftmax, stand_in_modules("wgmma", kSoftmax, "Stand-in H200", tune.recorder()));
  }
  EXPECT_FALSE(zero.any(wgmma));
  EXPECT_TRUE(zero.any([](const std::string& s) { return s.find(" | forward 128x") != std::string::npos; }))
      << "the mma.sync candidates measured";
  const bool row_allows = decide_gpu_feature(kGpuFeatureRows[static_cast<size_t>(GpuFeature::hopper)],
                                             kernels::kHopperCapability, "", kernel_text_hash())
                              .on;
  EXPECT_EQ(allowed_unset, row_allows);
  EXPECT_EQ(unset.any(wgmma), row_allows);
  EXPECT_TRUE(tune.any(wgmma));
}

// The fused backward_keys is measured only where the table (or the override) lets it run: on a GPU of compute
// capability 9.0 fused_backward alone is not enough, its bulk reduction of dQ is a row of its own.
TEST(CudaTuning, FusedCandidatesAreMeasuredOnlyWhereAllowed) {
  const KernelCacheHere cache("sinklab-tuning-no-fused");
  const std::string keys(kernels::abi::kCudaBackwardKeysSymbol);
  const auto fused = [&](const std::string& s) {
    return s.starts_with(keys + " | ") && s.find("fused dQ") != std::string::npos;
  };
  const auto fused_described = kernels::cuda_fused_candidates(kSoftmax, kStorage).front().describe();
  ASSERT_NE(fused_described.find("fused dQ"), std::string::npos) << "how a fused candidate is told apart";
  // Unset, what the table's rows say (today: no GPU check has run either, so no).
  const auto row_on = [](GpuFeature f) {
    return decide_gpu_feature(kGpuFeatureRows[static_cast<size_t>(f)], kernels::kHopperCapability, "",
                              kernel_text_hash())
        .on;
  };
  const bool rows_allow = row_on(GpuFeature::fused_backward) && row_on(GpuFeature::bulk_reduction);
  struct Case {
    const char* features;
    const char* gpu;
    bool measured;
  };
  for (const Case& c : {Case{"", "Stand-in H100 (nothing asked)", rows_allow},
                        Case{"fused_backward", "Stand-in H100 (no bulk reduction)", false},
                        Case{"fused_backward,bulk_reduction", "Stand-in H100 (both)", true}}) {
    SCOPED_TRACE(fmt::format("SINKLAB_GPU_FEATURES='{}'", c.features));
    const sinktest::GpuFeaturesAsked asked(c.features);
    Launches launched;
    first_forward(kSoftmax, stand_in_modules(c.gpu, kSoftmax, c.gpu, launched.recorder()));
    EXPECT_EQ(launched.any(fused), c.measured);
    EXPECT_EQ(fused_backward_allowed(kernels::kHopperCapability), c.measured);
  }
}
