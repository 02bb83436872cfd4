#include "results/run_data.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unistd.h>

#include "plan/normalizers.h"
#include "plan/numerics_version.h"
#include "plan/run_record.h"

namespace sink::results {
namespace fs = std::filesystem;
using json = nlohmann::json;
namespace eval_key = run_record::eval;
namespace summary_key = run_record::summary;
using run_record::RunStatus;

const char* status_name(Status s) {
  switch (s) {
    case Status::Completed: return "completed";
    case Status::Running: return "running";
    case Status::Stopped: return "stopped";
    case Status::Diverged: return "diverged";
    case Status::Failed: return "failed";
    case Status::NotRun: return "not run";
  }
  return "?";
}

int64_t RunData::steps_total() const {
  auto it = plan.fields.find("train.steps");
  return it == plan.fields.end() ? 0 : it->second.i;
}

bool RunData::sink_from_proxy() const {
  if (const Eval* e = last(); e && e->sink_from_proxy) return *e->sink_from_proxy;
  auto normalize = plan.fields.find("attention.normalize");
  auto differential = plan.fields.find("attention.differential");
  if (normalize == plan.fields.end()) return false;
  return sink::sink_from_proxy(normalize->second.s, differential != plan.fields.end() && differential->second.b);
}

bool RunData::stale() const { return status == Status::Completed && numerics_are_stale(numerics_version); }

std::string RunData::status_text() const {
  const Eval* e = last();
  std::string at = e ? fmt::format("step {} of {}", e->step, steps_total()) : "no evaluation yet";
  switch (status) {
    case Status::Completed:
      return stale() ? fmt::format(
                           "completed, stale (trained under numerics version {}, this sinklab computes "
                           "version {}; `sinkc run --retrain-stale` trains it again)",
                           numerics_version, kNumericsVersion)
                     : "completed";
    case Status::Running: return "running or interrupted: " + at;
    case Status::NotRun: return reason.empty() ? "not run yet" : "not run yet; " + reason;
    default: return fmt::format("{}: {}", status_name(status), reason.empty() ? at : reason);
  }
}

namespace {

// JSON writes non-finite numbers as null: read them back as NaN, not zero.
double number(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

// A per-layer list of numbers.
std::vector<double> layers(const json& j, const char* key) {
  std::vector<double> out;
  if (auto it = j.find(key); it != j.end() && it->is_array())
    for (const auto& m : *it) out.push_back(m.is_number() ? m.get<double>() : NAN);
  return out;
}

// A [layer][head] table of numbers.
std::vector<std::vector<double>> table(const json& j, const char* key) {
  std::vector<std::vector<double>> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& layer : *it) {
    std::vector<double> heads;
    if (layer.is_array())
      for (const auto& h : layer) heads.push_back(h.is_number() ? h.get<double>() : NAN);
    out.push_back(std::move(heads));
  }
  return out;
}

// {"1": 2.5, ...}: an object keyed by whole numbers (a position, a count of tokens, a factor); a string value is
// a reason there is no number (into `missing` where given).
std::map<int, double> by_number(const json& j, const char* key, const std::string& where,
                                std::map<int, std::string>* missing = nullptr) {
  std::map<int, double> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items()) {
    int n = 0;
    try {
      n = std::stoi(k);
    } catch (const std::exception&) {
      throw ResultsError(fmt::format("{}: '{}' has a key '{}' that is not a number", where, key, k));
    }
    if (v.is_string() && missing) (*missing)[n] = v.get<std::string>();
    out[n] = v.is_number() ? v.get<double>() : NAN;
  }
  return out;
}

// The first key of a metrics.jsonl line or summary.json that this sinklab
// never writes: a file from another tool or a newer version, read wrongly if
// read at all.
template <size_t N>
std::optional<std::string> unknown_key(const json& j, const std::array<std::string_view, N>& keys) {
  for (const auto& [k, v] : j.items())
    if (!run_record::is_one_of(keys, k)) return k;
  return std::nullopt;
}

// summary.json's status, as results show it; nullopt for one the runtime never writes.
std::optional<Status> parse_status(const std::string& s) {
  if (s.empty()) return Status::Running;
  auto written = run_record::parse_status(s);
  if (!written) return std::nullopt;
  switch (*written) {
    case RunStatus::Completed: return Status::Completed;
    case RunStatus::Diverged: return Status::Diverged;
    case RunStatus::Failed: return Status::Failed;
    case RunStatus::Stopped:
    case RunStatus::Interrupted: return Status::Stopped;  // resumable with --resume
    case RunStatus::Running: return Status::Running;
  }
  return std::nullopt;
}

// summary.json says "running" from the start of a run; a SIGKILL leaves it
// so. On the host that ran it, a pid that no longer exists says killed.
bool process_is_gone(const json& summary) {
  auto it = summary.find(summary_key::kProcess);
  if (it == summary.end() || !it->is_object()) return false;  // written before runs recorded it
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || it->value(summary_key::kHost, "") != host) return false;
  const int64_t pid = it->value(summary_key::kPid, int64_t{0});
  std::error_code ec;
  return pid > 0 && !fs::exists(fmt::format("/proc/{}", pid), ec);
}

}  // namespace

Eval read_eval(const json& j, const std::string& where) {
  if (auto k = unknown_key(j, eval_key::kKeys))
    throw ResultsError(fmt::format("{}: key '{}' is none that this sinklab writes", where, *k));
  Eval e;
  e.step = j.value(eval_key::kStep, int64_t{0});
  e.tokens = j.value(eval_key::kTokens, int64_t{0});
  e.lr = number(j, eval_key::kLr);
  e.train_loss = number(j, eval_key::kTrainLoss);
  e.valid_loss = number(j, eval_key::kValidLoss);
  e.tokens_per_s = number(j, eval_key::kTokensPerS);
  e.elapsed_s = number(j, eval_key::kElapsedS);
  e.train_s = number(j, eval_key::kTrainS);
  e.sink = by_number(j, eval_key::kSink, where);
  if (j.contains(eval_key::kSinkStar)) e.sink_star = number(j, eval_key::kSinkStar);
  e.alpha = table(j, eval_key::kAlpha);
  e.alpha_star = table(j, eval_key::kAlphaStar);
  e.massive = layers(j, eval_key::kMassive);
  e.gate = layers(j, eval_key::kGate);
  if (j.contains(eval_key::kSinkLogit)) e.sink_logit = number(j, eval_key::kSinkLogit);
  e.max_activation = layers(j, eval_key::kMaxActivation);
  if (auto it = j.find(eval_key::kSinkFromProxy); it != j.end() && it->is_boolean())
    e.sink_from_proxy = it->get<bool>();
  for (std::string_view name : eval_key::kHeadTables)
    if (auto t = table(j, std::string(name).c_str()); !t.empty()) e.head_tables[std::string(name)] = std::move(t);
  if (auto it = j.find(eval_key::kWindowedLoss); it != j.end() && it->is_object()) {
    e.window = it->value("window", int64_t{0});
    e.windowed_loss = by_number(*it, "loss", where);
  }
  if (auto it = j.find(eval_key::kQuantizedLoss); it != j.end() && it->is_object())
    for (const auto& [k, v] : it->items()) e.quantized_loss[k] = v.is_number() ? v.get<double>() : NAN;
  e.longer_context_loss = by_number(j, eval_key::kLongerContextLoss, where, &e.longer_context_missing);
  e.residual_kurtosis = layers(j, eval_key::kResidualKurtosis);
  e.attention_output_max = layers(j, eval_key::kAttentionOutputMax);
  e.attention_output_kurtosis = layers(j, eval_key::kAttentionOutputKurtosis);
  return e;
}

bool is_run_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "plan.toml", ec);
}

RunData load_run(const std::string& dir) {
  RunData r;
  r.dir = dir;
  try {
    r.plan = read_plan((fs::path(dir) / "plan.toml").string());
  } catch (const PlanError& e) {
    throw ResultsError(e.what());
  }
  {
    std::ifstream f(fs::path(dir) / run_record::files::kMetrics);
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
      auto j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.is_object())  // a torn last line is skipped
        r.evals.push_back(read_eval(j, fmt::format("{}/metrics.jsonl:{}", dir, n)));
    }
    std::stable_sort(r.evals.begin(), r.evals.end(), [](const Eval& a, const Eval& b) { return a.step < b.step; });
  }
  {
    namespace loss_key = run_record::loss;
    std::map<int64_t, double> by_step;  // (a step written twice, by a run resumed before truncating: the later)
    std::ifstream f(fs::path(dir) / run_record::files::kLosses);
    std::string line;
    while (std::getline(f, line)) {
      auto j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains(loss_key::kStep) || !j[loss_key::kStep].is_number_integer())
        continue;  // a torn last line
      const json& loss = j.value(loss_key::kLoss, json());
      by_step[j[loss_key::kStep].get<int64_t>()] = loss.is_number() ? loss.get<double>() : NAN;
    }
    r.losses.assign(by_step.begin(), by_step.end());
  }
  if (std::ifstream mf(fs::path(dir) / "attention_maps.json"); mf) {
    json maps = json::parse(mf, nullptr, false);
    if (maps.is_object() && maps.contains("maps") && maps["maps"].is_array())
      for (const auto& m : maps["maps"]) {
        if (!m.is_object() || !m.contains("A") || !m["A"].is_array()) continue;
        AttentionMap a{m.value("layer", 0), m.value("head", 0), {}};
        for (const auto& row : m["A"])
          if (row.is_array()) a.A.push_back(row.get<std::vector<double>>());
        r.maps.push_back(std::move(a));
      }
  }
  std::ifstream sf(fs::path(dir) / "summary.json");
  json summary = sf ? json::parse(sf, nullptr, false) : json();
  if (summary.is_object()) {
    if (auto k = unknown_key(summary, summary_key::kKeys))
      throw ResultsError(fmt::format("{}/summary.json: key '{}' is none that this sinklab writes", dir, *k));
    const std::string written = summary.value(summary_key::kStatus, "");
    const std::optional<Status> status = parse_status(written);
    r.status = status.value_or(Status::Failed);
    r.reason = status ? summary.value(summary_key::kReason, "")
                      : fmt::format("summary.json's status '{}' is none that this sinklab writes", written);
    if (r.status == Status::Running && process_is_gone(summary)) {
      r.status = Status::Stopped;
      const Eval* e = r.last();
      r.reason =
          fmt::format("killed: its process ({}) is gone{}; `sinkc run --resume` continues from the last checkpoint",
                      summary[summary_key::kProcess].value(summary_key::kPid, int64_t{0}),
                      e ? fmt::format(", last evaluation at step {}", e->step) : "");
    }
    if (auto v = summary.find(summary_key::kNumericsVersion); v != summary.end() && v->is_number_integer())
      r.numerics_version = v->get<int64_t>();
    r.tokens_per_s = number(summary, summary_key::kTokensPerS);
    r.wall_s = number(summary, summary_key::kWallS);
    // A diverged run's last good evaluation may only be in summary.final.
    if (r.evals.empty() && summary.contains(summary_key::kFinal) && summary[summary_key::kFinal].is_object())
      r.evals.push_back(read_eval(summary[summary_key::kFinal], dir + "/summary.json's final"));
  } else {
    // `sinkc compile` folders hold plan.toml alone: nothing has run there.
    std::error_code ec;
    bool started = !r.evals.empty() || fs::exists(fs::path(dir) / "log.txt", ec);
    r.status = started ? Status::Running : Status::NotRun;
  }
  return r;
}

std::vector<RunData> load_run_folder(const std::string& folder, std::vector<std::string>* skipped) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (is_run_dir(e.path().string())) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  std::vector<RunData> out;
  for (const auto& d : dirs) {
    try {
      out.push_back(load_run(d));
      // A link NAME-hash8 -> other-hash8 is the content cache: the same plan
      // under another name. The row is the run the link stands for.
      const std::string link = fs::path(d).filename().string();
      if (fs::is_symlink(d, ec) && link.size() > 9 && link[link.size() - 9] == '-')
        out.back().plan.name = link.substr(0, link.size() - 9);
    } catch (const ResultsError& e) {
      if (skipped) skipped->push_back(fmt::format("skipped {}: {}", d, e.what()));
    }
  }
  return out;
}

bool same_but_seed(const Plan& a, const Plan& b) {
  if (seed_base(a.name) != seed_base(b.name) || a.fields.size() != b.fields.size()) return false;
  for (const auto& [path, value] : a.fields) {
    if (path == "train.seed") continue;
    auto it = b.fields.find(path);
    if (it == b.fields.end() || it->second != value) return false;
  }
  return true;
}

namespace {

int64_t seed_of(const RunData& r) {
  auto it = r.plan.fields.find("train.seed");
  return it == r.plan.fields.end() ? 0 : it->second.i;
}

void sort_by_seed(RunGroup& g) {
  std::stable_sort(g.runs.begin(), g.runs.end(),
                   [](const RunData& a, const RunData& b) { return seed_of(a) < seed_of(b); });
}

}  // namespace

RunGroup with_seed_siblings(const RunData& run) {
  RunGroup g{seed_base(run.plan.name), {run}};
  if (!seed_suffix(run.plan.name) || run.dir.empty()) return g;
  fs::path folder = fs::path(run.dir).parent_path();
  if (folder.empty()) folder = ".";
  const std::string prefix = g.name + ".seed=";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    std::string leaf = e.path().filename().string();
    // Cheap filter on the directory name before reading any plan.
    if (leaf.rfind(prefix, 0) != 0 || fs::equivalent(e.path(), run.dir, ec) || !is_run_dir(e.path().string())) continue;
    RunData other;
    try {
      other = load_run(e.path().string());
    } catch (const ResultsError&) {
      continue;  // unreadable: not a seed we can count
    }
    // A sibling from an older version of the spec (another hash) is not a seed of this run.
    if (same_but_seed(run.plan, other.plan) && seed_of(other) != seed_of(run)) g.runs.push_back(std::move(other));
  }
  sort_by_seed(g);
  return g;
}

std::vector<RunGroup> group_seeds(const std::vector<RunData>& runs) {
  std::vector<RunGroup> groups;
  for (const auto& r : runs) {
    RunGroup* home = nullptr;
    if (seed_suffix(r.plan.name))
      for (auto& g : groups)
        if (same_but_seed(g.first().plan, r.plan)) home = &g;
    if (home)
      home->runs.push_back(r);
    else
      groups.push_back({seed_base(r.plan.name), {r}});
  }
  for (auto& g : groups) sort_by_seed(g);
  return groups;
}

}  // namespace sink::results
