// train.precision = auto and train.micro_batch = auto: what they become on
// the device a run starts on. The plan and its hash keep `auto` as written
// (the experiment asks for the device's own precision and the largest pass
// it holds); what a run used is in its summary.json (precision,
// micro_batch, auto_settings) and log.txt, resolved again at every start,
// so a run resumed on another device uses that device's values. Explicit
// values are never changed.
#pragma once
#include <cstdint>
#include <string>

#include "plan/run_config.h"

namespace sink::rt {

// What the automatic settings read of a device.
struct DeviceFacts {
  bool gpu = false;
  int64_t memory_bytes = 0;  // a GPU's total memory; 0 = unknown
  int capability = 0;        // compute capability, major * 10 + minor (80 = sm_80); 0 = unknown
};

// What one of `runs` processes training on one GPU at once may plan with: an
// equal share of its memory (each process holds its own weights, optimizer
// state and CUDA context, which the estimate's fixed part counts). runs <= 1,
// or a CPU: the device as it is.
DeviceFacts shared_by(const DeviceFacts& device, int runs);

// The bytes one step holds on a GPU, from the model's shapes alone (not a
// measurement): `fixed` for the weights, their gradients, AdamW's two
// moments, the autocast copies, the CUDA context and one chunk of the LM
// head's logits; `per_sequence` for the activations kept for the backward.
struct MemoryEstimate {
  double parameters = 0;
  double fixed_bytes = 0;
  double per_sequence_bytes = 0;
};
MemoryEstimate estimate_training_memory(const ModelConfig& model, int64_t context, Precision precision);

// The share of a GPU's memory the estimate may fill: the rest is the
// allocator's fragmentation, NCCL's buffers and the estimate's own error.
inline constexpr double kUsableMemoryShare = 0.85;

// auto: bf16 on a GPU of compute capability 8.0 or newer (bf16 tensor
// cores), fp32 on a CPU, an older GPU or one whose capability is unknown.
Precision resolve_precision(Precision asked, const DeviceFacts& device);

// Sequences per pass for `rows` sequences per worker and step: 0 (one
// pass) when the estimate fits, else the largest divisor of rows that does,
// at least 1. A CPU always gets 0: the CPU presets are sized for its memory.
// Throws std::runtime_error on a GPU whose memory is unknown.
int64_t resolve_micro_batch(int64_t rows, const MemoryEstimate& estimate, const DeviceFacts& device);

// The run's settings with every auto resolved, and a line for the log and
// summary.json that says what was resolved and from what ("" when nothing was auto).
struct ResolvedSettings {
  Precision precision = Precision::fp32;
  int64_t micro_batch = 0;
  std::string note;
};
ResolvedSettings resolve_auto_settings(const RunConfig& cfg, int64_t rows, const DeviceFacts& device);

}  // namespace sink::rt
