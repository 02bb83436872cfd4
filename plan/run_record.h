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

// Each key is listed once, in a table of (constant, name) rows: the constants below and kKeys, the list the
// readers check a file's keys against, are both made from it.
#define SINK_RUN_RECORD_KEY(constant, name) inline constexpr const char* constant = name;
#define SINK_RUN_RECORD_NAME(constant, name) std::string_view(name),

// metrics.jsonl, and `sinkc measure --format json` for the measurements.
// elapsed_s: the training loop's seconds so far (this process's); train_s: the part of it spent training, without
// the measurements and checkpoint writes before this line. sink: {"position": Sink_k in %}; sink_star: Sink_* in %;
// alpha, alpha_star: [layer][head]; massive, gate, max_activation: per layer; sink_logit: Sink_logit^eps in %.
// sink_from_proxy: true where the Sink values and alpha come from the paper's proxy scores (plan/normalizers.h's
// sink_from_proxy); absent in runs recorded before it was, whose plans say the same. The four [layer][head]
// tables are kHeadTables. sequences: `sinkc measure` only, how many sequences the measurement averaged.
// What a sink costs (runtime/measurement/sink_costs.h), each where measured: residual_kurtosis,
// attention_output_max, attention_output_kurtosis: per layer (max_activation is the residual stream's maximum);
// windowed_loss: {"window": W, "loss": {"K": the loss keeping K first tokens}}; quantized_loss: {"wBaB": loss};
// longer_context_loss: {"F": the loss on F x train.context tokens, or a string saying why there is none}.
#define SINK_EVAL_KEYS(KEY)                                  \
  KEY(kStep, "step")                                         \
  KEY(kTokens, "tokens")                                     \
  KEY(kLr, "lr")                                             \
  KEY(kTrainLoss, "train_loss")                              \
  KEY(kValidLoss, "valid_loss")                              \
  KEY(kElapsedS, "elapsed_s")                                \
  KEY(kTrainS, "train_s")                                    \
  KEY(kTokensPerS, "tokens_per_s")                           \
  KEY(kSink, "sink")                                         \
  KEY(kSinkStar, "sink_star")                                \
  KEY(kAlpha, "alpha")                                       \
  KEY(kAlphaStar, "alpha_star")                              \
  KEY(kMassive, "massive")                                   \
  KEY(kGate, "gate")                                         \
  KEY(kSinkLogit, "sink_logit")                              \
  KEY(kMaxActivation, "max_activation")                      \
  KEY(kSinkLogitShare, "sink_logit_share")                   \
  KEY(kKeyNormRatio, "key_norm_ratio")                       \
  KEY(kValueNormRatio, "value_norm_ratio")                   \
  KEY(kQueryKeyCos, "query_key_cos")                         \
  KEY(kSinkFromProxy, "sink_from_proxy")                     \
  KEY(kResidualKurtosis, "residual_kurtosis")                \
  KEY(kAttentionOutputMax, "attention_output_max")           \
  KEY(kAttentionOutputKurtosis, "attention_output_kurtosis") \
  KEY(kWindowedLoss, "windowed_loss")                        \
  KEY(kQuantizedLoss, "quantized_loss")                      \
  KEY(kLongerContextLoss, "longer_context_loss")

namespace eval {
SINK_EVAL_KEYS(SINK_RUN_RECORD_KEY)
inline constexpr const char* kSequences = "sequences";  // `sinkc measure`'s alone: not in a run's files
inline constexpr std::array kKeys = {SINK_EVAL_KEYS(SINK_RUN_RECORD_NAME)};
inline constexpr std::array<std::string_view, 4> kHeadTables = {kSinkLogitShare, kKeyNormRatio, kValueNormRatio,
                                                                kQueryKeyCos};
}  // namespace eval

// summary.json. process: {"host", "pid"} while the run runs; final: the last evaluation, as a metrics.jsonl line.
// auto_settings: what train.precision = auto and train.micro_batch = auto became on this device, and from what;
// absent without auto. numerics_version: plan/numerics_version.h's kNumericsVersion when the run was trained; absent
// before it was recorded. provenance: what the numbers came from (the provenance namespace below). peak_memory:
// {"bytes", "of"}, the most memory the run held and what was measured (runtime/training/peak_memory.h). step: how
// the captured step ran, where the run asked for it (runtime/training/training_step.h). step_kernels: the fused
// operations the step ran as CUDA kernels, where it ran any (runtime/training/step_kernels.h).
#define SINK_SUMMARY_KEYS(KEY)                   \
  KEY(kName, "name")                             \
  KEY(kHash, "hash")                             \
  KEY(kStatus, "status")                         \
  KEY(kReason, "reason")                         \
  KEY(kProcess, "process")                       \
  KEY(kStepsDone, "steps_done")                  \
  KEY(kTokens, "tokens")                         \
  KEY(kWallS, "wall_s")                          \
  KEY(kTrainWallS, "train_wall_s")               \
  KEY(kTokensPerS, "tokens_per_s")               \
  KEY(kFinal, "final")                           \
  KEY(kParameters, "parameters")                 \
  KEY(kAttentionBackend, "attention_backend")    \
  KEY(kThreads, "threads")                       \
  KEY(kDevice, "device")                         \
  KEY(kPrecision, "precision")                   \
  KEY(kMicroBatch, "micro_batch")                \
  KEY(kAutoSettings, "auto_settings")            \
  KEY(kWorkers, "workers")                       \
  KEY(kTrainTokensUnique, "train_tokens_unique") \
  KEY(kNumericsVersion, "numerics_version")      \
  KEY(kProvenance, "provenance")                 \
  KEY(kPeakMemory, "peak_memory")                \
  KEY(kStep, "step")                             \
  KEY(kStepKernels, "step_kernels")

namespace summary {
SINK_SUMMARY_KEYS(SINK_RUN_RECORD_KEY)
inline constexpr const char* kHost = "host";  // process's
inline constexpr const char* kPid = "pid";
inline constexpr std::array kKeys = {SINK_SUMMARY_KEYS(SINK_RUN_RECORD_NAME)};
}  // namespace summary

#undef SINK_RUN_RECORD_KEY
#undef SINK_RUN_RECORD_NAME

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
