#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/targets.h"
#include "results/metric_diff.h"
#include "synthetic_runs.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::results;
using namespace sink::testing;

namespace {

const MetricRow& row(const RunDiff& d, const std::string& id) {
  for (const auto& r : d.metrics)
    if (r.metric.id == id) return r;
  throw std::runtime_error("no metric " + id);
}

EvalLine last(double valid, double sink1, std::vector<std::vector<double>> alpha = {{0.5, 0.5}}) {
  EvalLine e;
  e.valid_loss = valid;
  e.train_loss = valid + 0.05;
  e.sink = {{1, sink1}};
  e.alpha = std::move(alpha);
  return e;
}

// A and B with three seeds each, written into `folder`; returns the first seed's directory of each.
std::pair<std::string, std::string> three_seeds_each(const std::string& folder) {
  auto plans = compile_plans(R"(
    experiment a extends micro { train.seeds = 3 }
    experiment b extends micro { optim.weight_decay = 0.5  train.seeds = 3 }
  )");
  const double a_valid[] = {2.0, 2.1, 2.2}, b_valid[] = {2.5, 2.6, 2.7};  // means 2.1, 2.6; std 0.1 each
  const double a_sink[] = {50, 52, 54}, b_sink[] = {51, 53, 55};          // means 52, 53; std 2 each
  std::string first_a, first_b;
  for (int k = 0; k < 3; ++k) {
    auto da = write_run(folder, {plan_named(plans, "a.seed=" + std::to_string(k)), "completed", "",
                                 curve(3, last(a_valid[k], a_sink[k]))});
    auto db = write_run(folder, {plan_named(plans, "b.seed=" + std::to_string(k)), "completed", "",
                                 curve(3, last(b_valid[k], b_sink[k]))});
    if (k == 0) first_a = da, first_b = db;
  }
  return {first_a, first_b};
}

std::string run_sinkc(const std::string& args) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(
      popen((std::string(sinktest::sinkc_binary()) + " " + args + " 2>/dev/null").c_str(), "r"), pclose);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  return out;
}

}  // namespace

TEST(MetricDiff, MeansStdsAndTheNoiseVerdictOverSeeds) {
  TempDir tmp("diff-seeds");
  auto [a, b] = three_seeds_each(tmp.path);
  RunGroup ga = with_seed_siblings(load_run(a));
  RunGroup gb = with_seed_siblings(load_run(b));
  ASSERT_EQ(ga.runs.size(), 3u);
  ASSERT_EQ(gb.runs.size(), 3u);
  EXPECT_EQ(ga.name, "a");
  RunDiff d = diff_runs({a, ga}, {b, gb});

  const MetricRow& valid = row(d, "valid_loss");
  EXPECT_NEAR(valid.a.mean, 2.1, 1e-12);
  EXPECT_NEAR(valid.a.std, 0.1, 1e-12);
  EXPECT_NEAR(valid.b.mean, 2.6, 1e-12);
  EXPECT_NEAR(valid.delta, 0.5, 1e-12);
  EXPECT_NEAR(valid.noise, 0.1, 1e-12);
  EXPECT_EQ(valid.verdict, "yes");  // 0.5 > 2 x 0.1

  const MetricRow& sink = row(d, "sink_1");
  EXPECT_NEAR(sink.delta, 1.0, 1e-12);
  EXPECT_NEAR(sink.noise, 2.0, 1e-12);
  EXPECT_EQ(sink.verdict, "no");  // 1 < 2 x 2
  EXPECT_EQ(format_aggregate(sink.a, 2), "52.00 ± 2.00");

  ASSERT_EQ(d.plan.size(), 1u);  // seed 0 of each: only the knob differs
  EXPECT_EQ(d.plan[0].path, "optim.weight_decay");
}

TEST(MetricDiff, OneSeedGivesNoVerdict) {
  TempDir tmp("diff-one");
  auto plans = compile_plans("experiment a extends micro {}\nexperiment b extends micro { model.biases = k }\n");
  auto a = write_run(tmp.path, {plan_named(plans, "a"), "completed", "", curve(2, last(2.0, 60))});
  auto b = write_run(tmp.path, {plan_named(plans, "b"), "completed", "", curve(2, last(2.4, 10))});
  RunDiff d = diff_runs({a, with_seed_siblings(load_run(a))}, {b, with_seed_siblings(load_run(b))});
  EXPECT_NEAR(row(d, "sink_1").delta, -50.0, 1e-12);
  EXPECT_EQ(row(d, "sink_1").verdict, "n/a (1 seed)");
  EXPECT_TRUE(std::isnan(row(d, "sink_1").noise));
}

TEST(MetricDiff, PooledStdUsesEverySeedAvailable) {
  Aggregate a, b;
  a.values = {1, 3};
  a.mean = 2, a.std = std::sqrt(2.0);
  b.values = {5};
  b.mean = 5;
  EXPECT_NEAR(pooled_std(a, b), std::sqrt(2.0),
              1e-12);  // sqrt((2 - 1) * 2 / (2 + 1 - 2)): a single B seed adds no degree of freedom
  b.values.clear();
  EXPECT_TRUE(std::isnan(pooled_std(a, b)));
}

TEST(MetricDiff, RunningAndDivergedRunsAreShownAsSuchNotAsZeros) {
  TempDir tmp("diff-status");
  auto plans = compile_plans(R"(
    experiment a extends micro {}
    experiment b extends micro { optim.lr = 10.0 }
    experiment c extends micro { optim.lr = 0.5 }
  )");
  auto a = write_run(tmp.path, {plan_named(plans, "a"), "completed", "", curve(2, last(2.0, 60))});
  auto b = write_run(tmp.path, {plan_named(plans, "b"), "diverged", "non-finite loss at step 7", {}});
  auto c = write_run(tmp.path, {plan_named(plans, "c"), "running", "", curve(1, last(2.3, 40))});

  RunDiff ab = diff_runs({a, with_seed_siblings(load_run(a))}, {b, with_seed_siblings(load_run(b))});
  EXPECT_EQ(format_aggregate(row(ab, "valid_loss").b, 4), "diverged");
  EXPECT_EQ(row(ab, "valid_loss").verdict, "n/a");
  std::string text = render_text(ab);
  EXPECT_NE(text.find("diverged: non-finite loss at step 7"), std::string::npos) << text;

  RunDiff ac = diff_runs({a, with_seed_siblings(load_run(a))}, {c, with_seed_siblings(load_run(c))});
  EXPECT_EQ(format_aggregate(row(ac, "valid_loss").b, 4), "2.3000 (step 10)");
  EXPECT_EQ(row(ac, "valid_loss").verdict, "n/a (unfinished)");
  EXPECT_NE(render_text(ac).find("running or interrupted: step 10 of 20"), std::string::npos);
}

TEST(MetricDiff, AlphaMovesLargestFirst) {
  TempDir tmp("diff-alpha");
  auto plans = compile_plans("experiment a extends micro {}\nexperiment b extends micro { model.biases = k }\n");
  auto a =
      write_run(tmp.path, {plan_named(plans, "a"), "completed", "", curve(1, last(2.0, 60, {{0.1, 0.2}, {0.3, 0.4}}))});
  auto b = write_run(tmp.path,
                     {plan_named(plans, "b"), "completed", "", curve(1, last(2.0, 60, {{0.1, 0.9}, {0.3, 0.35}}))});
  RunDiff d = diff_runs({a, with_seed_siblings(load_run(a))}, {b, with_seed_siblings(load_run(b))}, 2);
  ASSERT_EQ(d.alpha.size(), 2u);
  EXPECT_EQ(d.alpha[0].layer, 0u);
  EXPECT_EQ(d.alpha[0].head, 1u);
  EXPECT_NEAR(d.alpha[0].b - d.alpha[0].a, 0.7, 1e-12);
  EXPECT_EQ(d.alpha[1].layer, 1u);
  EXPECT_EQ(d.alpha[1].head, 1u);
}

TEST(MetricDiff, SeedsFromAnotherPlanAreNotSiblings) {
  TempDir tmp("diff-stale");
  auto plans = compile_plans("experiment a extends micro { train.seeds = 2 }\n");
  auto stale = compile_plans("experiment a extends micro { train.seeds = 2  train.steps = 40 }\n");
  auto a = write_run(tmp.path, {plans[0], "completed", "", curve(2, last(2.0, 60))});
  write_run(tmp.path, {plans[1], "completed", "", curve(2, last(2.1, 60))});
  write_run(tmp.path, {stale[1], "completed", "", curve(2, last(9.0, 60))});
  RunGroup g = with_seed_siblings(load_run(a));
  ASSERT_EQ(g.runs.size(), 2u);
  EXPECT_EQ(g.runs[1].plan.hash(), plans[1].hash());
}

// tmp/spec.sink holding `text`, and tmp/runs holding a completed run of
// `experiment a extends micro {}`; returns the options that find it.
static TargetOptions spec_with_run_of_a(const TempDir& tmp, const std::string& text, std::string* spec,
                                        std::string* run_dir) {
  *spec = tmp.path + "/spec.sink";
  std::ofstream(*spec) << text;
  TargetOptions options;
  options.out = tmp.path + "/runs";
  options.compile.stdlib_dir = std::string(sinktest::source_dir()) + "/stdlib";
  auto plans = compile_plans("experiment a extends micro {}\n");
  *run_dir = write_run(options.out, {plans[0], "completed", "", curve(2, last(2.0, 60))});
  return options;
}

TEST(MetricDiff, SpecTargetsFindTheirRunsByHashOrSayNotRunYet) {
  TempDir tmp("diff-spec");
  std::string spec, dir;
  TargetOptions options = spec_with_run_of_a(
      tmp, "experiment a extends micro {}\nexperiment b extends micro { optim.weight_decay = 0.5 }\n", &spec, &dir);

  RunGroup a = resolve_group(spec, "a", options);
  EXPECT_EQ(a.first().status, Status::Completed);
  RunGroup b = resolve_group(spec, "b", options);
  EXPECT_EQ(b.first().status, Status::NotRun);
  EXPECT_EQ(format_aggregate(aggregate(b, "valid_loss"), 4), "not run");
  EXPECT_THROW(resolve_group(spec, "", options), ResultsError);     // two runs: which one?
  EXPECT_THROW(resolve_group(spec, "zzz", options), ResultsError);  // no such run
  // Run with other options: found only with the same --set.
  options.compile.overrides = {"train.steps=40"};
  RunGroup other = resolve_group(spec, "a", options);
  EXPECT_EQ(other.first().status, Status::NotRun);
  EXPECT_NE(other.first().status_text().find("from another plan"), std::string::npos);
}

TEST(MetricDiff, ASweepPointCachedAsAnotherRunKeepsItsOwnAxisValue) {
  // wd.weight_decay=0.1 has the content of `a` (micro's default): `sinkc run`
  // links it to a's folder, whose plan.toml has no sweep point.
  TempDir tmp("diff-cached-axis");
  std::string spec, dir;
  TargetOptions options = spec_with_run_of_a(
      tmp, "experiment a extends micro {}\nsweep wd over a { optim.weight_decay in [0.1, 0.5] }\n", &spec, &dir);
  auto runs = resolve_runs({spec}, {}, options);
  ASSERT_EQ(runs.size(), 3u);
  const RunData* point = nullptr;
  for (const auto& r : runs)
    if (r.plan.name == "wd.weight_decay=0.1") point = &r;
  ASSERT_NE(point, nullptr);
  if (point->status == Status::NotRun) {  // link it as `sinkc run` would
    std::filesystem::create_directory_symlink(std::filesystem::path(dir).filename(), point->dir);
    runs = resolve_runs({spec}, {}, options);
    for (const auto& r : runs)
      if (r.plan.name == "wd.weight_decay=0.1") point = &r;
  }
  EXPECT_EQ(point->status, Status::Completed);
  ASSERT_EQ(point->plan.sweep_point.size(), 1u);
  EXPECT_EQ(point->plan.sweep_point.begin()->first, "optim.weight_decay");
}

TEST(MetricDiff, JsonAndMarkdownOutputsParse) {
  TempDir tmp("diff-formats");
  auto [a, b] = three_seeds_each(tmp.path);
  RunDiff d = diff_runs({a, with_seed_siblings(load_run(a))}, {b, with_seed_siblings(load_run(b))});

  auto j = nlohmann::json::parse(to_json(d).dump());
  EXPECT_EQ(j["plan"][0]["path"], "optim.weight_decay");
  EXPECT_EQ(j["a"]["runs"].size(), 3u);
  bool found = false;
  for (const auto& m : j["metrics"])
    if (m["id"] == "valid_loss") {
      found = true;
      EXPECT_NEAR(m["delta"].get<double>(), 0.5, 1e-12);
      EXPECT_EQ(m["beyond_noise"], true);
      EXPECT_EQ(m["a"]["n"], 3);
    }
  EXPECT_TRUE(found);

  // Markdown: the metrics table has a header, a separator and one row per
  // metric, every line with the same number of cells.
  std::string md = render_markdown(d);
  std::istringstream lines(md);
  std::string line;
  std::vector<std::string> table;
  while (std::getline(lines, line))
    if (line.rfind("| metric", 0) == 0 || (!table.empty() && line.rfind("|", 0) == 0))
      table.push_back(line);
    else if (!table.empty())
      break;
  ASSERT_EQ(table.size(), 2 + d.metrics.size()) << md;
  auto cells = [](const std::string& l) {
    size_t n = 0;
    for (size_t k = 0; k < l.size(); ++k) n += l[k] == '|' && (k == 0 || l[k - 1] != '\\');
    return n;
  };
  for (const auto& l : table) EXPECT_EQ(cells(l), 7u) << l;
  EXPECT_NE(table[1].find("---:"), std::string::npos);
}

TEST(MetricDiff, TheCommandPrintsParseableJson) {
  TempDir tmp("diff-cli");
  auto [a, b] = three_seeds_each(tmp.path);
  auto j = nlohmann::json::parse(run_sinkc("diff " + a + " " + b + " --format json"));
  EXPECT_EQ(j["b"]["name"], "b");
  EXPECT_EQ(j["noise_rule"], kNoiseRule);
  std::string text = run_sinkc("diff " + a + " " + b);
  EXPECT_NE(text.find("optim.weight_decay: 0.1 -> 0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("2.1000 ± 0.1000"), std::string::npos) << text;
}

TEST(MetricDiff, SeveralRunNamesPickThoseRunsOfASpec) {
  // `sinkc table SPEC --run a --run wd.weight_decay=0.5`: those two rows only.
  TempDir tmp("table-run-names");
  std::string spec, dir;
  TargetOptions options = spec_with_run_of_a(
      tmp, "experiment a extends micro {}\nsweep wd over a { optim.weight_decay in [0.1, 0.5, 1.0] }\n", &spec, &dir);
  auto runs = resolve_runs({spec}, {"a", "wd.weight_decay=0.5"}, options);
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(r.plan.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "wd.weight_decay=0.5"}));
  EXPECT_THROW(resolve_runs({spec}, {"a", "zzz"}, options), ResultsError);
}
