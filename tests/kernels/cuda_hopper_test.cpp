// The Hopper kernels (kernels/cuda/tile_sm90.cuh: wgmma on swizzled tiles, sm_90a) without an H100: on the CPU
// emulation, whose wgmma follows the PTX ISA's descriptor, swizzle and fragment definitions
// (tests/kernels/cuda_on_cpu.h), against the reference path, with every wait it needs; compiled by NVRTC to
// sm_90a machine code without spills, unserialized, with warpgroup instructions (HGMMA).
#include <gtest/gtest.h>

#include "bench/gpu_attention_cases.h"
#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/cuda_attention.h"
#include "runtime/attention/cuda_driver.h"
#include "runtime/attention/cuda_tuning.h"
#include "runtime/gpu_features.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/kernels/cuda_machine_code.h"
#include "tests/runtime/attention_oracle_expect.h"
#include "tests/runtime/jit_variants.h"

using namespace sink;
using namespace sink::rt;
using namespace sink::testing_variants;
using namespace sink::testing_machine_code;

namespace {

kernels::CudaStorage layout(torch::ScalarType dtype) {
  return dtype == torch::kHalf ? kernels::CudaStorage::Float16 : kernels::CudaStorage::BFloat16;
}

// The kernels of `tiles`, as a tuned H100 reads them from the table, on the emulation of sm_90 under a loader name
// of its own.
SixteenBitResult hopper_kernels(const Variant& v, torch::ScalarType dtype, const KernelTiles& tiles,
                                const std::string& loader, const std::function<std::string(std::string)>& edit = {}) {
  // (a fused Hopper backward_keys in the table runs where its rows are on too)
  const HopperKernelsOptedIn opted_in(tiles.fused ? sinktest::kFusedBackwardOn90 : "");
  const auto spec = spec_of(v);
  remember_tiles(tuning_key("CPU emulation", spec, layout(dtype)), tiles);
  KernelModules modules = cpu_emulated_modules(ThreadOrder::Ascending, 90);
  modules.name = loader;
  if (edit)
    modules.load = [edit](const std::string& source, const torch::Device&) -> std::shared_ptr<KernelModule> {
      return std::make_shared<CpuEmulatedModule>(host_compiled(edit(source)), ThreadOrder::Ascending, 90);
    };
  SixteenBitResult result = measure_sixteen_bit(
      [&](const kernels::KernelSpec& s, const AttentionCall& call) { return cuda_attention(s, call, modules); }, v,
      dtype);
  // The Hopper kernels ran, not the default ones in their place (which would pass as well, and check nothing).
  const std::string in_use = cuda_launcher(spec, torch::zeros({1, 1, v.T, v.D}, dtype), modules)->kernels_in_use();
  EXPECT_NE(in_use.find("wgmma"), std::string::npos) << in_use;
  return result;
}
// The three kernels of one Hopper candidate's tiles.
SixteenBitResult hopper_kernels(const Variant& v, torch::ScalarType dtype, const kernels::CudaTiles& hopper,
                                const std::string& loader, const std::function<std::string(std::string)>& edit = {}) {
  return hopper_kernels(v, dtype, KernelTiles{hopper, hopper, hopper}, loader, edit);
}

}  // namespace

TEST(CudaKernels, HopperCandidatesFitAndRunOnNineOnly) {
  for (int64_t d : {32, 64, 96, 128}) {
    SCOPED_TRACE("d_head " + std::to_string(d));
    const auto spec = spec_of(Variant{.name = "softmax", .D = d});
    const auto hopper = kernels::cuda_hopper_candidates(spec, kernels::CudaStorage::BFloat16);
    ASSERT_EQ(hopper.size(), d <= 64 ? 4u : 3u);  // (128-key tiles at d_head 64 and below)
    EXPECT_FALSE(hopper.front().overlap) << "the first waits for each product (hopper=force)";
    EXPECT_TRUE(std::any_of(hopper.begin(), hopper.end(), [](const kernels::CudaTiles& t) { return t.overlap; }));
    for (const auto& t : hopper) {
      EXPECT_TRUE(t.hopper && t.tensor_cores);
      EXPECT_EQ(t.forward_threads() % 128, 0) << "whole warpgroups";
      const kernels::CudaSharedBytes bytes = kernels::cuda_shared_bytes(t, d);
      EXPECT_LE(bytes.forward, kernels::kCudaSharedLimit);
      EXPECT_LE(std::max(bytes.keys, bytes.queries), kernels::kHopperSharedLimit);
      EXPECT_EQ(t.key_queries, 64) << "K and V rows in shared memory leave the registers for 64-query tiles";
      const std::string source = kernels::emit_cuda(spec, kernels::CudaStorage::BFloat16, t);
      EXPECT_TRUE(kernels::needs_sm90a(source));
      EXPECT_EQ(source.find("constexpr bool OVERLAP = true;") != std::string::npos, t.overlap);
      if (t.overlap) {  // a third stage of key and value tiles
        kernels::CudaTiles waiting = t;
        waiting.overlap = false;
        EXPECT_GT(bytes.forward, kernels::cuda_shared_bytes(waiting, d).forward);
      }
    }
    const auto tuned_on = [&](int capability) {
      const auto every = kernels::cuda_tuning_tiles(spec, kernels::CudaStorage::BFloat16, capability);
      return std::count_if(every.begin(), every.end(), [](const kernels::CudaTiles& t) { return t.hopper; });
    };
    const auto fused = kernels::cuda_hopper_fused_candidates(spec, kernels::CudaStorage::BFloat16);
    ASSERT_EQ(fused.size(), 1u);
    for (const auto& t : fused) {
      EXPECT_TRUE(t.hopper && t.fused_dq && t.key_rows == 64 && t.key_queries == 64) << t.describe();
      EXPECT_LE(kernels::cuda_shared_bytes(t, d).keys, kernels::kHopperSharedLimit);
    }
    EXPECT_EQ(tuned_on(90), static_cast<long>(hopper.size() + fused.size()));
    EXPECT_EQ(tuned_on(80), 0);
    EXPECT_EQ(tuned_on(100), 0) << "sm_90a code does not run on later GPUs";
  }
  EXPECT_TRUE(
      kernels::cuda_hopper_candidates(spec_of(Variant{.name = "softmax", .D = 48}), kernels::CudaStorage::BFloat16)
          .empty())
      << "no wgmma is as wide as d_head 48's O += W V with these tiles";
  EXPECT_FALSE(kernels::needs_sm90a(
      kernels::emit_cuda(spec_of(Variant{.name = "softmax", .D = 64}), kernels::CudaStorage::BFloat16)));
}

// Every Hopper candidate on the emulation against the reference, its three kernels: a window with k* and v* (their
// column folded before the first tile), ALiBi with a prefix and the sink logit at d_head 96 (64-byte swizzle),
// sigmoid without normalization at d_head 128 (16-query tiles in backward_keys) and ragged T; forward and every
// gradient.
TEST(CudaKernels, HopperKernelsMatchTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-hopper-forward");
  const std::pair<Variant, torch::ScalarType> variants[] = {
      {{.name = "softmax, window 50, KV biases", .window = 50, .key_bias = true, .learned_v = true, .T = 150, .D = 64},
       torch::kBFloat16},
      {{.name = "softmax, ALiBi, prefix, sink logit",
        .prefix = 20,
        .position_bias = true,
        .T = 150,
        .D = 96,
        .sink_logit = true},
       torch::kHalf},
      {{.name = "sigmoid, no norm", .score = call("sigmoid", {var("qk")}), .normalize = "none", .T = 101, .D = 128},
       torch::kBFloat16},
  };
  for (const auto& [v, dtype] : variants) {
    const auto hopper = kernels::cuda_hopper_candidates(spec_of(v), layout(dtype));
    for (size_t c = 0; c < hopper.size(); ++c) {
      SCOPED_TRACE(fmt::format("{}, d_head {}, {}", v.name, v.D, hopper[c].describe()));
      const SixteenBitResult r = hopper_kernels(v, dtype, hopper[c], fmt::format("hopper {}", c));
      EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
      for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
    }
  }
}

// The forms the variants above leave out, each through one overlapped candidate: a direct (not online) normaliser
// with k*, a window and a prefix; a learned position table, whose gradient backward_keys sums by diagonal from the
// warpgroup's accumulators; a random score expression of i, j and the product.
TEST(CudaKernels, HopperKernelsRunTheOtherForms) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-hopper-forms");
  Variant random = random_score_variants(1).front();
  random.T = 120, random.D = 64;
  const std::tuple<Variant, torch::ScalarType, size_t> variants[] = {
      {{.name = "p-norm 3: sigmoid, KV biases, window 40 + prefix 16",
        .score = call("sigmoid", {var("qk")}),
        .normalize = "pnorm",
        .p = 3,
        .prefix = 16,
        .window = 40,
        .key_bias = true,
        .learned_v = true,
        .T = 150,
        .D = 64},
       torch::kHalf,
       2},
      {{.name = "softmax, a learned position table", .position_bias = true, .T = 133, .D = 96, .position_grad = true},
       torch::kBFloat16,
       1},
      {random, torch::kBFloat16, 3},
  };
  for (const auto& [v, dtype, which] : variants) {
    const auto hopper = kernels::cuda_hopper_candidates(spec_of(v), layout(dtype));
    ASSERT_FALSE(hopper.empty()) << v.name;
    const kernels::CudaTiles& tiles = hopper[std::min(which, hopper.size() - 1)];
    ASSERT_TRUE(tiles.overlap);
    SCOPED_TRACE(fmt::format("{}, d_head {}, {}", v.name, v.D, tiles.describe()));
    const SixteenBitResult r = hopper_kernels(v, dtype, tiles, "hopper form " + v.name);
    EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
    for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
    if (v.position_grad)
      EXPECT_TRUE(std::any_of(r.grads.begin(), r.grads.end(), [](const auto& g) { return g.first == "dg"; }))
          << "the position table's gradient was compared";
  }
}

// The fused Hopper backward (backward_keys summing dQ too, its share of each tile one warpgroup product of dS^T
// and the K rows from shared memory) against the reference, as a tuned H100 runs it beside the default forward:
// softmax with k*, v* and a window at d_head 64 (ragged T; dQ's product beside dK's and dV's); sigmoid without
// normalization at d_head 96 (64-byte swizzled K and V rows, 128-byte dS^T) in half; a direct normaliser (p-norm 2)
// with the sink logit and a prefix at d_head 128 (rows of two swizzled pieces).
TEST(CudaKernels, HopperFusedBackwardMatchesTheReference) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-hopper-fused");
  const std::pair<Variant, torch::ScalarType> variants[] = {
      {{.name = "softmax, window 50, KV biases", .window = 50, .key_bias = true, .learned_v = true, .T = 150, .D = 64},
       torch::kBFloat16},
      {{.name = "sigmoid, no norm", .score = call("sigmoid", {var("qk")}), .normalize = "none", .T = 101, .D = 96},
       torch::kHalf},
      {{.name = "p-norm 2, prefix, sink logit",
        .normalize = "pnorm",
        .p = 2,
        .prefix = 12,
        .T = 90,
        .D = 128,
        .sink_logit = true},
       torch::kBFloat16},
  };
  for (const auto& [v, dtype] : variants) {
    const auto fused = kernels::cuda_hopper_fused_candidates(spec_of(v), layout(dtype));
    ASSERT_EQ(fused.size(), 1u) << v.name;
    SCOPED_TRACE(fmt::format("{}, d_head {}, {}", v.name, v.D, fused.front().describe()));
    const kernels::CudaTiles defaults = kernels::cuda_tiles(spec_of(v), layout(dtype));
    const SixteenBitResult r =
        hopper_kernels(v, dtype, KernelTiles{defaults, defaults, defaults, fused.front()}, "hopper fused " + v.name);
    EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
    ASSERT_FALSE(r.grads.empty());
    for (const auto& [name, error] : r.grads) EXPECT_LT(error, r.grads_allowed) << name;
  }
}

// Each wait for a product's group in the forward and backward_queries is needed: with any one of them made lax (one
// group more left in flight), the emulation's sums land too late, or read A's registers after they were rewritten,
// and the results leave the reference's rounding. Each kernel's six waits in order: the overlapped pipeline's first
// scores, the waiting form's scores, the overlapped accumulator's before its registers are touched, the overlapped
// next scores, the waiting form's accumulator, the overlapped accumulator's after the last tile. Each form's own are
// made lax in turn (the other form's are dead code in its source).
TEST(CudaKernels, HopperKernelsNeedTheirWaits) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-hopper-waits");
  const Variant v{.name = "softmax, T 150, d_head 32", .T = 150, .D = 32};
  const auto candidates = kernels::cuda_hopper_candidates(spec_of(v), layout(torch::kBFloat16));
  const auto overlapped = std::find_if(candidates.begin(), candidates.end(), [](const auto& t) { return t.overlap; });
  ASSERT_NE(overlapped, candidates.end());
  const std::string call = "await_products<";
  // A kernel's body: from its signature to the next kernel's.
  struct Body {
    std::string_view symbol, next;
  };
  const Body bodies[] = {{kernels::abi::kForwardSymbol, kernels::abi::kCudaBackwardRowsSymbol},
                         {kernels::abi::kCudaBackwardQueriesSymbol, kernels::abi::kProbeSymbol}};
  const auto span = [](const std::string& source, const Body& b) {
    const size_t first = source.find(std::string(b.symbol) + "(");
    return std::make_pair(first, source.find(b.next, first));
  };
  // The k-th wait of a body with one group more pending.
  const auto lax = [&](const Body& b, int k) {
    return [&call, &span, b, k](std::string source) {
      const auto [first, next] = span(source, b);
      size_t at = source.find(call, first);
      for (int skip = 0; skip < k && at < next; ++skip) at = source.find(call, at + 1);
      EXPECT_LT(at, next) << b.symbol << " has no wait " << k;
      if (at < next) source[at + call.size()] += 1;  // (0 -> 1, 1 -> 2)
      return source;
    };
  };
  const std::string source = kernels::emit_cuda(spec_of(v), layout(torch::kBFloat16), candidates.front());
  for (const Body& b : bodies) {
    const auto [first, next] = span(source, b);
    int waits = 0;
    for (size_t at = source.find(call, first); at < next; at = source.find(call, at + 1)) ++waits;
    ASSERT_EQ(waits, 6) << b.symbol << "'s waits are not the ones this test knows";
  }
  const std::pair<kernels::CudaTiles, std::vector<int>> forms[] = {{candidates.front(), {1, 4}},
                                                                   {*overlapped, {0, 2, 3, 5}}};
  for (const auto& [tiles, own] : forms) {
    SCOPED_TRACE(tiles.describe());
    ASSERT_TRUE(hopper_kernels(v, torch::kBFloat16, tiles, "hopper waits intact " + tiles.describe()).passed());
    for (const Body& b : bodies)
      for (int k : own)
        EXPECT_FALSE(hopper_kernels(v, torch::kBFloat16, tiles,
                                    fmt::format("hopper {} wait {} lax {}", b.symbol, k, tiles.describe()), lax(b, k))
                         .passed())
            << b.symbol << "'s wait " << k << " made lax";
  }
}

// The Hopper kernels compiled by NVRTC for sm_90a with the assembler's verbose report: no spill, no wgmma the
// assembler serializes (which would leave the tensor cores idle while the warps wait), warpgroup multiplies
// (HGMMA) in the machine code of the forward and both backward kernels; and refused for any other GPU.
TEST(CudaKernels, HopperKernelsCompileToWarpgroupInstructions) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const std::string nvdisasm = find_nvdisasm();
  const std::pair<Variant, kernels::CudaStorage> cases[] = {
      {{.name = "softmax", .D = 64}, kernels::CudaStorage::BFloat16},
      {{.name = "softmax, ALiBi, window, prefix, KV biases, sink logit",
        .prefix = 8,
        .window = 40,
        .position_bias = true,
        .key_bias = true,
        .learned_v = true,
        .D = 96,
        .sink_logit = true},
       kernels::CudaStorage::Float16},
      {{.name = "p-norm 2", .normalize = "pnorm", .p = 2, .D = 128}, kernels::CudaStorage::BFloat16},
      {{.name = "sigmoid, no norm", .score = call("sigmoid", {var("qk")}), .normalize = "none", .D = 64},
       kernels::CudaStorage::BFloat16},
  };
  for (const auto& [v, storage] : cases)
    for (const auto& tiles : kernels::cuda_tuning_tiles(spec_of(v), storage, kernels::kHopperCapability)) {
      if (!tiles.hopper) continue;  // (the Hopper candidates, the fused backward's among them)
      SCOPED_TRACE(fmt::format("{}, d_head {}, {}", v.name, v.D, tiles.describe()));
      const std::string source = kernels::emit_cuda(spec_of(v), storage, tiles);
      std::string report;
      const std::string cubin = cuda::compile_cubin(source, 90, &report);
      const auto resources = read_assembler_report(report);
      const char* kernels[] = {"sink_forward", "sink_backward_keys", "sink_backward_queries"};
      for (const char* kernel : kernels) {
        ASSERT_TRUE(resources.count(kernel)) << report;
        const KernelResources& r = resources.at(kernel);
        std::printf(
            "  sm_90a d_head %3lld %-55s forward %3dx%-3d%s %-22s %3d registers, %6d bytes shared, spills "
            "%d/%d\n",
            static_cast<long long>(v.D), v.name.c_str(), tiles.forward_rows, tiles.forward_keys,
            tiles.fused_dq ? " fused dQ" : "", kernel, r.registers, kernels::cuda_shared_bytes(tiles, v.D).of(kernel),
            r.spill_stores, r.spill_loads);
        EXPECT_EQ(r.spill_stores + r.spill_loads, 0) << kernel;
      }
      EXPECT_EQ(report.find("serialized"), std::string::npos) << report;
      EXPECT_EQ(report.find("is injected"), std::string::npos) << report;  // a wait of ptxas's own, as costly
      EXPECT_THROW(cuda::compile_cubin(source, 80), std::runtime_error) << "sm_90a code compiled for sm_80";
      if (nvdisasm.empty()) continue;
      const auto code = disassemble(nvdisasm, cubin);
      for (const char* kernel : kernels) {
        ASSERT_TRUE(code.count(kernel));
        const auto& instructions = code.at(kernel);
        EXPECT_GT(std::count_if(instructions.begin(), instructions.end(),
                                [](const std::string& i) { return operation_of(i) == "HGMMA"; }),
                  0)
            << "no warpgroup multiply in " << kernel;
        // issue_abt's first k-step passes scale-d 0 as an immediate: ptxas must make it a multiply that ignores
        // the accumulators ("RZ, !UPT"), not one that sums into whatever they held.
        EXPECT_GT(std::count_if(instructions.begin(), instructions.end(),
                                [](const std::string& i) {
                                  return operation_of(i) == "HGMMA" && i.find(", RZ, !UPT") != std::string::npos;
                                }),
                  0)
            << "no warpgroup multiply in " << kernel << " sets its accumulators";
      }
    }
  if (nvdisasm.empty()) GTEST_SKIP() << "registers checked; no nvdisasm to read the machine code for HGMMA";
}

// The forward of 128-key tiles, a candidate at d_head 64 where each score is exp or sigmoid of the product alone,
// compiled for sm_90a without a spill for the forwards it is offered to: every benchmark variant, and every
// normaliser over sigmoid with k*, a window and a prefix (the most per element).
TEST(CudaKernels, HopperWideTilesSpillNothing) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  std::vector<Variant> variants;
  for (const auto& c : bench::gpu_attention_cases()) variants.push_back(c.variant);
  for (const auto& v : normalizer_variants())
    if (v.name.find(": sigmoid, KV biases, window 3 + prefix 2") != std::string::npos) variants.push_back(v);
  int offered = 0;
  for (Variant v : variants) {
    v.D = 64;
    const auto spec = spec_of(v);
    for (const auto& tiles : kernels::cuda_hopper_candidates(spec, kernels::CudaStorage::BFloat16)) {
      if (tiles.forward_keys <= 64) continue;
      ++offered;
      std::string report;
      cuda::compile_cubin(kernels::emit_cuda(spec, kernels::CudaStorage::BFloat16, tiles), 90, &report);
      const auto resources = read_assembler_report(report);
      ASSERT_TRUE(resources.count("sink_forward")) << report;
      const KernelResources& r = resources.at("sink_forward");
      std::printf("  sm_90a d_head 64 %-55s forward %dx%d: %3d registers, spills %d/%d\n", v.name.c_str(),
                  tiles.forward_rows, tiles.forward_keys, r.registers, r.spill_stores, r.spill_loads);
      EXPECT_EQ(r.spill_stores + r.spill_loads, 0) << v.name;
    }
  }
  EXPECT_GE(offered, 8) << "the wide tiles are offered to the softmax family and sigmoid at least";
}

// Each barrier and wait of the fused Hopper backward_keys is needed: with any one removed (or a wait for the
// products made lax, one group more left in flight), the emulation's results leave the reference's rounding in
// one of the two thread orders. At d_head 32 and 64 dQ's product is issued beside dK's and dV's and waited for with
// them; at 96 it waits for them first: both forms.
TEST(CudaKernels, HopperFusedBackwardNeedsEveryBarrierAndWait) {
  SKIP_WITHOUT_HOST_COMPILER();
  const HopperKernelsOptedIn opted_in(sinktest::kFusedBackwardOn90);
  for (int64_t d : {32, 96}) {
    const Variant v{.name = fmt::format("softmax, T 150, d_head {}", d), .T = 150, .D = d};  // 3 blocks, 3 tiles
    SCOPED_TRACE(v.name);
    const auto spec = spec_of(v);
    const auto storage = kernels::CudaStorage::BFloat16;
    const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
    const kernels::CudaTiles fused = kernels::cuda_hopper_fused_candidates(spec, storage).at(0);
    const std::string source = kernels::emit_cuda(spec, storage, fused);
    const KernelCacheHere cache("sinklab-hopper-fused-sync");
    remember_tiles(tuning_key("CPU emulation", spec, storage), {defaults, defaults, defaults, fused});
    auto passes = [&](const std::string& broken, ThreadOrder order) {
      const KernelModules modules{
          fmt::format("hopper fused {:x}, {}", std::hash<std::string>{}(broken), name_of(order)),
          [&](const std::string&, const torch::Device&) -> std::shared_ptr<KernelModule> {
            return std::make_shared<CpuEmulatedModule>(host_compiled(broken), order, 90);
          }};
      return measure_sixteen_bit([&](const kernels::KernelSpec& s,
                                     const AttentionCall& call) { return cuda_attention(s, call, modules); },
                                 v, torch::kBFloat16)
          .passed();
    };
    auto both_orders_pass = [&](const std::string& broken) {
      return passes(broken, ThreadOrder::Ascending) && passes(broken, ThreadOrder::Descending);
    };
    ASSERT_TRUE(both_orders_pass(source)) << "the intact kernels";
    // backward_keys's body: from its signature to the next kernel's; but the mma.sync form's dQ block, which the
    // preprocessor drops from this source.
    const size_t first = source.find(std::string(kernels::abi::kCudaBackwardKeysSymbol) + "(");
    const size_t next = source.find("__global__", first);
    const size_t dropped = source.find("#else\n    await_products<0>(dv_acc, dk_acc);", first);
    const size_t dropped_end = source.find("#endif", dropped);
    ASSERT_LT(first, dropped);
    ASSERT_LT(dropped_end, next);
    const std::pair<std::string, std::string> breaks[] = {
        {"__syncthreads();", "/* barrier removed */;"},  // (the dQ product's, then the last tile's)
        {"bulk_wait_read();", "/* wait removed */;"},
        {"await_products<0>(sT, dAT);", "await_products<1>(sT, dAT);"},
        {d <= 64 ? "await_products<0>(dv_acc, dk_acc, dq_acc);" : "await_products<0>(dq_acc);",
         d <= 64 ? "await_products<1>(dv_acc, dk_acc, dq_acc);" : "await_products<1>(dq_acc);"},
    };
    int broken_count = 0;
    for (const auto& [intact, lax] : breaks)
      for (size_t at = source.find(intact, first); at < next; at = source.find(intact, at + 1)) {
        if (at > dropped && at < dropped_end) continue;
        std::string broken = source;
        broken.replace(at, intact.size(), lax);
        ++broken_count;
        EXPECT_FALSE(both_orders_pass(broken)) << intact << " at byte " << at - first << " of backward_keys";
      }
    EXPECT_EQ(broken_count, 6) << "two barriers, the bulk reductions' two waits and two product waits";
  }
}

// The fused Hopper backward_keys holds the most a thread has of any kernel here (K and V rows, dK and dV sums, a
// tile's scores and their gradients, dQ's share): compiled for sm_90a without a spill for every benchmark variant
// it is offered to, at d_head 64, 96 and 128.
TEST(CudaKernels, HopperFusedBackwardSpillsNothing) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  int offered = 0;
  for (const auto& c : bench::gpu_attention_cases())
    for (int64_t d : {64, 96, 128}) {
      Variant v = c.variant;
      v.D = d;
      const auto spec = spec_of(v);
      for (const auto& tiles : kernels::cuda_hopper_fused_candidates(spec, kernels::CudaStorage::BFloat16)) {
        ++offered;
        std::string report;
        cuda::compile_cubin(kernels::emit_cuda(spec, kernels::CudaStorage::BFloat16, tiles), 90, &report);
        const auto resources = read_assembler_report(report);
        ASSERT_TRUE(resources.count("sink_backward_keys")) << report;
        const KernelResources& r = resources.at("sink_backward_keys");
        std::printf("  sm_90a d_head %lld %-55s fused backward_keys %dx%d: %3d registers, spills %d/%d\n",
                    static_cast<long long>(d), v.name.c_str(), tiles.key_rows, tiles.key_queries, r.registers,
                    r.spill_stores, r.spill_loads);
        EXPECT_EQ(r.spill_stores + r.spill_loads, 0) << v.name << ", d_head " << d;
      }
    }
  EXPECT_GE(offered, 30) << "every benchmark variant but ALiBi, at each d_head";
}

// SINKLAB_GPU_FEATURES's hopper overrides the table, as a profile compares the two: force runs the Hopper kernels
// where none was measured (on compute capability 9.0 alone), each waiting for its products, overlap with the
// overlapped forward, off runs the default ones where the table has Hopper ones, tune the table's; unset, the table's
// only where the row hopper lets them run (today no GPU check has run them: no user's run reaches code no GPU ran);
// with fused_backward=force besides, force runs the fused Hopper backward, but on 9.0 only with bulk_reduction on too;
// right every way.
TEST(CudaKernels, HopperKernelsCanBeForcedOnOrOff) {
  SKIP_WITHOUT_HOST_COMPILER();
  const KernelCacheHere cache("sinklab-hopper-forced");
  const Variant v{.name = "softmax, T 80", .T = 80, .D = 64};
  const auto spec = spec_of(v);
  const auto storage = layout(torch::kBFloat16);
  const kernels::CudaTiles defaults = kernels::cuda_tiles(spec, storage);
  // What the table's row says where nothing overrides it, on a GPU of compute capability 9.0.
  const bool row_runs_hopper =
      decide_gpu_feature(kGpuFeatureRows[static_cast<size_t>(GpuFeature::hopper)], 90, "", kernel_text_hash()).on;
  struct Case {
    const char* features;  // SINKLAB_GPU_FEATURES ("": unset)
    int arch;
    bool table_has_hopper, runs_hopper, runs_overlap;
    bool runs_hopper_fused = false;
  };
  const Case cases[] = {{"hopper=force", 90, false, true, false},
                        {"hopper=force", 80, false, false, false},
                        {"hopper=overlap", 90, false, true, true},
                        {"hopper=force", 90, true, true, false},
                        {"hopper=off", 90, true, false, false},
                        {"hopper=tune", 90, true, true, true},
                        {"", 90, true, row_runs_hopper, row_runs_hopper},
                        {"hopper=force,fused_backward=force,bulk_reduction", 90, false, true, false, true},
                        {"hopper=force,fused_backward=force", 90, false, true, false, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("SINKLAB_GPU_FEATURES='{}', sm_{}, table {}", c.features, c.arch, c.table_has_hopper));
    const KernelTiles table{c.table_has_hopper ? kernels::cuda_hopper_candidates(spec, storage).back() : defaults,
                            defaults, defaults};
    remember_tiles(tuning_key("CPU emulation", spec, storage), table);
    auto loaded_hopper = std::make_shared<bool>(false), loaded_overlap = std::make_shared<bool>(false);
    const int arch = c.arch;
    const KernelModules modules{
        fmt::format("forced {} {} {}", c.features, c.arch, c.table_has_hopper),
        [loaded_hopper, loaded_overlap, arch](const std::string& source, const torch::Device&) {
          *loaded_hopper = *loaded_hopper || kernels::needs_sm90a(source);
          *loaded_overlap = *loaded_overlap || source.find("constexpr bool OVERLAP = true;") != std::string::npos;
          return std::make_shared<CpuEmulatedModule>(host_compiled(source), ThreadOrder::Ascending, arch);
        },
        false, nullptr, [arch](const torch::Device&) { return arch; }};
    SixteenBitResult r;
    std::string in_use;
    {
      const sinktest::GpuFeaturesAsked asked(c.features);
      r = measure_sixteen_bit(
          [&](const kernels::KernelSpec& s, const AttentionCall& call) { return cuda_attention(s, call, modules); }, v,
          torch::kBFloat16);
      in_use = cuda_launcher(spec, torch::zeros({1, 1, v.T, v.D}, torch::kBFloat16), modules)
                   ->kernels_in_use();  // (what a benchmark prints beside its times)
    }
    EXPECT_EQ(in_use.find("wgmma") != std::string::npos, c.runs_hopper) << in_use;
    EXPECT_EQ(in_use.find("fused dQ wgmma") != std::string::npos, c.runs_hopper_fused) << in_use;
    EXPECT_EQ(in_use.find(" overlapped") != std::string::npos, c.runs_overlap) << in_use;
    EXPECT_TRUE(r.passed()) << "forward " << r.forward << " (< " << r.forward_allowed << ")";
    EXPECT_EQ(*loaded_hopper, c.runs_hopper);
    EXPECT_EQ(*loaded_overlap, c.runs_overlap);
  }
}
