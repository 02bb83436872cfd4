#include "kernels/cuda/step_source.h"

#include <fmt/format.h>

#include "kernels/cuda/cuda_source.h"
#include "kernels/cuda/cuda_text.h"
#include "kernels/kernel_abi.h"

namespace sink::kernels {
namespace {

// What every step kernel reads before its own text: float arithmetic, the special-function unit's exp, 1 / b and
// sqrt, the storage, the warp's shuffles and the block's shared memory (kernels/cuda/warp_sm80.cuh).
std::string prelude(CudaStorage storage) {
  return std::string("typedef float real;\n") + cuda_text::kMathSfu + cuda_storage(storage) + cuda_text::kWarpSm80;
}

}  // namespace

std::string residual_norm_source(CudaStorage storage, int64_t width, double eps, bool centered) {
  return prelude(storage) +
         fmt::format(
             "constexpr long long kNormWidth = {};\nconstexpr float kNormEps = {:.9g}f;\n"
             "constexpr bool kNormCentered = {};\n",
             width, eps, centered) +
         abi::step_parameters(abi::kResidualNormForward) + abi::step_parameters(abi::kResidualNormBackward) +
         cuda_text::kResidualNorm;
}

std::string gated_activation_source(CudaStorage storage, GatedActivation activation) {
  return prelude(storage) + fmt::format("constexpr int kGatedActivation = {};\n", static_cast<int>(activation)) +
         abi::step_parameters(abi::kGatedForward) + abi::step_parameters(abi::kGatedBackward) +
         cuda_text::kGatedActivation;
}

std::string split_heads_source(CudaStorage storage, int64_t heads, int64_t kv_heads, int64_t head_dim, bool rope) {
  return prelude(storage) +
         fmt::format("constexpr int kHeads = {}, kKvHeads = {}, kHeadDim = {};\nconstexpr bool kRope = {};\n", heads,
                     kv_heads, head_dim, rope) +
         abi::step_parameters(abi::kSplitHeadsForward) + abi::step_parameters(abi::kSplitHeadsBackward) +
         cuda_text::kSplitHeads;
}

}  // namespace sink::kernels
