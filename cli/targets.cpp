#include "cli/targets.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>

#include "compiler/pipeline.h"
#include "compiler/source.h"

namespace sink::results {
namespace fs = std::filesystem;

namespace {

std::vector<Plan> compile_spec(const std::string& spec, const TargetOptions& options) {
  Compilation c(options.compile);
  if (!c.add_file(spec)) throw ResultsError(fmt::format("cannot read '{}'", spec));
  c.run();
  std::cerr << c.diagnostics().render(options.color);
  if (c.diagnostics().has_errors()) throw SpecErrors(fmt::format("{} has errors", spec));
  return c.plans();
}

// Where `sinkc run` put the plan, or a NotRun entry saying what is there instead.
RunData find_run(const Plan& plan, const TargetOptions& options) {
  fs::path dir = fs::path(options.out) / plan.dir_name();
  if (is_run_dir(dir.string())) {
    RunData found = load_run(dir.string());
    // A content-cached run is a link to the same plan under another name and
    // sweep point: the spec's plan says which row it is.
    found.plan = plan;
    return found;
  }
  // The same content completed under another name (a sweep point equal to
  // an experiment of another spec) is this run too, as `sinkc run` would
  // find it by content and link it.
  std::error_code ec;
  const std::string suffix = std::string(1, '-') + plan.hash8();  // (not "-" + ...: a false GCC 12 -Wrestrict)
  for (const auto& e : fs::directory_iterator(options.out, ec)) {
    std::string leaf = e.path().filename().string();
    if (leaf.size() <= suffix.size() || leaf.compare(leaf.size() - suffix.size(), suffix.size(), suffix) != 0 ||
        !is_run_dir(e.path().string()))
      continue;
    RunData same = load_run(e.path().string());
    if (same.status != Status::Completed || same.plan.hash() != plan.hash()) continue;
    same.plan = plan;
    return same;
  }
  RunData r;
  r.dir = dir.string();
  r.plan = plan;
  r.status = Status::NotRun;
  // A run of the same name with another hash: the spec changed since, or it
  // ran with other --set/--base options. Say so rather than leave a puzzle.
  std::vector<std::string> others;
  for (const auto& e : fs::directory_iterator(options.out, ec)) {
    std::string leaf = e.path().filename().string();
    if (leaf.size() == plan.name.size() + 9 && leaf.rfind(plan.name + "-", 0) == 0 && is_run_dir(e.path().string()))
      others.push_back(leaf);
  }
  std::sort(others.begin(), others.end());
  if (!others.empty())
    r.reason = fmt::format(
        "{} holds {} from another plan (the spec changed, or it ran with other --set/--base); "
        "name that directory to use it",
        options.out, others.front());
  return r;
}

}  // namespace

bool wanted_run(const std::string& run_name, const std::vector<std::string>& patterns) {
  return patterns.empty() ||
         std::any_of(patterns.begin(), patterns.end(), [&](const auto& p) { return run_answers_to(run_name, p); });
}

std::string unmatched_run_pattern(const std::vector<std::string>& patterns, const std::vector<std::string>& run_names,
                                  const std::string& where) {
  for (const auto& pattern : patterns) {
    if (std::any_of(run_names.begin(), run_names.end(), [&](const auto& n) { return run_answers_to(n, pattern); }))
      continue;
    std::vector<std::string> bases;
    for (const auto& n : run_names)
      if (std::find(bases.begin(), bases.end(), seed_base(n)) == bases.end()) bases.push_back(seed_base(n));
    // A long sweep's names would bury the message: the first ones say what the names look like.
    constexpr size_t kMostNames = 20;
    std::string list =
        fmt::format("{}", fmt::join(bases.begin(), bases.begin() + std::min(bases.size(), kMostNames), ", "));
    if (bases.size() > kMostNames) list += fmt::format(", ... ({} in all)", bases.size());
    const bool plain = pattern.find_first_of("*?[") == std::string::npos;
    const std::string guess = plain ? closest(pattern, bases) : "";
    return fmt::format("no run {} '{}' in {}{}; its runs: {}", plain ? "named" : "matches", pattern, where,
                       guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess), bases.empty() ? "none" : list);
  }
  return "";
}

bool is_spec_file(const std::string& target) {
  std::error_code ec;
  return fs::is_regular_file(target, ec);
}

RunGroup resolve_group(const std::string& target, const std::string& run, const TargetOptions& options) {
  if (is_run_dir(target)) return with_seed_siblings(load_run(target));
  if (!is_spec_file(target)) {
    std::error_code ec;
    if (fs::is_directory(target, ec))
      throw ResultsError(fmt::format("'{}' is not a run directory (it has no plan.toml)", target));
    throw ResultsError(fmt::format("'{}' is neither a run directory nor a spec file", target));
  }
  std::vector<Plan> plans = compile_spec(target, options);
  std::vector<std::string> names;
  for (const auto& p : plans)
    if (std::find(names.begin(), names.end(), seed_base(p.name)) == names.end()) names.push_back(seed_base(p.name));
  std::string want = run;
  if (want.empty()) {
    if (names.size() != 1) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw ResultsError(fmt::format("{} has {} runs: pick one with --run ({})", target, names.size(), list));
    }
    want = names.front();
  }
  std::vector<RunData> runs;
  std::vector<std::string> all;
  for (const auto& p : plans) {
    all.push_back(p.name);
    if (p.answers_to(want)) runs.push_back(find_run(p, options));
  }
  if (runs.empty()) throw ResultsError(unmatched_run_pattern({want}, all, target));
  auto groups = group_seeds(runs);
  if (groups.size() > 1) {
    std::vector<std::string> matched;
    for (const auto& g : groups) matched.push_back(g.name);
    throw ResultsError(fmt::format("'{}' matches {} runs in {} ({}): name one", want, groups.size(), target,
                                   fmt::join(matched, ", ")));
  }
  return groups.front();
}

std::vector<RunData> resolve_runs(const std::vector<std::string>& targets, const std::vector<std::string>& run_names,
                                  const TargetOptions& options) {
  auto wanted = [&](const Plan& p) { return wanted_run(p.name, run_names); };
  std::vector<std::string> all;  // every run's name, for a pattern that matches none of them
  std::vector<RunData> out;
  auto add = [&](RunData r) {
    // The same folder twice (named twice); two names of one content-cached
    // folder are two rows.
    for (const auto& have : out)
      if (!r.dir.empty() && have.dir == r.dir && have.plan.name == r.plan.name) return;
    out.push_back(std::move(r));
  };
  for (const auto& t : targets) {
    std::error_code ec;
    if (is_run_dir(t)) {
      // Named on its own: not filtered, but a pattern may match it.
      RunData r = load_run(t);
      all.push_back(r.plan.name);
      add(std::move(r));
    } else if (fs::is_directory(t, ec)) {
      std::vector<std::string> skipped;
      auto runs = load_run_folder(t, &skipped);
      for (const auto& s : skipped) std::cerr << "sinkc: " << s << "\n";
      if (runs.empty()) throw ResultsError(fmt::format("no run directories (folders with a plan.toml) in '{}'", t));
      for (auto& r : runs) {
        all.push_back(r.plan.name);
        if (wanted(r.plan)) add(std::move(r));
      }
    } else if (is_spec_file(t)) {
      for (const auto& p : compile_spec(t, options)) {
        all.push_back(p.name);
        if (wanted(p)) add(find_run(p, options));
      }
    } else {
      throw ResultsError(fmt::format("'{}' is neither a run directory, a folder of runs, nor a spec file", t));
    }
  }
  if (auto error = unmatched_run_pattern(run_names, all, fmt::format("{}", fmt::join(targets, ", "))); !error.empty())
    throw ResultsError(error);
  return out;
}

}  // namespace sink::results
