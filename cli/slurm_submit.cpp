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
#include "cli/torchrun.h"
#include "plan/numerics_version.h"
#include "plan/plan.h"
#include "plan/run_record.h"
#include "support/shell.h"

namespace sink::cli {

namespace fs = std::filesystem;

namespace {

// Stands for the shell variable that holds the task's port, in torchrun's arguments.
constexpr const char* kPortVariable = "$port";

// Completed under this sinklab's numerics: a run trained under an older version is stale, not done, and its
// task retrains it (--retrain-stale below).
bool completed(const fs::path& run_dir) {
  std::ifstream in(run_dir / "summary.json");
  if (!in) return false;
  auto j = nlohmann::json::parse(in, nullptr, false);
  return !j.is_discarded() && j.is_object() &&
         j.value(sink::run_record::summary::kStatus, "") == status_name(sink::run_record::RunStatus::Completed) &&
         !sink::numerics_are_stale(j.value(sink::run_record::summary::kNumericsVersion, int64_t{0}));
}

std::string batch_script(const SubmitOptions& o, const fs::path& out, const fs::path& tasks, size_t count,
                         const std::string& job_name) {
  const std::string runtime = (fs::read_symlink("/proc/self/exe").parent_path() / "sinkc-runtime").string();
  const int workers = std::max(1, o.gpus_per_run);
  std::string s = "#!/bin/bash\n";
  s += "# Written by `sinkc submit --slurm`: one array task per run. Task k trains the\n"
       "# k-th plan of the task list; the run lock makes a repeated task skip a run\n"
       "# another task holds, and --resume continues a preempted or requeued one.\n";
  s += fmt::format("#SBATCH --job-name={}\n", job_name);
  s += fmt::format("#SBATCH --array=0-{}{}\n", count - 1, o.max_parallel > 0 ? fmt::format("%{}", o.max_parallel) : "");
  // Appended to: a requeued task's log keeps what it said before the requeue.
  s += fmt::format("#SBATCH --output={}/%x-%A_%a.out\n#SBATCH --open-mode=append\n", (out / ".slurm").string());
  s += "#SBATCH --ntasks=1\n";
  if (o.cpus_per_run > 0) s += fmt::format("#SBATCH --cpus-per-task={}\n", o.cpus_per_run);
  // Per node, which is the task's: understood with either of Slurm's resource selectors (cons_res has no
  // --gpus-per-task), and the batch shell, which starts the workers, sees all G GPUs.
  if (o.gpus_per_run > 0) s += fmt::format("#SBATCH --gres=gpu:{}\n", o.gpus_per_run);
  if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.time.empty()) s += fmt::format("#SBATCH --time={}\n", o.time);
  // A warning before the time limit, to the batch shell alone: it has the run checkpoint, then requeues the task.
  s += fmt::format("#SBATCH --signal=B:USR1@{}\n#SBATCH --requeue\n", o.signal_lead_s);
  for (const auto& a : o.sbatch_args) s += fmt::format("#SBATCH {}\n", a);
  s += "set -uo pipefail\n";
  s += fmt::format("IFS=$'\\t' read -r plan run_dir < <(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" {})\n",
                   shell_quote(tasks.string()));
  s += "[[ -n ${plan:-} ]] || { echo \"sinkc: no task $SLURM_ARRAY_TASK_ID in the task list\" >&2; exit 1; }\n";
  std::string command;
  if (workers == 1) {
    s += "threads=${SLURM_CPUS_PER_TASK:-1}\n";
    command = shell_quote(runtime) + " run";
  } else {
    // The task's cores shared among its workers; the store's port from the job id, so that tasks
    // sharing a node do not meet, below the kernel's range of ephemeral ports.
    s += fmt::format("threads=$(( ${{SLURM_CPUS_PER_TASK:-{0}}} / {0} )); (( threads > 0 )) || threads=1\n", workers);
    s += "port=$(( 10000 + ${SLURM_JOB_ID:-$$} % 20000 ))\n";
    for (const auto& a : torchrun_argv(workers, kPortVariable, runtime))
      command += (command.empty() ? "" : " ") + (a == kPortVariable ? "\"$port\"" : shell_quote(a));
  }
  // USR1 is the runtime's "checkpoint and stop", and a second one is harmless: Slurm may signal the
  // runtime too. TERM (scancel, the limit itself) reaches the runtime from Slurm as well, so it is passed
  // on as USR1: a second TERM would end the run mid-checkpoint. Under torchrun the workers are the
  // launcher's children; one of them is enough, the others agree.
  s += "pid=\nwarned=0\n"
       "stop_run() { [[ -n $pid ]] || return; kill -USR1 \"$pid\" 2> /dev/null; pkill -USR1 -P \"$pid\" 2> /dev/null; "
       "}\n"
       "trap 'warned=1; stop_run' USR1\ntrap stop_run TERM\n";
  // In the background, not exec: bash must stay to pass signals on, wait for the checkpoint, and requeue.
  // USR1 is ignored until the runtime sets its handler: torchrun has none, and would die of it.
  s += fmt::format(
      "( trap '' USR1; exec {} \"$plan\" --out {} --resume --retrain-stale --auto-threads \"$threads\" ) &\n", command,
      shell_quote(out.string()));
  // A trapped signal ends `wait` early; the last one gives the runtime's exit status.
  s += "pid=$!\n"
       "wait \"$pid\"\n"
       "while kill -0 \"$pid\" 2> /dev/null; do wait \"$pid\"; done\n"
       "wait \"$pid\"; status=$?\n";
  // Requeued only when the warning stopped the run: a completed, failed or cancelled run stays as it is.
  s += fmt::format(
      "if (( warned )) && grep -Eq '\"status\": *\"interrupted\"' \"$run_dir/summary.json\" 2> /dev/null; then\n"
      "  task=\"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}\"\n"
      "  if (( ${{SLURM_RESTART_COUNT:-0}} >= {0} )); then\n"
      "    echo \"sinkc: $task reached its time limit after {0} requeues: not requeued; resubmit to continue\" >&2\n"
      "  elif scontrol requeue \"$task\"; then\n"
      "    echo \"sinkc: $task checkpointed before its time limit and requeued itself\" >&2\n"
      "    exit 0\n"
      "  fi\n"
      "fi\n"
      "exit $status\n",
      o.max_requeues);
  return s;
}

}  // namespace

int submit_slurm(const std::vector<std::string>& targets, const SubmitOptions& o, const CommonOptions& common) {
  std::error_code ec;
  const fs::path out = fs::absolute(o.out, ec).lexically_normal();
  std::vector<std::string> plan_files;
  if (int rc = plans_for_runtime(targets, out.string(), common, plan_files); rc != 0) return rc;
  if (!select_plan_files(plan_files, o.runs, fmt::format("{}", fmt::join(targets, ", ")))) return 2;
  std::vector<std::pair<std::string, fs::path>> pending;  // a plan file and its run directory
  size_t done = 0;
  for (const auto& file : plan_files) {
    Plan p = read_plan(file);
    if (completed(out / p.dir_name())) {
      ++done;
      continue;
    }
    pending.emplace_back(fs::absolute(file, ec).lexically_normal().string(), out / p.dir_name());
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
    for (const auto& [plan, dir] : pending) fmt::print(stderr, "  {}\n", plan);
    return 0;
  }
  fs::create_directories(slurm_dir, ec);
  {
    std::ofstream t(tasks), s(script_path);
    for (const auto& [plan, dir] : pending) t << plan << "\t" << dir.string() << "\n";
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
