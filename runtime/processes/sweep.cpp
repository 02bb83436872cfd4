#include "runtime/processes/sweep.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <map>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "runtime/processes/interrupt.h"
#include "runtime/training/run_dir.h"

extern char** environ;

namespace sink::rt {
namespace {

pid_t start_child(const SweepRun& run, const SweepOptions& options, int slot) {
  std::vector<std::string> argv = {"/proc/self/exe", "run",
                                   run.plan_file,    "--no-progress",
                                   "--auto-threads", std::to_string(options.threads_per_run)};
  argv.insert(argv.end(), options.flags.begin(), options.flags.end());
  if (options.gpus > 0) argv.insert(argv.end(), {"--gpu", std::to_string(slot % options.gpus)});
  if (options.gpu_share > 1) argv.insert(argv.end(), {"--gpu-share", std::to_string(options.gpu_share)});
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  return pid;
}

// The last step a run has recorded, from its metrics (written at each evaluation).
int64_t recorded_step(const std::string& dir) {
  auto metrics = read_metrics(dir);
  return metrics.empty() ? 0 : metrics.back().value("step", int64_t{0});
}

std::string short_name(const std::string& dir) {
  const std::string name = dir.substr(dir.find_last_of('/') + 1);
  return name.size() > 9 ? name.substr(0, name.size() - 9) : name;  // without -hash8
}

}  // namespace

int runs_per_gpu(int jobs, size_t runs, int gpus) {
  const int at_once = static_cast<int>(std::min<size_t>(std::max(jobs, 1), std::max<size_t>(runs, 1)));
  return gpus <= 1 ? at_once : (at_once + gpus - 1) / gpus;
}

int run_sweep(const std::vector<SweepRun>& runs, const SweepOptions& options) {
  install_interrupt_handlers();
  const bool tty = isatty(2);
  struct Running {
    const SweepRun* run;
    int slot;  // which of the --jobs places it holds: its GPU
  };
  std::map<pid_t, Running> running;
  auto free_slot = [&] {
    for (int slot = 0;; ++slot) {
      bool taken = false;
      for (const auto& [pid, r] : running) taken = taken || r.slot == slot;
      if (!taken) return slot;
    }
  };
  size_t next = 0, done = 0;
  int failures = 0;
  bool interrupted = false;
  auto progress = [&] {
    if (!tty) return;
    std::string line = fmt::format("[{} done, {} running, {} waiting]", done, running.size(), runs.size() - next);
    for (const auto& [pid, r] : running)
      line += fmt::format("  {} {}/{}", short_name(r.run->dir), recorded_step(r.run->dir), r.run->steps);
    fmt::print(stderr, "\r\033[K{}", line.substr(0, 200));
  };
  while (next < runs.size() || !running.empty()) {
    // Ctrl-C reaches every process of the foreground group: the children
    // checkpoint and record themselves interrupted; no new run starts.
    if (interrupt_requested()) interrupted = true;
    while (!interrupted && next < runs.size() && static_cast<int>(running.size()) < options.jobs) {
      const SweepRun& run = runs[next++];
      const int slot = free_slot();
      const pid_t pid = start_child(run, options, slot);
      if (pid < 0) {
        fmt::print(stderr, "sinkc: cannot start a process for {}\n", run.plan_file);
        ++failures, ++done;
        continue;
      }
      running[pid] = {&run, slot};
    }
    if (interrupted && next < runs.size()) {
      fmt::print(stderr, "\nsinkc: interrupted; {} runs did not start\n", runs.size() - next);
      next = runs.size();
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      running.erase(pid);
      ++done;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (code == 130)
        interrupted = true;
      else if (code != 0)
        ++failures;
      if (tty) fmt::print(stderr, "\r\033[K");
      continue;
    }
    progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (tty) fmt::print(stderr, "\r\033[K");
  if (interrupted) return 130;
  return failures ? 1 : 0;
}

}  // namespace sink::rt
