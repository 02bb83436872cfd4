// The LM head and its loss (runtime/training/lm_head_loss.h: a chunk of rows at a time, gradients formed in the
// forward) against eager LibTorch's `linear` then `cross_entropy`, forward + backward, in the same process: the
// median of interleaved rounds, as a ratio (> 1: the chunked head is slower). Shapes: tiny_text's step (16 x 128
// byte tokens, d 128) and a paper-vocabulary step (50,432 tokens, d 256, 1,024 rows), float.
//
//   build/bench/lm_head_speed [threads=1] [rounds=7]
#include <ATen/Parallel.h>
#include <cstdlib>
#include <fmt/format.h>
#include <torch/torch.h>

#include "bench/interleaved_rounds.h"
#include "runtime/training/lm_head_loss.h"

using namespace sink::rt;

namespace {

struct Shape {
  const char* name;
  int64_t rows, d, vocab;
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 7;
  at::set_num_threads(threads);
  torch::manual_seed(0);
  fmt::print("LM head + loss, forward + backward, float, {} thread{}, median of {} interleaved rounds\n", threads,
             threads == 1 ? "" : "s", rounds);
  fmt::print("{:<28} {:>12} {:>12} {:>8}\n", "shape", "eager ms", "chunked ms", "ratio");
  for (const Shape& s : {Shape{"tiny_text (2048 x 128, 258)", 2048, 128, 258},
                         Shape{"paper vocab (1024 x 256, 50432)", 1024, 256, 50432}}) {
    auto features = torch::randn({s.rows, s.d}).requires_grad_(true);
    auto weight = (torch::randn({s.vocab, s.d}) * 0.02).requires_grad_(true);
    const auto targets = torch::randint(s.vocab, {s.rows}, torch::kLong);
    const auto row_weights = torch::full({s.rows}, 1.0 / s.rows);
    auto eager = [&] {
      auto loss = torch::nn::functional::cross_entropy(torch::nn::functional::linear(features, weight), targets);
      loss.backward();
      features.mutable_grad().reset(), weight.mutable_grad().reset();
    };
    auto chunked = [&] {
      linear_cross_entropy(features, weight, targets, row_weights).backward();
      features.mutable_grad().reset(), weight.mutable_grad().reset();
    };
    const auto [e, c] = sink::bench::interleaved_medians(eager, chunked, rounds);
    fmt::print("{:<28} {:>12.2f} {:>12.2f} {:>8.2f}\n", s.name, 1e3 * e, 1e3 * c, c / e);
  }
  return 0;
}
