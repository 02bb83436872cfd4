// The paper's specs (specs/) and the plan contract they rest on: every spec
// checks clean at CPU and paper scale, plans round-trip through TOML and JSON,
// the content hash ignores formatting and sees every semantic change, sweeps
// and seeds expand as documented, and --base / --set behave.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "helpers.h"
#include "plan/plan.h"
#include "plan/schema.h"

#include "spec_helpers.h"

namespace {

// fs, Options, Plan, compile_text, compile_path and the helpers.
using namespace spectest;

// ---------------------------------------------------------------------------
// (a) every spec and stdlib file checks clean, at CPU scale and paper scale

TEST(SpecsCheck, TheTablesAndFiguresAreAllThere) {
  std::set<std::string> names;
  for (const auto& f : spec_files()) names.insert(fs::path(f).filename().string());
  for (const char* expected :
       {"table2_weight_decay.sink", "table3_positional_embedding.sink", "table4_attention_biases.sink",
        "table5_fixed_v_star.sink", "table6_attention_operation.sink", "table9_lr_steps.sink",
        "table10_batch_size.sink", "table10_fixed_token_position.sink", "table11_ffn.sink", "table12_heads.sink",
        "table13_k_bias_dims.sink", "table14_normalization.sink", "fig5_prefix_lm.sink", "fig5_data_amount.sink",
        "fig6_sliding_window.sink", "sec5_random_tokens.sink", "fig7_post_norm.sink", "fig8_scale_1b.sink"})
    EXPECT_TRUE(names.count(expected)) << "missing specs/" << expected;
  EXPECT_TRUE(fs::exists(sink::testing::source_dir() + "/specs/README.md"));
}

TEST(SpecsCheck, EverySpecChecksCleanAtBothScales) {
  const auto files = spec_files();
  ASSERT_GE(files.size(), 18u);
  for (const auto& file : files) {
    for (const std::string base : {"", "paper_60m"}) {
      auto c = compile_path(file, with_base(base));
      EXPECT_TRUE(c->diagnostics().all().empty()) << file << " (base '" << base << "'):\n" << rendered(*c);
      EXPECT_FALSE(c->plans().empty()) << file << " (base '" << base << "') has no runs";
    }
  }
}

TEST(SpecsCheck, EveryStdlibFileChecksClean) {
  const auto files = sink_files("stdlib");
  ASSERT_GE(files.size(), 2u);
  for (const auto& file : files) {
    for (const std::string base : {"", "paper_60m"}) {
      auto c = compile_path(file, with_base(base));
      EXPECT_TRUE(c->diagnostics().all().empty()) << file << " (base '" << base << "'):\n" << rendered(*c);
      EXPECT_FALSE(c->plans().empty()) << file;
    }
  }
}

// `sinkc check specs/*.sink` compiles them together: run names must not collide.
TEST(SpecsCheck, AllSpecsTogetherHaveUniqueRunNames) {
  sink::Options o;
  o.stdlib_dir = sink::testing::stdlib_dir();
  sink::Compilation c(o);
  for (const auto& f : spec_files()) ASSERT_TRUE(c.add_file(f)) << f;
  c.run();
  EXPECT_FALSE(c.diagnostics().has_errors()) << c.diagnostics().render();
  std::set<std::string> names;
  for (const auto& p : c.plans()) EXPECT_TRUE(names.insert(p.name).second) << "duplicate run " << p.name;
  EXPECT_GE(names.size(), 100u);
}

// Specs extend the CPU presets and set no scale themselves, so --base swaps
// the whole scale: width, depth, context, data, device. The GPU-scale specs
// (a ladder of widths, a table too long for a CPU) extend gpu_text and are
// named here, so no other spec drifts off the CPU; --base swaps their depth,
// context and data all the same.
TEST(SpecsCheck, SpecsRunAtCpuScaleAndBaseSwapsTheScale) {
  const std::set<std::string> gpu_scale = {"text_emergence_ladder.sink", "text_table_gpu.sink"};
  std::set<std::string> seen_gpu_scale;
  for (const auto& file : spec_files()) {
    const bool on_gpu = gpu_scale.count(fs::path(file).filename().string()) > 0;
    if (on_gpu) seen_gpu_scale.insert(fs::path(file).filename().string());
    auto own = compile_path(file);
    for (const auto& p : own->plans()) {
      if (on_gpu) {
        EXPECT_EQ(p.choice("train.device"), "cuda") << p.name;
        EXPECT_GE(p.integer("model.d"), 256) << p.name;
        continue;
      }
      EXPECT_EQ(p.choice("train.device"), "cpu") << p.name;
      EXPECT_TRUE(p.integer("model.d") == 64 || p.integer("model.d") == 128)
          << p.name << " d = " << p.integer("model.d");
    }
    auto paper = compile_path(file, with_base("paper_60m"));
    ASSERT_EQ(paper->plans().size(), own->plans().size()) << file;
    for (size_t k = 0; k < paper->plans().size(); ++k) {
      const Plan& p = paper->plans()[k];
      EXPECT_EQ(p.name, own->plans()[k].name);
      if (!on_gpu) EXPECT_EQ(p.integer("model.d"), 768) << p.name;
      EXPECT_EQ(p.integer("model.layers"), 10) << p.name;
      EXPECT_EQ(p.integer("train.context"), 2048) << p.name;
      EXPECT_EQ(p.choice("train.device"), "cuda") << p.name;
      EXPECT_EQ(p.choice("data.corpus"), "file") << p.name;
      EXPECT_NE(p.hash(), own->plans()[k].hash()) << p.name;
    }
  }
  EXPECT_EQ(seen_gpu_scale, gpu_scale) << "a GPU-scale spec named here is gone from specs/";
}

TEST(SpecsCheck, EachSpecSaysWhereItComesFromAndImportsThePresets) {
  for (const auto& file : spec_files()) {
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.rfind("//", 0), 0u) << file << " should start with a comment";
    EXPECT_NE(text.find("import \"stdlib/presets.sink\""), std::string::npos) << file;
  }
}

TEST(SpecsCheck, PaperTablesExpandToTheirRows) {
  auto c = compile_path(sink::testing::source_dir() + "/specs/table2_weight_decay.sink");
  ASSERT_EQ(c->plans().size(), 8u) << rendered(*c);
  const double gammas[] = {0.0, 0.001, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0};
  for (size_t k = 0; k < 8; ++k) EXPECT_DOUBLE_EQ(c->plans()[k].number("optim.weight_decay"), gammas[k]);
  EXPECT_EQ(c->plans()[4].name, "weight_decay.weight_decay=0.5");

  auto biases = compile_path(sink::testing::source_dir() + "/specs/table4_attention_biases.sink");
  const Plan* k = find_plan(biases->plans(), "bias_k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->choice("model.biases"), "k");
  EXPECT_EQ(k->at("model.v_star").str(), "zero");

  auto heads = compile_path(sink::testing::source_dir() + "/specs/table12_heads.sink");
  EXPECT_NE(find_plan(heads->plans(), "shared_biases.biases=kv,bias_shared=true"), nullptr);
  EXPECT_EQ(heads->plans().size(), 9u);

  auto fixed = compile_path(sink::testing::source_dir() + "/specs/table10_fixed_token_position.sink");
  const Plan* at2 = find_plan(fixed->plans(), "fix_at_2");
  ASSERT_NE(at2, nullptr);
  EXPECT_EQ(at2->at("data.fix").str(), "[[0, 2]]");
}

// ---------------------------------------------------------------------------
// (b) plan round trip for every run of every spec

TEST(RoundTrip, EveryRunOfEverySpecThroughTomlAndJson) {
  size_t runs = 0;
  for (const auto& file : spec_files()) {
    for (const std::string base : {"", "paper_60m"}) {
      auto c = compile_path(file, with_base(base));
      ASSERT_FALSE(c->diagnostics().has_errors()) << file << "\n" << rendered(*c);
      for (const Plan& p : c->plans()) {
        ++runs;
        const std::string toml = sink::to_toml(p);
        Plan back;
        try {
          back = sink::plan_from_toml(toml, "x");
        } catch (const sink::PlanError& e) {
          ADD_FAILURE() << p.name << ": " << e.what() << "\n" << toml;
          continue;
        }
        EXPECT_TRUE(back == p) << p.name << "\n" << toml << "\nread back as\n" << sink::to_toml(back);
        EXPECT_EQ(back.hash(), p.hash()) << p.name;
        EXPECT_EQ(back.canonical_text(), p.canonical_text()) << p.name;
        EXPECT_EQ(sink::to_toml(back), toml) << p.name;        // a fixed point
        EXPECT_EQ(back.sweep_point, p.sweep_point) << p.name;  // axes in their order

        nlohmann::json j;
        ASSERT_NO_THROW(j = nlohmann::json::parse(sink::to_json(p))) << p.name;
        EXPECT_EQ(j["name"], p.name);
        EXPECT_EQ(j["hash"], p.hash());
        EXPECT_EQ(j["fields"].size(), sink::schema().size()) << p.name;
      }
    }
  }
  EXPECT_GE(runs, 200u);
}

TEST(RoundTrip, AMangledOrEditedPlanIsRejected) {
  Plan p = run_of("", "tiny");
  const std::string toml = sink::to_toml(p);
  const std::string line = "steps = 1500";
  ASSERT_NE(toml.find(line), std::string::npos) << toml;
  auto replaced = [&](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  EXPECT_THROW(sink::plan_from_toml(replaced(toml, line, "steps = \"many\""), "x"), sink::PlanError);
  EXPECT_THROW(sink::plan_from_toml(replaced(toml, line, "steps = 0"), "x"), sink::PlanError);
  EXPECT_THROW(sink::plan_from_toml(replaced(toml, line, ""), "x"), sink::PlanError);  // a field missing
  // Edited by hand: the stored hash no longer matches the content.
  EXPECT_THROW(sink::plan_from_toml(replaced(toml, line, "steps = 1501"), "x"), sink::PlanError);
  // Without the stored hash the edit reads back, as a different plan.
  const std::string hash_line = "hash = \"" + p.hash() + "\"";
  ASSERT_NE(toml.find(hash_line), std::string::npos);
  Plan q = sink::plan_from_toml(replaced(replaced(toml, line, "steps = 1501"), hash_line, ""), "x");
  EXPECT_EQ(q.integer("train.steps"), 1501);
  EXPECT_FALSE(q == p);
  EXPECT_NE(q.hash(), p.hash());
}

// ---------------------------------------------------------------------------
// (c) the hash: invariant under reformatting, changed by every field

TEST(Hash, ReformattingReorderingAndSyntaxVariantsKeepTheHash) {
  const std::string one_line =
      "import \"stdlib/presets.sink\" experiment a extends tiny { model { biases = k v_star = 5 * onehot(0) } "
      "attention { score = sigmoid(qk) normalize = none } optim { lr = 1e-3 weight_decay = 0.5 "
      "schedule = cosine(warmup = 50, min_lr = 1e-4) } data { fix token 3 at 2 fix token 7 at 4 random at [3] } "
      "train.steps = 2K loss.window = 16 measure.positions = [1, 2] }";
  const std::string spread = R"(import "stdlib/presets.sink"

/* the same experiment,
   spread out, commented, reordered */
experiment a extends tiny {
  loss.window = 16;                       // dotted
  train { steps = 2000 }                  // 2K written out
  measure { positions = [2, 1, 1,] }      // order and repeats do not matter
  data {
    random at 3                           // a bare position is a list of one
    fix token 7 at 4
    fix token 3 at 2
    fix token 3 at 2                      // the same statement twice is one
  }
  attention.normalize = none
  attention.score = sigmoid((qk))
  optim.schedule = cosine(min_lr = 0.0001, warmup = 50)
  optim.weight_decay = 0.5
  optim.lr = 0.5                          // overridden below: the last one wins
  optim.lr = 0.001
  model.v_star = (5) * onehot(0)
  model.biases = k
}
)";
  const std::string chained = R"(import "stdlib/presets.sink"
experiment mid extends tiny {
  model.biases = k
  optim { lr = 3 weight_decay = 0.5 }
}
experiment a extends mid {
  model.v_star = 5 * onehot(0)
  attention { score = sigmoid(qk); normalize = none; }
  optim { lr = 1e-3; schedule = cosine(50, 1e-4); }
  data { fix token 3 at 2; fix token 7 at 4; random at [3]; }
  train.steps = 2_000
  loss.window = 16
  measure.positions = [1, 2]
}
)";
  auto a = clean_plans(one_line);
  auto b = clean_plans(spread);
  auto c = clean_plans(chained);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  const Plan* ca = find_plan(c, "a");
  ASSERT_NE(ca, nullptr);
  EXPECT_EQ(a[0].canonical_text(), b[0].canonical_text());
  EXPECT_EQ(a[0].hash(), b[0].hash());
  EXPECT_EQ(a[0].hash(), ca->hash());
  EXPECT_TRUE(a[0] == b[0]);
  // And the spec did what it says (the hash is not constant).
  EXPECT_DOUBLE_EQ(a[0].number("optim.lr"), 1e-3);
  EXPECT_EQ(a[0].integer("train.steps"), 2000);
  EXPECT_NE(a[0].hash(), hash_of("", "tiny"));
}

TEST(Hash, TheRunNameAndTheSourceFileAreNotHashed) {
  auto x = clean_plans("experiment first extends tiny { optim.lr = 1e-3 }");
  auto y = compile_text("experiment second extends tiny { optim.lr = 1e-3 }", {},
                        sink::testing::source_dir() + "/elsewhere.sink");
  ASSERT_EQ(x.size(), 1u);
  ASSERT_EQ(y->plans().size(), 1u);
  EXPECT_EQ(x[0].hash(), y->plans()[0].hash());
  EXPECT_NE(x[0].name, y->plans()[0].name);
}

// Writing every resolved value back as source gives the same plan.
TEST(Hash, AResolvedPlanWrittenAsASpecHashesTheSame) {
  const Plan p = run_of("model.biases = k  data { fix token 2 at 3 }", "tiny");
  std::string body;
  for (const auto& [path, value] : p.fields) {
    if (path == "data.fix") {
      for (const auto& pair : value.items)
        body += "data { fix token " + pair.items[0].str() + " at " + pair.items[1].str() + " }\n";
      continue;
    }
    body += path + " = " + value.str() + "\n";
  }
  const Plan q = run_of(body);  // from `defaults`, not `tiny`: every field is given
  EXPECT_EQ(q.canonical_text(), p.canonical_text());
  EXPECT_EQ(q.hash(), p.hash());
}

// How to change one field from its default in a way the checker accepts and
// the lowering does not fold away. `context` sets what the field needs to
// matter (e.g. k_dims needs key biases).
struct Change {
  std::string context;
  std::string statement;
};

std::optional<Change> change_for(const sink::Field& f, const sink::Value& def) {
  static const std::map<std::string, Change> special = {
      {"model.d", {"", "model.d = 128"}},                          // heads = 4 must divide it
      {"model.heads", {"", "model.heads = 8"}},                    // must divide d = 64, even d_head
      {"model.kv_heads", {"", "model.kv_heads = 2"}},              // must divide heads = 4 (0 folds to 4)
      {"model.k_dims", {"model.biases = k", "model.k_dims = 1"}},  // reset when biases = none
      {"model.bias_shared", {"model.biases = kv", "model.bias_shared = true"}},
      {"model.v_star", {"model.biases = k", "model.v_star = 5 * onehot(0)"}},
      {"attention.normalize", {"", "attention.normalize = pnorm(p = 2)"}},  // exp without a normalizer is an error
      {"data.fix", {"", "data { fix token 3 at 2 }"}},
      {"data.random", {"", "data.random = [2]"}},  // [1] would be the plan of first_token = random
      {"optim.betas", {"", "optim.betas = [0.9, 0.99]"}},
      {"attention.score", {"", "attention.score = sigmoid(qk)"}},
      {"loss.window_keeps", {"loss.window = 8", "loss.window_keeps = 2"}},  // under a window, or a warning
      {"loss.window_dilation", {"loss.window = 8", "loss.window_dilation = 2"}},
  };
  if (auto it = special.find(f.path); it != special.end()) return it->second;
  const auto& t = f.spec;
  auto in_range = [&](double v) { return (t.min_open ? v > t.min : v >= t.min) && v <= t.max; };
  switch (t.type) {
    case sink::Type::Int: {
      double v = static_cast<double>(def.i) + 1;
      if (!in_range(v)) v = static_cast<double>(def.i) - 1;
      return Change{"", f.path + " = " + std::to_string(static_cast<long long>(v))};
    }
    case sink::Type::Count: return Change{"", f.path + " = " + std::to_string(def.i + 1000) + " tokens"};
    case sink::Type::Float: {
      double v = def.f == 0 ? 0.5 : def.f * 2;
      if (!in_range(v)) v = def.f / 2;
      return Change{"", f.path + " = " + sink::format_number(v)};
    }
    case sink::Type::Bool: return Change{"", f.path + " = " + (def.b ? "false" : "true")};
    case sink::Type::Enum:
      for (const auto& c : t.choices)
        if (c != def.s) return Change{"", f.path + " = " + c};
      return std::nullopt;
    case sink::Type::Variant:
      for (const auto& form : t.forms) {
        if (form.name == def.s) continue;
        std::string text = form.name;
        if (!form.params.empty()) {
          text += "(";
          for (size_t k = 0; k < form.params.size(); ++k) {
            const auto& p = form.params[k];
            std::string v = p.spec.type == sink::Type::String ? "\"data/x.txt\"" : p.default_value.str();
            text += (k ? ", " : "") + p.name + " = " + v;
          }
          text += ")";
        }
        return Change{"", f.path + " = " + text};
      }
      return std::nullopt;
    case sink::Type::OptionalInt:
      return Change{"", f.path + " = " + (def.kind == sink::Value::Kind::None ? "16" : "none")};
    case sink::Type::NumberOr:
      // A number where the default is a keyword (a change that stays valid with softmax), else the first keyword.
      return Change{"", f.path + " = " + (def.kind == sink::Value::Kind::Enum ? std::string("0.5") : t.choices.at(0))};
    case sink::Type::IntList: {
      int64_t next = 1;
      for (const auto& v : def.items) next = std::max<int64_t>(next, v.i + 1);
      std::string text = "[";
      for (const auto& v : def.items) text += v.str() + ", ";
      return Change{"", f.path + " = " + text + std::to_string(next) + "]"};
    }
    case sink::Type::String: return Change{"", f.path + " = \"changed\""};
    default: return std::nullopt;
  }
}

TEST(Hash, EverySchemaFieldChangesTheHash) {
  const Plan defaults = run_of("");
  std::set<std::string> hashes = {defaults.hash()};
  size_t fields = 0;
  for (const auto& f : sink::schema()) {
    SCOPED_TRACE(f.path);
    auto def = defaults.fields.find(f.path);
    ASSERT_NE(def, defaults.fields.end());
    auto change = change_for(f, def->second);
    if (!change) {
      ADD_FAILURE() << "no change written for field " << f.path << " (type " << sink::type_name(f.spec.type) << ")";
      continue;
    }
    const Plan before = run_of(change->context);
    const Plan after = run_of(change->context + "\n" + change->statement);
    if (before.fields.empty() || after.fields.empty()) continue;  // reported by run_of
    EXPECT_NE(before.canonical_text(), after.canonical_text()) << change->statement;
    ++fields;
    if (f.hashed_as) {  // where a run trains: the same run (Hash.WhereARunTrainsIsNotWhatItTrains)
      EXPECT_EQ(before.hash(), after.hash()) << change->statement;
      continue;
    }
    EXPECT_NE(before.hash(), after.hash()) << change->statement;
    // first_token = random folds into data.random; everything else shows in its own field.
    if (f.path != "data.first_token")
      EXPECT_NE(before.at(f.path), after.at(f.path)) << change->statement << " left " << f.path << " unchanged";
    hashes.insert(after.hash());
  }
  EXPECT_EQ(fields, sink::schema().size());
  std::set<std::string> not_what;
  for (const auto& f : sink::schema())
    if (f.hashed_as) not_what.insert(f.path);
  // Where a run trains and how often it reports, not what it trains.
  EXPECT_EQ(not_what, (std::set<std::string>{"train.device", "train.log_every"}));
  const size_t where_fields = not_what.size();
  EXPECT_EQ(hashes.size(), sink::schema().size() - where_fields + 1);  // every other change is its own plan
}

// A run started on a GPU resumes on a CPU (and the reverse) in the same run
// directory: the device is where it trains, not what. Precision is what.
TEST(Hash, WhereARunTrainsIsNotWhatItTrains) {
  const Plan cpu = run_of("");
  const Plan cuda = run_of("train.device = cuda");
  const Plan bf16 = run_of("train.device = cuda\ntrain.precision = bf16");
  ASSERT_FALSE(cpu.fields.empty());
  ASSERT_FALSE(cuda.fields.empty());
  EXPECT_EQ(cuda.choice("train.device"), "cuda");
  EXPECT_EQ(cpu.hash(), cuda.hash());
  EXPECT_EQ(cpu.dir_name(), cuda.dir_name());
  EXPECT_EQ(cpu.hashed_text(), cuda.hashed_text());
  EXPECT_NE(cpu.canonical_text(), cuda.canonical_text());  // sinkc diff still shows it
  EXPECT_NE(cuda.hash(), bf16.hash());
  // A plan file written on one device reads back on the other with its stored hash.
  EXPECT_EQ(sink::plan_from_toml(sink::to_toml(cuda), "cuda.toml").hash(), cpu.hash());
}

// Changes inside a field's value: call parameters, list items, expressions.
TEST(Hash, ChangesInsideAValueChangeTheHash) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"model.pe = rope(theta = 10000)", "model.pe = rope(theta = 500000)"},
      {"model.pe = relative(buckets = 32, max_distance = 128)",
       "model.pe = relative(buckets = 16, max_distance = 128)"},
      {"model.pe = relative(buckets = 32, max_distance = 128)", "model.pe = relative(buckets = 32, max_distance = 64)"},
      {"attention.kernel = mlp(hidden = 64)", "attention.kernel = mlp(hidden = 32)"},
      {"attention.normalize = pnorm(p = 2)", "attention.normalize = pnorm(p = 3)"},
      {"attention.score = exp(qk)", "attention.score = exp(2 * qk)"},
      {"attention.score = sigmoid(qk)", "attention.score = sigmoid(qk) + 0"},
      {"optim.schedule = constant(warmup = 100)", "optim.schedule = constant(warmup = 101)"},
      {"optim.schedule = cosine(warmup = 100, min_lr = 0)", "optim.schedule = cosine(warmup = 100, min_lr = 1e-5)"},
      {"data.corpus = synthetic(seed = 0)", "data.corpus = synthetic(seed = 1)"},
      {"data.corpus = synthetic(offsets = [1])", "data.corpus = synthetic(offsets = [2])"},
      {"data.corpus = synthetic(kind = random)", "data.corpus = synthetic(kind = repeat)"},
      {"data.corpus = builtin(\"default\")", "data.corpus = builtin(\"other\")"},
      {"data.tokenizer = sentencepiece(vocab = 2048)", "data.tokenizer = sentencepiece(vocab = 4096)"},
      {"data { fix token 3 at 2 }", "data { fix token 4 at 2 }"},
      {"data { fix token 3 at 2 }", "data { fix token 3 at 3 }"},
      {"data { random at [2] }", "data { random at [3] }"},
      {"model { biases = k  v_star = 5 * onehot(0) }", "model { biases = k  v_star = 5 * onehot(1) }"},
      {"model { biases = k  v_star = 5 * onehot(0) }", "model { biases = k  v_star = 20 * ones / sqrt(d_head) }"},
      {"model { biases = kv  v_star = learned }", "model { biases = kv  v_star = zero }"},
      {"optim.betas = [0.9, 0.95]", "optim.betas = [0.8, 0.95]"},
      {"data.amount = 50M tokens", "data.amount = 5B tokens"},
  };
  for (const auto& [a, b] : pairs) EXPECT_NE(hash_of(a), hash_of(b)) << a << "  vs  " << b;
}

// Lowering folds shorthand and defaults-by-reference into one form: both
// spellings must be the same plan, and different from leaving them out.
TEST(Hash, FoldedFormsHashLikeTheirExpandedForms) {
  const std::string none = hash_of("");
  const std::vector<std::vector<std::string>> same = {
      {"data.first_token = random", "data { random at [1] }", "data { random at 1 }", "data.random = [1]",
       "data { first_token = random  random at [1] }"},
      {"data { first_token = random  random at [2] }", "data { random at [1, 2] }", "data { random at [2, 1, 2] }"},
      {"model.kv_heads = 0", "model.kv_heads = 4", ""},  // 0 means heads (4)
      {"model { heads = 8  kv_heads = 0 }", "model { heads = 8  kv_heads = 8 }"},
      {"model { biases = k  v_star = auto }", "model { biases = k  v_star = zero }", "model.biases = k"},
      {"model { biases = kv  v_star = auto }", "model { biases = kv  v_star = learned }"},
      {"model { biases = v  v_star = auto }", "model { biases = v  v_star = learned }"},
      {"model { biases = k  k_dims = 0 }", "model { biases = k  k_dims = 16 }"},  // 0 = all of d_head = 64 / 4
      {"model { biases = kv  k_dims = 0 }", "model { biases = kv  k_dims = 16 }"},
      {"model.bias_shared = true", "model.bias_shared = false", ""},  // nothing to share without biases
      {"data { fix token 3 at 2  fix token 5 at 1 }", "data { fix token 5 at 1  fix token 3 at 2 }",
       "data { fix token 5 at 1  fix token 3 at 2  fix token 5 at 1 }"},
      {"measure.positions = [2, 1]", "measure.positions = [1, 2, 2]"},
  };
  for (const auto& group : same) {
    const std::string first = hash_of(group[0]);
    for (size_t k = 1; k < group.size(); ++k) EXPECT_EQ(hash_of(group[k]), first) << group[0] << "  vs  " << group[k];
  }
  // The folds are not no-ops.
  EXPECT_NE(hash_of("data.first_token = random"), none);
  EXPECT_NE(hash_of("data.first_token = random"), hash_of("data { random at [2] }"));
  EXPECT_NE(hash_of("model { biases = k  k_dims = 8 }"), hash_of("model.biases = k"));
  EXPECT_NE(hash_of("model { biases = kv  bias_shared = true }"), hash_of("model.biases = kv"));
  EXPECT_NE(hash_of("model.kv_heads = 2"), none);
  EXPECT_NE(hash_of("model { biases = kv  v_star = zero }"), hash_of("model.biases = kv"));
  // The folded values are what the runtime reads.
  const Plan r = run_of("data.first_token = random");
  EXPECT_EQ(r.choice("data.first_token"), "natural");
  EXPECT_EQ(r.at("data.random").str(), "[1]");
  EXPECT_EQ(run_of("").integer("model.kv_heads"), 4);
  EXPECT_EQ(run_of("model.biases = k").integer("model.k_dims"), 16);
}
}  // namespace
