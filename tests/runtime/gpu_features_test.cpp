// The GPU feature table (runtime/gpu_features.h) and its one override, SINKLAB_GPU_FEATURES: a row runs by default
// only on the compute capability a GPU check ran it on and at the kernel text it ran at; the override turns a row on,
// off or into a mode, and a name or mode it does not know is an error that lists the table. The rules on made-up rows
// (a table row as a GPU check would have left it), then the table as it stands, then what the runtime reads from the
// environment (gpu_feature, and the attention's fused backward and Hopper kernels built on it).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "runtime/attention/cuda_tuning.h"
#include "runtime/gpu_features.h"
#include "tests/gpu_features_asked.h"

using namespace sink::rt;

// (a namespace of its own: the tests compile in batches of several files, SINKLAB_UNITY_TESTS)
namespace gpu_features_test {

constexpr std::string_view kTheseKernels = "0123456789abcdef", kOtherKernels = "fedcba9876543210";

// The table's row of `feature` as a GPU check would have left it: run on compute capability `ran_on` (0: never) at
// kernel text `hash`.
GpuFeatureRow row_that_ran(GpuFeature feature, int ran_on, std::string_view hash) {
  GpuFeatureRow row = kGpuFeatureRows[static_cast<size_t>(feature)];
  row.ran_on = ran_on;
  row.kernel_hash = hash;
  return row;
}

// The error `override_text` draws deciding `row`; "" where it draws none.
std::string override_error(const GpuFeatureRow& row, std::string_view override_text) {
  try {
    decide_gpu_feature(row, 90, override_text, kTheseKernels);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(GpuFeatures, ARowNoGpuRanIsOffUnlessAskedFor) {
  const GpuFeatureRow never = row_that_ran(GpuFeature::step_kernels, 0, "");
  const FeatureDecision unasked = decide_gpu_feature(never, 90, "", kTheseKernels);
  EXPECT_FALSE(unasked.on) << unasked.why;
  EXPECT_NE(unasked.why.find("SINKLAB_GPU_FEATURES=step_kernels"), std::string::npos)
      << "the log says how to opt in: " << unasked.why;
  for (const char* asked : {"step_kernels", "step_kernels=on", "step_kernels=1", "cuda_graph, step_kernels"}) {
    const FeatureDecision d = decide_gpu_feature(never, 90, asked, kTheseKernels);
    EXPECT_TRUE(d.on) << asked << ": " << d.why;
    EXPECT_EQ(d.mode, "") << asked;
  }
  EXPECT_FALSE(decide_gpu_feature(never, 90, "cuda_graph,hopper=tune", kTheseKernels).on)
      << "other features' entries turned it on";
}

TEST(GpuFeatures, ARowThatRanAtOtherKernelTextIsOff) {
  const GpuFeatureRow ran = row_that_ran(GpuFeature::hopper, 90, kOtherKernels);
  const FeatureDecision d = decide_gpu_feature(ran, 90, "", kTheseKernels);
  EXPECT_FALSE(d.on) << d.why;
  EXPECT_TRUE(decide_gpu_feature(ran, 90, "hopper", kTheseKernels).on) << "the override still turns it on";
}

TEST(GpuFeatures, ARowThatRanOnAnotherCapabilityIsOff) {
  const GpuFeatureRow ran = row_that_ran(GpuFeature::fused_backward, 90, kTheseKernels);
  for (int capability : {0, 80, 86, 89, 100, 120}) {
    const FeatureDecision d = decide_gpu_feature(ran, capability, "", kTheseKernels);
    EXPECT_FALSE(d.on) << "compute capability " << capability << ": " << d.why;
  }
}

TEST(GpuFeatures, ARowThatRanAtTheseKernelsOnThisCapabilityIsOn) {
  const GpuFeatureRow ran = row_that_ran(GpuFeature::cuda_graph, 80, kTheseKernels);
  const FeatureDecision d = decide_gpu_feature(ran, 80, "", kTheseKernels);
  EXPECT_TRUE(d.on) << d.why;
  EXPECT_EQ(d.mode, "");
  EXPECT_TRUE(decide_gpu_feature(ran, 80, "step_kernels=off", kTheseKernels).on) << "another row's off turned it off";
}

TEST(GpuFeatures, OffTurnsAVerifiedRowOff) {
  const GpuFeatureRow ran = row_that_ran(GpuFeature::hopper, 90, kTheseKernels);
  ASSERT_TRUE(decide_gpu_feature(ran, 90, "", kTheseKernels).on);
  for (const char* asked : {"hopper=off", "hopper=0", "step_kernels,hopper=off"}) {
    const FeatureDecision d = decide_gpu_feature(ran, 90, asked, kTheseKernels);
    EXPECT_FALSE(d.on) << asked << ": " << d.why;
    EXPECT_NE(d.why.find("off"), std::string::npos) << asked << ": " << d.why;
  }
}

TEST(GpuFeatures, AModeIsOnInThatMode) {
  const GpuFeatureRow never = row_that_ran(GpuFeature::hopper, 0, "");
  for (const char* mode : {"tune", "force", "overlap"}) {
    const FeatureDecision d = decide_gpu_feature(never, 90, std::string("hopper=") + mode, kTheseKernels);
    EXPECT_TRUE(d.on) << mode << ": " << d.why;
    EXPECT_EQ(d.mode, mode);
  }
  const FeatureDecision buffers =
      decide_gpu_feature(row_that_ran(GpuFeature::cuda_graph, 0, ""), 90, "cuda_graph=buffers", kTheseKernels);
  EXPECT_TRUE(buffers.on) << buffers.why;
  EXPECT_EQ(buffers.mode, "buffers");
  // A mode of a verified row too: force where the table would run it plainly.
  const FeatureDecision forced = decide_gpu_feature(row_that_ran(GpuFeature::fused_backward, 80, kTheseKernels), 80,
                                                    "fused_backward=force", kTheseKernels);
  EXPECT_TRUE(forced.on) << forced.why;
  EXPECT_EQ(forced.mode, "force");
}

TEST(GpuFeatures, AnUnknownNameOrModeIsAnErrorThatListsTheTable) {
  const GpuFeatureRow hopper = row_that_ran(GpuFeature::hopper, 0, "");
  struct Case {
    const char* asked;
    const char* named;  // what the message must quote
  };
  for (const Case& c : {Case{"hoper", "hoper"}, Case{"hopper=fast", "fast"},
                        Case{"step_kernels=buffers", "buffers"},            // a mode of another row
                        Case{"hopper=tune,cuda_graphs", "cuda_graphs"}}) {  // a typo beside the row asked about
    SCOPED_TRACE(c.asked);
    const std::string message = override_error(hopper, c.asked);
    ASSERT_NE(message, "") << "no error";
    EXPECT_NE(message.find(c.named), std::string::npos) << message;
    for (const GpuFeatureRow& row : kGpuFeatureRows)
      EXPECT_NE(message.find(std::string(row.name)), std::string::npos) << row.name << " not listed: " << message;
  }
  // An unknown mode names the modes the feature takes.
  const std::string fast = override_error(hopper, "hopper=fast");
  for (const char* mode : {"tune", "force", "overlap"}) EXPECT_NE(fast.find(mode), std::string::npos) << fast;
}

// The table as it stands: every row's feature is the enum's at its index (gpu_feature reads the row so), and no row
// runs without the override on any GPU, at these kernels: no GPU check has run one of them at the current kernel text.
// (A commit that writes a GPU run into a row changes this claim with it.)
TEST(GpuFeatures, NoRowRunsUnlessAskedForToday) {
  for (size_t k = 0; k < kGpuFeatureRows.size(); ++k) {
    const GpuFeatureRow& row = kGpuFeatureRows[k];
    SCOPED_TRACE(std::string(row.name));
    EXPECT_EQ(static_cast<size_t>(row.feature), k);
    EXPECT_FALSE(row.what.empty());
    for (int capability : {0, 75, 80, 86, 89, 90, 100, 120})
      EXPECT_FALSE(decide_gpu_feature(row, capability, "", kernel_text_hash()).on)
          << "compute capability " << capability;
  }
  const sinktest::GpuFeaturesAsked unset("");
  const std::string report = gpu_features_report(90);
  for (const GpuFeatureRow& row : kGpuFeatureRows) {
    EXPECT_FALSE(gpu_feature_on(row.feature, 90)) << row.name;
    EXPECT_NE(report.find(std::string(row.name) + ": off"), std::string::npos) << report;
  }
}

// What the runtime reads: SINKLAB_GPU_FEATURES from the environment, each entry for its own row.
TEST(GpuFeatures, TheEnvironmentOverridesTheTable) {
  {
    const sinktest::GpuFeaturesAsked asked("hopper=force,fused_backward");
    EXPECT_TRUE(gpu_feature_on(GpuFeature::hopper, 90));
    EXPECT_EQ(gpu_feature(GpuFeature::hopper, 90).mode, "force");
    EXPECT_TRUE(gpu_feature_on(GpuFeature::fused_backward, 80));
    EXPECT_EQ(gpu_feature(GpuFeature::fused_backward, 80).mode, "");
    EXPECT_FALSE(gpu_feature_on(GpuFeature::step_kernels, 90));
  }
  EXPECT_FALSE(gpu_feature_on(GpuFeature::hopper, 90)) << "the override outlived its scope";
  const sinktest::GpuFeaturesAsked typo("step_kernel");
  EXPECT_THROW(gpu_feature(GpuFeature::hopper, 90), std::runtime_error) << "a misspelt entry must not pass silently";
}

// The attention's two gates built on the table (runtime/attention/cuda_tuning.h): the Hopper kernels by the row hopper;
// a fused backward_keys by fused_backward, and from compute capability 9.0 on by bulk_reduction as well (its dQ
// sums by the copy engine's bulk reduction there).
TEST(GpuFeatures, TheFusedBackwardNeedsTheBulkReductionFromCapabilityNineOn) {
  struct Case {
    const char* asked;
    int capability;
    bool allowed;
  };
  for (const Case& c : {Case{"fused_backward", 80, true}, Case{"fused_backward", 90, false},
                        Case{"fused_backward", 100, false}, Case{"fused_backward,bulk_reduction", 90, true},
                        Case{"fused_backward=force,bulk_reduction", 90, true}, Case{"bulk_reduction", 90, false},
                        Case{"bulk_reduction", 80, false}, Case{"fused_backward,bulk_reduction=off", 90, false}}) {
    const sinktest::GpuFeaturesAsked asked(c.asked);
    EXPECT_EQ(fused_backward_allowed(c.capability), c.allowed) << c.asked << ", capability " << c.capability;
  }
  {
    const sinktest::GpuFeaturesAsked asked("hopper=tune");
    EXPECT_TRUE(hopper_kernels_allowed(90));
  }
  const sinktest::GpuFeaturesAsked asked("hopper=off");
  EXPECT_FALSE(hopper_kernels_allowed(90));
}

}  // namespace gpu_features_test
