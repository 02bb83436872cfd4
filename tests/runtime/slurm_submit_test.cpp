// `sinkc submit --slurm`: the job array's script, submitted through a stand-in
// `sbatch` that records what it got, then each array task run the way Slurm
// runs it (SLURM_ARRAY_TASK_ID set, SIGTERM before the time limit); and a
// resubmission leaves out what completed.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <regex>
#include <thread>

#include "runtime/training/run_dir.h"
#include "runtime_test_util.h"

using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

const char* kSpec =
    "experiment base extends micro { train.steps = 60  measure.every = 30 }\n"
    "sweep seeds over base { train.seed in [1, 2] }\n"
    "experiment long extends micro { train.steps = 200000  measure.every = 100  train.checkpoint_every = 100 }\n";

// PATH with a fake sbatch first: it copies the script it is given and answers a job id.
std::string path_with_fake_sbatch(const TempDir& dir) {
  fs::create_directories(dir.path / "bin");
  sinktest::write_file(dir.file("bin/sbatch"), "#!/bin/bash\necho \"$@\" > \"" + dir.file("sbatch.args") +
                                                   "\"\ncp \"${@: -1}\" \"" + dir.file("submitted.sbatch") +
                                                   "\"\necho 4242\n");
  fs::permissions(dir.path / "bin/sbatch", fs::perms::owner_all);
  return dir.file("bin") + ":" + std::getenv("PATH");
}

int sinkc(std::vector<std::string> args, const std::string& log, const std::string& path = "") {
  args.insert(args.begin(), SINKC_BINARY);
  if (!path.empty()) args.insert(args.begin(), {"env", "PATH=" + path});
  return sinktest::wait_exit(sinktest::spawn(args, log));
}

// The array task `k` of `script`, as Slurm starts it.
pid_t start_task(const std::string& script, int k, const std::string& log) {
  return sinktest::spawn({"env", "SLURM_ARRAY_TASK_ID=" + std::to_string(k), "SLURM_CPUS_PER_TASK=1", "bash", script},
                         log);
}

std::string status_of(const fs::path& out, const std::string& prefix) {
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind(prefix + "-", 0) == 0) {
      auto j = nlohmann::json::parse(sinktest::read_file((e.path() / "summary.json").string()), nullptr, false);
      return j.is_discarded() ? "unreadable" : j.value("status", "none");
    }
  return "missing";
}

}  // namespace

TEST(SlurmSubmit, DryRunPrintsTheArrayScript) {
  TempDir dir("submit-dry");
  sinktest::write_file(dir.file("spec.sink"), kSpec);
  ASSERT_EQ(sinkc({"submit", dir.file("spec.sink"), "--slurm", "--dry-run", "--out", dir.file("out"), "--partition",
                   "gpu", "--time", "2:00:00", "--gpus-per-run", "1", "--cpus-per-run", "8", "--max-parallel", "2",
                   "--sbatch-arg=--account=lab"},
                  dir.file("dry.txt")),
            0);
  const std::string text = sinktest::read_file(dir.file("dry.txt"));
  for (const char* line : {"#SBATCH --array=0-3%2", "#SBATCH --partition=gpu", "#SBATCH --time=2:00:00",
                           "#SBATCH --gpus-per-task=1", "#SBATCH --cpus-per-task=8", "#SBATCH --account=lab",
                           "#SBATCH --signal=B:TERM@120", "4 tasks (0 already completed)"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in:\n" << text;
  EXPECT_FALSE(fs::exists(dir.path / "out/.slurm")) << "a dry run wrote its script";
}

TEST(SlurmSubmit, ArrayTasksTrainEveryRunOnceAndResubmissionSkipsCompletedOnes) {
  if (!fs::exists(SINKC_BINARY)) GTEST_SKIP() << SINKC_BINARY << " is not built";
  TempDir dir("submit");
  sinktest::write_file(dir.file("spec.sink"), kSpec);
  const std::string path = path_with_fake_sbatch(dir);
  const fs::path out = dir.path / "out";
  ASSERT_EQ(sinkc({"submit", dir.file("spec.sink"), "--slurm", "--run", "base", "--out", out.string()},
                  dir.file("submit.txt"), path),
            0)
      << sinktest::read_file(dir.file("submit.txt"));
  EXPECT_NE(sinktest::read_file(dir.file("submit.txt")).find("submitted job array 4242 (1 task, 0 already completed)"),
            std::string::npos)
      << sinktest::read_file(dir.file("submit.txt"));
  EXPECT_NE(sinktest::read_file(dir.file("sbatch.args")).find("--parsable"), std::string::npos);

  // The whole sweep: base is one task, its seeds two more, `long` the fourth.
  ASSERT_EQ(sinkc({"submit", dir.file("spec.sink"), "--slurm", "--out", out.string()}, dir.file("submit2.txt"), path),
            0);
  const std::string script = sinktest::read_file(dir.file("submitted.sbatch"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(script, m, std::regex("--array=0-(\\d+)"))) << script;
  const int tasks = std::stoi(m[1]) + 1;
  ASSERT_EQ(tasks, 4) << script;
  const std::string script_file = dir.file("task.sbatch");
  sinktest::write_file(script_file, script);

  // The task list the script reads, to know which task is `long`.
  ASSERT_TRUE(std::regex_search(script, m, std::regex("sed -n .* '([^']+\\.tasks)'"))) << script;
  std::vector<std::string> plans;
  std::istringstream list(sinktest::read_file(m[1]));
  for (std::string line; std::getline(list, line);) plans.push_back(line);
  ASSERT_EQ(plans.size(), 4u);

  // Each task as Slurm starts it; `long` is stopped by the time limit's SIGTERM, below.
  pid_t long_task = -1;
  int long_index = -1;
  for (int k = 0; k < tasks; ++k) {
    pid_t pid = start_task(script_file, k, dir.file("task" + std::to_string(k) + ".txt"));
    if (plans[k].find("/long-") != std::string::npos) {
      long_task = pid;
      long_index = k;
      continue;
    }
    EXPECT_EQ(sinktest::wait_exit(pid), 0) << sinktest::read_file(dir.file("task" + std::to_string(k) + ".txt"));
  }
  for (const char* run : {"base", "seeds.seed=1", "seeds.seed=2"}) EXPECT_EQ(status_of(out, run), "completed") << run;

  ASSERT_GE(long_task, 0) << "no task trains the long run";
  for (int k = 0; k < 500 && !fs::exists(out / fs::path(plans[long_index]).stem() / "checkpoint/state.pt"); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(long_task, SIGTERM);  // Slurm signals the batch shell (--signal=B:TERM)
  EXPECT_NE(sinktest::wait_exit(long_task), 0);
  EXPECT_EQ(status_of(out, "long"), "interrupted")
      << sinktest::read_file(dir.file("task" + std::to_string(long_index) + ".txt"));

  // A resubmission leaves out the three completed runs and continues the long one from its checkpoint.
  ASSERT_EQ(sinkc({"submit", dir.file("spec.sink"), "--slurm", "--out", out.string()}, dir.file("submit3.txt"), path),
            0);
  EXPECT_NE(sinktest::read_file(dir.file("submit3.txt")).find("(1 task, 3 already completed)"), std::string::npos)
      << sinktest::read_file(dir.file("submit3.txt"));
  const std::string again = dir.file("again.sbatch");
  sinktest::write_file(again, sinktest::read_file(dir.file("submitted.sbatch")));
  pid_t resumed = start_task(again, 0, dir.file("resumed.txt"));
  const fs::path long_log = out / fs::path(plans[long_index]).stem() / "log.txt";
  for (int k = 0; k < 500 && sinktest::read_file(long_log.string()).find("resumed at step") == std::string::npos; ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(resumed, SIGTERM);
  sinktest::wait_exit(resumed);
  const std::string log = sinktest::read_file(dir.file("resumed.txt"));
  EXPECT_NE(log.find("interrupted"), std::string::npos) << log;
  EXPECT_NE(sinktest::read_file(long_log.string()).find("resumed at step"), std::string::npos)
      << "the requeued task did not resume from the checkpoint";
}
