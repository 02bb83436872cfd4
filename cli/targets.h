// What `sinkc diff`, `table` and `report` are pointed at, turned into runs:
// a run directory, a folder of run directories, or a spec file whose runs
// are looked up in the runs folder by name and plan hash, the way `sinkc run`
// named them. A spec must be compiled with the same --set/--base as it was
// run with: they change the plans, hence the hashes. Here, in the command
// line's layer, not in results/: results/ reads run directories only and
// needs no front end.
#pragma once
#include <string>
#include <vector>

#include "compiler/program.h"
#include "results/run_data.h"

namespace sink::results {

// The spec did not compile; its diagnostics were printed to stderr.
struct SpecErrors : ResultsError {
  using ResultsError::ResultsError;
};

struct TargetOptions {
  std::string out = "runs";  // where `sinkc run` wrote the runs of a spec
  Options compile;           // --set, --base, --stdlib
  bool color = false;        // diagnostics in color
};

// One side of a diff: a run directory with the seeds of it found beside it,
// or the run `run` of a spec with all its seeds. `run` may be empty when the
// spec has a single run, and a pattern that matches one run (and its seeds).
// Seeds not run yet come back with Status::NotRun.
RunGroup resolve_group(const std::string& target, const std::string& run, const TargetOptions& options);

// Runs for table and report: run directories as given, every run directory
// in a folder, every run of a spec; with run names or patterns, only the runs
// answering to one and their seeds (a pattern that matches nothing is an
// error naming the runs there are).
std::vector<RunData> resolve_runs(const std::vector<std::string>& targets, const std::vector<std::string>& run_names,
                                  const TargetOptions& options);

bool is_spec_file(const std::string& target);

// `--run PATTERN...` (plan/plan.h's run_answers_to; repeatable): with no pattern every run, else those answering to
// any of them.
bool wanted_run(const std::string& run_name, const std::vector<std::string>& patterns);
// The error for the first of `patterns` that none of `run_names` answers to: it names the runs there are (each
// seed base once) and, for a plain name that is a typo, the closest. Empty when every pattern matches a run.
std::string unmatched_run_pattern(const std::vector<std::string>& patterns, const std::vector<std::string>& run_names,
                                  const std::string& where);

}  // namespace sink::results
