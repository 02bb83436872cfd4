// The residual add and the norm after it, one pass over the activations each way, for a pre-norm step: the residual
// stream s = x + r (float: x the stream so far, r a sublayer's output in storage) and the next sublayer's input
// n = (s - m) a w + b (in storage, what its products read), with a = 1 / sqrt(mean((s - m)^2) + eps): RMSNorm
// (m = 0, no b) or LayerNorm (m the row's mean). Eager LibTorch makes the add, the norm (one fused kernel on a
// recent GPU build, four operations in the formula) and autocast's cast of its output separate passes each way.
//
// One warp a row, kNormWarps rows a block; a row's columns strided over the lanes, its sums reduced by shuffles.
// Printed before this text (kernels/cuda/step_source.cpp): real (float), the SFU's functions, store_t with load and
// store, and
//   constexpr long long kNormWidth;  // d, the row's length
//   constexpr float kNormEps;
//   constexpr bool kNormCentered;    // LayerNorm: the mean subtracted, a bias added
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

// A row's m and a from the stream s (written by this lane for its own columns, or read back): the mean first, then
// the squares about it (two passes, which LayerNorm's cancellation needs; RMSNorm's m is 0 and takes one). On the
// special-function unit (kernels/cuda/math_sfu.cuh): IEEE's division and square root call a slow path whose calling
// convention spilled registers.
struct RowScale {
  float mean, a;
};
__device__ __forceinline__ RowScale row_scale(const float* s, long long lane) {
  constexpr float kInverseWidth = 1.0f / (float)kNormWidth;
  float mean = 0;
  if (kNormCentered) {
    float sum = 0;
    for (long long c = lane; c < kNormWidth; c += 32) sum += s[c];
    mean = warp_total(sum) * kInverseWidth;
  }
  float squares = 0;
  for (long long c = lane; c < kNormWidth; c += 32) squares += (s[c] - mean) * (s[c] - mean);
  return {mean, sink_rcp(sink_sqrt(warp_total(squares) * kInverseWidth + kNormEps))};
}

extern "C" __global__ void __launch_bounds__(kNormWarps * 32, 1)
    sink_residual_norm_forward(SINK_PARAMS_sink_residual_norm_forward) {
  const long long row = (long long)blockIdx.x * kNormWarps + (threadIdx.x >> 5);
  if (row >= rows) return;  // (the whole warp: a row is a warp's)
  const long long lane = threadIdx.x & 31u, at = row * kNormWidth;
  for (long long c = lane; c < kNormWidth; c += 32) s[at + c] = x[at + c] + load(r, at + c);
  const RowScale scale = row_scale(s + at, lane);  // (the lane reads back the columns it wrote itself)
  for (long long c = lane; c < kNormWidth; c += 32)
    store(n, at + c, (s[at + c] - scale.mean) * scale.a * w[c] + (kNormCentered ? b[c] : 0.0f));
}

// With h = (s - m) a and g = w dn: ds = ds_after + a (g - mean(g) - h mean(g h)), the mean(g) term LayerNorm's
// alone (RMSNorm's m is no function of s). ds_after, the gradient that reached the stream past the norm, may be
// null. dw = sum dn h and db = sum dn over the rows: each block's partial sums in its row of dw_part and db_part;
// the caller sums the blocks (a fixed order: the same bits every run). The blocks stride over the rows, `blocks`
// of them.
struct ResidualNormShared {
  float dw[kNormWarps][kNormWidth];  // each warp's own partial sums: no two warps add into one word
  float db[kNormCentered ? kNormWarps : 1][kNormCentered ? kNormWidth : 1];
};

extern "C" __global__ void __launch_bounds__(kNormWarps * 32, 1)
    sink_residual_norm_backward(SINK_PARAMS_sink_residual_norm_backward) {
  ResidualNormShared& shared = shared_block<ResidualNormShared, sizeof(ResidualNormShared)>();
  const int warp = threadIdx.x >> 5;
  const long long lane = threadIdx.x & 31u;
  float* dw = shared.dw[warp];
  float* db = shared.db[kNormCentered ? warp : 0];
  for (long long c = lane; c < kNormWidth; c += 32) {
    dw[c] = 0;
    if (kNormCentered) db[c] = 0;
  }
  for (long long row = (long long)blockIdx.x * kNormWarps + warp; row < rows; row += blocks * kNormWarps) {
    const long long at = row * kNormWidth;
    const RowScale scale = row_scale(s + at, lane);
    float g_sum = 0, gh_sum = 0;
    for (long long c = lane; c < kNormWidth; c += 32) {
      const float g = w[c] * load(dn, at + c);
      g_sum += g;
      gh_sum += g * (s[at + c] - scale.mean) * scale.a;
    }
    constexpr float kInverseWidth = 1.0f / (float)kNormWidth;
    const float g_mean = kNormCentered ? warp_total(g_sum) * kInverseWidth : 0.0f;
    const float gh_mean = warp_total(gh_sum) * kInverseWidth;
    for (long long c = lane; c < kNormWidth; c += 32) {
      const float h = (s[at + c] - scale.mean) * scale.a, d = load(dn, at + c);
      dw[c] += d * h;
      if (kNormCentered) db[c] += d;
      ds[at + c] = (ds_after ? ds_after[at + c] : 0.0f) + scale.a * (w[c] * d - g_mean - h * gh_mean);
    }
  }
  __syncthreads();
  for (long long c = threadIdx.x; c < kNormWidth; c += kNormWarps * 32) {
    float dw_total = 0, db_total = 0;
#pragma unroll
    for (int k = 0; k < kNormWarps; ++k) {
      dw_total += shared.dw[k][c];
      if (kNormCentered) db_total += shared.db[k][c];
    }
    dw_part[(long long)blockIdx.x * kNormWidth + c] = dw_total;
    if (kNormCentered) db_part[(long long)blockIdx.x * kNormWidth + c] = db_total;
  }
}
