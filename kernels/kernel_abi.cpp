#include "kernels/kernel_abi.h"

#include <fmt/format.h>

namespace sink::kernels::abi {

std::string host_signature(std::string_view symbol, Params params) {
  std::string out = fmt::format("define void @{}(", symbol);
  for (const auto& p : params) out += fmt::format("ptr noalias %{}, ", p);
  return out + "i64 %T, i64 %Tp)";
}

std::string ptx_signature(std::string_view symbol, Params params, std::span<const std::string_view> extra_sizes) {
  std::string out = fmt::format("define ptx_kernel void @{}(", symbol);
  for (const auto& p : params) out += fmt::format("ptr %{}0, ", p);
  out += "i64 %T, i64 %Tp";
  for (const auto& s : extra_sizes) out += fmt::format(", i64 %{}", s);
  return out + ")";
}

}  // namespace sink::kernels::abi
