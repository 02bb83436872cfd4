#include "runtime/training/step_trace.h"

#include <fmt/format.h>
#include <fstream>
#include <set>
#include <torch/csrc/autograd/profiler_kineto.h>

#include "runtime/training/run_dir.h"
#include "runtime/training/trace_table.h"

namespace sink::rt {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// An event's start and length in microseconds: LibTorch 1.13 gives microseconds, 2.x nanoseconds.
template <typename Event>
auto start_us(const Event& e, int) -> decltype(e.startNs(), double()) {
  return double(e.startNs()) / 1e3;
}
template <typename Event>
double start_us(const Event& e, long) {
  return double(e.startUs());
}
template <typename Event>
auto duration_us(const Event& e, int) -> decltype(e.durationNs(), double()) {
  return double(e.durationNs()) / 1e3;
}
template <typename Event>
double duration_us(const Event& e, long) {
  return double(e.durationUs());
}

// The trace in the Chrome format from the profiler's events, where LibTorch cannot save one itself.
void write_trace_of_events(const profiler::ProfilerResult& result, const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : result.events()) {
    nlohmann::json event = {{"ph", "X"}, {"name", e.name()},        {"ts", start_us(e, 0)}, {"dur", duration_us(e, 0)},
                            {"pid", 0},  {"tid", e.startThreadId()}};
    if (e.deviceType() == c10::DeviceType::CUDA) event["cat"] = "kernel", event["pid"] = 1;
    events.push_back(std::move(event));
  }
  write_atomically(path, nlohmann::json{{"traceEvents", events}}.dump() + "\n");
}

}  // namespace

StepTrace::StepTrace(bool enabled, const torch::Device& device, int64_t first_step, int64_t steps)
    : enabled_(enabled && steps > first_step), device_(device) {
  if (!enabled_) return;
  first_traced_ = first_step + std::min(kWarmupSteps, steps - first_step - 1);
  last_traced_ = std::min(steps, first_traced_ + kTracedSteps) - 1;
}

StepTrace::~StepTrace() {
  if (!active_) return;
  try {
    profiler::disableProfiler();  // a run that ended inside the traced steps
  } catch (const std::exception&) {
  }
}

void StepTrace::step_begins(int64_t step) {
  if (!enabled_ || step != first_traced_) return;
  try {
    std::set<ActivityType> activities{ActivityType::CPU};
    if (device_.is_cuda()) activities.insert(ActivityType::CUDA);
    const ProfilerConfig config(ProfilerState::KINETO);
    profiler::prepareProfiler(config, activities);
    profiler::enableProfiler(config, activities);
    active_ = true;
  } catch (const std::exception& e) {
    error_ = fmt::format("LibTorch's profiler did not start: {}", e.what());
    enabled_ = false;
  }
}

void StepTrace::step_ended(int64_t step, const std::string& trace_path) {
  if (!active_ || step != last_traced_) return;
  active_ = false;
  try {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.has_index() ? device_.index() : -1);
    const auto result = profiler::disableProfiler();
    try {
      result->save(trace_path);
    } catch (const std::exception&) {
      write_trace_of_events(*result, trace_path);  // a LibTorch without Kineto
    }
    std::ifstream in(trace_path);
    table_ = trace_table(nlohmann::json::parse(in), last_traced_ - first_traced_ + 1);
  } catch (const std::exception& e) {
    error_ = fmt::format("the trace of steps {}-{} was not written: {}", first_traced_ + 1, last_traced_ + 1, e.what());
  }
}

}  // namespace sink::rt
