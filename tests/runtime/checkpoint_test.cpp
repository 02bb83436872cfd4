// Runs that survive faults: the last two checkpoints are kept, a corrupt
// latest one falls back to the previous, and a checkpoint that cannot be
// written (a full disk: injected into the checkpoint's writer, and for the
// writer itself made real with RLIMIT_FSIZE, which binds root too) fails the
// run with the reason while the earlier checkpoints stay intact.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <sys/resource.h>

#include "results/run_data.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using namespace sink::rt;
using json = nlohmann::json;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

// 16 steps, a checkpoint every 4, an evaluation every 2.
const char* kCheckpointSpec =
    "experiment faults extends micro { train { steps = 16  checkpoint_every = 4  log_every = 3 }  measure.every = 2 }";

RunOptions options(const std::string& out) {
  RunOptions o;
  o.out = out;
  o.progress = false;
  return o;
}

int64_t step_in(const std::string& checkpoint) {
  torch::serialize::InputArchive archive;
  archive.load_from(checkpoint);
  torch::Tensor step;
  archive.read("step", step);
  return step.item<int64_t>();
}

// Every file written while this lives may be at most `bytes` long: writes
// past that fail with EFBIG, as on a full disk, instead of killing the
// process with SIGXFSZ.
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit now = old;
    now.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &now), 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};

// The checkpoint writer runs out of space after `bytes`, while this lives.
struct FullDiskForCheckpoints {
  explicit FullDiskForCheckpoints(size_t bytes) { inject_write_fault("checkpoint/state.pt", bytes, ENOSPC); }
  ~FullDiskForCheckpoints() { inject_write_fault("", 0, 0); }
};

void expect_same_final(const json& a, const json& b) {
  EXPECT_EQ(a.at("step"), b.at("step"));
  EXPECT_NEAR(a.at("valid_loss").get<double>(), b.at("valid_loss").get<double>(), 1e-6);
  EXPECT_NEAR(a.at("train_loss").get<double>(), b.at("train_loss").get<double>(), 1e-6);
  EXPECT_NEAR(a.at("sink").at("1").get<double>(), b.at("sink").at("1").get<double>(), 1e-6);
}

}  // namespace

TEST(Checkpoint, TheLastTwoAreKept) {
  TempDir out("two");
  auto r = run_plan(sinktest::plan_of(kCheckpointSpec), options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  RunDir dir(r.dir);
  EXPECT_EQ(step_in(dir.checkpoint()), 16);
  EXPECT_EQ(step_in(dir.previous_checkpoint()), 12);
  for (const auto& e : fs::directory_iterator(r.dir + "/checkpoint"))
    EXPECT_EQ(e.path().extension(), ".pt") << "left behind: " << e.path();
}

TEST(Checkpoint, ACorruptLatestFallsBackToThePrevious) {
  auto plan = sinktest::plan_of(kCheckpointSpec);
  TempDir a("straight"), b("corrupt");
  auto straight = run_plan(plan, options(a.str()));
  ASSERT_EQ(straight.status, sink::rt::RunOutcome::Completed);

  auto o = options(b.str());
  o.stop_after = 10;  // checkpoints at 4 and 8
  auto stopped = run_plan(plan, o);
  ASSERT_EQ(stopped.status, sink::rt::RunOutcome::Stopped);
  RunDir dir(stopped.dir);
  ASSERT_EQ(step_in(dir.checkpoint()), 8);
  ASSERT_EQ(step_in(dir.previous_checkpoint()), 4);
  // Cut short, as a copy or a disk that lost the end of a write leaves it.
  const std::string whole = sinktest::read_file(dir.checkpoint());
  sinktest::write_file(dir.checkpoint(), whole.substr(0, whole.size() / 2));

  o.stop_after = -1;
  o.resume = true;
  auto resumed = run_plan(plan, o);
  ASSERT_EQ(resumed.status, sink::rt::RunOutcome::Completed) << resumed.summary.dump(2);
  const std::string log = sinktest::read_file(dir.file("log.txt"));
  EXPECT_NE(log.find("warning: checkpoint '" + dir.checkpoint() + "'"), std::string::npos) << log;
  EXPECT_NE(log.find("using the previous checkpoint"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed at step 4"), std::string::npos) << log;
  // Steps 5..16 again give what the uninterrupted run gave.
  expect_same_final(straight.summary["final"], resumed.summary["final"]);
  EXPECT_EQ(read_metrics(resumed.dir).size(), 8u);  // 2, 4, ..., 16: the lines past step 4 rewritten once
  // losses.jsonl likewise: the loss every 3 steps and at the last, each step once, the same losses as straight.
  const auto straight_losses = sink::results::load_run(straight.dir).losses;
  const auto resumed_losses = sink::results::load_run(resumed.dir).losses;
  const std::vector<int64_t> logged = {3, 6, 9, 12, 15, 16};
  ASSERT_EQ(straight_losses.size(), logged.size());
  ASSERT_EQ(resumed_losses.size(), logged.size());
  for (size_t k = 0; k < logged.size(); ++k) {
    EXPECT_EQ(straight_losses[k].first, logged[k]);
    EXPECT_EQ(resumed_losses[k].first, logged[k]);
    EXPECT_NEAR(straight_losses[k].second, resumed_losses[k].second, 1e-6) << "step " << logged[k];
  }
  int lines = 0;
  for (char c : sinktest::read_file(dir.file("losses.jsonl"))) lines += c == '\n';
  EXPECT_EQ(lines, 6) << "the lines past the checkpoint's step 4 written once, not twice";
  // The bad file is kept aside, and two good checkpoints are on disk again.
  EXPECT_EQ(sinktest::read_file(dir.file("checkpoint/state.bad.pt")).size(), whole.size() / 2);
  EXPECT_EQ(step_in(dir.checkpoint()), 16);
  EXPECT_EQ(step_in(dir.previous_checkpoint()), 12);
}

// `sinkc measure RUN` reads the same usable checkpoint as --resume: the
// previous one, with a warning, when the latest is corrupt.
TEST(Checkpoint, MeasureFallsBackToThePreviousToo) {
  TempDir out("measure");
  auto r = run_plan(sinktest::plan_of(kCheckpointSpec), options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  RunDir dir(r.dir);
  const auto measure = [&](const std::string& log) {
    return sinktest::wait_exit(sinktest::spawn({sinktest::sinkc_binary(), "measure", r.dir, "--n", "4"}, log));
  };
  ASSERT_EQ(measure(out.file("good.txt")), 0) << sinktest::read_file(out.file("good.txt"));
  const std::string good = sinktest::read_file(out.file("good.txt"));
  sinktest::write_file(dir.checkpoint(), "not a checkpoint");
  ASSERT_EQ(measure(out.file("fallback.txt")), 0) << sinktest::read_file(out.file("fallback.txt"));
  const std::string fallback = sinktest::read_file(out.file("fallback.txt"));
  EXPECT_NE(fallback.find("using the previous checkpoint"), std::string::npos) << fallback;
  // Step 12's weights, not step 16's: the alpha table differs from the good run's.
  EXPECT_NE(fallback.substr(fallback.find("alpha_1")), good.substr(good.find("alpha_1")));
}

TEST(Checkpoint, BothUnreadableIsAClearError) {
  auto plan = sinktest::plan_of(kCheckpointSpec);
  TempDir out("both");
  auto o = options(out.str());
  o.stop_after = 10;
  ASSERT_EQ(run_plan(plan, o).status, sink::rt::RunOutcome::Stopped);
  RunDir dir(out.str() + "/" + plan.dir_name());
  sinktest::write_file(dir.checkpoint(), "garbage");
  sinktest::write_file(dir.previous_checkpoint(), "more garbage");
  const std::string reason = sinktest::resume_must_fail(plan, o);
  EXPECT_NE(reason.find("no usable checkpoint"), std::string::npos) << reason;
  EXPECT_NE(reason.find("state.pt'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("state.prev.pt'"), std::string::npos) << reason;
  // The exporter reads checkpoints the same way and says the same.
  try {
    load_trained_model(dir.path());
    ADD_FAILURE() << "loaded a model from two garbage checkpoints";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable checkpoint"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, AWriteThatFailsKeepsTheEarlierOnesAndFailsTheRun) {
  auto plan = sinktest::plan_of(kCheckpointSpec);
  TempDir a("straight"), b("full");
  auto straight = run_plan(plan, options(a.str()));
  ASSERT_EQ(straight.status, sink::rt::RunOutcome::Completed);

  auto o = options(b.str());
  o.stop_after = 10;  // checkpoints at 4 and 8
  ASSERT_EQ(run_plan(plan, o).status, sink::rt::RunOutcome::Stopped);
  RunDir dir(b.str() + "/" + plan.dir_name());
  const std::string latest = sinktest::read_file(dir.checkpoint()),
                    previous = sinktest::read_file(dir.previous_checkpoint());
  o.stop_after = -1;
  o.resume = true;
  RunResult failed;
  {
    FullDiskForCheckpoints full(latest.size() / 2);
    ASSERT_NO_THROW(failed = run_plan(plan, o));
  }
  EXPECT_EQ(failed.status, sink::rt::RunOutcome::Failed);
  const std::string reason = failed.summary.value("reason", "");
  EXPECT_NE(reason.find("checkpoint of step 12 not written"), std::string::npos) << reason;
  EXPECT_NE(reason.find(std::strerror(ENOSPC)), std::string::npos) << reason;
  EXPECT_NE(reason.find("the checkpoint of step 8 is intact"), std::string::npos) << reason;
  auto summary = json::parse(sinktest::read_file(dir.file("summary.json")));
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["reason"], reason);
  EXPECT_EQ(summary["steps_done"], 12);
  // Byte for byte what was there, and no partial file beside them.
  EXPECT_EQ(sinktest::read_file(dir.checkpoint()), latest);
  EXPECT_EQ(sinktest::read_file(dir.previous_checkpoint()), previous);
  EXPECT_FALSE(fs::exists(dir.checkpoint() + ".tmp"));
  // The evaluations up to the failure are on disk for `sinkc table`.
  auto metrics = read_metrics(dir.path());
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.back()["step"], 12);

  // `sinkc table` shows the failed run with its last metrics.
  const std::string sinkc = sinktest::sinkc_binary();
  const bool have_sinkc = fs::exists(sinkc);
  if (have_sinkc) {
    std::string table;
    FILE* p = popen((sinkc + " table " + b.str() + " --metric valid_loss 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) table.append(buf, n);
    pclose(p);
    EXPECT_NE(table.find("failed (step 12/16)"), std::string::npos) << table;
    EXPECT_NE(table.find(fmt::format("{:.4f}", metrics.back()["valid_loss"].get<double>())), std::string::npos)
        << table;
  }

  // Space again: --resume continues from step 8 to the uninterrupted result.
  auto resumed = run_plan(plan, o);
  ASSERT_EQ(resumed.status, sink::rt::RunOutcome::Completed) << resumed.summary.dump(2);
  EXPECT_NE(sinktest::read_file(dir.file("log.txt")).find("resumed at step 8"), std::string::npos);
  expect_same_final(straight.summary["final"], resumed.summary["final"]);
  if (!have_sinkc) GTEST_SKIP() << "the `sinkc table` check did not run: " << sinkc << " is not built";
}

TEST(Checkpoint, TheWriterReportsARealWriteFailureAndLeavesTheOldFile) {
  // The kernel's own refusal (EFBIG past RLIMIT_FSIZE, as ENOSPC on a full
  // disk): the file under the name keeps its old content, no temporary stays.
  TempDir dir("writer");
  const std::string path = dir.file("state.pt");
  sinktest::write_file(path, "the previous checkpoint");
  const std::string big(1 << 16, 'x');
  std::string error;
  {
    FileSizeLimit limit(4096);
    FileWriter w(path);
    EXPECT_EQ(w.write(big.data(), big.size()), big.size());  // never short: LibTorch must not see it
    try {
      w.commit();
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
  }
  EXPECT_NE(error.find(path), std::string::npos) << error;
  EXPECT_NE(error.find(std::strerror(EFBIG)), std::string::npos) << error;
  EXPECT_EQ(sinktest::read_file(path), "the previous checkpoint");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // With room, the same writes land whole.
  {
    FileWriter w(path);
    w.write(big.data(), big.size());
    w.commit();
  }
  EXPECT_EQ(sinktest::read_file(path), big);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}
