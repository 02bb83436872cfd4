// `sinkc submit SPEC --slurm`: a sweep as one Slurm job array. The front end
// compiles the plans into OUT/.plans (as `sinkc run` does), leaves out runs
// already completed in OUT, and writes a batch script whose task k runs
// `sinkc-runtime run` on the k-th plan. Slurm does the scheduling; the run
// locks, the content cache and --resume make a task safe to start twice.
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli/commands.h"
#include "plan/plan.h"
#include "plan/run_record.h"

namespace sink::cli {

namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool completed(const fs::path& run_dir) {
  std::ifstream in(run_dir / "summary.json");
  if (!in) return false;
  auto j = nlohmann::json::parse(in, nullptr, false);
  return !j.is_discarded() && j.is_object() &&
         j.value(sink::run_record::summary::kStatus, "") == status_name(sink::run_record::RunStatus::Completed);
}

std::string batch_script(const SubmitOptions& o, const fs::path& out, const fs::path& tasks, size_t count,
                         const std::string& job_name) {
  const fs::path runtime = fs::read_symlink("/proc/self/exe").parent_path() / "sinkc-runtime";
  std::string s = "#!/bin/bash\n";
  s += "# Written by `sinkc submit --slurm`: one array task per run. Task k trains the\n"
       "# k-th plan of the task list; the run lock makes a repeated task skip a run\n"
       "# another task holds, and --resume continues a preempted or requeued one.\n";
  s += fmt::format("#SBATCH --job-name={}\n", job_name);
  s += fmt::format("#SBATCH --array=0-{}{}\n", count - 1, o.max_parallel > 0 ? fmt::format("%{}", o.max_parallel) : "");
  s += fmt::format("#SBATCH --output={}/%x-%A_%a.out\n", (out / ".slurm").string());
  s += "#SBATCH --ntasks=1\n";
  if (o.cpus_per_run > 0) s += fmt::format("#SBATCH --cpus-per-task={}\n", o.cpus_per_run);
  if (o.gpus_per_run > 0) s += fmt::format("#SBATCH --gpus-per-task={}\n", o.gpus_per_run);
  if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.time.empty()) s += fmt::format("#SBATCH --time={}\n", o.time);
  // SIGTERM two minutes before the limit: the run checkpoints and is recorded interrupted.
  s += "#SBATCH --signal=B:TERM@120\n#SBATCH --requeue\n";
  for (const auto& a : o.sbatch_args) s += fmt::format("#SBATCH {}\n", a);
  s += "set -uo pipefail\n";
  s += fmt::format("plan=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" {}) || exit 1\n", shell_quote(tasks.string()));
  s += "threads=${SLURM_CPUS_PER_TASK:-1}\n";
  // In the background, not exec: bash must stay to pass the batch step's
  // SIGTERM on to the runtime, then wait for its checkpoint.
  s += fmt::format("{} run \"$plan\" --out {} --resume --no-progress --auto-threads \"$threads\" &\n",
                   shell_quote(runtime.string()), shell_quote(out.string()));
  s += "pid=$!\ntrap 'kill -TERM $pid 2>/dev/null' TERM\n"
       "wait $pid; status=$?\n"
       "while kill -0 $pid 2>/dev/null; do wait $pid; status=$?; done\n"
       "exit $status\n";
  return s;
}

}  // namespace

int submit_slurm(const std::vector<std::string>& targets, const SubmitOptions& o, const CommonOptions& common) {
  std::error_code ec;
  const fs::path out = fs::absolute(o.out, ec).lexically_normal();
  std::vector<std::string> plan_files;
  if (int rc = plans_for_runtime(targets, out.string(), common, plan_files); rc != 0) return rc;
  if (!select_plan_files(plan_files, o.runs, fmt::format("{}", fmt::join(targets, ", ")))) return 2;
  std::vector<std::string> pending;
  size_t done = 0;
  for (const auto& file : plan_files) {
    Plan p = read_plan(file);
    if (completed(out / p.dir_name())) {
      ++done;
      continue;
    }
    pending.push_back(fs::absolute(file, ec).lexically_normal().string());
  }
  FILE* const say = o.wait ? stderr : stdout;  // with --wait, stdout is the caller's answer
  if (pending.empty()) {
    fmt::print(say, "nothing to submit: {} run{} already completed in {}\n", done, done == 1 ? "" : "s", out.string());
    return 0;
  }
  const std::string stem =
      targets.size() == 1 ? fs::path(targets[0]).stem().string() : fmt::format("{}-specs", targets.size());
  const auto stamp =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const fs::path slurm_dir = out / ".slurm";
  const fs::path tasks = slurm_dir / fmt::format("{}-{}.tasks", stem, stamp);
  const fs::path script_path = slurm_dir / fmt::format("{}-{}.sbatch", stem, stamp);
  const std::string script = batch_script(o, out, tasks, pending.size(), "sinklab-" + stem);
  if (o.dry_run) {
    fmt::print("{}", script);
    fmt::print(stderr, "sinkc: dry run: {} task{} ({} already completed); the task list would be {}:\n", pending.size(),
               pending.size() == 1 ? "" : "s", done, tasks.string());
    for (const auto& p : pending) fmt::print(stderr, "  {}\n", p);
    return 0;
  }
  fs::create_directories(slurm_dir, ec);
  {
    std::ofstream t(tasks), s(script_path);
    for (const auto& p : pending) t << p << "\n";
    s << script;
    if (!t || !s) {
      fmt::print(stderr, "sinkc: cannot write {}\n", slurm_dir.string());
      return 2;
    }
  }
  const std::string command =
      fmt::format("sbatch --parsable{} {}", o.wait ? " --wait" : "", shell_quote(script_path.string()));
  std::string reply;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    fmt::print(stderr, "sinkc: cannot run sbatch\n");
    return 2;
  }
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) reply += buf;
  const int status = pclose(pipe);
  while (!reply.empty() && (reply.back() == '\n' || reply.back() == '\r')) reply.pop_back();
  // sbatch --wait exits with the array's status: a failed task is the runs' to report, not sbatch's.
  const bool job_id = !reply.empty() && reply.find_first_not_of("0123456789;") == std::string::npos;
  if (o.wait && job_id) {
    fmt::print(stderr, "job array {} ended ({} task{}){}\n", reply, pending.size(), pending.size() == 1 ? "" : "s",
               status == 0 ? "" : ", some failed");
    return status == 0 ? 0 : 1;
  }
  if (status != 0) {
    fmt::print(stderr, "sinkc: sbatch failed ({}){}\n  the script is {}; `sinkc submit --dry-run` prints it\n",
               reply.empty() ? "is this a Slurm login node?" : reply,
               WEXITSTATUS(status) == 127 ? " (sbatch not found)" : "", script_path.string());
    return 2;
  }
  fmt::print(
      "submitted job array {} ({} task{}, {} already completed)\n  script {}\n  logs   {}/\n"
      "  then: sinkc table {}   (or sinkc report {} -o report.html)\n",
      reply, pending.size(), pending.size() == 1 ? "" : "s", done, script_path.string(), slurm_dir.string(),
      out.string(), out.string());
  return 0;
}

}  // namespace sink::cli
