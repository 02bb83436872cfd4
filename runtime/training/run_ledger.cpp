#include "runtime/training/run_ledger.h"

#include <filesystem>
#include <fmt/format.h>
#include <unistd.h>

#include "plan/numerics_version.h"
#include "plan/run_record.h"
#include "runtime/processes/data_parallel.h"
#include "runtime/processes/process.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/provenance.h"
#include "runtime/training/stale_runs.h"

namespace sink::rt {

const char* outcome_name(RunOutcome outcome) {
  switch (outcome) {
#define SINK_RUN_OUTCOME_CASE(outcome, word) \
  case RunOutcome::outcome: return word;
    SINK_RUN_OUTCOMES(SINK_RUN_OUTCOME_CASE)
#undef SINK_RUN_OUTCOME_CASE
  }
  return "failed";
}

std::ostream& operator<<(std::ostream& out, RunOutcome outcome) { return out << outcome_name(outcome); }

RunOutcome outcome_of(run_record::RunStatus status) {
  switch (status) {
    case run_record::RunStatus::Completed: return RunOutcome::Completed;
    case run_record::RunStatus::Stopped: return RunOutcome::Stopped;
    case run_record::RunStatus::Interrupted: return RunOutcome::Interrupted;
    case run_record::RunStatus::Diverged: return RunOutcome::Diverged;
    case run_record::RunStatus::Running:
    case run_record::RunStatus::Failed: return RunOutcome::Failed;
  }
  return RunOutcome::Failed;
}
namespace fs = std::filesystem;
using json = nlohmann::json;
namespace key = run_record::summary;
using run_record::RunStatus;

namespace {

bool completed(const std::optional<json>& summary, const Plan& plan) {
  return summary && summary->value(key::kStatus, "") == status_name(RunStatus::Completed) &&
         summary->value(key::kHash, "") == plan.hash();
}

// The cache is by content: the same plan under another name (a sweep point
// equal to a named experiment) reuses the completed run through a link.
void link_a_completed_twin(const Plan& plan, const std::string& out, const std::string& own) {
  std::error_code ec;
  if (fs::exists(own, ec) || !fs::is_directory(out, ec)) return;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory(ec) || name.size() < 9 || name.substr(name.size() - 9) != std::string(1, '-') + plan.hash8())
      continue;
    if (completed(RunDir(e.path().string()).summary(), plan)) {
      fs::create_directory_symlink(e.path().filename(), own, ec);
      return;
    }
  }
}

}  // namespace

RunClaim claim_run(const Plan& plan, const RunOptions& options) {
  RunClaim claim;
  claim.dir = fmt::format("{}/{}", options.out, plan.dir_name());
  DataParallel* workers = options.workers;
  claim.leader = !workers || workers->leader();
  // One owner per run directory: a second process skips it (or waits). With
  // data-parallel workers rank 0 decides, and every worker follows.
  enum Decision : int64_t { kTrain, kElsewhere, kCached, kStale };
  int64_t decision = kTrain;
  if (claim.leader) {
    link_a_completed_twin(plan, options.out, claim.dir);
    std::error_code ec;
    fs::create_directories(claim.dir, ec);
    claim.lock = RunLock::acquire(claim.dir, options.wait);
    const auto summary = claim.lock ? RunDir::read_summary(claim.dir) : std::nullopt;
    if (!claim.lock) {
      decision = kElsewhere;
    } else if (completed(summary, plan) && is_stale(*summary) && options.retrain_stale) {
      // Under the lock: no other process reads or writes the run meanwhile.
      const std::string kept = set_aside_stale_results(claim.dir, *summary);
      claim.note = fmt::format("retrained: it was trained under numerics version {}; its results are kept in {}",
                               recorded_numerics_version(*summary), kept);
    } else if (completed(summary, plan)) {
      decision = is_stale(*summary) ? kStale : kCached;
    }
  }
  if (workers) decision = workers->broadcast({decision})[0];
  if (decision == kElsewhere) {
    claim.skipped =
        RunResult{RunOutcome::RunningElsewhere,
                  claim.dir,
                  {{key::kReason, claim.leader ? RunLock::holder(claim.dir) : std::string("rank 0 skipped it")}}};
  } else if (decision == kCached || decision == kStale) {
    const json summary = claim.leader ? *RunDir::read_summary(claim.dir) : json();
    claim.skipped = RunResult{decision == kCached ? RunOutcome::Cached : RunOutcome::Stale, claim.dir, summary};
    if (decision == kStale && claim.leader) claim.skipped->note = stale_note(summary);
  }
  return claim;
}

RunRecord::RunRecord(RunDir& dir, const Plan& plan, DataParallel* workers)
    : dir_(dir), workers_(workers), leader_(!workers || workers->leader()), started_(std::chrono::steady_clock::now()) {
  if (leader_) write_atomically(dir.file("plan.toml"), to_toml(plan));
  if (const auto before = dir.summary()) numerics_before_ = recorded_numerics_version(*before);
  summary_ = {{key::kName, plan.name},
              {key::kHash, plan.hash()},
              {key::kStatus, status_name(RunStatus::Running)},
              {key::kNumericsVersion, kNumericsVersion}};
  // Who is running it: a reader on this host can then tell a run in
  // progress from one whose process was killed (SIGKILL, power loss).
  summary_[key::kProcess] = {{key::kHost, host_name()}, {key::kPid, static_cast<int64_t>(getpid())}};
  dir.write_summary(summary_);
}

void RunRecord::record_provenance(const torch::Device& device, std::shared_ptr<const AttentionBackend> backend) {
  summary_[key::kProvenance] = provenance(device);
  backend_ = std::move(backend);
}

void RunRecord::record_resumed() { summary_[key::kNumericsVersion] = std::min(numerics_before_, kNumericsVersion); }

void RunRecord::add_note(const std::string& note) {
  note_ = note;
  dir_.log(note);
}

void RunRecord::record_progress(int64_t steps, int64_t tokens_per_step) {
  summary_[key::kStepsDone] = steps;
  summary_[key::kTokens] = steps * tokens_per_step;
}

void RunRecord::leader_writes(const std::function<void()>& write) {
  std::string failure;
  if (leader_) {
    try {
      write();
    } catch (const std::exception& e) {
      failure = error_text(e);
    }
  }
  if (workers_ && workers_->broadcast({failure.empty() ? 0 : 1})[0] && failure.empty())
    failure = "rank 0 could not write the run directory";
  if (!failure.empty()) throw std::runtime_error(failure);
}

RunResult RunRecord::finish(RunStatus final_status, const std::string& reason) {
  const std::string status = status_name(final_status);
  summary_.erase(key::kProcess);
  summary_[key::kStatus] = status;
  if (!reason.empty()) summary_[key::kReason] = reason;
  summary_[key::kWallS] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (backend_) summary_[key::kProvenance][run_record::provenance::kAttentionKernels] = backend_->kernels_run();
  try {
    dir_.write_summary(summary_);
  } catch (const std::exception& e) {  // the disk that failed the run may refuse this too
    fmt::print(stderr, "sinkc: {}: status {} not recorded: {}\n", dir_.path(), status, e.what());
  }
  dir_.log(fmt::format("status: {}{}", status, reason.empty() ? "" : " (" + reason + ")"));
  return {outcome_of(final_status), dir_.path(), summary_, note_};
}

}  // namespace sink::rt
