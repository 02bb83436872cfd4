#include "runtime/training/cpu_kernels.h"

#include <cmath>
#include <initializer_list>

namespace sink::rt::cpu {
namespace {

// Each entry point twice on x86-64: for AVX2 with FMA (x86-64-v3) and for the baseline, the loader picking one for
// the machine (GCC's and Clang's function multiversioning). Elsewhere the compiler's own target.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define SINK_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SINK_CPU_CLONES
#endif
// The helpers inline into each clone, so that they compile for its instruction set.
#define SINK_INLINE static inline __attribute__((always_inline))

typedef float v8 __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t v8i __attribute__((vector_size(kLanes * sizeof(int32_t))));

SINK_INLINE v8 load(const float* p) {
  v8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
SINK_INLINE void store(float* p, v8 v) { __builtin_memcpy(p, &v, sizeof v); }
// The first n < kLanes floats of p, the rest zero; and back.
SINK_INLINE v8 load_part(const float* p, int64_t n) {
  v8 v = {};
  __builtin_memcpy(&v, p, n * sizeof(float));
  return v;
}
SINK_INLINE void store_part(float* p, v8 v, int64_t n) { __builtin_memcpy(p, &v, n * sizeof(float)); }
SINK_INLINE v8 splat(float a) { return v8{} + a; }
SINK_INLINE float sum(const v8& v) {
  float total = 0;
  for (int l = 0; l < kLanes; ++l) total += v[l];
  return total;
}
// (x_0, x_1, x_2, x_3, ...) -> (x_1, x_0, x_3, x_2, ...): each RoPE pair swapped.
SINK_INLINE v8 swap_pairs(v8 v) { return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6); }

// e^x as 2^n e^r, n = round(x / ln 2), |r| <= ln 2 / 2, e^r by its Taylor polynomial to r^7 (error below r^8 / 8!
// < 6e-9 relative) and 2^n written into the exponent bits. x is clamped to where 2^n is a normal float; NaN stays
// NaN. A libm call per lane would not vectorize.
SINK_INLINE v8 exp8(v8 x) {
  x = x < -87.0f ? splat(-87.0f) : x;
  x = x > 88.0f ? splat(88.0f) : x;
  const v8 round = splat(12582912.0f);  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const v8 n = (x * 1.44269504088896341f + round) - round;
  const v8 r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;  // ln 2 in two parts: r exactly
  v8 p = splat(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = p * r + c;
  v8 scale;
  const v8i bits = (__builtin_convertvector(n, v8i) + 127) << 23;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
SINK_INLINE v8 sigmoid8(v8 g) { return 1.0f / (1.0f + exp8(-g)); }

}  // namespace

SINK_CPU_CLONES void residual_rms_forward(const float* x, const float* r, const float* w, float eps, int64_t d,
                                          int64_t first, int64_t last, float* s, float* n, float* rstd) {
  for (int64_t row = first; row < last; ++row) {
    const int64_t o = row * d;
    v8 squares = {};
    for (int64_t c = 0; c < d; c += kLanes) {
      const v8 v = load(x + o + c) + load(r + o + c);
      store(s + o + c, v);
      squares += v * v;
    }
    const float inv = 1.0f / std::sqrt(sum(squares) / static_cast<float>(d) + eps);
    rstd[row] = inv;
    for (int64_t c = 0; c < d; c += kLanes) store(n + o + c, load(s + o + c) * inv * load(w + c));
  }
}

SINK_CPU_CLONES void residual_rms_backward(const float* s, const float* w, const float* rstd, const float* dn,
                                           const float* ds_after, int64_t d, int64_t first, int64_t last, float* ds,
                                           float* dw) {
  for (int64_t row = first; row < last; ++row) {
    const int64_t o = row * d;
    const float inv = rstd[row];
    // n^ = s rstd, the normed row before the gain: ds = rstd (dn w - n^ mean(dn w n^)).
    v8 dot = {};
    for (int64_t c = 0; c < d; c += kLanes) {
      const v8 normed = load(s + o + c) * inv, dn_c = load(dn + o + c);
      dot += dn_c * load(w + c) * normed;
      store(dw + c, load(dw + c) + dn_c * normed);
    }
    const float mean = sum(dot) / static_cast<float>(d);
    for (int64_t c = 0; c < d; c += kLanes) {
      const v8 normed = load(s + o + c) * inv;
      v8 g = (load(dn + o + c) * load(w + c) - normed * mean) * inv;
      if (ds_after) g += load(ds_after + o + c);
      store(ds + o + c, g);
    }
  }
}

SINK_CPU_CLONES void swiglu_forward(const float* g, const float* u, int64_t first, int64_t last, float* h) {
  int64_t e = first;
  for (; e + kLanes <= last; e += kLanes) {
    const v8 gate = load(g + e);
    store(h + e, gate * sigmoid8(gate) * load(u + e));
  }
  if (e < last) {
    const v8 gate = load_part(g + e, last - e);
    store_part(h + e, gate * sigmoid8(gate) * load_part(u + e, last - e), last - e);
  }
}

SINK_CPU_CLONES void swiglu_backward(const float* g, const float* u, const float* dh, int64_t first, int64_t last,
                                     float* dg, float* du) {
  // silu'(g) = sigma(g) (1 + g (1 - sigma(g))).
  auto at = [](v8 gate, v8 up, v8 d_h, v8& d_gate, v8& d_up) {
    const v8 sig = sigmoid8(gate);
    d_up = d_h * gate * sig;
    d_gate = d_h * up * sig * (1.0f + gate * (1.0f - sig));
  };
  int64_t e = first;
  for (; e + kLanes <= last; e += kLanes) {
    v8 d_gate, d_up;
    at(load(g + e), load(u + e), load(dh + e), d_gate, d_up);
    store(dg + e, d_gate), store(du + e, d_up);
  }
  if (const int64_t n = last - e; n > 0) {
    v8 d_gate, d_up;
    at(load_part(g + e, n), load_part(u + e, n), load_part(dh + e, n), d_gate, d_up);
    store_part(dg + e, d_gate, n), store_part(du + e, d_up, n);
  }
}

SINK_CPU_CLONES void rope_heads_forward(const float* x, const float* cos, const float* sin, int64_t T, int64_t heads,
                                        int64_t dh, int64_t first, int64_t last, float* out) {
  for (int64_t row = first; row < last; ++row) {
    const int64_t b = row / T, t = row % T;
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = x + (row * heads + h) * dh;
      float* to = out + ((b * heads + h) * T + t) * dh;
      for (int64_t c = 0; c < dh; c += kLanes) {
        const v8 v = load(in + c);
        store(to + c, v * load(cos + t * dh + c) + swap_pairs(v) * load(sin + t * dh + c));
      }
    }
  }
}

SINK_CPU_CLONES void rope_heads_backward(const float* dout, const float* cos, const float* sin, int64_t T,
                                         int64_t heads, int64_t dh, int64_t first, int64_t last, float* dx) {
  // out_c = x_c cos_c + x_c' sin_c (c' = c's pair), so dx_c = dout_c cos_c + dout_c' sin_c'.
  for (int64_t row = first; row < last; ++row) {
    const int64_t b = row / T, t = row % T;
    for (int64_t h = 0; h < heads; ++h) {
      const float* from = dout + ((b * heads + h) * T + t) * dh;
      float* to = dx + (row * heads + h) * dh;
      for (int64_t c = 0; c < dh; c += kLanes) {
        const v8 v = load(from + c);
        store(to + c, v * load(cos + t * dh + c) + swap_pairs(v) * swap_pairs(load(sin + t * dh + c)));
      }
    }
  }
}

SINK_CPU_CLONES void exp_each(const float* x, int64_t n, float* out) {
  int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes) store(out + e, exp8(load(x + e)));
  if (e < n) store_part(out + e, exp8(load_part(x + e, n - e)), n - e);
}

}  // namespace sink::rt::cpu
