// What a sink costs (runtime/measurement/sink_costs.h, outliers.h): the moments against hand-computed values, the
// fake quantization against its grid by hand, and the windowed loss, the quantized loss and the outliers of an
// exported model against Hugging Face's transformers running it with an explicit 4D attention mask, numpy's fake
// quantization of its linear layers and numpy's kurtosis of its activations (tests/runtime/hf_transformers_oracle.py);
// and every design's costs through the JIT and the CUDA kernels (on the CPU's emulation) against the reference path.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <fstream>

#include "hf_python.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/interop/hf_export.h"
#include "runtime/measurement/measure.h"
#include "runtime/measurement/outliers.h"
#include "runtime/measurement/sink_costs.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "tests/kernels/cuda_emulator.h"

using namespace sink::rt;
using sinktest::TempDir;

TEST(Outliers, KurtosisOfValuesByHand) {
  Moments two_points;  // +-1: m4 = m2 = 1, so 1 - 3
  two_points.add(torch::tensor({-1.0, 1.0, -1.0, 1.0}));
  EXPECT_NEAR(two_points.excess_kurtosis(), -2.0, 1e-12);
  EXPECT_EQ(two_points.max_abs(), 1.0);
  // {0, 0, 0, 4}: mean 1, deviations -1 -1 -1 3: m2 = 12/4 = 3, m4 = (1 + 1 + 1 + 81) / 4 = 21; 21 / 9 - 3.
  Moments spike;
  spike.add(torch::tensor({0.0, 0.0, 0.0, 4.0}));
  EXPECT_NEAR(spike.excess_kurtosis(), 21.0 / 9.0 - 3.0, 1e-12);
  // The same values far from zero (a residual stream's offset): the shift keeps the sums from cancelling.
  Moments offset;
  offset.add(torch::tensor({1e6, 1e6, 1e6, 1e6 + 4}, torch::kDouble));
  EXPECT_NEAR(offset.excess_kurtosis(), 21.0 / 9.0 - 3.0, 1e-6);
  Moments flat;
  flat.add(torch::full({5}, 2.0));
  EXPECT_TRUE(std::isnan(flat.excess_kurtosis())) << "no spread, no kurtosis";
}

TEST(Outliers, ChunksGiveTheKurtosisOfAllTheirValues) {
  torch::manual_seed(3);
  auto values = torch::cat({torch::randn({500}) * 0.5 + 3, torch::randn({300}).pow(3) * 2 - 1}).to(torch::kDouble);
  Moments whole, first, second;
  whole.add(values);
  first.add(values.narrow(0, 0, 200));
  second.add(values.narrow(0, 200, 600));  // another shift: its sums re-centred when merged
  first += second;
  // The oracle: two passes over all the values.
  auto d = values - values.mean();
  const double want = ((d.pow(4).mean() / d.pow(2).mean().pow(2)) - 3).item<double>();
  EXPECT_NEAR(whole.excess_kurtosis(), want, 1e-9 * std::abs(want));
  EXPECT_NEAR(first.excess_kurtosis(), want, 1e-9 * std::abs(want));
  EXPECT_EQ(first.count(), 800);
  EXPECT_EQ(first.max_abs(), values.abs().max().item<double>());
}

TEST(SinkCosts, FakeQuantizationRoundsToThePerTensorGrid) {
  // 2 bits: levels -1, 0, 1 on scale max |v| = 1; 0.5 rounds to even (0), as round-to-nearest-even does.
  auto two = fake_quantize(torch::tensor({-1.0f, 0.26f, 0.5f, 0.51f, 1.0f}), 2);
  EXPECT_TRUE(torch::equal(two, torch::tensor({-1.0f, 0.0f, 0.0f, 1.0f, 1.0f}))) << two;
  // 3 bits: levels -3..3 on scale 2 / 3: 0.26 -> 0.39 -> 0; 0.4 -> 0.6 -> 1 -> 2/3; -2 -> -3 -> -2.
  auto three = fake_quantize(torch::tensor({-2.0f, 0.26f, 0.4f, 1.1f}), 3);
  auto want = torch::tensor({-3.0f, 0.0f, 1.0f, 2.0f}) * (2.0f / 3.0f);
  EXPECT_TRUE(torch::allclose(three, want, 0, 1e-6)) << three;
  // bf16 in, bf16 out, computed in fp32 (bf16 holds no integer past 256).
  auto b = fake_quantize(torch::tensor({-4.0f, 1.0f}).to(torch::kBFloat16), 8);
  EXPECT_EQ(b.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(b[0].item<float>(), -4.0f);
  // An all-zero tensor stays zero (no division by a zero scale).
  EXPECT_TRUE(torch::equal(fake_quantize(torch::zeros({3}), 8), torch::zeros({3})));
}

TEST(SinkCosts, LearnedPositionsSayWhyNoLongerContext) {
  auto cfg = sinktest::config_of("experiment c extends micro { model.pe = learned }");
  EXPECT_NE(longer_context_obstacle(cfg.model, 64).find("learned"), std::string::npos);
  EXPECT_EQ(longer_context_obstacle(sinktest::config_of("experiment c extends micro { }").model, 64), "");
}

// A random llama-like model exported to a Hugging Face folder; weights far from the small init so that its
// attention is not uniform and a window changes its loss.
TEST(SinkCosts, TransformersComputesTheWindowedAndQuantizedLossesAndTheOutliers) {
  HF_PYTHON_OR_SKIP(python);
  TempDir tmp("sink-costs-hf");
  auto cfg = sinktest::config_of("experiment c extends micro { model { d = 32  heads = 4  ffn_hidden = 48 } }");
  const int64_t T = 24, N = 4, window = 6;
  cfg.model.vocab = 23;
  cfg.measure.window = window;
  torch::manual_seed(11);
  Transformer model(cfg.model);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model.named_parameters()) {
      auto& p = item.value();
      if (p.dim() >= 2)
        p.normal_(0, item.key().find("embed") != std::string::npos ? 1.0 : 0.3);
      else
        p.fill_(1).add_(torch::randn_like(p) * 0.1);
    }
  }
  const std::string dir = tmp.file("hf");
  save_hf(model, T, {}, dir);
  auto ids = torch::randint(0, cfg.model.vocab, {N, T + 1}, torch::kLong);
  std::string text;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t <= T; ++t) text += std::to_string(ids[n][t].item<int64_t>()) + " ";
    text += "\n";
  }
  sinktest::write_file(tmp.file("ids.txt"), text);
  const std::string out = tmp.file("costs.json");
  ASSERT_EQ(
      sinktest::run_oracle(python, {"costs", dir, tmp.file("ids.txt"), std::to_string(window), "0,1,4", "8,4", out}),
      0);
  const auto theirs = nlohmann::json::parse(sinktest::read_file(out));

  torch::NoGradGuard no_grad;
  model.eval();
  const auto x = ids.narrow(1, 0, T), y = ids.narrow(1, 1, T);
  SinkCosts costs(cfg);
  const double full = chunked_loss(model, x, y, 0, 16);
  EXPECT_NEAR(full, theirs["full"].get<double>(), 1e-5);
  double spread = 0;
  for (int64_t keep : {0, 1, 4}) {
    const double ours = costs.windowed_loss(model, x, y, 16, keep);
    EXPECT_NEAR(ours, theirs["windowed"][std::to_string(keep)].get<double>(), 1e-5) << "keeping " << keep;
    spread = std::max(spread, std::abs(ours - full));
  }
  EXPECT_GT(spread, 1e-3) << "the window should change this model's loss, or the comparison shows nothing";
  std::printf("[ costs ] full %.5f; window %lld keeping 0, 1, 4: transformers %.5f %.5f %.5f\n", full,
              static_cast<long long>(window), theirs["windowed"]["0"].get<double>(),
              theirs["windowed"]["1"].get<double>(), theirs["windowed"]["4"].get<double>());
  for (int64_t bits : {8, 4}) {
    const double ours = quantized_loss(model, x, y, 0, 16, bits);
    EXPECT_NEAR(ours, theirs["quantized"][std::to_string(bits)].get<double>(), 1e-4) << bits << " bits";
    if (bits == 4) EXPECT_GT(std::abs(ours - full), 1e-3) << "4 bits should cost something";
  }
  // `sinkc measure DIR` on the same ids: the Hugging Face reader's own forward, masked and quantized.
  // And inputs twice as long: the same ids, two rows to a sequence, as transformers reads them.
  std::string long_text;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t <= T; ++t) long_text += std::to_string(ids[n][t].item<int64_t>()) + " ";
    if (n % 2 == 1) long_text += "\n";
  }
  sinktest::write_file(tmp.file("long.txt"), long_text);
  ASSERT_EQ(sinktest::run_oracle(
                python, {"costs", dir, tmp.file("long.txt"), std::to_string(window), "0", "8", tmp.file("long.json")}),
            0);
  const double twice_as_long = nlohmann::json::parse(sinktest::read_file(tmp.file("long.json")))["full"];
  const auto measured = sinktest::measure_json(
      {dir, "--ids", tmp.file("ids.txt"), "--T", std::to_string(T + 1), "--n", std::to_string(N), "--window",
       std::to_string(window), "--window-keeps", "0,1,4", "--quantized-bits", "8,4", "--longer-contexts", "2"},
      tmp);
  EXPECT_NEAR(measured["longer_context_loss"]["2"].get<double>(), twice_as_long, 1e-5);
  EXPECT_NEAR(measured["valid_loss"].get<double>(), theirs["full"].get<double>(), 1e-5);
  EXPECT_EQ(measured["windowed_loss"]["window"], window);
  for (const char* keep : {"0", "1", "4"})
    EXPECT_NEAR(measured["windowed_loss"]["loss"][keep].get<double>(), theirs["windowed"][keep].get<double>(), 1e-5)
        << "measure DIR keeping " << keep;
  for (const auto& [setting, bits] : {std::pair{"w8a8", "8"}, std::pair{"w4a4", "4"}})
    EXPECT_NEAR(measured["quantized_loss"][setting].get<double>(), theirs["quantized"][bits].get<double>(), 1e-4)
        << "measure DIR " << setting;
  const SinkReport r = measure_model(model, x, {1}, 0.3, false, /*outliers=*/true);
  ASSERT_EQ(r.residual.size(), theirs["residual_kurtosis"].size());
  for (size_t l = 0; l < r.residual.size(); ++l) {
    SCOPED_TRACE(fmt::format("layer {}", l));
    const double k = theirs["residual_kurtosis"][l], ka = theirs["attention_output_kurtosis"][l];
    EXPECT_NEAR(r.residual[l].excess_kurtosis(), k, 1e-4 * std::max(1.0, std::abs(k)));
    EXPECT_NEAR(r.attention_output[l].excess_kurtosis(), ka, 1e-4 * std::max(1.0, std::abs(ka)));
    EXPECT_NEAR(r.residual[l].max_abs(), theirs["residual_max"][l].get<double>(), 1e-5);
    EXPECT_NEAR(r.attention_output[l].max_abs(), theirs["attention_output_max"][l].get<double>(), 1e-5);
  }
}

// A trained softmax run whose heads park their attention on the first token (tiny at the quickstart's learning
// rate, a quarter of its batch: Sink_1 past 90 % by step 600, about a minute on one thread) loses more under a
// window that hides that token than under one that keeps it: the gap at K = 0 that K = 1 closes.
TEST(SinkCosts, ASinkModelLosesItsFirstTokenUnderAWindowAndKeepingItCloses) {
  TempDir out("sink-costs-run");
  auto plan = sinktest::plan_of(
      "experiment sink extends tiny {"
      "  optim { lr = 6e-3  schedule = constant(warmup = 100) }"
      "  train { steps = 600  batch = 64  threads = 1 }"
      "  measure { every = 600  sequences = 64  window = 8  window_keeps = [0, 1]  quantized_bits = [8] }"
      "}");
  auto r = run_plan(plan, sinktest::run_options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  const auto& m = r.summary["final"];
  const double sink = m["sink"]["1"], valid = m["valid_loss"];
  const double hidden = m["windowed_loss"]["loss"]["0"].get<double>() - valid;
  const double kept = m["windowed_loss"]["loss"]["1"].get<double>() - valid;
  std::printf("[ costs ] Sink_1 %.1f %%; window 8: loss gap %.4f without the first token, %.4f keeping it\n", sink,
              hidden, kept);
  ASSERT_GT(sink, 50.0) << "no sink formed: the test measures nothing";
  EXPECT_EQ(m["windowed_loss"]["window"], 8);
  EXPECT_GT(hidden, 0.003) << "hiding the sink token should cost the model";
  EXPECT_LT(std::abs(kept), 0.5 * hidden) << "keeping the first token should close most of the gap";
  // The other costs are in the same line.
  EXPECT_TRUE(m["quantized_loss"].contains("w8a8"));
  EXPECT_EQ(m["residual_kurtosis"].size(), 1u);
  EXPECT_EQ(m["longer_context_loss"].size(), 2u);
  // `sinkc measure RUN`: the loss on inputs 2x and 4x as long as the measured ones, RoPE reaching every position.
  const auto measured = sinktest::measure_json({r.dir, "--n", "16", "--T", "32"}, out);
  for (const char* factor : {"2", "4"})
    EXPECT_TRUE(measured["longer_context_loss"][factor].is_number()) << measured.dump(2);
}

TEST(SinkCosts, EachIsTurnedOffByItsField) {
  TempDir out("sink-costs-off");
  auto r =
      run_plan(sinktest::plan_of("experiment off extends micro { measure { windowed_loss = false  outliers = false "
                                 " quantized_bits = []  longer_contexts = [] } }"),
               sinktest::run_options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  const auto& m = r.summary["final"];
  for (const char* key : {"windowed_loss", "quantized_loss", "longer_context_loss", "residual_kurtosis",
                          "attention_output_max", "attention_output_kurtosis"})
    EXPECT_FALSE(m.contains(key)) << key;
  auto on = run_plan(sinktest::plan_of("experiment on extends micro { model.pe = learned }"),
                     sinktest::run_options(out.str()));
  ASSERT_EQ(on.status, sink::rt::RunOutcome::Completed) << on.summary.dump(2);
  for (const char* key : {"windowed_loss", "quantized_loss", "longer_context_loss", "residual_kurtosis"})
    EXPECT_TRUE(on.summary["final"].contains(key)) << key;
  // Learned positions end at the context: the longer contexts say why instead of a number.
  EXPECT_TRUE(on.summary["final"]["longer_context_loss"]["2"].is_string());
  // So does `sinkc measure RUN` past the positions the model has.
  const auto measured = sinktest::measure_json({on.dir, "--n", "4", "--T", "16", "--longer-contexts", "2"}, out);
  EXPECT_TRUE(measured["longer_context_loss"]["2"].is_string()) << measured.dump(2);
}

// Every design of beyond_the_paper and the paper's Table 6 variants, as an experiment body on `micro`.
std::vector<std::string> cost_designs() {
  return {"",  // softmax
          "attention.gate = elementwise",
          "attention.gate = headwise",
          "attention.sink_logit = learned",
          "attention.sink_logit = 0",
          "attention.normalize = softpick",
          "attention.differential = true",
          "attention { score = sigmoid(qk - log(16))  normalize = none }",
          "attention { score = relu(qk)  normalize = count }",
          "attention.score = stablemax(qk)",
          "attention { score = sigmoid(qk)  normalize = none }",
          "attention { score = sigmoid(qk)  normalize = sum }",
          "attention { score = elu(qk) + 1  normalize = none }",
          "attention { score = elu(qk) + 1  normalize = sum }",
          "attention { kernel = elu1  score = qk  normalize = sum }",
          "attention { kernel = identity  score = qk  normalize = abs_clamped }",
          "attention { kernel = mlp(hidden = 8)  score = qk  normalize = abs_clamped }"};
}

// `design`'s costs through `kernels` (a model on them, and their windowed rules) agree with the reference path's
// (LibTorch, the oracle the kernels are tested against) on the same weights and sequences: the windowed losses
// (a plain window, kept first tokens), the W8A8 loss, the loss on sequences 4x as long and the outliers.
void expect_costs_agree_with_the_reference(const std::string& design, const SinkCosts::BackendFactory& kernels,
                                           const std::string& kernels_name) {
  SCOPED_TRACE(design.empty() ? "softmax" : design);
  const int64_t T = 16, N = 3;
  auto cfg = sinktest::config_of("experiment c extends micro { " + design + " }");
  cfg.model.vocab = 17;
  cfg.measure.window = 5;
  cfg.model.attention.backend = sink::Backend::reference;
  torch::manual_seed(5);
  Transformer generated(cfg.model), ref(cfg.model);
  generated.use_attention(kernels(cfg.model));
  {
    torch::NoGradGuard no_grad;
    auto from = generated.named_parameters();
    for (auto& p : ref.named_parameters()) p.value().copy_(from[p.key()]);
  }
  auto ids = torch::randint(0, cfg.model.vocab, {N, 4 * T + 1}, torch::kLong);
  const auto x = ids.narrow(1, 0, T), y = ids.narrow(1, 1, T);
  const auto long_x = ids.narrow(1, 0, 4 * T), long_y = ids.narrow(1, 1, 4 * T);
  SinkCosts generated_costs(cfg, kernels), ref_costs(cfg);
  torch::NoGradGuard no_grad;
  generated.eval(), ref.eval();
  for (int64_t keep : {0, 1, 4})
    EXPECT_NEAR(generated_costs.windowed_loss(generated, x, y, 16, keep), ref_costs.windowed_loss(ref, x, y, 16, keep),
                1e-5)
        << "keeping " << keep;
  EXPECT_NEAR(quantized_loss(generated, x, y, 0, 16, 8), quantized_loss(ref, x, y, 0, 16, 8), 1e-4);
  EXPECT_NEAR(chunked_loss(generated, long_x, long_y, 0, 16), chunked_loss(ref, long_x, long_y, 0, 16), 1e-5);
  const SinkReport rg = measure_model(generated, x, {1}, 0.3, false, true),
                   rr = measure_model(ref, x, {1}, 0.3, false, true);
  const auto ran = generated.backend->kernels_run();
  ASSERT_FALSE(ran.empty());
  EXPECT_EQ(ran[0].rfind(kernels_name, 0), 0u) << ran[0];  // what computed the costs: these kernels
  ASSERT_EQ(rg.residual.size(), rr.residual.size());
  for (size_t l = 0; l < rg.residual.size(); ++l) {
    const double k = rr.residual[l].excess_kurtosis(), ka = rr.attention_output[l].excess_kurtosis();
    EXPECT_NEAR(rg.residual[l].excess_kurtosis(), k, 1e-4 * std::max(1.0, std::abs(k)));
    EXPECT_NEAR(rg.attention_output[l].excess_kurtosis(), ka, 1e-4 * std::max(1.0, std::abs(ka)));
  }
}

TEST(SinkCosts, TheJitAndTheReferenceAgreeOnEveryDesign) {
  for (const auto& design : cost_designs())
    expect_costs_agree_with_the_reference(
        design,
        [](const sink::ModelConfig& m) {
          sink::ModelConfig jit = m;
          jit.attention.backend = sink::Backend::jit;
          return make_attention_backend(jit, torch::kCPU);
        },
        "jit");
}

// The CUDA kernels, on the CPU's emulation of a GPU (float storage: the scalar kernels), likewise.
TEST(SinkCosts, TheCudaKernelsOnTheEmulationAndTheReferenceAgreeOnEveryDesign) {
  if (!sink::testing_variants::have_host_compiler())
    GTEST_SKIP() << "no host C++ compiler (c++) to run the CUDA kernels on the CPU";
  for (const auto& design : cost_designs())
    expect_costs_agree_with_the_reference(
        design,
        [](const sink::ModelConfig& m) {
          sink::ModelConfig cuda = m;
          cuda.attention.backend = sink::Backend::jit;
          return make_cuda_backend(cuda, sink::testing_variants::cpu_emulated_modules());
        },
        "cuda");
}
