// A run's evaluation runs under the autocast its training steps run under
// (train.precision): a bf16 run's validation loss is the one a bf16 forward
// gives, not an fp32 one's.
#include <gtest/gtest.h>

#include "runtime/data/batches.h"
#include "runtime/data/corpus.h"
#include "runtime/training/evaluation.h"
#include "runtime/training/model.h"
#include "runtime/training/precision.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;

namespace {

// The mean cross-entropy of the validation rows, computed here with LibTorch's own loss, under `precision`.
double validation_loss(Transformer& model, const Batches& batches, int64_t rows, Precision precision) {
  torch::NoGradGuard no_grad;
  AutocastScope autocast(precision, torch::kCPU);
  auto [x, y] = batches.valid(rows);
  auto logits = model.forward(x).logits;
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1})).item<double>();
}

}  // namespace

TEST(Evaluation, RunsUnderTheTrainingAutocast) {
  for (const char* precision : {"fp32", "bf16"}) {
    RunConfig cfg =
        sinktest::config_of(std::string("experiment ev extends micro { train.precision = ") + precision + " }");
    ASSERT_LE(cfg.measure.sequences, 16) << "one chunk of validation rows, as the oracle computes it";
    TokenData data = load_data(cfg.data, "");
    if (cfg.model.vocab == 0) cfg.model.vocab = data.vocab;
    Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, cfg.train.seed);
    torch::manual_seed(5);
    Transformer model(cfg.model);
    const double fp32 = validation_loss(model, batches, cfg.measure.sequences, Precision::fp32);
    const double bf16 = validation_loss(model, batches, cfg.measure.sequences, Precision::bf16);
    ASSERT_GT(std::abs(fp32 - bf16), 1e-5) << "bf16 autocast changed nothing: the test could not tell them apart";
    const double measured = evaluate(model, batches, cfg)["valid_loss"].get<double>();
    EXPECT_NEAR(measured, std::string(precision) == "bf16" ? bf16 : fp32, 1e-6) << precision;
    EXPECT_TRUE(model.is_training());  // evaluate leaves the model as training found it
  }
}
