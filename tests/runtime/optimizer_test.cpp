// The pieces of a training step that must not read the GPU back every step:
// gradient clipping (against LibTorch's own clip_grad_norm_) and the losses
// held until a read.
#include <gtest/gtest.h>

#include "runtime/training/optimizer.h"
#include "runtime/training/pending_losses.h"
#include "runtime_test_util.h"

using namespace sink::rt;

namespace {

std::vector<torch::Tensor> parameters_with_gradients(double scale, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> ps;
  for (auto shape : {std::vector<int64_t>{7, 5}, {11}, {3, 4, 2}}) {
    auto p = torch::randn(shape, torch::kDouble).requires_grad_();
    p.mutable_grad() = torch::randn(shape, torch::kDouble) * scale;
    ps.push_back(p);
  }
  auto without_gradient = torch::randn({4}, torch::kDouble).requires_grad_();
  ps.push_back(without_gradient);
  return ps;
}

}  // namespace

TEST(Optimizer, ClippingMatchesLibTorch) {
  // Above the bound (scaled down) and below it (left as it is).
  for (double scale : {10.0, 0.01}) {
    auto ours = parameters_with_gradients(scale, 7), theirs = parameters_with_gradients(scale, 7);
    clip_gradient_norm(ours, 1.5);
    torch::nn::utils::clip_grad_norm_(theirs, 1.5);
    double norm = 0;
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_TRUE(torch::allclose(ours[k].grad(), theirs[k].grad(), 1e-12, 1e-14))
          << "parameter " << k << " scale " << scale;
      norm += ours[k].grad().pow(2).sum().item<double>();
    }
    if (scale > 1)
      EXPECT_NEAR(std::sqrt(norm), 1.5, 1e-5);
    else
      EXPECT_LT(std::sqrt(norm), 1.0);
    EXPECT_FALSE(ours[3].grad().defined());
  }
}

TEST(Optimizer, PendingLossesSumInStepOrderAndFindTheFirstNonFinite) {
  PendingLosses pending;
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(pending.read().count, 0);
  for (int64_t step = 40; step < 44; ++step) pending.add(step, torch::tensor(0.25f * static_cast<float>(step - 39)));
  auto r = pending.read();
  EXPECT_EQ(r.count, 4);
  EXPECT_DOUBLE_EQ(r.sum, 0.25 + 0.5 + 0.75 + 1.0);
  EXPECT_DOUBLE_EQ(r.last, 1.0);
  EXPECT_FALSE(r.first_non_finite);
  EXPECT_TRUE(pending.empty());

  pending.add(44, torch::tensor(2.0f));
  pending.add(45, torch::tensor(std::numeric_limits<float>::infinity()));
  pending.add(46, torch::tensor(NAN));
  r = pending.read();
  ASSERT_TRUE(r.first_non_finite);
  EXPECT_EQ(*r.first_non_finite, 45);
  EXPECT_EQ(r.count, 1);
  EXPECT_DOUBLE_EQ(r.sum, 2.0);
}

// The multi-tensor path (_foreach_norm, and _foreach_mul_ where LibTorch has it) against the per-parameter
// one it replaced, in float as training runs it: one norm per gradient, their norm, one scale for all.
TEST(Optimizer, ClippingAllGradientsAtOnceMatchesThePerParameterPath) {
  for (double scale : {10.0, 0.01}) {
    torch::manual_seed(11);
    std::vector<torch::Tensor> ours, reference;
    for (auto shape : {std::vector<int64_t>{64, 48}, {48}, {3, 16, 8}, {1}}) {
      auto g = torch::randn(shape) * scale;
      for (auto* list : {&ours, &reference}) {
        auto p = torch::zeros(shape).requires_grad_();
        p.mutable_grad() = g.clone();
        list->push_back(p);
      }
    }
    clip_gradient_norm(ours, 1.5);
    std::vector<torch::Tensor> norms;
    for (const auto& p : reference) norms.push_back(p.grad().norm());
    const auto factor = (1.5 / (torch::stack(norms).norm() + 1e-6)).clamp_max(1.0);
    for (auto& p : reference) p.mutable_grad().mul_(factor);
    for (size_t k = 0; k < ours.size(); ++k)
      EXPECT_TRUE(torch::allclose(ours[k].grad(), reference[k].grad(), 1e-6, 1e-8))
          << "parameter " << k << " scale " << scale << ": "
          << (ours[k].grad() - reference[k].grad()).abs().max().item<double>();
  }
}

namespace {

// Two groups as make_optimizer builds them (decayed and not), with a parameter that never gets a gradient.
struct AdamWCase {
  std::vector<torch::Tensor> params;
  std::vector<torch::optim::OptimizerParamGroup> groups() const {
    auto options = [](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> g;
    g.emplace_back(std::vector<torch::Tensor>{params[0], params[1], params[4]}, options(0.1));
    g.emplace_back(std::vector<torch::Tensor>{params[2], params[3]}, options(0.0));
    return g;
  }
  static AdamWCase make() {
    torch::manual_seed(5);
    AdamWCase c;
    for (auto shape : {std::vector<int64_t>{16, 8}, {8}, {4, 4, 2}, {3}, {5}})
      c.params.push_back(torch::randn(shape).requires_grad_());
    return c;
  }
  AdamWCase copy() const {
    AdamWCase c;
    for (const auto& p : params) c.params.push_back(p.detach().clone().requires_grad_());
    return c;
  }
  void set_gradients(uint64_t seed) {
    torch::manual_seed(seed);
    for (size_t k = 0; k + 1 < params.size(); ++k) params[k].mutable_grad() = torch::randn(params[k].sizes());
  }
};

void expect_same_parameters(const AdamWCase& ours, const AdamWCase& theirs, const std::string& when) {
  for (size_t k = 0; k < ours.params.size(); ++k)
    EXPECT_TRUE(torch::allclose(ours.params[k], theirs.params[k], 1e-5, 1e-6))
        << when << ", parameter " << k << ": largest difference "
        << (ours.params[k] - theirs.params[k]).abs().max().item<double>();
}

}  // namespace

// The multi-tensor AdamW (and the fused one where LibTorch has it) against LibTorch's own AdamW: the same
// weights after several steps with a changing learning rate, and after a checkpoint of its state is loaded
// into a fresh optimizer (the state is LibTorch's, so checkpoints stay as they were).
TEST(Optimizer, MultiTensorAdamWMatchesLibTorchsAdamW) {
  std::vector<MultiTensorAdamW::Kernel> kernels = {MultiTensorAdamW::Kernel::foreach_};
  if (MultiTensorAdamW::best_kernel() == MultiTensorAdamW::Kernel::fused)
    kernels.push_back(MultiTensorAdamW::Kernel::fused);
  for (auto kernel : kernels) {
    SCOPED_TRACE(kernel == MultiTensorAdamW::Kernel::fused ? "fused" : "foreach");
    AdamWCase theirs = AdamWCase::make(), ours = theirs.copy();
    torch::optim::AdamW reference(theirs.groups(), torch::optim::AdamWOptions(1e-2));
    auto optimizer = std::make_unique<MultiTensorAdamW>(ours.groups(), torch::optim::AdamWOptions(1e-2), kernel);
    const AdamWCase start = theirs.copy();
    int64_t step = 0;
    auto train = [&](int steps) {
      for (int k = 0; k < steps; ++k, ++step) {
        const double lr = 1e-2 * (1.0 + 0.5 * std::sin(static_cast<double>(step)));
        set_learning_rate(reference, lr);
        set_learning_rate(*optimizer, lr);
        theirs.set_gradients(100 + step);
        ours.set_gradients(100 + step);
        reference.step();
        optimizer->step();
      }
    };
    train(5);
    expect_same_parameters(ours, theirs, "after 5 steps");
    EXPECT_FALSE(torch::allclose(ours.params[0], start.params[0])) << "the parameters did not move";
    EXPECT_TRUE(torch::equal(ours.params[4], start.params[4])) << "a parameter without a gradient moved";

    std::stringstream saved;
    torch::save(*optimizer, saved);
    optimizer = std::make_unique<MultiTensorAdamW>(ours.groups(), torch::optim::AdamWOptions(1e-2), kernel);
    torch::load(*optimizer, saved);
    train(3);
    expect_same_parameters(ours, theirs, "3 steps after a checkpoint");
  }
}

// The captured step's update (the rate and the step counts read on the device, the counts advanced there) against
// the fused step() it stands for: the same weights, bit for bit, over steps of a changing rate, and after a
// checkpoint, whose host counts a fresh optimizer's device counts start from. The rate's tensor holds a double, as
// the captured step's does on the CPU.
TEST(Optimizer, TheDeviceSideUpdateIsTheFusedStep) {
  if (MultiTensorAdamW::best_kernel() != MultiTensorAdamW::Kernel::fused)
    GTEST_SKIP() << "this LibTorch has no fused AdamW (PyTorch 2.4 or later), which the device-side update needs";
  AdamWCase theirs = AdamWCase::make(), ours = theirs.copy();
  const AdamWCase start = theirs.copy();
  MultiTensorAdamW reference(theirs.groups(), torch::optim::AdamWOptions(1e-2), MultiTensorAdamW::Kernel::fused);
  auto optimizer = std::make_unique<MultiTensorAdamW>(ours.groups(), torch::optim::AdamWOptions(1e-2));
  ASSERT_EQ(optimizer->device_update_unsupported(), "");
  const torch::Tensor lr = torch::zeros({}, torch::kDouble);
  int64_t step = 0;
  auto train = [&](int steps) {
    for (int k = 0; k < steps; ++k, ++step) {
      const double rate = 1e-2 * (1.0 + 0.5 * std::sin(static_cast<double>(step)));
      set_learning_rate(reference, rate);
      lr.fill_(rate);
      theirs.set_gradients(100 + step);
      ours.set_gradients(100 + step);
      reference.step();
      optimizer->update_on_device(lr);
      optimizer->count_update_on_host();
    }
  };
  auto expect_equal = [&](const std::string& when) {
    for (size_t k = 0; k < ours.params.size(); ++k)
      EXPECT_TRUE(torch::equal(ours.params[k], theirs.params[k]))
          << when << ", parameter " << k << ": largest difference "
          << (ours.params[k] - theirs.params[k]).abs().max().item<double>();
  };
  train(5);
  expect_equal("after 5 steps");
  EXPECT_FALSE(torch::equal(ours.params[0], start.params[0])) << "the parameters did not move";
  EXPECT_TRUE(torch::equal(ours.params[4], start.params[4])) << "a parameter without a gradient moved";

  std::stringstream saved;
  torch::save(*optimizer, saved);
  optimizer = std::make_unique<MultiTensorAdamW>(ours.groups(), torch::optim::AdamWOptions(1e-2));
  torch::load(*optimizer, saved);
  train(3);
  expect_equal("3 steps after a checkpoint");
}

// What make_optimizer gives the training loop.
TEST(Optimizer, TrainingUsesTheMultiTensorAdamW) {
  const sink::RunConfig cfg = sinktest::config_of("experiment x extends micro {}");
  Transformer model(cfg.model, torch::kCPU);
  EXPECT_NE(dynamic_cast<MultiTensorAdamW*>(make_optimizer(model, cfg.train).get()), nullptr);
}
