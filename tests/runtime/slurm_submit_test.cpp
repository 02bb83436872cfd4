// `sinkc submit --slurm`: the job array's script, submitted through a stand-in
// `sbatch` that records what it got, then each array task run the way Slurm
// runs it (SLURM_ARRAY_TASK_ID set, USR1 before the time limit, SIGTERM at a
// cancel) with a stand-in `scontrol` that records the requeue; and a
// resubmission leaves out what completed.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <regex>
#include <thread>

#include "runtime/training/run_dir.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

const char* kSlurmSpec =
    "experiment base extends micro { train.steps = 60  measure.every = 30 }\n"
    "sweep seeds over base { train.seed in [1, 2] }\n"
    "experiment long extends micro { train.steps = 200000  measure.every = 100  train.checkpoint_every = 100 }\n";

// PATH with a fake sbatch first: it copies the script it is given and answers
// a job id; and a fake scontrol, which appends its arguments to scontrol.args.
std::string path_with_fake_slurm(const TempDir& dir) {
  fs::create_directories(dir.path / "bin");
  sinktest::write_file(dir.file("bin/sbatch"), "#!/bin/bash\necho \"$@\" > \"" + dir.file("sbatch.args") +
                                                   "\"\ncp \"${@: -1}\" \"" + dir.file("submitted.sbatch") +
                                                   "\"\necho 4242\n");
  sinktest::write_file(dir.file("bin/scontrol"), "#!/bin/bash\necho \"$@\" >> \"" + dir.file("scontrol.args") + "\"\n");
  fs::permissions(dir.path / "bin/sbatch", fs::perms::owner_all);
  fs::permissions(dir.path / "bin/scontrol", fs::perms::owner_all);
  return dir.file("bin") + ":" + std::getenv("PATH");
}

// The array task `k` of job array 4242, as Slurm starts it the `restarts`-th time.
pid_t start_task(const std::string& script, int k, const std::string& log, const std::string& path, int restarts = 0) {
  return sinktest::spawn({"env", "PATH=" + path, "SLURM_ARRAY_JOB_ID=4242", "SLURM_ARRAY_TASK_ID=" + std::to_string(k),
                          "SLURM_RESTART_COUNT=" + std::to_string(restarts), "SLURM_CPUS_PER_TASK=1", "bash", script},
                         log);
}

// Waits up to 10 s for `text` in `file`.
bool wait_for(const fs::path& file, const std::string& text) {
  for (int k = 0; k < 500; ++k) {
    if (sinktest::read_file(file.string()).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
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
  sinktest::write_file(dir.file("spec.sink"), kSlurmSpec);
  ASSERT_EQ(sinktest::sinkc_status({"submit", dir.file("spec.sink"), "--slurm", "--dry-run", "--out", dir.file("out"),
                                    "--partition", "gpu", "--time", "2:00:00", "--gpus-per-run", "1", "--cpus-per-run",
                                    "8", "--max-parallel", "2", "--sbatch-arg=--account=lab"},
                                   dir.file("dry.txt")),
            0);
  const std::string text = sinktest::read_file(dir.file("dry.txt"));
  for (const char* line :
       {"#SBATCH --array=0-3%2", "#SBATCH --partition=gpu", "#SBATCH --time=2:00:00", "#SBATCH --gres=gpu:1",
        "#SBATCH --cpus-per-task=8", "#SBATCH --account=lab", "#SBATCH --signal=B:USR1@120", "#SBATCH --requeue",
        ">= 20", "4 tasks (0 already completed)"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in:\n" << text;
  // Not "torch": the build folder's own name may hold it (build-torch2).
  EXPECT_EQ(text.find("torch.distributed.run"), std::string::npos) << "one GPU per run needs no torchrun:\n" << text;
  EXPECT_EQ(text.find("--nproc_per_node"), std::string::npos) << "one GPU per run needs no torchrun:\n" << text;
  EXPECT_FALSE(fs::exists(dir.path / "out/.slurm")) << "a dry run wrote its script";

  // Several GPUs per run: the run's workers under torchrun, one per GPU, the task's cores shared among them.
  ASSERT_EQ(sinktest::sinkc_status(
                {"submit", dir.file("spec.sink"), "--slurm", "--dry-run", "--out", dir.file("out"), "--gpus-per-run",
                 "4", "--cpus-per-run", "16", "--signal-lead", "300", "--max-requeues", "3"},
                dir.file("dry4.txt")),
            0);
  const std::string four = sinktest::read_file(dir.file("dry4.txt"));
  for (const char* line : {"#SBATCH --gres=gpu:4", "#SBATCH --signal=B:USR1@300", "'--nproc_per_node' '4'",
                           "'--master_port' \"$port\"", "'--no_python'", "/ 4 ))", ">= 3"})
    EXPECT_NE(four.find(line), std::string::npos) << line << " not in:\n" << four;
  EXPECT_NE(sinktest::sinkc_status({"submit", dir.file("spec.sink"), "--slurm", "--dry-run", "--signal-lead", "0"},
                                   dir.file("bad.txt")),
            0);
}

TEST(SlurmSubmit, ArrayTasksTrainRequeueAtTheWarningAndResubmissionSkipsCompletedOnes) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("submit");
  sinktest::write_file(dir.file("spec.sink"), kSlurmSpec);
  const std::string path = path_with_fake_slurm(dir);
  const fs::path out = dir.path / "out";
  ASSERT_EQ(sinktest::sinkc_status({"submit", dir.file("spec.sink"), "--slurm", "--run", "base", "--out", out.string()},
                                   dir.file("submit.txt"), path),
            0)
      << sinktest::read_file(dir.file("submit.txt"));
  EXPECT_NE(sinktest::read_file(dir.file("submit.txt")).find("submitted job array 4242 (1 task, 0 already completed)"),
            std::string::npos)
      << sinktest::read_file(dir.file("submit.txt"));
  EXPECT_NE(sinktest::read_file(dir.file("sbatch.args")).find("--parsable"), std::string::npos);

  // The whole sweep: base is one task, its seeds two more, `long` the fourth.
  ASSERT_EQ(sinktest::sinkc_status({"submit", dir.file("spec.sink"), "--slurm", "--out", out.string()},
                                   dir.file("submit2.txt"), path),
            0);
  const std::string script = sinktest::read_file(dir.file("submitted.sbatch"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(script, m, std::regex("--array=0-(\\d+)"))) << script;
  const int tasks = std::stoi(m[1]) + 1;
  ASSERT_EQ(tasks, 4) << script;
  const std::string script_file = dir.file("task.sbatch");
  sinktest::write_file(script_file, script);

  // The task list the script reads, a plan and its run directory a line, to know which task is `long`.
  ASSERT_TRUE(std::regex_search(script, m, std::regex("sed -n .* '([^']+\\.tasks)'"))) << script;
  std::vector<std::pair<std::string, fs::path>> plans;
  std::istringstream list(sinktest::read_file(m[1]));
  for (std::string line; std::getline(list, line);)
    plans.emplace_back(line.substr(0, line.find('\t')), line.substr(line.find('\t') + 1));
  ASSERT_EQ(plans.size(), 4u);

  // Each task as Slurm starts it; `long` is stopped by the time limit's warning, below.
  pid_t long_task = -1;
  int long_index = -1;
  for (int k = 0; k < tasks; ++k) {
    EXPECT_EQ(plans[k].second, out / fs::path(plans[k].first).stem());
    pid_t pid = start_task(script_file, k, dir.file("task" + std::to_string(k) + ".txt"), path);
    if (plans[k].first.find("/long-") != std::string::npos) {
      long_task = pid;
      long_index = k;
      continue;
    }
    EXPECT_EQ(sinktest::wait_exit(pid), 0) << sinktest::read_file(dir.file("task" + std::to_string(k) + ".txt"));
  }
  for (const char* run : {"base", "seeds.seed=1", "seeds.seed=2"}) EXPECT_EQ(status_of(out, run), "completed") << run;
  EXPECT_FALSE(fs::exists(dir.path / "scontrol.args")) << "a completed run was requeued";

  // The warning (--signal=B:USR1, to the batch shell): a checkpoint, then the task requeues itself.
  ASSERT_GE(long_task, 0) << "no task trains the long run";
  const std::string long_log = dir.file("task" + std::to_string(long_index) + ".txt");
  const fs::path long_dir = plans[long_index].second;
  ASSERT_TRUE(wait_for(long_dir / "log.txt", "step 200/")) << sinktest::read_file(long_log);
  kill(long_task, SIGUSR1);
  EXPECT_EQ(sinktest::wait_exit(long_task), 0) << sinktest::read_file(long_log);
  EXPECT_EQ(status_of(out, "long"), "interrupted") << sinktest::read_file(long_log);
  EXPECT_EQ(sinktest::read_file(dir.file("scontrol.args")), "requeue 4242_" + std::to_string(long_index) + "\n");
  // Without a terminal, progress is a plain line every train.log_every steps.
  EXPECT_TRUE(std::regex_search(sinktest::read_file(long_log),
                                std::regex("\nlong step \\d+/200000 loss [0-9.]+ lr \\S+ [0-9.]+k tok/s ETA \\S+\n")))
      << sinktest::read_file(long_log);

  // The requeued task resumes; a cancel (SIGTERM to the batch shell and the runtime alike) checkpoints it too, and
  // does not requeue it.
  pid_t requeued = start_task(script_file, long_index, dir.file("requeued.txt"), path, 1);
  EXPECT_TRUE(wait_for(long_dir / "log.txt", "resumed at step")) << "the requeued task did not resume";
  ASSERT_TRUE(wait_for(dir.file("requeued.txt"), "tok/s")) << sinktest::read_file(dir.file("requeued.txt"));
  kill(-requeued, SIGTERM);
  EXPECT_NE(sinktest::wait_exit(requeued), 0);
  EXPECT_EQ(status_of(out, "long"), "interrupted") << sinktest::read_file(dir.file("requeued.txt"));
  EXPECT_EQ(sinktest::read_file(dir.file("scontrol.args")), "requeue 4242_" + std::to_string(long_index) + "\n");

  // A resubmission leaves out the three completed runs; a task requeued as often as allowed is not requeued again.
  ASSERT_EQ(
      sinktest::sinkc_status({"submit", dir.file("spec.sink"), "--slurm", "--out", out.string(), "--max-requeues", "2"},
                             dir.file("submit3.txt"), path),
      0);
  EXPECT_NE(sinktest::read_file(dir.file("submit3.txt")).find("(1 task, 3 already completed)"), std::string::npos)
      << sinktest::read_file(dir.file("submit3.txt"));
  const std::string again = dir.file("again.sbatch");
  sinktest::write_file(again, sinktest::read_file(dir.file("submitted.sbatch")));
  pid_t last = start_task(again, 0, dir.file("last.txt"), path, 2);
  ASSERT_TRUE(wait_for(dir.file("last.txt"), "tok/s")) << sinktest::read_file(dir.file("last.txt"));
  kill(-last, SIGUSR1);  // the runtime gets it twice, from here and from the script: a second one is harmless
  EXPECT_NE(sinktest::wait_exit(last), 0);
  EXPECT_EQ(status_of(out, "long"), "interrupted");
  EXPECT_NE(sinktest::read_file(dir.file("last.txt")).find("after 2 requeues: not requeued"), std::string::npos)
      << sinktest::read_file(dir.file("last.txt"));
  EXPECT_EQ(sinktest::read_file(dir.file("scontrol.args")), "requeue 4242_" + std::to_string(long_index) + "\n");
}
