#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "results/table.h"
#include "synthetic_runs.h"

using namespace sink;
using namespace sink::results;
using namespace sink::testing;

namespace {

// A weight-decay sweep, two seeds per point, run into `folder`; valid loss
// 2 + wd (seed 0) and 2 + wd + 0.2 (seed 1), Sink_1 = 10 x wd.
void write_sweep(const std::string& folder, const std::vector<double>& wds) {
  std::string values;
  for (double wd : wds) values += (values.empty() ? "" : ", ") + format_number(wd);
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [" + values + "]  train.seeds = 2 }\n");
  for (const auto& p : plans) {
    double wd = p.number("optim.weight_decay");
    EvalLine e;
    e.valid_loss = 2 + wd + 0.2 * static_cast<double>(p.integer("train.seed"));
    e.sink = {{1, 10 * wd}};
    write_run(folder, {p, "completed", "", curve(2, e)});
  }
}

}  // namespace

TEST(Table, OneRowPerSweepPointWithTheAxisAsAColumn) {
  TempDir tmp("table");
  write_sweep(tmp.path, {10.0, 0.0, 2.0});
  auto groups = group_seeds(load_run_folder(tmp.path));
  ASSERT_EQ(groups.size(), 3u);
  sort_like_sweeps(groups);
  ResultTable t = build_table(groups, {"sink_1", "valid_loss"});
  ASSERT_EQ(t.axes, std::vector<std::string>{"optim.weight_decay"});
  ASSERT_EQ(t.rows.size(), 3u);
  // Numerically, not as text: 2 before 10.
  EXPECT_EQ(t.rows[0].axis_values[0], "0.0");
  EXPECT_EQ(t.rows[1].axis_values[0], "2.0");
  EXPECT_EQ(t.rows[2].axis_values[0], "10.0");
  EXPECT_EQ(t.rows[1].name, "wd.weight_decay=2.0");
  EXPECT_EQ(t.rows[1].seeds, 2u);
  EXPECT_NEAR(t.rows[1].values[1].mean, 4.1, 1e-12);
  EXPECT_NEAR(t.rows[2].values[0].mean, 100.0, 1e-12);

  std::string text = t.text_table().text();
  EXPECT_NE(text.find("optim.weight_decay"), std::string::npos) << text;
  EXPECT_NE(text.find("4.1000 ± 0.1414"), std::string::npos) << text;
}

TEST(Table, ExperimentsBesideASweepShowTheFieldsTheyChange) {
  // Table 9's shape: an lr sweep, and experiments that move lr and steps
  // together. Every row shows its own lr and steps, not a blank.
  TempDir tmp("table-experiments");
  auto plans = compile_plans(
      "experiment ref extends micro { optim.lr = 1e-3  train.steps = 20 }\n"
      "sweep lr over ref { optim.lr in [2e-3] }\n"
      "experiment long extends ref { optim.lr = 5e-4  train.steps = 40 }\n");
  ASSERT_EQ(plans.size(), 3u);
  for (const auto& p : plans) {
    EvalLine e;
    e.valid_loss = 2;
    write_run(tmp.path, {p, "completed", "", curve(2, e)});
  }
  auto groups = group_seeds(load_run_folder(tmp.path));
  sort_like_sweeps(groups);
  ResultTable t = build_table(groups, {"valid_loss"});
  ASSERT_EQ(t.axes, (std::vector<std::string>{"optim.lr", "train.steps"}));
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& r : t.rows) by_name[r.name] = r.axis_values;
  EXPECT_EQ(by_name["ref"], (std::vector<std::string>{"0.001", "20"}));
  EXPECT_EQ(by_name["lr.lr=0.002"], (std::vector<std::string>{"0.002", "20"}));
  EXPECT_EQ(by_name["long"], (std::vector<std::string>{"5e-04", "40"}));
}

TEST(Table, MeanAlphaIsOverLayersAndHeads) {
  // Two layers of two heads: (0.1 + 0.3 + 0.5 + 0.7) / 4 = 0.4, whatever
  // Sink_1 counts past eps.
  TempDir tmp("table-alpha");
  auto plans = compile_plans("experiment a extends micro {}\n");
  EvalLine e;
  e.alpha = {{0.1, 0.3}, {0.5, 0.7}};
  write_run(tmp.path, {plans[0], "completed", "", curve(2, e)});
  ResultTable t = build_table(group_seeds(load_run_folder(tmp.path)), {"alpha_1"});
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_NEAR(t.rows[0].values[0].mean, 0.4, 1e-12);
  EXPECT_NE(t.text_table().text().find("0.400"), std::string::npos) << t.text_table().text();
}

TEST(Table, AContentCachedRunIsListedUnderItsOwnName) {
  // `sinkc run` links NAME-hash8 to the run with the same plan content.
  TempDir tmp("table-cache");
  auto plans = compile_plans("experiment a extends micro {}\n");
  EvalLine e;
  e.valid_loss = 2;
  std::string dir = write_run(tmp.path, {plans[0], "completed", "", curve(2, e)});
  const std::string hash8 = dir.substr(dir.size() - 8);
  std::filesystem::create_directory_symlink(std::filesystem::path(dir).filename(), tmp.path + "/b-" + hash8);
  auto runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].plan.name, "a");
  EXPECT_EQ(runs[1].plan.name, "b");
}

TEST(Table, MarkdownAndJsonParse) {
  TempDir tmp("table-formats");
  write_sweep(tmp.path, {0.1, 1.0});
  auto groups = group_seeds(load_run_folder(tmp.path));
  ResultTable t = build_table(groups, {});
  std::istringstream md(t.text_table().markdown());
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(md, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);                  // header, separator, two rows
  const size_t columns = 4 + t.metrics.size();  // run, axis, seeds, status, metrics
  for (const auto& l : lines) EXPECT_EQ(static_cast<size_t>(std::count(l.begin(), l.end(), '|')), columns + 1) << l;
  EXPECT_EQ(lines[1].find_first_not_of("|-: "), std::string::npos);

  auto j = nlohmann::json::parse(t.data_table().render(Format::Json));
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][1]["optim.weight_decay"], 1.0);
  EXPECT_NEAR(j["rows"][1]["valid_loss"].get<double>(), 3.1, 1e-12);
  EXPECT_NEAR(j["rows"][1]["valid_loss_std"].get<double>(), std::sqrt(0.02), 1e-12);
  EXPECT_EQ(j["rows"][1]["seeds"], 2);
}

TEST(Table, ARunWhoseProcessIsGoneIsShownStopped) {
  // The runtime writes summary.json "running" with its host and pid at the
  // start; after a SIGKILL nothing else is written.
  TempDir tmp("table-killed");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 1.0] }\n");
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // reaped: the pid is gone
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::vector<pid_t> pids = {child, getpid()};
  for (size_t n = 0; n < 2; ++n) {
    auto dir = write_run(tmp.path, {plans[n], "running", "", curve(1, {})});
    nlohmann::json s = {{"name", plans[n].name},
                        {"hash", plans[n].hash()},
                        {"status", "running"},
                        {"process", {{"host", host}, {"pid", pids[n]}}}};
    std::ofstream(dir + "/summary.json") << s.dump();
  }
  auto runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, Status::Stopped);
  EXPECT_NE(runs[0].status_text().find("killed"), std::string::npos) << runs[0].status_text();
  EXPECT_NE(runs[0].status_text().find("--resume"), std::string::npos);
  EXPECT_EQ(runs[1].status, Status::Running);  // this process is alive
  ResultTable t = build_table(group_seeds(runs), {"valid_loss"});
  EXPECT_EQ(t.rows[0].status, "stopped (step 10/20)");
  EXPECT_EQ(t.rows[1].status, "running (step 10/20)");
}

TEST(Table, UnfinishedRunsSayWhereTheyAre) {
  TempDir tmp("table-status");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 1.0, 5.0] }\n");
  write_run(tmp.path, {plans[0], "completed", "", curve(2, {})});
  write_run(tmp.path, {plans[1], "running", "", curve(1, {})});
  write_run(tmp.path, {plans[2], "diverged", "non-finite loss at step 3", {}});
  ResultTable t = build_table(group_seeds(load_run_folder(tmp.path)), {"valid_loss"});
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].status, "completed");
  EXPECT_EQ(t.rows[1].status, "running (step 10/20)");
  EXPECT_EQ(t.rows[2].status, "diverged");
  EXPECT_EQ(t.text_table().rows[2].back(), "-");  // not 0
  EXPECT_THROW(metric_by_id("valid_los"), ResultsError);
  EXPECT_EQ(metric_by_id("sink_3").label, "Sink_3 (%)");
}

TEST(Table, AFailedRunShowsItsLastMetrics) {
  // A run that a full disk failed measured soundly until then: its last line
  // of metrics.jsonl is shown, with the step, as for a stopped run. A
  // diverged run's numbers are not results and stay hidden.
  TempDir tmp("table-failed");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 1.0] }\n");
  EvalLine early, last;
  early.step = 5, early.valid_loss = 3.25, early.sink = {{1, 20.0}};
  last.step = 10, last.valid_loss = 2.5, last.sink = {{1, 40.0}};
  write_run(tmp.path,
            {plans[0], "failed", "checkpoint of step 10 not written: No space left on device", {early, last}});
  write_run(tmp.path, {plans[1], "diverged", "non-finite loss at step 12", {early, last}});
  ResultTable t = build_table(group_seeds(load_run_folder(tmp.path)), {"valid_loss", "sink_1"});
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].status, "failed (step 10/20)");
  ASSERT_EQ(t.rows[0].values[0].n(), 1u);
  EXPECT_EQ(t.rows[0].values[0].mean, 2.5);
  EXPECT_EQ(t.rows[0].values[1].mean, 40.0);
  EXPECT_TRUE(t.rows[0].values[0].partial);
  EXPECT_EQ(t.rows[0].values[0].step, 10);
  EXPECT_EQ(t.rows[1].status, "diverged");
  EXPECT_EQ(t.rows[1].values[0].n(), 0u);
  auto text = t.text_table();
  EXPECT_EQ(text.rows[0][text.rows[0].size() - 2], "2.5000");
  EXPECT_EQ(text.rows[0].back(), "40.00");
  EXPECT_EQ(text.rows[1].back(), "-");
}

TEST(Table, AKeyTheRuntimeNeverWritesIsAnErrorThatNamesIt) {
  // metrics.jsonl and summary.json hold only plan/run_record.h's keys; any other is a file from another tool
  // or another version, and reading past it would show numbers that mean something else.
  TempDir tmp("table-unknown-key");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 1.0, 2.0] }\n");
  auto good = write_run(tmp.path, {plans[0], "completed", "", curve(2, {})});
  auto in_metrics = write_run(tmp.path, {plans[1], "completed", "", curve(2, {})});
  std::ofstream(in_metrics + "/metrics.jsonl", std::ios::app) << R"({"step": 30, "valid_los": 2.5})" << "\n";
  auto in_summary = write_run(tmp.path, {plans[2], "completed", "", curve(2, {})});
  auto summary = nlohmann::json::parse(std::ifstream(in_summary + "/summary.json"));
  summary["stauts"] = "completed";
  std::ofstream(in_summary + "/summary.json") << summary.dump();

  EXPECT_NO_THROW(load_run(good));
  try {
    load_run(in_metrics);
    ADD_FAILURE() << "an unknown metrics.jsonl key was read";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:3: key 'valid_los'"), std::string::npos) << e.what();
  }
  std::vector<std::string> skipped;
  auto runs = load_run_folder(tmp.path, &skipped);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].dir, good);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[1].find("summary.json: key 'stauts'"), std::string::npos) << skipped[1];
}

TEST(Table, EveryStatusTheRuntimeWritesReadsBack) {
  TempDir tmp("table-every-status");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 0.2, 0.3, 0.4, 0.5] }\n");
  const std::map<std::string, Status> shown = {{"completed", Status::Completed},
                                               {"stopped", Status::Stopped},
                                               {"interrupted", Status::Stopped},
                                               {"diverged", Status::Diverged},
                                               {"failed", Status::Failed}};
  size_t n = 0;
  for (const auto& [written, status] : shown) {
    ASSERT_TRUE(run_record::parse_status(written)) << written;
    EXPECT_EQ(run_record::status_name(*run_record::parse_status(written)), written);
    EXPECT_EQ(load_run(write_run(tmp.path, {plans[n++], written, "", curve(1, {})})).status, status) << written;
  }
  EXPECT_FALSE(run_record::parse_status("Completed"));
  EXPECT_EQ(run_record::kStatuses.size(), shown.size() + 1);  // and "running", before summary.json's first rewrite
}

TEST(Table, AStatusTheRuntimeNeverWritesIsAFailureThatSaysSo) {
  // Before, any status but the known ones read as "running": a run a newer or damaged summary.json
  // described would have shown as in progress forever.
  TempDir tmp("table-unknown-status");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 1.0] }\n");
  write_run(tmp.path, {plans[0], "paused", "", curve(1, {})});
  write_run(tmp.path, {plans[1], status_name(sink::run_record::RunStatus::Interrupted), "", curve(1, {})});
  auto runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].status, Status::Failed);
  EXPECT_NE(runs[0].status_text().find("'paused'"), std::string::npos) << runs[0].status_text();
  EXPECT_EQ(runs[1].status, Status::Stopped);
}

// A completed run of an older numerics version than this sinklab's (or none recorded) keeps its row and its
// numbers, marked stale; the other seeds and current runs read as before.
TEST(Table, AStaleRunIsShownWithItsNumbersAndMarked) {
  TempDir tmp("table-stale");
  auto plans = compile_plans("sweep wd over micro { optim.weight_decay in [0.1, 1.0, 5.0] }\n");
  EvalLine e;
  e.valid_loss = 2.5;
  write_run(tmp.path, {plans[0], "completed", "", curve(2, e)});
  write_run(tmp.path, {plans[1], "completed", "", curve(2, e), kNumericsVersion - 1});
  write_run(tmp.path, {plans[2], "completed", "", curve(2, e), -1});  // from before versions were recorded
  auto runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_FALSE(runs[0].stale());
  EXPECT_TRUE(runs[1].stale());
  EXPECT_TRUE(runs[2].stale());
  EXPECT_EQ(runs[2].numerics_version, 0);
  EXPECT_NE(runs[1].status_text().find("--retrain-stale"), std::string::npos) << runs[1].status_text();
  ResultTable t = build_table(group_seeds(runs), {"valid_loss"});
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].status, "completed");
  EXPECT_EQ(t.rows[1].status, "completed, stale");
  EXPECT_EQ(t.rows[2].status, "completed, stale");
  for (const auto& row : t.rows) EXPECT_NEAR(row.values[0].mean, 2.5, 1e-12) << row.name;

  // Seeds: the group says how many of them are stale.
  TempDir seeds("table-stale-seeds");
  auto seeded = compile_plans("experiment s extends micro { train.seeds = 2 }\n");
  ASSERT_EQ(seeded.size(), 2u);
  write_run(seeds.path, {seeded[0], "completed", "", curve(2, e)});
  write_run(seeds.path, {seeded[1], "completed", "", curve(2, e), -1});
  ResultTable s = build_table(group_seeds(load_run_folder(seeds.path)), {"valid_loss"});
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].status, "completed, 1 stale");
}
