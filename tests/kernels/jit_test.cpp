// The generated kernels against the LibTorch reference path (the oracle):
// forward outputs and every gradient, for each attention variant of the
// paper, masks, position terms, bias columns, edge cases, and random score
// expressions drawn from the grammar's functions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "compiler/pipeline.h"
#include "kernels/llvm/emit_llvm.h"
#include "runtime/attention/attention.h"
#include "runtime/attention/jit.h"
#include "runtime/attention/jit_attention.h"
#include "runtime/data/batches.h"
#include "runtime/data/corpus.h"
#include "runtime/training/model.h"
#include "runtime/training/optimizer.h"
#include "support/remove_tree.h"
#include "tests/runtime/attention_oracle_expect.h"
#include "tests/runtime/jit_variants.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

// The CPU JIT as the oracle header's kernel under test.
void compare_jit(const Variant& v, double tol = 1e-5, torch::ScalarType dtype = torch::kFloat) {
  compare_with_reference(jit_attention, v, tol, dtype);
}

}  // namespace

TEST(Jit, PaperVariantsMatchTheReference) {
  for (const auto& v : paper_variants()) compare_jit(v);
}

TEST(Jit, EveryScoreFunctionMatchesTheReference) {
  for (const auto& v : score_function_variants()) compare_jit(v), compare_jit(v, 1e-9, torch::kDouble);
}

TEST(Jit, EveryNormalizerMatchesTheReferenceAndFiniteDifferences) {
  for (const auto& v : normalizer_variants()) {
    compare_jit(v), compare_jit(v, 1e-9, torch::kDouble);
    if (v.q_scale == 1) expect_gradients_match_finite_differences(jit_attention, v);
  }
}

TEST(Jit, DesignsBeyondThePaperMatchTheReference) {
  for (const auto& v : beyond_the_paper_variants()) compare_jit(v);
  for (const auto& v : beyond_the_paper_variants()) compare_jit(v, 1e-9, torch::kDouble);
}

TEST(Jit, DoubleKernelsMatchTheReferenceTightly) {
  // In double the kernels agree with the reference to rounding: any
  // approximation in the generated code (masks, blocks, exp) would show here.
  for (auto v : paper_variants()) {
    compare_jit(v, 1e-9, torch::kDouble);
  }
}

TEST(Jit, GradientsMatchFiniteDifferencesInDouble) {
  // An oracle independent of the reference path: central differences of
  // L = <w, attention(q, k, v, g, k*, v*)> through the double kernels.
  using Op = ExprNode::Op;
  auto sig = call("sigmoid", {var("qk")});
  std::vector<Variant> variants = {
      {.name = "softmax", .T = 11},
      {.name = "sigmoid, no norm", .score = sig, .normalize = "none"},
      {.name = "softmax p-norm 1/2", .normalize = "pnorm", .p = 0.5},
      {.name = "identity, abs-clamped", .score = var("qk"), .normalize = "abs_clamped"},
      {.name = "elu+1, normalized", .score = bin(Op::Add, call("elu", {var("qk")}), num(1))},
      {.name = "ALiBi / T5, window 3 + prefix 2", .prefix = 2, .window = 3, .position_bias = true},
      {.name = "KV biases", .key_bias = true, .learned_v = true},
      {.name = "K biases, sigmoid", .score = sig, .normalize = "none", .key_bias = true, .learned_v = true},
      {.name = "softmax p-norm 1/4, KV biases, window 3",
       .normalize = "pnorm",
       .p = 0.25,
       .window = 3,
       .key_bias = true,
       .learned_v = true},
      {.name = "softplus(qk + tanh(i/10))",
       .score = call("softplus", {bin(Op::Add, var("qk"), call("tanh", {bin(Op::Div, var("i"), num(10))}))})},
      {.name = "softpick, KV biases, window 4",
       .normalize = "softpick",
       .window = 4,
       .key_bias = true,
       .learned_v = true},
      {.name = "softpick, ALiBi, prefix 3", .normalize = "softpick", .prefix = 3, .position_bias = true},
      {.name = "sink logit, KV biases, ALiBi",
       .position_bias = true,
       .key_bias = true,
       .learned_v = true,
       .sink_logit = true},
      {.name = "sink logit, window 2", .window = 2, .sink_logit = true},
  };
  for (const auto& v : variants) expect_gradients_match_finite_differences(jit_attention, v);
}

TEST(Jit, RandomScoreExpressions) {
  for (const auto& v : random_score_variants()) compare_jit(v, 2e-5);
}

TEST(Jit, KernelsAreCompiledOncePerVariant) {
  // A constant of this process's own, so that no disk cache holds the kernel yet.
  const double c = 1.5 + double(getpid() % 100000) * 1e-7 + double(time(nullptr) % 1000) * 1e-4;
  Variant v{.name = "cache probe",
            .score = call("sigmoid", {bin(ExprNode::Op::Mul, var("qk"), num(c))}),
            .normalize = "none"};
  const int start = Jit::shared().compiled();
  compare_jit(v);
  const int after_first = Jit::shared().compiled();
  EXPECT_GT(after_first, start);
  compare_jit(v);
  EXPECT_EQ(Jit::shared().compiled(), after_first);
}

TEST(Jit, DiskCacheSparesTheSecondProcessACompile) {
  Variant v{.name = "disk cache", .score = call("sigmoid", {var("qk")}), .normalize = "none", .T = 5, .D = 4};
  const std::string ir = kernels::emit_llvm(spec_of(v));
  const std::string dir = testing::TempDir() + "/sinklab-kernel-cache-test";
  sink::remove_tree(dir);
  using Forward = void (*)(const float*, const float*, const float*, const float*, const float*, const float*,
                           const float*, float*, float*, int64_t, int64_t);
  auto run = [&](Jit& jit) {
    auto fwd = reinterpret_cast<Forward>(jit.lookup("test-kernel", ir, "sink_forward"));
    torch::manual_seed(1);
    auto q = torch::randn({5, 4}), k = torch::randn({5, 4}), vv = torch::randn({5, 4});
    auto o = torch::empty({5, 4}), stats = torch::empty({2, 5 + kernels::kKeyBlock});
    auto kt = torch::zeros({4, 5 + kernels::kKeyBlock});  // k transposed and padded, as the kernels read it
    kt.narrow(1, 0, 5).copy_(k.t());
    fwd(q.data_ptr<float>(), kt.data_ptr<float>(), vv.data_ptr<float>(), nullptr, nullptr, nullptr, nullptr,
        o.data_ptr<float>(), stats.data_ptr<float>(), 5, kt.size(1));
    auto ref = reference_attention(
                   config_of(v), {q.view({1, 1, 5, 4}), k.view({1, 1, 5, 4}), vv.view({1, 1, 5, 4}), {}, {}, {}}, false)
                   .out.view({5, 4});
    EXPECT_LT(rel_error(o, ref), 1e-5);
  };
  {
    Jit first(dir);
    run(first);
    EXPECT_EQ(first.compiled(), 1);
  }
  Jit second(dir);  // a new JIT, as in a second process: the object comes from disk
  run(second);
  EXPECT_EQ(second.compiled(), 0);
}

TEST(Jit, ProbeGivesTheReferenceAttention) {
  for (bool key_bias : {false, true}) {
    for (std::string norm : {"sum", "none"}) {
      Variant v{.name = "probe",
                .score = norm == "sum" ? call("exp", {var("qk")}) : call("sigmoid", {var("qk")}),
                .normalize = norm,
                .key_bias = key_bias};
      torch::manual_seed(3);
      const int64_t B = 1, H = 2, T = 6, D = 8;
      auto q = torch::randn({B, H, T, D}), k = torch::randn({B, H, T, D}), vv = torch::randn({B, H, T, D});
      auto ks = torch::randn({H, D}), vs = torch::zeros({H, D});
      AttentionInputs ref_in{q, k, vv, {}, {}, {}};
      if (key_bias) ref_in.k_star = ks, ref_in.v_star = vs;
      auto ref = reference_attention(config_of(v), ref_in, true).probe;
      auto probe = jit_probe(spec_of(v), config_of(v),
                             {q, k, vv, {}, key_bias ? ks : torch::Tensor(), key_bias ? vs : torch::Tensor()});
      EXPECT_LT(rel_error(probe.attention, ref), 1e-5) << norm << " key_bias " << key_bias;
    }
  }
}

TEST(Jit, TheCompiledKernelsAreVectorized) {
  // The object code the JIT made for this CPU: the forward's inner products
  // are packed FMAs on 256/512-bit registers and the exp of a key block is
  // inline (libm's expf only for the once-per-block rescale of each row).
  const std::string objdump = "/usr/lib/llvm-19/bin/llvm-objdump";
  if (!std::filesystem::exists(objdump)) GTEST_SKIP() << "llvm-objdump-19 not installed";
#if !defined(__x86_64__)
  GTEST_SKIP() << "the check reads x86 assembly";
#endif
  Variant v{.name = "softmax", .D = 32};
  const std::string dir = testing::TempDir() + "/sinklab-vector-check";
  sink::remove_tree(dir);
  {
    Jit jit(dir);
    ASSERT_NE(jit.lookup("vector-check", kernels::emit_llvm(spec_of(v)), "sink_forward"), nullptr);
  }
  std::string object;  // <key>-<cpu>.o
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".o") object = e.path().string();
  ASSERT_FALSE(object.empty());
  const std::string listing = testing::TempDir() + "/sinklab-vector-check.txt";
  ASSERT_EQ(std::system((objdump + " -dr --no-show-raw-insn " + object + " > " + listing).c_str()), 0);
  std::ifstream in(listing);
  std::string line, function;
  int packed_fma = 0, expf_calls = 0;
  while (std::getline(in, line)) {
    if (line.find(">:") != std::string::npos) function = line;
    if (function.find("sink_forward") == std::string::npos) continue;
    if (line.find("vfmadd") != std::string::npos && line.find("ps") != std::string::npos &&
        (line.find("%ymm") != std::string::npos || line.find("%zmm") != std::string::npos))
      ++packed_fma;
    if (line.find("R_X86_64") != std::string::npos && line.find("expf") != std::string::npos) ++expf_calls;
  }
  EXPECT_GE(packed_fma, 32) << "the block's dot products should be d_head packed FMAs";
  EXPECT_LT(expf_calls, kernels::kKeyBlock) << "expf per key, not per block";
}

TEST(Jit, TrainingMatchesTheReferenceBackend) {
  // 50 steps of a micro model: the same loss curve with either backend.
  auto losses = [](const std::string& backend) {
    sink::Compilation c({std::string(sinktest::source_dir()) + "/stdlib", {}, ""});
    c.add_text(std::string(sinktest::source_dir()) + "/t.sink",
               "experiment a extends micro { attention.backend = " + backend + "  model.vocab = 17 }");
    c.run();
    EXPECT_FALSE(c.diagnostics().has_errors()) << c.diagnostics().render();
    auto cfg = read_config(c.plans().at(0));
    torch::manual_seed(0);
    Transformer model(cfg.model);
    auto opt = make_optimizer(model, cfg.train);
    auto data = load_data(cfg.data, testing::TempDir());
    Batches batches(data, cfg.data, cfg.train.context, cfg.train.batch, 0);
    std::vector<double> out;
    for (int step = 0; step < 50; ++step) {
      set_learning_rate(*opt, learning_rate(cfg.train, step));
      auto [x, y] = batches.train(step);
      auto logits = model.forward(x).logits;
      auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
      opt->zero_grad();
      loss.backward();
      opt->step();
      out.push_back(loss.item<double>());
    }
    return out;
  };
  auto jit = losses("jit"), reference = losses("reference");
  ASSERT_EQ(jit.size(), reference.size());
  for (size_t k = 0; k < jit.size(); ++k) EXPECT_NEAR(jit[k], reference[k], 1e-4) << "step " << k;
}

// Exp scores under the p-norm on logits x_ij ~ level_j (q along e0, k at
// level_j e0): the float reference and the float kernels against a double
// oracle, shifted by the row max or not (`shift_oracle`).
static void expect_pnorm_of_exp_in_float(const std::vector<double>& levels, const std::vector<double>& ps,
                                         bool shift_oracle, double grad_tol, uint64_t seed) {
  const int64_t B = 1, H = 2, T = static_cast<int64_t>(levels.size()), D = 8;
  torch::manual_seed(seed);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto level = torch::tensor(levels, opts).view({1, 1, T, 1});
  auto e0 = torch::zeros({D}, opts);
  e0[0] = 1;
  auto q = (e0 * std::sqrt(double(D)) + 0.01 * torch::randn({B, H, T, D}, opts)).requires_grad_(true);
  auto k = (level * e0 + 0.01 * torch::randn({B, H, T, D}, opts)).requires_grad_(true);
  auto v = torch::randn({B, H, T, D}, opts).requires_grad_(true);
  auto dout = torch::randn({B, H, T, D}, opts);
  auto f = [](const torch::Tensor& t) { return t.detach().to(torch::kFloat).requires_grad_(true); };
  for (double p : ps) {
    SCOPED_TRACE("p = " + std::to_string(p));
    Variant variant{.name = "p-norm of exp", .normalize = "pnorm", .p = p, .T = T, .D = D};
    AttentionConfig oracle = config_of(variant);
    oracle.shifted_exp = shift_oracle;
    // Unshifted, the oracle takes exp(qk - 100): the same s / ||s||_p (it is scale-invariant), with logits
    // up to 160 kept below the clamp at 88 that exp has in every backend (plan/score_functions.cpp).
    if (!shift_oracle) oracle.score = call("exp", {bin(ExprNode::Op::Sub, var("qk"), num(100))});
    auto ref = reference_attention(oracle, {q, k, v, {}, {}, {}}, false).out;
    auto want = torch::autograd::grad({ref}, {q, k, v}, {dout}, true);
    auto check = [&](const std::string& path, const torch::Tensor& out, std::vector<torch::Tensor> leaves) {
      SCOPED_TRACE(path);
      ASSERT_TRUE(torch::isfinite(out).all().item<bool>());
      EXPECT_LT(rel_error(out, ref), 1e-4) << "forward";
      auto got = torch::autograd::grad({out}, leaves, {dout.to(torch::kFloat)});
      for (int n = 0; n < 3; ++n) {
        ASSERT_TRUE(torch::isfinite(got[n]).all().item<bool>()) << "input " << n;
        EXPECT_LT(grad_error(got[n], want[n]), grad_tol) << "input " << n;
      }
    };
    auto qf = f(q), kf = f(k), vf = f(v);
    check("reference in float", reference_attention(config_of(variant), {qf, kf, vf, {}, {}, {}}, false).out,
          {qf, kf, vf});
    auto qj = f(q), kj = f(k), vj = f(v);
    check("jit", jit_attention(spec_of(variant), {qj, kj, vj, {}, {}, {}}), {qj, kj, vj});
  }
}

TEST(Jit, PNormBelowOneSurvivesScoresThatUnderflow) {
  // exp(x) is 0 in float below x ~ -104 (and denormal from -87), and
  // d/ds |s|^p = p |s|^(p-1) sign(s) is then inf * 0, or overflows. Through
  // s = exp(x) the gradient's limit is 0 (dZ/dx = Z^(1-p) |s|^p), which is
  // what the double reference gives, where exp(-150) is still ~1e-65.
  // pnorm_softmax p = 1/4 diverged in training before this. Keys that
  // underflow (or are denormal) in float sit between ordinary ones, up to
  // e^20, so that |s|^(p-1) alone would overflow.
  expect_pnorm_of_exp_in_float({-150, 0.5, -95, 3, -120, -2, -150, 20, -100, 1, -130, 4}, {0.25, 0.5}, true, 1e-3, 3);
}

TEST(Jit, PNormOfExpSurvivesLogitsPastTheFloatRange) {
  // exp(x) is inf in float from x ~ 89, and inf / inf is NaN: the kernels and
  // the reference take exp(x - m) with the row max m, which s / ||s||_p does
  // not see. The oracle is the unshifted formula in double, exp(x - 100).
  // Keys within a few units of each other share the attention; those 30-60
  // below still count under p < 1 (exp(-50/4) ~ 4e-6); -150 underflows.
  // Logits of ~150 carry float's rounding (~1e-5) into every weight: 2e-2.
  expect_pnorm_of_exp_in_float({150, 152, 95, 153, 120, 148, -150, 160, 100, 151, 130, 154}, {0.25, 2.0}, false, 2e-2,
                               4);
}
