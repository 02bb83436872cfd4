// The run's TensorBoard events, appended as it trains: the step's loss (`loss`) every train.log_every steps,
// and every measurement under the names `sinkc export --tensorboard` gives it (results/metrics.h: lr,
// tokens_per_s and train_loss, the mean since the previous measurement, among them), so `tensorboard --logdir runs/`
// follows a run while it trains, a Slurm job's too. Written by the leader only. A file that cannot be written is said
// once in log.txt and the run goes on: the events are a view of metrics.jsonl, which keeps everything.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "results/tfevents.h"
#include "runtime/training/run_dir.h"

namespace sink::rt {

class LiveEvents {
 public:
  LiveEvents(RunDir& dir, bool leader) : dir_(dir), log_(dir.path()), on_(leader) {}
  void step(int64_t step, double loss);
  void measurement(int64_t step, const nlohmann::json& metrics_line);

 private:
  void add(int64_t step, const tfevents::Scalars& values);
  RunDir& dir_;
  tfevents::EventLog log_;
  bool on_;
};

}  // namespace sink::rt
