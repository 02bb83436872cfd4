// The residual add and the RMSNorm after it, one pass over the activations each way, for a pre-norm step: the
// residual stream s = x + r (float: x the stream so far, r a sublayer's output in storage) and the next sublayer's
// input n = s / sqrt(mean(s^2) + eps) * w (in storage, what its products read). Eager LibTorch makes the add and the
// norm's four operations five passes; the backward, four more.
//
// One warp a row, kNormWarps rows a block; a row's columns strided over the lanes, its sums reduced by shuffles.
// Printed before this text (kernels/cuda/step_source.cpp): real (float), the SFU's functions, store_t with load and
// store, and
//   constexpr long long kNormWidth;  // d, the row's length
//   constexpr float kNormEps;
// Sizes after the pointers: rows, the backward's block count, and two unused (every kernel takes four).

constexpr int kNormWarps = 4;
// (The launch bounds say one block an SM at least: without the second number, NVRTC's assembler held the backward's
// half-precision variant for sm_90 to 32 registers and spilled; tests/kernels/step_kernels_test.cpp checks.)

// Each lane's sums over its columns, then over the warp: every lane ends with the row's total.
__device__ __forceinline__ float warp_total(float v) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) v += shfl_xor(v, mask);
  return v;
}

// On the special-function unit (kernels/cuda/math_sfu.cuh): IEEE's division and square root call a slow path whose
// calling convention spilled registers.
__device__ __forceinline__ float inverse_rms(float squares) {
  return sink_rcp(sink_sqrt(squares * (1.0f / (float)kNormWidth) + kNormEps));
}

extern "C" __global__ void __launch_bounds__(kNormWarps * 32, 1)
    sink_residual_norm_forward(const float* x, const store_t* r, const float* w, float* s, store_t* n, long long rows,
                               long long unused0, long long unused1, long long unused2) {
  const long long row = (long long)blockIdx.x * kNormWarps + (threadIdx.x >> 5);
  if (row >= rows) return;  // (the whole warp: a row is a warp's)
  const long long lane = threadIdx.x & 31u, at = row * kNormWidth;
  float squares = 0;
  for (long long c = lane; c < kNormWidth; c += 32) {
    const float v = x[at + c] + load(r, at + c);
    s[at + c] = v;
    squares += v * v;
  }
  const float scale = inverse_rms(warp_total(squares));
  // (The lane reads back the columns it wrote itself.)
  for (long long c = lane; c < kNormWidth; c += 32) store(n, at + c, s[at + c] * scale * w[c]);
}

// ds = ds_after + the norm's gradient: with a = 1 / rms(s), dn_j's part of ds_i is a w_i dn_i for j = i, less
// s_i a^3 (sum_j w_j dn_j s_j) / d through a. ds_after, the gradient that reached the stream past the norm, may be
// null. dw's partial sums, block b's rows in dw_part[b]; the caller sums the blocks (a fixed order: the same bits
// every run). The blocks stride over the rows, `blocks` of them.
struct ResidualNormShared {
  float dw[kNormWarps][kNormWidth];  // each warp's own partial sums: no two warps add into one word
};

extern "C" __global__ void __launch_bounds__(kNormWarps * 32, 1)
    sink_residual_norm_backward(const store_t* dn, const float* ds_after, const float* s, const float* w, float* ds,
                                float* dw_part, long long rows, long long blocks, long long unused0,
                                long long unused1) {
  ResidualNormShared& shared = shared_block<ResidualNormShared, sizeof(ResidualNormShared)>();
  const int warp = threadIdx.x >> 5;
  const long long lane = threadIdx.x & 31u;
  float* dw = shared.dw[warp];
  for (long long c = lane; c < kNormWidth; c += 32) dw[c] = 0;
  for (long long row = (long long)blockIdx.x * kNormWarps + warp; row < rows; row += blocks * kNormWarps) {
    const long long at = row * kNormWidth;
    float squares = 0, dot = 0;
    for (long long c = lane; c < kNormWidth; c += 32) {
      const float v = s[at + c];
      squares += v * v;
      dot += w[c] * load(dn, at + c) * v;
    }
    const float a = inverse_rms(warp_total(squares));
    const float through_scale = warp_total(dot) * a * a * a * (1.0f / (float)kNormWidth);
    for (long long c = lane; c < kNormWidth; c += 32) {
      const float v = s[at + c], g = load(dn, at + c);
      dw[c] += g * v * a;
      ds[at + c] = (ds_after ? ds_after[at + c] : 0.0f) + a * w[c] * g - v * through_scale;
    }
  }
  __syncthreads();
  for (long long c = threadIdx.x; c < kNormWidth; c += kNormWarps * 32) {
    float total = 0;
#pragma unroll
    for (int k = 0; k < kNormWarps; ++k) total += shared.dw[k][c];
    dw_part[(long long)blockIdx.x * kNormWidth + c] = total;
  }
}
