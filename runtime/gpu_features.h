// What may run on a GPU: every GPU feature that can be switched, in one table, and the one place that decides.
//
// A row says what the feature is and where a GPU check ran it: the compute capability of that GPU (major * 10 +
// minor; 0: no GPU has run it) and the kernel text it ran at (kernel_text_hash(): every CUDA text sinklab prints
// its kernels from, and the version that prints them). A feature runs by default only on a GPU of the capability it
// ran on, and only while the kernel text is the one it ran at: a kernel changed since its check is unverified again.
// A new GPU feature is gated by adding one row; a feature is promoted by a commit that writes its GPU run into its
// row (the measurements page holds the run).
//
// One environment variable overrides the table for a user who opts in or out:
//   SINKLAB_GPU_FEATURES="step_kernels,cuda_graph=buffers,hopper=tune,fused_backward=off"
// a name alone turns the feature on; name=off (or 0) off; name=MODE on in that mode (a row's modes below). An
// unknown name or mode is an error that lists the table (a typo must not run what was not asked for).
#pragma once
#include <array>
#include <string>
#include <string_view>

namespace sink::rt {

// X(id, ran_on, kernel_hash, modes, what)
//   ran_on:      the compute capability a GPU check ran it on, 0 never;
//   kernel_hash: kernel_text_hash() at that check ("" where none ran);
//   modes:       the words name=MODE takes besides on and off, space-separated.
#define SINKLAB_GPU_FEATURES(X)                                                                                      \
  X(hopper, 0, "", "tune force overlap",                                                                             \
    "the Hopper attention kernels (wgmma, TMA) on compute capability 9.0: on or tune lets the tuning measure them; " \
    "force runs them, each waiting for its products; overlap the same with the forward's overlapped one")            \
  X(fused_backward, 0, "", "force",                                                                                  \
    "a backward_keys that sums dQ too, where the tuning measured it faster; force runs one where it measured none")  \
  X(bulk_reduction, 0, "", "",                                                                                       \
    "the fused backward_keys' bulk reduction of dQ (compute capability 9.0 on): without it no fused backward runs "  \
    "there")                                                                                                         \
  X(pair_rule_kernels, 0, "", "",                                                                                    \
    "the generated attention kernels of a rule that checks pairs (loss.window_keeps); else the reference path")      \
  X(step_kernels, 0, "", "",                                                                                         \
    "the step's fused operations: residual add + norm, the gated FFN's activation, q, k, v into heads with RoPE")    \
  X(cuda_graph, 0, "", "buffers",                                                                                    \
    "the training step captured once as a CUDA graph and replayed; buffers runs it on the same fixed buffers, "      \
    "never captured")

enum class GpuFeature {
#define SINKLAB_FEATURE_ID(id, ran_on, hash, modes, what) id,
  SINKLAB_GPU_FEATURES(SINKLAB_FEATURE_ID)
#undef SINKLAB_FEATURE_ID
};

struct GpuFeatureRow {
  GpuFeature feature;
  std::string_view name;
  int ran_on;
  std::string_view kernel_hash;
  std::string_view modes;
  std::string_view what;
};

inline constexpr std::array kGpuFeatureRows = {
#define SINKLAB_FEATURE_ROW(id, ran_on, hash, modes, what) \
  GpuFeatureRow{GpuFeature::id, #id, ran_on, hash, modes, what},
    SINKLAB_GPU_FEATURES(SINKLAB_FEATURE_ROW)
#undef SINKLAB_FEATURE_ROW
};

// Whether a feature runs, in which mode ("" for plain on), and why, for the log.
struct FeatureDecision {
  bool on = false;
  std::string mode;
  std::string why;
};

// The decision for `feature` on a GPU of compute capability `capability` (0: unknown): the override where
// SINKLAB_GPU_FEATURES names the feature, else the table's row. Throws std::runtime_error for an override that names
// no feature or no mode of it.
FeatureDecision gpu_feature(GpuFeature feature, int capability);
inline bool gpu_feature_on(GpuFeature feature, int capability) { return gpu_feature(feature, capability).on; }

// The decision of a row under an override text (SINKLAB_GPU_FEATURES's value) and a kernel hash: what gpu_feature
// reads, with its inputs given (tests).
FeatureDecision decide_gpu_feature(const GpuFeatureRow& row, int capability, std::string_view override_text,
                                   std::string_view kernel_hash);

// Every row's decision, one line each: "step_kernels: off (no GPU has run it; SINKLAB_GPU_FEATURES=step_kernels
// runs it)". For --version and a GPU run's log.
std::string gpu_features_report(int capability);

// The compute capability of CUDA device `device` (major * 10 + minor), from the driver; 0 where it cannot say.
int gpu_capability(int device);

// The FNV-1a hash of every CUDA text the kernels are printed from, and of the version that prints them.
const std::string& kernel_text_hash();

}  // namespace sink::rt
