// The special-function unit's exp, division, log, log1p, tanh and sqrt in float, for the tensor-core kernels
// (kernels/cuda/cuda_source.cpp says why): one or two instructions each, selects where IEEE's functions branch.
#ifndef SINK_CPU_EMULATION
// One instruction of the special-function unit on a float, subnormals flushed to zero.
#define SINK_SFU(name, instruction)                 \
  __device__ __forceinline__ float name(float a) {  \
    float r;                                        \
    asm(instruction " %0, %1;" : "=f"(r) : "f"(a)); \
    return r;                                       \
  }
SINK_SFU(sink_ex2, "ex2.approx.ftz.f32")
// 1 / b: a / b is a times it, two instructions (one where a is 1). Without .ftz (__fdividef) the range fix-ups
// made a division six.
SINK_SFU(sink_rcp, "rcp.approx.ftz.f32")
SINK_SFU(sink_lg2, "lg2.approx.ftz.f32")  // log2 a: within 2^-22 absolute near 1, relative elsewhere
SINK_SFU(sink_sqrt, "sqrt.approx.ftz.f32")
#endif
__device__ __forceinline__ real r_exp(real a) { return sink_ex2(a * 1.44269504088896341f); }
__device__ __forceinline__ real r_exp_diff(real a, real b) {  // e^(a - b); b * log2 e is once per row
  return sink_ex2(fmaf(a, 1.44269504088896341f, -(b * 1.44269504088896341f)));
}
// e^(a x + b) and e^min(a x + b, c): a and c constants (times log2 e at compile time), b once per row
__device__ __forceinline__ real r_exp_affine(real x, real a, real b) {
  return sink_ex2(fmaf(x, a * 1.44269504088896341f, b * 1.44269504088896341f));
}
__device__ __forceinline__ real r_exp_affine_min(real x, real a, real b, real c) {
  return sink_ex2(fminf(fmaf(x, a * 1.44269504088896341f, b * 1.44269504088896341f), c * 1.44269504088896341f));
}
// IEEE's logf, log1pf and tanhf reduce their argument's range with branches, and a score of them (softplus,
// tanh) branched per element: a researcher's own expression ran 4x softmax's instructions. These are selects.
__device__ __forceinline__ real r_log(real a) { return sink_lg2(a) * 0.693147180559945309f; }
// log(1 + a): where 1 + a rounds to u, a / (u - 1) restores what the rounding lost (0 where u is 1: a itself).
__device__ __forceinline__ real r_log1p(real a) {
  const real u = 1 + a, d = u - 1;
  return d == 0 ? a : r_log(u) * (a * sink_rcp(d));
}
// tanh a = sign(a) (1 - t) / (1 + t), t = e^-2|a| in (0, 1]: no overflow; near 0 within float's last place of 1.
__device__ __forceinline__ real r_tanh(real a) {
  const real t = sink_ex2(fabsf(a) * -2.88539008177792681f);
  return copysignf((1 - t) * sink_rcp(1 + t), a);
}
__device__ __forceinline__ real r_sqrt(real a) { return sink_sqrt(a); }
