// Attention forward + backward on a GPU, in one process: the generated CUDA
// kernels against LibTorch's scaled_dot_product_attention for softmax, and
// against the same variant written as LibTorch composite ops (the reference
// backend) for the rest; bf16 at the 60M model's batch x heads. Prints ratios
// and TFLOP/s next to this GPU's bf16 matmul TFLOP/s. (bench/attention_speed
// is the CPU twin.)
//
//   build-gpu/bench/gpu_attention [repeats=10] [T,T,...=512,1024,2048]
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <functional>
#include <sstream>
#include <torch/torch.h>
#include <torch/version.h>

#include "runtime/attention/attention.h"
#include "runtime/attention/attention_backend.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

// Waits for the GPU: what a timing must include. (A read back where this
// LibTorch has no torch::cuda::synchronize.)
void wait_for_gpu(const torch::Tensor& t) {
#if TORCH_VERSION_MAJOR >= 2
  (void)t;
  torch::cuda::synchronize();
#else
  (void)t.sum().item<double>();
#endif
}

// Median seconds of `repeats` calls, after one warm-up (compilation, autotuning).
double seconds(const std::function<torch::Tensor()>& f, int repeats) {
  wait_for_gpu(f());
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    wait_for_gpu(f());
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<int64_t> lengths(const char* arg) {
  std::vector<int64_t> out;
  std::stringstream in(arg ? arg : "512,1024,2048");
  for (std::string t; std::getline(in, t, ',');) out.push_back(std::stoll(t));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    fmt::print("gpu_attention: this LibTorch sees no CUDA device; nothing to measure\n");
    return 77;
  }
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 10;
  const auto Ts = lengths(argc > 2 ? argv[2] : nullptr);
  const torch::Device dev(torch::kCUDA, 0);
  const auto bf16 = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  torch::manual_seed(0);

  auto a = torch::randn({8192, 8192}, bf16), b = torch::randn({8192, 8192}, bf16);
  const double mm_tflops = 2.0 * 8192 * 8192 * 8192 / seconds([&] { return torch::mm(a, b); }, repeats) / 1e12;
  fmt::print("LibTorch {}: bf16 matmul 8192^3 {:.0f} TFLOP/s; SDPA {}\n", TORCH_VERSION, mm_tflops,
             has_sdpa() ? "available" : "missing (LibTorch < 2)");
  fmt::print("ours/base: the baseline's time over ours (above 1: ours is faster)\n\n");
  fmt::print("{:<22} {:>5} | {:>9} {:>9} {:>9} | {:>10} {:>10}\n", "variant", "T", "ours ms", "base ms", "ours/base",
             "ours TF/s", "baseline");

  // The 60M model's attention: 8 heads; 8 sequences per micro-batch; d_head 64 as the benchmark asks.
  const int64_t B = 8, H = 8, dh = 64;
  std::vector<Variant> variants = {
      {.name = "softmax"},
      {.name = "sigmoid, no norm", .score = call("sigmoid", {var("qk")}), .normalize = "none"},
      {.name = "elu+1, normalized", .score = bin(ExprNode::Op::Add, call("elu", {var("qk")}), num(1))},
      {.name = "exp, p-norm (p 2)", .normalize = "pnorm", .p = 2},
      {.name = "softmax + learnable k*", .key_bias = true},
  };
  for (const auto& v : variants) {
    for (int64_t T : Ts) {
      Variant shaped = v;
      shaped.T = T, shaped.D = dh;
      ModelConfig model;
      model.attention = config_of(shaped);
      model.attention.backend = Backend::jit;
      model.pe = PosEmbedding::rope;
      model.biases = v.key_bias ? Biases::k : Biases::none;
      model.d_head = dh;
      auto generated = make_attention_backend(model, dev, KernelChoice::Generated);
      model.attention.backend = Backend::reference;
      auto reference = make_attention_backend(model, dev);

      auto q = torch::randn({B, H, T, dh}, bf16).requires_grad_(),
           k = torch::randn({B, H, T, dh}, bf16).requires_grad_(),
           val = torch::randn({B, H, T, dh}, bf16).requires_grad_(), dout = torch::randn({B, H, T, dh}, bf16);
      AttentionCall call{q, k, val, {}, {}, {}, {}};
      if (v.key_bias) {
        call.k_star = torch::randn({H, dh}, bf16).requires_grad_();
        call.v_star = torch::zeros({H, dh}, bf16);
      }
      auto forward_backward = [&](const std::function<torch::Tensor()>& attend) {
        return [&, attend] {
          auto out = attend();
          out.backward(dout);
          return q.grad();
        };
      };
      const double ours = seconds(forward_backward([&] { return generated->attend(call, nullptr); }), repeats);
      std::string base_name = "composite";
      double base;
      if (kernels::kernel_spec(model).plain_causal_softmax() && has_sdpa()) {
        base_name = "SDPA";
        base = seconds(forward_backward([&] { return sdpa_causal_attention(q, k, val); }), repeats);
      } else {
        base = seconds(forward_backward([&] { return reference->attend(call, nullptr); }), repeats);
      }
      // Causal: T(T+1)/2 pairs; forward 2 products, backward 4 (recomputing
      // the scores: 5 in ours), counted as 6, 2 flops per multiply-add.
      const double flops = double(B * H) * T * (T + 1) / 2 * dh * 2 * 6;
      fmt::print("{:<22} {:>5} | {:>9.3f} {:>9.3f} {:>8.2f}x | {:>10.1f} {:>10}\n", v.name, T, ours * 1e3, base * 1e3,
                 base / ours, flops / ours / 1e12, base_name);
    }
  }
  return 0;
}
