// sinkc: the front end. Torch-free so that `check`, `plan` and `fields`
// answer in milliseconds; training commands are forwarded to sinkc-runtime.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/tokenize.h"
#include "cli/torchrun.h"
#include "lsp/server.h"
#include "results/data_table.h"
#include "results/metrics.h"
#include "support/installation.h"
#include "support/shell.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kRunHelp =
    "only these runs and their seeds (NAME.seed=K): names or shell patterns ('wd.*', 'op_[sx]*'); repeatable";

fs::path runtime_path() { return fs::read_symlink("/proc/self/exe").parent_path() / "sinkc-runtime"; }

std::string runtime_version() {
  if (!fs::exists(runtime_path())) return "";
  std::string out = sink::command_output(sink::shell_quote(runtime_path().string()) + " --version 2>&1");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Commands that need LibTorch live in a separate binary beside this one.
int exec_runtime(const std::string& command, std::vector<std::string> args) {
  fs::path runtime = runtime_path();
  if (!fs::exists(runtime)) {
    fmt::print(stderr, "sinkc: '{}' needs the runtime, which was not built ({} is missing)\n", command,
               runtime.string());
    return 2;
  }
  args.insert(args.begin(), {runtime.string(), command});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(runtime.c_str(), argv.data());
  fmt::print(stderr, "sinkc: cannot start {}\n", runtime.string());
  return 2;
}

// `sinkc run --workers W`: torchrun starts W data-parallel workers on this
// machine (runtime/processes/data_parallel.h).
int exec_torchrun(int workers, const std::vector<std::string>& runtime_args) {
  std::vector<std::string> argv =
      sink::cli::torchrun_argv(workers, std::to_string(sink::cli::free_port()), runtime_path().string());
  argv.insert(argv.end(), runtime_args.begin(), runtime_args.end());
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  execvp(raw[0], raw.data());
  fmt::print(stderr, "sinkc: --workers needs torchrun (a PyTorch with torch.distributed; Debian: python3-torch)\n");
  return 2;
}

// `sinkc run`: the front end compiles, the runtime trains the plans. Options
// the front end does not know (--resume, ...) are the runtime's.
int run(const std::vector<std::string>& targets, const std::vector<std::string>& only, const std::string& out,
        const std::vector<std::string>& runtime_flags, int workers, const sink::cli::CommonOptions& common) {
  std::vector<std::string> plan_files;
  if (int rc = sink::cli::plans_for_runtime(targets, out, common, plan_files); rc != 0) return rc;
  // --run picks plan files here, so that the runtime trains just those, however many patterns there are.
  if (!sink::cli::select_plan_files(plan_files, only, fmt::format("{}", fmt::join(targets, ", ")))) return 2;
  // Tokenized here, once, so the runtime and every worker map the tokens. A corpus that fails is the runtime's
  // to record, run by run.
  sink::cli::fill_token_caches(plan_files, out, true);
  std::vector<std::string> args = plan_files;
  args.insert(args.end(), {"--out", out});
  args.insert(args.end(), runtime_flags.begin(), runtime_flags.end());
  if (workers > 1) return exec_torchrun(workers, args);
  return exec_runtime("run", args);
}

// Trains plan files with the runtime as a child process, its output on
// stderr (stdout is the caller's answer); its exit status, 128 + N for signal N.
int train_with_runtime(const std::vector<std::string>& plan_files, const std::string& out,
                       const std::vector<std::string>& flags) {
  fs::path runtime = runtime_path();
  if (!fs::exists(runtime)) {
    fmt::print(stderr, "sinkc: training needs the runtime, which was not built ({} is missing)\n", runtime.string());
    return 2;
  }
  std::vector<std::string> args = {runtime.string(), "run"};
  args.insert(args.end(), plan_files.begin(), plan_files.end());
  args.insert(args.end(), {"--out", out});
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    dup2(2, 1);
    execv(runtime.c_str(), argv.data());
    _exit(127);
  }
  // Ctrl-C reaches the whole process group: the runtime checkpoints and exits 130, and this process, which
  // must not die first, says how to go on.
  struct sigaction ignore{}, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &previous);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &previous, nullptr);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool names_option(const std::vector<std::string>& args, const std::string& option) {
  for (const auto& a : args)
    if (a == option || a.rfind(option + "=", 0) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // Commands the runtime alone answers: their arguments pass through.
  const std::string command = argc > 1 ? argv[1] : "";
  const std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
  if (command == "measure") return exec_runtime(command, rest);
  // `export --llama2c` and `--hf` write a model, which takes LibTorch; `--tensorboard`
  // reads metrics only and is answered here, with the other results commands.
  if (command == "export") {
    const bool llama2c = names_option(rest, "--llama2c"), hf = names_option(rest, "--hf"),
               tensorboard = names_option(rest, "--tensorboard");
    if (int(llama2c) + int(hf) + int(tensorboard) > 1) {
      fmt::print(stderr,
                 "sinkc export: --llama2c, --hf and --tensorboard are different exports: give one of them per "
                 "command\n");
      return 2;
    }
    if (llama2c || hf) return exec_runtime(command, rest);
  }

  CLI::App app{"sinkc: compiler for attention-sink ablation studies"};
  // The runtime's line too: a bug report needs its LibTorch and backends.
  app.set_version_flag("--version", [] {
    std::string runtime = runtime_version();
    return fmt::format("sinkc {}\n{}", sink::version(), runtime.empty() ? "sinkc-runtime: not built" : runtime);
  });
  app.require_subcommand(1);
  sink::cli::CommonOptions common;
  auto add_common = [&](CLI::App* cmd) {
    cmd->add_option("--set", common.overrides, "override a field in every run: --set optim.lr=1e-3 (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--base", common.base, "replace the preset every experiment extends, e.g. --base paper_60m");
    cmd->add_option("--stdlib", common.stdlib, "folder of defaults.sink and presets.sink");
    cmd->add_flag("--color,!--no-color", common.color, "color diagnostics");
  };

  std::vector<std::string> check_files;
  auto* check = app.add_subcommand("check", "parse, resolve and type-check specs; all diagnostics at once");
  check->add_option("files", check_files, "spec files")->required();
  bool check_fix = false;
  check->add_flag("--fix", check_fix, "apply each \"did you mean\" to the files first, then check them again");
  add_common(check);

  std::string plan_file, plan_format = "toml";
  std::vector<std::string> plan_runs;
  auto* plan =
      app.add_subcommand("plan", "print resolved plans (every default filled, sweeps expanded) with their hashes");
  plan->add_option("file", plan_file, "spec file")->required();
  plan->add_option("--run", plan_runs, kRunHelp)->allow_extra_args(false);
  plan->add_option("--format", plan_format, "toml or json")->check(CLI::IsMember({"toml", "json"}));
  add_common(plan);

  std::string fields_format = "text";
  auto* fields = app.add_subcommand("fields", "every field of the language: type, range, default, doc");
  fields->add_option("--format", fields_format, "text or markdown")->check(CLI::IsMember({"text", "markdown"}));
  add_common(fields);

  auto* lsp_cmd = app.add_subcommand("lsp", "a language server (LSP 3.17) on standard input and output, for editors");
  add_common(lsp_cmd);

  std::vector<std::string> fmt_targets;
  bool fmt_check = false, fmt_write = false;
  auto* fmt_cmd =
      app.add_subcommand("fmt", "reprint specs in the one canonical layout (comments kept, plans unchanged)");
  fmt_cmd->add_option("files", fmt_targets, "spec files or folders of them")->required();
  auto* fmt_check_flag =
      fmt_cmd->add_flag("--check", fmt_check, "list the files not formatted; exit 1 if there are any");
  fmt_cmd->add_flag("--write", fmt_write, "rewrite the files not formatted in place")->excludes(fmt_check_flag);

  std::vector<std::string> run_targets, run_only;
  std::string run_out = "runs";
  auto* run_cmd =
      app.add_subcommand("run", "train and measure every run of specs or plans; runs already completed are cached");
  run_cmd->add_option("targets", run_targets, "spec files, folders of specs, or plan.toml files and folders of them")
      ->required();
  run_cmd->add_option("--run", run_only, kRunHelp)->allow_extra_args(false);
  run_cmd->add_option("--out", run_out, "folder of run directories")->capture_default_str();
  bool run_resume = false, run_wait = false, run_retrain_stale = false, run_profile = false;
  int run_jobs = 1;
  run_cmd->add_flag("--resume", run_resume, "continue interrupted runs from their last checkpoint");
  run_cmd->add_flag("--wait", run_wait, "a run another process is training: wait for it instead of skipping it");
  run_cmd->add_flag("--retrain-stale", run_retrain_stale,
                    "train again the completed runs of an older numerics version (stale), their results kept in "
                    "RUN/stale/; without it a stale run is reported and kept");
  run_cmd->add_flag("--profile", run_profile,
                    "print where each run's time went and write RUN/profile.json (on a GPU each part is "
                    "synchronised, which slows the run)");
  run_cmd->add_option("--jobs", run_jobs, "train up to N runs at once, each in its own process with cores / N threads")
      ->check(CLI::Range(1, 1024));
  int run_workers = 1;
  run_cmd
      ->add_option("--workers", run_workers, "train each run data-parallel on W processes of this machine (torchrun)")
      ->check(CLI::Range(1, 1024));
  int run_gpu = -1;
  run_cmd
      ->add_option("--gpu", run_gpu,
                   "cuda runs train on GPU N (default: torchrun's LOCAL_RANK, or 0; with --jobs, "
                   "each of the runs at once on a GPU of its own)")
      ->check(CLI::Range(0, 1023));
  run_cmd->allow_extras();
  add_common(run_cmd);

  std::vector<std::string> tokenize_targets, tokenize_runs;
  std::string tokenize_out = "runs";
  auto* tokenize = app.add_subcommand(
      "tokenize", "tokenize the corpora of specs or plans into the token cache (OUT/.cache/tokens), where sinkc is");
  tokenize->add_option("targets", tokenize_targets, "spec files, folders of specs, or plan.toml files and folders")
      ->required();
  tokenize->add_option("--run", tokenize_runs, kRunHelp)->allow_extra_args(false);
  tokenize->add_option("--out", tokenize_out, "folder of run directories, whose .cache/tokens is the cache")
      ->capture_default_str();
  add_common(tokenize);

  std::string compile_file, compile_out;
  auto* compile = app.add_subcommand(
      "compile",
      "write DIR/<run>/plan.toml, attention.ll and attention.cu (the generated kernels, CPU and CUDA) for every run");
  compile->add_option("file", compile_file, "spec file")->required();
  compile->add_option("-o,--out", compile_out, "output folder")->required();
  add_common(compile);

  std::vector<std::string> submit_targets;
  sink::cli::SubmitOptions submit_options;
  bool submit_slurm = false;
  auto* submit = app.add_subcommand("submit", "submit the runs not yet completed as one cluster job array (Slurm)");
  submit->add_option("targets", submit_targets, "spec files, folders of specs, or plan.toml files and folders of them")
      ->required();
  submit->add_flag("--slurm", submit_slurm, "submit with sbatch (the one scheduler supported)")->required();
  submit->add_option("--out", submit_options.out, "shared folder of run directories")->capture_default_str();
  submit->add_option("--run", submit_options.runs, kRunHelp)->allow_extra_args(false);
  submit->add_option("--partition", submit_options.partition, "Slurm partition");
  submit->add_option("--time", submit_options.time, "time limit per run (Slurm's --time, e.g. 4:00:00)");
  submit
      ->add_option("--gpus-per-run", submit_options.gpus_per_run,
                   "GPUs per run; more than one: the run trains data-parallel on them, under torchrun")
      ->check(CLI::Range(0, 64));
  submit->add_option("--cpus-per-run", submit_options.cpus_per_run, "CPU cores per run (its training threads)")
      ->check(CLI::Range(0, 4096));
  submit->add_option("--max-parallel", submit_options.max_parallel, "at most this many runs at once")
      ->check(CLI::Range(0, 100000));
  submit
      ->add_option("--sbatch-arg", submit_options.sbatch_args, "an extra #SBATCH line, e.g. --sbatch-arg=--account=lab")
      ->allow_extra_args(false);
  submit
      ->add_option("--signal-lead", submit_options.signal_lead_s,
                   "seconds before the time limit at which a run checkpoints and requeues itself (Slurm's USR1)")
      ->capture_default_str()
      ->check(CLI::Range(1, 65535));
  submit
      ->add_option("--max-requeues", submit_options.max_requeues,
                   "a run requeues itself at its time limit at most this many times")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  submit->add_flag("--dry-run", submit_options.dry_run, "print the batch script and the runs; submit nothing");
  add_common(submit);

  // Results: read run directories only, so they stay here, not in the runtime.
  sink::cli::ResultsOptions results;
  auto add_results = [&](CLI::App* cmd, bool with_format) {
    cmd->add_option("--run", results.runs,
                    "only these runs and their seeds: names or shell patterns ('wd.*'; table, report, export: "
                    "repeatable; diff: once for every spec, or once for A and once for B, each matching one run)")
        ->allow_extra_args(false);
    cmd->add_option("--out", results.out, "folder where `sinkc run` wrote the runs of a spec")->capture_default_str();
    if (with_format)
      cmd->add_option("--format", results.format, "text, csv, json, markdown or latex")
          ->check(
              [](const std::string& name) {
                return sink::results::parse_format(name)
                           ? std::string()
                           : fmt::format("unknown format '{}': use {}", name, sink::results::kFormatNames);
              },
              "FORMAT");
    add_common(cmd);
  };

  std::string diff_a, diff_b;
  auto* diff =
      app.add_subcommand("diff", "plan diff, metric deltas against seed noise, and alpha_1 moves between two runs");
  diff->add_option("a", diff_a, "run directory, or spec file (with --run)")->required();
  diff->add_option("b", diff_b, "run directory, or spec file (with --run)")->required();
  add_results(diff, true);

  std::string bisect_a, bisect_b;
  sink::cli::BisectOptions bisect_options;
  bool bisect_resume = false;
  int bisect_jobs = 1;
  auto* bisect = app.add_subcommand("bisect",
                                    "which of the fields that differ between two runs move a metric: delta "
                                    "debugging over the differences, every configuration an ordinary run");
  bisect->add_option("a", bisect_a, "run directory, or spec file (with --run)")->required();
  bisect->add_option("b", bisect_b, "run directory, or spec file (with --run)")->required();
  bisect->add_option("--metric", bisect_options.metric, "the metric: " + sink::results::metric_ids_help())->required();
  bisect->add_option("--seeds", bisect_options.seeds, "seeds per configuration")
      ->capture_default_str()
      ->check(CLI::Range(2, 100));
  bisect->add_option("--max-runs", bisect_options.max_runs, "at most this many training runs besides A's and B's")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  bisect->add_option("--jobs", bisect_jobs, "train up to N runs at once, each in its own process")
      ->check(CLI::Range(1, 1024));
  bisect->add_flag("--resume", bisect_resume, "continue runs an interrupted bisection left from their last checkpoint");
  bisect
      ->add_option("--run", bisect_options.runs,
                   "with spec files: the run of A and of B (once for both, or twice), a name or a shell pattern "
                   "matching one run")
      ->allow_extra_args(false);
  bisect->add_option("--out", bisect_options.out, "folder of run directories (A's, B's and the bisection's)")
      ->capture_default_str();
  bisect->add_option("--format", bisect_options.format, "text, markdown or json")
      ->check(CLI::IsMember({"text", "markdown", "json"}));
  bool bisect_slurm = false;
  sink::cli::SubmitOptions bisect_submit;
  bisect->add_flag("--slurm", bisect_slurm, "train each round as a Slurm job array (sbatch --wait), as `sinkc submit`");
  bisect->add_option("--partition", bisect_submit.partition, "with --slurm: the partition");
  bisect->add_option("--time", bisect_submit.time, "with --slurm: time limit per run (e.g. 4:00:00)");
  bisect->add_option("--gpus-per-run", bisect_submit.gpus_per_run, "with --slurm: GPUs per run")
      ->check(CLI::Range(0, 64));
  bisect->add_option("--cpus-per-run", bisect_submit.cpus_per_run, "with --slurm: CPU cores per run")
      ->check(CLI::Range(0, 1024));
  add_common(bisect);

  std::vector<std::string> table_targets, table_metrics;
  auto* table = app.add_subcommand(
      "table",
      "one row per run (seeds aggregated); columns: the sweep axes and up to 3 other fields the runs differ in");
  table->add_option("targets", table_targets, "folder of runs, run directories, or spec files")->required();
  table->add_option("--metric", table_metrics, "only these metrics: " + sink::results::metric_ids_help())
      ->allow_extra_args(false);
  add_results(table, true);

  std::vector<std::string> report_targets;
  std::string report_output, report_title;
  auto* report = app.add_subcommand(
      "report", "one self-contained HTML file: curves, alpha_1 heatmaps, massive activations, run table, plan diff");
  report->add_option("targets", report_targets, "run directories, folders of runs, or spec files")->required();
  report->add_option("-o,--output", report_output, "the HTML file to write")->required();
  report->add_option("--title", report_title, "the report's title");
  add_results(report, false);

  std::vector<std::string> export_targets;
  std::string export_tensorboard;
  auto* export_cmd = app.add_subcommand(
      "export",
      "a run's curves as TensorBoard event files (--tensorboard DIR), or its model as a llama2.c checkpoint "
      "(RUN --llama2c FILE) or a Hugging Face model folder (RUN --hf DIR), both answered by sinkc-runtime");
  export_cmd->add_option("targets", export_targets, "run directories, folders of runs, or spec files");
  export_cmd->add_option("--tensorboard", export_tensorboard,
                         "write DIR/<run>/events.out.tfevents.*, for `tensorboard --logdir DIR`");
  add_results(export_cmd, false);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (common.color == -1) common.color = isatty(2) ? 1 : 0;
  try {
    if (*run_cmd) {
      std::vector<std::string> flags = run_cmd->remaining();
      if (run_resume) flags.push_back("--resume");
      if (run_wait) flags.push_back("--wait");
      if (run_retrain_stale) flags.push_back("--retrain-stale");
      if (run_profile) flags.push_back("--profile");
      if (run_jobs > 1) flags.insert(flags.end(), {"--jobs", std::to_string(run_jobs)});
      if (run_gpu >= 0) flags.insert(flags.end(), {"--gpu", std::to_string(run_gpu)});
      if (run_workers > 1 && run_jobs > 1) {
        fmt::print(
            stderr,
            "sinkc: --workers and --jobs do not mix: one trains a run on W processes, the other W runs at once\n");
        return 2;
      }
      return run(run_targets, run_only, run_out, flags, run_workers, common);
    }
    if (*lsp_cmd) {
      std::ios::sync_with_stdio(false);
      sink::lsp::Server server(common.options());
      while (auto body = sink::lsp::read_message(std::cin)) {
        for (const auto& reply : server.handle(*body)) sink::lsp::write_message(std::cout, reply);
        if (server.exited()) return server.exit_code();
      }
      return 1;  // the client went away without `exit`
    }
    if (*fmt_cmd)
      return sink::cli::format(fmt_targets, fmt_check   ? sink::cli::FormatMode::Check
                                            : fmt_write ? sink::cli::FormatMode::Write
                                                        : sink::cli::FormatMode::Print);
    if (*check) return sink::cli::check(check_files, common, check_fix);
    if (*plan) return sink::cli::plan(plan_file, plan_runs, plan_format, common);
    if (*fields) return sink::cli::fields(fields_format, common);
    if (*compile) return sink::cli::compile(compile_file, compile_out, common);
    if (*tokenize) return sink::cli::tokenize(tokenize_targets, tokenize_runs, tokenize_out, common, false);
    if (*submit) {
      // The nodes map the tokens the login node made: nothing is submitted that could not be tokenized.
      if (!submit_options.dry_run)
        if (int rc = sink::cli::tokenize(submit_targets, submit_options.runs, submit_options.out, common, true))
          return rc;
      return sink::cli::submit_slurm(submit_targets, submit_options, common);
    }
    if (*diff) return sink::cli::diff(diff_a, diff_b, results, common);
    if (*bisect) {
      // A stale run is not a current answer: train it again (its results are kept in RUN/stale/).
      std::vector<std::string> flags = {"--no-progress", "--retrain-stale"};
      if (bisect_resume) flags.push_back("--resume");
      if (bisect_jobs > 1) flags.insert(flags.end(), {"--jobs", std::to_string(bisect_jobs)});
      return sink::cli::bisect(bisect_a, bisect_b, bisect_options, common, [&](const std::vector<std::string>& files) {
        sink::cli::fill_token_caches(files, bisect_options.out, true);
        if (!bisect_slurm) return train_with_runtime(files, bisect_options.out, flags);
        sink::cli::SubmitOptions o = bisect_submit;
        o.out = bisect_options.out;
        o.wait = true;
        return sink::cli::submit_slurm(files, o, common);
      });
    }
    if (*table) return sink::cli::table(table_targets, table_metrics, results, common);
    if (*export_cmd) {
      if (export_tensorboard.empty()) {
        fmt::print(stderr,
                   "sinkc export: say what to write: --tensorboard DIR (every run's curves), --llama2c FILE or "
                   "--hf DIR (one run's model)\n");
        return 2;
      }
      if (export_targets.empty()) {
        fmt::print(stderr, "sinkc export: name the runs: run directories, folders of runs, or spec files\n");
        return 2;
      }
      return sink::cli::export_tensorboard(export_targets, export_tensorboard, results, common);
    }
    if (*report) return sink::cli::report(report_targets, report_output, report_title, results, common);
  } catch (const std::exception& e) {
    fmt::print(stderr, "sinkc: internal error: {}\n", e.what());
    return 2;
  }
  return 2;
}
