// `sinkc bisect` end to end: micro runs trained by the runtime, the answer
// read from --format json. Two runs differ in four fields (one a pair the
// checker ties together); only the learning rate moves the validation loss
// by 60 steps (1.29 +- 0.12 against 2.71 +- 0.03), so the answer is known.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime_test_util.h"
#include "tests/source_paths.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using sinktest::TempDir;

namespace {

std::string spec(int steps) {
  return "experiment a extends micro { train { seeds = 2  steps = " + std::to_string(steps) +
         " }  measure.sequences = 32 }\n"
         "experiment b extends a {\n"
         "  optim.lr = 1e-4\n"
         "  measure.eps = 0.5\n"
         "  model.init_std = 0.03\n"
         "  attention { score = sigmoid(qk)  normalize = none }\n"
         "}\n";
}

std::vector<std::string> bisect_args(const TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {sinktest::sinkc_binary(),
                                   "bisect",
                                   dir.file("ab.sink"),
                                   dir.file("ab.sink"),
                                   "--run",
                                   "a",
                                   "--run",
                                   "b",
                                   "--metric",
                                   "valid_loss",
                                   "--out",
                                   dir.file("runs"),
                                   "--format",
                                   "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Runs sinkc bisect; its stdout (the JSON) parsed, its stderr in `log`.
json bisect(const TempDir& dir, const std::string& tag, std::vector<std::string> extra = {}) {
  std::string cmd;
  for (const auto& a : bisect_args(dir, extra)) cmd += "'" + a + "' ";
  cmd += "> '" + dir.file(tag + ".json") + "' 2> '" + dir.file(tag + ".log") + "'";
  const int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << sinktest::read_file(dir.file(tag + ".log"));
  return json::parse(sinktest::read_file(dir.file(tag + ".json")), nullptr, false);
}

// The change ids whose fields include `path`.
std::string change_of(const json& j, const std::string& path) {
  for (const auto& c : j["changes"])
    for (const auto& f : c["fields"])
      if (f["path"] == path) return c["id"];
  return "";
}

}  // namespace

TEST(Bisect, FindsTheOneFieldThatMovesTheLossAndCachesEveryRun) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("bisect");
  sinktest::write_file(dir.file("ab.sink"), spec(60));
  json first = bisect(dir, "first", {"--jobs", "2"});
  ASSERT_FALSE(first.is_discarded()) << sinktest::read_file(dir.file("first.json"));
  // The score and its normaliser move as one: sigmoid with a sum, or exp with none, is rejected.
  ASSERT_EQ(first["changes"].size(), 4u) << first.dump(2);
  EXPECT_EQ(change_of(first, "attention.score"), change_of(first, "attention.normalize"));
  const std::string lr = change_of(first, "optim.lr");
  EXPECT_EQ(first["from_a"]["changes"], json::array({lr})) << first.dump(2);
  EXPECT_EQ(first["from_b"]["changes"], json::array({lr})) << first.dump(2);
  EXPECT_TRUE(first["from_a"]["one_minimal"]);
  EXPECT_FALSE(first["budget_exhausted"]);
  EXPECT_NE(first["attribution"].get<std::string>().find("optim.lr: 0.01 -> 1e-04 alone moves"), std::string::npos)
      << first["attribution"];
  // Every configuration tried, with the side its value says; A and B first.
  const json& trials = first["trials"];
  ASSERT_GE(trials.size(), 4u);
  EXPECT_EQ(trials[0]["side"], "A");
  EXPECT_EQ(trials[1]["side"], "B");
  for (const auto& t : trials) {
    EXPECT_EQ(t["seeds"], 2) << t.dump();
    const bool has_lr = std::find(t["applied"].begin(), t["applied"].end(), json(lr)) != t["applied"].end();
    EXPECT_EQ(t["side"], has_lr ? "B" : "A") << t.dump();
  }
  EXPECT_EQ(first["runs_trained"], 2 * trials.size()) << "every configuration's two seeds, A's and B's included";

  // Asked again, every run is cached: nothing trains, the answer is the same.
  json again = bisect(dir, "again");
  EXPECT_EQ(again["runs_trained"], 0);
  EXPECT_EQ(again["runs_cached"], first["runs_trained"]);
  EXPECT_EQ(again["from_a"], first["from_a"]);
  EXPECT_EQ(again["trials"], first["trials"]);

  // A run trained under older numerics is not a current answer: that one run is trained again, its results
  // set aside in its stale/ folder, and the answer stays.
  fs::path stale;
  for (const auto& e : fs::directory_iterator(dir.path / "runs"))
    if (e.path().filename().string().rfind("a.seed=", 0) == 0 && fs::exists(e.path() / "summary.json"))
      stale = e.path();
  ASSERT_FALSE(stale.empty());
  auto summary = json::parse(sinktest::read_file((stale / "summary.json").string()));
  summary["numerics_version"] = 1;
  sinktest::write_file((stale / "summary.json").string(), summary.dump(2));
  json retrained = bisect(dir, "stale");
  EXPECT_EQ(retrained["runs_trained"], 1) << "the stale run, alone";
  EXPECT_EQ(retrained["from_a"], first["from_a"]);
  EXPECT_TRUE(fs::exists(stale / "stale" / "numerics-1")) << stale;

  // The plain-text form says the same in one sentence and shows the table.
  std::string cmd;
  for (const auto& a : bisect_args(dir)) cmd += "'" + a + "' ";
  cmd.replace(cmd.find("'json'"), 6, "'text'");
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  pclose(p);
  EXPECT_NE(text.find("optim.lr: 0.01 -> 1e-04 alone moves valid loss"), std::string::npos) << text;
  EXPECT_NE(text.find("0 runs trained"), std::string::npos) << text;

  // Kept beside the runs, where sinkc report finds it.
  EXPECT_TRUE(fs::exists(dir.file("runs/bisections/a-vs-b.valid_loss.json")));
  const std::string report = fmt::format("'{}' report '{}' -o '{}' > /dev/null 2>&1", sinktest::sinkc_binary(),
                                         dir.file("runs"), dir.file("report.html"));
  ASSERT_EQ(std::system(report.c_str()), 0);
  const std::string html = sinktest::read_file(dir.file("report.html"));
  EXPECT_NE(html.find("<section id=\"bisections\">"), std::string::npos);
  EXPECT_NE(html.find("optim.lr: 0.01 -&gt; 1e-04 alone moves"), std::string::npos);
}

TEST(Bisect, AnInterruptedBisectionGoesOnWithResume) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("bisect-resume");
  sinktest::write_file(dir.file("ab.sink"), spec(400));
  // Ctrl-C once a run of the bisection proper (not A's or B's) has evaluated.
  pid_t pid = sinktest::spawn(bisect_args(dir), dir.file("interrupted.txt"));
  bool evaluated = false;
  for (int k = 0; k < 6000 && !evaluated; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir.file("runs"), ec))
      if (e.path().filename().string().rfind("a+", 0) == 0 && fs::file_size(e.path() / "metrics.jsonl", ec) > 0 && !ec)
        evaluated = true;
  }
  kill(-pid, SIGINT);
  const int rc = sinktest::wait_exit(pid);
  if (rc == 0) GTEST_SKIP() << "the bisection finished before the interrupt reached it";
  ASSERT_EQ(rc, 130) << sinktest::read_file(dir.file("interrupted.txt"));
  EXPECT_NE(sinktest::read_file(dir.file("interrupted.txt")).find("--resume"), std::string::npos);

  json resumed = bisect(dir, "resumed", {"--resume"});
  ASSERT_FALSE(resumed.is_discarded());
  EXPECT_GT(resumed["runs_cached"].get<int>(), 0) << "A's and B's runs, done before the interrupt, are not redone";
  EXPECT_EQ(resumed["from_a"]["changes"], json::array({change_of(resumed, "optim.lr")})) << resumed.dump(2);
  // The run the interrupt stopped went on from its checkpoint.
  bool went_on = false;
  for (const auto& e : fs::directory_iterator(dir.file("runs")))
    if (sinktest::read_file((e.path() / "log.txt").string()).find("resumed at step") != std::string::npos)
      went_on = true;
  EXPECT_TRUE(went_on);
}

TEST(Bisect, OnSlurmEachRoundIsOneJobArray) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("bisect-slurm");
  sinktest::write_file(dir.file("ab.sink"), spec(60));
  // A stand-in sbatch --wait: runs the array's tasks the way Slurm starts them, then answers the job id.
  fs::create_directories(dir.path / "bin");
  sinktest::write_file(
      dir.file("bin/sbatch"),
      "#!/bin/bash\n"
      "script=\"${@: -1}\"\n"
      "echo \"$@\" >> '" +
          dir.file("sbatch.calls") +
          "'\n"
          "last=$(sed -n 's/^#SBATCH --array=0-\\([0-9]*\\).*/\\1/p' \"$script\")\n"
          "for k in $(seq 0 \"$last\"); do SLURM_ARRAY_TASK_ID=$k bash \"$script\" >/dev/null 2>&1; done\n"
          "echo 4242\n");
  fs::permissions(dir.path / "bin/sbatch", fs::perms::owner_all);
  const std::string original_path = std::getenv("PATH");
  setenv("PATH", (dir.file("bin") + ":" + original_path).c_str(), 1);
  json slurm = bisect(dir, "slurm", {"--slurm"});
  setenv("PATH", original_path.c_str(), 1);
  ASSERT_FALSE(slurm.is_discarded()) << sinktest::read_file(dir.file("slurm.log"));
  EXPECT_EQ(slurm["from_a"]["changes"], json::array({change_of(slurm, "optim.lr")})) << slurm.dump(2);
  // One sbatch --wait per round: the ends, then each batch the search asked for.
  const std::string calls = sinktest::read_file(dir.file("sbatch.calls"));
  size_t rounds = 0;
  for (size_t at = 0; (at = calls.find("--wait", at)) != std::string::npos; ++at) ++rounds;
  EXPECT_GE(rounds, 3u) << calls;
  EXPECT_LT(rounds, slurm["trials"].size()) << "rounds are batches, not one array per configuration";
}
