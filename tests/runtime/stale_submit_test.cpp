// A run trained under an older numerics version (plan/numerics_version.h) is
// not done for `sinkc submit`: it is submitted again, and its task retrains
// it (its results set aside in RUN/stale/, as `sinkc run --retrain-stale`
// does). `sinkc bisect`'s side is in bisect_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime_test_util.h"
#include "tests/source_paths.h"

using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

fs::path run_dir(const fs::path& out, const std::string& name) {
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind(name + "-", 0) == 0) return e.path();
  return {};
}

}  // namespace

TEST(StaleRuns, SubmitResubmitsARunTrainedUnderOlderNumerics) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  TempDir dir("stale-submit");
  sinktest::write_file(dir.file("spec.sink"), "experiment a extends micro { train.steps = 4  measure.every = 2 }\n");
  const std::string out = dir.file("out");
  ASSERT_EQ(sinktest::sinkc_status({"run", dir.file("spec.sink"), "--out", out, "--no-progress"}, dir.file("run.txt")),
            0)
      << sinktest::read_file(dir.file("run.txt"));
  const auto submit = [&](const std::string& tag) {
    EXPECT_EQ(
        sinktest::sinkc_status({"submit", dir.file("spec.sink"), "--slurm", "--dry-run", "--out", out}, dir.file(tag)),
        0);
    return sinktest::read_file(dir.file(tag));
  };
  const std::string current = submit("current.txt");
  EXPECT_NE(current.find("nothing to submit: 1 run already completed"), std::string::npos) << current;

  const fs::path run = run_dir(out, "a");
  ASSERT_FALSE(run.empty());
  auto summary = nlohmann::json::parse(sinktest::read_file((run / "summary.json").string()));
  summary["numerics_version"] = 1;
  sinktest::write_file((run / "summary.json").string(), summary.dump(2));
  const std::string stale = submit("stale.txt");
  EXPECT_NE(stale.find("1 task (0 already completed)"), std::string::npos) << stale;
  EXPECT_NE(stale.find("--retrain-stale"), std::string::npos) << "the task would keep the stale run:\n" << stale;
}
