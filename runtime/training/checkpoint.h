// A run's checkpoints: the model, AdamW's state and the training counters in
// one LibTorch archive, written whole or not at all (runtime/training/run_dir.h), read
// back with every parameter's shape checked against the plan's model; the
// previous checkpoint when the latest cannot be read.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <torch/torch.h>

#include "plan/run_record.h"

namespace sink::rt {

struct Transformer;
class RunDir;

// The message of a LibTorch error without its C++ backtrace, else what().
std::string error_text(const std::exception& e);

struct Checkpoint {
  int64_t step = 0;
  double loss_sum = 0;  // the training losses since the last measurement
  int64_t loss_count = 0;
};

// Throws when the file cannot be written whole; the checkpoints on disk stay as they were.
void save_checkpoint(const RunDir& dir, Transformer& model, torch::optim::Optimizer& opt, const Checkpoint& c);

struct Resumed {
  Checkpoint state;
  std::string warning;  // non-empty when the previous checkpoint was used
};

// The latest checkpoint, or the previous one when the latest is missing or
// unreadable (a copy cut short, a disk that lost a write): one bad file
// costs the steps since the checkpoint before it, not the run. `opt` null:
// the model alone.
Resumed load_latest_checkpoint(const std::string& latest, const std::string& previous, Transformer& model,
                               torch::optim::Optimizer* opt);

// A run's trained model, for `sinkc export`: its plan.toml and its latest
// usable checkpoint (the previous one when the latest cannot be read).
struct TrainedModel {
  std::shared_ptr<Transformer> model;
  int64_t step = 0;                             // the checkpoint's
  int64_t context = 0;                          // train.context
  std::optional<run_record::RunStatus> status;  // summary.json's; none without one
  std::string warning;                          // why the latest checkpoint was passed over
};
// Throws std::runtime_error naming the file at fault.
TrainedModel load_trained_model(const std::string& run_dir);

}  // namespace sink::rt
