// Which device a run trains on (runtime/training/device.h): the plan's kind, the GPU
// chosen by the process. On a machine without a GPU the choice is checked
// through its errors, which must name what was asked for and reach every
// process of a parallel sweep; tests/gpu/cuda_check checks the choice itself.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/training/device.h"
#include "runtime/training/run_dir.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

std::string error_of(sink::DeviceKind kind, int gpu) {
  try {
    sink::rt::training_device(kind, gpu);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Device, CpuRunsTrainOnTheCpuWhateverGpuIsAsked) {
  EXPECT_TRUE(sink::rt::training_device(sink::DeviceKind::cpu, -1).is_cpu());
  EXPECT_TRUE(sink::rt::training_device(sink::DeviceKind::cpu, 3).is_cpu());
}

TEST(Device, CudaWithoutAGpuNamesWhatWasAskedFor) {
  if (sink::rt::visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible: tests/gpu/cuda_check checks the choice";
  const std::string any = error_of(sink::DeviceKind::cuda, -1), second = error_of(sink::DeviceKind::cuda, 2);
  EXPECT_NE(any.find("train.device = cuda, but this LibTorch sees no CUDA device"), std::string::npos) << any;
  EXPECT_NE(second.find("--gpu 2: this LibTorch sees no CUDA device"), std::string::npos) << second;
}

// sinkc run --jobs 2 --gpu 1: sinkc hands --gpu to sinkc-runtime, which hands
// it to each run's process; each run records the failure with its reason.
TEST(Device, TheGpuOptionReachesEveryRunOfAParallelSweep) {
  if (!fs::exists(sinktest::sinkc_binary())) GTEST_SKIP() << sinktest::sinkc_binary() << " is not built";
  if (sink::rt::visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible: these runs would train";
  TempDir dir("gpu_option");
  sinktest::write_file(dir.file("spec.sink"),
                       "experiment on_gpu extends micro { train.device = cuda }\n"
                       "sweep seeds over on_gpu { train.seed in [1, 2] }\n");
  for (const std::string gpu : {"", "1"}) {
    const std::string out = dir.file("out" + gpu), log = dir.file("log" + gpu + ".txt");
    std::vector<std::string> argv = {
        sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", out, "--jobs", "2"};
    if (!gpu.empty()) argv.insert(argv.end(), {"--gpu", gpu});
    EXPECT_EQ(sinktest::wait_exit(sinktest::spawn(argv, log)), 1) << sinktest::read_file(log);
    int runs = 0;
    for (const auto& e : fs::directory_iterator(out)) {
      if (!e.is_directory() || e.path().filename().string()[0] == '.') continue;
      ++runs;
      const auto summary = nlohmann::json::parse(sinktest::read_file((e.path() / "summary.json").string()));
      EXPECT_EQ(summary.at("status"), "failed") << e.path();
      const std::string reason = summary.value("reason", "");
      const std::string expected =
          gpu.empty() ? "train.device = cuda, but" : "--gpu 1: this LibTorch sees no CUDA device";
      EXPECT_NE(reason.find(expected), std::string::npos) << e.path() << ": " << reason;
    }
    EXPECT_EQ(runs, 3) << "the base and its two seeds, in " << out;
  }
}

}  // namespace
