// The front end's commands, callable from tests and benchmarks as well as main.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "compiler/pipeline.h"

namespace sink::cli {

struct CommonOptions {
  std::vector<std::string> overrides;
  std::string base;
  std::string stdlib;
  int color = -1;  // -1: when stderr is a terminal
  Options options() const { return {stdlib, overrides, base}; }
};

// Exit status: 0 clean, 1 spec errors, 2 usage or I/O. `fix`: first apply the checker's fixes (each "did you mean")
// to the files named, in place, then check them again.
int check(const std::vector<std::string>& files, const CommonOptions& common, bool fix = false);
// `runs`: --run names or patterns (plan/plan.h's run_answers_to); one that matches no run is exit 2.
int plan(const std::string& file, const std::vector<std::string>& runs, const std::string& format,
         const CommonOptions& common);
int fields(const std::string& format, const CommonOptions& common);
// `sinkc fmt` (compiler/format.h): Print writes the formatted files to stdout; Check lists those not formatted
// (exit 1); Write rewrites them in place. Exit 2 when a file cannot be read or does not parse.
enum class FormatMode { Print, Check, Write };
int format(const std::vector<std::string>& targets, FormatMode mode);
int compile(const std::string& file, const std::string& out, const CommonOptions& common);

// `sinkc run`'s front half: compiles the specs among `targets` (plan.toml
// files and folders of them pass through), writes each plan to
// OUT/.plans/<run>-<hash8>.toml and returns every plan file to hand to the
// runtime, in order. Exit status as above; `plan_files` is filled on 0.
int plans_for_runtime(const std::vector<std::string>& targets, const std::string& out, const CommonOptions& common,
                      std::vector<std::string>& plan_files);
// Keeps the plan files whose run answers to one of `runs` (--run names or patterns; all when there is none).
// False, the error printed, when a pattern matches none of them: it names the runs of `where`.
bool select_plan_files(std::vector<std::string>& plan_files, const std::vector<std::string>& runs,
                       const std::string& where);

// How long before its time limit Slurm warns a task (SIGUSR1): time for a
// step, a checkpoint and the requeue. Slurm may send it up to a minute early.
constexpr int kSlurmSignalLeadS = 120;
// A task requeues itself at most this many times (SLURM_RESTART_COUNT), so
// that a run whose steps never fit its time limit does not loop.
constexpr int kSlurmMaxRequeues = 20;

// `sinkc submit --slurm` (cli/slurm_submit.cpp): one Slurm job array, one
// task per run not yet completed in `out`; `dry_run` prints the batch script.
struct SubmitOptions {
  std::string out = "runs";
  std::vector<std::string> runs;         // only these runs (and their seeds): names or patterns
  std::string partition;                 // empty: the cluster's default
  std::string time;                      // Slurm's --time, e.g. 4:00:00
  int gpus_per_run = 0;                  // > 1: the task runs the runtime's workers under torchrun
  int cpus_per_run = 0;                  // 0: Slurm's default; the run's threads follow it
  int max_parallel = 0;                  // the array's %limit; 0: none
  std::vector<std::string> sbatch_args;  // passed through as #SBATCH lines
  bool dry_run = false;
  bool wait = false;  // sbatch --wait: return once the array has ended, messages on stderr (sinkc bisect)
  int signal_lead_s = kSlurmSignalLeadS;
  int max_requeues = kSlurmMaxRequeues;
};
int submit_slurm(const std::vector<std::string>& targets, const SubmitOptions& options, const CommonOptions& common);

// Compiles one file; prints diagnostics to stderr. Returns the exit status.
int compile_file(Compilation& c, const std::string& file, const CommonOptions& common);

// Results (cli/results_commands.cpp, library sinkresults): read run
// directories, never LibTorch. A target is a run directory, a folder of runs,
// or a spec whose runs are looked up in `out` by name and plan hash.
struct ResultsOptions {
  std::string out = "runs";       // where `sinkc run` wrote the runs of a spec
  std::string format = "text";    // text, csv, json, markdown or latex (diff, table)
  std::vector<std::string> runs;  // --run: one for every spec target, or one for A and one for B
};
int diff(const std::string& a, const std::string& b, const ResultsOptions& options, const CommonOptions& common);
int table(const std::vector<std::string>& targets, const std::vector<std::string>& metrics,
          const ResultsOptions& options, const CommonOptions& common);
int report(const std::vector<std::string>& targets, const std::string& output, const std::string& title,
           const ResultsOptions& options, const CommonOptions& common);
// `sinkc bisect A B --metric ID` (cli/bisect.cpp): the fields that move the
// metric. `train` trains plan files into `out` (sinkc runs the runtime) and
// returns its exit status: 130 when interrupted.
struct BisectOptions {
  std::string metric;
  int seeds = 2;
  int max_runs = 64;  // training runs beyond A's and B's own
  std::string out = "runs";
  std::string format = "text";    // text, markdown or json
  std::vector<std::string> runs;  // --run, as for diff
};
using Trainer = std::function<int(const std::vector<std::string>& plan_files)>;
int bisect(const std::string& a, const std::string& b, const BisectOptions& options, const CommonOptions& common,
           const Trainer& train);

// `sinkc export RUNS --tensorboard DIR` (results/tensorboard.h).
int export_tensorboard(const std::vector<std::string>& targets, const std::string& dir, const ResultsOptions& options,
                       const CommonOptions& common);

}  // namespace sink::cli
