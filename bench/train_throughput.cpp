// Training throughput (tokens/s) of the runtime with the reference and the JIT
// attention backends, against the same model written in plain PyTorch
// (bench/pytorch_twin.py) run side by side with the same threads and shapes:
// Debian's python3-torch 1.13 eager, and the pip torch 2.x researchers run
// (SINKLAB_PYTHON: scripts/torch-venv.sh) eager and under torch.compile.
// Four shapes: the tiny and tiny_text presets, tiny_text at context 256, and
// context 256 with d = 128, 2 layers, 4 heads. "unfused" is the JIT step with
// LibTorch's operations around the attention instead of the CPU's fused ones.
// Each contender runs `steps` steps once per round, the rounds interleaved so
// that a change of the machine's load hits all of them; each column is the
// median over rounds, each ratio the median of the rounds' ratios.
//
//   build/bench/train_throughput [steps=20] [threads=1] [rounds=3] [shapes=tiny,tiny_text,text256,ctx256]
// The environment variable SINKLAB_PYTHON overrides the Python the build was configured with;
// SINKLAB_BENCH_PROFILE=PREFIX writes PREFIX-reference.json, PREFIX-jit.json and PREFIX-jit-unfused.json (profiler
// traces).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <unistd.h>

#include "compiler/pipeline.h"
#include "plan/run_config.h"
#include "runtime/data/batches.h"
#include "runtime/data/corpus.h"
#include "runtime/processes/process.h"
#include "runtime/training/model.h"
#include "runtime/training/optimizer.h"
#include "runtime/training/training_step.h"
#include "support/remove_tree.h"
#include "tests/source_paths.h"

using namespace sink;

namespace {

RunConfig config(const std::string& spec) {
  Compilation c({std::string(sinktest::source_dir()) + "/stdlib", {}, ""});
  c.add_text(std::string(sinktest::source_dir()) + "/bench.sink", spec);
  c.run();
  if (c.diagnostics().has_errors()) throw std::runtime_error(c.diagnostics().render());
  return read_config(c.plans().at(0));
}

// Tokens/s of `steps` training steps (after 3 warm-up steps); `library`: with LibTorch's operations around the
// attention instead of the CPU's fused ones (runtime/training/cpu_step_operations.h).
double ours(RunConfig cfg, int steps, bool library = false) {
  auto data = rt::load_data(cfg.data, "/tmp/sinklab-bench-cache");
  cfg.model.vocab = data.vocab;
  rt::Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
  torch::manual_seed(0);
  rt::Transformer model(cfg.model);
  if (library) model.operations = rt::library_operations();
  auto opt = rt::make_optimizer(model, cfg.train);
  // The step every run takes (runtime/training/training_step.h), eager, as `sinkc run` takes it.
  rt::StepProfile unprofiled(false, model.device);
  rt::TrainingStep train_step(model, *opt, cfg, nullptr, unprofiled, rt::StepMode::eager);
  auto step = [&](int s) {
    auto [x, y] = batches.train(s);
    train_step.run(x, y, rt::learning_rate(cfg.train, s));
  };
  for (int s = 0; s < 3; ++s) step(s);
  // Where the time goes: LibTorch's profiler over the timed steps, as a Chrome trace
  // (bench/profile_summary.py sums it by operator).
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
  if (const char* path = getenv("SINKLAB_BENCH_PROFILE")) {
    const std::string file =
        fmt::format("{}-{}{}.json", path, name_of(cfg.model.attention.backend), library ? "-unfused" : "");
    profile = std::make_unique<torch::autograd::profiler::RecordProfile>(file);
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step(s);
  profile.reset();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(steps) * cfg.train.batch * cfg.train.context / secs;
}

// Tokens/s that `sinkc run` reports for the same spec (summary.json's tokens_per_s: the loop's steps with their data
// and logging, the measurements and checkpoints left out), `steps` steps at `threads` threads; 0 when it failed.
double sinkc_run(const std::string& spec, int steps, int threads) {
  const std::string dir = fmt::format("/tmp/sinklab-bench-run-{}", getpid());
  sink::remove_tree(dir);
  std::filesystem::create_directories(dir);
  std::string body = spec;
  body.insert(body.rfind('}'), fmt::format("  train.steps = {}  train.threads = {}  train.log_every = {}  "
                                           "measure.every = {} ",
                                           steps, threads, steps, steps));
  std::ofstream(dir + "/bench.sink") << body << "\n";
  const std::string cmd = fmt::format(
      "SINKLAB_TOKEN_CACHE=/tmp/sinklab-bench-cache/tokens {} run {}/bench.sink --out {}/runs --no-progress "
      "> {}/log.txt 2>&1",
      sinktest::sinkc_binary(), dir, dir, dir);
  double tokens_per_s = 0;
  if (std::system(cmd.c_str()) == 0)
    for (const auto& run : std::filesystem::directory_iterator(dir + "/runs"))
      if (std::ifstream summary(run.path() / "summary.json"); run.is_directory() && summary)
        tokens_per_s = nlohmann::json::parse(summary).value("tokens_per_s", 0.0);
  sink::remove_tree(dir);
  return tokens_per_s;
}

// Tokens/s of the twin under `python` (flags: "" or "--compile"), 0 when it failed.
double pytorch(const std::string& python, const std::string& flags, const RunConfig& cfg, int64_t vocab, int steps,
               int threads) {
  std::string cmd = fmt::format("OMP_WAIT_POLICY=passive {} {}/bench/pytorch_twin.py {} {} {} {} {} {} {} {} {} {}",
                                python, sinktest::source_dir(), flags, cfg.model.d, cfg.model.layers, cfg.model.heads,
                                cfg.model.ffn_hidden, cfg.train.context, cfg.train.batch, vocab, steps, threads);
  auto j = nlohmann::json::parse(rt::command_output(cmd), nullptr, false);
  return j.is_discarded() || !j.contains("tokens_per_s") ? 0 : j["tokens_per_s"].get<double>();
}

// The torch 2.x Python: the environment's, else the build's, else none.
std::string torch2_python() {
  if (const char* env = getenv("SINKLAB_PYTHON")) return env;
#ifdef SINKLAB_PYTHON
  return SINKLAB_PYTHON;
#else
  return "";
#endif
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_WAIT_POLICY", "passive", 0);  // idle OpenMP threads yield instead of spinning
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  const std::string only = argc > 4 ? fmt::format(",{},", argv[4]) : "";
  at::set_num_threads(threads);
  const std::string blas = rt::blas_threads_follow_libtorch();  // as sinkc-runtime does
  const std::string python2 = torch2_python();
  struct Shape {
    const char* name;
    std::string spec;
  };
  std::vector<Shape> shapes = {
      {"tiny", "experiment b extends tiny { attention.backend = BACKEND }"},
      {"tiny_text", "experiment b extends tiny_text { attention.backend = BACKEND }"},
      {"text256", "experiment b extends tiny_text { attention.backend = BACKEND  train.context = 256 }"},
      {"ctx256",
       "experiment b extends tiny { attention.backend = BACKEND"
       "  model { d = 128  layers = 2  heads = 4  ffn_hidden = 256 }  train { context = 256  batch = 16 } }"},
  };
  fmt::print("{} steps x {} rounds, {} thread(s), BLAS: {}, tokens/s (ctx256: d 128, L 2, H 4, context 256)\n", steps,
             rounds, threads, blas);
  if (python2.empty())
    fmt::print(
        "torch 2.x columns skipped: no SINKLAB_PYTHON (scripts/setup.sh configures it from scripts/torch-venv.sh)\n");
  else
    fmt::print("torch 2.x: {}\n", python2);
  // "sinkc run": the JIT spec trained by `sinkc run` (its own tokens/s), beside the in-process step's ("jit");
  // "unfused": the JIT step with LibTorch's operations around the attention, where "jit" has the CPU's fused ones.
  fmt::print("{:<10} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}\n", "shape",
             "reference", "jit", "unfused", "sinkc run", "PyT 1.13", "2.x eager", "2.x comp", "ref/1.13", "jit/ref",
             "jit/eager", "jit/comp", "run/eager", "jit/unf");
  for (const auto& s : shapes) {
    if (!only.empty() && only.find(fmt::format(",{},", s.name)) == std::string::npos) continue;
    auto with = [&](const char* backend) {
      std::string spec = s.spec;
      spec.replace(spec.find("BACKEND"), 7, backend);
      return config(spec);
    };
    auto ref_cfg = with("reference"), jit_cfg = with("jit");
    const int64_t vocab = rt::load_data(ref_cfg.data, "/tmp/sinklab-bench-cache").vocab;
    // Columns: reference, jit, 1.13, eager, compile, sinkc run, unfused; then each round's ratios.
    std::vector<std::vector<double>> col(7), ratio(6);
    std::string run_spec = s.spec;
    run_spec.replace(run_spec.find("BACKEND"), 7, "jit");
    for (int r = 0; r < rounds; ++r) {
      col[0].push_back(ours(ref_cfg, steps));
      col[1].push_back(ours(jit_cfg, steps));
      col[2].push_back(pytorch("/usr/bin/python3", "", ref_cfg, vocab, steps, threads));
      col[3].push_back(python2.empty() ? 0 : pytorch(python2, "", ref_cfg, vocab, steps, threads));
      col[4].push_back(python2.empty() ? 0 : pytorch(python2, "--compile", ref_cfg, vocab, steps, threads));
      col[5].push_back(sinkc_run(run_spec, steps, threads));
      col[6].push_back(ours(jit_cfg, steps, true));
      auto over = [&](double a, double b) { return b > 0 ? a / b : 0.0; };
      ratio[0].push_back(over(col[0][r], col[2][r]));
      ratio[1].push_back(over(col[1][r], col[0][r]));
      ratio[2].push_back(over(col[1][r], col[3][r]));
      ratio[3].push_back(over(col[1][r], col[4][r]));
      ratio[4].push_back(over(col[5][r], col[3][r]));
      ratio[5].push_back(over(col[1][r], col[6][r]));
    }
    auto x = [](double v) { return v > 0 ? fmt::format("{:.2f}x", v) : std::string("-"); };
    auto n = [](double v) { return v > 0 ? fmt::format("{:.0f}", v) : std::string("-"); };
    fmt::print("{:<10} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>8} {:>8} {:>9} {:>9} {:>9} {:>9}\n", s.name,
               n(median(col[0])), n(median(col[1])), n(median(col[6])), n(median(col[5])), n(median(col[2])),
               n(median(col[3])), n(median(col[4])), x(median(ratio[0])), x(median(ratio[1])), x(median(ratio[2])),
               x(median(ratio[3])), x(median(ratio[4])), x(median(ratio[5])));
  }
  return 0;
}
