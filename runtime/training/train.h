// Training one plan end to end: data, model, AdamW, schedule, clipping,
// periodic measurement, atomic checkpoints, resume, divergence handling.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "plan/plan.h"
#include "plan/run_record.h"

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

// What run_plan did with a plan, each with its word in a run's result line: trained it to a final status of
// summary.json (plan/run_record.h's RunStatus), or trained nothing, since a completed run of it was there (cached),
// one of an older numerics version (stale), or another process holds it.
#define SINK_RUN_OUTCOMES(OUTCOME)    \
  OUTCOME(Completed, "completed")     \
  OUTCOME(Stopped, "stopped")         \
  OUTCOME(Interrupted, "interrupted") \
  OUTCOME(Diverged, "diverged")       \
  OUTCOME(Failed, "failed")           \
  OUTCOME(Cached, "cached")           \
  OUTCOME(Stale, "stale")             \
  OUTCOME(RunningElsewhere, "running elsewhere")
#define SINK_RUN_OUTCOME_ENUMERATOR(outcome, word) outcome,
enum class RunOutcome { SINK_RUN_OUTCOMES(SINK_RUN_OUTCOME_ENUMERATOR) };
#undef SINK_RUN_OUTCOME_ENUMERATOR
const char* outcome_name(RunOutcome outcome);
std::ostream& operator<<(std::ostream& out, RunOutcome outcome);  // its word (test messages)
// A run's final status as an outcome (Running, never final, reads as Failed).
RunOutcome outcome_of(run_record::RunStatus status);

struct RunResult {
  RunOutcome status;
  std::string dir;
  nlohmann::json summary;
  std::string note = "";  // more for the result line: why a run is stale, where its stale results went
};

// Never throws for a bad run: a failure is recorded in summary.json.
RunResult run_plan(const Plan& plan, const RunOptions& options);

}  // namespace sink::rt
