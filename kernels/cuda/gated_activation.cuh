// A gated FFN's activation, h = act(gate) * up, and its gradients, one pass each way, reading the gate and up
// projections where the stacked product wrote them: gate_up [rows, 2 width], each row's gate then its up
// (runtime/training/model.h's project). Eager LibTorch makes the activation and the product two passes forward and
// four back.
//
// Printed before this text (kernels/cuda/step_source.cpp): real (float), the SFU's functions, store_t with load and
// store, and
//   constexpr int kGatedActivation;  // 0 relu (ReGLU), 1 gelu (GeGLU, erf's, LibTorch's default), 2 silu (SwiGLU)
// A thread a column: blockIdx.x picks the row's columns, blockIdx.y the first row, and the blocks stride over the
// rows, `row_blocks` of them (no 64-bit division, which calls a slow path). Sizes after the pointers: rows, width,
// row_blocks, one unused.

constexpr int kGatedThreads = 256;

// e^a and 1 / b on the special-function unit (kernels/cuda/math_sfu.cuh): IEEE's division calls a slow path.
__device__ __forceinline__ float gate_activation(float g) {
  if (kGatedActivation == 0) return g > 0.0f ? g : 0.0f;
  if (kGatedActivation == 1) return 0.5f * g * (1.0f + erff(g * 0.70710678118654752f));
  return g * sink_rcp(1.0f + r_exp(-g));
}

// act'(g): relu's step (0 at 0, as LibTorch's), gelu's Phi(g) + g phi(g), silu's s (1 + g (1 - s)), s = sigmoid(g).
__device__ __forceinline__ float gate_slope(float g) {
  if (kGatedActivation == 0) return g > 0.0f ? 1.0f : 0.0f;
  if (kGatedActivation == 1)
    return 0.5f * (1.0f + erff(g * 0.70710678118654752f)) + g * 0.39894228040143268f * r_exp(-0.5f * g * g);
  const float sigmoid = sink_rcp(1.0f + r_exp(-g));
  return sigmoid * (1.0f + g * (1.0f - sigmoid));
}

extern "C" __global__ void __launch_bounds__(kGatedThreads) sink_gated_forward(SINK_PARAMS_sink_gated_forward) {
  const long long c = (long long)blockIdx.x * kGatedThreads + threadIdx.x;
  if (c >= width) return;
  for (long long row = blockIdx.y; row < rows; row += row_blocks) {
    const long long at = row * 2 * width + c;
    store(h, row * width + c, gate_activation(load(gate_up, at)) * load(gate_up, at + width));
  }
}

// d gate = dh up act'(gate), d up = dh act(gate), into d_gate_up laid out as gate_up.
extern "C" __global__ void __launch_bounds__(kGatedThreads) sink_gated_backward(SINK_PARAMS_sink_gated_backward) {
  const long long c = (long long)blockIdx.x * kGatedThreads + threadIdx.x;
  if (c >= width) return;
  for (long long row = blockIdx.y; row < rows; row += row_blocks) {
    const long long at = row * 2 * width + c;
    const float g = load(gate_up, at), up = load(gate_up, at + width), grad = load(dh, row * width + c);
    store(d_gate_up, at, grad * up * gate_slope(g));
    store(d_gate_up, at + width, grad * gate_activation(g));
  }
}
