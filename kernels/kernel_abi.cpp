#include "kernels/kernel_abi.h"

#include <fmt/format.h>

namespace sink::kernels::abi {

std::string host_signature(std::string_view symbol, Params params) {
  std::string out = fmt::format("define void @{}(", symbol);
  for (const auto& p : params) out += fmt::format("ptr noalias %{}, ", p);
  return out + "i64 %T, i64 %Tp)";
}

namespace {
bool is_activation(std::string_view p) {
  for (std::string_view a : {"q", "k", "v", "o", "dout", "dq", "dk", "dv"})
    if (p == a) return true;
  return false;
}
bool is_written(std::string_view p) {
  for (std::string_view a :
       {"o", "stats", "delta", "astar", "dx_kstar", "dsink", "dk", "dv", "dg", "dq", "dq_sum", "out"})
    if (p == a) return true;
  return false;
}
}  // namespace

std::string cuda_signature(std::string_view symbol, Params params, int threads, int min_blocks) {
  const std::string bounds = min_blocks > 0 ? fmt::format("{}, {}", threads, min_blocks) : std::to_string(threads);
  std::string out = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(", bounds, symbol);
  for (const auto& p : params)
    out +=
        fmt::format("{}{}* __restrict__ {}, ", is_written(p) ? "" : "const ", is_activation(p) ? "store_t" : "real", p);
  for (size_t k = 0; k < kCudaSizes.size(); ++k)
    out += fmt::format("long long {}{}", kCudaSizes[k], k + 1 < kCudaSizes.size() ? ", " : ")");
  return out;
}

std::string step_parameters(std::string_view symbol, std::span<const Param> pointers,
                            std::span<const std::string_view> sizes) {
  std::string out = fmt::format("#define SINK_PARAMS_{} ", symbol);
  for (const auto& p : pointers) out += fmt::format("{}* {}, ", p.type, p.name);
  for (size_t k = 0; k < sizes.size(); ++k)
    out += fmt::format("long long {}{}", sizes[k], k + 1 < sizes.size() ? ", " : "\n");
  return out;
}

}  // namespace sink::kernels::abi
