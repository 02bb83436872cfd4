// Sink values of unnormalized attention are computed from the paper's proxy scores: marked wherever one appears
// (table, diff, report), with an asterisk and its footnote for a reader and a boolean column in the data formats.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "results/metric_diff.h"
#include "results/report_html.h"
#include "results/table.h"
#include "synthetic_runs.h"

using namespace sink;
using namespace sink::results;
using namespace sink::testing;

namespace {

const char* kSpec = R"(
  experiment softmax extends micro {}
  experiment sigmoid_none extends micro { attention { score = sigmoid(qk)  normalize = none } }
  experiment pnorm extends micro { attention.normalize = pnorm(p = 2) }
  experiment softpick extends micro { attention.normalize = softpick }
  experiment differential extends micro { attention.differential = true }
)";

// Each run of kSpec with Sink_1 = 10 x (its index + 1) and `proxy` as the runtime's word (nullopt: the key not
// written, as by runs recorded before it was).
std::vector<RunData> write_runs(const std::string& folder, std::optional<bool> proxy) {
  std::vector<RunData> out;
  double sink = 10;
  for (const auto& p : compile_plans(kSpec)) {
    EvalLine e;
    e.sink = {{1, sink}};
    e.sink_from_proxy = proxy;
    out.push_back(load_run(write_run(folder, {p, "completed", "", curve(2, e)})));
    sink += 10;
  }
  return out;
}

const RunData& named(const std::vector<RunData>& runs, const std::string& name) {
  for (const auto& r : runs)
    if (r.plan.name == name) return r;
  throw std::runtime_error("no run " + name);
}

}  // namespace

TEST(Proxy, RunsRecordedBeforeTheRuntimeSaidFollowTheirPlans) {
  TempDir tmp("proxy-old");
  auto runs = write_runs(tmp.path, std::nullopt);
  // The paper's asterisk: attention not normalized to sum to at most 1; and differential attention's signed map.
  EXPECT_FALSE(named(runs, "softmax").sink_from_proxy());
  EXPECT_TRUE(named(runs, "sigmoid_none").sink_from_proxy());
  EXPECT_TRUE(named(runs, "pnorm").sink_from_proxy());
  EXPECT_FALSE(named(runs, "softpick").sink_from_proxy());
  EXPECT_TRUE(named(runs, "differential").sink_from_proxy());
}

TEST(Proxy, TheRuntimesWordWinsOverThePlan) {
  TempDir yes("proxy-yes"), no("proxy-no");
  EXPECT_TRUE(named(write_runs(yes.path, true), "softmax").sink_from_proxy());
  EXPECT_FALSE(named(write_runs(no.path, false), "sigmoid_none").sink_from_proxy());
}

TEST(Proxy, TheTableStarsSinkValuesAndSaysWhy) {
  TempDir tmp("proxy-table");
  write_runs(tmp.path, std::nullopt);
  auto groups = group_seeds(load_run_folder(tmp.path));
  const DataTable t = build_table(groups, {"sink_1", "alpha_1", "valid_loss"}).data_table();

  const std::string text = t.render(Format::Text);
  // sigmoid_none is second in kSpec: Sink_1 = 20 (its last evaluation), alpha_1 and valid loss its defaults.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\nsigmoid_none .*\n"))) << text;
  EXPECT_NE(m.str().find(" 20.00* "), std::string::npos) << m.str();
  EXPECT_NE(m.str().find(" 0.500* "), std::string::npos) << "alpha_1 reads the proxy too: " << m.str();
  EXPECT_EQ(m.str().find("2.0000*"), std::string::npos) << "a loss is never a proxy value: " << m.str();
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\nsoftmax .*\n"))) << text;
  EXPECT_EQ(m.str().find('*'), std::string::npos) << m.str();
  EXPECT_NE(text.find("\n* proxy scores for unnormalized attention (the paper's asterisk)\n"), std::string::npos)
      << text;
  EXPECT_NE(t.render(Format::Latex).find("20.00* &"), std::string::npos);
  EXPECT_NE(t.render(Format::Markdown).find("| 20.00\\* |"), std::string::npos) << t.render(Format::Markdown);

  // The data formats: the number alone, the fact in a column of its own.
  auto j = nlohmann::json::parse(t.render(Format::Json));
  for (const auto& row : j["rows"]) {
    EXPECT_TRUE(row["sink_1"].is_number()) << row;
    const std::string run = row["run"];
    const bool proxy = run == "sigmoid_none" || run == "pnorm" || run == "differential";
    EXPECT_EQ(row["sink_from_proxy"], proxy) << run;
  }
  EXPECT_NE(t.render(Format::Csv).find(",sink_from_proxy\r\n"), std::string::npos) << t.render(Format::Csv);
  EXPECT_EQ(t.render(Format::Csv).find('*'), std::string::npos);

  // No Sink metric asked for: neither a column nor a footnote.
  const DataTable losses = build_table(groups, {"valid_loss"}).data_table();
  EXPECT_EQ(losses.render(Format::Csv).find("sink_from_proxy"), std::string::npos);
  EXPECT_EQ(losses.render(Format::Text).find("proxy"), std::string::npos);
}

TEST(Proxy, DiffAndReportMarkThemToo) {
  TempDir tmp("proxy-diff");
  auto runs = write_runs(tmp.path, std::nullopt);
  RunDiff d = diff_runs({"softmax", with_seed_siblings(named(runs, "softmax"))},
                        {"sigmoid_none", with_seed_siblings(named(runs, "sigmoid_none"))});
  const std::string text = render_text(d);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\nSink_1 \\(%\\) .*\n"))) << text;
  EXPECT_NE(m.str().find(" 10.00 "), std::string::npos) << m.str();  // A: softmax, no asterisk
  EXPECT_NE(m.str().find(" 20.00* "), std::string::npos) << m.str();
  EXPECT_NE(text.find("(the paper's asterisk)"), std::string::npos);
  auto j = to_json(d);
  EXPECT_EQ(j["a"]["sink_from_proxy"], false);
  EXPECT_EQ(j["b"]["sink_from_proxy"], true);
  for (const auto& row : j["metrics"])
    EXPECT_EQ(row["b"]["from_proxy"], row["id"] == "sink_1" || row["id"] == "alpha_1") << row["id"];
  const std::string csv = render(d, Format::Csv);
  EXPECT_NE(csv.find("\r\nsink_1,Sink_1 (%),%,10.0,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",false,true\r\n"), std::string::npos) << "a_from_proxy, b_from_proxy: " << csv;

  const std::string html = render_report(runs, {});
  EXPECT_NE(html.find(">20.00*</td>"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"note\">* proxy scores for unnormalized attention (the paper&#39;s asterisk)</p>"),
            std::string::npos);
  EXPECT_NE(html.find("sigmoid_none*"), std::string::npos) << "the Sink curves' legend and the alpha_1 map's title";
}
