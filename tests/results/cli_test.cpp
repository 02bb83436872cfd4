// The commands end to end, through the sinkc binary: exit status and output.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sys/wait.h>

#include "synthetic_runs.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::testing;

namespace {

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr
};

Result sinkc(const std::string& args) {
  Result r;
  FILE* p = popen((std::string(sinktest::sinkc_binary()) + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// Two experiments of one spec file, `a` run, `b` not.
struct SpecAndRuns {
  TempDir tmp{"cli"};
  std::string spec = tmp.path + "/two.sink";
  std::string out = tmp.path + "/runs";
  SpecAndRuns() {
    std::ofstream(spec) << "experiment a extends micro {}\nexperiment b extends micro { model.biases = k }\n";
    auto plans = compile_plans("experiment a extends micro {}\n");
    EvalLine e;
    write_run(out, {plans[0], "completed", "", curve(3, e)});
  }
};

}  // namespace

TEST(Cli, DiffOfASpecSaysWhatHasNotRunYet) {
  SpecAndRuns s;
  Result r = sinkc("diff " + s.spec + " " + s.spec + " --run a --run b --out " + s.out);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("model.biases: none -> k"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B (b) has not run yet: sinkc run " + s.spec + " --run b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not run yet"), std::string::npos);
}

TEST(Cli, ExitStatusesFollowTheOtherCommands) {
  SpecAndRuns s;
  EXPECT_EQ(sinkc("diff /nonexistent/a /nonexistent/b").status, 2);
  EXPECT_EQ(sinkc("diff " + s.spec + " " + s.spec + " --out " + s.out).status, 2);  // two runs: which?
  EXPECT_EQ(sinkc("diff " + s.spec + " " + s.spec + " --run zz --out " + s.out).status, 2);
  EXPECT_EQ(sinkc("table " + s.out + " --metric nope").status, 2);
  for (const std::string command : {"table " + s.out, "diff " + s.out + " " + s.out}) {
    Result yaml = sinkc(command + " --format yaml");
    EXPECT_EQ(yaml.status, 2);
    EXPECT_NE(yaml.out.find("unknown format 'yaml': use text, csv, json, markdown or latex"), std::string::npos)
        << yaml.out;
  }
  std::string bad = s.tmp.path + "/bad.sink";
  std::ofstream(bad) << "experiment x extends micro { model.dd = 3 }\n";
  Result r = sinkc("table " + bad);
  EXPECT_EQ(r.status, 1) << r.out;  // spec errors, with their diagnostics
  EXPECT_NE(r.out.find("bad.sink:1:"), std::string::npos) << r.out;
}

TEST(Cli, TableAndReportOfASpec) {
  SpecAndRuns s;
  Result t = sinkc("table " + s.spec + " --out " + s.out + " --format json");
  ASSERT_EQ(t.status, 0) << t.out;
  auto j = nlohmann::json::parse(t.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["status"], "completed");
  EXPECT_EQ(j["rows"][1]["status"], "not run");

  std::string html = s.tmp.path + "/r.html";
  Result r = sinkc("report " + s.spec + " --out " + s.out + " -o " + html);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("(2 runs, "), std::string::npos) << r.out;
  std::ifstream f(html);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_EQ(sinkc("report " + s.spec + " --out " + s.out).status, 2);  // -o is required
}

TEST(Cli, AnUnreadableRunIsSkippedNotFatal) {
  SpecAndRuns s;
  auto plans = compile_plans("experiment c extends micro { optim.lr = 0.5 }\n");
  std::string dir = write_run(s.out, {plans[0], "completed", "", curve(2, {})});
  std::ofstream(dir + "/plan.toml", std::ios::app) << "\n[model]\nnot_a_field = 1\n";
  Result r = sinkc("table " + s.out);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("skipped " + dir), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("completed"), std::string::npos) << r.out;
}

TEST(Cli, ExportSaysWhichExportAndAnswersTensorBoardItself) {
  SpecAndRuns s;
  Result neither = sinkc("export " + s.out);
  EXPECT_EQ(neither.status, 2);
  EXPECT_NE(neither.out.find("--tensorboard DIR"), std::string::npos) << neither.out;
  EXPECT_NE(neither.out.find("--llama2c FILE"), std::string::npos) << neither.out;
  Result both = sinkc("export " + s.out + " --tensorboard " + s.tmp.path + "/tb --llama2c=" + s.tmp.path + "/m.bin");
  EXPECT_EQ(both.status, 2);
  EXPECT_NE(both.out.find("one of them"), std::string::npos) << both.out;
  EXPECT_FALSE(std::filesystem::exists(s.tmp.path + "/tb"));

  // A spec's runs, found in --out as `table` finds them; b has not run and is said so.
  Result tb = sinkc("export " + s.spec + " --out " + s.out + " --tensorboard " + s.tmp.path + "/tb");
  if (tb.out.find("built without TensorBoard export") != std::string::npos) GTEST_SKIP() << tb.out;
  ASSERT_EQ(tb.status, 0) << tb.out;
  EXPECT_NE(tb.out.find("skipped b: no evaluation yet"), std::string::npos) << tb.out;
  EXPECT_NE(tb.out.find("(1 run, 3 evaluations); view with: tensorboard --logdir " + s.tmp.path + "/tb"),
            std::string::npos)
      << tb.out;
  EXPECT_TRUE(std::filesystem::is_directory(s.tmp.path + "/tb/a"));
  EXPECT_EQ(sinkc("export " + s.spec + " --out " + s.out + " --run b --tensorboard " + s.tmp.path + "/tb").status, 2);
}

TEST(Cli, RunTakesShellPatternsAndMayBeRepeated) {
  TempDir tmp{"cli-patterns"};
  const std::string spec = tmp.path + "/s.sink", out = tmp.path + "/runs";
  const std::string text =
      "experiment a extends micro {}\nexperiment b extends micro { model.biases = k }\n"
      "sweep wd over micro { optim.weight_decay in [0.1, 0.5] }\n";
  std::ofstream(spec) << text;
  for (const auto& p : compile_plans(text)) write_run(out, {p, "completed", "", curve(2, {})});
  // The runs a table shows, from its CSV's first column.
  auto table_runs = [&](const std::string& args) {
    Result r = sinkc("table " + spec + " --out " + out + " --format csv " + args);
    EXPECT_EQ(r.status, 0) << r.out;
    std::set<std::string> runs;
    for (size_t at = r.out.find("\r\n"); at != std::string::npos && at + 2 < r.out.size();
         at = r.out.find("\r\n", at + 2))
      runs.insert(r.out.substr(at + 2, r.out.find(',', at + 2) - at - 2));
    return runs;
  };
  using Runs = std::set<std::string>;
  EXPECT_EQ(table_runs("--run 'wd.*' --run a"), (Runs{"a", "wd.weight_decay=0.1", "wd.weight_decay=0.5"}));
  EXPECT_EQ(table_runs("--run 'wd.weight_decay=0.[15]'"), (Runs{"wd.weight_decay=0.1", "wd.weight_decay=0.5"}));
  EXPECT_EQ(table_runs("--run '?'"), (Runs{"a", "b"}));

  // A pattern that matches nothing is an error that names the runs there are, in a folder as in a spec.
  for (const std::string target : {out, spec + " --out " + out}) {
    Result none = sinkc("table " + target + " --run a --run 'zz*'");
    EXPECT_EQ(none.status, 2) << none.out;
    EXPECT_NE(none.out.find("no run matches 'zz*'"), std::string::npos) << none.out;
    EXPECT_NE(none.out.find("its runs: a, b, wd.weight_decay=0.1, wd.weight_decay=0.5"), std::string::npos) << none.out;
  }
  Result typo = sinkc("report " + out + " -o " + tmp.path + "/r.html --run wd.weight_decay=0.2");
  EXPECT_EQ(typo.status, 2) << typo.out;
  EXPECT_NE(typo.out.find("no run named 'wd.weight_decay=0.2'"), std::string::npos) << typo.out;
  EXPECT_NE(typo.out.find("did you mean"), std::string::npos) << typo.out;

  // diff: a pattern per side that matches one run; one that matches two says which.
  Result both = sinkc("diff " + spec + " " + spec + " --out " + out + " --run 'a*' --run '[b]'");
  EXPECT_EQ(both.status, 0) << both.out;
  EXPECT_NE(both.out.find("model.biases: none -> k"), std::string::npos) << both.out;
  Result two = sinkc("diff " + spec + " " + spec + " --out " + out + " --run 'wd.*'");
  EXPECT_EQ(two.status, 2) << two.out;
  EXPECT_NE(two.out.find("'wd.*' matches 2 runs"), std::string::npos) << two.out;

  // plan, run and submit: the same patterns, checked before anything is printed, trained or submitted.
  Result plans = sinkc("plan " + spec + " --run 'wd.*' --run b");
  EXPECT_EQ(plans.status, 0) << plans.out;
  size_t names = 0;
  for (size_t at = 0; (at = plans.out.find("\nname = ", at)) != std::string::npos; ++at) ++names;
  EXPECT_EQ(names + (plans.out.rfind("name = ", 0) == 0), 3u) << plans.out;
  Result no_plan = sinkc("plan " + spec + " --run a --run 'x?'");
  EXPECT_EQ(no_plan.status, 2) << no_plan.out;
  EXPECT_EQ(no_plan.out.find("name = "), std::string::npos) << no_plan.out;
  Result no_run = sinkc("run " + spec + " --out " + tmp.path + "/fresh --run 'zz*'");
  EXPECT_EQ(no_run.status, 2) << no_run.out;
  EXPECT_NE(no_run.out.find("no run matches 'zz*' in " + spec), std::string::npos) << no_run.out;
  Result submit = sinkc("submit " + spec + " --slurm --dry-run --out " + tmp.path + "/fresh --run 'wd.*'");
  EXPECT_EQ(submit.status, 0) << submit.out;
  EXPECT_NE(submit.out.find("dry run: 2 tasks"), std::string::npos) << submit.out;
  EXPECT_NE(submit.out.find("/wd.weight_decay=0.5-"), std::string::npos) << submit.out;
  EXPECT_EQ(submit.out.find("/a-"), std::string::npos) << submit.out;
}

// `sinkc check --fix`: each "did you mean" written into the file (two on one line, one in a call), the file then
// checks clean; a name nothing comes close to is left, and the exit status says so.
TEST(Cli, CheckFixWritesTheSuggestionsAndChecksAgain) {
  TempDir tmp("cli-fix");
  const std::string spec = tmp.path + "/typos.sink";
  std::ofstream(spec) << "experiment a extends micro {\n  optim { weigth_decay = 0.5  lr = 1e-3 }\n"
                         "  attention { score = sigmod(qk) }\n  modle.d = 32\n}\n";
  Result r = sinkc("check --fix " + spec);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fixed " + spec + ": 3 changes"), std::string::npos) << r.out;
  std::ifstream in(spec);
  const std::string fixed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(fixed,
            "experiment a extends micro {\n  optim { weight_decay = 0.5  lr = 1e-3 }\n"
            "  attention { score = sigmoid(qk) }\n  model.d = 32\n}\n");
  EXPECT_EQ(sinkc("check " + spec).status, 0);

  std::ofstream(spec) << "experiment a extends micro {\n  optim { zzzzzzzzzz = 1  weigth_decay = 0.5 }\n}\n";
  r = sinkc("check --fix " + spec);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("unknown field 'optim.zzzzzzzzzz'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("weigth_decay"), std::string::npos) << "fixed before the second check: " << r.out;
}
