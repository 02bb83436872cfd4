// `sinkc report`: one self-contained HTML file (no network, no script) with
// the training curves of every run (overlaid per sweep), the alpha_1 heatmap
// of every run, massive activations per layer, the run table and the plan
// diff against the first run. Every chart is one <figure class="chart">
// holding one inline <svg>.
#pragma once
#include <string>
#include <vector>

#include "results/bisection_record.h"
#include "results/run_data.h"

namespace sink::results {

struct ReportOptions {
  std::string title = "sinklab report";
  std::vector<std::string> targets;         // what the user named, shown in the header
  std::vector<BisectionRecord> bisections;  // `sinkc bisect`s kept beside the runs: a section of their own
};

std::string render_report(const std::vector<RunData>& runs, const ReportOptions& options);

}  // namespace sink::results
