// A completed run trained under an older numerics version than this
// sinklab's (plan/numerics_version.h), or under none recorded: its numbers
// may not be what this sinklab computes for its plan. The run cache reports
// it as stale rather than reusing it as current; `--retrain-stale` trains it
// again, after setting its results aside where a crash cannot take them.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace sink::rt {

// summary.json's numerics_version; 0 where it has none (runs from before it was recorded).
int64_t recorded_numerics_version(const nlohmann::json& summary);
// A completed run whose numerics version is older than this sinklab's.
bool is_stale(const nlohmann::json& summary);
// What `sinkc run` says of a stale run it keeps.
std::string stale_note(const nlohmann::json& summary);

// Copies everything `run_dir` holds into run_dir/stale/numerics-<v>/ (checkpoints hard-linked: the runtime
// only ever replaces them by rename), synced to disk, then renamed into place whole; only then are the
// run's checkpoints removed, so that the retraining starts from step 0 even under --resume. A crash at
// any point leaves the results either where they were or in the stale folder. Returns that folder.
std::string set_aside_stale_results(const std::string& run_dir, const nlohmann::json& summary);

}  // namespace sink::rt
