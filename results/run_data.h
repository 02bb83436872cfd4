// Runs as the runtime leaves them on disk, runs/<run>-<hash8>/: plan.toml,
// metrics.jsonl (one line per evaluation), summary.json (written when the run
// ends). Read-only and torch-free: `sinkc diff`, `table` and `report` read
// these without loading LibTorch.
#pragma once
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plan/plan.h"

namespace sink::results {

struct ResultsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One line of metrics.jsonl: what the runtime measured at `step`.
struct Eval {
  int64_t step = 0;
  int64_t tokens = 0;
  double lr = NAN;
  double train_loss = NAN;  // mean over the steps since the previous evaluation
  double valid_loss = NAN;
  std::map<int, double> sink;  // position k (1-based) -> Sink_k^eps in %
  std::optional<double> sink_star;
  std::vector<std::vector<double>> alpha;       // [layer][head] mean alpha_1
  std::vector<std::vector<double>> alpha_star;  // [layer][head] on the k* column or sink token, when there is one
  std::vector<double> massive;                  // per layer: |h_1| / mean_{t>1} |h_t|
  std::vector<double> gate;                     // per layer: mean gate value (gated attention)
  std::optional<double> sink_logit;             // Sink_logit^eps in %, with a sink logit
  std::vector<double> max_activation;           // per layer: max |h|
  // [layer][head] tables under plan/run_record.h's eval::kHeadTables names
  // (sink-logit share, first-token key/value norm ratios, query-key cosine).
  std::map<std::string, std::vector<std::vector<double>>> head_tables;
  double tokens_per_s = NAN;
  double elapsed_s = NAN;  // training seconds since the process started (or resumed) the run
  double train_s = NAN;    // the part of elapsed_s not spent measuring or checkpointing (NaN in older runs)
  // Sink values and alpha from the paper's proxy scores; nullopt in runs recorded before the runtime said.
  std::optional<bool> sink_from_proxy;
  // What a sink costs (runtime/measurement/sink_costs.h), where measured: the losses on valid_loss's sequences
  // under a window of `window` keys keeping K first tokens, after WbAb fake quantization ("w8a8"), and on
  // sequences F x the context (or why there is none); per layer, the outliers.
  int64_t window = 0;
  std::map<int, double> windowed_loss;
  std::map<std::string, double> quantized_loss;
  std::map<int, double> longer_context_loss;
  std::map<int, std::string> longer_context_missing;
  std::vector<double> residual_kurtosis, attention_output_max, attention_output_kurtosis;
};

// `Running` also covers a run that was killed: only the end of a run writes
// summary.json, so a missing one cannot tell the two apart.
enum class Status { Completed, Running, Stopped, Diverged, Failed, NotRun };
const char* status_name(Status s);

// One head's attention on the run's probe sequence (attention_maps.json).
struct AttentionMap {
  int layer = 0, head = 0;
  std::vector<std::vector<double>> A;  // [query][key], token keys only
};

struct RunData {
  std::string dir;  // the run directory; for NotRun, where it would be
  Plan plan;
  Status status = Status::NotRun;
  std::string reason;       // summary.json's, for diverged/failed/stopped; for NotRun, a hint
  std::vector<Eval> evals;  // in step order
  // losses.jsonl: the training loss every train.log_every steps, in step order (empty in runs from before it).
  std::vector<std::pair<int64_t, double>> losses;
  double tokens_per_s = NAN;  // the whole run's, from summary.json
  double wall_s = NAN;
  std::vector<AttentionMap> maps;  // written at the end of a run; empty before
  int64_t numerics_version = 0;    // summary.json's (plan/numerics_version.h); 0 where it records none

  const Eval* last() const { return evals.empty() ? nullptr : &evals.back(); }
  int64_t steps_total() const;
  // Its Sink values (and alpha) come from the paper's proxy scores, not the attention itself (unnormalized
  // attention, the paper's asterisk): as its evaluations say, or, for a run recorded before they said or not run
  // yet, as its plan says (plan/normalizers.h's sink_from_proxy, the rule the runtime follows).
  bool sink_from_proxy() const;
  // Completed under an older numerics version than this sinklab's: shown with its numbers, marked stale.
  bool stale() const;
  // "completed", "completed, stale (...)", "running or interrupted: step 750 of 1500",
  // "diverged: non-finite loss at step 12", ...
  std::string status_text() const;
};

// A run and its other seeds (`train.seeds = n` expands NAME into NAME.seed=K):
// the unit that diff and table aggregate over.
struct RunGroup {
  std::string name;  // the run name without `.seed=K`
  std::vector<RunData> runs;
  const RunData& first() const { return runs.front(); }
};

// One metrics.jsonl line (or the runtime's measurement before it is written); `where` names it in errors.
Eval read_eval(const nlohmann::json& j, const std::string& where);

bool is_run_dir(const std::string& path);
RunData load_run(const std::string& dir);  // throws ResultsError
// Every run directory directly inside `folder`, sorted by name. One whose
// plan cannot be read (written by an older schema, edited by hand) is
// skipped with a line in `skipped`, rather than hiding all the others.
std::vector<RunData> load_run_folder(const std::string& folder, std::vector<std::string>* skipped = nullptr);

// True when the plans are the same but for the seed: two seeds of one run.
bool same_but_seed(const Plan& a, const Plan& b);
// `run` and the seeds of it found beside it in its runs folder, by seed.
RunGroup with_seed_siblings(const RunData& run);
// Groups runs by seed base (and identical plans but for the seed), keeping
// the order in which each group first appears.
std::vector<RunGroup> group_seeds(const std::vector<RunData>& runs);

}  // namespace sink::results
