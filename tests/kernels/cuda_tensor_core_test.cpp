// The tensor-core kernels (kernels/cuda/*.cuh: bf16 and fp16 storage, d_head a multiple of 16) without a
// GPU: on the CPU emulation against the reference path, every barrier and copy wait needed; compiled by
// NVRTC to sm_80 and sm_90 machine code without register spills and with tensor-core instructions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/cuda_driver.h"
#include "runtime/attention/cuda_tuning.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/kernels/cuda_machine_code.h"
#include "tests/runtime/attention_oracle_expect.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;
using namespace sink::testing_machine_code;

namespace {

// Whether byte `at` of a source without the Hopper kernels (SINK_WGMMA 0) lies in a branch the preprocessor drops
// there: one under "#if ... SINK_WGMMA" (the Hopper forms' own code, which the text of every kernel carries), up to
// its #elif, #else or #endif.
bool only_on_hopper(const std::string& source, size_t at) {
  int depth = 0, dropped_at = -1;  // (the depth of the dropped branch's #if; -1: none open)
  for (size_t line = 0; line < at && line != std::string::npos; line = source.find('\n', line) + 1) {
    const std::string_view text(source.data() + line, source.find('\n', line) - line);
    if (text.starts_with("#if")) {
      ++depth;
      if (dropped_at < 0 && text.find("SINK_WGMMA") != std::string_view::npos) dropped_at = depth;
    } else if (text.starts_with("#endif")) {
      if (dropped_at == depth) dropped_at = -1;
      --depth;
    } else if ((text.starts_with("#else") || text.starts_with("#elif")) && dropped_at == depth) {
      dropped_at = -1;
    }
  }
  return dropped_at >= 0;
}

}  // namespace

// The tensor-core kernels (16-bit storage, d_head a multiple of 16) on the emulation: every variant above at
// their sizes (tensor_core_variants), forward and every gradient within the reference's own rounding, its
// threads taking turns (the default order and, for a few, the reverse and all together). A third of them run
// the fused backward instead of the two backward kernels (as a tuned launcher may where fused_backward is on), its
// first or last shape.
TEST(CudaKernels, TensorCoreKernelsMatchTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  const auto variants = tensor_core_variants();
  for (size_t n = 0; n < variants.size(); ++n) {
    const auto& [v, half] = variants[n];
    const auto storage = half ? torch::kHalf : torch::kBFloat16;
    const auto layout = half ? kernels::CudaStorage::Float16 : kernels::CudaStorage::BFloat16;
    const auto spec = spec_of(v);
    std::optional<KernelCacheHere> cache;             // (the table a fused launcher reads)
    std::optional<sinktest::GpuFeaturesAsked> asked;  // (and the feature that lets it run the table's fused choice)
    std::string fused_shape;
    if (n % 3 == 2) {
      const auto fused = kernels::cuda_fused_candidates(spec, layout);
      ASSERT_FALSE(fused.empty()) << v.name;
      const kernels::CudaTiles& keys = n % 2 == 0 ? fused.front() : fused.back();
      const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, layout);
      cache.emplace("sinklab-tensor-fused");
      asked.emplace("fused_backward");
      rt::remember_tiles(rt::tuning_key("CPU emulation", spec, layout), {defaults, defaults, defaults, keys});
      fused_shape = fmt::format(", fused backward {}x{}", keys.key_rows, keys.key_queries);
    }
    SCOPED_TRACE(v.name + " in " + c10::toString(storage) + fused_shape);
    ASSERT_TRUE(kernels::cuda_tiles(spec, layout).tensor_cores);
    const ThreadOrder order = n % 7 == 3   ? ThreadOrder::Descending
                              : n % 7 == 5 ? ThreadOrder::Together
                                           : ThreadOrder::Ascending;
    const SixteenBitResult r = measure_sixteen_bit(emulated_in_order(order), v, storage);
    EXPECT_TRUE(r.right_dtype);
    EXPECT_LT(r.forward, r.forward_allowed) << "the reference's own error: " << r.own;
    for (const auto& [name, error] : r.grads)
      EXPECT_LT(error, r.grads_allowed) << name << "; the reference's own gradients move " << r.grads_own;
  }
}

namespace {

// Tensor-core instructions (HMMA) per kernel in a cubin's disassembly.
std::map<std::string, int> tensor_instructions(const std::string& nvdisasm, const std::string& cubin) {
  std::map<std::string, int> out;
  for (const auto& [kernel, code] : disassemble(nvdisasm, cubin))
    out[kernel] = static_cast<int>(
        std::count_if(code.begin(), code.end(), [](const std::string& i) { return operation_of(i) == "HMMA"; }));
  return out;
}

}  // namespace

// The tensor-core kernels compiled by NVRTC to machine code for sm_80 and sm_90, with the assembler's
// verbose report: no kernel spills registers to local memory (the report's registers and shared memory per
// kernel are printed), and the forward's and both backward kernels' machine code holds tensor-core
// instructions (HMMA, read by nvdisasm from PyPI's nvidia-cuda-nvdisasm).
TEST(CudaKernels, TensorCoreKernelsUseTensorCoresAndSpillNothing) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const std::string nvdisasm = find_nvdisasm();
  const ExprNode sig = call("sigmoid", {var("qk")});
  std::vector<std::pair<Variant, kernels::CudaStorage>> cases;
  for (int64_t d : {64, 96, 128}) {
    cases.push_back({{.name = "softmax", .D = d}, kernels::CudaStorage::BFloat16});
    cases.push_back(
        {{.name = "sigmoid, no norm", .score = sig, .normalize = "none", .D = d}, kernels::CudaStorage::BFloat16});
    cases.push_back({{.name = "softmax, ALiBi, window, prefix, KV biases, sink logit",
                      .prefix = 8,
                      .window = 40,
                      .position_bias = true,
                      .key_bias = true,
                      .learned_v = true,
                      .D = d,
                      .sink_logit = true},
                     kernels::CudaStorage::Float16});
    cases.push_back({{.name = "softmax, ALiBi", .position_bias = true, .D = d}, kernels::CudaStorage::BFloat16});
    cases.push_back({{.name = "softpick", .normalize = "softpick", .D = d}, kernels::CudaStorage::BFloat16});
    cases.push_back({{.name = "p-norm 2", .normalize = "pnorm", .p = 2, .D = d}, kernels::CudaStorage::BFloat16});
  }
  for (const auto& [v, storage] : cases)
    for (int arch : {80, 90})
      for (int source = 0; source < 3; ++source) {  // the default tiles; with the table's gradient; fused dQ
        const bool position_grad = source == 1, fused = source == 2;
        if (position_grad && !v.position_bias) continue;
        if (fused && (v.D != 64 || v.position_bias)) continue;  // (a few, the sm_90 bulk reductions among them)
        const auto spec = spec_of(v);
        SCOPED_TRACE(fmt::format("{}, d_head {}, sm_{}{}{}", v.name, v.D, arch, position_grad ? ", dg" : "",
                                 fused ? ", fused dQ" : ""));
        kernels::CudaTiles tiles =
            fused ? kernels::cuda_fused_candidates(spec, storage).at(0) : kernels::cuda_tiles(spec, storage);
        tiles.position_grad = position_grad;
        std::string report;
        const std::string cubin = cuda::compile_cubin(kernels::emit_cuda(spec, storage, tiles), arch, &report);
        const auto resources = read_assembler_report(report);
        ASSERT_EQ(resources.size(), 5u) << report;
        for (const auto& [kernel, r] : resources) {
          std::printf("  sm_%d d_head %3lld %-60s %-22s %3d registers, %6d bytes shared, spills %d/%d\n", arch,
                      static_cast<long long>(v.D),
                      (v.name + (position_grad ? ", dg"
                                 : fused       ? ", fused"
                                               : ""))
                          .c_str(),
                      kernel.c_str(), r.registers, r.shared_bytes + kernels::cuda_shared_bytes(tiles, v.D).of(kernel),
                      r.spill_stores, r.spill_loads);
          EXPECT_EQ(r.spill_stores, 0) << kernel;
          EXPECT_EQ(r.spill_loads, 0) << kernel;
          EXPECT_GT(r.registers, 0) << kernel;
        }
        if (nvdisasm.empty()) continue;
        const auto hmma = tensor_instructions(nvdisasm, cubin);
        for (const char* kernel : {"sink_forward", "sink_backward_keys", "sink_backward_queries"})
          EXPECT_GT(hmma.count(kernel) ? hmma.at(kernel) : 0, 0) << kernel << " has no HMMA";
        EXPECT_EQ(hmma.count("sink_probe") ? hmma.at("sink_probe") : -1, 0) << "the disassembly was not read";
      }
  if (nvdisasm.empty())
    GTEST_SKIP() << "registers checked; no nvdisasm (SINKLAB_NVDISASM, the PATH or the nvidia-cuda-nvdisasm wheel "
                    "of SINKLAB_PYTHON) to read the machine code for HMMA";
}

// Every barrier and every wait for the asynchronous copies in the tensor-core kernels is needed, and the
// emulation notices each one missing (a stage read before its copies landed or overwritten while another warp
// still reads it): with it removed, some output or gradient leaves the reference's rounding in one of the two
// orders.
TEST(CudaKernels, TensorCoreKernelsNeedEveryBarrierAndWait) {
  SKIP_WITHOUT_HOST_COMPILER();
  const Variant v{.name = "softmax, T 150, d_head 32", .T = 150, .D = 32};  // 3 blocks, 3 key tiles
  const auto spec = spec_of(v);
  const auto storage = kernels::CudaStorage::BFloat16;
  // The default tiles' source, and one whose backward_keys sums dQ too (as a tuned launcher reads it from the
  // table): the same kernel text, so the k-th barrier is the same one in both. Each barrier must be needed by
  // one of them (the fused block's runs only in the second, backward_queries's only in the first).
  const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
  const kernels::CudaTiles fused = kernels::cuda_fused_candidates(spec, storage).at(0);
  const std::string sources[2] = {kernels::emit_cuda(spec, storage, defaults),
                                  kernels::emit_cuda(spec, storage, fused)};
  const std::string barrier = "__syncthreads();";
  auto barriers = [&](const std::string& source) {  // those of the tiled kernels, not backward_rows's nor Hopper's
    std::vector<size_t> at;
    for (size_t a = source.find(barrier); a != std::string::npos; a = source.find(barrier, a + 1))
      if ((source.rfind("__global__", a) > source.rfind("sink_backward_rows", a) ||
           source.rfind("sink_backward_rows", a) == std::string::npos) &&
          !only_on_hopper(source, a))
        at.push_back(a);
    return at;
  };
  const std::vector<size_t> at[2] = {barriers(sources[0]), barriers(sources[1])};
  ASSERT_EQ(at[0].size(), at[1].size());
  ASSERT_GE(at[0].size(), 2u) << "await_stage's (one a tile) and the fused block's";
  auto passes = [&](const std::string& broken, int which, ThreadOrder order) {
    std::optional<KernelCacheHere> cache;             // (the table that makes the launcher run the fused backward)
    std::optional<sinktest::GpuFeaturesAsked> asked;  // (and the rows that let it, on sm_90)
    if (which == 1) {
      cache.emplace("sinklab-barriers");
      asked.emplace(sinktest::kFusedBackwardOn90);
      rt::remember_tiles(rt::tuning_key("CPU emulation", spec, storage), {defaults, defaults, defaults, fused});
    }
    // (named by the source: the runtime keeps a launcher per variant and loader name)
    const rt::KernelModules modules{
        fmt::format("tensor cores {:x}, {}", std::hash<std::string>{}(broken), name_of(order)),
        [&](const std::string&, const torch::Device&) -> std::shared_ptr<rt::KernelModule> {
          // (the fused source as on sm_90, its dQ share through the copy engine's bulk reductions)
          return std::make_shared<CpuEmulatedModule>(host_compiled(broken), order, which == 1 ? 90 : 80);
        }};
    auto attend = [&](const kernels::KernelSpec& s, const AttentionCall& call) {
      return cuda_attention(s, call, modules);
    };
    return measure_sixteen_bit(attend, v, torch::kBFloat16).passed();
  };
  auto both_orders_pass = [&](const std::string& source, int which) {
    return passes(source, which, ThreadOrder::Ascending) && passes(source, which, ThreadOrder::Descending);
  };
  for (int which : {0, 1}) ASSERT_TRUE(both_orders_pass(sources[which], which)) << "the intact kernels " << which;
  for (size_t k = 0; k < at[0].size(); ++k) {
    bool noticed = false;
    for (int which = 0; which < 2 && !noticed; ++which) {
      std::string broken = sources[which];
      broken.replace(at[which][k], barrier.size(), "/* barrier removed */;");
      noticed = !both_orders_pass(broken, which);
    }
    EXPECT_TRUE(noticed) << "barrier " << k << " (byte " << at[0][k] << " of the default source) removed";
  }
  // The wait for the stage being read (cp.async.wait_group 0: its copies are the only ones in flight) made a
  // no-op.
  std::string unwaited = sources[0];
  const std::string wait = "cp_async_wait<0>();";
  ASSERT_NE(unwaited.find(wait), std::string::npos);
  unwaited.replace(unwaited.find(wait), wait.size(), "cp_async_wait<1>();");
  EXPECT_FALSE(passes(unwaited, 0, ThreadOrder::Ascending)) << "the copies' wait made a no-op";
  // The wait for the copy engine to have read a tile's dQ share, before the next tile's is written there, removed.
  std::string unread = sources[1];
  const std::string read = "if (SINK_BULK_REDUCE) bulk_wait_read();";
  ASSERT_NE(unread.find(read), std::string::npos);
  unread.replace(unread.find(read), read.size(), "/* wait removed */");
  EXPECT_FALSE(passes(unread, 1, ThreadOrder::Ascending)) << "the bulk reductions' wait removed";
}

// What summary.json's provenance calls the kernels a call runs: the tensor-core kernels for 16-bit storage at
// their sizes, the scalar ones otherwise, with the storage the call's dtype gives.
TEST(CudaKernels, LaunchersSayWhichKernelsTheyRun) {
  SKIP_WITHOUT_HOST_COMPILER();
  const auto variants = tensor_core_variants();
  const auto& [v, half] = variants.front();
  const auto spec = spec_of(v);
  const auto q = [&](torch::ScalarType dtype) { return torch::zeros({1, 1, v.T, v.D}, dtype); };
  EXPECT_EQ(cuda_launcher(spec, q(half ? torch::kHalf : torch::kBFloat16), cpu_emulated_modules())->description(),
            half ? "cuda-tensor half" : "cuda-tensor bf16");
  EXPECT_EQ(cuda_launcher(spec, q(torch::kFloat), cpu_emulated_modules())->description(), "cuda float");
  EXPECT_EQ(cuda_launcher(spec, q(torch::kDouble), cpu_emulated_modules())->description(), "cuda double");
}

// A sequence shorter than a key tile with a position table (ALiBi; a learned table): the tensor-core kernels form a
// whole tile's logits before they mask them, reading the table at distances up to the tile's width, past the end
// of a table of T entries. The emulation maps each buffer against a guard page, so a read past the table faults.
TEST(CudaKernels, TensorCoreKernelsReadThePositionTableWithinItsEnd) {
  SKIP_WITHOUT_HOST_COMPILER();
  for (const bool learned : {false, true}) {
    const Variant v{.name = learned ? "softmax, a learned table, T 13" : "softmax, ALiBi, T 13",
                    .position_bias = true,
                    .T = 13,
                    .D = 64,
                    .position_grad = learned};
    SCOPED_TRACE(v.name);
    const SixteenBitResult r = measure_sixteen_bit(emulated_in_order(ThreadOrder::Ascending), v, torch::kBFloat16);
    EXPECT_LT(r.forward, r.forward_allowed) << "the reference's own error: " << r.own;
    for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
  }
}
