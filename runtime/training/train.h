// Training one plan end to end: data, model, AdamW, schedule, clipping,
// periodic measurement, atomic checkpoints, resume, divergence handling.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "plan/plan.h"

namespace sink::rt {

class DataParallel;

struct RunOptions {
  std::string out = "runs";
  bool resume = false;
  bool progress = true;             // the live progress line on a terminal
  int64_t stop_after = -1;          // tests: stop (as if killed) after this many steps
  std::string data_cache = "";      // token cache (tokens/corpus_tokens.h) and the like; default <out>/.cache
  bool wait = false;                // a run another process holds: wait for it rather than skip it
  bool retrain_stale = false;       // train again a completed run of an older numerics version (stale_runs.h)
  bool profile = false;             // where the loop's time went: profile.json (runtime/training/step_profile.h)
  int64_t auto_threads = 0;         // threads when the plan says train.threads = 0; 0: the machine's default
  int gpu = -1;                     // --gpu N for cuda runs; -1: training_device chooses (runtime/training/device.h)
  int gpu_share = 1;                // runs training on this run's GPU at once: micro_batch = auto plans for 1/N of it
  DataParallel* workers = nullptr;  // data-parallel workers (torchrun); null: this process alone
};

struct RunResult {
  // completed | cached | stale | diverged | failed | stopped | interrupted | running elsewhere
  std::string status;
  std::string dir;
  nlohmann::json summary;
  std::string note = "";  // more for the result line: why a run is stale, where its stale results went
};

// Never throws for a bad run: a failure is recorded in summary.json.
RunResult run_plan(const Plan& plan, const RunOptions& options);

}  // namespace sink::rt
