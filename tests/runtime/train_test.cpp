// End to end through run_plan: the run directory, caching, resume equal to
// an uninterrupted run, divergence, a corrupt checkpoint, `sinkc run`.
#include <gtest/gtest.h>

#include "plan/run_record.h"

#include <cstdio>
#include <filesystem>
#include <sys/wait.h>

#include "runtime/processes/interrupt.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "tests/gpu_features_asked.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::rt;
using json = nlohmann::json;
using sinktest::run_options;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

std::vector<json> metrics_lines(const std::string& dir) {
  std::vector<json> out;
  std::istringstream lines(sinktest::read_file(dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    auto j = json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "unparseable metrics line: " << line;
    out.push_back(j);
  }
  return out;
}

// The values that must not depend on how the run was scheduled.
void expect_same_metrics(const json& a, const json& b, const std::string& where) {
  for (const char* key : {"step", "tokens"}) EXPECT_EQ(a.at(key), b.at(key)) << where << " " << key;
  for (const char* key : {"valid_loss", "train_loss", "lr"})
    EXPECT_NEAR(a.at(key).get<double>(), b.at(key).get<double>(), 1e-6) << where << " " << key;
  ASSERT_EQ(a.at("sink").size(), b.at("sink").size());
  for (auto& [k, v] : a.at("sink").items())
    EXPECT_NEAR(v.get<double>(), b.at("sink").at(k).get<double>(), 1e-6) << where;
  const auto& aa = a.at("alpha");
  const auto& ba = b.at("alpha");
  ASSERT_EQ(aa.size(), ba.size());
  for (size_t l = 0; l < aa.size(); ++l)
    for (size_t h = 0; h < aa[l].size(); ++h)
      EXPECT_NEAR(aa[l][h].get<double>(), ba[l][h].get<double>(), 1e-6) << where;
  for (size_t l = 0; l < a.at("massive").size(); ++l)
    EXPECT_NEAR(a.at("massive")[l].get<double>(), b.at("massive")[l].get<double>(), 1e-6) << where;
}

}  // namespace

TEST(Train, EndToEndRunDirectory) {
  TempDir out("e2e");
  auto plan = sinktest::plan_of("experiment e2e extends micro { }");
  auto r = run_plan(plan, run_options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  EXPECT_EQ(r.dir, out.str() + "/" + plan.dir_name());
  for (const char* f : {"plan.toml", "metrics.jsonl", "summary.json", "log.txt", "checkpoint/state.pt"})
    EXPECT_TRUE(fs::exists(r.dir + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(r.dir + "/checkpoint/state.pt.tmp"));
  EXPECT_FALSE(fs::exists(r.dir + "/summary.json.tmp"));
  // The report's attention maps: rows of probabilities for softmax.
  auto maps = json::parse(sinktest::read_file(r.dir + "/attention_maps.json"));
  ASSERT_FALSE(maps["maps"].empty());
  for (const auto& row : maps["maps"][0]["A"]) {
    double sum = 0;
    for (double v : row) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }

  // plan.toml is the resolved plan: it reads back to the same plan and hash.
  auto back = sink::read_plan(r.dir + "/plan.toml");
  EXPECT_EQ(back.hash(), plan.hash());

  // micro: 20 steps, measure.every = 10 -> evaluations at 10 and 20.
  auto m = metrics_lines(r.dir);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["step"], 10);
  EXPECT_EQ(m[1]["step"], 20);
  EXPECT_EQ(m[1]["tokens"], 20 * 4 * 16);
  for (const auto& line : m) {
    for (const char* key : {"valid_loss", "train_loss", "lr", "sink", "alpha", "massive", "tokens_per_s"})
      EXPECT_TRUE(line.contains(key)) << key;
    EXPECT_EQ(line["sink_from_proxy"], false) << "softmax: the metrics read the attention itself";
    EXPECT_TRUE(std::isfinite(line["valid_loss"].get<double>()));
    EXPECT_TRUE(line["sink"].contains("1"));
    const double s1 = line["sink"]["1"].get<double>();
    EXPECT_GE(s1, 0.0);
    EXPECT_LE(s1, 100.0);
    EXPECT_EQ(line["alpha"].size(), 2u);     // layers
    EXPECT_EQ(line["alpha"][0].size(), 2u);  // heads
  }
  // Training does something: the loss falls below the uniform guess ln(17).
  EXPECT_LT(m[1]["valid_loss"].get<double>(), std::log(17.0));
  EXPECT_LT(m[1]["train_loss"].get<double>(), m[0]["train_loss"].get<double>());

  auto summary = json::parse(sinktest::read_file(r.dir + "/summary.json"));
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["hash"], plan.hash());
  EXPECT_EQ(summary["steps_done"], 20);
  EXPECT_EQ(summary["final"]["valid_loss"], m[1]["valid_loss"]);
  EXPECT_NE(sinktest::read_file(r.dir + "/log.txt").find("status: completed"), std::string::npos);
  // The run writes no key that plan/run_record.h does not name: results/ reads nothing else.
  for (const auto& line : m)
    for (const auto& [key, value] : line.items())
      EXPECT_TRUE(run_record::is_one_of(run_record::eval::kKeys, key)) << "metrics.jsonl key " << key;
  for (const auto& [key, value] : summary.items())
    EXPECT_TRUE(run_record::is_one_of(run_record::summary::kKeys, key)) << "summary.json key " << key;

  // Again: cached, nothing rewritten.
  const auto mtime = fs::last_write_time(r.dir + "/metrics.jsonl");
  auto again = run_plan(plan, run_options(out.str()));
  EXPECT_EQ(again.status, sink::rt::RunOutcome::Cached);
  EXPECT_EQ(again.summary["final"]["valid_loss"], m[1]["valid_loss"]);
  EXPECT_EQ(fs::last_write_time(r.dir + "/metrics.jsonl"), mtime);
  // The same content under another name is cached too, through a link.
  sink::Plan renamed = plan;
  renamed.name = "same_content";
  auto alias = run_plan(renamed, run_options(out.str()));
  EXPECT_EQ(alias.status, sink::rt::RunOutcome::Cached);
  EXPECT_TRUE(fs::is_symlink(alias.dir));
  EXPECT_EQ(fs::last_write_time(r.dir + "/metrics.jsonl"), mtime);
  // A different plan is a different directory, not a cache hit.
  auto other = run_plan(sinktest::plan_of("experiment e2e extends micro { train.steps = 10 }"), run_options(out.str()));
  EXPECT_EQ(other.status, sink::rt::RunOutcome::Completed);
  EXPECT_NE(other.dir, r.dir);
}

TEST(Train, AnInterruptCheckpointsAndResumes) {
  // Ctrl-C: the step in progress finishes, a checkpoint is written whatever
  // checkpoint_every says, and --resume continues to the uninterrupted result.
  const std::string spec =
      "experiment ctrl_c extends micro { train { steps = 9  checkpoint_every = 100 }  measure.every = 3 }";
  auto plan = sinktest::plan_of(spec);
  TempDir a("straight"), b("interrupted");
  auto straight = run_plan(plan, run_options(a.str()));
  ASSERT_EQ(straight.status, sink::rt::RunOutcome::Completed);
  request_interrupt();
  auto o = run_options(b.str());
  auto stopped = run_plan(plan, o);
  clear_interrupt();
  ASSERT_EQ(stopped.status, sink::rt::RunOutcome::Interrupted) << stopped.summary.dump(2);
  EXPECT_EQ(stopped.summary["steps_done"], 1);
  EXPECT_TRUE(fs::exists(stopped.dir + "/checkpoint"));
  o.resume = true;
  auto resumed = run_plan(plan, o);
  ASSERT_EQ(resumed.status, sink::rt::RunOutcome::Completed) << resumed.summary.dump(2);
  EXPECT_NE(sinktest::read_file(resumed.dir + "/log.txt").find("resumed at step 1"), std::string::npos);
  expect_same_metrics(straight.summary["final"], resumed.summary["final"], "summary");
}

TEST(Train, ResumeEqualsUninterrupted) {
  const std::string spec =
      "experiment resume extends micro { train { steps = 12  checkpoint_every = 5 }  measure.every = 3 "
      "  optim.schedule = cosine(warmup = 2, min_lr = 1e-3) }";
  auto plan = sinktest::plan_of(spec);
  TempDir a("straight"), b("resumed");
  auto straight = run_plan(plan, run_options(a.str()));
  ASSERT_EQ(straight.status, sink::rt::RunOutcome::Completed) << straight.summary.dump(2);

  auto o = run_options(b.str());
  o.stop_after = 7;
  auto stopped = run_plan(plan, o);
  ASSERT_EQ(stopped.status, sink::rt::RunOutcome::Stopped) << stopped.summary.dump(2);
  // Evaluations at 3 and 6 were written; the checkpoint holds step 5.
  ASSERT_EQ(metrics_lines(stopped.dir).size(), 2u);
  o.stop_after = -1;
  o.resume = true;
  auto resumed = run_plan(plan, o);
  ASSERT_EQ(resumed.status, sink::rt::RunOutcome::Completed) << resumed.summary.dump(2);
  EXPECT_NE(sinktest::read_file(resumed.dir + "/log.txt").find("resumed at step 5"), std::string::npos);

  auto ms = metrics_lines(straight.dir), mr = metrics_lines(resumed.dir);
  ASSERT_EQ(ms.size(), 4u);  // 3, 6, 9, 12
  ASSERT_EQ(mr.size(), ms.size());
  for (size_t k = 0; k < ms.size(); ++k) expect_same_metrics(ms[k], mr[k], "line " + std::to_string(k));
  expect_same_metrics(straight.summary["final"], resumed.summary["final"], "summary");
  EXPECT_EQ(resumed.summary["steps_done"], 12);

  // Resuming a run that is not there starts from scratch (and still matches).
  TempDir c("fresh");
  auto fresh_opts = run_options(c.str());
  fresh_opts.resume = true;
  auto fresh = run_plan(plan, fresh_opts);
  ASSERT_EQ(fresh.status, sink::rt::RunOutcome::Completed);
  expect_same_metrics(straight.summary["final"], fresh.summary["final"], "fresh");
}

TEST(Train, DivergenceIsRecorded) {
  // exp scores divided by max(|sum|, 1) and a huge lr without clipping: the
  // logits pass exp's float range after the first update, inf / inf. (Under
  // the p-norm exp is taken relative to the row max and stays finite, as
  // softmax does, so the paper's diverging p = 2 row no longer serves.)
  auto plan = sinktest::plan_of(
      "experiment boom extends micro { attention { score = exp(qk)  normalize = abs_clamped }  optim { lr = 10  clip = "
      "0 } }");
  TempDir out("diverge");
  RunResult r;
  ASSERT_NO_THROW(r = run_plan(plan, run_options(out.str())));
  EXPECT_EQ(r.status, sink::rt::RunOutcome::Diverged) << r.summary.dump(2);
  auto summary = json::parse(sinktest::read_file(r.dir + "/summary.json"));
  EXPECT_EQ(summary["status"], "diverged");
  EXPECT_NE(summary["reason"].get<std::string>().find("non-finite"), std::string::npos);
  EXPECT_LT(summary["steps_done"].get<int64_t>(), 20);
  // Not cached: a diverged run is run again.
  EXPECT_EQ(run_plan(plan, run_options(out.str())).status, sink::rt::RunOutcome::Diverged);
}

TEST(Train, CorruptCheckpointFailsClearly) {
  auto plan = sinktest::plan_of("experiment corrupt extends micro { train.checkpoint_every = 5 }");
  TempDir out("corrupt");
  auto o = run_options(out.str());
  o.stop_after = 7;
  ASSERT_EQ(run_plan(plan, o).status, sink::rt::RunOutcome::Stopped);
  const std::string ckpt = out.str() + "/" + plan.dir_name() + "/checkpoint/state.pt";
  ASSERT_TRUE(fs::exists(ckpt));
  sinktest::write_file(ckpt, "this is not a checkpoint, just garbage bytes \x01\x02\x03");
  const std::string reason = sinktest::resume_must_fail(plan, o);
  EXPECT_NE(reason.find("checkpoint"), std::string::npos) << reason;
  EXPECT_NE(reason.find("state.pt"), std::string::npos) << reason;
  EXPECT_EQ(json::parse(sinktest::read_file(out.str() + "/" + plan.dir_name() + "/summary.json"))["status"], "failed");

  // A checkpoint from another model (the same run name, a different width) also fails clearly.
  auto wide = sinktest::plan_of("experiment corrupt extends micro { train.checkpoint_every = 5  model.d = 32 }");
  TempDir out2("mismatch");
  auto o2 = run_options(out2.str());
  o2.stop_after = 6;
  ASSERT_EQ(run_plan(plan, o2).status, sink::rt::RunOutcome::Stopped);
  fs::create_directories(out2.str() + "/" + wide.dir_name() + "/checkpoint");
  fs::copy_file(out2.str() + "/" + plan.dir_name() + "/checkpoint/state.pt",
                out2.str() + "/" + wide.dir_name() + "/checkpoint/state.pt");
  o2.stop_after = -1;
  o2.resume = true;
  auto mismatch = run_plan(wide, o2);
  EXPECT_EQ(mismatch.status, sink::rt::RunOutcome::Failed);
  EXPECT_NE(mismatch.summary.value("reason", "").find("checkpoint"), std::string::npos) << mismatch.summary.dump(2);
}

TEST(Train, SinkcRunCommand) {
  const std::string sinkc = sinktest::sinkc_binary();
  if (!fs::exists(sinkc)) GTEST_SKIP() << sinkc << " is not built";
  TempDir dir("cli");
  sinktest::write_file(dir.file("spec.sink"), "experiment cli extends micro { train.steps = 10 }\n");
  const std::string cmd = sinkc + " run " + dir.file("spec.sink") + " --out " + dir.file("runs") + " 2>&1";
  auto run = [&](std::string& output) {
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string first, second;
  EXPECT_EQ(run(first), 0) << first;
  EXPECT_NE(first.find("completed"), std::string::npos) << first;
  EXPECT_NE(first.find("Sink_1"), std::string::npos) << first;
  EXPECT_EQ(run(second), 0) << second;
  EXPECT_NE(second.find("cached"), std::string::npos) << second;
  // A spec with an error exits non-zero with a diagnostic.
  sinktest::write_file(dir.file("bad.sink"), "experiment bad extends micro { model.nope = 1 }\n");
  std::string bad;
  const std::string bad_cmd = sinkc + " run " + dir.file("bad.sink") + " --out " + dir.file("runs") + " 2>&1";
  FILE* p = popen(bad_cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) bad.append(buf, n);
  int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << bad;
  EXPECT_NE(bad.find("nope"), std::string::npos) << bad;
}

// Gradient accumulation: four passes of one sequence train the same curve as
// one pass of four (float summation order apart).
TEST(Train, MicroBatchesTrainTheSameCurve) {
  TempDir out("micro-batch");
  auto whole = run_plan(sinktest::plan_of("experiment whole extends micro { }"), run_options(out.str()));
  auto split =
      run_plan(sinktest::plan_of("experiment split extends micro { train.micro_batch = 1 }"), run_options(out.str()));
  ASSERT_EQ(whole.status, sink::rt::RunOutcome::Completed);
  ASSERT_EQ(split.status, sink::rt::RunOutcome::Completed);
  EXPECT_EQ(split.summary["micro_batch"], 1);
  auto a = metrics_lines(whole.dir), b = metrics_lines(split.dir);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k)
    for (const char* m : {"train_loss", "valid_loss"})
      EXPECT_NEAR(b[k][m].get<double>(), a[k][m].get<double>(), 1e-5 * a[k][m].get<double>())
          << m << " at " << a[k]["step"];
}

// bf16 autocast (here LibTorch's CPU autocast; on a GPU the same scope on
// CUDA): the run records it, its matmuls really are bf16 (the curve is not
// the fp32 one), and it trains about as well (bf16 keeps 8 significant bits).
TEST(Train, Bf16AutocastTrainsCloseToFp32) {
  TempDir out("bf16");
  auto fp32 = run_plan(sinktest::plan_of("experiment fp32 extends micro { }"), run_options(out.str()));
  auto bf16 =
      run_plan(sinktest::plan_of("experiment bf16 extends micro { train.precision = bf16 }"), run_options(out.str()));
  ASSERT_EQ(fp32.status, sink::rt::RunOutcome::Completed);
  ASSERT_EQ(bf16.status, sink::rt::RunOutcome::Completed) << bf16.summary.dump(2);
  EXPECT_EQ(bf16.summary["precision"], "bf16");
  EXPECT_EQ(fp32.summary["precision"], "fp32");
  const double a = fp32.summary["final"]["valid_loss"], b = bf16.summary["final"]["valid_loss"];
  EXPECT_NE(a, b) << "bf16 autocast changed nothing";
  EXPECT_NEAR(b, a, 0.05 * a);
}

// Training speed is the steps' own time: tokens_per_s divides the tokens by train_s (the loop's time less
// the measurements and checkpoints), not by elapsed_s.
TEST(Train, TokensPerSecondLeavesOutTheMeasurements) {
  TempDir out("tokens-per-s");
  auto r =
      run_plan(sinktest::plan_of("experiment speed extends micro { measure.sequences = 64 }"), run_options(out.str()));
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed);
  const std::vector<json> lines = metrics_lines(r.dir);
  ASSERT_EQ(lines.size(), 2u);
  for (size_t k = 0; k < lines.size(); ++k) {
    const json& m = lines[k];
    const double tokens = m["tokens"], train_s = m["train_s"], elapsed_s = m["elapsed_s"];
    ASSERT_GT(train_s, 0);
    EXPECT_NEAR(m["tokens_per_s"].get<double>() * train_s / tokens, 1.0, 1e-9) << m.dump();
    if (k > 0) EXPECT_LT(train_s, elapsed_s) << "the measurement before it is not left out: " << m.dump();
  }
}

// The step on fixed buffers (SINKLAB_GPU_FEATURES=cuda_graph=buffers, and cuda_graph on the CPU, which has no graphs)
// is the eager step's code on buffers of fixed address: the eager step's curve bit for bit, over micro-batches, the
// gradient clipping and a warm-up schedule, and through a resume, whose step counts on the device start from the
// checkpoint's. A run that asks for the captured step where it cannot be captured trains eagerly and says why.
TEST(Train, TheStepOnFixedBuffersTrainsTheEagerCurve) {
  const auto plan = sinktest::plan_of(
      "experiment buffers extends micro { train { steps = 12  micro_batch = 1  log_every = 1  checkpoint_every = 5 }"
      "  optim.clip = 0.05  measure.every = 6 }");
  using Requested = sinktest::GpuFeaturesAsked;
  TempDir a("eager"), b("buffers"), c("resumed"), d("captured");
  const auto eager = run_plan(plan, run_options(a.str()));
  ASSERT_EQ(eager.status, sink::rt::RunOutcome::Completed) << eager.summary.dump(2);
  EXPECT_FALSE(eager.summary.contains("step")) << "an eager run says nothing of a captured step";
  const std::string losses = sinktest::read_file(eager.dir + "/losses.jsonl");
  EXPECT_EQ(std::count(losses.begin(), losses.end(), '\n'), 12);
  {
    Requested requested("cuda_graph=buffers");
    const auto buffers = run_plan(plan, run_options(b.str()));
    ASSERT_EQ(buffers.status, sink::rt::RunOutcome::Completed) << buffers.summary.dump(2);
    const std::string how = buffers.summary.value("step", "");
    EXPECT_EQ(how, "eager on fixed buffers, never captured (cuda_graph=buffers)");
    EXPECT_NE(sinktest::read_file(buffers.dir + "/log.txt").find("step: " + how), std::string::npos);
    EXPECT_EQ(sinktest::read_file(buffers.dir + "/losses.jsonl"), losses);
    auto me = metrics_lines(eager.dir), mb = metrics_lines(buffers.dir);
    ASSERT_EQ(me.size(), 2u);
    ASSERT_EQ(mb.size(), me.size());
    for (size_t k = 0; k < me.size(); ++k)
      for (const char* m : {"train_loss", "valid_loss"}) EXPECT_EQ(mb[k][m], me[k][m]) << m << " at " << me[k]["step"];
  }
  {
    // On the CPU the captured step is the step on fixed buffers, where the optimizer could be captured.
    Requested requested("cuda_graph");
    const auto captured = run_plan(plan, run_options(d.str()));
    ASSERT_EQ(captured.status, sink::rt::RunOutcome::Completed) << captured.summary.dump(2);
    const std::string how = captured.summary.value("step", "");
    if (how.find("not captured") != std::string::npos)
      EXPECT_NE(how.find("fused kernel"), std::string::npos) << how;  // (LibTorch 1.13: no fused AdamW)
    else
      EXPECT_EQ(how, "eager on fixed buffers (a CUDA graph only on a GPU)");
    EXPECT_EQ(sinktest::read_file(captured.dir + "/losses.jsonl"), losses);
  }
  Requested requested("cuda_graph=buffers");
  auto o = run_options(c.str());
  o.stop_after = 7;
  ASSERT_EQ(run_plan(plan, o).status, sink::rt::RunOutcome::Stopped);
  o.stop_after = -1;
  o.resume = true;
  const auto resumed = run_plan(plan, o);
  ASSERT_EQ(resumed.status, sink::rt::RunOutcome::Completed) << resumed.summary.dump(2);
  EXPECT_EQ(sinktest::read_file(resumed.dir + "/losses.jsonl"), losses);

  // A run that cannot take the captured step trains eagerly and says why.
  Requested captured("cuda_graph");
  TempDir e("profiled");
  auto profiled = run_options(e.str());
  profiled.profile = true;
  const auto eager_again = run_plan(plan, profiled);
  ASSERT_EQ(eager_again.status, sink::rt::RunOutcome::Completed) << eager_again.summary.dump(2);
  EXPECT_EQ(eager_again.summary.value("step", ""), "eager, not captured: --profile times the step's parts apart");
  EXPECT_EQ(sinktest::read_file(eager_again.dir + "/losses.jsonl"), losses);

  // A misspelt feature fails the run and names the table's features, rather than running what was not asked for.
  Requested misspelt("cuda_grahp");
  TempDir f("misspelt");
  const auto refused = run_plan(plan, run_options(f.str()));
  EXPECT_EQ(refused.status, sink::rt::RunOutcome::Failed);
  const std::string reason = refused.summary.value("reason", "");
  EXPECT_NE(reason.find("no GPU feature is called 'cuda_grahp'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("cuda_graph"), std::string::npos) << reason;
}
