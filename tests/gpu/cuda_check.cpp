// The CUDA backend on a real GPU (scripts/gpu-check.sh runs it; no
// GoogleTest needed, which a GPU node's pip PyTorch does not bring):
//  1. forward and every gradient of every paper variant, the later designs
//     and random score expressions against the reference path on the same
//     GPU, in float (1e-5) and double (1e-9), as tests/runtime/cuda_kernels_test
//     does on the CPU emulation;
//  2. bf16 and half storage within the reference's own rounding, forward
//     and gradients (every paper variant), and the fused backward and (on
//     an H100 or H200) the Hopper kernels that the tuning may choose for
//     some of them;
//  3. a micro model (tests/plan/fixtures), and the same with grouped-query
//     heads, a sink token, a window and k*, trained 50 steps with AdamW on
//     the CPU (reference attention) and on the GPU (generated kernels) in
//     fp32: the loss curves agree to 1e-4;
//  4. their checkpoints move between the devices both ways;
//  5. plain causal softmax through LibTorch's SDPA (the backend's dispatch)
//     against the same reference, forward and gradients;
//  6. the GPU a run takes: --gpu N, torchrun's LOCAL_RANK modulo the GPUs,
//     an error past them;
//  7. a run stopped on the GPU resumes with train.device = cpu in the same
//     run directory and ends where a CPU-only run ends;
//  9. "step kernels": the residual add with the RMSNorm and the gated FFNs' activations as CUDA kernels
//     (runtime/training/step_kernels.h) against the LibTorch operations in double, forward and every gradient, in
//     float, bf16 and half, at the 60M model's widths, as tests/kernels/step_kernels_test.cpp does on the emulation;
//  0. "tiles" (only when named: scripts/gpu-check.sh runs it in a process of its own before the others, as a
//     fault in it would end the process): the tensor-core products of tile.cuh (mma.sync) and, on compute
//     capability 9.0, of tile_sm90.cuh (wgmma) against plain matrix products (tests/kernels/tile_products.h),
//     each wrong element named with the place its value belongs to;
//  8. "tune": the tensor-core kernels' tiles measured at the 60M model's
//     attention shapes (batch 8 x 8 heads, T 2048) for the variants of
//     tuning_variants(); the choices land in kernel_cache_dir()/tiles.json
//     and are printed. (Cases 1-7 run the default tiles: SINKLAB_TUNE=0.)
// One line per case, each flushed as it ends, so that what a crash or a time
// limit cuts short still shows how far it got (scripts/gpu_check_report.py
// counts those lines); exit 0 when all pass, 1 on a failure, 77 without a GPU.
// A crash prints a CRASH line: the case it cut short, the faulting address and
// the code addresses on the stack, named where the loader knows them.
//   build-gpu/tests/cuda_check [filter] [--no-tune] [--no-table-tiles]
//     (--no-tune: cases 1-7; --no-table-tiles: without case 2's fused and Hopper tiles, which "table-tiles" alone
//     runs; "tune" alone: case 8; "tiles": 0)
//   build-gpu/tests/cuda_check --fill-cache [ARCH=90] [--sample N]   (NVRTC only, no GPU: every kernel above, on
//                                                                      every core; N of them, spread, with --sample)
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "kernels/cuda/emit_cuda.h"
#include "plan/plan.h"
#include "plan/run_config.h"
#include "runtime/attention/attention.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/cuda_tuning.h"
#include "runtime/gpu_features.h"
#include "runtime/training/device.h"
#include "runtime/training/model.h"
#include "runtime/training/optimizer.h"
#include "runtime/training/train.h"
#include "support/installation.h"
#include "support/remove_tree.h"
#include "tests/gpu/crash_report.h"
#include "tests/gpu/step_kernels_case.h"
#include "tests/kernels/tile_products.h"
#include "tests/runtime/attention_oracle.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;
using namespace sink::gpu_check;

namespace {

int failures = 0, cases = 0;

void report(const std::string& name, bool passed, const std::string& detail) {
  ++cases;
  if (!passed) ++failures;
  say("{} {:<70} {}\n", passed ? "PASS" : "FAIL", name, detail);
}

// The gradient furthest from the reference, for a report line.
template <typename Grads>
std::string worst_gradient(const Grads& grads, double allowed) {
  double worst = 0;
  std::string which;
  for (const auto& [g, e] : grads)
    if (e >= worst) worst = e, which = g;
  return fmt::format("worst gradient {} {:.2e} (< {:.1e})", which, worst, allowed);
}

torch::Tensor on_gpu(const kernels::KernelSpec& spec, const AttentionCall& call) {
  return cuda_attention(spec, call, cuda_modules());
}

void variant(const Variant& v, double tol, torch::ScalarType dtype) {
  const std::string name = fmt::format("{} [{}]", v.name, c10::toString(dtype));
  now_running(name);
  try {
    OracleResult r = measure_against_reference(on_gpu, v, tol, dtype, torch::Device(torch::kCUDA, 0));
    report(name, r.passed(),
           fmt::format("forward {:.2e} (< {:.0e}), {}", r.forward, r.forward_allowed,
                       worst_gradient(r.grads, r.grads_allowed)));
  } catch (const std::exception& e) {
    report(name, false, e.what());
  }
}

// bf16 and half storage (measure_sixteen_bit): every paper variant (d_head 8: the scalar kernels), and
// softmax at the 60M model's head size over four key tiles, in both storages; then every variant at the
// tensor-core kernels' sizes (tensor_core_variants: d_head 64, 96, 128, several blocks, ragged tails).
struct SixteenBitCase {
  Variant variant;
  torch::ScalarType storage;
};
std::vector<SixteenBitCase> sixteen_bit_cases() {
  auto variants = paper_variants();
  variants.push_back({.name = "softmax, T 256, d_head 64", .T = 256, .D = 64});
  std::vector<SixteenBitCase> out;
  for (auto storage : {torch::kBFloat16, torch::kHalf})
    for (const auto& v : variants) out.push_back({v, storage});
  for (const auto& [v, half] : tensor_core_variants()) out.push_back({v, half ? torch::kHalf : torch::kBFloat16});
  return out;
}

void sixteen_bit_storage() {
  const auto dev = torch::Device(torch::kCUDA, 0);
  for (const auto& [v, storage] : sixteen_bit_cases()) {
    const bool tensor_cores = kernels::cuda_tiles(spec_of(v), storage == torch::kHalf ? kernels::CudaStorage::Float16
                                                                                      : kernels::CudaStorage::BFloat16)
                                  .tensor_cores;
    const std::string name =
        fmt::format("{} [{} storage{}]", v.name, c10::toString(storage), tensor_cores ? ", tensor cores" : "");
    now_running(name);
    try {
      const SixteenBitResult r = measure_sixteen_bit(on_gpu, v, storage, dev, 4, 4);
      report(name, r.passed(),
             fmt::format("forward {:.2e} (< {:.1e}; the reference's own {:.1e}), {}", r.forward, r.forward_allowed,
                         r.own, worst_gradient(r.grads, r.grads_allowed)));
    } catch (const std::exception& e) {
      report(name, false, e.what());
    }
  }
}

// Why no fused backward runs at compute capability `capability`; "" where one does.
std::string fused_backward_off(int capability) {
  if (fused_backward_allowed(capability)) return "";
  const FeatureDecision fused = gpu_feature(GpuFeature::fused_backward, capability);
  return fused.on ? "bulk_reduction " + gpu_feature(GpuFeature::bulk_reduction, capability).why
                  : "fused_backward " + fused.why;
}

// Tiles a tuned launcher reads from the table, on the device: the fused backward (backward_keys summing dQ,
// kernels::cuda_fused_candidates) for every ninth tensor-core case, its first or last shape; and the Hopper
// kernels (wgmma, kernels::cuda_hopper_candidates) for every ninth from the fifth, each shape in turn, and the
// fused Hopper backward (kernels::cuda_hopper_fused_candidates) for every ninth from the seventh, on a GPU of
// compute capability 9.0. In half storage, each in a launcher of its own; the table is put back as
// it was afterwards (case 8 measures into it; half storage keeps these entries off its bf16 variants even if a
// crash leaves them). Each only where runtime/gpu_features.h's table or SINKLAB_GPU_FEATURES lets it run (gpu-check
// asks for hopper=tune, fused_backward and bulk_reduction): a case the runtime would not run is skipped, saying why.
struct TunedCase {
  Variant variant;
  KernelTiles tiles;
  std::string what;
};
std::vector<TunedCase> tuned_cases(int capability) {
  std::vector<TunedCase> out;
  const auto variants = tensor_core_variants();
  const auto storage = kernels::CudaStorage::Float16;
  const std::string fused_off = fused_backward_off(capability);
  if (!fused_off.empty()) say("SKIP fused backward: {}\n", fused_off);
  for (size_t n = 2; n < variants.size() && fused_off.empty(); n += 9) {
    const auto spec = spec_of(variants[n].variant);
    const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
    const auto fused = kernels::cuda_fused_candidates(spec, storage);
    if (fused.empty()) continue;
    const kernels::CudaTiles& keys = out.size() % 2 ? fused.back() : fused.front();
    out.push_back({variants[n].variant,
                   {defaults, defaults, defaults, keys},
                   fmt::format("fused backward {}x{}", keys.key_rows, keys.key_queries)});
  }
  if (capability != 0 && capability != kernels::kHopperCapability) return out;
  if (!hopper_kernels_allowed(capability)) {  // (gpu-check: the warpgroup tile products crashed or hung)
    say("SKIP wgmma kernels: hopper {}\n", gpu_feature(GpuFeature::hopper, capability).why);
    return out;
  }
  for (size_t n = 5, k = 0; n < variants.size(); n += 9, ++k) {
    const auto spec = spec_of(variants[n].variant);
    const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
    const auto hopper = kernels::cuda_hopper_candidates(spec, storage);
    if (hopper.empty()) continue;
    const kernels::CudaTiles& tiles = hopper[k % hopper.size()];
    out.push_back({variants[n].variant,
                   {tiles, tiles, tiles},
                   fmt::format("wgmma kernels, forward {}x{}{}", tiles.forward_rows, tiles.forward_keys,
                               tiles.overlap ? " overlapped" : "")});
  }
  for (size_t n = 7; n < variants.size() && fused_off.empty(); n += 9) {  // the fused Hopper backward, default forward
    const auto spec = spec_of(variants[n].variant);
    const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
    for (const auto& keys : kernels::cuda_hopper_fused_candidates(spec, storage))
      out.push_back({variants[n].variant, {defaults, defaults, defaults, keys}, "wgmma fused backward 64x64"});
  }
  return out;
}

void tuned_tiles() {
  const auto dev = torch::Device(torch::kCUDA, 0);
  const auto table = kernel_cache_dir() / "tiles.json";
  std::string before;
  const bool had_table = std::filesystem::exists(table);
  if (had_table) before.assign(std::istreambuf_iterator<char>(std::ifstream(table).rdbuf()), {});
  KernelModules tuned_modules = cuda_modules();
  tuned_modules.name += ", tiles from the table";  // (a launcher of its own, which reads the table when made)
  auto attend = [&](const kernels::KernelSpec& spec, const AttentionCall& call) {
    return cuda_attention(spec, call, tuned_modules);
  };
  for (const auto& [v, tiles, what] : tuned_cases(cuda::device_properties(0).capability)) {
    const std::string name = fmt::format("{} [Half storage, {}]", v.name, what);
    now_running(name);
    try {
      const auto spec = spec_of(v);
      const std::string gpu = cuda::module_for(cuda_source_for(spec, torch::kHalf), 0)->device_name();
      remember_tiles(tuning_key(gpu, spec, kernels::CudaStorage::Float16), tiles);
      const SixteenBitResult r = measure_sixteen_bit(attend, v, torch::kHalf, dev, 4, 4);
      report(name, r.passed(),
             fmt::format("forward {:.2e} (< {:.1e}), {}", r.forward, r.forward_allowed,
                         worst_gradient(r.grads, r.grads_allowed)));
    } catch (const std::exception& e) {
      report(name, false, e.what());
    }
  }
  std::error_code ec;
  if (had_table)
    std::ofstream(table) << before;
  else
    std::filesystem::remove(table, ec);
}

// Case 0: the products of the tile operations, each shape's kernel in its own module.
void tile_products() {
  const int capability = cuda::device_properties(0).capability;
  if (capability < kernels::kTensorCoreCapability) {
    say("SKIP tile products: this GPU ({}.{}) has no bf16 mma.sync; its kernels are the scalar ones\n", capability / 10,
        capability % 10);
    return;
  }
  for (bool warpgroup : {false, true}) {
    if (warpgroup && capability != kernels::kHopperCapability) {
      say("SKIP wgmma products: sm_90a code runs on compute capability 9.0 alone, this GPU is {}.{}\n", capability / 10,
          capability % 10);
      continue;
    }
    for (const TileShape& shape : tile_shapes(warpgroup)) {
      now_running(shape.describe());
      try {
        // (10x the emulation's tolerances: the tensor cores add in an order of their own; a misplaced element
        // is off by the size of the values, 10 and more.)
        for (const auto& [name, problem] :
             check_tile_products(cuda_modules(), torch::Device(torch::kCUDA, 0), shape, 10))
          report(name, problem.empty(), problem.empty() ? "every element" : problem);
      } catch (const std::exception& e) {
        report(shape.describe(), false, e.what());
      }
    }
  }
}

// LibTorch's SDPA for plain causal softmax, against the reference in float: that the backend calls it with the
// right mask and scale. The very large scores case (logits in the hundreds) is SDPA's own numerics, not the
// dispatch: on an H100 its float kernels' gradients left the 10x-the-reference's-own-error bound that the
// generated float kernels meet (theirs 2.3e-4 against 2.3e-3), so it is printed, not judged.
void sdpa_dispatch() {
  if (!has_sdpa()) {
    say("SKIP sdpa: this LibTorch has no scaled_dot_product_attention\n");
    return;
  }
  auto sdpa = [](const kernels::KernelSpec&, const AttentionCall& c) { return sdpa_causal_attention(c.q, c.k, c.v); };
  for (const auto& v : paper_variants()) {
    if (!spec_of(v).plain_causal_softmax()) continue;
    const std::string name = v.name + " [sdpa, float]";
    now_running(name);
    try {
      // LibTorch's fp32 attention kernels sum in other orders than its matmul: 1e-4.
      OracleResult r = measure_against_reference(sdpa, v, 1e-4, torch::kFloat, torch::Device(torch::kCUDA, 0));
      const std::string detail = fmt::format("forward {:.2e}, {}", r.forward, worst_gradient(r.grads, r.grads_allowed));
      if (v.q_scale > 1)
        say("NOTE {:<70} {}: SDPA's own numerics, not judged\n", name, detail);
      else
        report(name, r.passed(), detail);
    } catch (const std::exception& e) {
      report(name, false, e.what());
    }
  }
}

// One model shape trained on both devices, and its checkpoints moved both ways.
void train_on_both_devices(const std::string& shape, const RunConfig& cfg) {
  now_running("training on both devices: " + shape);
  auto cpu_cfg = cfg.model, gpu_cfg = cfg.model;
  cpu_cfg.attention.backend = Backend::reference;
  gpu_cfg.attention.backend = Backend::jit;
  const auto dev = torch::Device(torch::kCUDA, 0);
  torch::manual_seed(0);
  Transformer cpu_model(cpu_cfg, torch::kCPU);
  torch::manual_seed(0);
  Transformer gpu_model(gpu_cfg, dev);
  auto cpu_opt = make_optimizer(cpu_model, cfg.train), gpu_opt = make_optimizer(gpu_model, cfg.train);
  torch::manual_seed(1);
  auto data = torch::randint(0, 64, {50, 8, 33}, torch::kLong);
  double worst = 0;
  for (int step = 0; step < 50; ++step) {
    auto x = data[step].narrow(1, 0, 32), y = data[step].narrow(1, 1, 32);
    auto loss_of = [&](Transformer& m, torch::optim::Optimizer& opt) {
      auto logits = m.forward(x).logits;
      auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 64}), y.to(logits.device()).reshape({-1}));
      opt.zero_grad();
      loss.backward();
      opt.step();
      return loss.item<double>();
    };
    const double a = loss_of(cpu_model, *cpu_opt), b = loss_of(gpu_model, *gpu_opt);
    worst = std::max(worst, std::abs(a - b) / std::abs(a));
  }
  report(shape + ": 50 AdamW steps, cpu (reference) vs cuda (kernels), fp32", worst < 1e-4,
         fmt::format("largest relative loss difference {:.2e} (< 1e-4)", worst));

  // A checkpoint written on one device loads on the other and gives its logits.
  auto moved = [&](Transformer& from, const ModelConfig& to_cfg, torch::Device to) {
    const auto file = std::filesystem::temp_directory_path() / fmt::format("sinklab-gpu-check-{}.pt", getpid());
    torch::serialize::OutputArchive out;
    from.save(out);
    out.save_to(file.string());
    torch::serialize::InputArchive in;
    in.load_from(file.string(), to);
    auto reloaded = std::make_shared<Transformer>(to_cfg, to);
    reloaded->load(in);
    std::filesystem::remove(file);
    auto x = data[0].narrow(1, 0, 32);
    return (reloaded->forward(x).logits.cpu() - from.forward(x).logits.cpu()).abs().max().item<double>();
  };
  const double to_cpu = moved(gpu_model, cpu_cfg, torch::kCPU), to_gpu = moved(cpu_model, gpu_cfg, dev);
  report(shape + ": a GPU checkpoint loads on the CPU", to_cpu < 1e-4, fmt::format("logits differ by {:.2e}", to_cpu));
  report(shape + ": a CPU checkpoint loads on the GPU", to_gpu < 1e-4, fmt::format("logits differ by {:.2e}", to_gpu));
}

// The fixture's model, and one with grouped-query heads, a sink token, a
// window and K biases (the pieces the model layer adds around the kernels).
void training_matches_the_cpu(const std::string& source_dir) {
  RunConfig cfg = read_config(read_plan(source_dir + "/tests/plan/fixtures/fixture.plan.toml"));
  cfg.model.vocab = 64;
  train_on_both_devices("fixture model", cfg);
  RunConfig grouped = cfg;
  grouped.model.kv_heads = cfg.model.heads / 2;
  grouped.model.sink_token = true;
  grouped.model.attention.rule = visibility(cfg.model.attention.rule.prefix, 9);
  grouped.model.biases = Biases::k;
  train_on_both_devices(fmt::format("{} query heads on {} kv heads, sink token, window 9, k*", grouped.model.heads,
                                    grouped.model.kv_heads),
                        grouped);
}

// The run-level path: the same plan trained on the GPU, stopped as if killed
// after its first checkpoint, resumed with train.device = cpu in the same run
// directory (the device is not in the hash), ends where a run trained on the
// CPU alone ends. Its second half runs the CPU's kernels on the GPU's
// weights and optimizer state, so the tolerance is the fp32 curves' (1e-4)
// with room for 20 more steps.
void run_resumes_on_the_cpu(const std::string& source_dir) {
  now_running("a run started on the GPU resumes on the CPU");
  Plan gpu_plan = read_plan(source_dir + "/tests/plan/fixtures/fixture.plan.toml");
  gpu_plan.fields["train.steps"] = Value::of_int(40);
  gpu_plan.fields["train.batch"] = Value::of_int(32);
  gpu_plan.fields["train.checkpoint_every"] = Value::of_int(10);
  gpu_plan.fields["measure.every"] = Value::of_int(20);
  gpu_plan.fields["train.device"] = Value::of_enum("cuda");
  // The reference backend on both devices: a GPU node's runtime usually has no CPU JIT (no LLVM there).
  gpu_plan.fields["attention.backend"] = Value::of_enum("reference");
  Plan cpu_plan = gpu_plan;
  cpu_plan.fields["train.device"] = Value::of_enum("cpu");
  const auto out = std::filesystem::temp_directory_path() / fmt::format("sinklab-gpu-check-resume-{}", getpid());
  RunOptions o;
  o.out = (out / "moved").string();
  o.progress = false;
  o.stop_after = 25;  // checkpoints at 10 and 20; steps 21-25 are lost, as when killed
  const RunResult stopped = run_plan(gpu_plan, o);
  o.stop_after = -1;
  o.resume = true;
  const RunResult resumed = run_plan(cpu_plan, o);
  RunOptions alone;
  alone.out = (out / "alone").string();
  alone.progress = false;
  const RunResult cpu_only = run_plan(cpu_plan, alone);
  std::string detail =
      fmt::format("{} on cuda, then {} on cpu", outcome_name(stopped.status), outcome_name(resumed.status));
  bool passed = stopped.status == RunOutcome::Stopped && resumed.status == RunOutcome::Completed &&
                cpu_only.status == RunOutcome::Completed && stopped.dir == resumed.dir;
  if (passed) {
    const double a = resumed.summary["final"]["valid_loss"].get<double>();
    const double b = cpu_only.summary["final"]["valid_loss"].get<double>();
    std::ifstream log(resumed.dir + "/log.txt");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    passed = std::abs(a - b) / b < 5e-4 && text.find("resumed at step 20") != std::string::npos;
    detail += fmt::format("; valid loss {:.6f} against {:.6f} trained on the cpu alone (< 5e-4 relative)", a, b);
  } else {
    detail += ": " + resumed.summary.dump();
  }
  report("a run started on the GPU resumes on the CPU, in the same run directory", passed, detail);
  std::error_code ignored;  // a temporary folder left behind fails nothing
  sink::remove_tree(out, ignored);
}

void device_choice() {
  now_running("device choice");
  const int gpus = visible_gpus();
  const auto chosen = [](int gpu) { return training_device(DeviceKind::cuda, gpu).index(); };
  report("device: --gpu N takes GPU N", chosen(gpus - 1) == gpus - 1, fmt::format("{} GPUs visible", gpus));
  setenv("LOCAL_RANK", std::to_string(gpus + 1).c_str(), 1);
  const int by_rank = chosen(-1);
  unsetenv("LOCAL_RANK");
  report("device: worker LOCAL_RANK = GPUs + 1 takes GPU 1 mod GPUs", by_rank == 1 % gpus,
         fmt::format("GPU {}", by_rank));
  report("device: a process alone takes GPU 0", chosen(-1) == 0, "");
  std::string message;
  try {
    chosen(gpus);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  report("device: --gpu past the visible GPUs is an error", message.find("--gpu") != std::string::npos, message);
}

}  // namespace

// The variants whose tiles case 8 measures, at the 60M model's attention shapes.
std::vector<Variant> tuning_variants() {
  const ExprNode sig = call("sigmoid", {var("qk")});
  std::vector<Variant> out;
  for (int64_t d : {64, 96, 128}) {
    out.push_back({.name = "softmax", .T = 2048, .D = d});
    out.push_back({.name = "sigmoid, no norm", .score = sig, .normalize = "none", .T = 2048, .D = d});
  }
  out.push_back({.name = "softmax + k*", .key_bias = true, .T = 2048, .D = 64});
  out.push_back({.name = "sink logit", .T = 2048, .D = 64, .sink_logit = true});
  out.push_back({.name = "ALiBi", .position_bias = true, .T = 2048, .D = 64});
  out.push_back({.name = "softpick", .normalize = "softpick", .T = 2048, .D = 64});
  return out;
}

void tune_tiles() {
  setenv("SINKLAB_TUNE", "1", 1);  // measured here, whatever the shipped table holds for this GPU
  const auto dev = torch::Device(torch::kCUDA, 0);
  const auto bf16 = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  for (const auto& v : tuning_variants()) {
    const std::string name = fmt::format("tune: {}, d_head {}, T {}", v.name, v.D, v.T);
    now_running(name);
    try {
      const auto started = std::chrono::steady_clock::now();
      const int64_t B = 8, H = 8;
      auto q = torch::randn({B, H, v.T, v.D}, bf16), k = torch::randn({B, H, v.T, v.D}, bf16),
           val = torch::randn({B, H, v.T, v.D}, bf16);
      const auto real = torch::TensorOptions().device(dev).dtype(torch::kFloat);
      AttentionCall call{q, k, val, {}, {}, {}, {}};
      if (v.position_bias) call.g = torch::randn({H, v.T}, real) * 0.1;
      if (v.key_bias) call.k_star = torch::randn({H, v.D}, real), call.v_star = torch::zeros({H, v.D}, real);
      if (v.sink_logit) call.sink_logit = torch::zeros({H}, real);
      cuda_attention(spec_of(v), call, cuda_modules());  // the first forward measures
      const auto key = tuning_key(cuda::module_for(cuda_source_for(spec_of(v), torch::kBFloat16), 0)->device_name(),
                                  spec_of(v), kernels::CudaStorage::BFloat16);
      const auto chosen = remembered_tiles(key);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::string measured;
      if (chosen)
        for (const auto& [kernel, seconds] : chosen->seconds)
          measured += fmt::format("{}{} {:.3f}", measured.empty() ? "; ms: " : ", ", kernel, 1e3 * seconds);
      report(name, chosen.has_value(),
             chosen ? fmt::format("{:.1f} s; forward [{}], backward_keys [{}], backward_queries [{}], fused [{}]{}", s,
                                  chosen->forward.describe(), chosen->keys.describe(), chosen->queries.describe(),
                                  chosen->fused ? chosen->fused->describe() : "slower", measured)
                    : "nothing remembered under " + key);
    } catch (const std::exception& e) {
      report(name, false, e.what());
    }
  }
}

// Every variant the kernel cases below run, with the storage it runs in and its tolerance.
struct KernelCase {
  Variant variant;
  torch::ScalarType storage;
  double tolerance;
};
std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> cases;
  for (const auto& list :
       {paper_variants(), beyond_the_paper_variants(), score_function_variants(), normalizer_variants()})
    for (const auto& v : list) cases.push_back({v, torch::kFloat, 1e-5}), cases.push_back({v, torch::kDouble, 1e-9});
  for (const auto& v : random_score_variants()) cases.push_back({v, torch::kFloat, 2e-5});
  return cases;
}

// Compiles every kernel the cases need into the kernel cache, on every core
// (NVRTC takes a second or more per variant; one by one that is minutes of a
// GPU call). Needs NVRTC, not a GPU: where there is none it compiles for `arch`. `sample` > 0: that many sources,
// spread evenly over the list, for a rehearsal on the CPU, whose two cores would take minutes over all of them
// (CudaKernels.EveryVariantCompilesForSm80AndSm90 compiles every variant there).
int fill_kernel_cache(int arch, size_t sample) {
  std::vector<std::string> sources;
  for (const auto& c : kernel_cases()) sources.push_back(cuda_source_for(spec_of(c.variant), c.storage));
  for (const auto& [v, storage] : sixteen_bit_cases()) sources.push_back(cuda_source_for(spec_of(v), storage));
  for (const auto& [v, tiles, what] : tuned_cases(arch))
    for (const auto& t : {tiles.forward, tiles.fused.value_or(tiles.keys)})
      sources.push_back(kernels::emit_cuda(spec_of(v), kernels::CudaStorage::Float16, t));
  for (bool warpgroup : {false, true})  // case 0's
    if (warpgroup ? arch == kernels::kHopperCapability : arch >= kernels::kTensorCoreCapability)
      for (const TileShape& shape : tile_shapes(warpgroup)) sources.push_back(shape.source());
  for (const auto& v : tuning_variants()) {  // every tile candidate case 8 measures
    auto spec = spec_of(v);
    for (const auto& tiles : kernels::cuda_tuning_tiles(spec, kernels::CudaStorage::BFloat16, arch))
      sources.push_back(kernels::emit_cuda(spec, kernels::CudaStorage::BFloat16, tiles));
  }
  for (const auto& source : step_kernel_sources()) sources.push_back(source);  // (case 9's)
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
  if (sample > 0 && sample < sources.size()) {
    std::vector<std::string> spread;
    for (size_t k = 0; k < sample; ++k) spread.push_back(sources[k * sources.size() / sample]);
    say("a sample of {} of the {} kernel sources\n", sample, sources.size());
    sources = std::move(spread);
  }
  const auto started = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0}, failed{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < sources.size();) try {
          cuda::loadable_image(sources[i], arch);
        } catch (const std::exception& e) {
          ++failed;
          say("FAIL kernel {}: {}\n", i, e.what());
        }
    });
  for (auto& t : pool) t.join();
  fmt::print(
      "filled the kernel cache ({}) for sm_{}: {} kernel sources, {} compiled by NVRTC here, {} failed, {:.1f} s "
      "on {} threads\n",
      kernel_cache_dir().string(), arch, sources.size(), cuda::nvrtc_compilations(), failed.load(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), pool.size());
  return failed ? 1 : 0;
}

int main(int argc, char** argv) {
  say("{}\n", cuda::describe_libraries());
  if (argc > 1 && std::string(argv[1]) == "--fill-cache") {
    if (!cuda::nvrtc_available()) return 1;
    int arch = 90;
    size_t sample = 0;
    for (int a = 2; a < argc; ++a)
      if (std::string(argv[a]) == "--sample" && a + 1 < argc)
        sample = std::stoul(argv[++a]);
      else
        arch = std::stoi(argv[a]);
    return fill_kernel_cache(arch, sample);
  }
  if (!torch::cuda::is_available()) {
    say("SKIP: this LibTorch sees no CUDA device\n");
    return 77;
  }
  report_crashes();
  std::string filter;
  bool tune = true, table_tiles = true;
  for (int a = 1; a < argc; ++a)
    if (std::string(argv[a]) == "--no-tune")
      tune = false;
    else if (std::string(argv[a]) == "--no-table-tiles")
      table_tiles = false;
    else
      filter = argv[a];
  setenv("SINKLAB_TUNE", "0", 1);  // cases 1-7: the default tiles (case 8 measures)
  auto wanted = [&](const std::string& name) { return filter.empty() || name.find(filter) != std::string::npos; };
  if (filter == "tiles") tile_products();  // (case 0 only when named)
  for (const auto& c : kernel_cases())
    if (wanted(c.variant.name)) variant(c.variant, c.tolerance, c.storage);
  if (wanted("storage")) sixteen_bit_storage();
  if (wanted("sdpa")) sdpa_dispatch();
  if (wanted("device")) device_choice();
  if (wanted("train")) training_matches_the_cpu(sinktest::source_dir());
  if (wanted("resume")) run_resumes_on_the_cpu(sinktest::source_dir());
  if (wanted("step kernels")) step_kernels_case(report);
  // (Last of cases 1-7: kernels that may never have run on this GPU, whose fault would end the process.)
  if (table_tiles && (wanted("fused") || wanted("wgmma") || wanted("table-tiles"))) tuned_tiles();
  now_running("between cases");
  if (tune && wanted("tune")) tune_tiles();
  now_running("the summary");
  say("{} of {} cases passed\n", cases - failures, cases);
  // Every result is printed and flushed, every file written and closed: nothing after this line is
  // cuda_check's. The process ends here rather than through the static destructors of the CUDA
  // libraries, whose order at exit is theirs. (On an H100 the process died with SIGSEGV at address 0 in
  // the main thread after the resume case: once main had returned, and, with this exit, before the tuning
  // case printed its first line. The CRASH line names the case and the callers next time.)
  std::_Exit(failures ? 1 : 0);
}
