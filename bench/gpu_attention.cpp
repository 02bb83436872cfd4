// Attention forward + backward on a GPU: the generated CUDA kernels (tensor cores in bf16) for every variant
// of the table below, at each d_head and sequence length asked for, beside LibTorch's
// scaled_dot_product_attention for plain causal softmax, in one process; bf16, batch 8 x 8 heads (the 60M
// model's micro-batch). Prints a table and, with --json, the cases for bench/gpu_attention_baselines.py,
// which times what a researcher would run instead (FlexAttention, torch.compile of the composite) in the
// node's Python and prints both side by side. bench/attention_speed is the CPU twin.
//
// TFLOP/s are counted two ways. Ours: the causal pairs T(T+1)/2 times d_head times 2 flops per
// multiply-add times 6 products (2 forward, 4 backward). FlashAttention's: 4 T^2 d_head for the forward,
// 3.5 times that for forward + backward, halved when causal.
//
//   build-gpu/bench/gpu_attention [--repeats 10] [--T 512,2048,8192] [--D 64,96,128] [--variants 'softmax|sink
//   logit|...']
//                                 [--json FILE]
#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <torch/torch.h>
#include <torch/version.h>

#include "bench/gpu_attention_cases.h"
#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/attention/cuda_attention.h"
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

}  // namespace

int main(int argc, char** argv) {
  int repeats = 10;
  std::vector<std::string> Ts = {"512", "1024", "2048"}, Ds = {"64"}, wanted;
  std::string json_path;
  for (int a = 1; a + 1 < argc; a += 2) {
    const std::string flag = argv[a], value = argv[a + 1];
    if (flag == "--repeats")
      repeats = std::stoi(value);
    else if (flag == "--T")
      Ts = bench::split_list(value);
    else if (flag == "--D")
      Ds = bench::split_list(value);
    else if (flag == "--variants")
      wanted = bench::split_list(value, '|');  // variant names hold commas
    else if (flag == "--json")
      json_path = value;
    else {
      fmt::print(stderr, "gpu_attention: unknown option {}\n", flag);
      return 2;
    }
  }
  if (!torch::cuda::is_available()) {
    fmt::print("gpu_attention: this LibTorch sees no CUDA device; nothing to measure\n");
    return 77;
  }
  const torch::Device dev(torch::kCUDA, 0);
  const auto bf16 = torch::TensorOptions().device(dev).dtype(torch::kBFloat16);
  torch::manual_seed(0);
  auto a = torch::randn({8192, 8192}, bf16), b = torch::randn({8192, 8192}, bf16);
  const double mm_tflops = 2.0 * 8192 * 8192 * 8192 / seconds([&] { return torch::mm(a, b); }, repeats) / 1e12;
  fmt::print("LibTorch {} on {}: bf16 matmul 8192^3 {:.0f} TFLOP/s; SDPA {}\n", TORCH_VERSION,
             torch::cuda::device_count() ? "cuda:0" : "?", mm_tflops, has_sdpa() ? "available" : "missing");
  fmt::print("{:<28} {:>4} {:>5} | {:>9} {:>8} {:>8} | {:>9} {:>8} | {}\n", "variant", "D", "T", "ours ms", "TF/s",
             "FA TF/s", "SDPA ms", "TF/s", "kernels");
  nlohmann::json out = {{"matmul_tflops", mm_tflops}, {"torch", TORCH_VERSION}, {"cases", nlohmann::json::array()}};
  const int64_t B = 8, H = 8;
  // Every variant at the first (d_head, T) before the next: a baseline sweep cut short by its budget still
  // covers every variant at the first shape.
  for (const auto& d_text : Ds)
    for (const auto& t_text : Ts)
      for (const bench::Case& c : bench::gpu_attention_cases()) {
        if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.variant.name) == wanted.end()) continue;
        Variant v = c.variant;
        v.T = std::stoll(t_text), v.D = std::stoll(d_text);
        const int64_t T = v.T, D = v.D;
        const auto spec = spec_of(v);
        const bool tensor_cores = kernels::cuda_tiles(spec, kernels::CudaStorage::BFloat16).tensor_cores;
        auto q = torch::randn({B, H, T, D}, bf16).requires_grad_(),
             k = torch::randn({B, H, T, D}, bf16).requires_grad_(),
             val = torch::randn({B, H, T, D}, bf16).requires_grad_(), dout = torch::randn({B, H, T, D}, bf16);
        const auto real = torch::TensorOptions().device(dev).dtype(torch::kFloat);
        AttentionCall call{q, k, val, {}, {}, {}, {}};
        // ALiBi's table is a constant in training (no gradient): timed as trained.
        if (v.position_bias) call.g = torch::randn({H, T}, real) * 0.1;
        if (v.key_bias)
          call.k_star = torch::randn({H, D}, real).requires_grad_(), call.v_star = torch::zeros({H, D}, real);
        if (v.sink_logit) call.sink_logit = torch::zeros({H}, real).requires_grad_();
        auto forward_backward = [&](const std::function<torch::Tensor()>& attend) {
          return [&, attend] {
            auto o = attend();
            o.backward(dout);
            return q.grad();
          };
        };
        double ours = -1, sdpa = -1;
        std::string error, kernels = tensor_cores ? "tensor cores" : "scalar";
        try {
          ours = seconds(forward_backward([&] { return cuda_attention(spec, call, cuda_modules()); }), repeats);
          kernels = cuda_launcher(spec, q, cuda_modules())->kernels_in_use();
          if (spec.plain_causal_softmax() && has_sdpa())
            sdpa = seconds(forward_backward([&] { return sdpa_causal_attention(q, k, val); }), repeats);
        } catch (const std::exception& e) {
          error = e.what();
        }
        const double ours_flops = double(B * H) * T * (T + 1) / 2 * D * 2 * 6;
        const double fa_flops = double(B * H) * 4.0 * T * T * D * 3.5 / 2;
        auto tf = [](double flops, double s) { return s > 0 ? flops / s / 1e12 : 0.0; };
        fmt::print("{:<28} {:>4} {:>5} | {:>9.3f} {:>8.1f} {:>8.1f} | {:>9} {:>8} | {}{}\n", v.name, D, T, ours * 1e3,
                   tf(ours_flops, ours), tf(fa_flops, ours), sdpa > 0 ? fmt::format("{:.3f}", sdpa * 1e3) : "-",
                   sdpa > 0 ? fmt::format("{:.1f}", tf(ours_flops, sdpa)) : "-", kernels,
                   error.empty() ? "" : " ERROR " + error);
        out["cases"].push_back({{"variant", v.name},
                                {"score", c.score},
                                {"torch_score", c.torch_score},
                                {"normalize", v.normalize},
                                {"p", v.p},
                                {"window", v.window},
                                {"prefix", v.prefix},
                                {"alibi", v.position_bias},
                                {"k_star", v.key_bias},
                                {"sink_logit", v.sink_logit},
                                {"B", B},
                                {"H", H},
                                {"T", T},
                                {"D", D},
                                {"ours_ms", ours * 1e3},
                                {"sdpa_ms", sdpa > 0 ? nlohmann::json(sdpa * 1e3) : nlohmann::json()},
                                {"ours_flops", ours_flops},
                                {"fa_flops", fa_flops},
                                {"tensor_cores", tensor_cores},
                                {"kernels", kernels},
                                {"error", error}});
      }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
  return 0;
}
