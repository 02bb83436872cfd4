// The bookkeeping around training one run: who trains it (the cache by plan
// hash and numerics version, the run lock, rank 0's decision for
// data-parallel workers), and its summary.json, from "running" with the
// process that runs it to the final status and its reason. Training itself
// is runtime/training/train.cpp.
#pragma once
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "plan/plan.h"
#include "plan/run_record.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/processes/run_lock.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/train.h"

namespace sink::rt {

// Whether this process trains `plan`: the run directory, the lock held while
// it does, or the result when it does not (cached, stale, or running
// elsewhere). A stale run (runtime/training/stale_runs.h) is trained again
// only with options.retrain_stale, its results set aside first.
struct RunClaim {
  std::string dir;
  bool leader = true;  // rank 0, or a process alone: it writes the run directory
  std::optional<RunLock> lock;
  std::optional<RunResult> skipped;
  std::string note;  // what the claim did that the run's result should say (a stale run set aside)
};
RunClaim claim_run(const Plan& plan, const RunOptions& options);

// summary.json of the run being trained, and the writes only rank 0 makes.
class RunRecord {
 public:
  RunRecord(RunDir& dir, const Plan& plan, DataParallel* workers);
  nlohmann::json& summary() { return summary_; }
  // What trains the run: the provenance summary.json records, with the kernels `backend` has run by the end.
  void record_provenance(const torch::Device& device, std::shared_ptr<const AttentionBackend> backend);
  // The run continues from a checkpoint: its numbers are partly those of whatever trained it before, so it
  // keeps the older of the two numerics versions (a run begun before a fix stays stale).
  void record_resumed();
  // Said with the result, and in log.txt.
  void add_note(const std::string& note);
  // Steps done and the tokens they trained, for a run that ends early.
  void record_progress(int64_t steps, int64_t tokens_per_step);
  // Runs `write` on rank 0; every worker learns whether it failed, so all
  // stop together. Throws std::runtime_error with the failure.
  void leader_writes(const std::function<void()>& write);
  // The final status and its reason, written to summary.json and log.txt.
  RunResult finish(run_record::RunStatus status, const std::string& reason = "");

 private:
  RunDir& dir_;
  DataParallel* workers_;
  bool leader_;
  nlohmann::json summary_;
  int64_t numerics_before_ = 0;  // the version the run directory's summary.json had when this process began
  std::shared_ptr<const AttentionBackend> backend_;
  std::string note_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace sink::rt
