// Run directories with known numbers, written the way the runtime writes them
// (runtime/training/train.cpp, runtime/training/run_dir.cpp): plan.toml, metrics.jsonl,
// losses.jsonl, summary.json, log.txt. Shared by results_tests and results_fixture (the
// browser test's input), so that neither needs LibTorch or a real training.
#pragma once
#include "plan/numerics_version.h"
#include "plan/run_record.h"
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "compiler/pipeline.h"
#include "support/remove_tree.h"
#include "tests/source_paths.h"

namespace sink::testing {

// Every run of `spec` (presets are known without an import), compiled with the source tree's stdlib.
inline std::vector<Plan> compile_plans(const std::string& spec, std::vector<std::string> overrides = {}) {
  Options options{std::string(sinktest::source_dir()) + "/stdlib", std::move(overrides), ""};
  Compilation c(options);
  c.add_text(std::string(sinktest::source_dir()) + "/synthetic.sink", spec);
  c.run();
  if (c.diagnostics().has_errors()) throw std::runtime_error(c.diagnostics().render());
  return c.plans();
}

inline Plan plan_named(const std::vector<Plan>& plans, const std::string& name) {
  for (const auto& p : plans)
    if (p.name == name) return p;
  throw std::runtime_error("no plan named " + name);
}

// One metrics.jsonl line.
struct EvalLine {
  int64_t step = 0;
  double valid_loss = 2.0, train_loss = 2.1;
  std::map<int, double> sink = {{1, 50.0}};
  double sink_star = -1;  // < 0: not measured (no k* column)
  std::vector<std::vector<double>> alpha = {{0.5, 0.5}};
  std::vector<std::vector<double>> alpha_star;  // empty: no k* column
  std::vector<double> massive = {1.0};
  std::vector<double> gate;  // empty: not a gated-attention run
  double sink_logit = -1;    // < 0: no sink logit
  double tokens_per_s = 1000;
  int64_t tokens_per_step = 64;  // 0: no "tokens", as in runs recorded before the count
  // The runtime's word on proxy scores; nullopt: not written, as by runs recorded before it was.
  std::optional<bool> sink_from_proxy;

  nlohmann::json json() const {
    nlohmann::json j;
    j["step"] = step;
    if (tokens_per_step > 0) j["tokens"] = step * tokens_per_step;
    j["lr"] = 1e-3;
    j["train_loss"] = train_loss;
    j["valid_loss"] = valid_loss;
    nlohmann::json s = nlohmann::json::object();
    for (const auto& [k, v] : sink) s[std::to_string(k)] = v;
    j["sink"] = s;
    if (sink_star >= 0) j["sink_star"] = sink_star;
    j["alpha"] = alpha;
    if (!alpha_star.empty()) j["alpha_star"] = alpha_star;
    j["massive"] = massive;
    if (!gate.empty()) j["gate"] = gate;
    if (sink_logit >= 0) j[sink::run_record::eval::kSinkLogit] = sink_logit;
    j["elapsed_s"] = static_cast<double>(step) / 100;
    j["tokens_per_s"] = tokens_per_s;
    if (sink_from_proxy) j[sink::run_record::eval::kSinkFromProxy] = *sink_from_proxy;
    return j;
  }
};

struct SyntheticRun {
  Plan plan;
  std::string status = "completed";  // completed | diverged | failed | stopped | running (no summary.json yet)
  std::string reason;
  std::vector<EvalLine> evals;
  int64_t numerics_version = kNumericsVersion;     // summary.json's, as this sinklab writes it; < 0: none recorded
  std::vector<std::pair<int64_t, double>> losses;  // losses.jsonl's (step, loss); empty: no file, as in older runs
};

// Writes folder/<run>-<hash8>/ and returns its path.
inline std::string write_run(const std::string& folder, const SyntheticRun& r) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(folder) / r.plan.dir_name();
  fs::create_directories(dir / "checkpoint");
  std::ofstream(dir / "plan.toml") << to_toml(r.plan);
  std::ofstream metrics(dir / "metrics.jsonl");
  for (const auto& e : r.evals) metrics << e.json().dump() << "\n";
  if (!r.losses.empty()) {
    std::ofstream losses(dir / sink::run_record::files::kLosses);
    for (const auto& [step, loss] : r.losses)
      losses << nlohmann::json{{sink::run_record::loss::kStep, step}, {sink::run_record::loss::kLoss, loss}}.dump()
             << "\n";
  }
  std::ofstream(dir / "log.txt") << "run " << r.plan.name << "\n";
  if (r.status != "running") {
    nlohmann::json s = {{"name", r.plan.name}, {"hash", r.plan.hash()}, {"status", r.status}, {"wall_s", 12.5}};
    if (!r.reason.empty()) s["reason"] = r.reason;
    if (r.numerics_version >= 0) s["numerics_version"] = r.numerics_version;
    if (!r.evals.empty()) s["final"] = r.evals.back().json();
    if (r.status == "completed" && !r.evals.empty()) s["tokens_per_s"] = r.evals.back().tokens_per_s;
    std::ofstream(dir / "summary.json") << s.dump(2) << "\n";
  }
  return dir.string();
}

// A fresh, empty temporary folder, removed by the destructor.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag) {
    namespace fs = std::filesystem;
    static int count = 0;
    path = (fs::temp_directory_path() /
            ("sinklab-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(count++)))
               .string();
    sink::remove_tree(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    sink::remove_tree(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Evaluations at steps 10, 20, ... whose last line carries the given numbers
// and whose earlier lines lead up to them.
inline std::vector<EvalLine> curve(int evals, const EvalLine& last) {
  std::vector<EvalLine> out;
  for (int k = 1; k <= evals; ++k) {
    EvalLine e = last;
    double t = static_cast<double>(evals - k);
    e.step = 10 * k;
    e.valid_loss = last.valid_loss + 0.3 * t;
    e.train_loss = last.train_loss + 0.35 * t;
    for (auto& [pos, v] : e.sink) v = v * k / evals;
    if (e.sink_star >= 0) e.sink_star = last.sink_star * k / evals;
    out.push_back(e);
  }
  return out;
}

}  // namespace sink::testing
