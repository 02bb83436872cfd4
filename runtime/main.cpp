// sinkc-runtime: the LibTorch half of sinkc (`sinkc run`, `measure`, `export`).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <string_view>
#include <thread>

#include "plan/numerics_version.h"
#include "plan/run_config.h"
#include "plan/run_record.h"
#include "runtime/attention/cuda_driver.h"
#include "runtime/attention/cuda_tuning.h"
#include "runtime/data/batches.h"
#include "runtime/data/tokenizer.h"
#include "runtime/gpu_features.h"
#include "runtime/interop/hf_export.h"
#include "runtime/interop/llama2c.h"
#include "runtime/measurement/measure_command.h"
#include "runtime/processes/data_parallel.h"
#include "runtime/processes/interrupt.h"
#include "runtime/processes/process.h"
#include "runtime/processes/sweep.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/device.h"
#include "runtime/training/provenance.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/trace_table.h"
#include "runtime/training/train.h"
#include "support/installation.h"

namespace fs = std::filesystem;
using namespace sink;
namespace summary_key = sink::run_record::summary;
namespace eval_key = sink::run_record::eval;
using sink::run_record::RunStatus;
using sink::run_record::status_name;

// One line per run: status, folder, final validation loss and sink rates, reason.
static std::string result_line(const rt::RunResult& r) {
  const nlohmann::json none = nlohmann::json::object();
  const nlohmann::json& summary = r.summary.is_object() ? r.summary : none;
  const nlohmann::json final_eval = summary.value(summary_key::kFinal, none);
  auto number = [&](const nlohmann::json& j) { return j.is_number() ? j.get<double>() : NAN; };
  std::string line = fmt::format("{:<10} {}", rt::outcome_name(r.status), r.dir);
  if (final_eval.contains(eval_key::kValidLoss))
    line += fmt::format(" valid {:.4f}", number(final_eval[eval_key::kValidLoss]));
  if (final_eval.contains(eval_key::kSink) && final_eval[eval_key::kSink].is_object())
    for (auto& [k, v] : final_eval[eval_key::kSink].items()) line += fmt::format(" Sink_{} {:.2f}%", k, number(v));
  if (final_eval.contains(eval_key::kSinkStar))
    line += fmt::format(" Sink_* {:.2f}%", number(final_eval[eval_key::kSinkStar]));
  if (summary.contains(summary_key::kReason)) line += "  (" + summary.value(summary_key::kReason, "") + ")";
  if (!r.note.empty()) line += "  (" + r.note + ")";
  return line;
}

#if SINKLAB_HAVE_JIT
constexpr bool kHaveJit = true;
#else
constexpr bool kHaveJit = false;
#endif

namespace {

// The plans to run: plan.toml files, or folders holding them (`sinkc
// compile` output), in name order. Specs are the front end's: `sinkc run`
// compiles them and hands the plans here.
struct PlanFile {
  std::string path;
  Plan plan;
};

std::vector<PlanFile> collect_plans(const std::vector<std::string>& targets) {
  std::vector<PlanFile> plans;
  for (const auto& target : targets) {
    if (fs::path(target).extension() == ".sink")
      throw std::runtime_error(
          fmt::format("'{}' is a spec: sinkc-runtime reads plans; run it with `sinkc run`", target));
    std::vector<std::string> files;
    if (fs::is_directory(target)) {
      for (const auto& e : fs::recursive_directory_iterator(target))
        if (e.path().filename() == "plan.toml") files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      if (files.empty()) throw std::runtime_error(fmt::format("no plan.toml under '{}'", target));
    } else {
      files.push_back(target);
    }
    for (const auto& f : files) plans.push_back({f, read_plan(f)});
  }
  return plans;
}

struct RunFlags {
  std::string only, out = "runs";
  bool resume = false, wait = false, no_progress = false, retrain_stale = false, profile = false;
  int jobs = 1;
  int64_t auto_threads = 0;
  int gpu = -1;
  int gpu_share = 1;
};

// --jobs N: each run in a process of its own, a core share each by default.
int run_in_parallel(const std::vector<PlanFile>& plans, const RunFlags& flags) {
  rt::SweepOptions options;
  options.jobs = flags.jobs;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  options.threads_per_run = flags.auto_threads > 0 ? flags.auto_threads : std::max<int64_t>(1, cores / flags.jobs);
  options.flags = {"--out", flags.out};
  if (flags.resume) options.flags.push_back("--resume");
  if (flags.wait) options.flags.push_back("--wait");
  if (flags.retrain_stale) options.flags.push_back("--retrain-stale");
  if (flags.profile) options.flags.push_back("--profile");
  if (flags.gpu >= 0)
    options.flags.insert(options.flags.end(), {"--gpu", std::to_string(flags.gpu)});
  else
    options.gpus = rt::visible_gpus();
  std::vector<rt::SweepRun> runs;
  for (const auto& [path, plan] : plans)
    runs.push_back({path, fmt::format("{}/{}", flags.out, plan.dir_name()), plan.integer("train.steps")});
  // Runs outnumbering the GPUs share them: each plans its passes for its share of a GPU's memory.
  const int gpus = flags.gpu >= 0 ? 1 : options.gpus;
  if (gpus > 0) options.gpu_share = rt::runs_per_gpu(flags.jobs, runs.size(), gpus);
  return rt::run_sweep(runs, options);
}

int run_command(const std::vector<std::string>& targets, const RunFlags& flags) {
  std::vector<PlanFile> plans;
  for (auto& p : collect_plans(targets))
    if (flags.only.empty() || p.plan.answers_to(flags.only)) plans.push_back(std::move(p));
  if (plans.empty()) {
    fmt::print(stderr, "sinkc: no run named '{}'\n", flags.only);
    return 2;
  }
  // Under torchrun: this process is one of the run's data-parallel workers.
  auto workers = rt::DataParallel::from_environment();
  if (workers && flags.jobs > 1)
    throw std::runtime_error("--jobs runs plans side by side; under torchrun leave it out");
  const bool leader = !workers || workers->leader();
  if (flags.jobs > 1 && plans.size() > 1) return run_in_parallel(plans, flags);
  int failures = 0;
  rt::install_interrupt_handlers();
  for (const auto& [path, plan] : plans) {
    bool interrupted = rt::interrupt_requested();
    if (workers) interrupted = workers->sum({interrupted ? 1.0 : 0.0})[0] > 0;  // all start the next run, or none
    if (interrupted) {
      if (leader) fmt::print(stderr, "sinkc: interrupted; the remaining runs did not start\n");
      return 130;
    }
    rt::RunOptions ro;
    ro.out = flags.out;
    ro.resume = flags.resume;
    ro.wait = flags.wait;
    ro.retrain_stale = flags.retrain_stale;
    ro.profile = flags.profile;
    ro.progress = !flags.no_progress && leader;
    ro.workers = workers.get();
    ro.auto_threads = flags.auto_threads;
    ro.gpu = flags.gpu;
    ro.gpu_share = flags.gpu_share;
    auto r = rt::run_plan(plan, ro);
    if (leader) fmt::print("{}\n", result_line(r));
    if (r.status == rt::RunOutcome::Failed) ++failures;
    if (r.status == rt::RunOutcome::Interrupted) return 130;
    if (rt::device_context_lost()) {
      if (leader)
        fmt::print(stderr,
                   "sinkc: this process lost its GPU's context; the remaining runs did not start: run the "
                   "same command again (finished runs are kept; the failed kernel is not measured again)\n");
      return 1;
    }
  }
  return failures ? 1 : 0;
}

int export_command(const std::string& run_dir, const std::string& llama2c_file, const std::string& hf_dir) {
  if (llama2c_file.empty() == hf_dir.empty())
    throw std::runtime_error("say what to write, one per command: --llama2c FILE or --hf DIR");
  RunConfig cfg;
  if (!hf_dir.empty()) {
    // Refused before the checkpoint is read: the plan alone says whether a stock class computes the model.
    cfg = read_config(read_plan((fs::path(run_dir) / "plan.toml").string()));
    std::string why;
    if (rt::hf_model_type(cfg.model, &why).empty())
      throw std::runtime_error(fmt::format("cannot write '{}' as a Hugging Face model: {}", hf_dir, why));
  }
  auto trained = rt::load_trained_model(run_dir);
  if (!trained.warning.empty()) fmt::print(stderr, "sinkc: warning: {}\n", trained.warning);
  if (trained.status != RunStatus::Completed)
    fmt::print(stderr, "sinkc: note: the run is {}; writing its checkpoint of step {}\n",
               trained.status ? status_name(*trained.status) : "without a summary", trained.step);
  const auto& c = trained.model->cfg;
  if (!hf_dir.empty()) {
    const auto tokens = rt::hf_tokens_of(cfg.data);
    const std::string type = rt::save_hf(*trained.model, trained.context, tokens, hf_dir);
    fmt::print(
        "wrote {} (Hugging Face {}: config.json, model.safetensors{}; d {}, {} layers, {} heads, {} kv heads, "
        "vocab {}) from step {}\n",
        hf_dir, type, tokens.bytes ? ", tokenizer.json" : "", c.d, c.layers, c.heads, c.kv_heads, c.vocab,
        trained.step);
    return 0;
  }
  rt::save_llama2c(*trained.model, trained.context, llama2c_file);
  fmt::print(
      "wrote {} (llama2.c version 0: d {}, hidden {}, {} layers, {} heads, {} kv heads, vocab {}{}, seq_len {}) "
      "from step {}\n",
      llama2c_file, c.d, c.ffn_hidden, c.layers, c.heads, c.kv_heads, c.vocab,
      c.tie_embeddings ? "" : " with its own classifier", trained.context, trained.step);
  return 0;
}

int trace_table_command(const std::string& file, int64_t steps, bool as_json) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot be read", file));
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not a JSON trace ({})", file, e.what()));
  }
  const nlohmann::json table = rt::trace_table(trace, steps);
  fmt::print("{}", as_json ? table.dump(2) + "\n" : rt::trace_table_text(table));
  return 0;
}

}  // namespace

#ifndef SINKLAB_TORCH_PYTHON
#define SINKLAB_TORCH_PYTHON ""
#endif

int main(int argc, char** argv) {
  // The Python whose torch this LibTorch is: the front end starts that one's torchrun (cli/torchrun.cpp).
  if (argc == 2 && std::string_view(argv[1]) == "--torch-python") {
    fmt::print("{}\n", SINKLAB_TORCH_PYTHON);
    return 0;
  }
  // OpenBLAS/OpenMP threads spin between small ops unless told to yield.
  setenv("OMP_WAIT_POLICY", "passive", 0);
  rt::blas_threads_follow_libtorch();
  CLI::App app{"sinkc runtime commands"};
  // What is compiled in apart from what this machine has: a login node without a GPU runs the same install.
  // Which GPU features a run here would use, and why (runtime/gpu_features.h), or why the override is wrong.
  auto gpu_features_text = [](int capability) {
    try {
      return fmt::format(
          "GPU features{}:\n{}",
          capability ? fmt::format(" on GPU 0 (compute capability {}.{})", capability / 10, capability % 10) : "",
          rt::gpu_features_report(capability));
    } catch (const std::exception& e) {
      return std::string(e.what()) + "\n";
    }
  };
  app.set_version_flag("--version", [gpu_features_text] {
    const size_t gpus = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
    return fmt::format(
               "sinkc-runtime {} (commit {}, numerics version {}): LibTorch {}, CPU JIT {}, CUDA backend {}, {} GPU{} "
               "visible",
               sink::version(), rt::source_commit(), kNumericsVersion, TORCH_VERSION,
               kHaveJit ? "yes (LLVM ORC)" : "no",
               !rt::cuda::backend_compiled() ? "not compiled in"
               : rt::cuda::nvrtc_available() ? "compiled in (NVRTC found)"
                                             : "compiled in (NVRTC not found here)",
               gpus, gpus == 1 ? "" : "s") +
           "\n" + gpu_features_text(gpus ? rt::gpu_capability(0) : 0);
  });
  app.require_subcommand(1);
  std::vector<std::string> targets;
  std::string target;
  RunFlags flags;
  auto* run = app.add_subcommand("run", "train and measure every run of a spec; runs already completed are cached");
  run->add_option("plans", targets, "plan.toml files, or folders of them (`sinkc compile` output)")->required();
  run->add_option("--run", flags.only, "only this run (and its seeds, NAME.seed=K)");
  run->add_option("--out", flags.out, "folder of run directories");
  run->add_flag("--resume", flags.resume, "continue interrupted runs from their last checkpoint");
  run->add_flag("--wait", flags.wait,
                "a run another process is training: wait for it to finish instead of skipping it");
  run->add_flag("--retrain-stale", flags.retrain_stale,
                "train again the completed runs of an older numerics version (stale), their results kept in "
                "RUN/stale/; without it a stale run is reported and kept");
  run->add_option("--jobs", flags.jobs, "train up to this many runs at once, each in its own process")
      ->check(CLI::Range(1, 1024));
  run->add_option("--auto-threads", flags.auto_threads, "threads for runs whose plan says train.threads = 0")
      ->check(CLI::Range(1, 4096));
  run->add_flag("--no-progress", flags.no_progress, "no live progress line");
  run->add_flag("--profile", flags.profile,
                "where each run's time went (data, forward, backward, optimizer, measurement, checkpoints), and "
                "per operator and GPU kernel over 3 steps after 2 of warm-up (LibTorch's profiler, RUN/trace.json): "
                "printed, and written to RUN/profile.json; on a GPU each part is synchronised, which slows the run");
  run->add_option("--gpu", flags.gpu,
                  "cuda runs train on this GPU (default: torchrun's LOCAL_RANK, or 0; "
                  "with --jobs, each run at once a GPU of its own)")
      ->check(CLI::Range(0, 1023));
  run->add_option("--gpu-share", flags.gpu_share,
                  "runs training on this run's GPU at once: train.micro_batch = auto plans for 1/N of its memory "
                  "(--jobs sets it for its runs when they outnumber the GPUs)")
      ->check(CLI::Range(1, 1024));

  rt::MeasureOptions mo;
  auto* measure =
      app.add_subcommand("measure", "sink metrics of a trained run, a llama2.c checkpoint or a Hugging Face model");
  measure->add_option("target", mo.target, "run directory, llama2.c .bin, or a folder with config.json + *.safetensors")
      ->required();
  // measure.input's names, and the command's own: token ids from a file.
  std::vector<std::string> measure_inputs = choice_names<MeasureInput>();
  measure_inputs.push_back("ids");
  measure->add_option("--input", mo.input, "natural | random | repeat | ids")->check(CLI::IsMember(measure_inputs));
  measure->add_option("--text", mo.text, "natural input: this text (checkpoints)");
  measure->add_option("--text-file", mo.text_file, "natural input: this file's text (checkpoints)");
  measure->add_option("--ids", mo.ids_file,
                      "pre-tokenized input: a file of whitespace-separated token ids (checkpoints)");
  measure->add_option("--eps", mo.eps, "threshold eps")->check(CLI::Range(0.0, 1.0));
  measure->add_option("--T", mo.T, "sequence length")->check(CLI::Range(2, 1 << 20));
  measure->add_option("--n", mo.n, "sequences")->check(CLI::Range(1, 1 << 20));
  measure->add_option("--positions", mo.positions, "1-based positions k of Sink_k");
  measure->add_option("--tokenizer", mo.tokenizer, "llama2.c tokenizer (tok*.bin) for natural input");
  measure->add_option("--bos", mo.bos, "with | without | auto (a run: as its measure.bos; a checkpoint: without)")
      ->check(CLI::IsMember(choice_names<MeasureBos>()));
  measure->add_option("--window", mo.window, "keys of the windowed loss's window; 0 = a quarter of T")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  measure->add_option("--window-keeps", mo.window_keeps, "first tokens the windowed loss keeps, one loss each: 0,1,4")
      ->delimiter(',');
  measure->add_option("--quantized-bits", mo.quantized_bits, "the loss after WbAb fake quantization, each b: 8,6")
      ->delimiter(',')
      ->check(CLI::Range(2, 16));
  measure->add_option("--longer-contexts", mo.longer_contexts, "the loss on sequences F x T long, each F: 2,4")
      ->delimiter(',')
      ->check(CLI::Range(2, 64));
  measure->add_option("--format", mo.format, "text | json (every value at full precision)")
      ->check(CLI::IsMember({"text", "json"}));

  std::string llama2c_file, hf_dir;
  auto* export_cmd = app.add_subcommand("export", "write a trained run's model in another format");
  export_cmd->add_option("run", target, "run directory (runs/<run>-<hash8>)")->required();
  export_cmd->add_option(
      "--llama2c", llama2c_file,
      "FILE: a llama2.c version-0 checkpoint (RoPE, RMSNorm, SwiGLU, softmax attention models only)");
  export_cmd->add_option("--hf", hf_dir,
                         "DIR: a Hugging Face model folder (LLaMA, Mistral, GPT-NeoX, GPT-2 or OPT, for the softmax "
                         "models those classes compute exactly)");
  std::string trace_file;
  int64_t trace_steps = 1;
  auto* trace_cmd =
      app.add_subcommand("trace-table",
                         "the top operators and GPU kernels of a profiler trace (Chrome format: a run's trace.json, "
                         "or PyTorch's torch.profiler export), as `sinkc run --profile` sums its own");
  trace_cmd->add_option("trace", trace_file, "the trace (JSON)")->required();
  trace_cmd->add_option("--steps", trace_steps, "how many steps the trace covers (for the per-step counts)")
      ->check(CLI::Range(1, 1 << 30));
  bool trace_json = false;
  trace_cmd->add_flag("--json", trace_json, "the table as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*run) return run_command(targets, flags);
    if (*measure) return rt::measure_command(mo);
    if (*export_cmd) return export_command(target, llama2c_file, hf_dir);
    if (*trace_cmd) return trace_table_command(trace_file, trace_steps, trace_json);
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    fmt::print(stderr, "sinkc: {}\n", what.substr(0, what.find('\n')));
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sinkc: {}\n", e.what());
    return 1;
  }
  return 2;
}
