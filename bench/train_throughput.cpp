// Training throughput (tokens/s) of the runtime with the reference and the JIT
// attention backends, against the same model written in plain PyTorch
// (bench/pytorch_twin.py, Debian's python3-torch) run side by side with the
// same threads and shapes. Three shapes: the tiny and tiny_text presets, and
// context 256 with d = 128, 2 layers, 4 heads.
//
//   build/bench/train_throughput [steps=20] [threads=1]
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/pipeline.h"
#include "runtime/batches.h"
#include "plan/run_config.h"
#include "runtime/corpus.h"
#include "runtime/model.h"
#include "runtime/optimizer.h"
#include "runtime/process.h"

using namespace sink;

namespace {

RunConfig config(const std::string& spec) {
  Compilation c({std::string(SINKLAB_SOURCE_DIR) + "/stdlib", {}, ""});
  c.add_text(std::string(SINKLAB_SOURCE_DIR) + "/bench.sink", spec);
  c.run();
  if (c.diagnostics().has_errors()) throw std::runtime_error(c.diagnostics().render());
  return read_config(c.plans().at(0));
}

// Tokens/s of `steps` training steps (after 3 warm-up steps).
double ours(RunConfig cfg, int steps) {
  auto data = rt::load_data(cfg.data, "/tmp/sinklab-bench-cache");
  cfg.model.vocab = data.vocab;
  rt::Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
  torch::manual_seed(0);
  rt::Transformer model(cfg.model);
  auto opt = rt::make_optimizer(model, cfg.train);
  auto step = [&](int s) {
    auto [x, y] = batches.train(s);
    auto logits = model.forward(x).logits;
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
    opt->zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt->step();
  };
  for (int s = 0; s < 3; ++s) step(s);
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step(s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(steps) * cfg.train.batch * cfg.train.context / secs;
}

double pytorch(const RunConfig& cfg, int64_t vocab, int steps, int threads) {
  std::string cmd = fmt::format("OMP_WAIT_POLICY=passive /usr/bin/python3 {}/bench/pytorch_twin.py {} {} {} {} {} {} {} {} {}",
                                SINKLAB_SOURCE_DIR, cfg.model.d, cfg.model.layers, cfg.model.heads, cfg.model.ffn_hidden,
                                cfg.train.context, cfg.train.batch, vocab, steps, threads);
  auto j = nlohmann::json::parse(rt::command_output(cmd), nullptr, false);
  return j.is_discarded() || !j.contains("tokens_per_s") ? 0 : j["tokens_per_s"].get<double>();
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_WAIT_POLICY", "passive", 0);  // idle OpenMP threads yield instead of spinning
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  at::set_num_threads(threads);
  const bool openblas = getenv("SINKLAB_BENCH_BLAS_THREADS") ? false : rt::single_threaded_blas();  // as sinkc-runtime does
  struct Shape {
    const char* name;
    std::string spec;
  };
  std::vector<Shape> shapes = {
      {"tiny preset", "experiment b extends tiny { attention.backend = BACKEND }"},
      {"tiny_text preset", "experiment b extends tiny_text { attention.backend = BACKEND }"},
      {"ctx 256, d 128, L 2, H 4",
       "experiment b extends tiny { attention.backend = BACKEND  model { d = 128  layers = 2  heads = 4  ffn_hidden = 256 }"
       "  train { context = 256  batch = 16 } }"},
  };
  fmt::print("{} steps, {} thread(s), OpenBLAS {}, tokens/s\n", steps, threads,
             openblas ? "single-threaded (as sinkc-runtime)" : "with its own threads");
  fmt::print("{:<26} {:>10} {:>10} {:>10} | {:>9} {:>9}\n", "shape", "reference", "jit", "PyTorch", "ref/PyT", "jit/ref");
  for (const auto& s : shapes) {
    auto with = [&](const char* backend) {
      std::string spec = s.spec;
      spec.replace(spec.find("BACKEND"), 7, backend);
      return config(spec);
    };
    auto ref_cfg = with("reference");
    double ref = ours(ref_cfg, steps);
    double jit = ours(with("jit"), steps);
    auto data = rt::load_data(ref_cfg.data, "/tmp/sinklab-bench-cache");
    double py = pytorch(ref_cfg, data.vocab, steps, threads);
    fmt::print("{:<26} {:>10.0f} {:>10.0f} {:>10.0f} | {:>8.2f}x {:>8.2f}x\n", s.name, ref, jit, py, py > 0 ? ref / py : 0.0,
               jit / ref);
  }
  return 0;
}
