// The table of a profiler trace (runtime/training/trace_table.h) on traces whose sums are known by hand, and
// `sinkc run --profile`'s trace of a real run (runtime/training/step_trace.h): trace.json in the Chrome format,
// its table in profile.json, and the run's peak memory in summary.json.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/training/peak_memory.h"
#include "runtime/training/trace_table.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;
using json = nlohmann::json;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

json span(const std::string& name, double ts, double dur, int tid, const char* cat = nullptr) {
  json e = {{"ph", "X"}, {"name", name}, {"ts", ts}, {"dur", dur}, {"pid", 7}, {"tid", tid}};
  if (cat) e["cat"] = cat;
  return e;
}

const json* row_named(const json& rows, const std::string& name) {
  for (const json& row : rows)
    if (row.at("name") == name) return &row;
  return nullptr;
}

}  // namespace

TEST(TraceTable, SelfTimeIsASpanLessItsCallees) {
  // Thread 1: linear [0, 100) calls mm [10, 70), which calls fill [20, 30); then add [120, 140).
  // Thread 2 (autograd's): MmBackward0 [0, 45). Two kernels of "gemm" and one of "add", a runtime call.
  json trace = {{"traceEvents",
                 {span("aten::linear", 0, 100, 1, "cpu_op"), span("aten::mm", 10, 60, 1, "cpu_op"),
                  span("aten::fill_", 20, 10, 1, "cpu_op"), span("aten::add", 120, 20, 1, "cpu_op"),
                  span("MmBackward0", 0, 45, 2, "cpu_op"), span("gemm", 15, 40, 3, "kernel"),
                  span("gemm", 60, 40, 3, "kernel"), span("add_kernel", 125, 20, 3, "kernel"),
                  span("cudaLaunchKernel", 12, 2, 1, "cuda_runtime"), json{{"ph", "i"}, {"name", "mark"}}}}};
  const json table = trace_table(trace, 2);
  EXPECT_DOUBLE_EQ(table.at("wall_ms").get<double>(), 0.140);                     // thread 1, 0 to 140
  EXPECT_DOUBLE_EQ(table.at("outside_operators_ms").get<double>(), 0.020);        // [100, 120)
  EXPECT_DOUBLE_EQ(table.at("top_level_operators_per_step").get<double>(), 1.0);  // linear and add, over 2 steps
  const json& ops = table.at("operators");
  EXPECT_DOUBLE_EQ(row_named(ops, "aten::linear")->at("self_ms").get<double>(), 0.040);
  EXPECT_DOUBLE_EQ(row_named(ops, "aten::mm")->at("self_ms").get<double>(), 0.050);
  EXPECT_DOUBLE_EQ(row_named(ops, "aten::fill_")->at("self_ms").get<double>(), 0.010);
  EXPECT_DOUBLE_EQ(row_named(ops, "MmBackward0")->at("self_ms").get<double>(), 0.045);
  EXPECT_EQ(row_named(ops, "cudaLaunchKernel"), nullptr) << "a runtime call is not an operator";
  EXPECT_EQ(ops.at(0).at("name"), "aten::mm");  // the largest self time first
  EXPECT_DOUBLE_EQ(table.at("kernel_ms").get<double>(), 0.100);
  EXPECT_DOUBLE_EQ(table.at("launches_per_step").get<double>(), 1.5);
  const json* gemm = row_named(table.at("kernels"), "gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->at("launches").get<int64_t>(), 2);
  EXPECT_DOUBLE_EQ(gemm->at("share").get<double>(), 0.8);
  const std::string text = trace_table_text(table);
  EXPECT_NE(text.find("aten::mm"), std::string::npos);
  EXPECT_NE(text.find("launches a step"), std::string::npos);
}

TEST(TraceTable, ReadsABareEventArrayAndAnEmptyTrace) {
  const json table = trace_table(json::array({span("op", 5, 10, 1)}), 1);
  EXPECT_DOUBLE_EQ(row_named(table.at("operators"), "op")->at("self_ms").get<double>(), 0.010);
  const json empty = trace_table(json::object(), 1);
  EXPECT_EQ(empty.at("operators").size(), 0u);
  EXPECT_EQ(empty.at("wall_ms").get<double>(), 0.0);
}

TEST(StepTrace, AProfiledRunWritesItsTraceAndTable) {
  TempDir out("trace");
  RunOptions o = sinktest::run_options(out.str());
  o.profile = true;
  auto r = run_plan(sinktest::plan_of("experiment traced extends micro { train.steps = 8 }"), o);
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  ASSERT_TRUE(fs::exists(r.dir + "/trace.json"));
  const json trace = json::parse(sinktest::read_file(r.dir + "/trace.json"));
  const json profile = json::parse(sinktest::read_file(r.dir + "/profile.json"));
  ASSERT_TRUE(profile.contains("trace")) << profile.dump(2);
  const json& table = profile.at("trace");
  EXPECT_EQ(table.at("steps").get<int64_t>(), 3);
  // The model's matrix products are among the operators of every step.
  bool matmul = false;
  for (const json& row : table.at("operators"))
    matmul |= row.at("name").get<std::string>().find("mm") != std::string::npos;
  EXPECT_TRUE(matmul) << table.dump(2);
  EXPECT_GT(table.at("top_level_operators_per_step").get<double>(), 10);
  // The table read back from the trace file is the one the run kept.
  EXPECT_EQ(trace_table(trace, 3).at("operators"), table.at("operators"));
}

TEST(PeakMemory, ARunRecordsItsPeakResidentMemory) {
  TempDir out("peak");
  auto r = run_plan(sinktest::plan_of("experiment peak extends micro { train.steps = 2 }"),
                    sinktest::run_options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  if (process_peak_resident_bytes() < 0) GTEST_SKIP() << "/proc/self/status has no VmHWM here";
  const json& peak = r.summary.at("peak_memory");
  EXPECT_GT(peak.at("bytes").get<int64_t>(), 1 << 20);
  EXPECT_LE(peak.at("bytes").get<int64_t>(), process_peak_resident_bytes());
  EXPECT_FALSE(peak.at("of").get<std::string>().empty());
}
