// `sinkc run --profile`: where a run's time went, part by part, in
// profile.json; and metrics.jsonl's train_s, the loop's time without the
// measurements and checkpoints, beside elapsed_s.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "runtime/training/run_dir.h"
#include "runtime/training/step_profile.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"

using namespace sink;
using namespace sink::rt;
using json = nlohmann::json;
using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

const char* const kParts[] = {"data", "forward", "backward", "optimizer", "measurement", "checkpoints", "other"};

double sum_of_parts(const json& profile) {
  double sum = 0;
  for (const char* part : kParts) sum += profile.at("parts").at(part).get<double>();
  return sum;
}

}  // namespace

TEST(StepProfile, ScopesChargeTheirPartAndThePartsSumToTheTotal) {
  StepProfile profile(true, torch::kCPU);
  profile.start();
  {
    auto timed = profile.time(StepProfile::Forward);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // in no part: "other"
  {
    auto timed = profile.time(StepProfile::Data);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const json j = profile.to_json(3);
  EXPECT_EQ(j.at("steps"), 3);
  const json& parts = j.at("parts");
  EXPECT_GE(parts.at("forward").get<double>(), 0.030);
  EXPECT_GE(parts.at("data").get<double>(), 0.005);
  EXPECT_LT(parts.at("data").get<double>(), parts.at("forward").get<double>());
  EXPECT_GE(parts.at("other").get<double>(), 0.010);
  EXPECT_EQ(parts.at("backward").get<double>(), 0.0);
  EXPECT_NEAR(sum_of_parts(j), j.at("total_s").get<double>(), 1e-3);
  EXPECT_NE(profile.text("r", 3).find("forward"), std::string::npos);
}

TEST(StepProfile, AProfileOffTimesNothing) {
  StepProfile profile(false, torch::kCPU);
  profile.start();
  {
    auto timed = profile.time(StepProfile::Forward);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(profile.enabled());
  EXPECT_EQ(profile.to_json(1).at("parts").at("forward").get<double>(), 0.0);
}

TEST(StepProfile, ATinyRunWritesWhereItsTimeWent) {
  TempDir out("profile");
  auto plan = sinktest::plan_of("experiment prof extends micro { train.checkpoint_every = 5 }");
  RunOptions o;
  o.out = out.str();
  o.progress = false;
  o.profile = true;
  auto r = run_plan(plan, o);
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  ASSERT_TRUE(fs::exists(r.dir + "/profile.json"));
  const json profile = json::parse(sinktest::read_file(r.dir + "/profile.json"));
  EXPECT_EQ(profile.at("steps"), 20);
  const double total = profile.at("total_s");
  EXPECT_GT(total, 0);
  for (const char* part : kParts) {
    const double s = profile.at("parts").at(part);
    EXPECT_GE(s, 0.0) << part;
    // Every part but "other" happened in this run: 20 steps, 2 measurements, 4 checkpoints.
    if (std::string(part) != "other") EXPECT_GT(s, 0.0) << part;
  }
  EXPECT_NEAR(sum_of_parts(profile), total, 1e-3 * total + 1e-6);
  // The loop's total is within the run's wall time (which adds setting up and the summary).
  EXPECT_LE(total, r.summary.at("wall_s").get<double>());

  // Without --profile: no profile.json.
  TempDir plain("no-profile");
  o.out = plain.str();
  o.profile = false;
  auto quiet = run_plan(plan, o);
  ASSERT_EQ(quiet.status, sink::rt::RunOutcome::Completed);
  EXPECT_FALSE(fs::exists(quiet.dir + "/profile.json"));
}

TEST(StepProfile, TrainSecondsLeaveOutMeasurementsAndCheckpoints) {
  TempDir out("train-s");
  auto plan = sinktest::plan_of("experiment train_s extends micro { train.checkpoint_every = 5  measure.every = 5 }");
  RunOptions o;
  o.out = out.str();
  o.progress = false;
  auto r = run_plan(plan, o);
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  const auto lines = read_metrics(r.dir);
  ASSERT_EQ(lines.size(), 4u);
  double previous = 0;
  for (size_t k = 0; k < lines.size(); ++k) {
    const double train_s = lines[k].at("train_s").get<double>();
    const double elapsed_s = lines[k].at("elapsed_s").get<double>();
    EXPECT_GT(train_s, previous) << "line " << k;
    EXPECT_LE(train_s, elapsed_s) << "line " << k;
    // After the first line, a measurement and a checkpoint came before: they are in elapsed_s only.
    if (k > 0) EXPECT_LT(train_s, elapsed_s) << "line " << k;
    previous = train_s;
  }
}
