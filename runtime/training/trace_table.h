// Where a profiled stretch's time went, per operator and per kernel, read from
// a profiler trace in the Chrome trace format: the one LibTorch's profiler
// (Kineto) saves, PyTorch's `torch.profiler` exports and `sinkc run
// --profile` writes (runtime/training/step_trace.h). One reading for all of
// them, so a run and its PyTorch twins are summed alike:
//   - operators: each operator's self time (its span less that of the
//     operators it called), on the CPU threads;
//   - kernels: each GPU kernel's time (Kineto's "kernel" events), and the
//     launches per step;
//   - the traced wall time on the busiest thread, and how much of it no
//     operator covers.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace sink::rt {

// trace: the parsed trace (an object with "traceEvents", or the bare event array); steps: how many steps it
// covers (for the per-step counts); rows: the longest list kept.
// {"steps", "wall_ms", "outside_operators_ms", "operators": [{"name", "calls", "self_ms", "share"}],
//  "kernels": [{"name", "launches", "ms", "share"}], "kernel_ms", "launches_per_step",
//  "top_level_operators_per_step"}; shares are of wall_ms (operators) and of kernel_ms (kernels).
nlohmann::json trace_table(const nlohmann::json& trace, int64_t steps, int rows = 20);

// The table as lines for a terminal.
std::string trace_table_text(const nlohmann::json& table);

}  // namespace sink::rt
