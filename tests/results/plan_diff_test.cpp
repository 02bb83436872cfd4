#include <gtest/gtest.h>

#include "results/plan_diff.h"
#include "results/run_data.h"
#include "synthetic_runs.h"

using namespace sink;
using namespace sink::results;
using sink::testing::compile_plans;
using sink::testing::plan_named;

TEST(PlanDiff, OneFieldDiffersShowsExactlyThatField) {
  auto plans = compile_plans(R"(
    experiment a extends micro {}
    experiment b extends micro { optim.weight_decay = 0.5 }
  )");
  auto changes = diff_plans(plan_named(plans, "a"), plan_named(plans, "b"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].path, "optim.weight_decay");
  EXPECT_EQ(changes[0].b, "0.5");
  EXPECT_EQ(render_changes(changes), "  optim.weight_decay: " + changes[0].a + " -> 0.5\n");
}

TEST(PlanDiff, ValuesAreWrittenInTheLanguagesSyntax) {
  auto plans = compile_plans(R"(
    experiment softmax extends micro {}
    experiment sigmoid extends micro { attention { score = sigmoid(qk)  normalize = none } }
  )");
  auto text = render_changes(diff_plans(plan_named(plans, "softmax"), plan_named(plans, "sigmoid")), "");
  EXPECT_EQ(text, "attention.normalize: sum -> none\nattention.score: exp(qk) -> sigmoid(qk)\n");
}

TEST(PlanDiff, CallsAndListsDiffAsWholeValues) {
  auto plans = compile_plans(R"(
    experiment a extends micro {}
    experiment b extends micro { model.pe = alibi  measure.positions = [1, 2] }
  )");
  auto changes = diff_plans(plan_named(plans, "a"), plan_named(plans, "b"));
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].path, "measure.positions");
  EXPECT_EQ(changes[0].b, "[1, 2]");
  EXPECT_EQ(changes[1].path, "model.pe");
  EXPECT_EQ(changes[1].a, "rope(theta = 10000.0)");
  EXPECT_EQ(changes[1].b, "alibi");
}

TEST(PlanDiff, TheNameIsNotAField) {
  auto plans = compile_plans("experiment a extends micro {}\nexperiment b extends micro {}\n");
  EXPECT_TRUE(diff_plans(plans[0], plans[1]).empty());
}

TEST(PlanDiff, SeedsOfOneRunDifferOnlyBySeed) {
  auto plans = compile_plans("experiment a extends micro { train.seeds = 3 }\n");
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[1].name, "a.seed=1");
  EXPECT_TRUE(same_but_seed(plans[0], plans[2]));
  auto changes = diff_plans(plans[0], plans[2]);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].path, "train.seed");
  EXPECT_EQ(seed_base("a.seed=12"), "a");
  EXPECT_EQ(seed_base("wd.weight_decay=0.1"), "wd.weight_decay=0.1");
  EXPECT_EQ(seed_suffix("a.seed=12").value_or(-1), 12);
}

TEST(PlanDiff, RunPatternsMatchNamesAndSeedBases) {
  // A name answers for itself and its seeds.
  EXPECT_TRUE(run_answers_to("a", "a"));
  EXPECT_TRUE(run_answers_to("a.seed=2", "a"));
  EXPECT_FALSE(run_answers_to("ab", "a"));
  // fnmatch's *, ? and [...], on the name or on the seed base.
  EXPECT_TRUE(run_answers_to("wd.weight_decay=0.1", "wd.*"));
  EXPECT_TRUE(run_answers_to("wd.weight_decay=0.1.seed=1", "wd.weight_decay=0.?"));
  EXPECT_TRUE(run_answers_to("op_sigmoid", "op_[sx]*"));
  EXPECT_FALSE(run_answers_to("op_softmax", "op_[x]*"));
  EXPECT_FALSE(run_answers_to("wd.weight_decay=0.1", "wd"));
  // A name that holds a pattern's characters is still named exactly.
  EXPECT_TRUE(run_answers_to("pos.measure.positions=[1, 2]", "pos.measure.positions=[1, 2]"));
  EXPECT_FALSE(run_answers_to("pos.measure.positions=[1, 2]", "pos.measure.positions=[3]"));
}
