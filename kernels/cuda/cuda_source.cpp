#include "kernels/cuda/cuda_source.h"

#include <fmt/format.h>

#include <string_view>

#include "kernels/cuda/cuda_text.h"

namespace sink::kernels {

std::string cuda_math_prelude(bool f64, bool fast) {
  // Named per type: NVRTC needs no header for expf/exp, but the C++ overloads would.
  const char* sfx = f64 ? "" : "f";
  std::string out = "#define SINK_INF ((real)__int_as_float(0x7f800000))\n";
  // The tensor-core kernels take log, log1p, tanh and sqrt from the special-function unit too (below).
  for (const char* f : {"log", "log1p", "tanh", "sqrt", "fabs"})
    if (!fast || std::string_view(f) == "fabs")
      out += fmt::format("__device__ __forceinline__ real r_{0}(real a) {{ return {0}{1}(a); }}\n", f, sfx);
  for (const char* f : {"pow", "fmin", "fmax"})
    out += fmt::format("__device__ __forceinline__ real r_{0}(real a, real b) {{ return {0}{1}(a, b); }}\n", f, sfx);
  out += "__device__ __forceinline__ real r_if_pos(real c, real a, real b) { return c > (real)0 ? a : b; }\n";
  out +=
      fmt::format("__device__ __forceinline__ real r_mod(real a, real b) {{ return a - b * floor{}(a / b); }}\n", sfx);
  out += R"(template <int N>
__device__ __forceinline__ real r_powi(real a) {  // a^N, N >= 1
  real r = a;
#pragma unroll
  for (int k = 1; k < N; ++k) r *= a;
  return r;
}
)";
  // The tensor-core kernels (16-bit storage) take exp and division from the special-function unit: e^a as
  // 2^(a log2 e) (one multiply, one MUFU.EX2: ~2 units in float's last place plus a log2 e's rounding times
  // |a|, far inside the 16-bit storage's rounding) where IEEE's expf is ten instructions, and a / b as a
  // times 1 / b (2 units), which also keeps the IEEE slow path's calling convention out of the kernel (it
  // made the kernel spill registers). Float and double storage, what the checks compare, keep IEEE's.
  if (fast)
    out += cuda_text::kMathSfu;
  else
    out += fmt::format(
        "__device__ __forceinline__ real r_exp(real a) {{ return exp{0}(a); }}\n"
        "__device__ __forceinline__ real r_exp_diff(real a, real b) {{ return exp{0}(a - b); }}\n"
        "__device__ __forceinline__ real r_exp_affine(real x, real a, real b) {{ return exp{0}(a * x + b); }}\n"
        "__device__ __forceinline__ real r_exp_affine_min(real x, real a, real b, real c) {{\n"
        "  return exp{0}(fmin{0}(a * x + b, c));\n}}\n",
        sfx);
  out += fast ? "__device__ __forceinline__ real r_div(real a, real b) { return a * sink_rcp(b); }\n"
              : "__device__ __forceinline__ real r_div(real a, real b) { return a / b; }\n";
  // e^a - 1 for |a| <= 1/2 (the primitive's domain: its callers clamp), where e^a - 1 itself would cancel to
  // a few digits: the Taylor series alone (the LLVM emitter's, to the same degree: 9 in float, 17 in double),
  // by Horner's rule in the coefficients 1 / k!, one multiply-add a term. (With e^a - 1 beside it for larger
  // |a|, the selects became a branch per score element: softpick's forward was 3.4x softmax's instructions.)
  const int degree = f64 ? 17 : 9;
  std::string coefficients;
  double inverse_factorial = 1;
  for (int k = 1; k <= degree; ++k) {
    inverse_factorial /= k;
    coefficients += fmt::format("{}(real){:.17g}", k == 1 ? "" : ", ", inverse_factorial);
  }
  out += fmt::format(R"(__device__ __forceinline__ real r_expm1_small(real a) {{
  const real inverse_factorial[{0}] = {{{1}}};  // 1 / k! for k = 1..{0}
  real p = inverse_factorial[{0} - 1];
#pragma unroll
  for (int k = {0} - 2; k >= 0; --k) p = p * a + inverse_factorial[k];
  return a * p;
}}
)",
                     degree, coefficients);
  return out;
}

std::string cuda_storage(CudaStorage storage) {
  switch (storage) {
    case CudaStorage::BFloat16: return cuda_text::kStorageBf16;
    case CudaStorage::Float16: return cuda_text::kStorageFp16;
    case CudaStorage::Real: break;
  }
  return cuda_text::kStorageReal;
}

}  // namespace sink::kernels
