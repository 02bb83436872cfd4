// What a run records of what computed it (summary.json's numerics_version
// and provenance), and the run cache that does not pass a run trained under
// an older numerics version off as current: reported stale and kept, trained
// again only with --retrain-stale, its old results set aside first.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <torch/version.h>

#include "plan/numerics_version.h"
#include "plan/run_record.h"
#include "runtime/training/stale_runs.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "support/installation.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::rt;
using json = nlohmann::json;
using sinktest::run_options;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

json summary_of(const std::string& dir) { return json::parse(sinktest::read_file(dir + "/summary.json")); }

// What an older sinklab left: the same run, its summary.json with an older numerics version, or none.
void make_older(const std::string& dir, std::optional<int64_t> version) {
  json s = summary_of(dir);
  if (version)
    s["numerics_version"] = *version;
  else
    s.erase("numerics_version");
  sinktest::write_file(dir + "/summary.json", s.dump(2) + "\n");
}

// The first "model name" of /proc/cpuinfo, read here on its own.
std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find_first_not_of(" \t", line.find(':') + 1));
  return "";
}

int run_sinkc(const std::string& args, std::string& output) {
  FILE* p = popen((std::string(sinktest::sinkc_binary()) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST(Provenance, SummaryRecordsWhatComputedTheRun) {
  TempDir out("provenance");
  auto r = run_plan(sinktest::plan_of("experiment prov extends micro { }"), run_options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  const json s = summary_of(r.dir);
  EXPECT_EQ(s.at("numerics_version"), kNumericsVersion);
  const json& p = s.at("provenance");
  EXPECT_EQ(p.at("sinklab"), std::string(sink::version()));
  EXPECT_EQ(p.at("libtorch"), std::string(TORCH_VERSION));
  // A commit (40 hex digits, perhaps "+modified"), or "unknown" outside a git checkout.
  const std::string commit = p.at("commit");
  EXPECT_TRUE(commit == "unknown" || (commit.size() >= 40 && commit.find_first_not_of("0123456789abcdef") >= 40))
      << commit;
  if (const std::string model = cpu_model(); !model.empty()) EXPECT_EQ(p.at("device_name"), model);
  EXPECT_FALSE(p.at("device_name").get<std::string>().empty());
  // micro trains with the CPU JIT in fp32; its measurements run the same kernels.
  EXPECT_EQ(p.at("attention_kernels"), json::array({"jit float"}));

  // The reference path says so, with the dtype autocast gives it.
  auto ref = run_plan(sinktest::plan_of("experiment prov_ref extends micro { attention.backend = reference "
                                        "train.precision = bf16 }"),
                      run_options(out.str()));
  ASSERT_EQ(ref.status, sink::rt::RunOutcome::Completed) << ref.summary.dump(2);
  // Training and measurement alike run under bf16 autocast: no float attention ran.
  EXPECT_EQ(summary_of(ref.dir)["provenance"]["attention_kernels"], json::array({"reference bf16"}));
}

TEST(Provenance, AnOlderNumericsVersionIsStaleKeptAndRetrainedOnlyWhenAsked) {
  TempDir out("stale");
  auto plan = sinktest::plan_of("experiment stale extends micro { }");
  auto first = run_plan(plan, run_options(out.str()));
  ASSERT_EQ(first.status, sink::rt::RunOutcome::Completed) << first.summary.dump(2);
  for (std::optional<int64_t> older : {std::optional<int64_t>(kNumericsVersion - 1), std::optional<int64_t>()}) {
    make_older(first.dir, older);
    const std::string metrics_before = sinktest::read_file(first.dir + "/metrics.jsonl");
    const auto mtime = fs::last_write_time(first.dir + "/metrics.jsonl");
    auto again = run_plan(plan, run_options(out.str()));
    EXPECT_EQ(again.status, sink::rt::RunOutcome::Stale);
    EXPECT_NE(again.note.find("--retrain-stale"), std::string::npos) << again.note;
    EXPECT_EQ(again.summary["final"], first.summary["final"]);  // the result is kept and reported
    EXPECT_EQ(fs::last_write_time(first.dir + "/metrics.jsonl"), mtime);
    EXPECT_EQ(sinktest::read_file(first.dir + "/metrics.jsonl"), metrics_before);
    EXPECT_TRUE(fs::exists(first.dir + "/checkpoint/state.pt"));
    EXPECT_FALSE(fs::exists(first.dir + "/stale"));
  }

  // With --retrain-stale (and --resume, which must not take up the stale run's last checkpoint):
  // trained again from step 0, the old results kept whole in RUN/stale/numerics-0/.
  const json old_summary = summary_of(first.dir);
  const std::string old_metrics = sinktest::read_file(first.dir + "/metrics.jsonl");
  const std::string old_log = sinktest::read_file(first.dir + "/log.txt");
  auto o = run_options(out.str());
  o.retrain_stale = true;
  o.resume = true;
  auto retrained = run_plan(plan, o);
  ASSERT_EQ(retrained.status, sink::rt::RunOutcome::Completed) << retrained.summary.dump(2);
  EXPECT_NE(retrained.note.find("stale/numerics-0"), std::string::npos) << retrained.note;
  EXPECT_EQ(summary_of(first.dir)["numerics_version"], kNumericsVersion);
  const std::string log = sinktest::read_file(first.dir + "/log.txt");
  EXPECT_EQ(log.find("resumed at step"), std::string::npos) << log;
  EXPECT_NE(log.find("retrained"), std::string::npos) << log;
  const std::string kept = first.dir + "/stale/numerics-0";
  EXPECT_EQ(summary_of(kept), old_summary);
  EXPECT_EQ(sinktest::read_file(kept + "/metrics.jsonl"), old_metrics);
  EXPECT_EQ(sinktest::read_file(kept + "/log.txt"), old_log);  // a copy: the retraining appended to the run's own
  EXPECT_TRUE(fs::exists(kept + "/checkpoint/state.pt"));
  EXPECT_TRUE(fs::exists(kept + "/plan.toml"));
  EXPECT_FALSE(fs::exists(first.dir + "/stale/.incoming"));
  // Current now: cached, and --retrain-stale leaves it alone.
  EXPECT_EQ(run_plan(plan, o).status, sink::rt::RunOutcome::Cached);
}

// A crash while the stale results are copied leaves them where they were; one after they are set aside
// leaves them in the stale folder. Either way the next --retrain-stale trains the run and loses nothing.
TEST(Provenance, SettingAsideSurvivesACrashAtEitherSide) {
  TempDir out("stale-crash");
  auto plan = sinktest::plan_of("experiment stale_crash extends micro { train.steps = 10 }");
  auto first = run_plan(plan, run_options(out.str()));
  ASSERT_EQ(first.status, sink::rt::RunOutcome::Completed);
  make_older(first.dir, std::nullopt);
  // Killed mid-copy: a partial .incoming folder, the run untouched.
  fs::create_directories(first.dir + "/stale/.incoming/checkpoint");
  sinktest::write_file(first.dir + "/stale/.incoming/metrics.jsonl", "{\"step\": 1");
  // Killed after the rename, before the retraining wrote anything.
  const std::string once = set_aside_stale_results(first.dir, summary_of(first.dir));
  EXPECT_EQ(once, first.dir + "/stale/numerics-0");
  EXPECT_FALSE(fs::exists(first.dir + "/checkpoint/state.pt"));  // set aside, so the retraining starts at step 0
  EXPECT_EQ(run_plan(plan, run_options(out.str())).status, sink::rt::RunOutcome::Stale);  // still stale, still reported
  auto o = run_options(out.str());
  o.retrain_stale = true;
  auto retrained = run_plan(plan, o);
  ASSERT_EQ(retrained.status, sink::rt::RunOutcome::Completed) << retrained.summary.dump(2);
  EXPECT_TRUE(fs::exists(first.dir + "/stale/numerics-0/checkpoint/state.pt"));
  EXPECT_TRUE(fs::exists(first.dir + "/stale/numerics-0-2/summary.json"));  // the second copy beside the first
  EXPECT_FALSE(fs::exists(first.dir + "/stale/.incoming"));
}

// A run begun under an older numerics version and resumed under this one is partly the older one's.
TEST(Provenance, AResumedRunKeepsTheOlderNumericsVersion) {
  TempDir out("stale-resume");
  auto plan = sinktest::plan_of("experiment stale_resume extends micro { train.checkpoint_every = 5 }");
  auto o = run_options(out.str());
  o.stop_after = 7;
  auto stopped = run_plan(plan, o);
  ASSERT_EQ(stopped.status, sink::rt::RunOutcome::Stopped);
  make_older(stopped.dir, kNumericsVersion - 1);
  o.stop_after = -1;
  o.resume = true;
  auto resumed = run_plan(plan, o);
  ASSERT_EQ(resumed.status, sink::rt::RunOutcome::Completed) << resumed.summary.dump(2);
  EXPECT_EQ(resumed.summary["numerics_version"], kNumericsVersion - 1);
  EXPECT_EQ(run_plan(plan, run_options(out.str())).status, sink::rt::RunOutcome::Stale);
}

TEST(Provenance, SinkcRunSaysStaleAndRetrainsWithTheFlag) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("stale-cli");
  sinktest::write_file(dir.file("spec.sink"), "experiment stale_cli extends micro { train.steps = 10 }\n");
  const std::string args = "run " + dir.file("spec.sink") + " --out " + dir.file("runs") + " --no-progress";
  std::string first, stale, retrained;
  ASSERT_EQ(run_sinkc(args, first), 0) << first;
  std::string run_dir;
  for (const auto& e : fs::directory_iterator(dir.file("runs")))
    if (e.is_directory() && e.path().filename().string().rfind("stale_cli-", 0) == 0) run_dir = e.path().string();
  ASSERT_FALSE(run_dir.empty());
  make_older(run_dir, std::nullopt);
  EXPECT_EQ(run_sinkc(args, stale), 0) << stale;
  EXPECT_TRUE(stale.rfind("stale ", 0) == 0 || stale.find("\nstale ") != std::string::npos) << stale;
  EXPECT_NE(stale.find("--retrain-stale"), std::string::npos) << stale;
  EXPECT_EQ(run_sinkc(args + " --retrain-stale", retrained), 0) << retrained;
  EXPECT_NE(retrained.find("completed"), std::string::npos) << retrained;
  EXPECT_TRUE(fs::exists(run_dir + "/stale/numerics-0/summary.json"));
}
