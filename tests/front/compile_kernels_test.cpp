// `sinkc compile` writes attention.ll next to plan.toml; the runtime derives
// its kernel from the plan.toml it reads. Both must be the same text for
// every run of every spec, or attention.ll would not be what a run executes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sstream>
#include <unistd.h>

#include "kernels/cuda/emit_cuda.h"
#include "kernels/kernel_spec.h"
#include "kernels/llvm/emit_llvm.h"
#include "spec_helpers.h"
#include "support/remove_tree.h"
#include "tests/file_text.h"
#include "tests/source_paths.h"

namespace {

using sinktest::slurp;

namespace fs = std::filesystem;

TEST(CompiledKernels, AttentionLlIsWhatTheRuntimeDerivesFromPlanToml) {
  // Named by process: two checkouts' tests running at once on one machine
  // (a developer's build beside CI's) would otherwise remove each other's files.
  const fs::path out = fs::path(::testing::TempDir()) / ("sinklab-compile-kernels-" + std::to_string(getpid()));
  sink::remove_tree(out);
  int runs = 0;
  std::set<std::string> variants;
  for (const auto& spec : spectest::spec_files()) {
    const fs::path dir = out / fs::path(spec).stem();
    const std::string cmd =
        std::string(sinktest::sinkc_binary()) + " compile " + spec + " -o " + dir.string() + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    for (const auto& e : fs::directory_iterator(dir)) {
      const sink::Plan plan = sink::read_plan((e.path() / "plan.toml").string());
      const sink::RunConfig cfg = sink::read_config(plan);
      const auto kernel = sink::kernels::kernel_spec(cfg.model);
      EXPECT_EQ(slurp(e.path() / "attention.ll"), sink::kernels::emit_llvm(kernel)) << e.path();
      EXPECT_EQ(slurp(e.path() / "attention.cu"),
                sink::kernels::emit_cuda(kernel, sink::kernels::training_storage(cfg.train.precision)))
          << e.path();
      variants.insert(kernel.describe());
      ++runs;
    }
  }
  // Every spec compiled, and the specs between them cover many kernel variants.
  EXPECT_GT(runs, 100);
  EXPECT_GT(variants.size(), 20u);
  sink::remove_tree(out);
}

// Plans committed for machines without the front end (a GPU node): each is
// what `sinkc compile` writes today, or the schema moved on without them.
// Regenerate as plans/README.md says.
// The fixture with a loss logged at every step, for gpu-check's captured_step (plans/README.md).
constexpr const char* kCapturedStepCheck = "--set train.steps=40 --set train.log_every=1 --set measure.every=20";

TEST(CompiledKernels, CommittedPlansAreCurrent) {
  const fs::path out = fs::path(::testing::TempDir()) / ("sinklab-committed-plans-" + std::to_string(getpid()));
  sink::remove_tree(out);
  struct Committed {
    std::string spec, options, run, plan;
  };
  std::vector<Committed> committed = {
      {"tests/plan/fixtures/fixture.sink", "", "fixture", "tests/plan/fixtures/fixture.plan.toml"},
      {"tests/plan/fixtures/fixture.sink", kCapturedStepCheck, "fixture", "plans/gpu_captured_step/fixture/plan.toml"},
      {"bench/gpu_60m.sink", "", "gpu_60m_throughput", "plans/gpu_throughput/gpu_60m_throughput/plan.toml"},
      {"bench/gpu_60m.sink", "", "gpu_60m_sigmoid", "plans/gpu_throughput/gpu_60m_sigmoid/plan.toml"},
  };
  // The natural-text call: the emergence ladder as it is (its runs are stopped when the call's budget ends).
  for (const char* run : {"ladder_softmax_d256", "ladder_softmax_d384", "ladder_softmax_d384_lr2x",
                          "ladder_softmax_d512", "ladder_sigmoid_d384"})
    committed.push_back(
        {"specs/text_emergence_ladder.sink", "", run, std::string("plans/gpu_natural_call/") + run + "/plan.toml"});
  const std::string source = sink::testing::source_dir();
  // The text table at GPU scale, every run of it (plans/gpu_text_table/NAME.seed=K/).
  for (const auto& entry : fs::directory_iterator(fs::path(source) / "plans/gpu_text_table")) {
    const std::string run = entry.path().filename().string();
    committed.push_back({"specs/text_table_gpu.sink", "", run, "plans/gpu_text_table/" + run + "/plan.toml"});
  }
  ASSERT_GE(committed.size(), 4u + 5u + 40u);
  std::map<std::string, fs::path> compiled;  // each spec with its options compiled once, into a folder of its own
  for (const auto& [spec, options, run, plan] : committed) {
    const std::string key = spec + " " + options;
    if (!compiled.count(key)) {
      const fs::path folder = out / std::to_string(compiled.size());
      const std::string cmd = "cd " + source + " && " + sinktest::sinkc_binary() + " compile " + key + " -o " +
                              folder.string() + " > /dev/null";
      ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
      compiled[key] = folder;
    }
    EXPECT_EQ(slurp(compiled[key] / run / "plan.toml"), slurp(fs::path(source) / plan))
        << plan << " is not what `sinkc compile " << spec << "` writes now; regenerate it";
  }
  sink::remove_tree(out);
}

}  // namespace
