#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "results/report_html.h"
#include "results/svg.h"
#include "synthetic_runs.h"

using namespace sink;
using namespace sink::results;
using namespace sink::testing;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = 0; (pos = text.find(what, pos)) != std::string::npos; pos += what.size()) ++n;
  return n;
}

}  // namespace

TEST(Report, OneSvgPerChartAndNothingFromTheNetwork) {
  TempDir tmp("report");
  // A sweep with two seeds per point, plus a run with a k* column (Sink_*),
  // one still running, one that diverged.
  auto sweep = compile_plans("sweep wd over micro { optim.weight_decay in [0.0, 1.0]  train.seeds = 2 }\n");
  for (const auto& p : sweep) {
    EvalLine e;
    e.valid_loss = 2 + p.number("optim.weight_decay");
    e.alpha = {{0.9, 0.1}, {0.4, 0.2}};
    e.massive = {3.0, 40.0};
    write_run(tmp.path, {p, "completed", "", curve(4, e)});
  }
  auto others = compile_plans(R"(
    experiment kbias extends micro { model.biases = k }
    experiment slow extends micro {}
    experiment boom extends micro { optim.lr = 10.0 }
  )");
  EvalLine star;
  star.sink_star = 80;
  star.alpha_star = {{0.9, 0.8}};
  star.sink_logit = 60;  // (a sink logit beside k*: the chart appears where the metric does)
  write_run(tmp.path, {plan_named(others, "kbias"), "completed", "", curve(3, star)});
  write_run(tmp.path, {plan_named(others, "slow"), "running", "", curve(1, {})});
  write_run(tmp.path, {plan_named(others, "boom"), "diverged", "non-finite loss at step 2", {}});

  auto runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs.size(), 7u);
  // The sweep first: its first run is the plan diff's reference.
  std::stable_partition(runs.begin(), runs.end(), [](const RunData& r) { return !r.plan.sweep_point.empty(); });
  std::string html = render_report(runs, {});

  // Charts: per group (the sweep; the three experiments), train loss, valid
  // loss, Sink_1 (+ Sink_* for the experiments), one massive-activation
  // chart; a heatmap per run with alpha_1 (the diverged one has none), and
  // one of alpha_* for the run with a k* column, and Sink_logit for the
  // experiments (one run measured it).
  const size_t expected = (3 + 1) + (4 + 1 + 1) + 6 + 1;
  EXPECT_EQ(count(html, "<figure class=\"chart\""), expected);
  EXPECT_EQ(count(html, "<svg "), expected);
  EXPECT_EQ(count(html, "</svg>"), expected);
  EXPECT_EQ(count(html, "data-chart=\"alpha:"), 6u);
  EXPECT_EQ(count(html, "data-chart=\"alpha_star:"), 1u);
  EXPECT_EQ(count(html, "data-chart=\"sink_star:"), 1u);
  EXPECT_EQ(count(html, "data-chart=\"sink_logit:"), 1u);
  EXPECT_EQ(count(html, "data-chart=\"q_k1_cos:"), 0u);  // no run measured the geometry

  EXPECT_EQ(html.find("http"), std::string::npos);     // self-contained
  EXPECT_EQ(html.find("<script"), std::string::npos);  // no script at all
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_NE(html.find("boom (diverged)"), std::string::npos);  // legend says so
  EXPECT_NE(html.find("No alpha_1 yet: boom (diverged)"), std::string::npos);
  EXPECT_NE(html.find("<td>optim.weight_decay</td><td>0.0</td><td>1.0</td>"), std::string::npos);  // plan diff
  EXPECT_NE(html.find("Sink_1 (%)"), std::string::npos);
  EXPECT_NE(html.find("tokens seen"), std::string::npos);
}

// The curves run over tokens seen, each run's steps times its own tokens per step, so runs of different batch
// sizes meet where they have seen the same data; a group where a run does not record the count stays on steps.
TEST(Report, CurvesAreOverTokensSeen) {
  TempDir tmp("report-tokens");
  const auto plans = compile_plans(
      "experiment narrow extends micro {}\nexperiment wide extends micro { train.batch = 16 }\n"
      "experiment old extends micro { optim.lr = 2e-3 }");
  EvalLine wide;
  wide.tokens_per_step = 2'000'000;
  SyntheticRun narrow{plan_named(plans, "narrow"), "completed", "", curve(2, {})};
  narrow.losses = {{5, 3.0}, {20, 2.0}};
  write_run(tmp.path, narrow);
  write_run(tmp.path, {plan_named(plans, "wide"), "completed", "", curve(2, wide)});
  std::string html = render_report(load_run_folder(tmp.path), {});
  auto chart = [&](const std::string& id) {
    const size_t at = html.find("data-chart=\"" + id + ":");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</figure>", at) - at);
  };
  const std::string valid = chart("valid_loss"), train = chart("train_loss");
  ASSERT_FALSE(valid.empty()) << html;
  EXPECT_NE(valid.find("tokens seen</text>"), std::string::npos);           // the axis
  EXPECT_NE(valid.find("tokens seen = 1280,"), std::string::npos);          // narrow at step 20: 64 a step
  EXPECT_NE(valid.find("tokens seen = 40M,"), std::string::npos);           // wide at step 20
  EXPECT_NE(valid.find("tokens seen = 20M,"), std::string::npos);           // wide at step 10
  EXPECT_NE(train.find("tokens seen = 320,"), std::string::npos) << train;  // a logged loss at step 5
  EXPECT_NE(valid.find(">40M</text>"), std::string::npos) << valid;         // a tick in millions

  EvalLine unknown;
  unknown.tokens_per_step = 0;
  write_run(tmp.path, {plan_named(plans, "old"), "completed", "", curve(2, unknown)});
  html = render_report(load_run_folder(tmp.path), {});
  EXPECT_NE(chart("valid_loss").find("training step = 20,"), std::string::npos) << chart("valid_loss");
  EXPECT_EQ(html.find("tokens seen ="), std::string::npos);
}

// The train-loss chart follows the loss as finely as a run logged it (losses.jsonl, every train.log_every steps),
// not only the evaluations' means; a run from before the file keeps its means. A repeated step (a resumed run's)
// counts once, at its later value, and a torn last line is skipped.
TEST(Report, TrainLossFollowsTheLoggedLosses) {
  TempDir tmp("report-losses");
  const auto plans =
      compile_plans("experiment fine extends micro {}\nexperiment coarse extends micro { optim.lr = 2e-3 }");
  SyntheticRun fine{plan_named(plans, "fine"), "completed", "", curve(2, {})};
  for (int64_t step = 2; step <= 20; step += 2) fine.losses.emplace_back(step, 5.0 - 0.1 * step);
  fine.losses.emplace_back(20, 1.25);  // step 20 again: the later line counts
  const std::string fine_dir = write_run(tmp.path, fine);
  std::ofstream(fine_dir + "/losses.jsonl", std::ios::app) << "{\"step\": 22, \"lo";  // torn by a crash
  write_run(tmp.path, {plan_named(plans, "coarse"), "completed", "", curve(2, {})});

  const RunData loaded = load_run(fine_dir);
  ASSERT_EQ(loaded.losses.size(), 10u);
  EXPECT_EQ(loaded.losses.front(), (std::pair<int64_t, double>{2, 4.8}));
  EXPECT_EQ(loaded.losses.back(), (std::pair<int64_t, double>{20, 1.25}));

  const std::string html = render_report(load_run_folder(tmp.path), {});
  const size_t chart = html.find("data-chart=\"train_loss:");
  ASSERT_NE(chart, std::string::npos);
  const std::string figure = html.substr(chart, html.find("</figure>", chart) - chart);
  // fine's ten logged losses and coarse's two means, each a marker.
  EXPECT_EQ(count(figure, "<circle"), 12u) << figure;
}

TEST(Report, ChartsHandleEdgeCases) {
  // A single point, a flat series, gaps: finite coordinates, no crash.
  svg::LineChart c{"t", "x", "y", {{"one", {{5, 1.0}}, 0, 0}, {"gap", {{1, 2.0}, {2, NAN}, {3, 2.0}, {4, 2.5}}, 1, 1}}};
  std::string s = svg::line_chart(c);
  EXPECT_EQ(s.find("nan"), std::string::npos) << s;
  EXPECT_EQ(s.find("inf"), std::string::npos);
  EXPECT_EQ(count(s, "<path"), 1u);  // "one" has a single point: a marker, no line
  std::string path = s.substr(s.find("<path"), s.find("/>", s.find("<path")) - s.find("<path"));
  EXPECT_EQ(std::count(path.begin(), path.end(), 'M'), 2) << path;  // the gap lifts the pen
  EXPECT_EQ(count(s, "<circle"), 4u);
  svg::Heatmap h{"h", "layer", "head", "alpha_1", {{0.0, 1.0, NAN}}, 0, 1};
  std::string hs = svg::heatmap(h);
  EXPECT_EQ(count(hs, "<title>layer"), 3u);
  EXPECT_EQ(svg::viridis(0), "#440154");
  EXPECT_EQ(svg::viridis(1), "#fde725");
  auto ticks = svg::nice_ticks(2.28, 2.33);
  ASSERT_GE(ticks.size(), 3u);
  EXPECT_LE(ticks.front(), 2.28 + 1e-9);
  EXPECT_GE(ticks.back(), 2.33 - 1e-9);
}

TEST(Report, AttentionMapsOfTheProbeSequence) {
  TempDir tmp("maps");
  auto plans = compile_plans("experiment a extends micro {}\n");
  EvalLine e;
  e.alpha = {{0.9, 0.1}};
  write_run(tmp.path, {plans.at(0), "completed", "", curve(2, e)});
  auto runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs.size(), 1u);
  const size_t without = count(render_report(runs, {}), "<svg ");
  // Two heads on a 3-token probe, as the runtime writes them at the end of a run.
  {
    std::ofstream f(runs[0].dir + "/attention_maps.json");
    f << R"({"tokens": [16, 3, 5], "maps": [
          {"layer": 0, "head": 1, "A": [[1, 0, 0], [0.9, 0.1, 0], [0.8, 0.1, 0.1]]},
          {"layer": 1, "head": 0, "A": [[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]}]})";
  }
  runs = load_run_folder(tmp.path);
  ASSERT_EQ(runs[0].maps.size(), 2u);
  EXPECT_DOUBLE_EQ(runs[0].maps[0].A[2][0], 0.8);
  std::string html = render_report(runs, {});
  EXPECT_EQ(count(html, "<svg "), without + 2);
  EXPECT_NE(html.find("layer 0 head 1"), std::string::npos);
  EXPECT_NE(html.find("id=\"maps\""), std::string::npos);
}
