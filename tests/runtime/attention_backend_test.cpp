// The attention backend interface: selection by plan and device, the
// reference backend's position term against hand-computed ALiBi attention,
// and the kernel a run writes against `sinkc compile`'s.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "kernels/cuda/emit_cuda.h"
#include "kernels/kernel_spec.h"
#include "kernels/llvm/emit_llvm.h"
#include "runtime/attention/attention_backend.h"
#include "runtime/training/model.h"
#include "runtime/training/train.h"
#include "runtime_test_util.h"
#include "tests/gpu_features_asked.h"
#include "tests/source_paths.h"

using namespace sink;
using namespace sink::rt;
namespace fs = std::filesystem;

namespace {

ModelConfig model_of(const std::string& body) {
  return sinktest::config_of("experiment x extends micro { " + body + " }").model;
}

TEST(AttentionBackend, ChosenByPlanAndDevice) {
  EXPECT_EQ(make_attention_backend(model_of("attention.backend = jit"), torch::kCPU)->name(), "jit");
  EXPECT_EQ(make_attention_backend(model_of("attention.backend = reference"), torch::kCPU)->name(), "reference");
  // On a CUDA device the generated kernels are the CUDA ones, from the same kernel description.
  const ModelConfig m = model_of("attention.backend = jit  model { pe = alibi  biases = kv }");
  auto cuda = make_attention_backend(m, torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(cuda->name(), "cuda");
  EXPECT_EQ(cuda->kernel_source(), kernels::emit_cuda(kernels::kernel_spec(m)));
  // A bf16 run's attention.cu is the source its training passes run: bf16 storage.
  EXPECT_EQ(cuda->kernel_source(sink::Precision::bf16),
            kernels::emit_cuda(kernels::kernel_spec(m), kernels::CudaStorage::BFloat16));
  EXPECT_EQ(cuda->kernel_file_name(), "attention.cu");
  // Plain causal softmax goes to LibTorch's SDPA where this LibTorch has one,
  // unless the generated kernels are asked for; anything more stays generated.
  const ModelConfig plain = model_of("attention.backend = jit");
  ASSERT_TRUE(kernels::kernel_spec(plain).plain_causal_softmax());
  EXPECT_EQ(make_attention_backend(plain, torch::Device(torch::kCUDA, 0))->name(), has_sdpa() ? "cuda+sdpa" : "cuda");
  EXPECT_EQ(make_attention_backend(plain, torch::Device(torch::kCUDA, 0), KernelChoice::Generated)->name(), "cuda");
  for (const char* more : {"model { pe = alibi }", "model { biases = k }", "loss.prefix = 4", "loss.window = 8",
                           "attention.sink_logit = learned", "attention.score = sigmoid(qk)"}) {
    const ModelConfig m2 = model_of(std::string("attention.backend = jit  ") + more);
    EXPECT_FALSE(kernels::kernel_spec(m2).plain_causal_softmax()) << more;
    EXPECT_EQ(make_attention_backend(m2, torch::Device(torch::kCUDA, 0))->name(), "cuda") << more;
  }
  // A visibility rule that checks pairs runs on the reference path on a GPU until its kernels have run on one
  // (runtime/gpu_features.h's row pair_rule_kernels), unless they are asked for; on the CPU, the JIT runs it.
  const ModelConfig kept = model_of("attention.backend = jit  loss { window = 8  window_keeps = 2 }");
  ASSERT_FALSE(kept.attention.rule.of_range_alone());
  EXPECT_EQ(make_attention_backend(kept, torch::kCPU)->name(), "jit");
  {
    const sinktest::GpuFeaturesAsked unset("");
    EXPECT_EQ(make_attention_backend(kept, torch::Device(torch::kCUDA, 0))->name(), "reference");
  }
  {
    const sinktest::GpuFeaturesAsked asked("pair_rule_kernels");
    EXPECT_EQ(make_attention_backend(kept, torch::Device(torch::kCUDA, 0))->name(), "cuda");
  }
  // A pairing without kernels says what to change.
  try {
    make_attention_backend(model_of("attention.backend = jit"), torch::Device(torch::kMeta));
    ADD_FAILURE() << "jit on the meta device was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("attention.backend = reference"), std::string::npos) << e.what();
  }
}

TEST(AttentionBackend, TheJitRunsTheKernelThatCompileDerives) {
  for (const char* body :
       {"", "attention { score = sigmoid(qk)  normalize = none }", "model { pe = alibi  biases = kv }"}) {
    const ModelConfig m = model_of(std::string("attention.backend = jit ") + body);
    EXPECT_EQ(make_attention_backend(m, torch::kCPU)->kernel_source(), kernels::emit_llvm(kernels::kernel_spec(m)))
        << body;
  }
  EXPECT_EQ(make_attention_backend(model_of("attention.backend = reference"), torch::kCPU)->kernel_source(), "");
}

// With q = 0 every logit is the position term alone: softmax over
// -slope_h |i - j| for the visible keys, computed here by hand in double.
TEST(AttentionBackend, ReferencePositionTermIsAlibiByDistance) {
  const ModelConfig m = model_of("model { pe = alibi  heads = 2 } attention.backend = reference");
  Transformer model(m);
  const int64_t T = 5, H = m.heads, dh = m.d_head;
  torch::Tensor g = model.distance_bias(T).to(torch::kDouble);
  auto q = torch::zeros({1, H, T, dh}, torch::kDouble);
  auto k = torch::randn({1, H, T, dh}, torch::kDouble);
  auto v = torch::randn({1, H, T, dh}, torch::kDouble);
  AttentionProbe probed;
  make_attention_backend(m, torch::kCPU)->attend({q, k, v, g, {}, {}, {}}, &probed);
  const torch::Tensor& probe = probed.attention;
  for (int64_t h = 0; h < H; ++h) {
    const double slope = std::pow(2.0, -8.0 * double(h + 1) / double(H));
    for (int64_t i = 0; i < T; ++i) {
      double z = 0;
      for (int64_t j = 0; j <= i; ++j) z += std::exp(-slope * double(i - j));
      for (int64_t j = 0; j < T; ++j) {
        const double want = j <= i ? std::exp(-slope * double(i - j)) / z : 0.0;
        EXPECT_NEAR(probe[0][h][i][j].item<double>(), want, 1e-12) << h << " " << i << " " << j;
      }
    }
  }
}

// A jit run writes the attention.ll its backend executes: the same text as
// `sinkc compile` writes for the spec.
TEST(AttentionBackend, ARunWritesTheKernelSinkcCompileWrites) {
  sinktest::TempDir dir("kernel_of_run");
  const std::string spec =
      "experiment ll extends micro { attention { score = elu(qk) + 1  normalize = sum } train.steps = 2 }\n";
  sinktest::write_file(dir.file("ll.sink"), spec);
  const std::string cmd = std::string(sinktest::sinkc_binary()) + " compile " + dir.file("ll.sink") + " -o " +
                          dir.file("compiled") + " --stdlib " + sinktest::source_dir() + "/stdlib > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  RunOptions o;
  o.out = dir.file("runs");
  o.progress = false;
  auto r = run_plan(sinktest::plan_of(spec), o);
  ASSERT_EQ(r.status, sink::rt::RunOutcome::Completed) << r.summary.dump(2);
  const std::string written = sinktest::read_file(r.dir + "/attention.ll");
  EXPECT_FALSE(written.empty());
  EXPECT_EQ(written, sinktest::read_file(dir.file("compiled/ll/attention.ll")));
}

}  // namespace
