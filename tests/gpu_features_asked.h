// SINKLAB_GPU_FEATURES (runtime/gpu_features.h: the one override of the GPU feature table) set for one scope, and
// back: every GPU feature is off until a GPU check has run it, and a test that checks one on the emulation opts in,
// as a user would, for its own scope alone.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace sinktest {

// SINKLAB_GPU_FEATURES=`features` ("hopper=tune,fused_backward"; "" leaves it unset) from here to the end of the
// scope, then what it was before (unset where it was). Scopes nest.
class GpuFeaturesAsked {
 public:
  explicit GpuFeaturesAsked(const std::string& features) {
    if (const char* before = std::getenv(kVariable)) before_ = before;
    if (features.empty())
      unsetenv(kVariable);
    else
      setenv(kVariable, features.c_str(), 1);
  }
  ~GpuFeaturesAsked() {
    if (before_)
      setenv(kVariable, before_->c_str(), 1);
    else
      unsetenv(kVariable);
  }
  GpuFeaturesAsked(const GpuFeaturesAsked&) = delete;
  GpuFeaturesAsked& operator=(const GpuFeaturesAsked&) = delete;

 private:
  static constexpr const char* kVariable = "SINKLAB_GPU_FEATURES";
  std::optional<std::string> before_;
};

// The rows a fused backward_keys needs on an emulated GPU of compute capability 9.0 (on 8.x fused_backward alone):
// the fused kernel, and its sm_90 bulk reduction of dQ.
inline constexpr const char* kFusedBackwardOn90 = "fused_backward,bulk_reduction";

}  // namespace sinktest
