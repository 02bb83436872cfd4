#include "runtime/training/trace_table.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <vector>

namespace sink::rt {
namespace {

using json = nlohmann::json;

struct Span {
  std::string name, thread;
  double start_us, duration_us;
};

struct Totals {
  int64_t calls = 0;
  double us = 0;
};

// A thread's name as a key: the process and thread ids, whether numbers or strings.
std::string thread_of(const json& e) {
  return (e.contains("pid") ? e["pid"].dump() : "") + "/" + (e.contains("tid") ? e["tid"].dump() : "");
}

bool is_kernel(const json& e) { return e.value("cat", "") == "kernel"; }

// CPU operators: Kineto's "cpu_op", or an event without a category (the legacy profiler's and this runtime's
// own writer's CPU events). Runtime calls, annotations, memory copies and Python frames are not operators.
bool is_operator(const json& e) {
  const std::string cat = e.value("cat", "");
  return cat.empty() || cat == "cpu_op" || cat == "Operator";
}

std::vector<std::pair<std::string, Totals>> largest(const std::map<std::string, Totals>& totals, int rows) {
  std::vector<std::pair<std::string, Totals>> sorted(totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  if (static_cast<int>(sorted.size()) > rows) sorted.resize(rows);
  return sorted;
}

}  // namespace

json trace_table(const json& trace, int64_t steps, int rows) {
  const json& events = trace.is_object() ? trace.value("traceEvents", json::array()) : trace;
  std::vector<Span> operators;
  std::map<std::string, Totals> kernels;
  double kernel_us = 0;
  int64_t launches = 0;
  for (const json& e : events) {
    if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("dur") || !e.contains("ts")) continue;
    const double duration = e["dur"].get<double>(), start = e["ts"].get<double>();
    const std::string name = e.value("name", "?");
    if (is_kernel(e)) {
      kernels[name].calls++, kernels[name].us += duration, kernel_us += duration, launches++;
    } else if (is_operator(e)) {
      operators.push_back({name, thread_of(e), start, duration});
    }
  }
  // Self time: per thread, in order of start (the longer first at a tie, so a caller precedes its callee),
  // each span's time less the part of it its callees took.
  std::stable_sort(operators.begin(), operators.end(), [](const Span& a, const Span& b) {
    return a.thread != b.thread       ? a.thread < b.thread
           : a.start_us != b.start_us ? a.start_us < b.start_us
                                      : a.duration_us > b.duration_us;
  });
  std::map<std::string, Totals> self;
  std::map<std::string, double> covered, first, last;  // per thread
  std::map<std::string, int64_t> top_level;
  std::vector<const Span*> stack;
  for (const Span& s : operators) {
    const double end = s.start_us + s.duration_us;
    while (!stack.empty() &&
           (stack.back()->thread != s.thread || stack.back()->start_us + stack.back()->duration_us <= s.start_us))
      stack.pop_back();
    if (!stack.empty()) {
      const Span& caller = *stack.back();
      self[caller.name].us -= std::min(s.duration_us, caller.start_us + caller.duration_us - s.start_us);
    } else {
      covered[s.thread] += s.duration_us, top_level[s.thread]++;
    }
    self[s.name].us += s.duration_us, self[s.name].calls++;
    first.try_emplace(s.thread, s.start_us);
    last[s.thread] = std::max(last[s.thread], end);
    stack.push_back(&s);
  }
  // The busiest thread is the one that ran the step; the others are autograd's or workers'.
  std::string main_thread;
  for (const auto& [thread, us] : covered)
    if (main_thread.empty() || us > covered[main_thread]) main_thread = thread;
  const double wall_us = main_thread.empty() ? 0 : last[main_thread] - first[main_thread];
  const double per_step = 1.0 / double(std::max<int64_t>(1, steps));
  json table = {{"steps", steps},
                {"wall_ms", wall_us / 1e3},
                {"outside_operators_ms", main_thread.empty() ? 0.0 : (wall_us - covered[main_thread]) / 1e3},
                {"top_level_operators_per_step", main_thread.empty() ? 0.0 : top_level[main_thread] * per_step},
                {"kernel_ms", kernel_us / 1e3},
                {"launches_per_step", double(launches) * per_step},
                {"operators", json::array()},
                {"kernels", json::array()}};
  for (const auto& [name, t] : largest(self, rows))
    table["operators"].push_back(
        {{"name", name}, {"calls", t.calls}, {"self_ms", t.us / 1e3}, {"share", wall_us > 0 ? t.us / wall_us : 0.0}});
  for (const auto& [name, t] : largest(kernels, rows))
    table["kernels"].push_back(
        {{"name", name}, {"launches", t.calls}, {"ms", t.us / 1e3}, {"share", kernel_us > 0 ? t.us / kernel_us : 0.0}});
  return table;
}

std::string trace_table_text(const json& table) {
  std::string out = fmt::format(
      "traced {} steps: {:.1f} ms on the main thread, {:.1f} ms of it outside any operator; "
      "{:.0f} top-level operators a step\n",
      table["steps"].get<int64_t>(), table["wall_ms"].get<double>(), table["outside_operators_ms"].get<double>(),
      table["top_level_operators_per_step"].get<double>());
  out += fmt::format("  {:<58} {:>7} {:>10} {:>6}\n", "operator", "calls", "self ms", "share");
  for (const json& row : table["operators"])
    out += fmt::format("  {:<58.58} {:>7} {:>10.2f} {:>5.1f}%\n", row["name"].get<std::string>(),
                       row["calls"].get<int64_t>(), row["self_ms"].get<double>(), 100 * row["share"].get<double>());
  if (table["kernels"].empty()) return out;
  out += fmt::format("GPU kernels: {:.1f} ms, {:.0f} launches a step\n", table["kernel_ms"].get<double>(),
                     table["launches_per_step"].get<double>());
  out += fmt::format("  {:<58} {:>7} {:>10} {:>6}\n", "kernel", "launches", "ms", "share");
  for (const json& row : table["kernels"])
    out += fmt::format("  {:<58.58} {:>7} {:>10.2f} {:>5.1f}%\n", row["name"].get<std::string>(),
                       row["launches"].get<int64_t>(), row["ms"].get<double>(), 100 * row["share"].get<double>());
  return out;
}

}  // namespace sink::rt
