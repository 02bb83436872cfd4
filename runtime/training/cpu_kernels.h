// The CPU's fused kernels for the step's operations around the attention (runtime/training/cpu_step_operations.h).
// Each reads its inputs once and writes its outputs once, where LibTorch's operations pass over the same data three
// to five times (RMSNorm's square, mean, rsqrt and two products; SwiGLU's activation, product and their three
// backward passes; RoPE's swap, products and sum, then the copy into head-major rows the attention reads). Loops
// over rows in the compilers' vector extension, compiled twice (AVX2 with FMA, and the baseline) and chosen when the
// program loads. No LibTorch here: the callers split the rows over threads, the tests call them on plain arrays.
//
// Rows are of `d` floats, `d` a multiple of kLanes where a function says so; [first, last) is the part one thread
// computes.
#pragma once
#include <cstdint>

namespace sink::rt::cpu {

inline constexpr int64_t kLanes = 8;  // floats a vector holds: the row widths the row kernels take are multiples

// s = x + r and n = s / sqrt(mean(s^2) + eps) * w for rows [first, last), and each row's rstd = 1 / sqrt(mean(s^2)
// + eps), which the backward reads.
void residual_rms_forward(const float* x, const float* r, const float* w, float eps, int64_t d, int64_t first,
                          int64_t last, float* s, float* n, float* rstd);

// The gradient of those rows from dn (n's): ds = ds_after + J^T dn, J the norm's Jacobian at s (ds_after, the
// stream's own gradient, may be null), and the rows' sum of dn * s * rstd added to dw (d floats).
void residual_rms_backward(const float* s, const float* w, const float* rstd, const float* dn, const float* ds_after,
                           int64_t d, int64_t first, int64_t last, float* ds, float* dw);

// Elements [first, last) of h = silu(g) * u, silu(g) = g / (1 + e^-g) (any count: the tail is padded).
void swiglu_forward(const float* g, const float* u, int64_t first, int64_t last, float* h);
// Their gradients from dh: dg = dh u silu'(g), du = dh silu(g).
void swiglu_backward(const float* g, const float* u, const float* dh, int64_t first, int64_t last, float* dg,
                     float* du);

// RoPE into heads: rows [first, last) of x [B T, heads dh] (row b T + t), each head's interleaved pairs turned by
// the tables cos and sin [T, dh] (Transformer::rope_tables, x cos + swap(x) sin), written to out [B, heads, T, dh].
// dh a multiple of kLanes.
void rope_heads_forward(const float* x, const float* cos, const float* sin, int64_t T, int64_t heads, int64_t dh,
                        int64_t first, int64_t last, float* out);
// The gradient: rows [first, last) of dx [B T, heads dh] from dout [B, heads, T, dh].
void rope_heads_backward(const float* dout, const float* cos, const float* sin, int64_t T, int64_t heads, int64_t dh,
                         int64_t first, int64_t last, float* dx);

// e^x of each of n floats, as the kernels compute it (within 2 units in the last place); for the tests.
void exp_each(const float* x, int64_t n, float* out);

}  // namespace sink::rt::cpu
