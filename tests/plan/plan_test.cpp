// The plan library alone (no grammar): reading a compiler-written plan.toml,
// typed run configuration, the kernel description, and clear errors for
// plans that do not match the schema.
//
// fixtures/fixture.plan.toml is `sinkc plan tests/plan/fixtures/fixture.sink`;
// regenerate it that way when the schema or the stdlib defaults change.
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

#include "kernels/kernel_spec.h"
#include "plan/expr_text.h"
#include "plan/plan.h"
#include "plan/run_config.h"
#include "tests/source_paths.h"

namespace {

std::string fixture_text() {
  std::ifstream in((std::string(sinktest::source_dir()) + "/tests/plan/fixtures") + "/fixture.plan.toml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text with the line starting `key = ` replaced (or removed when line is empty).
std::string with_line(std::string text, const std::string& key, const std::string& line) {
  const size_t at = text.find("\n" + key + " = ");
  EXPECT_NE(at, std::string::npos) << key;
  const size_t end = text.find('\n', at + 1);
  text.replace(at + 1, end - at - 1, line);
  return text;
}

std::string unhashed(const std::string& text) { return with_line(text, "hash", ""); }

// The PlanError message of reading `text`, or "" when it reads.
std::string error_of(const std::string& text) {
  try {
    sink::plan_from_toml(text, "x.toml");
  } catch (const sink::PlanError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanLibrary, ReadsACompilerWrittenPlanAndWritesTheSameText) {
  const std::string text = fixture_text();
  ASSERT_FALSE(text.empty()) << "missing fixture " << (std::string(sinktest::source_dir()) + "/tests/plan/fixtures");
  const sink::Plan plan = sink::plan_from_toml(text, "fixture.plan.toml");
  EXPECT_EQ(plan.name, "fixture");
  EXPECT_EQ(sink::to_toml(plan), text);
  EXPECT_EQ(sink::plan_from_toml(sink::to_toml(plan), "again"), plan);
}

TEST(PlanLibrary, TypesEveryKindOfField) {
  const sink::Plan plan = sink::plan_from_toml(fixture_text(), "fixture.plan.toml");
  using Kind = sink::Value::Kind;
  EXPECT_EQ(*plan.at("attention.score").expr, sink::read_expr("sigmoid(qk - log(64)) + 0.5 * elu(qk)^2"));
  EXPECT_EQ(plan.at("model.v_star").kind, Kind::Expr);
  EXPECT_EQ(plan.at("model.biases").kind, Kind::Enum);
  const sink::Value& pe = plan.at("model.pe");
  ASSERT_EQ(pe.kind, Kind::Call);
  EXPECT_EQ(pe.s, "relative");
  EXPECT_EQ(pe.arg("buckets")->i, 16);
  EXPECT_EQ(pe.arg("max_distance")->i, 64);
  EXPECT_EQ(plan.at("attention.normalize").arg("p")->kind, Kind::Float);
  EXPECT_EQ(plan.at("loss.window").kind, Kind::Int);
  EXPECT_EQ(plan.at("data.fix").str(), "[[7, 3]]");
  EXPECT_EQ(plan.at("data.random").str(), "[2, 5]");
  EXPECT_DOUBLE_EQ(plan.number("model.norm_eps"), 1e-5);
}

TEST(PlanLibrary, RunConfigurationMakesEachDecisionOnce) {
  const sink::RunConfig c = sink::read_config(sink::plan_from_toml(fixture_text(), "fixture.plan.toml"));
  EXPECT_EQ(c.model.d_head, 16);
  EXPECT_TRUE(c.model.key_column());
  EXPECT_TRUE(c.model.position_term());
  EXPECT_EQ(c.model.v_star, sink::VStar::fixed);
  EXPECT_FALSE(c.model.attention.shifted_exp);
  EXPECT_EQ(c.model.attention.rule.window, 12);
  EXPECT_DOUBLE_EQ(c.model.attention.pnorm_p, 3);
  EXPECT_EQ(c.data.random_positions, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(c.train.warmup, 10);
  EXPECT_TRUE(sink::measures_with_bos(sink::MeasureBos::auto_, c.data));
  EXPECT_FALSE(sink::measures_with_bos(sink::MeasureBos::without, c.data));
  sink::DataConfig no_bos = c.data;
  no_bos.bos = false;
  EXPECT_FALSE(sink::measures_with_bos(sink::MeasureBos::auto_, no_bos));
  EXPECT_TRUE(sink::measures_with_bos(sink::MeasureBos::with, no_bos));
}

TEST(PlanLibrary, OneKernelDescriptionFromPlanOrConfig) {
  const sink::Plan plan = sink::plan_from_toml(fixture_text(), "fixture.plan.toml");
  const auto k = sink::kernels::kernel_spec(plan);
  EXPECT_EQ(k.describe(), sink::kernels::kernel_spec(sink::read_config(plan).model).describe());
  EXPECT_EQ(k.describe(),
            "score=sigmoid(qk - log(64)) + 0.5 * elu(qk)^2 softmax=false normalize=pnorm p=3.0 alpha=1.0 prefix=0 "
            "window=12 position_bias=true key_bias=true d_head=16 f32");
  std::string text = unhashed(fixture_text());
  text = with_line(text, "score", "score = \"exp(qk)\"");
  text = with_line(text, "normalize", "normalize = \"sum\"");
  EXPECT_TRUE(sink::kernels::kernel_spec(sink::plan_from_toml(text, "softmax")).softmax());
  text = with_line(text, "normalize", "normalize = { form = \"pnorm\", p = 2 }");
  const auto shifted = sink::kernels::kernel_spec(sink::plan_from_toml(text, "pnorm"));
  EXPECT_FALSE(shifted.softmax());
  EXPECT_TRUE(shifted.online);
}

TEST(PlanLibrary, PlansThatDoNotMatchTheSchemaAreClearErrors) {
  const std::string base = unhashed(fixture_text());
  struct Case {
    std::string key, line, expected;
  };
  const std::vector<Case> cases = {
      {"score", "score = \"expp(qk)\"", "unknown function 'expp'"},
      {"score", "score = \"exp(q)\"", "unknown variable 'q'"},
      {"score", "score = \"exp(\"", "'attention.score': expected"},
      {"score", "score = 3", "'attention.score': expected an expression"},
      {"normalize", "normalize = { form = \"pnorm\", q = 3 }", "'pnorm' has no parameter 'q'"},
      {"normalize", "normalize = \"softmax\"", "'attention.normalize': expected sum | none"},
      {"heads", "heads = 0", "'model.heads': 0 is out of range"},
      {"heads", "heads = 2.5", "'model.heads': expected an integer"},
      {"biases", "biases = \"kk\"", "'model.biases': expected"},
      {"v_star", "v_star = \"5 * onehot(0, 1)\"", "'onehot' takes 1 argument"},
      {"betas", "betas = [0.9]", "'optim.betas': expected 2 values"},
      {"fix", "fix = [[7]]", "[token, position] pairs"},
      {"bos", "bos = \"yes\"", "'data.bos': expected true or false"},
      {"layers", "", "plan has no field 'model.layers'"},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(with_line(base, c.key, c.line));
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.line << " -> '" << message << "'";
  }
  EXPECT_NE(error_of("name = \"x\"\n[model\n"), "");
  EXPECT_NE(error_of(with_line(fixture_text(), "steps", "steps = 1501")).find("does not match"), std::string::npos);
}

TEST(PlanLibrary, RunConfigurationRejectsAnUnloweredGroupedQueryPlan) {
  const sink::Plan plan = sink::plan_from_toml(with_line(unhashed(fixture_text()), "kv_heads", "kv_heads = 3"), "gqa");
  EXPECT_THROW(sink::read_config(plan), sink::PlanError);
}

}  // namespace

// A field added later (attention.gate) at its neutral value leaves the hash
// as it was: a plan written before the field existed reads back, keeps its
// hash, and holds the neutral value; any other value changes the hash.
TEST(PlanLibrary, AFieldAddedLaterKeepsEarlierPlansHashes) {
  std::string text = fixture_text();
  const std::string gate_line = "gate = \"none\"\n";
  const size_t at = text.find(gate_line);
  ASSERT_NE(at, std::string::npos) << "the fixture has no attention.gate line";
  const sink::Plan now = sink::plan_from_toml(text, "fixture.plan.toml");
  std::string before = text;
  before.erase(at, gate_line.size());
  const sink::Plan earlier = sink::plan_from_toml(before, "a plan from before attention.gate");
  EXPECT_EQ(earlier.hash(), now.hash());
  EXPECT_EQ(earlier.at("attention.gate").s, "none");
  EXPECT_EQ(sink::read_config(earlier).model.attention.gate, sink::Gate::none);
  sink::Plan gated = now;
  gated.fields["attention.gate"] = sink::Value::of_enum("headwise");
  EXPECT_NE(gated.hash(), now.hash());
}

// A visibility rule beyond prefix and window (loss.window_keeps) reaches the run's attention and its kernel as
// expressions, and names another kernel; at its neutral 0 a plan is as before the field existed.
TEST(PlanLibrary, AVisibilityRuleReachesTheKernelAsExpressions) {
  const std::string text = unhashed(fixture_text());
  const sink::Plan plain = sink::plan_from_toml(text, "fixture");
  EXPECT_TRUE(sink::read_config(plain).model.attention.rule.of_range_alone());
  EXPECT_EQ(sink::kernels::kernel_spec(plain).describe().find("visibility"), std::string::npos);
  const sink::Plan kept = sink::plan_from_toml(with_line(text, "window_keeps", "window_keeps = 3"), "kept");
  const sink::AttentionConfig a = sink::read_config(kept).model.attention;
  ASSERT_FALSE(a.rule.of_range_alone());
  EXPECT_EQ(a.rule, sink::visibility(kept));
  EXPECT_TRUE(a.rule.checks_pairs());
  const sink::kernels::KernelSpec spec = sink::kernels::kernel_spec(kept);
  EXPECT_NE(spec.describe().find("visibility: " + a.rule.describe()), std::string::npos) << spec.describe();
  EXPECT_NE(spec.hash(), sink::kernels::kernel_spec(plain).hash());
  EXPECT_NE(kept.hash(), plain.hash());
}
