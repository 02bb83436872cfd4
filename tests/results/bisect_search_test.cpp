// sinkc bisect's search against oracles whose answer is known: no training,
// a function from a set of changes to a side.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "results/bisect_search.h"

using namespace sink::results;

namespace {

using Oracle = std::function<Side(const ChangeSet&)>;

bool has(const ChangeSet& c, size_t i) { return std::binary_search(c.begin(), c.end(), i); }

struct Run {
  BisectResult result;
  std::vector<std::vector<ChangeSet>> batches;
};

// Runs the search with `oracle` as the evaluator, checking on the way that no configuration is asked twice.
Run run_search(size_t n, const Oracle& oracle, size_t budget = 1000) {
  Run run;
  std::set<ChangeSet> asked;
  Evaluate evaluate = [&](const std::vector<ChangeSet>& batch) {
    run.batches.push_back(batch);
    std::vector<Trial> out;
    for (const auto& c : batch) {
      EXPECT_TRUE(asked.insert(c).second) << "asked twice";
      EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
      Trial t;
      t.side = oracle(c);
      out.push_back(t);
    }
    return out;
  };
  run.result = bisect(n, Trial{}, Trial{}, evaluate, budget);
  return run;
}

ChangeSet all_but(size_t n, const ChangeSet& taken) {
  ChangeSet out;
  for (size_t i = 0; i < n; ++i)
    if (!has(taken, i)) out.push_back(i);
  return out;
}

// What ddmin promises, checked against the oracle: the set lands where it should, and with one change fewer it
// does not.
void expect_one_minimal(size_t n, const Oracle& oracle, const MinimalSet& m, bool from_a) {
  ASSERT_TRUE(m.found);
  ASSERT_TRUE(m.one_minimal);
  auto config = [&](const ChangeSet& c) { return from_a ? c : all_but(n, c); };
  const Side wanted = from_a ? Side::B : Side::A;
  EXPECT_EQ(oracle(config(m.changes)), wanted);
  for (size_t drop = 0; drop < m.changes.size(); ++drop) {
    ChangeSet fewer = m.changes;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(drop));
    if (fewer.empty()) continue;  // the other end itself
    EXPECT_NE(oracle(config(fewer)), wanted) << "not 1-minimal: dropping change " << m.changes[drop];
  }
}

// A configuration's side from a predicate for B's side; A and B are the ends.
Oracle b_when(size_t n, std::function<bool(const ChangeSet&)> b) {
  return [n, b](const ChangeSet& c) { return c.size() == n || (!c.empty() && b(c)) ? Side::B : Side::A; };
}

}  // namespace

TEST(BisectSearch, OneCauseAmongSix) {
  const size_t n = 6;
  auto oracle = b_when(n, [](const ChangeSet& c) { return has(c, 3); });
  auto run = run_search(n, oracle);
  EXPECT_EQ(run.result.from_a.changes, ChangeSet{3});
  EXPECT_EQ(run.result.from_b.changes, ChangeSet{3});
  expect_one_minimal(n, oracle, run.result.from_a, true);
  expect_one_minimal(n, oracle, run.result.from_b, false);
  EXPECT_FALSE(run.result.no_single_change);
  EXPECT_FALSE(run.result.budget_exhausted);
  // Fewer configurations than trying each change alone from both ends (2 x 6).
  EXPECT_LT(run.result.trials.size() - 2, 2 * n);
}

TEST(BisectSearch, APairNeededTogetherIsAnInteraction) {
  const size_t n = 7;
  auto oracle = b_when(n, [](const ChangeSet& c) { return has(c, 1) && has(c, 4); });
  auto run = run_search(n, oracle);
  EXPECT_EQ(run.result.from_a.changes, (ChangeSet{1, 4}));
  expect_one_minimal(n, oracle, run.result.from_a, true);
  EXPECT_TRUE(run.result.no_single_change);
  // From B either one of the pair taken away is enough.
  ASSERT_EQ(run.result.from_b.changes.size(), 1u);
  EXPECT_TRUE(run.result.from_b.changes[0] == 1 || run.result.from_b.changes[0] == 4);
  expect_one_minimal(n, oracle, run.result.from_b, false);
}

TEST(BisectSearch, WhenOnlyEverythingTogetherDoesItTheAnswerIsEverything) {
  // No proper subset moves the metric: every change is part of the cause.
  const size_t n = 4;
  auto oracle = [](const ChangeSet& c) { return c.size() == 4 ? Side::B : c.empty() ? Side::A : Side::Between; };
  auto run = run_search(n, oracle);
  EXPECT_EQ(run.result.from_a.changes, (ChangeSet{0, 1, 2, 3}));
  EXPECT_TRUE(run.result.from_a.one_minimal);
  EXPECT_EQ(run.result.from_b.changes, (ChangeSet{0, 1, 2, 3}));
  EXPECT_TRUE(run.result.no_single_change);
}

TEST(BisectSearch, ANonMonotoneMetricStillGivesAOneMinimalSet) {
  // Change 2 moves the metric unless change 5 comes without change 7: adding changes can move it back.
  const size_t n = 8;
  auto oracle = b_when(n, [](const ChangeSet& c) { return has(c, 2) && (has(c, 7) || !has(c, 5)); });
  auto run = run_search(n, oracle);
  EXPECT_EQ(run.result.from_a.changes, ChangeSet{2});
  expect_one_minimal(n, oracle, run.result.from_a, true);
  expect_one_minimal(n, oracle, run.result.from_b, false);
}

TEST(BisectSearch, RandomOraclesAlwaysGetAOneMinimalAnswer) {
  // Random monotone and non-monotone oracles: whatever the answer, ddmin's promise holds.
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    const size_t n = 2 + rng() % 9;
    std::vector<int> weight(n);
    for (auto& w : weight) w = static_cast<int>(rng() % 7) - 2;  // negative weights: non-monotone
    const int threshold = static_cast<int>(rng() % 6) + 1;
    auto oracle = b_when(n, [&](const ChangeSet& c) {
      int sum = 0;
      for (size_t i : c) sum += weight[i];
      return sum >= threshold;
    });
    SCOPED_TRACE(::testing::Message() << "round " << round << ", " << n << " changes");
    auto run = run_search(n, oracle);
    expect_one_minimal(n, oracle, run.result.from_a, true);
    expect_one_minimal(n, oracle, run.result.from_b, false);
    for (const auto& t : run.result.trials)
      if (!t.given) EXPECT_EQ(t.side, oracle(t.applied));
  }
}

TEST(BisectSearch, ConfigurationsTheCheckerRejectsAreReportedAndNeverCountAsASide) {
  // Change 1 moves the metric, but the checker rejects any configuration with change 1 and not change 2
  // (say, a normaliser that needs a score function): the answer is the two together.
  const size_t n = 5;
  auto oracle = [](const ChangeSet& c) {
    if (c.size() == 5) return Side::B;
    if (has(c, 1) && !has(c, 2)) return Side::Rejected;
    return has(c, 1) ? Side::B : Side::A;
  };
  auto run = run_search(n, oracle);
  EXPECT_EQ(run.result.from_a.changes, (ChangeSet{1, 2}));
  EXPECT_TRUE(run.result.from_a.one_minimal);
  size_t rejected = 0;
  for (const auto& t : run.result.trials) rejected += t.side == Side::Rejected;
  EXPECT_GT(rejected, 0u);
}

TEST(BisectSearch, TheBudgetStopsTheSearchAndSaysSo) {
  const size_t n = 16;
  auto oracle = b_when(n, [](const ChangeSet& c) { return has(c, 9); });
  auto run = run_search(n, oracle, 3);
  EXPECT_TRUE(run.result.budget_exhausted);
  EXPECT_LE(run.result.trials.size(), 2u + 3u);
  EXPECT_FALSE(run.result.from_a.one_minimal);
  EXPECT_TRUE(run.result.from_a.found);  // the smallest set found so far still lands on B's side
  EXPECT_EQ(oracle(run.result.from_a.changes), Side::B);
  // With room, the same search finishes.
  EXPECT_FALSE(run_search(n, oracle).result.budget_exhausted);
}

TEST(BisectSearch, EachRoundIsAskedForAsOneBatch) {
  // A round's configurations train in parallel: the first round asks for both halves at once.
  const size_t n = 8;
  auto run = run_search(n, b_when(n, [](const ChangeSet& c) { return has(c, 6); }));
  ASSERT_FALSE(run.batches.empty());
  EXPECT_EQ(run.batches[0].size(), 2u);
  EXPECT_EQ(run.batches[0][0], (ChangeSet{0, 1, 2, 3}));
  EXPECT_EQ(run.batches[0][1], (ChangeSet{4, 5, 6, 7}));
}

TEST(BisectSearch, OneChangeNeedsNoSearch) {
  auto run = run_search(1, [](const ChangeSet& c) { return c.empty() ? Side::A : Side::B; });
  EXPECT_EQ(run.result.from_a.changes, ChangeSet{0});
  EXPECT_TRUE(run.result.from_a.one_minimal);
  EXPECT_TRUE(run.batches.empty());
}

namespace {
Aggregate seeds_of(std::vector<double> values) {
  Aggregate a;
  a.values = values;
  double sum = 0;
  for (double v : values) sum += v;
  a.mean = sum / static_cast<double>(values.size());
  double ss = 0;
  for (double v : values) ss += (v - a.mean) * (v - a.mean);
  a.std = values.size() > 1 ? std::sqrt(ss / static_cast<double>(values.size() - 1)) : NAN;
  return a;
}
}  // namespace

TEST(BisectSearch, SidesFollowTheNoiseRuleOfSinkcDiff) {
  // A: 60 and 62 (mean 61, std sqrt 2), B: 0 and 2 (mean 1, std sqrt 2).
  const Aggregate a = seeds_of({60, 62}), b = seeds_of({0, 2});
  EXPECT_TRUE(beyond_noise(a, b));
  EXPECT_EQ(side_of(seeds_of({59, 63}), a, b), Side::A);
  EXPECT_EQ(side_of(seeds_of({1, 3}), a, b), Side::B);
  // Nearer A, but within 2 x noise of B (the wide seeds): neither side.
  EXPECT_EQ(side_of(seeds_of({20, 80}), a, b), Side::Between);
  EXPECT_EQ(side_of(Aggregate{}, a, b), Side::Failed);
  // Pooled std of {60, 62} and {61, 63} is sqrt 2: a delta of 1 is within 2 x noise.
  EXPECT_FALSE(beyond_noise(a, seeds_of({61, 63})));
  // One seed on each side: no noise estimate, nothing is beyond it.
  EXPECT_FALSE(beyond_noise(seeds_of({60}), seeds_of({0})));
}
