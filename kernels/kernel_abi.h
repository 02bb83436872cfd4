// The generated kernels' argument lists, written once. The emitters build
// each entry point's `define` from these lists, and the runtime fills an
// array of pointers in the same order (slot() finds a name at compile time),
// so the generated signature and the call cannot drift apart. Every entry
// point takes the pointers, then the sizes `i64 T, i64 Tp`.
//
// The layout each pointer refers to is in generator.h.
#pragma once
#include <array>
#include <span>
#include <string>
#include <string_view>

namespace sink::kernels::abi {

using Params = std::span<const std::string_view>;

inline constexpr std::array<std::string_view, 9> kForward = {"q",     "kt",   "v", "g",    "kstar",
                                                             "vstar", "sink", "o", "stats"};
inline constexpr std::array<std::string_view, 22> kBackward = {
    "q",     "qt",   "k",     "kt",    "v",  "vt", "g",  "kstar", "vstar",  "sink",   "o",
    "stats", "dout", "doutt", "delta", "dq", "dk", "dv", "dg",    "dkstar", "dvstar", "dsink"};
inline constexpr std::array<std::string_view, 6> kProbe = {"q", "k", "g", "kstar", "stats", "out"};

inline constexpr std::string_view kForwardSymbol = "sink_forward";
inline constexpr std::string_view kBackwardSymbol = "sink_backward";
inline constexpr std::string_view kProbeSymbol = "sink_probe";

// The position of `name` in `params`; a name not in the list does not compile.
template <size_t N>
consteval size_t slot(const std::array<std::string_view, N>& params, std::string_view name) {
  for (size_t k = 0; k < N; ++k)
    if (params[k] == name) return k;
  throw "not an argument of this kernel";
}

// The CUDA kernels (kernels/cuda/emit_cuda.h): the pointers, then kCudaSizes.
// Each works on [B x H] slices of [T, D] rows; stats are [2, T] per slice.
inline constexpr std::array<std::string_view, 9> kCudaForward = {"q",     "k",    "v", "g",    "kstar",
                                                                 "vstar", "sink", "o", "stats"};
inline constexpr std::array<std::string_view, 11> kCudaBackwardRows = {
    "q", "kstar", "vstar", "sink", "o", "stats", "dout", "delta", "astar", "dx_kstar", "dsink"};
// dq_sum: dQ in float, summed into by a fused backward_keys (CudaTiles::fused_dq), else not touched.
inline constexpr std::array<std::string_view, 11> kCudaBackwardKeys = {"q",     "k",  "v",  "g",  "stats", "dout",
                                                                       "delta", "dk", "dv", "dg", "dq_sum"};
inline constexpr std::array<std::string_view, 10> kCudaBackwardQueries = {"q",     "k",    "v",     "g",        "kstar",
                                                                          "stats", "dout", "delta", "dx_kstar", "dq"};
inline constexpr std::array<std::string_view, 6> kCudaProbe = {"q", "k", "g", "kstar", "stats", "out"};
inline constexpr std::array<std::string_view, 4> kCudaSizes = {"T", "H", "g_step", "star_step"};

inline constexpr std::string_view kCudaBackwardRowsSymbol = "sink_backward_rows";
inline constexpr std::string_view kCudaBackwardKeysSymbol = "sink_backward_keys";
inline constexpr std::string_view kCudaBackwardQueriesSymbol = "sink_backward_queries";

// The step kernels (kernels/cuda/step_source.h): each pointer with its C type (float, or store_t: the activations'
// storage), then four sizes. A source takes each kernel's list as the macro SINK_PARAMS_<symbol>, printed from here
// (step_parameters); the runtime fills its arrays by slot(), as the attention's.
struct Param {
  std::string_view type, name;
};
template <size_t P>
struct StepKernelAbi {
  std::string_view symbol;
  std::array<Param, P> pointers;
  std::array<std::string_view, 4> sizes;
};
// s = x + r, n = norm(s) (runtime/training/step_kernels.h); the backward's dw and db in per-block partial sums.
inline constexpr StepKernelAbi<6> kResidualNormForward = {"sink_residual_norm_forward",
                                                          {{{"const float", "x"},
                                                            {"const store_t", "r"},
                                                            {"const float", "w"},
                                                            {"const float", "b"},
                                                            {"float", "s"},
                                                            {"store_t", "n"}}},
                                                          {"rows", "unused0", "unused1", "unused2"}};
inline constexpr StepKernelAbi<7> kResidualNormBackward = {"sink_residual_norm_backward",
                                                           {{{"const store_t", "dn"},
                                                             {"const float", "ds_after"},
                                                             {"const float", "s"},
                                                             {"const float", "w"},
                                                             {"float", "ds"},
                                                             {"float", "dw_part"},
                                                             {"float", "db_part"}}},
                                                           {"rows", "blocks", "unused0", "unused1"}};
// h = act(gate) * up from gate_up (a row's gate, then its up).
inline constexpr StepKernelAbi<2> kGatedForward = {"sink_gated_forward",
                                                   {{{"const store_t", "gate_up"}, {"store_t", "h"}}},
                                                   {"rows", "width", "row_blocks", "unused"}};
inline constexpr StepKernelAbi<3> kGatedBackward = {
    "sink_gated_backward",
    {{{"const store_t", "dh"}, {"const store_t", "gate_up"}, {"store_t", "d_gate_up"}}},
    {"rows", "width", "row_blocks", "unused"}};
// The stacked q, k, v projection into head-major q, k, v, RoPE's tables cos and sin on the way.
inline constexpr StepKernelAbi<6> kSplitHeadsForward = {"sink_split_heads_forward",
                                                        {{{"const store_t", "qkv"},
                                                          {"const float", "cos"},
                                                          {"const float", "sin"},
                                                          {"store_t", "q"},
                                                          {"store_t", "k"},
                                                          {"store_t", "v"}}},
                                                        {"rows", "T", "row_blocks", "unused"}};
inline constexpr StepKernelAbi<6> kSplitHeadsBackward = {"sink_split_heads_backward",
                                                         {{{"const store_t", "dq"},
                                                           {"const store_t", "dk"},
                                                           {"const store_t", "dv"},
                                                           {"const float", "cos"},
                                                           {"const float", "sin"},
                                                           {"store_t", "d_qkv"}}},
                                                         {"rows", "T", "row_blocks", "unused"}};

// The position of pointer `name` in a step kernel's list; a name not in the list does not compile.
template <size_t N>
consteval size_t slot(const std::array<Param, N>& params, std::string_view name) {
  for (size_t k = 0; k < N; ++k)
    if (params[k].name == name) return k;
  throw "not an argument of this kernel";
}

// `#define SINK_PARAMS_<symbol> const float* x, ..., long long rows, ...` for a step kernel's source.
std::string step_parameters(std::string_view symbol, std::span<const Param> pointers,
                            std::span<const std::string_view> sizes);
template <size_t P>
std::string step_parameters(const StepKernelAbi<P>& kernel) {
  return step_parameters(kernel.symbol, kernel.pointers, kernel.sizes);
}

// `define void @SYMBOL(ptr noalias %q, ..., i64 %T, i64 %Tp)` for the host.
std::string host_signature(std::string_view symbol, Params params);
// `extern "C" __global__ void __launch_bounds__(THREADS) SYMBOL(const store_t* __restrict__ q, ..., long long T, ...)`:
// the [T, D] activations and their gradients are store_t (bf16 or real), the rest real; inputs are const.
// With min_blocks > 0, __launch_bounds__(THREADS, min_blocks): the assembler may use as many registers as
// that many blocks per multiprocessor leave (without it, its own guess of the occupancy wanted can spill).
std::string cuda_signature(std::string_view symbol, Params params, int threads, int min_blocks = 0);

}  // namespace sink::kernels::abi
