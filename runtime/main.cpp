// sinkc-runtime: the LibTorch half of sinkc (`sinkc run`, `measure`, `export`).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <thread>

#include "runtime/batches.h"
#include "plan/installation.h"
#include "plan/run_config.h"
#include "runtime/llama2c.h"
#include "runtime/measure.h"
#include "runtime/run_dir.h"
#include "runtime/sweep.h"
#include "runtime/tokenizer.h"
#include "runtime/interrupt.h"
#include "runtime/train.h"

namespace fs = std::filesystem;
using namespace sink;

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
      throw std::runtime_error(fmt::format("'{}' is a spec: sinkc-runtime reads plans; run it with `sinkc run`", target));
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
  bool resume = false, wait = false, no_progress = false;
  int jobs = 1;
  int64_t auto_threads = 0;
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
  std::vector<rt::SweepRun> runs;
  for (const auto& [path, plan] : plans)
    runs.push_back({path, fmt::format("{}/{}", flags.out, plan.dir_name()), plan.integer("train.steps")});
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
  if (flags.jobs > 1 && plans.size() > 1) return run_in_parallel(plans, flags);
  int failures = 0;
  rt::install_interrupt_handlers();
  for (const auto& [path, plan] : plans) {
    if (rt::interrupt_requested()) {
      fmt::print(stderr, "sinkc: interrupted; the remaining runs did not start\n");
      return 130;
    }
    rt::RunOptions ro;
    ro.out = flags.out;
    ro.resume = flags.resume;
    ro.wait = flags.wait;
    ro.progress = !flags.no_progress;
    ro.auto_threads = flags.auto_threads;
    auto r = rt::run_plan(plan, ro);
    std::string sink;
    if (r.summary.contains("final") && r.summary["final"].contains("sink"))
      for (auto& [k, v] : r.summary["final"]["sink"].items()) sink += fmt::format(" Sink_{} {:.2f}%", k, v.get<double>());
    if (r.summary.contains("final") && r.summary["final"].contains("sink_star"))
      sink += fmt::format(" Sink_* {:.2f}%", r.summary["final"]["sink_star"].get<double>());
    std::string loss = r.summary.contains("final") ? fmt::format(" valid {:.4f}", r.summary["final"]["valid_loss"].get<double>()) : "";
    fmt::print("{:<10} {}{}{}{}\n", r.status, r.dir, loss, sink,
               r.summary.contains("reason") ? "  (" + r.summary["reason"].get<std::string>() + ")" : "");
    if (r.status == "failed") ++failures;
    if (r.status == "interrupted") return 130;
  }
  return failures ? 1 : 0;
}

void print_report(const rt::SinkReport& r, double eps) {
  fmt::print("alpha_1 per layer (rows) and head (columns), eps = {}\n", eps);
  for (size_t l = 0; l < r.alpha.size(); ++l) {
    fmt::print("  L{:<3}", l);
    for (double a : r.alpha[l]) fmt::print(" {:6.3f}", a);
    fmt::print("\n");
  }
  for (auto& [k, v] : r.sink) fmt::print("Sink_{}^{} = {:.2f} %\n", k, eps, v);
  if (r.sink_star >= 0) fmt::print("Sink_*^{} = {:.2f} %\n", eps, r.sink_star);
  if (!r.massive.empty()) {
    fmt::print("massive-activation ratio |h_1| / mean |h_t>1| per layer:");
    for (double m : r.massive) fmt::print(" {:.2f}", m);
    fmt::print("\n");
  }
}

int measure_command(const std::string& target, std::string input, double eps, int64_t T, int64_t n,
                    std::vector<int64_t> positions, const std::string& tokenizer_path, std::string bos_mode) {
  if (positions.empty()) positions = {1};
  torch::manual_seed(0);
  if (fs::is_directory(target)) {
    Plan plan = read_plan((fs::path(target) / "plan.toml").string());
    auto cfg = read_config(plan);
    auto data = rt::load_data(cfg.data, (fs::path(target).parent_path() / ".cache").string());
    // The latest usable checkpoint: a corrupt latest falls back to the previous, as --resume does.
    rt::TrainedModel trained = rt::load_trained_model(target);
    if (!trained.warning.empty()) fmt::print(stderr, "sinkc: {}\n", trained.warning);
    rt::Transformer& model = *trained.model;
    rt::Batches batches(data, cfg.data, cfg.train.context, 1, cfg.train.seed);
    if (input.empty()) input = cfg.measure.input;
    if (bos_mode.empty()) bos_mode = cfg.measure.bos;
    const bool bos = measures_with_bos(bos_mode, cfg.data);
    auto x = batches.measure_inputs(n, T, input, bos);
    fmt::print("{} ({}), input {}, T = {}, {} sequences{}\n", plan.name, plan.hash8(), input, T, n, bos ? ", with BOS" : "");
    print_report(rt::measure_model(model, x, positions, eps, true), eps);
    return 0;
  }
  auto loaded = rt::load_llama2c(target);
  if (input.empty()) input = "random";
  auto x = torch::empty({n, T}, torch::kLong);
  std::mt19937_64 rng(0);
  std::uniform_int_distribution<int64_t> tok(3, loaded.config.vocab - 1);
  if (input == "natural") {
    std::string tok_path = tokenizer_path.empty() ? (fs::path(target).parent_path() / "tok512.bin").string() : tokenizer_path;
    auto tokenizer = rt::llama2c_tokenizer(tok_path, loaded.config.vocab);
    // Held-out natural text: stories the model generates would be in-distribution
    // but circular; use the builtin corpus's prose instead.
    auto docs = rt::read_documents(builtin_corpus("default").string(), nullptr);
    std::vector<int32_t> stream;
    for (const auto& d : docs) {
      if (static_cast<int64_t>(stream.size()) > n * T + T) break;
      auto ids = tokenizer->encode(d.substr(0, 4000));
      stream.insert(stream.end(), ids.begin(), ids.end());
    }
    for (int64_t b = 0; b < n; ++b)
      for (int64_t t = 0; t < T; ++t) x[b][t] = stream[static_cast<size_t>(b * T + t) % stream.size()];
  } else {
    for (int64_t b = 0; b < n; ++b) {
      int64_t repeated = tok(rng);
      for (int64_t t = 0; t < T; ++t) x[b][t] = input == "random" ? tok(rng) : repeated;
    }
  }
  fmt::print("{} (llama2.c: d {}, {} layers, {} heads, {} kv heads), input {}, T = {}, {} sequences\n", target, loaded.config.d,
             loaded.config.layers, loaded.config.heads, loaded.config.kv_heads, input, T, n);
  print_report(rt::measure_model(*loaded.model, x, positions, eps, true), eps);
  return 0;
}

int export_command(const std::string& run_dir, const std::string& llama2c_file) {
  if (llama2c_file.empty()) throw std::runtime_error("say what to write: --llama2c FILE");
  auto trained = rt::load_trained_model(run_dir);
  if (!trained.warning.empty()) fmt::print(stderr, "sinkc: warning: {}\n", trained.warning);
  if (trained.status != "completed")
    fmt::print(stderr, "sinkc: note: the run is {}; writing its checkpoint of step {}\n",
               trained.status.empty() ? "without a summary" : trained.status, trained.step);
  rt::save_llama2c(*trained.model, trained.context, llama2c_file);
  const auto& c = trained.model->cfg;
  fmt::print("wrote {} (llama2.c version 0: d {}, hidden {}, {} layers, {} heads, {} kv heads, vocab {}{}, seq_len {}) "
             "from step {}\n",
             llama2c_file, c.d, c.ffn_hidden, c.layers, c.heads, c.kv_heads, c.vocab,
             c.tie_embeddings ? "" : " with its own classifier", trained.context, trained.step);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS/OpenMP threads spin between small ops unless told to yield.
  setenv("OMP_WAIT_POLICY", "passive", 0);
  CLI::App app{"sinkc runtime commands"};
  app.set_version_flag("--version", fmt::format("sinkc-runtime {}: LibTorch {}, CPU JIT {}, CUDA {}", sink::version(),
                                                TORCH_VERSION, kHaveJit ? "yes (LLVM ORC)" : "no",
                                                torch::cuda::is_available() ? "yes" : "no"));
  app.require_subcommand(1);
  std::vector<std::string> targets;
  std::string target;
  RunFlags flags;
  auto* run = app.add_subcommand("run", "train and measure every run of a spec; runs already completed are cached");
  run->add_option("plans", targets, "plan.toml files, or folders of them (`sinkc compile` output)")->required();
  run->add_option("--run", flags.only, "only this run (and its seeds, NAME.seed=K)");
  run->add_option("--out", flags.out, "folder of run directories");
  run->add_flag("--resume", flags.resume, "continue interrupted runs from their last checkpoint");
  run->add_flag("--wait", flags.wait, "a run another process is training: wait for it to finish instead of skipping it");
  run->add_option("--jobs", flags.jobs, "train up to this many runs at once, each in its own process")->check(CLI::Range(1, 1024));
  run->add_option("--auto-threads", flags.auto_threads, "threads for runs whose plan says train.threads = 0")
      ->check(CLI::Range(1, 4096));
  run->add_flag("--no-progress", flags.no_progress, "no live progress line");

  std::string input, tokenizer, bos_mode;
  double eps = 0.3;
  int64_t T = 64, n = 100;
  std::vector<int64_t> positions;
  auto* measure = app.add_subcommand("measure", "sink metrics of a trained run or a llama2.c checkpoint");
  measure->add_option("target", target, "run directory or llama2.c .bin")->required();
  measure->add_option("--input", input, "natural | random | repeat")->check(CLI::IsMember({"natural", "random", "repeat"}));
  measure->add_option("--eps", eps, "threshold eps")->check(CLI::Range(0.0, 1.0));
  measure->add_option("--T", T, "sequence length")->check(CLI::Range(2, 1 << 20));
  measure->add_option("--n", n, "sequences")->check(CLI::Range(1, 1 << 20));
  measure->add_option("--positions", positions, "1-based positions k of Sink_k");
  measure->add_option("--tokenizer", tokenizer, "llama2.c tokenizer (tok*.bin) for natural input");
  measure->add_option("--bos", bos_mode, "with | without | auto (as the run's measure.bos)")
      ->check(CLI::IsMember({"with", "without", "auto"}));

  std::string llama2c_file;
  auto* export_cmd = app.add_subcommand("export", "write a trained run's model in another format");
  export_cmd->add_option("run", target, "run directory (runs/<run>-<hash8>)")->required();
  export_cmd->add_option("--llama2c", llama2c_file,
                         "FILE: a llama2.c version-0 checkpoint (RoPE, RMSNorm, SwiGLU, softmax attention models only)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*run) return run_command(targets, flags);
    if (*measure) return measure_command(target, input, eps, T, n, positions, tokenizer, bos_mode);
    if (*export_cmd) return export_command(target, llama2c_file);
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
