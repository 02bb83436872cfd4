// The generated CUDA kernels (kernels/cuda/emit_cuda.h) where no GPU is:
//  - NVRTC compiles every variant to PTX for sm_80 and sm_90 and ptxas
//    assembles it (skipped where the CUDA toolkit is not installed);
//  - the same source, compiled by the host compiler and run with a fiber or
//    thread per CUDA thread (tests/kernels/cuda_emulator.h), through the runtime's
//    autograd wrapper, matches the reference path: forward and every
//    gradient of every paper variant, the later designs and random score
//    expressions, in float, double, bf16 and half storage (and the 16-bit
//    conversions exactly as LibTorch's); the probe and the sink
//    logit's share; and, with each block's threads taking turns in either
//    order, no result depends on the order (no race on shared memory)
//    and every thread of a block waits at the same barrier;
//    every buffer ends at an inaccessible page, so none of these kernels
//    reads or writes past a tensor's end (a kernel that does is named).
// On a GPU, scripts/gpu-check.sh runs the same comparisons on the device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/cuda/cuda_source.h"
#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/attention.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/cuda_driver.h"
#include "support/remove_tree.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/runtime/attention_oracle_expect.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;

namespace {

torch::Tensor emulated(const kernels::KernelSpec& spec, const AttentionCall& call) {
  return cuda_attention(spec, call, cpu_emulated_modules());
}

void compare_emulated(const Variant& v, double tol = 1e-5, torch::ScalarType dtype = torch::kFloat) {
  compare_with_reference(emulated, v, tol, dtype);
}

}  // namespace

TEST(CudaKernels, PaperVariantsMatchTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : paper_variants()) compare_emulated(v);
}

TEST(CudaKernels, DoubleKernelsMatchTheReferenceTightly) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : paper_variants()) compare_emulated(v, 1e-9, torch::kDouble);
}

TEST(CudaKernels, DesignsBeyondThePaperMatchTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : beyond_the_paper_variants()) compare_emulated(v);
  for (const auto& v : beyond_the_paper_variants()) compare_emulated(v, 1e-9, torch::kDouble);
}

TEST(CudaKernels, EveryScoreFunctionMatchesTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : score_function_variants()) compare_emulated(v), compare_emulated(v, 1e-9, torch::kDouble);
}

TEST(CudaKernels, EveryNormalizerMatchesTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : normalizer_variants()) compare_emulated(v), compare_emulated(v, 1e-9, torch::kDouble);
}

TEST(CudaKernels, RandomScoreExpressions) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : random_score_variants()) compare_emulated(v, 2e-5);
}

// Tiles wider than one block of threads, and rows that are not a multiple of the tiles.
std::vector<Variant> variants_across_tiles() {
  return {{.name = "softmax, T 150", .T = 150, .D = 8},
          {.name = "sigmoid, window 40, KV biases, ALiBi, T 100",
           .score = call("sigmoid", {var("qk")}),
           .normalize = "none",
           .window = 40,
           .position_bias = true,
           .key_bias = true,
           .learned_v = true,
           .T = 100,
           .D = 16},
          {.name = "softmax, d_head 128, T 40", .T = 40, .D = 128},
          {.name = "softpick, prefix 40, T 90", .normalize = "softpick", .prefix = 40, .T = 90},
          {.name = "softmax, window 30, sink logit, T 90", .window = 30, .T = 90, .sink_logit = true}};
}

TEST(CudaKernels, LongSequencesCrossManyTiles) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const auto& v : variants_across_tiles()) compare_emulated(v);
}

// The same comparisons with each block's threads taking turns, in both
// orders: a result that changed with the order would be a race on shared
// memory, which threads run together show only when the scheduler
// interleaves them badly.
TEST(CudaKernels, NoResultDependsOnTheOrderThreadsRunIn) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (ThreadOrder order : {ThreadOrder::Ascending, ThreadOrder::Descending}) {
    SCOPED_TRACE("threads " + name_of(order));
    for (const auto& v : variants_across_tiles()) compare_with_reference(emulated_in_order(order), v);
  }
}

// Every __syncthreads in the kernels is needed, and taking turns notices
// each one missing: without it, some output or gradient is wrong (or NaN)
// in one of the two orders. Taking turns makes this independent of the
// machine's cores and scheduler; threads run together noticed all six on a
// 2-core machine too, but only as the scheduler happened to interleave them.
TEST(CudaKernels, TakingTurnsCatchesEveryMissingBarrier) {
  SKIP_WITHOUT_HOST_COMPILER();
  const Variant v{.name = "softmax, T 100", .T = 100, .D = 8};  // several key and query tiles in every kernel
  const std::string source = kernels::emit_cuda(spec_of(v));
  const std::string barrier = "__syncthreads();";
  std::vector<size_t> barriers;
  for (size_t at = source.find(barrier); at != std::string::npos; at = source.find(barrier, at + 1))
    barriers.push_back(at);
  ASSERT_EQ(barriers.size(), 6u) << "two in each tiled kernel: before a tile is overwritten, after it is loaded";
  for (size_t n = 0; n < barriers.size(); ++n) {
    std::string without = source;
    without.replace(barriers[n], barrier.size(), "/* barrier removed */");
    bool noticed = false;
    for (ThreadOrder order : {ThreadOrder::Ascending, ThreadOrder::Descending}) {
      const rt::KernelModules modules{
          fmt::format("barrier {} removed, threads {}", n, name_of(order)),
          [&](const std::string&, const torch::Device&) -> std::shared_ptr<rt::KernelModule> {
            return std::make_shared<CpuEmulatedModule>(host_compiled(without), order);
          }};
      auto attend = [&](const kernels::KernelSpec& spec, const AttentionCall& call) {
        return cuda_attention(spec, call, modules);
      };
      noticed = noticed || !measure_against_reference(attend, v).passed();
    }
    EXPECT_TRUE(noticed) << "barrier " << n << " removed, and both orders still match the reference";
  }
}

// 16-bit storage (tests/runtime/attention_oracle.h, measure_sixteen_bit):
// within the reference's own rounding, forward and gradients.
TEST(CudaKernels, SixteenBitStorageIsWithinTheReferencesOwnRounding) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (auto storage : {torch::kBFloat16, torch::kHalf})
    for (const Variant& v :
         {Variant{.name = "softmax", .T = 20, .D = 16},
          Variant{.name = "sigmoid, no norm, KV biases",
                  .score = call("sigmoid", {var("qk")}),
                  .normalize = "none",
                  .key_bias = true,
                  .learned_v = true,
                  .T = 20,
                  .D = 16},
          Variant{.name = "softpick, window 5", .normalize = "softpick", .window = 5, .T = 20, .D = 16},
          Variant{.name = "very large scores", .T = 12, .q_scale = 30}}) {
      SCOPED_TRACE(v.name + " in " + c10::toString(storage));
      const SixteenBitResult r = measure_sixteen_bit(emulated, v, storage);
      EXPECT_TRUE(r.right_dtype);
      EXPECT_LT(r.forward, r.forward_allowed) << "the reference's own error: " << r.own;
      for (const auto& [name, error] : r.grads)
        EXPECT_LT(error, r.grads_allowed) << name << "; the reference's own gradients move " << r.grads_own;
    }
}

// The storage's load and store are the generated source's own integer
// conversions (no CUDA header): every 16-bit pattern reads as LibTorch reads
// it, and floats across every range (half's subnormals, exact ties between
// neighbours, overflow, infinities, NaN) store as LibTorch rounds them.
TEST(CudaKernels, SixteenBitStorageConvertsAsLibTorchDoes) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (auto [storage, dtype] :
       {std::pair{kernels::CudaStorage::BFloat16, torch::kBFloat16}, {kernels::CudaStorage::Float16, torch::kHalf}}) {
    SCOPED_TRACE(c10::toString(dtype));
    const std::string storage_source = kernels::cuda_storage(storage);
    const std::string source = "typedef float real;\n" + storage_source +
                               R"(extern "C" void read_all(const store_t* bits, float* read, long long n) {
  for (long long e = 0; e < n; ++e) read[e] = load(bits, e);
}
extern "C" void store_all(const float* values, store_t* stored, long long n) {
  for (long long e = 0; e < n; ++e) store(stored, e, values[e]);
})";
    auto compiled = host_compiled(source);
    auto read_all = reinterpret_cast<void (*)(const void*, float*, long long)>(compiled->kernel("read_all"));
    auto store_all = reinterpret_cast<void (*)(const float*, void*, long long)>(compiled->kernel("store_all"));

    auto patterns = torch::arange(-32768, 32768, torch::kInt).to(torch::kShort).view(dtype);
    auto exact = patterns.to(torch::kFloat);
    const auto ordered = std::get<0>(exact.to(torch::kDouble).sort());
    auto halfway = (ordered.slice(0, 1) + ordered.slice(0, 0, -1)) / 2;
    auto finite = torch::isfinite(halfway);
    halfway = halfway.masked_select(finite).to(torch::kFloat);
    torch::manual_seed(11);
    auto scattered = torch::randn({200000}) * torch::pow(2.0, torch::randint(-30, 20, {200000}).to(torch::kFloat));
    auto values = torch::cat(
        {exact.masked_select(torch::isfinite(exact)), halfway,
         torch::nextafter(halfway, torch::full_like(halfway, INFINITY)),
         torch::nextafter(halfway, torch::full_like(halfway, -INFINITY)), scattered,
         torch::tensor({65504.f, 65519.f, 65520.f, 65536.f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN, 0.f, -0.f})});
    auto read = torch::empty({65536}, torch::kFloat);
    auto stored = torch::empty({values.size(0)}, dtype);
    ASSERT_TRUE(values.is_contiguous());
    read_all(patterns.data_ptr(), read.data_ptr<float>(), 65536);
    auto nan_read = torch::isnan(exact);
    EXPECT_TRUE(torch::equal(torch::isnan(read), nan_read));
    EXPECT_TRUE(torch::equal(read.masked_select(~nan_read).view(torch::kInt),
                             exact.masked_select(~nan_read).view(torch::kInt)));
    store_all(values.data_ptr<float>(), stored.data_ptr(), values.size(0));
    auto want = values.to(dtype);
    auto nan_value = torch::isnan(values);
    EXPECT_TRUE(torch::equal(torch::isnan(stored.to(torch::kFloat)), nan_value));
    auto mismatched = (stored.view(torch::kShort) != want.view(torch::kShort)) & ~nan_value;
    EXPECT_EQ(mismatched.sum().item<int64_t>(), 0) << "first: " << values.masked_select(mismatched).slice(0, 0, 5);
  }
}

TEST(CudaKernels, ProbeAndSinkShareMatchTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  torch::manual_seed(5);
  for (const Variant& v : {Variant{.name = "softmax, KV biases", .key_bias = true, .learned_v = true, .T = 11},
                           Variant{.name = "sigmoid, prefix 3",
                                   .score = call("sigmoid", {var("qk")}),
                                   .normalize = "none",
                                   .prefix = 3,
                                   .T = 11},
                           Variant{.name = "softpick, ALiBi", .normalize = "softpick", .position_bias = true, .T = 11},
                           Variant{.name = "p-norm 2", .normalize = "pnorm", .p = 2, .T = 11},
                           Variant{.name = "sink logit, window 4", .window = 4, .T = 11, .sink_logit = true}}) {
    SCOPED_TRACE(v.name);
    const int64_t B = 2, H = 3;
    auto q = torch::randn({B, H, v.T, v.D}), k = torch::randn({B, H, v.T, v.D}), val = torch::randn({B, H, v.T, v.D});
    auto g = torch::randn({H, v.T}) * 0.5, ks = torch::randn({H, v.D}), vs = torch::randn({H, v.D}),
         sink = torch::randn({H});
    AttentionCall call{q,
                       k,
                       val,
                       v.position_bias ? g : torch::Tensor(),
                       v.key_bias ? ks : torch::Tensor(),
                       v.key_bias ? vs : torch::Tensor(),
                       v.sink_logit ? sink : torch::Tensor()};
    AttentionInputs ref_in{q, k, val, {}, {}, {}};
    if (v.position_bias) {
      auto i = torch::arange(v.T).view({v.T, 1}), j = torch::arange(v.T).view({1, v.T});
      ref_in.bias = g.index({torch::indexing::Slice(), (i - j).abs()}).unsqueeze(0);
    }
    if (v.key_bias) ref_in.k_star = ks, ref_in.v_star = vs;
    if (v.sink_logit) ref_in.sink_logit = sink;
    const AttentionConfig cfg = config_of(v);
    auto ref = reference_attention(cfg, ref_in, true);
    auto probe = cuda_probe(spec_of(v), cfg, call, cpu_emulated_modules());
    EXPECT_LT(rel_error(probe.attention, ref.probe), 1e-5);
    if (v.sink_logit) EXPECT_LT(rel_error(probe.sink_share, ref.sink_share), 1e-5);
  }
}

// A variant the kernels would get wrong must fail the comparison: a wrong
// tile bound in the forward (the kernel skips the last key of a tile).
TEST(CudaKernels, TheEmulationCatchesAWrongKernel) {
  SKIP_WITHOUT_HOST_COMPILER();
  Variant v{.name = "softmax, T 40", .T = 40};
  const auto spec = spec_of(v);
  std::string source = kernels::emit_cuda(spec);
  const std::string exact = "const int n = (int)imin(FWD_KEYS, block_hi - kb + 1);";
  ASSERT_NE(source.find(exact), std::string::npos);
  source.replace(source.find(exact), exact.size(), "const int n = (int)imin(FWD_KEYS, block_hi - kb + 1) - 1;");
  auto module = cpu_emulated_modules().load(source, torch::kCPU);
  torch::manual_seed(1);
  auto q = torch::randn({1, 2, v.T, v.D}), k = torch::randn({1, 2, v.T, v.D}), val = torch::randn({1, 2, v.T, v.D});
  // (its own loader name: the runtime keeps modules per variant and loader, and must not reuse the right kernel)
  const rt::KernelModules broken_loader{"wrong tile bound",
                                        [&](const std::string&, const torch::Device&) { return module; }};
  auto broken = cuda_attention(spec, {q, k, val, {}, {}, {}, {}}, broken_loader);
  auto ref = reference_attention(config_of(v), {q, k, val, {}, {}, {}}, false).out;
  EXPECT_GT(rel_error(broken, ref), 1e-3);
}

// A __syncthreads that only some of a block's threads reach is undefined on
// a GPU (it may hang), though the emulation's result can be right: taking
// turns names it. (Every other taking-turns test is the proof that the
// generated kernels have none.)
TEST(CudaKernels, TakingTurnsNamesABarrierOnlySomeThreadsReach) {
  SKIP_WITHOUT_HOST_COMPILER();
  const Variant v{.name = "softmax, T 40", .T = 40};
  std::string source = kernels::emit_cuda(spec_of(v));
  const std::string barrier = "__syncthreads();";
  ASSERT_NE(source.find(barrier), std::string::npos);
  source.replace(source.find(barrier), barrier.size(),
                 "if (threadIdx.x % 2) {\n__syncthreads();\n} else {\n__syncthreads();\n}");
  const rt::KernelModules divergent{"divergent barrier", [&](const std::string&, const torch::Device&) {
                                      return std::make_shared<CpuEmulatedModule>(host_compiled(source),
                                                                                 ThreadOrder::Ascending);
                                    }};
  torch::manual_seed(1);
  auto q = torch::randn({1, 2, v.T, v.D}), k = torch::randn({1, 2, v.T, v.D}), val = torch::randn({1, 2, v.T, v.D});
  try {
    cuda_attention(spec_of(v), {q, k, val, {}, {}, {}, {}}, divergent);
    ADD_FAILURE() << "the divergent barrier went unnoticed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("sink_forward: threads of one block waited at different barriers"),
              std::string::npos)
        << e.what();
  }
}

// A kernel that reads past a tensor's end stops the emulation with a message
// naming the kernel and the argument (every other test here is the proof
// that the generated kernels never do). The broken forward drops the clamp
// that keeps a block's spare threads on the last row.
TEST(CudaKernelsDeathTest, AReadPastATensorsEndIsNamed) {
  SKIP_WITHOUT_HOST_COMPILER();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Variant v{.name = "softmax, T 40", .T = 40};
  std::string source = kernels::emit_cuda(spec_of(v));
  const std::string clamp = "const long long row = is_row ? i : T - 1;";
  ASSERT_NE(source.find(clamp), std::string::npos);
  source.replace(source.find(clamp), clamp.size(), "const long long row = i;");
  const rt::KernelModules unclamped{"unclamped rows", [&](const std::string&, const torch::Device&) {
                                      return cpu_emulated_modules().load(source, torch::kCPU);
                                    }};
  torch::manual_seed(1);
  auto q = torch::randn({1, 2, v.T, v.D}), k = torch::randn({1, 2, v.T, v.D}), val = torch::randn({1, 2, v.T, v.D});
  EXPECT_DEATH(cuda_attention(spec_of(v), {q, k, val, {}, {}, {}, {}}, unclamped),
               "out-of-bounds access by sink_forward, argument q: byte [0-9]+ of a 2560-byte buffer");
}

// NVRTC -> PTX -> ptxas for the GPUs the paper's scale runs on. PTX is
// what the driver loads; ptxas proves it assembles for the real targets.
TEST(CudaKernels, EveryVariantCompilesForSm80AndSm90) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  if (std::system("command -v ptxas > /dev/null 2>&1") != 0) GTEST_SKIP() << "ptxas not on the PATH";
  auto dir = std::filesystem::temp_directory_path() / ("sinklab-ptx-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::vector<std::pair<std::string, std::string>> sources;  // name, source
  auto all = paper_variants();
  for (auto& v : beyond_the_paper_variants()) all.push_back(v);
  for (auto& v : random_score_variants()) all.push_back(v);
  for (const auto& v : all) sources.push_back({v.name, kernels::emit_cuda(spec_of(v))});
  for (const char* name : {"softmax", "KV biases", "softpick", "sink logit", "d_head 64, T 19 (key groups of 2)"})
    for (const auto& v : all)
      if (v.name == name) {
        sources.push_back({v.name + " (bf16)", kernels::emit_cuda(spec_of(v), kernels::CudaStorage::BFloat16)});
        sources.push_back({v.name + " (half)", kernels::emit_cuda(spec_of(v), kernels::CudaStorage::Float16)});
        auto f64 = spec_of(v);
        f64.f64 = true;
        sources.push_back({v.name + " (double)", kernels::emit_cuda(f64)});
      }
  int assembled = 0;
  for (const auto& [name, source] : sources)
    for (int arch : {80, 90}) {
      SCOPED_TRACE(name + " sm_" + std::to_string(arch));
      std::string ptx;
      ASSERT_NO_THROW(ptx = cuda::compile_ptx(source, arch));
      ASSERT_NE(ptx.find(".entry sink_backward_keys"), std::string::npos);
      const auto file = dir / "kernel.ptx";
      std::ofstream(file) << ptx;
      const std::string command =
          "ptxas -arch=sm_" + std::to_string(arch) + " " + file.string() + " -o " + (dir / "kernel.cubin").string();
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
      ++assembled;
    }
  sink::remove_tree(dir);
  EXPECT_EQ(assembled, 2 * static_cast<int>(sources.size()));
}

// What a GPU loads: NVRTC's own machine code (an ELF for EM_CUDA, 190) for
// an architecture it knows, so the driver translates nothing and an older
// driver than NVRTC loads it; PTX for the newest it knows for a GPU newer
// than NVRTC.
TEST(CudaKernels, GpusLoadMachineCodeOrPtxForAnArchitectureNvrtcKnows) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const std::string source =
      kernels::emit_cuda(spec_of(Variant{.name = "softmax", .T = 8}), kernels::CudaStorage::Float16);
  for (int arch : {80, 90}) {
    const std::string image = cuda::loadable_image(source, arch);
    ASSERT_GT(image.size(), 64u);
    EXPECT_EQ(image.substr(0, 4),
              "\x7f"
              "ELF")
        << "sm_" << arch;
    uint16_t machine = 0;
    std::memcpy(&machine, image.data() + 18, sizeof machine);
    EXPECT_EQ(machine, 190) << "sm_" << arch;
    for (const char* kernel : {"sink_forward", "sink_backward_keys", "sink_probe"})
      EXPECT_NE(image.find(kernel), std::string::npos) << kernel;
  }
  const std::string future = cuda::loadable_image(source, 990);
  EXPECT_NE(future.find(".target sm_"), std::string::npos) << future.substr(0, 200);
  EXPECT_NE(future.find(".entry sink_forward"), std::string::npos);
}

// NVRTC is found where a GPU node keeps it: a named file first, then the
// loader's path, then the toolkit ($CUDA_HOME) and the nvidia/ wheels of a
// pip PyTorch.
TEST(CudaKernels, NvrtcIsLookedForWhereGpuNodesKeepIt) {
  std::string why;
  if (!cuda::nvrtc_available(&why) && why.find("built without the CUDA toolkit") != std::string::npos)
    GTEST_SKIP() << why;
  const auto home = std::filesystem::temp_directory_path() / ("sinklab-cuda-home-" + std::to_string(getpid()));
  std::filesystem::create_directories(home / "lib64");
  std::ofstream(home / "lib64" / "libnvrtc.so.13.0.1") << "";
  setenv("CUDA_HOME", home.c_str(), 1);
  setenv("SINKLAB_NVRTC", "/opt/own/libnvrtc.so", 1);
  const auto candidates = cuda::nvrtc_candidates();
  unsetenv("SINKLAB_NVRTC");
  unsetenv("CUDA_HOME");
  sink::remove_tree(home);
  ASSERT_GE(candidates.size(), 5u);
  EXPECT_EQ(candidates[0], "/opt/own/libnvrtc.so");
  EXPECT_EQ(candidates[1], "libnvrtc.so");
  const auto in_home =
      std::find(candidates.begin(), candidates.end(), (home / "lib64" / "libnvrtc.so.13.0.1").string());
  ASSERT_NE(in_home, candidates.end());
  EXPECT_GT(in_home, std::find(candidates.begin(), candidates.end(), "libnvrtc.so.12"))
      << "the loader's path comes first";
}

// A kernel NVRTC compiled is kept on disk, named by its content, target and
// NVRTC's version: the next process (here, the next call) loads it without
// compiling; another source or architecture compiles again.
TEST(CudaKernels, CompiledKernelsAreKeptOnDiskByContent) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const auto dir = std::filesystem::temp_directory_path() / ("sinklab-cuda-cache-" + std::to_string(getpid()));
  sink::remove_tree(dir);
  const char* before_env = std::getenv("SINKLAB_KERNEL_CACHE");
  const std::string saved = before_env ? before_env : "";
  setenv("SINKLAB_KERNEL_CACHE", dir.c_str(), 1);
  const std::string source = kernels::emit_cuda(
      spec_of(Variant{.name = "sigmoid", .score = call("sigmoid", {var("qk")}), .normalize = "none", .T = 8}));
  const int before = cuda::nvrtc_compilations();
  const std::string first = cuda::loadable_image(source, 80);
  EXPECT_EQ(cuda::nvrtc_compilations(), before + 1);
  EXPECT_EQ(cuda::loadable_image(source, 80), first);
  EXPECT_EQ(cuda::nvrtc_compilations(), before + 1) << "the second call compiled again";
  cuda::loadable_image(source, 90);
  EXPECT_EQ(cuda::nvrtc_compilations(), before + 2);
  int cubins = 0, temporaries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    cubins += entry.path().extension() == ".cubin";
    temporaries += entry.path().extension() == ".tmp";
  }
  EXPECT_EQ(cubins, 2);
  EXPECT_EQ(temporaries, 0);
  if (before_env)
    setenv("SINKLAB_KERNEL_CACHE", saved.c_str(), 1);
  else
    unsetenv("SINKLAB_KERNEL_CACHE");
  sink::remove_tree(dir);
}
