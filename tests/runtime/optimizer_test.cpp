// The pieces of a training step that must not read the GPU back every step:
// gradient clipping (against LibTorch's own clip_grad_norm_) and the losses
// held until a read.
#include <gtest/gtest.h>

#include <torch/version.h>

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

// The update a captured step replays (update() then count_update(), as runtime/training/training_step.h runs them:
// the fused kernel reading its rate from the tensor set_learning_rate fills and each group's step count from a tensor
// the update advances on the device) against the same fused kernel given the host's numbers (the rate a double, each
// step's count in a tensor made for it): the same weights, bit for bit, over steps of a changing rate set through the
// free set_learning_rate a run calls, and after a checkpoint, whose host counts a fresh optimizer's device counts start
// from. The rate's tensor holds a double on the CPU, as the captured step's does there.
TEST(Optimizer, TheDeviceSideUpdateIsTheFusedKernelWithTheHostsNumbers) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (MultiTensorAdamW::best_kernel() != MultiTensorAdamW::Kernel::fused)
    GTEST_SKIP() << "this LibTorch has no fused AdamW (PyTorch 2.4 or later), which the device-side update needs";
  AdamWCase theirs = AdamWCase::make(), ours = theirs.copy();
  const AdamWCase start = theirs.copy();
  auto optimizer = std::make_unique<MultiTensorAdamW>(ours.groups(), torch::optim::AdamWOptions(1e-2));
  ASSERT_EQ(optimizer->capture_unsupported(), "");
  // The reference: AdamWCase's two groups (weight decay 0.1, then 0), their moments and one host step count each.
  const std::vector<std::pair<std::vector<size_t>, double>> groups = {{{0, 1, 4}, 0.1}, {{2, 3}, 0.0}};
  std::vector<torch::Tensor> exp_avgs, exp_avg_sqs;
  for (const auto& p : theirs.params)
    exp_avgs.push_back(torch::zeros_like(p)), exp_avg_sqs.push_back(torch::zeros_like(p));
  std::vector<int64_t> host_steps(groups.size(), 0);
  auto reference_step = [&](double rate) {
    torch::NoGradGuard no_grad;
    for (size_t g = 0; g < groups.size(); ++g) {
      std::vector<torch::Tensor> params, grads, m, v;
      for (size_t k : groups[g].first)
        if (theirs.params[k].grad().defined())
          params.push_back(theirs.params[k]), grads.push_back(theirs.params[k].grad()), m.push_back(exp_avgs[k]),
              v.push_back(exp_avg_sqs[k]);
      const auto count = torch::full({}, static_cast<double>(++host_steps[g]), torch::kFloat);
      at::_fused_adamw_(params, grads, m, v, {}, std::vector<torch::Tensor>(params.size(), count), rate, 0.9, 0.95,
                        groups[g].second, 1e-8, /*amsgrad=*/false, /*maximize=*/false);
    }
  };
  int64_t step = 0;
  auto train = [&](int steps) {
    for (int k = 0; k < steps; ++k, ++step) {
      const double rate = 1e-2 * (1.0 + 0.5 * std::sin(static_cast<double>(step)));
      theirs.set_gradients(100 + step);
      ours.set_gradients(100 + step);
      reference_step(rate);
      set_learning_rate(*optimizer, rate);
      optimizer->update();
      optimizer->count_update();
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
#else
  GTEST_SKIP() << "this LibTorch has no fused AdamW (PyTorch 2.4 or later), which the device-side update needs";
#endif
}

// step() is the update and the count together: the same weights, bit for bit, as update() then count_update(), in
// either kernel this LibTorch has, and through a checkpoint, whose host step counts (count_update's) a fresh
// optimizer's update starts from.
TEST(Optimizer, StepIsTheUpdateThenTheCount) {
  std::vector<MultiTensorAdamW::Kernel> kernels = {MultiTensorAdamW::Kernel::foreach_};
  if (MultiTensorAdamW::best_kernel() == MultiTensorAdamW::Kernel::fused)
    kernels.push_back(MultiTensorAdamW::Kernel::fused);
  for (auto kernel : kernels) {
    SCOPED_TRACE(kernel == MultiTensorAdamW::Kernel::fused ? "fused" : "foreach");
    AdamWCase stepped = AdamWCase::make(), halves = stepped.copy();
    auto fresh = [&](const AdamWCase& c) {
      return std::make_unique<MultiTensorAdamW>(c.groups(), torch::optim::AdamWOptions(1e-2), kernel);
    };
    auto by_step = fresh(stepped), by_halves = fresh(halves);
    int step = 0;
    auto train = [&](int steps) {
      for (int k = 0; k < steps; ++k, ++step) {
        const double rate = 1e-2 / (1 + step);
        set_learning_rate(*by_step, rate);
        by_halves->set_learning_rate(rate);
        stepped.set_gradients(200 + step);
        halves.set_gradients(200 + step);
        by_step->step();
        by_halves->update();
        by_halves->count_update();
      }
    };
    train(3);
    std::stringstream saved_step, saved_halves;
    torch::save(*by_step, saved_step);
    torch::save(*by_halves, saved_halves);
    by_step = fresh(stepped), by_halves = fresh(halves);
    torch::load(*by_step, saved_step);
    torch::load(*by_halves, saved_halves);
    train(2);
    for (size_t k = 0; k < stepped.params.size(); ++k)
      EXPECT_TRUE(torch::equal(stepped.params[k], halves.params[k]))
          << "parameter " << k << ": largest difference "
          << (stepped.params[k] - halves.params[k]).abs().max().item<double>();
  }
}

// What make_optimizer gives the training loop.
TEST(Optimizer, TrainingUsesTheMultiTensorAdamW) {
  const sink::RunConfig cfg = sinktest::config_of("experiment x extends micro {}");
  Transformer model(cfg.model, torch::kCPU);
  EXPECT_NE(dynamic_cast<MultiTensorAdamW*>(make_optimizer(model, cfg.train).get()), nullptr);
}
