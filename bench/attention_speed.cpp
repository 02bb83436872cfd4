// JIT attention (forward + backward) against the LibTorch reference path and,
// for softmax, at::_scaled_dot_product_attention, in the same process. Prints
// ratios and the achieved GFLOP/s next to this machine's matmul GFLOP/s.
//
//   build/bench/attention_speed [threads=2] [repeats=5] [only=T:dh | VARIANT]
// With `only` a shape, just the JIT softmax forward + backward at that shape,
// once: for valgrind --tool=callgrind (where the instructions go). With a
// name, only the variants whose name contains it (e.g. "soft", "sink").
// "fwd share": the forward kernel's part of the JIT's forward + backward time.
#include <ATen/ATen.h>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <string>

#include "runtime/attention.h"
#include "runtime/jit_attention.h"

using namespace sink;
using namespace sink::rt;

namespace {

double seconds(const std::function<void()>& f, int repeats) {
  f();  // warm-up (and JIT compile)
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

ExprNode var(const char* n) { return {ExprNode::Op::Var, 0, n, {}}; }
ExprNode call(const char* f, ExprNode a) { return {ExprNode::Op::Call, 0, f, {std::move(a)}}; }

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_WAIT_POLICY", "passive", 0);  // idle OpenMP threads yield instead of spinning
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  at::set_num_threads(threads);
  const std::string only_variant = argc > 3 && !std::strchr(argv[3], ':') ? argv[3] : "";
  if (argc > 3 && only_variant.empty()) {
    const int64_t T = std::atoll(argv[3]), dh = std::atoll(std::strchr(argv[3], ':') + 1);
    kernels::KernelSpec spec;
    spec.score = call("exp", var("qk"));
    spec.softmax = true;
    spec.normalize = "sum";
    spec.d_head = dh;
    auto q = torch::randn({16, 4, T, dh}).requires_grad_(true), k = torch::randn({16, 4, T, dh}).requires_grad_(true),
         v = torch::randn({16, 4, T, dh}).requires_grad_(true);
    jit_attention(spec, {q, k, v, {}, {}, {}}).backward(torch::randn({16, 4, T, dh}));
    return 0;
  }
  torch::manual_seed(0);
  auto a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  const double mm_s = seconds([&] { (void)torch::mm(a, b); }, repeats);
  const double mm_gflops = 2.0 * 1024 * 1024 * 1024 / mm_s / 1e9;
  fmt::print("threads {}; matmul 1024^3: {:.1f} GFLOP/s\n\n", threads, mm_gflops);
  fmt::print("{:<18} {:>4} {:>3} | {:>9} {:>9} {:>7} | {:>9} {:>7} | {:>7} {:>8}\n", "variant", "T", "dh", "ref ms", "jit ms",
             "jit/ref", "sdpa ms", "jit/sdpa", "jit GF/s", "fwd share");

  struct Variant {
    const char* name;
    ExprNode score;
    std::string normalize;
    int64_t window;
    std::string sink_logit = "none";
  };
  std::vector<Variant> variants = {{"softmax", call("exp", var("qk")), "sum", 0},
                                   {"sigmoid, no norm", call("sigmoid", var("qk")), "none", 0},
                                   {"softmax, window 32", call("exp", var("qk")), "sum", 32},
                                   // Beyond the paper (gates and differential attention compose ordinary calls).
                                   {"softpick", call("exp", var("qk")), "softpick", 0},
                                   {"sink logit", call("exp", var("qk")), "sum", 0, "learned"}};
  const int64_t B = 16, H = 4;  // batch x heads of the tiny presets
  for (const auto& v : variants) {
    if (!only_variant.empty() && std::string(v.name).find(only_variant) == std::string::npos) continue;
    for (int64_t T : {64, 128, 256, 512}) {
      for (int64_t dh : {16, 32, 64}) {
        ModelConfig model;
        AttentionConfig& cfg = model.attention;
        cfg.score = v.score;
        cfg.normalize = v.normalize;
        cfg.window = v.window;
        cfg.softmax = is_softmax(cfg.score, cfg.normalize);
        cfg.sink_logit = v.sink_logit;
        model.pe = "rope";
        model.biases = "none";
        model.d_head = dh;
        const kernels::KernelSpec spec = kernels::kernel_spec(model);
        auto sink = cfg.has_sink_logit() ? torch::zeros({H}).requires_grad_(true) : torch::Tensor();
        auto q = torch::randn({B, H, T, dh}).requires_grad_(true);
        auto k = torch::randn({B, H, T, dh}).requires_grad_(true);
        auto vv = torch::randn({B, H, T, dh}).requires_grad_(true);
        auto dout = torch::randn({B, H, T, dh});
        AttentionInputs ref_in{q, k, vv, {}, {}, {}, {}};
        if (sink.defined()) ref_in.sink_logit = sink;
        const AttentionCall jit_in{q, k, vv, {}, {}, {}, sink};
        auto ref = seconds([&] { reference_attention(cfg, ref_in, false).out.backward(dout); }, repeats);
        auto jit = seconds([&] { jit_attention(spec, jit_in).backward(dout); }, repeats);
        auto jit_fwd = seconds([&] {
          torch::NoGradGuard no_grad;
          (void)jit_attention(spec, jit_in);
        }, repeats);
        std::string sdpa_ms = "-", sdpa_ratio = "-";
        if (cfg.softmax && v.window == 0 && !sink.defined()) {
          auto sdpa = seconds([&] {
            auto out = std::get<0>(at::_scaled_dot_product_attention(q, k, vv, {}, 0.0, false, true));
            out.backward(dout);
          }, repeats);
          sdpa_ms = fmt::format("{:.2f}", sdpa * 1e3);
          sdpa_ratio = fmt::format("{:.2f}x", sdpa / jit);
        }
        // Causal: half of the T x T pairs; forward 2 products, backward 4, each 2 flops per multiply-add.
        const double pairs = v.window ? double(T) * std::min<int64_t>(T, v.window) : double(T) * (T + 1) / 2;
        const double flops = B * H * pairs * dh * 2 * 6;
        fmt::print("{:<18} {:>4} {:>3} | {:>9.2f} {:>9.2f} {:>6.2f}x | {:>9} {:>7} | {:>7.1f} {:>7.0f}%\n", v.name, T, dh,
                   ref * 1e3, jit * 1e3, ref / jit, sdpa_ms, sdpa_ratio, flops / jit / 1e9, 100 * jit_fwd / jit);
      }
    }
  }
  return 0;
}
