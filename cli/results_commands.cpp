// `sinkc diff`, `sinkc table`, `sinkc report`, `sinkc export --tensorboard`:
// the torch-free commands that read run directories. Declared in cli/commands.h.
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>

#include "cli/commands.h"
#include "cli/targets.h"
#include "results/bisection_record.h"
#include "results/metric_diff.h"
#include "results/report_html.h"
#include "results/table.h"
#include "results/tensorboard.h"

namespace sink::cli {
namespace fs = std::filesystem;
using namespace sink::results;

namespace {

TargetOptions target_options(const ResultsOptions& options, const CommonOptions& common) {
  return {options.out, common.options(), common.color == 1};
}

// Spec errors were printed as diagnostics (exit 1); anything else is a
// target that cannot be read or a bad argument (exit 2).
template <typename F>
int guarded(F&& body) {
  try {
    return body();
  } catch (const SpecErrors&) {
    return 1;
  } catch (const ResultsError& e) {
    fmt::print(stderr, "sinkc: {}\n", e.what());
    return 2;
  }
}

// sinkc's option parser checks the name already; a caller from a test or a benchmark gets the same answer.
Format output_format(const ResultsOptions& options) {
  if (auto f = parse_format(options.format)) return *f;
  throw ResultsError(fmt::format("unknown format '{}': use {}", options.format, kFormatNames));
}

std::string side_label(const std::string& target, const std::string& run) {
  return is_spec_file(target) ? fmt::format("{} --run {}", target, run) : target;
}

bool any_spec(const std::vector<std::string>& targets) {
  for (const auto& t : targets)
    if (is_spec_file(t)) return true;
  return false;
}

void hint_not_run(const char* side, const std::string& target, const RunGroup& g, const ResultsOptions& options) {
  for (const auto& r : g.runs)
    if (r.status == Status::NotRun) {
      fmt::print(stderr, "sinkc: {} ({}) has not run yet: sinkc run {} --run {} --out {}\n", side, r.plan.name, target,
                 g.name, options.out);
      return;
    }
}

}  // namespace

int diff(const std::string& a, const std::string& b, const ResultsOptions& options, const CommonOptions& common) {
  return guarded([&] {
    const Format format = output_format(options);
    if (options.runs.size() > 2) throw ResultsError("--run: give it once (for every spec) or twice (for A, then B)");
    const std::string run_a = options.runs.empty() ? "" : options.runs.front();
    const std::string run_b = options.runs.empty() ? "" : options.runs.back();
    auto to = target_options(options, common);
    RunGroup ga = resolve_group(a, run_a, to);
    RunGroup gb = resolve_group(b, run_b, to);
    hint_not_run("A", a, ga, options);
    hint_not_run("B", b, gb, options);
    std::string name_a = ga.name, name_b = gb.name;
    RunDiff d = diff_runs({side_label(a, name_a), std::move(ga)}, {side_label(b, name_b), std::move(gb)});
    fmt::print("{}", render(d, format));
    return 0;
  });
}

int table(const std::vector<std::string>& targets, const std::vector<std::string>& metrics,
          const ResultsOptions& options, const CommonOptions& common) {
  return guarded([&] {
    const Format format = output_format(options);
    for (const auto& m : metrics) metric_by_id(m);  // a typo fails before anything is read
    auto runs = resolve_runs(targets, options.runs, target_options(options, common));
    auto groups = group_seeds(runs);
    // A spec lists its runs in sweep order already; a folder lists them by name.
    if (!any_spec(targets)) sort_like_sweeps(groups);
    fmt::print("{}", build_table(groups, metrics).data_table().render(format));
    return 0;
  });
}

int report(const std::vector<std::string>& targets, const std::string& output, const std::string& title,
           const ResultsOptions& options, const CommonOptions& common) {
  return guarded([&] {
    auto runs = resolve_runs(targets, options.runs, target_options(options, common));
    if (!any_spec(targets)) {
      // Folders list runs by name; the sweeps' order reads better, and its
      // first run is the plan diff's reference.
      auto groups = group_seeds(runs);
      sort_like_sweeps(groups);
      runs.clear();
      for (auto& g : groups)
        for (auto& r : g.runs) runs.push_back(std::move(r));
    }
    ReportOptions ro;
    if (!title.empty()) ro.title = title;
    ro.targets = targets;
    // Bisections kept beside the runs: in a folder named, or in --out for a spec.
    std::set<std::string> folders;
    for (const auto& t : targets)
      if (is_spec_file(t))
        folders.insert(options.out);
      else if (fs::is_directory(t) && !is_run_dir(t))
        folders.insert(t);
    for (const auto& folder : folders) {
      std::vector<std::string> skipped;
      for (auto& b : load_bisections(folder, &skipped)) ro.bisections.push_back(std::move(b));
      for (const auto& why : skipped) fmt::print(stderr, "sinkc: {}\n", why);
    }
    std::string html = render_report(runs, ro);
    // Through a temporary file: a browser watching the report never sees half of one.
    std::string tmp = output + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << html;
      if (!f) throw ResultsError(fmt::format("cannot write {}", tmp));
    }
    std::error_code ec;
    fs::rename(tmp, output, ec);
    if (ec) throw ResultsError(fmt::format("cannot write {}: {}", output, ec.message()));
    size_t charts = 0;
    for (size_t pos = 0; (pos = html.find("<figure class=\"chart\"", pos)) != std::string::npos; ++pos) ++charts;
    fmt::print("wrote {} ({} run{}, {} chart{})\n", output, runs.size(), runs.size() == 1 ? "" : "s", charts,
               charts == 1 ? "" : "s");
    return 0;
  });
}

int export_tensorboard(const std::vector<std::string>& targets, const std::string& dir, const ResultsOptions& options,
                       const CommonOptions& common) {
  return guarded([&] {
    auto runs = resolve_runs(targets, options.runs, target_options(options, common));
    TensorBoardExport done = write_tensorboard(runs, dir);
    for (const auto& s : done.skipped) fmt::print(stderr, "sinkc: skipped {}\n", s);
    if (done.written.empty()) throw ResultsError("no run has evaluations yet: nothing to export");
    size_t events = 0;
    for (const auto& w : done.written) events += w.events;
    fmt::print("wrote {} ({} run{}, {} evaluation{}); view with: tensorboard --logdir {}\n", dir, done.written.size(),
               done.written.size() == 1 ? "" : "s", events, events == 1 ? "" : "s", dir);
    return 0;
  });
}

}  // namespace sink::cli
