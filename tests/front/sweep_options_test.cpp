// Sweep expansion and the command-line options --base and --set.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/schema.h"
#include "spec_helpers.h"

namespace {

// fs, Options, Plan, compile_text, compile_path and the helpers.
using namespace spectest;

// ---------------------------------------------------------------------------
// (d) sweeps and seeds

TEST(Sweep, TwoAxesGiveTheGridInOrder) {
  auto plans = clean_plans(R"(
    sweep s over micro {
      optim.clip = 0.5                      // applies to every point
      optim.weight_decay in [0.5, 1.0]
      optim.lr in [0.001, 0.01, 0.1]
    })");
  ASSERT_EQ(plans.size(), 6u);
  const std::vector<std::string> names = {"s.weight_decay=0.5,lr=0.001", "s.weight_decay=0.5,lr=0.01",
                                          "s.weight_decay=0.5,lr=0.1",   "s.weight_decay=1.0,lr=0.001",
                                          "s.weight_decay=1.0,lr=0.01",  "s.weight_decay=1.0,lr=0.1"};
  const double wd[] = {0.5, 0.5, 0.5, 1.0, 1.0, 1.0};
  const double lr[] = {0.001, 0.01, 0.1, 0.001, 0.01, 0.1};
  std::set<std::string> hashes;
  for (size_t k = 0; k < plans.size(); ++k) {
    EXPECT_EQ(plans[k].name, names[k]);
    EXPECT_DOUBLE_EQ(plans[k].number("optim.weight_decay"), wd[k]);
    EXPECT_DOUBLE_EQ(plans[k].number("optim.lr"), lr[k]);
    EXPECT_DOUBLE_EQ(plans[k].number("optim.clip"), 0.5);
    ASSERT_EQ(plans[k].sweep_point.size(), 2u);
    EXPECT_EQ(plans[k].sweep_point[0].first, "optim.weight_decay");
    EXPECT_EQ(plans[k].sweep_point[1].first, "optim.lr");
    hashes.insert(plans[k].hash());
  }
  EXPECT_EQ(hashes.size(), 6u);
  // A point is the same plan as the experiment that states it.
  EXPECT_EQ(plans[4].hash(), hash_of("optim { weight_decay = 1.0  lr = 0.01  clip = 0.5 }", "micro"));
}

TEST(Sweep, ThreeAxesMultiply) {
  auto plans = clean_plans(R"(
    sweep g over micro {
      model.ffn in [relu, gelu]
      model.heads in [1, 2]
      loss.window in [4, none]
    })");
  ASSERT_EQ(plans.size(), 8u);
  EXPECT_EQ(plans.front().name, "g.ffn=relu,heads=1,window=4");
  EXPECT_EQ(plans[1].name, "g.ffn=relu,heads=1,window=none");
  EXPECT_EQ(plans.back().name, "g.ffn=gelu,heads=2,window=none");
}

TEST(Sweep, SeedsGiveOneRunPerSeed) {
  auto plans = clean_plans("experiment e extends micro { train.seeds = 3 }");
  ASSERT_EQ(plans.size(), 3u);
  std::set<std::string> hashes;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(plans[k].name, "e.seed=" + std::to_string(k));
    EXPECT_EQ(plans[k].integer("train.seed"), k);
    EXPECT_EQ(plans[k].integer("train.seeds"), 3);
    hashes.insert(plans[k].hash());
  }
  EXPECT_EQ(hashes.size(), 3u);

  auto from5 = clean_plans("experiment f extends micro { train { seed = 5  seeds = 2 } }");
  ASSERT_EQ(from5.size(), 2u);
  EXPECT_EQ(from5[0].name, "f.seed=5");
  EXPECT_EQ(from5[1].name, "f.seed=6");
  EXPECT_EQ(from5[1].integer("train.seed"), 6);
}

TEST(Sweep, SeedsMultiplyASweep) {
  auto plans = clean_plans("sweep s over micro { train.seeds = 2  optim.weight_decay in [0.0, 0.5] }");
  ASSERT_EQ(plans.size(), 4u);
  EXPECT_EQ(plans[0].name, "s.weight_decay=0.0.seed=0");
  EXPECT_EQ(plans[1].name, "s.weight_decay=0.0.seed=1");
  EXPECT_EQ(plans[3].name, "s.weight_decay=0.5.seed=1");
  std::set<std::string> hashes;
  for (const auto& p : plans) hashes.insert(p.hash());
  EXPECT_EQ(hashes.size(), 4u);
}

TEST(Sweep, OverAnExperimentKeepsItsSettings) {
  auto plans = clean_plans(R"(
    experiment kb extends micro { model.biases = k }
    sweep d over kb { model.k_dims in [1, 2] })");
  ASSERT_EQ(plans.size(), 3u);
  const Plan* one = find_plan(plans, "d.k_dims=1");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->choice("model.biases"), "k");
  EXPECT_EQ(one->integer("model.k_dims"), 1);
}

TEST(Sweep, BadAxesAreDiagnostics) {
  for (const std::string text : {
           "sweep s over micro { optim.wd in [0.1] }",                     // not a field
           "sweep s over micro { optim.lr in [0.1]  optim.lr in [0.2] }",  // twice
           "sweep s over micro { optim.lr in [] }",                        // empty
           "sweep s over micro { optim.lr in [0.1, fast] }",               // wrong type
           "sweep s over micro { model.heads in [2, 3] }",                 // 3 does not divide d = 16
           "sweep s over micro { train.steps in [10, 10] }",               // two runs with one name
       }) {
    auto c = compile_text(text);
    EXPECT_TRUE(c->diagnostics().has_errors()) << text;
    EXPECT_TRUE(c->plans().empty()) << text;
  }
}

// ---------------------------------------------------------------------------
// (e) --base and --set

TEST(SpecsOptions, BaseSwapsThePresetAndKeepsTheExperimentsOwnSettings) {
  const std::string file = sink::testing::source_dir() + "/specs/table4_attention_biases.sink";
  auto cpu = compile_path(file);
  auto paper = compile_path(file, with_base("paper_60m"));
  ASSERT_FALSE(paper->diagnostics().has_errors()) << rendered(*paper);
  const Plan* k = find_plan(paper->plans(), "bias_k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->integer("model.d"), 768);
  EXPECT_EQ(k->integer("model.heads"), 8);
  EXPECT_EQ(k->integer("model.k_dims"), 96);  // all of d_head at paper scale
  EXPECT_EQ(k->integer("train.batch"), 512);
  EXPECT_EQ(k->integer("train.steps"), 20000);
  EXPECT_EQ(k->choice("data.tokenizer"), "sentencepiece");
  EXPECT_DOUBLE_EQ(k->number("optim.lr"), 4e-4);  // the preset's: the spec does not set it
  EXPECT_EQ(k->choice("model.biases"), "k");      // the spec's own setting stays
  const Plan* cpu_k = find_plan(cpu->plans(), "bias_k");
  ASSERT_NE(cpu_k, nullptr);
  EXPECT_EQ(cpu_k->integer("model.d"), 64);
  EXPECT_EQ(cpu_k->choice("model.biases"), "k");

  // A spec's own scale-dependent values survive the swap.
  auto lr = compile_path(sink::testing::source_dir() + "/specs/table9_lr_steps.sink", with_base("paper_60m"));
  const Plan* x4 = find_plan(lr->plans(), "lr_quarter_steps_x4");
  ASSERT_NE(x4, nullptr);
  EXPECT_EQ(x4->integer("train.steps"), 8000);
  EXPECT_DOUBLE_EQ(x4->number("optim.lr"), 7.5e-4);
  EXPECT_EQ(x4->integer("model.d"), 768);

  // paper_1b for the scale-up file.
  auto big = compile_path(sink::testing::source_dir() + "/specs/fig8_scale_1b.sink", with_base("paper_1b"));
  ASSERT_FALSE(big->diagnostics().has_errors()) << rendered(*big);
  for (const auto& p : big->plans()) {
    EXPECT_EQ(p.integer("model.d"), 2048);
    EXPECT_EQ(p.integer("model.layers"), 24);
  }
  EXPECT_EQ(big->plans()[1].at("attention.score").str(), "sigmoid(qk)");
}

TEST(SpecsOptions, BaseWorksOnInlineExperimentsAndRejectsUnknownPresets) {
  auto plans =
      clean_plans("experiment a extends tiny { model.biases = k  optim.weight_decay = 0.5 }", with_base("paper_60m"));
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].integer("model.d"), 768);
  EXPECT_DOUBLE_EQ(plans[0].number("optim.weight_decay"), 0.5);
  EXPECT_EQ(plans[0].choice("model.biases"), "k");

  auto bad = compile_text("experiment a extends tiny {}", with_base("paper_6m"));
  EXPECT_TRUE(bad->diagnostics().has_errors());
  EXPECT_NE(rendered(*bad).find("paper_60m"), std::string::npos) << rendered(*bad);  // did you mean
}

TEST(SpecsOptions, SetAppliesToEveryRun) {
  auto c = compile_path(sink::testing::source_dir() + "/specs/table2_weight_decay.sink",
                        with_set({"train.steps=500", "data.amount=50M tokens"}));
  ASSERT_FALSE(c->diagnostics().has_errors()) << rendered(*c);
  ASSERT_EQ(c->plans().size(), 8u);
  for (const auto& p : c->plans()) {
    EXPECT_EQ(p.integer("train.steps"), 500) << p.name;
    EXPECT_EQ(p.integer("data.amount"), 50000000) << p.name;
  }
  EXPECT_DOUBLE_EQ(c->plans()[7].number("optim.weight_decay"), 5.0);  // the axis still varies

  // With --base as well: --set wins over both the preset and the spec.
  auto both = compile_path(sink::testing::source_dir() + "/specs/table9_lr_steps.sink",
                           with_set({"train.steps=500"}, "paper_60m"));
  ASSERT_FALSE(both->diagnostics().has_errors()) << rendered(*both);
  for (const auto& p : both->plans()) {
    EXPECT_EQ(p.integer("train.steps"), 500) << p.name;
    EXPECT_EQ(p.integer("model.d"), 768) << p.name;
  }
}

TEST(SpecsOptions, SetMistakesAreDiagnostics) {
  for (const std::string set : {
           "train.steps=abc",            // a name for an int
           "train.steps=1.5",            // not whole
           "train.steps=0",              // out of range
           "train.steps=5 tokens",       // unit on a non-count
           "optim.lr=fast",              // a name for a float
           "model.dd=3",                 // unknown field
           "model.ffn=swiglo",           // unknown choice
           "model.pe=rope(thetaa = 1)",  // unknown parameter
           "train.steps=",               // no value
       }) {
    auto c = compile_path(sink::testing::source_dir() + "/specs/table2_weight_decay.sink", with_set({set}));
    EXPECT_TRUE(c->diagnostics().has_errors()) << "--set " << set;
    EXPECT_TRUE(c->plans().empty()) << "--set " << set;
  }
  // A --set that breaks a cross-field rule in some run is caught too.
  auto c = compile_text("experiment a extends tiny {}", with_set({"model.heads=3"}));
  EXPECT_TRUE(c->diagnostics().has_errors());
  EXPECT_NE(rendered(*c).find("does not divide"), std::string::npos) << rendered(*c);
}

}  // namespace
