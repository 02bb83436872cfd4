// The contract between a run and the tools that read it: every key of
// metrics.jsonl (one line per evaluation; summary.json's "final" is one such
// line) and of summary.json, and summary.json's status. The runtime writes
// through these names, results/ reads through them, and a key or status that
// is not here is an error on the reading side, never a guess.
#pragma once
#include <array>
#include <optional>
#include <string_view>

namespace sink::run_record {

// The files of a run directory that the runtime appends a line to as it trains, and results/ reads.
namespace files {
inline constexpr const char* kMetrics = "metrics.jsonl";  // one line per evaluation (the eval keys below)
inline constexpr const char* kLosses = "losses.jsonl";    // one line per train.log_every steps (the loss keys below)
}  // namespace files

// A losses.jsonl line: the training loss of the step just taken (not a mean: the finer curve between evaluations).
namespace loss {
inline constexpr const char* kStep = "step";
inline constexpr const char* kLoss = "loss";
}  // namespace loss

// metrics.jsonl, and `sinkc measure --format json` for the measurements.
namespace eval {
inline constexpr const char* kStep = "step";
inline constexpr const char* kTokens = "tokens";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kTrainLoss = "train_loss";
inline constexpr const char* kValidLoss = "valid_loss";
inline constexpr const char* kElapsedS = "elapsed_s";  // the training loop's seconds so far (this process's)
// The part of elapsed_s spent training: without the measurements and checkpoint writes before this line.
inline constexpr const char* kTrainS = "train_s";
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kSink = "sink";                     // {"position": Sink_k in %}
inline constexpr const char* kSinkStar = "sink_star";            // Sink_* in %
inline constexpr const char* kAlpha = "alpha";                   // [layer][head] alpha_1
inline constexpr const char* kAlphaStar = "alpha_star";          // [layer][head]
inline constexpr const char* kMassive = "massive";               // per layer
inline constexpr const char* kGate = "gate";                     // per layer
inline constexpr const char* kSinkLogit = "sink_logit";          // Sink_logit^eps in %
inline constexpr const char* kMaxActivation = "max_activation";  // per layer
// true: the Sink values and alpha come from the paper's proxy scores (plan/normalizers.h's sink_from_proxy);
// absent in runs recorded before it was, whose plans say the same.
inline constexpr const char* kSinkFromProxy = "sink_from_proxy";
// [layer][head] tables.
inline constexpr const char* kSinkLogitShare = "sink_logit_share";
inline constexpr const char* kKeyNormRatio = "key_norm_ratio";
inline constexpr const char* kValueNormRatio = "value_norm_ratio";
inline constexpr const char* kQueryKeyCos = "query_key_cos";
// `sinkc measure` only: how many sequences the measurement averaged.
inline constexpr const char* kSequences = "sequences";

inline constexpr std::array<std::string_view, 4> kHeadTables = {kSinkLogitShare, kKeyNormRatio, kValueNormRatio,
                                                                kQueryKeyCos};
inline constexpr std::array<std::string_view, 21> kKeys = {
    kStep,           kTokens,      kLr,           kTrainLoss,     kValidLoss,      kElapsedS,
    kTrainS,         kTokensPerS,  kSink,         kSinkStar,      kAlpha,          kAlphaStar,
    kMassive,        kGate,        kSinkLogit,    kMaxActivation, kSinkLogitShare, kKeyNormRatio,
    kValueNormRatio, kQueryKeyCos, kSinkFromProxy};
}  // namespace eval

// summary.json.
namespace summary {
inline constexpr const char* kName = "name";
inline constexpr const char* kHash = "hash";
inline constexpr const char* kStatus = "status";
inline constexpr const char* kReason = "reason";
inline constexpr const char* kProcess = "process";  // {"host", "pid"} while it runs
inline constexpr const char* kHost = "host";
inline constexpr const char* kPid = "pid";
inline constexpr const char* kStepsDone = "steps_done";
inline constexpr const char* kTokens = "tokens";
inline constexpr const char* kWallS = "wall_s";
inline constexpr const char* kTrainWallS = "train_wall_s";
inline constexpr const char* kTokensPerS = "tokens_per_s";
inline constexpr const char* kFinal = "final";  // the last evaluation, as a metrics.jsonl line
inline constexpr const char* kParameters = "parameters";
inline constexpr const char* kAttentionBackend = "attention_backend";
inline constexpr const char* kThreads = "threads";
inline constexpr const char* kDevice = "device";
inline constexpr const char* kPrecision = "precision";
inline constexpr const char* kMicroBatch = "micro_batch";
// What train.precision = auto and train.micro_batch = auto became on this device, and from what; absent without auto.
inline constexpr const char* kAutoSettings = "auto_settings";
inline constexpr const char* kWorkers = "workers";
inline constexpr const char* kTrainTokensUnique = "train_tokens_unique";
// plan/numerics_version.h's kNumericsVersion when the run was trained; absent before it was recorded.
inline constexpr const char* kNumericsVersion = "numerics_version";
// What the numbers came from: {"sinklab", "commit", "libtorch", "device_name", "attention_kernels"}
// (the provenance namespace below).
inline constexpr const char* kProvenance = "provenance";
// {"bytes", "of"}: the most memory the run held and what was measured (runtime/training/peak_memory.h).
inline constexpr const char* kPeakMemory = "peak_memory";

inline constexpr std::array<std::string_view, 23> kKeys = {
    kName,       kHash,       kStatus,     kReason,       kProcess,    kStepsDone,         kTokens,
    kWallS,      kTrainWallS, kTokensPerS, kFinal,        kParameters, kAttentionBackend,  kThreads,
    kDevice,     kPrecision,  kMicroBatch, kAutoSettings, kWorkers,    kTrainTokensUnique, kNumericsVersion,
    kProvenance, kPeakMemory};
}  // namespace summary

// summary.json's "provenance".
namespace provenance {
inline constexpr const char* kSinklab = "sinklab";         // sinklab's version (CMake's project version)
inline constexpr const char* kCommit = "commit";           // the source's git commit, "+modified" when it had edits
inline constexpr const char* kLibtorch = "libtorch";       // LibTorch's version
inline constexpr const char* kDeviceName = "device_name";  // the CPU's model name or the GPU's name
// The attention kernels that ran, each "<kernels> <storage>": "jit float", "cuda bf16", "cuda-tensor bf16",
// "sdpa bf16", "reference float".
inline constexpr const char* kAttentionKernels = "attention_kernels";
}  // namespace provenance

// summary.json's "status", from a run's start to its end.
enum class RunStatus {
  Running,
  Completed,
  Stopped,      // at the step it was asked to stop at; resumable
  Interrupted,  // by a signal; resumable with --resume
  Diverged,
  Failed,
};
inline constexpr std::array<RunStatus, 6> kStatuses = {RunStatus::Running,     RunStatus::Completed, RunStatus::Stopped,
                                                       RunStatus::Interrupted, RunStatus::Diverged,  RunStatus::Failed};

constexpr const char* status_name(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Completed: return "completed";
    case RunStatus::Stopped: return "stopped";
    case RunStatus::Interrupted: return "interrupted";
    case RunStatus::Diverged: return "diverged";
    case RunStatus::Failed: return "failed";
  }
  return "failed";
}

// nullopt for a status this sinklab never writes.
constexpr std::optional<RunStatus> parse_status(std::string_view s) {
  for (RunStatus status : kStatuses)
    if (s == status_name(status)) return status;
  return std::nullopt;
}

template <size_t N>
constexpr bool is_one_of(const std::array<std::string_view, N>& keys, std::string_view key) {
  for (std::string_view k : keys)
    if (k == key) return true;
  return false;
}

}  // namespace sink::run_record
