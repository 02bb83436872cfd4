// The LM head and its loss a chunk of rows at a time (runtime/training/lm_head_loss.h) against the plain
// computation that holds every logit (LibTorch's linear and cross_entropy under autograd), against finite
// differences, and as the training step and the evaluation use it.
#include <gtest/gtest.h>

#include "runtime/training/lm_head_loss.h"
#include "runtime/training/model.h"
#include "runtime/training/precision.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;

namespace {

// The oracle: all the logits at once, LibTorch's own cross-entropy per row, weighted.
torch::Tensor plain_loss(const torch::Tensor& features, const torch::Tensor& weight, const torch::Tensor& targets,
                         const torch::Tensor& row_weights) {
  auto logits = torch::linear(features, weight);
  auto per_row =
      torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  return (per_row * row_weights.reshape({-1}).to(per_row.dtype())).sum();
}

struct Gradients {
  torch::Tensor loss, features, weight;
};

template <typename Loss>
Gradients gradients_of(Loss loss_of, const torch::Tensor& features, const torch::Tensor& weight) {
  auto f = features.detach().clone().requires_grad_(true), w = weight.detach().clone().requires_grad_(true);
  auto loss = loss_of(f, w);
  loss.backward();
  return {loss.detach(), f.grad(), w.grad()};
}

double max_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace

TEST(LinearCrossEntropy, ChunkedGivesThePlainLossAndGradients) {
  torch::manual_seed(3);
  // 2 x 5 rows in chunks of 3, 3, 3 and 1: a ragged last chunk. Prefix weights: some rows carry no loss.
  auto features = torch::randn({2, 5, 8}, torch::kDouble);
  auto weight = torch::randn({11, 8}, torch::kDouble);
  auto targets = torch::randint(0, 11, {2, 5}, torch::kLong);
  for (int64_t prefix : {0, 3}) {
    auto row_weights = mean_loss_weights(targets, prefix).to(torch::kDouble);
    for (int64_t chunk_rows : {1, 3, 10, 64}) {
      auto chunked =
          gradients_of([&](auto f, auto w) { return linear_cross_entropy(f, w, targets, row_weights, chunk_rows); },
                       features, weight);
      auto plain =
          gradients_of([&](auto f, auto w) { return plain_loss(f, w, targets, row_weights); }, features, weight);
      EXPECT_LT(max_difference(chunked.loss, plain.loss), 1e-12) << "prefix " << prefix << " chunk " << chunk_rows;
      EXPECT_LT(max_difference(chunked.features, plain.features), 1e-12) << "chunk " << chunk_rows;
      EXPECT_LT(max_difference(chunked.weight, plain.weight), 1e-12) << "chunk " << chunk_rows;
    }
  }
}

TEST(LinearCrossEntropy, GradientsMatchFiniteDifferences) {
  torch::manual_seed(4);
  auto features = torch::randn({7, 4}, torch::kDouble);
  auto weight = torch::randn({6, 4}, torch::kDouble);
  auto targets = torch::randint(0, 6, {7}, torch::kLong);
  auto row_weights = torch::rand({7}, torch::kDouble);
  auto loss_at = [&](const torch::Tensor& f, const torch::Tensor& w) {
    torch::NoGradGuard no_grad;
    return linear_cross_entropy(f, w, targets, row_weights, 2).item<double>();
  };
  auto g = gradients_of([&](auto f, auto w) { return linear_cross_entropy(f, w, targets, row_weights, 2); }, features,
                        weight);
  const double h = 1e-6;
  for (auto [tensor, grad] : {std::pair{&features, g.features}, std::pair{&weight, g.weight}}) {
    for (int64_t k = 0; k < tensor->numel(); ++k) {
      auto up = tensor->clone(), down = tensor->clone();
      up.view({-1})[k] += h;
      down.view({-1})[k] -= h;
      const bool is_features = tensor == &features;
      const double numeric = ((is_features ? loss_at(up, weight) : loss_at(features, up)) -
                              (is_features ? loss_at(down, weight) : loss_at(features, down))) /
                             (2 * h);
      EXPECT_NEAR(grad.view({-1})[k].item<double>(), numeric, 1e-7) << (is_features ? "features " : "weight ") << k;
    }
  }
}

TEST(LinearCrossEntropy, UnderBf16AutocastComputesAsLinearThenCrossEntropyDo) {
  torch::manual_seed(5);
  auto features = torch::randn({24, 16});
  auto weight = torch::randn({40, 16}) * 0.5;
  auto targets = torch::randint(0, 40, {24}, torch::kLong);
  auto row_weights = torch::full({24}, 1.0 / 24);
  const auto fp32_loss = plain_loss(features, weight, targets, row_weights);
  AutocastScope autocast(Precision::bf16, torch::kCPU);
  auto chunked = gradients_of([&](auto f, auto w) { return linear_cross_entropy(f, w, targets, row_weights, 5); },
                              features, weight);
  auto plain = gradients_of([&](auto f, auto w) { return plain_loss(f, w, targets, row_weights); }, features, weight);
  ASSERT_GT(max_difference(plain.loss, fp32_loss), 1e-4) << "autocast changed nothing: the test could not tell";
  EXPECT_LT(max_difference(chunked.loss, plain.loss), 1e-5);
  EXPECT_EQ(chunked.features.scalar_type(), torch::kFloat);
  EXPECT_EQ(chunked.weight.scalar_type(), torch::kFloat);
  // Both round the logits' gradient to bf16 for the products, in a different order of operations.
  EXPECT_LT(max_difference(chunked.features, plain.features), 2e-2 * plain.features.abs().max().item<double>());
  EXPECT_LT(max_difference(chunked.weight, plain.weight), 2e-2 * plain.weight.abs().max().item<double>());
}

TEST(LinearCrossEntropy, WithoutGradModeKeepsNoGraph) {
  auto features = torch::randn({6, 4}).requires_grad_(true);
  auto weight = torch::randn({9, 4}).requires_grad_(true);
  torch::NoGradGuard no_grad;
  auto loss = linear_cross_entropy(features, weight, torch::randint(0, 9, {6}, torch::kLong), torch::ones({6}));
  EXPECT_FALSE(loss.requires_grad());
}

TEST(LinearCrossEntropy, ChunkRowsKeepAChunksLogitsNear64MB) {
  EXPECT_EQ(cross_entropy_chunk_rows(50432), (int64_t(1) << 24) / 50432);
  EXPECT_EQ(cross_entropy_chunk_rows(1LL << 30), 1);  // at least one row
  EXPECT_GE(cross_entropy_chunk_rows(256) * 256, int64_t(1) << 23);
}

TEST(LinearCrossEntropy, MeanLossWeightsLeaveThePrefixOut) {
  auto targets = torch::zeros({2, 6}, torch::kLong);
  auto plain = mean_loss_weights(targets, 0);
  EXPECT_NEAR(plain.sum().item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(torch::allclose(plain, torch::full({2, 6}, 1.0 / 12)));
  // prefix 4: targets 0, 1, 2 (tokens 2, 3, 4) are inside it.
  auto prefixed = mean_loss_weights(targets, 4);
  EXPECT_EQ(prefixed[1][2].item<float>(), 0.0f);
  EXPECT_NEAR(prefixed[1][3].item<float>(), 1.0 / 6, 1e-7);
  EXPECT_NEAR(prefixed.sum().item<double>(), 1.0, 1e-6);
}

// The loss the step trains on: the model's features through the chunked head, against all its logits
// through LibTorch's cross-entropy, with tied and untied embeddings and a prefix LM; every parameter's gradient.
TEST(LinearCrossEntropy, TheModelsLossAndGradientsAreThePlainOnes) {
  for (const char* model : {"tie_embeddings = false", "tie_embeddings = true"}) {
    for (int64_t prefix : {0, 4}) {
      RunConfig cfg = sinktest::config_of(std::string("experiment l extends micro { model { ") + model + " } }");
      cfg.model.vocab = 300;  // several chunks of rows below
      torch::manual_seed(6);
      Transformer m(cfg.model);
      auto x = torch::randint(0, 300, {3, 16}, torch::kLong), y = torch::randint(0, 300, {3, 16}, torch::kLong);
      auto plain = plain_loss(m.forward(x).features, m.head_weight(), y, mean_loss_weights(y, prefix));
      plain.backward();
      std::map<std::string, torch::Tensor> expected;
      for (auto& p : m.named_parameters())
        expected[p.key()] = p.value().grad().clone(), p.value().mutable_grad().zero_();
      auto loss = linear_cross_entropy(m.features(x), m.head_weight(), y, mean_loss_weights(y, prefix), 7);
      loss.backward();
      EXPECT_NEAR(loss.item<double>(), plain.item<double>(), 1e-5) << model << " prefix " << prefix;
      EXPECT_NEAR(lm_loss(m, x, y, prefix).item<double>(), plain.item<double>(), 1e-5);
      for (auto& p : m.named_parameters()) {
        const double scale = expected[p.key()].abs().max().item<double>();
        EXPECT_LT(max_difference(p.value().grad(), expected[p.key()]), 1e-5 * scale + 1e-8)
            << model << " prefix " << prefix << " " << p.key();
      }
    }
  }
}
