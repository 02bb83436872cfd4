// What the tensor-core kernels are made of, without a GPU: each variant's source compiled by NVRTC to machine
// code (sm_90 by default), and per kernel its registers, shared memory and instruction mix read from the
// disassembly (nvdisasm): tensor-core products (HMMA), special functions (MUFU: exp2, rcp), float and integer
// arithmetic, shared-memory matrix loads (LDSM), asynchronous copies (LDGSTS), shuffles, barriers. Counts are
// static (instructions in the code, the loops unrolled), so they compare two versions of a kernel or two
// variants; a GPU measures time (bench/gpu_attention).
//   build/bench/kernel_anatomy [--D 64] [--arch 90] [--variants 'softmax|sink logit|...'] [--tiles|--hopper] [--dg]
//                              [--sass KERNEL] [--source]
// --tiles: every tile candidate a GPU would measure (cuda_tuning_tiles: the fused backward_keys's marked "+dQ"), not
// only the default; --hopper: the Hopper candidates alone (cuda_hopper_candidates and the fused one, sm_90a).
// --dg: a position table's kernels with its gradient (a learned table's, T5's; ALiBi's is a constant).
// --sass KERNEL: also print that kernel's machine code (sink_forward, sink_backward_keys, ...); --source: the
// CUDA source NVRTC compiles.
// Needs NVRTC and nvdisasm (SINKLAB_NVDISASM, the PATH, or the nvidia-cuda-nvdisasm wheel of SINKLAB_PYTHON).
#include <fmt/format.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "bench/gpu_attention_cases.h"
#include "kernels/cuda/emit_cuda.h"
#include "runtime/attention/cuda_driver.h"
#include "tests/kernels/cuda_machine_code.h"

using namespace sink;
using namespace sink::testing_machine_code;

namespace {

// The columns: an instruction class and the operations in it.
const std::vector<std::pair<std::string, std::set<std::string>>>& classes() {
  static const std::vector<std::pair<std::string, std::set<std::string>>> c = {
      {"HMMA", {"HMMA", "HGMMA"}},  // (HGMMA: a warpgroup multiply, the Hopper kernels')
      {"MUFU", {"MUFU"}},
      {"float", {"FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP", "FCHK", "FMNMX3", "F2FP", "F2F", "FRND"}},
      {"int",
       {"IMAD",   "IADD3",  "LOP3", "ISETP", "SHF",    "LEA",   "SEL",  "IMNMX",  "IABS", "I2F",  "F2I",  "PRMT",
        "MOV",    "VIMNMX", "IADD", "SGXT",  "LEA.HI", "PLOP3", "P2R",  "R2P",    "S2R",  "S2UR", "CS2R", "UIMAD",
        "UIADD3", "ULOP3",  "USHF", "UMOV",  "ULEA",   "ISETP", "USEL", "UISETP", "R2UR", "LDC",  "ULDC"}},
      {"LDSM", {"LDSM"}},
      {"LDGSTS", {"LDGSTS", "LDGDEPBAR", "DEPBAR"}},
      {"global", {"LDG", "STG", "RED", "ATOMG", "ATOM"}},
      {"shared", {"LDS", "STS"}},
      {"SHFL", {"SHFL"}},
      {"BAR", {"BAR"}},
      {"branch", {"BRA", "BSSY", "BSYNC", "WARPSYNC", "EXIT", "RET", "CALL", "BMOV", "JMP", "BREAK"}},
  };
  return c;
}

std::string mix(const std::vector<std::string>& instructions) {
  std::map<std::string, int> by_class;
  int other = 0;
  for (const auto& i : instructions) {
    const std::string op = operation_of(i);
    if (op == "NOP") continue;
    bool found = false;
    for (const auto& [name, ops] : classes())
      if (ops.count(op)) {
        ++by_class[name], found = true;
        break;
      }
    if (!found) ++other;
  }
  std::string out;
  int total = other;
  for (const auto& [name, ops] : classes()) total += by_class[name];
  out += fmt::format("{:6}", total);
  for (const auto& [name, ops] : classes()) out += fmt::format(" {:>6}", by_class[name]);
  return out + fmt::format(" {:>6}", other);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t D = 64;
  int arch = 90;
  bool all_tiles = false, hopper_only = false;
  std::string print_kernel;
  bool print_source = false, position_grad = false;
  std::vector<std::string> wanted;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--D" && a + 1 < argc)
      D = std::stoll(argv[++a]);
    else if (arg == "--arch" && a + 1 < argc)
      arch = std::stoi(argv[++a]);
    else if (arg == "--variants" && a + 1 < argc)
      wanted = bench::split_list(argv[++a], '|');  // variant names hold commas
    else if (arg == "--tiles")
      all_tiles = true;
    else if (arg == "--hopper")
      hopper_only = true, arch = kernels::kHopperCapability;
    else if (arg == "--sass" && a + 1 < argc)
      print_kernel = argv[++a];
    else if (arg == "--source")
      print_source = true;
    else if (arg == "--dg")
      position_grad = true;
    else {
      fmt::print(
          stderr,
          "usage: kernel_anatomy [--D 64] [--arch 90] [--variants 'softmax|sink logit|...'] [--tiles|--hopper] [--dg] "
          "[--sass KERNEL] [--source]\n");
      return 2;
    }
  }
  std::string why;
  if (!rt::cuda::nvrtc_available(&why)) {
    fmt::print(stderr, "kernel_anatomy: NVRTC not available: {}\n", why);
    return 77;
  }
  const std::string nvdisasm = find_nvdisasm();
  if (nvdisasm.empty()) {
    fmt::print(stderr, "kernel_anatomy: no nvdisasm (SINKLAB_NVDISASM, the PATH or SINKLAB_PYTHON's wheel)\n");
    return 77;
  }
  fmt::print("sm_{}, d_head {}, bf16 storage; static instruction counts per kernel\n", arch, D);
  std::string header = fmt::format("{:<28} {:<22} {:<32} {:>4} {:>7} {:>6} {:>6}", "variant", "kernel", "tiles", "regs",
                                   "spills", "smem", "total");
  for (const auto& [name, ops] : classes()) header += fmt::format(" {:>6}", name);
  fmt::print("{} {:>6}\n", header, "other");
  for (const auto& c : bench::gpu_attention_cases()) {
    testing_variants::Variant v = c.variant;
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), v.name) == wanted.end()) continue;
    v.D = D;
    const auto spec = testing_variants::spec_of(v);
    const auto storage = kernels::CudaStorage::BFloat16;
    auto candidates = kernels::cuda_tuning_tiles(spec, storage, arch);  // (on sm_90 "wgmma" too)
    if (hopper_only)
      candidates.erase(std::remove_if(candidates.begin(), candidates.end(), [](const auto& t) { return !t.hopper; }),
                       candidates.end());
    else if (!all_tiles)
      candidates.resize(1);
    for (auto& tiles : candidates) tiles.position_grad = position_grad && spec.position_bias;
    for (const auto& tiles : candidates) {
      std::string report;
      const std::string source = kernels::emit_cuda(spec, storage, tiles);
      if (print_source) fmt::print("{}\n", source);
      const std::string cubin = rt::cuda::compile_cubin(source, arch, &report);
      const auto resources = read_assembler_report(report);
      for (const auto& [kernel, code] : disassemble(nvdisasm, cubin)) {
        if (kernel == "sink_probe" || (tiles.fused_dq && kernel != "sink_backward_keys")) continue;
        const auto r = resources.count(kernel) ? resources.at(kernel) : KernelResources{};
        // The query-row kernels' rows per warp (16 per fragment), then the rows per block and per tile.
        const std::string per_warp = fmt::format("{}/warp ", 16 * tiles.row_frags);
        const std::string shape =
            kernel == "sink_forward" ? fmt::format("{}{}x{}", per_warp, tiles.forward_rows, tiles.forward_keys)
            : kernel == "sink_backward_keys"
                ? fmt::format("16/warp {}x{}{}", tiles.key_rows, tiles.key_queries, tiles.fused_dq ? " +dQ" : "")
            : kernel == "sink_backward_queries" ? fmt::format("{}{}x{}", per_warp, tiles.query_rows, tiles.query_keys)
                                                : "";
        fmt::print(
            "{:<28} {:<22} {:<32} {:>4} {:>7} {:>6} {}\n", v.name, kernel,
            shape.empty()
                ? ""
                : fmt::format("{} {}", shape,
                              tiles.hopper ? (tiles.overlap && kernel == "sink_forward" ? "wgmma overlapped" : "wgmma")
                                           : fmt::format("min_blocks {}", tiles.min_blocks)),
            r.registers, fmt::format("{}/{}", r.spill_stores, r.spill_loads),
            r.shared_bytes + kernels::cuda_shared_bytes(tiles, D).of(kernel), mix(code));
        if (kernel == print_kernel)
          for (const auto& i : code) fmt::print("    {}\n", i);
      }
    }
  }
  return 0;
}
