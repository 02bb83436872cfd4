// JIT attention (forward + backward) against the LibTorch reference path and,
// for softmax, at::_scaled_dot_product_attention, in the same process. Prints
// ratios and the achieved GFLOP/s next to this machine's matmul GFLOP/s.
//
//   build/bench/attention_speed [threads=2] [repeats=5] [only=T:dh | VARIANT]
//   build/bench/attention_speed case THREADS REPEATS VARIANT T:dh[,T:dh...]
// With `only` a shape, just the JIT softmax forward + backward at that shape,
// once: for valgrind --tool=callgrind (where the instructions go). With a
// name, only the variants whose name contains it (e.g. "soft", "sink") or
// whose key it is. `case` prints the JIT's forward and forward + backward
// times as JSON lines: bench/attention_vs_torch2.py runs it next to torch
// 2.x's FlexAttention and SDPA.
// "fwd share": the forward kernel's part of the JIT's forward + backward time.
#include <ATen/ATen.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <string>
#include <torch/version.h>

#include "runtime/attention/attention.h"
#include "runtime/attention/jit_attention.h"

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

int64_t relative_bucket(int64_t n, int64_t buckets, int64_t max_distance) {  // as runtime/training/model.cpp
  const int64_t exact = std::max<int64_t>(1, buckets / 2);
  if (n < exact) return n;
  double scaled = std::log(double(n) / exact) / std::log(std::max(double(max_distance) / exact, 1.0 + 1e-9));
  return std::min(buckets - 1, exact + static_cast<int64_t>(scaled * (buckets - exact)));
}

struct Variant {
  const char* key;  // what `only` and bench/attention_vs_torch2.py name it by
  const char* name;
  ExprNode score;
  std::string normalize = "sum";
  int64_t window = 0, prefix = 0;
  SinkLogit sink_logit = SinkLogit::none;
  PosEmbedding pe = PosEmbedding::rope;
  double scale = 1;
};

std::vector<Variant> variants() {
  auto exp_qk = call("exp", var("qk"));
  std::vector<Variant> v = {{"softmax", "softmax", exp_qk},
                            {"sigmoid", "sigmoid, no norm", call("sigmoid", var("qk")), "none"},
                            {"window", "softmax, window 32", exp_qk},
                            {"prefix", "softmax, prefix 16", exp_qk},
                            {"alibi", "softmax, ALiBi", exp_qk},
                            {"t5", "softmax, T5 buckets", exp_qk},
                            {"scale", "softmax, alpha 0.2", exp_qk},
                            // Beyond the paper (gates and differential attention compose ordinary calls).
                            {"softpick", "softpick", exp_qk, "softpick"},
                            {"sinklogit", "sink logit", exp_qk}};
  v[2].window = 32;
  v[3].prefix = 16;
  v[4].pe = PosEmbedding::alibi;
  v[5].pe = PosEmbedding::relative;
  v[6].scale = 0.2;
  v[8].sink_logit = SinkLogit::learned;
  return v;
}

// One variant at one shape: its kernel, inputs and configuration.
struct Case {
  ModelConfig model;
  kernels::KernelSpec spec;
  torch::Tensor q, k, v, dout, g, sink, distance;
  AttentionInputs ref_in;  // without the bias: reference_inputs() gathers it from g on each call

  AttentionInputs reference_inputs() const {
    AttentionInputs in = ref_in;
    if (g.defined()) in.bias = g.index({torch::indexing::Slice(), distance});  // [H, T, T], in g's graph
    return in;
  }
  AttentionCall jit_in;
};

Case make_case(const Variant& var, int64_t B, int64_t H, int64_t T, int64_t dh) {
  Case c;
  AttentionConfig& cfg = c.model.attention;
  cfg.score = var.score;
  cfg.normalize = var.normalize;
  cfg.rule = visibility(var.prefix, var.window);
  cfg.scale = var.scale;
  cfg.shifted_exp = is_shifted_exp(cfg.score, cfg.normalize);
  cfg.sink_logit = var.sink_logit;
  c.model.pe = var.pe;
  c.model.heads = H;
  c.model.biases = Biases::none;
  c.model.d_head = dh;
  c.spec = kernels::kernel_spec(c.model);
  if (cfg.has_sink_logit()) c.sink = torch::zeros({H}).requires_grad_(true);
  auto n = torch::arange(T, torch::kFloat);
  if (var.pe == PosEmbedding::alibi)
    c.g = -torch::pow(2.0, -8.0 * torch::arange(1, H + 1, torch::kFloat) / H).view({H, 1}) * n;
  // T5's learned table of 32 buckets up to distance 128, as a model's is read out
  if (var.pe == PosEmbedding::relative) {
    std::vector<int64_t> buckets(T);
    for (int64_t d = 0; d < T; ++d) buckets[d] = relative_bucket(d, 32, 128);
    c.g = torch::randn({32, H}).index_select(0, torch::tensor(buckets)).t().contiguous().requires_grad_(true);
  }
  c.q = torch::randn({B, H, T, dh}).requires_grad_(true);
  c.k = torch::randn({B, H, T, dh}).requires_grad_(true);
  c.v = torch::randn({B, H, T, dh}).requires_grad_(true);
  c.dout = torch::randn({B, H, T, dh});
  c.ref_in = {c.q, c.k, c.v, {}, {}, {}, {}};
  c.distance = (n.view({T, 1}) - n.view({1, T})).clamp_min(0).to(torch::kLong);
  if (c.sink.defined()) c.ref_in.sink_logit = c.sink;
  c.jit_in = {c.q, c.k, c.v, c.g, {}, {}, c.sink};
  return c;
}

// LibTorch's fused attention: public from 2.0, internal in 1.13.
torch::Tensor causal_sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  return sdpa_causal_attention(q, k, v);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, {}, 0.0, false, true));
#endif
}

// `case` mode: the JIT alone at the given shapes, one JSON line per shape, for
// bench/attention_vs_torch2.py to put next to torch 2.x's FlexAttention and SDPA.
int run_cases(const std::string& key, const std::string& shapes, int repeats) {
  auto all = variants();
  auto v = std::find_if(all.begin(), all.end(), [&](const Variant& x) { return key == x.key; });
  if (v == all.end()) {
    fmt::print(stderr, "no variant {}\n", key);
    return 2;
  }
  for (size_t at = 0; at < shapes.size();) {
    size_t end = shapes.find(',', at);
    if (end == std::string::npos) end = shapes.size();
    const std::string shape = shapes.substr(at, end - at);
    at = end + 1;
    const int64_t T = std::atoll(shape.c_str()), dh = std::atoll(shape.c_str() + shape.find(':') + 1);
    Case c = make_case(*v, 16, 4, T, dh);
    const double fwd_bwd = seconds([&] { jit_attention(c.spec, c.jit_in).backward(c.dout); }, repeats);
    const double fwd = seconds(
        [&] {
          torch::NoGradGuard no_grad;
          (void)jit_attention(c.spec, c.jit_in);
        },
        repeats);
    fmt::print("{{\"variant\": \"{}\", \"T\": {}, \"dh\": {}, \"fwd_ms\": {:.4f}, \"fwd_bwd_ms\": {:.4f}}}\n", key, T,
               dh, fwd * 1e3, fwd_bwd * 1e3);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("OMP_WAIT_POLICY", "passive", 0);  // idle OpenMP threads yield instead of spinning
  if (argc > 1 && std::string(argv[1]) == "case") {
    if (argc != 6) {
      fmt::print(stderr, "usage: attention_speed case THREADS REPEATS VARIANT T:dh[,T:dh...]\n");
      return 2;
    }
    at::set_num_threads(std::atoi(argv[2]));
    torch::manual_seed(0);
    return run_cases(argv[4], argv[5], std::atoi(argv[3]));
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  at::set_num_threads(threads);
  const std::string only_variant = argc > 3 && !std::strchr(argv[3], ':') ? argv[3] : "";
  if (argc > 3 && only_variant.empty()) {
    const int64_t T = std::atoll(argv[3]), dh = std::atoll(std::strchr(argv[3], ':') + 1);
    Case c = make_case(variants()[0], 16, 4, T, dh);
    jit_attention(c.spec, c.jit_in).backward(c.dout);
    return 0;
  }
  torch::manual_seed(0);
  auto a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024});
  const double mm_s = seconds([&] { (void)torch::mm(a, b); }, repeats);
  const double mm_gflops = 2.0 * 1024 * 1024 * 1024 / mm_s / 1e9;
  fmt::print("threads {}; matmul 1024^3: {:.1f} GFLOP/s\n\n", threads, mm_gflops);
  fmt::print("{:<20} {:>4} {:>3} | {:>9} {:>9} {:>7} | {:>9} {:>7} | {:>7} {:>8}\n", "variant", "T", "dh", "ref ms",
             "jit ms", "jit/ref", "sdpa ms", "jit/sdpa", "jit GF/s", "fwd share");
  const int64_t B = 16, H = 4;  // batch x heads of the tiny presets
  for (const auto& v : variants()) {
    if (!only_variant.empty() && std::string(v.name).find(only_variant) == std::string::npos && only_variant != v.key)
      continue;
    for (int64_t T : {64, 128, 256, 512}) {
      for (int64_t dh : {16, 32, 64}) {
        Case c = make_case(v, B, H, T, dh);
        auto ref = seconds(
            [&] { reference_attention(c.model.attention, c.reference_inputs(), false).out.backward(c.dout); }, repeats);
        auto jit = seconds([&] { jit_attention(c.spec, c.jit_in).backward(c.dout); }, repeats);
        auto jit_fwd = seconds(
            [&] {
              torch::NoGradGuard no_grad;
              (void)jit_attention(c.spec, c.jit_in);
            },
            repeats);
        std::string sdpa_ms = "-", sdpa_ratio = "-";
        if (c.spec.plain_causal_softmax()) {
          auto sdpa = seconds([&] { causal_sdpa(c.q, c.k, c.v).backward(c.dout); }, repeats);
          sdpa_ms = fmt::format("{:.2f}", sdpa * 1e3);
          sdpa_ratio = fmt::format("{:.2f}x", sdpa / jit);
        }
        // Causal: half of the T x T pairs; forward 2 products, backward 4, each 2 flops per multiply-add.
        const double pairs = v.window ? double(T) * std::min<int64_t>(T, v.window) : double(T) * (T + 1) / 2;
        const double flops = B * H * pairs * dh * 2 * 6;
        fmt::print("{:<20} {:>4} {:>3} | {:>9.2f} {:>9.2f} {:>6.2f}x | {:>9} {:>7} | {:>7.1f} {:>7.0f}%\n", v.name, T,
                   dh, ref * 1e3, jit * 1e3, ref / jit, sdpa_ms, sdpa_ratio, flops / jit / 1e9, 100 * jit_fwd / jit);
      }
    }
  }
  return 0;
}
