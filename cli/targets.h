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
// spec has a single run. Seeds not run yet come back with Status::NotRun.
RunGroup resolve_group(const std::string& target, const std::string& run, const TargetOptions& options);

// Runs for table and report: run directories as given, every run directory
// in a folder, every run of a spec; with run names, only those runs and
// their seeds (a name that matches nothing is an error).
std::vector<RunData> resolve_runs(const std::vector<std::string>& targets, const std::vector<std::string>& run_names,
                                  const TargetOptions& options);

bool is_spec_file(const std::string& target);

}  // namespace sink::results
