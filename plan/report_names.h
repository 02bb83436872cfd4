// The names of the measurements beyond the paper's own in metrics.jsonl,
// summary.json and `sinkc measure --format json`: the runtime writes them
// and the results tools read them from this one list.
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

}  // namespace sink::report_names
