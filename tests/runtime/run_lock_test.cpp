// One owner per run directory: the lock itself, its release when the holder
// is killed, and two `sinkc run` processes on the same spec and --out.
#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <sys/wait.h>
#include <thread>

#include "runtime/processes/process.h"
#include "runtime/processes/run_lock.h"
#include "runtime/training/run_dir.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using namespace sink::rt;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

TEST(RunLock, OneHolderAtATimeAndItSaysWho) {
  TempDir dir("lock");
  auto first = RunLock::acquire(dir.str(), false);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(RunLock::acquire(dir.str(), false).has_value());  // a second open file, same process
  EXPECT_EQ(RunLock::holder(dir.str()), host_name() + ", pid " + std::to_string(getpid()));
  first.reset();
  EXPECT_TRUE(RunLock::acquire(dir.str(), false).has_value());
}

TEST(RunLock, AKilledHolderReleasesItAndAWaiterGetsIt) {
  TempDir dir("lock_killed");
  const std::string lock = dir.file("lock");
  const pid_t holder = sinktest::spawn({"flock", lock, "sleep", "60"});
  bool held = false;
  for (int k = 0; k < 200 && !held; ++k) {
    held = !RunLock::acquire(dir.str(), false).has_value();
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(held) << "flock(1) did not take the lock";
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(-holder, SIGKILL);  // flock(1) and the sleep that inherited its descriptor
  });
  auto waited = RunLock::acquire(dir.str(), true);  // blocks until the holder is gone
  killer.join();
  EXPECT_TRUE(waited.has_value());
  EXPECT_EQ(sinktest::wait_exit(holder), 128 + SIGKILL);
}

// Both processes walk the same runs; each run trains exactly once, the
// metrics have no repeated step, and a process says which runs it skipped.
TEST(RunLock, TwoSinkcRunProcessesTrainEachRunOnce) {
  const std::string sinkc = sinktest::sinkc_binary();
  if (!fs::exists(sinkc)) GTEST_SKIP() << sinkc << " is not built";
  TempDir dir("two_processes");
  sinktest::write_file(dir.file("spec.sink"),
                       "experiment base extends micro { train.steps = 300  measure.every = 100 }\n"
                       "sweep both over base { train.seed in [1, 2, 3] }\n");
  const std::string runs = dir.file("runs");
  const pid_t a = sinktest::spawn({sinkc, "run", dir.file("spec.sink"), "--out", runs}, dir.file("a.txt"));
  const pid_t b = sinktest::spawn({sinkc, "run", dir.file("spec.sink"), "--out", runs}, dir.file("b.txt"));
  const std::string out_a_status = std::to_string(sinktest::wait_exit(a)),
                    out_b_status = std::to_string(sinktest::wait_exit(b));
  const std::string out_a = sinktest::read_file(dir.file("a.txt")), out_b = sinktest::read_file(dir.file("b.txt"));
  EXPECT_EQ(out_a_status, "0") << out_a;
  EXPECT_EQ(out_b_status, "0") << out_b;
  int run_dirs = 0;
  for (const auto& e : fs::directory_iterator(runs)) {
    if (!e.is_directory() || e.path().filename().string()[0] == '.') continue;
    ++run_dirs;
    const std::string log = sinktest::read_file((e.path() / "log.txt").string());
    size_t starts = 0;
    for (size_t at = log.find("parameters"); at != std::string::npos; at = log.find("parameters", at + 1)) ++starts;
    EXPECT_EQ(starts, 1u) << e.path() << " trained " << starts << " times\n" << log;
    std::map<int64_t, int> steps;
    for (const auto& m : read_metrics(e.path().string())) ++steps[m.at("step").get<int64_t>()];
    EXPECT_EQ(steps.size(), 3u) << e.path();  // steps 100, 200, 300
    for (const auto& [step, count] : steps) EXPECT_EQ(count, 1) << e.path() << " step " << step;
    EXPECT_NE(sinktest::read_file((e.path() / "summary.json").string()).find("\"completed\""), std::string::npos);
  }
  EXPECT_EQ(run_dirs, 4);  // base and its three seeds
  EXPECT_NE((out_a + out_b).find("running elsewhere"), std::string::npos) << out_a << "\n---\n" << out_b;
}

}  // namespace
