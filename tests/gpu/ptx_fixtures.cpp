// Cases for the GPU check of the NVPTX forward kernel (check_ptx.py): for
// each paper variant, the kernel's IR for nvptx64 and one batch of inputs in
// the kernel's layout, with the LibTorch reference path's output in double as
// the oracle. Written here, where LLVM 19 and LibTorch are; run there.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kernels/emit_llvm.h"
#include "runtime/attention/attention.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;
namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_tensor(const fs::path& path, const torch::Tensor& t, torch::ScalarType dtype) {
  auto c = t.detach().to(dtype).contiguous();
  write_bytes(path, c.data_ptr(), c.numel() * c.element_size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: ptx_fixtures OUTDIR\n";
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  nlohmann::json manifest = nlohmann::json::array();
  int n = 0;
  std::vector<Variant> variants = paper_variants();
  for (const auto& v : beyond_the_paper_variants()) variants.push_back(v);
  for (const auto& v : variants) {
    // One thread per (batch x head) slice; per-head g, k* and v*.
    const int64_t B = 22, H = 3, T = v.T, D = v.D, Tp = T + kernels::kKeyBlock;
    torch::manual_seed(7 + n);
    // Rounded to float first: the oracle sees exactly the GPU's inputs.
    auto input = [](std::vector<int64_t> shape, double scale) {
      return (torch::randn(shape, torch::kDouble) * scale).to(torch::kFloat).to(torch::kDouble);
    };
    auto q = input({B, H, T, D}, v.q_scale), k = input({B, H, T, D}, v.q_scale), values = input({B, H, T, D}, 1);
    auto g = input({H, T}, 0.5), k_star = input({H, D}, 1), sink = input({H}, 1);
    auto v_star = v.learned_v ? input({H, D}, 1) : torch::zeros({H, D}, torch::kDouble);

    AttentionInputs ref_in{q, k, values, {}, {}, {}, {}};
    if (v.sink_logit) ref_in.sink_logit = sink;
    if (v.position_bias) {
      auto i = torch::arange(T).view({T, 1}), j = torch::arange(T).view({1, T});
      ref_in.bias = g.index({torch::indexing::Slice(), (i - j).abs()}).unsqueeze(0);
    }
    if (v.key_bias) ref_in.k_star = k_star, ref_in.v_star = v_star;
    auto expected = reference_attention(config_of(v), ref_in, false).out;

    auto kt = torch::zeros({B, H, D, Tp}, torch::kDouble);
    kt.narrow(3, 0, T).copy_(k.transpose(2, 3));

    const std::string id = fmt::format("case{:02d}", n++);
    const fs::path cdir = dir / id;
    fs::create_directories(cdir);
    std::ofstream(cdir / "forward.ll") << kernels::emit_llvm(spec_of(v), kernels::Target::NVPTX);
    write_tensor(cdir / "q.f32", q, torch::kFloat);
    write_tensor(cdir / "kt.f32", kt, torch::kFloat);
    write_tensor(cdir / "v.f32", values, torch::kFloat);
    write_tensor(cdir / "g.f32", g, torch::kFloat);
    write_tensor(cdir / "kstar.f32", k_star, torch::kFloat);
    write_tensor(cdir / "vstar.f32", v_star, torch::kFloat);
    write_tensor(cdir / "sink.f32", sink, torch::kFloat);
    write_tensor(cdir / "expected.f64", expected, torch::kDouble);
    manifest.push_back({{"id", id},
                        {"name", v.name},
                        {"T", T},
                        {"Tp", Tp},
                        {"D", D},
                        {"slices", B * H},
                        {"heads", H},
                        {"position_bias", v.position_bias},
                        {"key_bias", v.key_bias}});
  }
  std::ofstream(dir / "manifest.json") << manifest.dump(1) << "\n";
  std::cout << n << " cases in " << dir.string() << "\n";
  return 0;
}
