// Data-parallel training on c10d (Gloo on loopback): two workers give the
// loss curve and the checkpoint of one worker with the same global batch, a
// two-worker run resumed with one worker continues the same curve, and
// torchrun (Debian's python3-torch) starts the workers through its agent store.
#include <gtest/gtest.h>

#include <algorithm>
#include <arpa/inet.h>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>

#include "runtime/processes/process.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/model.h"
#include "runtime/training/run_dir.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "tests/source_paths.h"

using sinktest::TempDir;
namespace fs = std::filesystem;

namespace {

const char* kDataParallelSpec = "experiment dp extends micro { train { steps = 50  batch = 8 }  measure.every = 10 }\n";
const char* kLongSpec =
    "experiment dp extends micro { train { steps = 400  batch = 8  checkpoint_every = 20 }  measure.every = 20 }\n";

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// `sinkc run` as worker `rank` of `world`, with the environment torchrun sets.
pid_t start_worker(const TempDir& dir, const std::string& out, int rank, int world, int port,
                   std::vector<std::string> extra = {}, const std::string& gpu_features = "") {
  std::vector<std::string> argv = {"env",
                                   "SINKLAB_GPU_FEATURES=" + gpu_features,
                                   "RANK=" + std::to_string(rank),
                                   "LOCAL_RANK=" + std::to_string(rank),
                                   "WORLD_SIZE=" + std::to_string(world),
                                   "MASTER_ADDR=127.0.0.1",
                                   "MASTER_PORT=" + std::to_string(port),
                                   sinktest::sinkc_binary(),
                                   "run",
                                   dir.file("spec.sink"),
                                   "--out",
                                   out,
                                   "--no-progress"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return sinktest::spawn(argv, dir.file(fmt::format("{}-rank{}.txt", fs::path(out).filename().string(), rank)));
}

void train_workers(const TempDir& dir, const std::string& out, int world, std::vector<std::string> extra = {},
                   const std::string& gpu_features = "") {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) pids.push_back(start_worker(dir, out, r, world, port, extra, gpu_features));
  for (int r = 0; r < world; ++r)
    EXPECT_EQ(sinktest::wait_exit(pids[r]), 0)
        << sinktest::read_file(dir.file(fmt::format("{}-rank{}.txt", fs::path(out).filename().string(), r)));
}

std::string run_dir(const std::string& out) {
  for (const auto& e : fs::directory_iterator(out))
    if (e.is_directory() && e.path().filename().string().rfind("dp-", 0) == 0) return e.path().string();
  return "";
}

void expect_same_curve(const std::string& a, const std::string& b, size_t expected_lines) {
  auto ma = sink::rt::read_metrics(run_dir(a)), mb = sink::rt::read_metrics(run_dir(b));
  ASSERT_EQ(ma.size(), expected_lines);
  ASSERT_EQ(mb.size(), ma.size());
  for (size_t k = 0; k < ma.size(); ++k) {
    EXPECT_EQ(ma[k]["step"], mb[k]["step"]);
    for (const char* key : {"train_loss", "valid_loss"}) {
      const double x = ma[k][key].get<double>(), y = mb[k][key].get<double>();
      EXPECT_NEAR(y, x, 1e-5 * std::abs(x)) << key << " at step " << ma[k]["step"];
    }
  }
}

void expect_same_parameters(const std::string& a, const std::string& b) {
  auto ta = sink::rt::load_trained_model(run_dir(a)), tb = sink::rt::load_trained_model(run_dir(b));
  EXPECT_EQ(ta.step, tb.step);
  auto pa = ta.model->named_parameters(), pb = tb.model->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) {
    const auto& other = pb[item.key()];
    EXPECT_TRUE(torch::allclose(item.value(), other, 1e-4, 1e-6))
        << item.key() << " differs by " << (item.value() - other).abs().max().item<double>();
  }
}

}  // namespace

TEST(DataParallel, TwoWorkersTrainTheCurveAndCheckpointOfOne) {
  TempDir dir("dp");
  sinktest::write_file(dir.file("spec.sink"), kDataParallelSpec);
  ASSERT_EQ(sinktest::wait_exit(sinktest::spawn(
                {sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", dir.file("one"), "--no-progress"},
                dir.file("one.txt"))),
            0)
      << sinktest::read_file(dir.file("one.txt"));
  train_workers(dir, dir.file("two"), 2);
  const std::string rank1 = sinktest::read_file(dir.file("two-rank1.txt"));
  EXPECT_EQ(rank1.find("completed"), std::string::npos) << "a worker other than rank 0 printed a result:\n" << rank1;
  expect_same_curve(dir.file("one"), dir.file("two"), 5);
  expect_same_parameters(dir.file("one"), dir.file("two"));
  auto summary = sink::rt::RunDir::read_summary(run_dir(dir.file("two")));
  ASSERT_TRUE(summary);
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["workers"], 2);
}

TEST(DataParallel, ATwoWorkerRunResumedWithOneWorkerContinuesTheCurve) {
  TempDir dir("dp-resume");
  sinktest::write_file(dir.file("spec.sink"), kLongSpec);
  ASSERT_EQ(sinktest::wait_exit(sinktest::spawn(
                {sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", dir.file("one"), "--no-progress"},
                dir.file("one.txt"))),
            0);
  // Two workers, interrupted (Ctrl-C reaches both) once a few evaluations are written.
  const int port = free_port();
  const std::string out = dir.file("mixed");
  pid_t r0 = start_worker(dir, out, 0, 2, port), r1 = start_worker(dir, out, 1, 2, port);
  for (int k = 0; k < 1500; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(out) && !run_dir(out).empty() && sink::rt::read_metrics(run_dir(out)).size() >= 3) break;
  }
  kill(-r0, SIGINT);
  kill(-r1, SIGINT);
  const int rc0 = sinktest::wait_exit(r0), rc1 = sinktest::wait_exit(r1);
  ASSERT_TRUE(rc0 == 130 || rc0 == 0) << sinktest::read_file(dir.file("mixed-rank0.txt"));
  EXPECT_EQ(rc0, rc1) << "the workers stopped differently";
  auto summary = sink::rt::RunDir::read_summary(run_dir(out));
  ASSERT_TRUE(summary);
  if ((*summary)["status"] == "completed") GTEST_SKIP() << "the run completed before the interrupt reached it";
  ASSERT_EQ((*summary)["status"], "interrupted") << summary->dump();
  // One worker continues it.
  ASSERT_EQ(sinktest::wait_exit(sinktest::spawn(
                {sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", out, "--resume", "--no-progress"},
                dir.file("resumed.txt"))),
            0)
      << sinktest::read_file(dir.file("resumed.txt"));
  // The curve, not the weights: over 400 Adam steps rounding differences of
  // the sharded sums reach 1e-4 in weights whose gradients are near zero
  // (Adam divides by their size); the 50-step test above compares weights.
  expect_same_curve(dir.file("one"), out, 20);
}

// The step on fixed buffers under data parallelism, the path a captured step takes (its two halves around the
// gradients' average): two Gloo workers train the eager workers' losses bit for bit, through an interrupt and a
// resume.
TEST(DataParallel, TheStepOnFixedBuffersTrainsTheEagerWorkersCurve) {
  TempDir dir("dp-buffers");
  sinktest::write_file(dir.file("spec.sink"),
                       "experiment dp extends micro { train { steps = 160  batch = 8  log_every = 1  "
                       "checkpoint_every = 10 }  measure.every = 40 }\n");
  train_workers(dir, dir.file("eager"), 2);
  const std::string losses = sinktest::read_file(run_dir(dir.file("eager")) + "/losses.jsonl");
  ASSERT_EQ(std::count(losses.begin(), losses.end(), '\n'), 160);

  const int port = free_port();
  const std::string out = dir.file("buffers"), features = "cuda_graph=buffers";
  pid_t r0 = start_worker(dir, out, 0, 2, port, {}, features), r1 = start_worker(dir, out, 1, 2, port, {}, features);
  for (int k = 0; k < 1500; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(out) && !run_dir(out).empty() && !sink::rt::read_metrics(run_dir(out)).empty()) break;
  }
  kill(-r0, SIGINT);
  kill(-r1, SIGINT);
  const int rc0 = sinktest::wait_exit(r0), rc1 = sinktest::wait_exit(r1);
  ASSERT_TRUE(rc0 == 130 || rc0 == 0) << sinktest::read_file(dir.file("buffers-rank0.txt"));
  EXPECT_EQ(rc0, rc1) << "the workers stopped differently";
  auto summary = sink::rt::RunDir::read_summary(run_dir(out));
  ASSERT_TRUE(summary);
  const bool interrupted = (*summary)["status"] == "interrupted";
  if (interrupted) train_workers(dir, out, 2, {"--resume"}, features);
  summary = sink::rt::RunDir::read_summary(run_dir(out));
  ASSERT_TRUE(summary);
  EXPECT_EQ((*summary)["status"], "completed") << summary->dump();
  EXPECT_EQ((*summary).value("step", ""), "eager on fixed buffers, never captured (cuda_graph=buffers)");
  EXPECT_EQ(sinktest::read_file(run_dir(out) + "/losses.jsonl"), losses);
  if (!interrupted) GTEST_SKIP() << "the run completed before the interrupt reached it: no resume was tested";
}

// The Python whose torch this runtime was built with (SINKLAB_TORCH_PYTHON, set by the build), and its
// torch's major version: torchrun and the runtime's c10d client talk through the agent's store, so they
// must be one PyTorch.
std::pair<std::string, int> torch_python() {
  const char* python = getenv("SINKLAB_TORCH_PYTHON");
  if (!python || !*python || access(python, X_OK) != 0) return {"", 0};
  const std::string version = sink::rt::command_output(
      std::string(python) + " -c 'import torch.distributed.run, torch; print(torch.__version__)' 2>/dev/null");
  return {python, version.empty() ? 0 : std::atoi(version.c_str())};
}

TEST(DataParallel, TorchrunStartsTheWorkers) {
  const auto [python, torch_major] = torch_python();
  if (torch_major == 0)
    GTEST_SKIP() << "torchrun needs the Python of this build's LibTorch (SINKLAB_TORCH_PYTHON='"
                 << (getenv("SINKLAB_TORCH_PYTHON") ? getenv("SINKLAB_TORCH_PYTHON") : "")
                 << "') with torch.distributed";
  TempDir dir("dp-torchrun");
  sinktest::write_file(dir.file("spec.sink"), kDataParallelSpec);
  ASSERT_EQ(sinktest::wait_exit(sinktest::spawn(
                {sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--out", dir.file("one"), "--no-progress"},
                dir.file("one.txt"))),
            0);
  // Plans first (the front end), then torchrun starts the runtime on them.
  ASSERT_EQ(sinktest::wait_exit(
                sinktest::spawn({sinktest::sinkc_binary(), "compile", dir.file("spec.sink"), "-o", dir.file("plans")},
                                dir.file("compile.txt"))),
            0);
  const std::string runtime = (fs::path(sinktest::sinkc_binary()).parent_path() / "sinkc-runtime").string();
  std::vector<std::string> torchrun = {python, "-m", "torch.distributed.run"};
  if (torch_major >= 2) {
    // PyTorch 2.x's own spellings, nothing else.
    torchrun.insert(torchrun.end(),
                    {"--nproc-per-node", "2", "--no-python", "--master-port", std::to_string(free_port())});
  } else {
    // Debian's torchrun (torch 1.13) dies at start without --redirects/--tee, and knows the underscore spellings only.
    torchrun.insert(torchrun.end(), {"--nproc_per_node", "2", "--no_python", "--redirects", "1", "--tee", "1",
                                     "--master_port", std::to_string(free_port())});
  }
  torchrun.insert(torchrun.end(), {runtime, "run", dir.file("plans"), "--out", dir.file("torchrun"), "--no-progress"});
  const int rc = sinktest::wait_exit(sinktest::spawn(torchrun, dir.file("torchrun.txt")));
  ASSERT_EQ(rc, 0) << sinktest::read_file(dir.file("torchrun.txt"));
  expect_same_curve(dir.file("one"), dir.file("torchrun"), 5);
  expect_same_parameters(dir.file("one"), dir.file("torchrun"));

  // The shorthand, which calls torchrun itself.
  ASSERT_EQ(sinktest::wait_exit(sinktest::spawn({sinktest::sinkc_binary(), "run", dir.file("spec.sink"), "--workers",
                                                 "2", "--out", dir.file("shorthand"), "--no-progress"},
                                                dir.file("shorthand.txt"))),
            0)
      << sinktest::read_file(dir.file("shorthand.txt"));
  expect_same_curve(dir.file("one"), dir.file("shorthand"), 5);
  auto summary = sink::rt::RunDir::read_summary(run_dir(dir.file("shorthand")));
  ASSERT_TRUE(summary);
  EXPECT_EQ((*summary)["workers"], 2);
}
