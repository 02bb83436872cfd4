// The step's operations that sinklab writes in fewer passes than their plain form, each against that form, forward
// + backward, in the same process: the median of interleaved rounds, as a ratio (< 1: sinklab's form is faster).
//   RoPE: apply_rope (x cos + swap(x) sin, runtime/training/step_operations.h) against each pair's rotation stacked
//     ((a cos - b sin, a sin + b cos): seven operations), on q's transposed view as attention passes it;
//   the projections: q, k and v as one product with the weights stacked (what a GPU runs) against three;
//   the CPU's fused operations (runtime/training/cpu_step_operations.h) against LibTorch's: the residual add +
//     RMSNorm, SwiGLU's activation with its product, and q into head-major rows with RoPE (apply_rope on the
//     transposed view, then the copy the attention makes of it).
// Shapes: tiny_text's (16 x 128 tokens, d 128, 4 heads) and paper_60m's for one sequence (2048 tokens, d 768,
// 8 heads), float: the CPU's evidence; a GPU's is in the step's profile tables.
//
//   build/bench/step_ops_speed [threads=1] [rounds=9]
#include <ATen/Parallel.h>
#include <cstdlib>
#include <fmt/format.h>
#include <torch/torch.h>

#include "bench/interleaved_rounds.h"
#include "runtime/training/cpu_step_operations.h"
#include "runtime/training/step_operations.h"

using namespace sink::rt;

namespace {

struct Shape {
  const char* name;
  int64_t B, T, d, heads;
};

torch::Tensor rotated_pairs(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto pairs = x.unflatten(-1, {x.size(-1) / 2, 2});
  auto a = pairs.select(-1, 0), b = pairs.select(-1, 1);
  return torch::stack({a * cos - b * sin, a * sin + b * cos}, -1).flatten(-2);
}

void row(const char* what, const Shape& s, std::pair<double, double> plain_and_ours) {
  const auto [plain, ours] = plain_and_ours;
  fmt::print("{:<12} {:<30} {:>10.3f} {:>10.3f} {:>7.2f}\n", what, s.name, 1e3 * plain, 1e3 * ours, ours / plain);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 9;
  at::set_num_threads(threads);
  torch::manual_seed(0);
  fmt::print("forward + backward, float, {} thread{}, median of {} interleaved rounds\n", threads,
             threads == 1 ? "" : "s", rounds);
  fmt::print("{:<12} {:<30} {:>10} {:>10} {:>7}\n", "operation", "shape", "plain ms", "ours ms", "ratio");
  for (const Shape& s :
       {Shape{"tiny_text (16 x 128, d 128)", 16, 128, 128, 4}, Shape{"paper_60m (1 x 2048, d 768)", 1, 2048, 768, 8}}) {
    const int64_t dh = s.d / s.heads;
    auto angles = torch::arange(s.T).unsqueeze(1) * torch::pow(10000.0, -torch::arange(0, dh, 2) / double(dh));
    const auto cos = torch::cos(angles), sin = torch::sin(angles);
    const auto cos_table = torch::stack({cos, cos}, -1).flatten(-2),
               sin_table = torch::stack({-sin, sin}, -1).flatten(-2);
    auto x = torch::randn({s.B, s.T, s.heads, dh}).requires_grad_();
    const auto upstream = torch::randn({s.B, s.heads, s.T, dh});
    auto rope = [&](bool ours) {
      return [&, ours] {
        const auto q = x.transpose(1, 2);
        (ours ? apply_rope(q, cos_table, sin_table) : rotated_pairs(q, cos, sin)).backward(upstream);
        x.mutable_grad().reset();
      };
    };
    row("RoPE", s, sink::bench::interleaved_medians(rope(false), rope(true), rounds));

    auto input = torch::randn({s.B, s.T, s.d}).requires_grad_();
    std::vector<torch::Tensor> weights;
    for (int k = 0; k < 3; ++k) weights.push_back((torch::randn({s.d, s.d}) * 0.02).requires_grad_());
    auto projections = [&](bool stacked) {
      return [&, stacked] {
        auto loss = torch::zeros({});
        for (const auto& p : project(input, weights, stacked)) loss = loss + p.sum();
        loss.backward();
        input.mutable_grad().reset();
        for (auto& w : weights) w.mutable_grad().reset();
      };
    };
    row("q, k, v", s, sink::bench::interleaved_medians(projections(false), projections(true), rounds));

    const CpuStepOperations cpu;
    const auto library = library_operations();
    auto stream = torch::randn({s.B, s.T, s.d}).requires_grad_(), branch = torch::randn({s.B, s.T, s.d});
    auto gain = (torch::rand({s.d}) + 0.5).requires_grad_();
    branch.requires_grad_();
    const auto d_stream = torch::randn({s.B, s.T, s.d}), d_normed = torch::randn({s.B, s.T, s.d});
    auto residual_norm = [&](const StepOperations& ops) {
      return [&] {
        auto [sum, normed] = ops.residual_norm(stream, branch, gain, torch::Tensor(), 1e-5);
        torch::autograd::backward({sum, normed}, {d_stream, d_normed});
        for (auto* t : {&stream, &branch, &gain}) t->mutable_grad().reset();
      };
    };
    row("add + RMS", s, sink::bench::interleaved_medians(residual_norm(*library), residual_norm(cpu), rounds));

    auto gate = torch::randn({s.B, s.T, 2 * s.d}).requires_grad_(), up = torch::randn({s.B, s.T, 2 * s.d});
    up.requires_grad_();
    const auto d_hidden = torch::randn({s.B, s.T, 2 * s.d});
    auto swiglu = [&](bool fused) {
      return [&, fused] {
        (fused ? CpuStepOperations::swiglu(gate, up) : torch::silu(gate) * up).backward(d_hidden);
        gate.mutable_grad().reset(), up.mutable_grad().reset();
      };
    };
    row("SwiGLU", s, sink::bench::interleaved_medians(swiglu(false), swiglu(true), rounds));

    auto projected = torch::randn({s.B, s.T, s.d}).requires_grad_();
    auto heads = [&](bool fused) {
      return [&, fused] {
        const auto q = fused ? CpuStepOperations::rope_heads(projected, cos_table, sin_table, s.heads)
                             : apply_rope(projected.view({s.B, s.T, s.heads, dh}).transpose(1, 2), cos_table, sin_table)
                                   .contiguous();
        q.backward(upstream);
        projected.mutable_grad().reset();
      };
    };
    row("RoPE heads", s, sink::bench::interleaved_medians(heads(false), heads(true), rounds));
  }
  return 0;
}
