// `sinkc run --jobs N`: the same runs and metrics as one at a time, and a
// parallel sweep interrupted with Ctrl-C resumes to the same metrics.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <thread>

#include "runtime/processes/sweep.h"
#include "runtime/training/run_dir.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

const char* kSweepSpec =
    "experiment base extends micro { train.steps = 600  measure.every = 100 }\n"
    "sweep seeds over base { train.seed in [1, 2, 3] }\n";

int sinkc_run(const TempDir& dir, const std::string& out, std::vector<std::string> extra, const std::string& log) {
  std::vector<std::string> argv = {sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return sinktest::wait_exit(sinktest::spawn(argv, log));
}

// Every run directory of `out`: its name -> its metrics lines.
std::map<std::string, std::vector<nlohmann::json>> metrics_of(const std::string& out) {
  std::map<std::string, std::vector<nlohmann::json>> m;
  for (const auto& e : fs::directory_iterator(out))
    if (e.is_directory() && e.path().filename().string()[0] != '.')
      m[e.path().filename().string()] = sink::rt::read_metrics(e.path().string());
  return m;
}

void expect_same_runs(const std::string& a, const std::string& b) {
  const auto ma = metrics_of(a), mb = metrics_of(b);
  ASSERT_EQ(ma.size(), 4u);
  ASSERT_EQ(mb.size(), ma.size());
  for (const auto& [run, lines] : ma) {
    ASSERT_TRUE(mb.count(run)) << run;
    const auto& other = mb.at(run);
    ASSERT_EQ(lines.size(), other.size()) << run;
    for (size_t k = 0; k < lines.size(); ++k) {
      EXPECT_EQ(lines[k].at("step"), other[k].at("step")) << run;
      for (const char* key : {"valid_loss", "train_loss"})
        EXPECT_NEAR(lines[k].at(key).get<double>(), other[k].at(key).get<double>(), 1e-6) << run << " " << key;
      EXPECT_EQ(lines[k].at("alpha").dump(), other[k].at("alpha").dump()) << run;
    }
  }
}

// --jobs N over G GPUs: the k-th run at once goes to GPU k mod G, so a GPU holds at most ceil(N / G) runs;
// fewer runs than jobs share less.
TEST(Sweep, RunsPerGpuIsTheMostAnyGpuHolds) {
  EXPECT_EQ(sink::rt::runs_per_gpu(4, 10, 1), 4);  // 4 at once on one GPU
  EXPECT_EQ(sink::rt::runs_per_gpu(4, 10, 0), 4);  // --gpu K: all on that one
  EXPECT_EQ(sink::rt::runs_per_gpu(4, 2, 1), 2);   // only 2 runs to train
  EXPECT_EQ(sink::rt::runs_per_gpu(8, 20, 8), 1);  // a GPU each
  EXPECT_EQ(sink::rt::runs_per_gpu(10, 20, 8), 2);
  EXPECT_EQ(sink::rt::runs_per_gpu(16, 20, 8), 2);
  EXPECT_EQ(sink::rt::runs_per_gpu(1, 20, 8), 1);
}

TEST(Sweep, TwoJobsGiveTheMetricsOfOne) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("jobs");
  sinktest::write_file(dir.file("spec.sink"), kSweepSpec);
  ASSERT_EQ(sinkc_run(dir, dir.file("one"), {}, dir.file("one.txt")), 0) << sinktest::read_file(dir.file("one.txt"));
  ASSERT_EQ(sinkc_run(dir, dir.file("two"), {"--jobs", "2"}, dir.file("two.txt")), 0)
      << sinktest::read_file(dir.file("two.txt"));
  EXPECT_EQ(metrics_of(dir.file("two")).size(), 4u);
  expect_same_runs(dir.file("one"), dir.file("two"));
}

TEST(Sweep, AnInterruptedParallelSweepResumesToTheSameMetrics) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("jobs_interrupted");
  sinktest::write_file(dir.file("spec.sink"), kSweepSpec);
  const std::string out = dir.file("parallel");
  const pid_t sweep = sinktest::spawn(
      {sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", out, "--jobs", "2"}, dir.file("first.txt"));
  // Ctrl-C once the first evaluations are written: to the whole group, as a terminal sends it.
  bool started = false;
  for (int k = 0; k < 600 && !started; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (fs::exists(out))
      for (const auto& [run, lines] : metrics_of(out)) started = started || !lines.empty();
  }
  ASSERT_TRUE(started) << sinktest::read_file(dir.file("first.txt"));
  kill(-sweep, SIGINT);
  const int first = sinktest::wait_exit(sweep);
  const std::string first_log = sinktest::read_file(dir.file("first.txt"));
  EXPECT_EQ(first, 130) << first_log;
  EXPECT_NE(first_log.find("interrupted"), std::string::npos) << first_log;
  ASSERT_EQ(sinkc_run(dir, out, {"--jobs", "2", "--resume"}, dir.file("resumed.txt")), 0)
      << sinktest::read_file(dir.file("resumed.txt"));
  ASSERT_EQ(sinkc_run(dir, dir.file("reference"), {}, dir.file("reference.txt")), 0);
  expect_same_runs(dir.file("reference"), out);
}

}  // namespace
