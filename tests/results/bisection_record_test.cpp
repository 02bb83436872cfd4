// A bisection as sinkc bisect keeps it: the JSON it writes reads back whole,
// anything else is an error that names the key, and sinkc report shows it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "results/bisection_record.h"
#include "results/report_html.h"
#include "synthetic_runs.h"

using namespace sink::results;
using sink::testing::TempDir;

namespace {

BisectionRecord example() {
  BisectionRecord r;
  r.a = "ab.sink --run a";
  r.b = "ab.sink --run b";
  r.metric_id = "sink_1";
  r.metric_label = "Sink_1 (%)";
  r.noise_rule = "the rule";
  r.changes = {{"c1", {{"attention.normalize", "sum", "none"}, {"attention.score", "exp(qk)", "sigmoid(qk)"}}},
               {"c2", {{"optim.weight_decay", "0.1", "0.05"}}}};
  BisectionTrial a{{}, "A", true, 100, 0, 2, "100.00 ± 0.00", ""};
  BisectionTrial b{{"c1", "c2"}, "B", true, 1.5, 0.5, 2, "1.50 ± 0.50", ""};
  BisectionTrial c1{{"c1"}, "B", false, 2, 1, 2, "2.00 ± 1.00", ""};
  BisectionTrial rejected{{"c2"}, "rejected", false, NAN, NAN, 0, "not trained", "exp(qk) needs a normaliser"};
  r.trials = {a, b, c1, rejected};
  r.from_a = {{"c1"}, true, true};
  r.from_b = {{"c1"}, true, true};
  r.runs_trained = 6;
  r.runs_cached = 2;
  r.attribution = "attention.normalize ... alone moves Sink_1 (%) from A's side to B's.";
  return r;
}

}  // namespace

TEST(BisectionRecord, ItsJsonReadsBackWhole) {
  const BisectionRecord r = example();
  const BisectionRecord back = bisection_from_json(nlohmann::json::parse(to_json(r).dump()), "test");
  EXPECT_EQ(to_json(back).dump(), to_json(r).dump());  // as text: NaN is not equal to itself
  ASSERT_EQ(back.trials.size(), 4u);
  EXPECT_TRUE(std::isnan(back.trials[3].mean));  // written as null
  EXPECT_EQ(back.trials[3].note, "exp(qk) needs a normaliser");
  EXPECT_EQ(back.changes[0].text(), "attention.normalize: sum -> none + attention.score: exp(qk) -> sigmoid(qk)");
}

TEST(BisectionRecord, AMissingKeyIsAnErrorThatNamesIt) {
  auto j = nlohmann::json::parse(to_json(example()).dump());
  j["trials"][1].erase("side");
  try {
    bisection_from_json(j, "x.json");
    ADD_FAILURE() << "read a trial without its side";
  } catch (const ResultsError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: 'side'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bisection_from_json(nlohmann::json::array(), "y.json"), ResultsError);
}

TEST(BisectionRecord, KeptBesideTheRunsAndShownByTheReport) {
  TempDir tmp("bisection-kept");
  const std::string file = save_bisection(example(), tmp.path, "a-vs-b");
  EXPECT_EQ(std::filesystem::path(file).filename(), "a-vs-b.sink_1.json");
  std::ofstream(tmp.path + "/bisections/broken.json") << "{\"a\": 1}";
  std::vector<std::string> skipped;
  auto kept = load_bisections(tmp.path, &skipped);
  ASSERT_EQ(kept.size(), 1u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("broken.json"), std::string::npos);

  ReportOptions o;
  o.bisections = kept;
  const std::string html = render_report({}, o);
  EXPECT_NE(html.find("<section id=\"bisections\">"), std::string::npos);
  EXPECT_NE(html.find("alone moves Sink_1 (%) from A&#39;s side"), std::string::npos) << html.substr(0, 2000);
  EXPECT_NE(html.find("rejected: exp(qk) needs a normaliser"), std::string::npos);
  // Without bisections, no empty section.
  EXPECT_EQ(render_report({}, ReportOptions{}).find("id=\"bisections\""), std::string::npos);
}

TEST(BisectionRecord, TheTextFormListsChangesTrialsAndTheAnswer) {
  const std::string text = render_text(example(), false);
  EXPECT_NE(text.find("2 differences between them"), std::string::npos) << text;
  EXPECT_NE(text.find("c2  optim.weight_decay: 0.1 -> 0.05"), std::string::npos) << text;
  EXPECT_NE(text.find("6 runs trained, 2 cached"), std::string::npos) << text;
  const std::string md = render_text(example(), true);
  EXPECT_NE(md.find("| # |"), std::string::npos) << md;
}
