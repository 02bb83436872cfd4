// The names a run writes and the results tools read, from this one list:
// the measurements beyond the paper's own in metrics.jsonl, summary.json and
// `sinkc measure --format json`, and summary.json's status.
#pragma once
#include <array>
#include <string_view>

namespace sink::report_names {

inline constexpr const char* kSinkLogit = "sink_logit";  // Sink_logit^eps in %
inline constexpr const char* kMaxActivation = "max_activation";  // per layer
// Per layer and head.
inline constexpr const char* kSinkLogitShare = "sink_logit_share";
inline constexpr const char* kKeyNormRatio = "key_norm_ratio";
inline constexpr const char* kValueNormRatio = "value_norm_ratio";
inline constexpr const char* kQueryKeyCos = "query_key_cos";

inline constexpr std::array<std::string_view, 4> kHeadTables = {kSinkLogitShare, kKeyNormRatio, kValueNormRatio, kQueryKeyCos};

// summary.json's "status", from a run's start to its end.
namespace status {
inline constexpr const char* kRunning = "running";
inline constexpr const char* kCompleted = "completed";
inline constexpr const char* kStopped = "stopped";          // at the step it was asked to stop at; resumable
inline constexpr const char* kInterrupted = "interrupted";  // by a signal; resumable with --resume
inline constexpr const char* kDiverged = "diverged";
inline constexpr const char* kFailed = "failed";
}  // namespace status

}  // namespace sink::report_names
