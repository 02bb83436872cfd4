#include "kernels/cuda/cuda_source.h"

#include <fmt/format.h>

#include <string_view>

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
    out += R"(#ifndef SINK_CPU_EMULATION
// One instruction of the special-function unit on a float, subnormals flushed to zero.
#define SINK_SFU(name, instruction) \
  __device__ __forceinline__ float name(float a) { \
    float r; \
    asm(instruction " %0, %1;" : "=f"(r) : "f"(a)); \
    return r; \
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
)";
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

std::string cuda_real_storage() {
  return R"(
typedef real store_t;
__device__ __forceinline__ real to_real(store_t v) { return v; }
__device__ __forceinline__ real load(const store_t* p, long long n) { return p[n]; }
__device__ __forceinline__ void store(store_t* p, long long n, real v) { p[n] = v; }
)";
}

std::string cuda_bf16_storage() {
  return R"(
// bfloat16 as its bits: the upper half of a float. No header needed.
typedef unsigned short store_t;
__device__ __forceinline__ real to_real(store_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ real load(const store_t* p, long long n) { return to_real(p[n]); }
__device__ __forceinline__ void store(store_t* p, long long n, real v) {
  if (v != v) { p[n] = (unsigned short)0x7fc0; return; }
  const unsigned u = __float_as_uint(v);
  p[n] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
}
)";
}

std::string cuda_fp16_storage() {
  return R"(
// IEEE binary16 as its bits, converted by integer arithmetic (no header, and
// the same text runs in the CPU emulation): subnormals, infinities and NaN
// kept, rounding to nearest even, overflow to infinity.
typedef unsigned short store_t;
__device__ __forceinline__ real to_real(store_t bits) {
  const unsigned h = bits, sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 31) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in float
    const float m = (float)mantissa * 5.9604644775390625e-8f;
    return sign ? -m : m;
  }
  return __uint_as_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}
__device__ __forceinline__ real load(const store_t* p, long long n) { return to_real(p[n]); }
__device__ __forceinline__ void store(store_t* p, long long n, real v) {
  const unsigned u = __float_as_uint((float)v), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) { p[n] = (unsigned short)(sign | 0x7e00u); return; }
  if (a >= 0x477ff000u) { p[n] = (unsigned short)(sign | 0x7c00u); return; }  // from 65520 up: infinity
  if (a >= 0x38800000u) {  // a normal half: rebias the exponent, round 23 mantissa bits to 10
    const unsigned r = a - 0x38000000u;
    p[n] = (unsigned short)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    return;
  }
  // A subnormal half (or zero): the float's significand shifted to units of 2^-24.
  const int shift = 126 - (int)(a >> 23);
  if (shift > 24) { p[n] = (unsigned short)sign; return; }
  const unsigned significand = (a & 0x7fffffu) | 0x800000u, halfway = 1u << (shift - 1);
  unsigned m = significand >> shift;
  const unsigned rest = significand & ((1u << shift) - 1u);
  if (rest > halfway || (rest == halfway && (m & 1u))) ++m;
  p[n] = (unsigned short)(sign | m);
}
)";
}

std::string cuda_shared_functions() {
  return R"(
__device__ __forceinline__ long long imin(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long imax(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long distance(long long i, long long j) { return i > j ? i - j : j - i; }

// The keys query i sees: [lo, hi] (causal, a prefix seen both ways, a window).
__device__ __forceinline__ void key_range(long long i, long long T, long long& lo, long long& hi) {
  lo = WINDOW > 0 ? imax(0, i - (WINDOW - 1)) : 0;
  hi = PREFIX > 0 ? imin(imax(i, PREFIX - 1), T - 1) : i;
}
// The queries that can see key j: [first, last] (each pair still checks key_range).
__device__ __forceinline__ void query_range(long long j, long long T, long long& first, long long& last) {
  first = PREFIX > 0 && j < PREFIX ? 0 : j;
  last = WINDOW > 0 ? imin(T - 1, j + WINDOW - 1) : T - 1;
}

// Rows first.. of a and b (zero past `last`) into shared tiles of ROWS rows, by the block's THREADS threads.
template <int ROWS, int THREADS>
__device__ __forceinline__ void load_tiles(real (*a_tile)[D], real (*b_tile)[D], const store_t* a, const store_t* b,
                                           long long first, long long last) {
  for (int e = threadIdx.x; e < ROWS * D; e += THREADS) {
    const long long r = first + e / D;
    a_tile[e / D][e % D] = r <= last ? load(a, r * D + e % D) : (real)0;
    b_tile[e / D][e % D] = r <= last ? load(b, r * D + e % D) : (real)0;
  }
}

// A zero Z (e.g. relu scores all zero) normalizes nothing.
__device__ __forceinline__ real safe(real Z) { return r_fabs(Z) < (real)1e-30 ? (real)1 : Z; }

// The online form's shift for a running max m: m, or 0 while m = -inf (no column seen yet).
__device__ __forceinline__ real shift_of(real m) { return m == -SINK_INF ? (real)0 : m; }

// One column of logit x folded into a row's running state: the shift m (the online form's row max) and the
// sum of terms P. w: the column's weight (A = ALPHA w / Z at the end); rescale: what the weights so far
// are scaled by as m grows.
__device__ __forceinline__ void fold_column(real x, real fi, real fj, real fT, real& m, real& P, real& w,
                                            real& rescale) {
  if (ONLINE) {
    rescale = 1;
    if (x > m) {  // the weights scale by the rescale, the terms by term_power of it (p-norm: p-th powers)
      rescale = r_exp(m - x);
      P *= term_power(rescale);
      m = x;
    }
    const real shift = shift_of(m), s = score(x, shift, fi, fj, fT), unit = r_exp(-shift);
    P += norm_term(s, x, unit), w = norm_weight(s, x, unit);
  } else {
    const real s = score(x, (real)0, fi, fj, fT);
    rescale = 1;
    P += norm_term(s, x, (real)1), w = norm_weight(s, x, (real)1);
  }
}

// The weight w of a pair with logit x, from the row statistic st1 (m online, P direct).
__device__ __forceinline__ real column_weight(real x, real fi, real fj, real fT, real st1) {
  return ONLINE ? norm_weight(score(x, st1, fi, fj, fT), x, r_exp(-st1))
                : norm_weight(score(x, (real)0, fi, fj, fT), x, (real)1);
}

// The attention A of a pair with logit x and its gradient dx, from the forward's row statistics st0 = Z
// (and its reciprocal, which a caller computes once per row), st1, dA = <dO_i, v_j> and Dd = <dO_i, O_i>:
// dL/ds = (alpha dw/ds dA - D dZ/ds) / Z. Online, s, unit and ds/dx are of x - m, and A and dx are as
// unshifted, being of degree 0 in (s, unit). OF_PRODUCT: v is the product q.k, the logit its scaling alone
// (the tensor-core kernels without a position table), which folds into the exponent's multiply-add; else v is
// the logit. dx_scale: dx comes times it, and Dd must (the tensor-core kernels want SCALE_QK dx, the gradient
// of q.k, and scale D once per row: then it costs no multiply per pair at any d_head).
template <bool OF_PRODUCT = false>
__device__ __forceinline__ void column_grad(real v, real fi, real fj, real fT, real dA, real Dd, real st0,
                                            real inv_st0, real st1, real& A, real& dx, real dx_scale = 1) {
  const real x = OF_PRODUCT ? v * SCALE_QK : v, unit = ONLINE ? r_exp(-st1) : (real)1;
  real s, slope;
  if (OF_PRODUCT) {
    const real shift = ONLINE ? st1 : (real)0;
    s = score_of_product(v, shift, fi, fj, fT), slope = score_grad_of_product(v, shift, fi, fj, fT);
  } else {
    // (x - m taken first, as the shift: backward_keys's m differs per column, so e^(x - m) as one multiply-add
    // would cost a multiply per column, and x - m is where the compiler folds the logit's scaling in.)
    const real xe = ONLINE ? x - st1 : x;
    s = score(xe, (real)0, fi, fj, fT), slope = score_grad(xe, (real)0, fi, fj, fT);
  }
  A = ALPHA * norm_weight(s, x, unit) * inv_st0;
  const real grad_s = ALPHA * dx_scale * norm_weight_slope(s, x, unit) * dA - Dd * norm_slope(s, x, unit, st0, st1);
  // (1 / Z times the slope first: where the weight and the slope are both s (softmax), that product is A's,
  // and dx one multiply.)
  dx = grad_s * (inv_st0 * slope);
}

// column_grad's statistics of a row from the forward's Z and st1. Online, A and dx are of degree 0 in
// (s, unit) and Z(c s, c unit) = c Z(s, unit), so the shift m + log Z stands for m with Z = 1: s is then the
// weight over Z, one multiply-add into the exponent, and the multiply by 1 / Z per pair goes.
__device__ __forceinline__ void backward_statistics(real Z, real st1_in, real& st0, real& inv_st0, real& st1) {
  st0 = ONLINE ? (real)1 : Z, inv_st0 = ONLINE ? (real)1 : r_div(1, Z), st1 = ONLINE ? st1_in + r_log(Z) : st1_in;
}
)";
}

std::string cuda_forward_body() {
  return R"( {
  __shared__ real k_tile[FWD_KEYS][D], v_tile[FWD_KEYS][D];
  const long long bh = blockIdx.y, head = bh % H;
  const long long first_row = (long long)blockIdx.x * FWD_ROWS, i = first_row + threadIdx.x;
  const bool is_row = i < T;
  const long long row = is_row ? i : T - 1;
  q += bh * T * D, k += bh * T * D, v += bh * T * D, o += bh * T * D, stats += bh * 2 * T;
  if (POSITION_BIAS) g += head * g_step;
  if (KEY_BIAS) kstar += head * star_step, vstar += head * star_step;
  if (SINK_LOGIT) sink += head;
  real qr[D], acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) qr[d] = load(q, row * D + d), acc[d] = 0;
  const real fi = (real)(row + 1);
  long long lo, hi, block_lo, block_hi, unused;
  key_range(row, T, lo, hi);
  // The running state (fold_column); the k* column (value v*, every query sees it) and the sink logit (no
  // value) first.
  real m = ONLINE ? SHIFT_FLOOR : -SINK_INF, P = 0, w, rescale;
  if (KEY_BIAS) {
    real xs = 0;
#pragma unroll
    for (int d = 0; d < D; ++d) xs += qr[d] * kstar[d];
    fold_column(xs * SCALE_QK, fi, (real)0, (real)T, m, P, w, rescale);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = w * vstar[d];
  }
  if (SINK_LOGIT) {
    fold_column(sink[0], fi, (real)0, (real)T, m, P, w, rescale);
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] *= rescale;
  }
  key_range(first_row, T, block_lo, unused);
  key_range(imin(first_row + FWD_ROWS - 1, T - 1), T, unused, block_hi);
  for (long long kb = block_lo; kb <= block_hi; kb += FWD_KEYS) {
    __syncthreads();
    load_tiles<FWD_KEYS, FWD_ROWS>(k_tile, v_tile, k, v, kb, block_hi);
    __syncthreads();
    const int n = (int)imin(FWD_KEYS, block_hi - kb + 1);
    for (int c = 0; c < n; ++c) {
      const long long j = kb + c;
      if (!is_row || j < lo || j > hi) continue;
      real x = 0;
#pragma unroll
      for (int d = 0; d < D; ++d) x += qr[d] * k_tile[c][d];
      x *= SCALE_QK;
      if (POSITION_BIAS) x += g[distance(row, j)];
      fold_column(x, fi, (real)(j + 1), (real)T, m, P, w, rescale);
      if (rescale != (real)1) {
#pragma unroll
        for (int d = 0; d < D; ++d) acc[d] *= rescale;
      }
#pragma unroll
      for (int d = 0; d < D; ++d) acc[d] += w * v_tile[c][d];
    }
  }
  if (!is_row) return;  // after the last barrier
  // Z and m apart, not m + log Z: with large logits the sum would lose log Z's digits.
  const real Z = safe(norm_finish(P, ONLINE ? r_exp(-shift_of(m)) : (real)1));
  stats[row] = Z, stats[T + row] = ONLINE ? m : P;
  const real scale = ALPHA / Z;
#pragma unroll
  for (int d = 0; d < D; ++d) store(o, row * D + d, acc[d] * scale);
}

)";
}

std::string cuda_backward_rows_body() {
  return R"( {
  const long long bh = blockIdx.y, head = bh % H, i = (long long)blockIdx.x * ROW_THREADS + threadIdx.x;
  if (i >= T) return;  // (no barrier in this kernel)
  q += bh * T * D, o += bh * T * D, dout += bh * T * D, stats += bh * 2 * T, delta += bh * T;
  real Dd = 0;
  for (int d = 0; d < D; ++d) Dd += load(dout, i * D + d) * load(o, i * D + d);
  delta[i] = Dd;
  const real st0 = stats[i], st1 = stats[T + i], fi = (real)(i + 1);
  real A, dx;
  if (KEY_BIAS) {  // the k* column: A and the logit's gradient, summed over rows by the caller
    kstar += head * star_step, vstar += head * star_step;
    real xs = 0, dA = 0;
    for (int d = 0; d < D; ++d) xs += load(q, i * D + d) * kstar[d], dA += load(dout, i * D + d) * vstar[d];
    column_grad(xs * SCALE_QK, fi, (real)0, (real)T, dA, Dd, st0, r_div(1, st0), st1, A, dx);
    astar[bh * T + i] = A, sdxstar[bh * T + i] = dx * SCALE_QK;
  }
  if (SINK_LOGIT) {  // no value (dA = 0): the logit's gradient is -D dZ/ds ds/db / Z
    column_grad(sink[head], fi, (real)0, (real)T, (real)0, Dd, st0, r_div(1, st0), st1, A, dx);
    dsink[bh * T + i] = dx;
  }
}

)";
}

std::string cuda_backward_keys_body() {
  return R"( {
  // The block's own key and value rows, padded to D + 1 so the threads' rows fall in different banks.
  __shared__ real k_own[KEY_ROWS][D + 1], v_own[KEY_ROWS][D + 1];
  __shared__ real q_tile[KEY_QUERIES][D], do_tile[KEY_QUERIES][D];
  __shared__ real st0_tile[KEY_QUERIES], st1_tile[KEY_QUERIES], delta_tile[KEY_QUERIES];
  const long long bh = blockIdx.y, head = bh % H;
  const long long first_key = (long long)blockIdx.x * KEY_ROWS, j = first_key + threadIdx.x;
  const bool is_key = j < T;
  const long long key = is_key ? j : T - 1;
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dk += bh * T * D, dv += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_GRAD) dg += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  for (int d = 0; d < D; ++d)
    k_own[threadIdx.x][d] = load(k, key * D + d), v_own[threadIdx.x][d] = load(v, key * D + d);
  real dk_acc[D], dv_acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) dk_acc[d] = 0, dv_acc[d] = 0;
  const real fj = (real)(key + 1);
  long long first, last, unused;
  query_range(first_key, T, first, unused);
  query_range(imin(first_key + KEY_ROWS - 1, T - 1), T, unused, last);
  for (long long qb = first; qb <= last; qb += KEY_QUERIES) {
    __syncthreads();
    load_tiles<KEY_QUERIES, KEY_ROWS>(q_tile, do_tile, q, dout, qb, last);
    for (int r = threadIdx.x; r < KEY_QUERIES; r += KEY_ROWS) {
      const long long i = qb + r;
      st0_tile[r] = i <= last ? stats[i] : (real)0;
      st1_tile[r] = i <= last ? stats[T + i] : (real)0;
      delta_tile[r] = i <= last ? delta[i] : (real)0;
    }
    __syncthreads();
    const int n = (int)imin(KEY_QUERIES, last - qb + 1);
    for (int r = 0; r < n; ++r) {
      const long long i = qb + r;
      long long lo, hi;
      key_range(i, T, lo, hi);
      if (!is_key || key < lo || key > hi) continue;
      real x = 0, dA = 0;
#pragma unroll
      for (int d = 0; d < D; ++d)
        x += q_tile[r][d] * k_own[threadIdx.x][d], dA += do_tile[r][d] * v_own[threadIdx.x][d];
      x *= SCALE_QK;
      if (POSITION_BIAS) x += g[distance(i, key)];
      real A, dx;
      column_grad(x, (real)(i + 1), fj, (real)T, dA, delta_tile[r], st0_tile[r], r_div(1, st0_tile[r]), st1_tile[r], A,
                  dx);
      const real sdx = dx * SCALE_QK;
#pragma unroll
      for (int d = 0; d < D; ++d) dv_acc[d] += A * do_tile[r][d], dk_acc[d] += sdx * q_tile[r][d];
      if (POSITION_GRAD) atomicAdd(&dg[distance(i, key)], dx);
    }
  }
  if (!is_key) return;  // after the last barrier
#pragma unroll
  for (int d = 0; d < D; ++d) store(dk, key * D + d, dk_acc[d]), store(dv, key * D + d, dv_acc[d]);
}

)";
}

std::string cuda_backward_queries_body() {
  return R"( {
  __shared__ real q_own[QUERY_ROWS][D + 1], do_own[QUERY_ROWS][D + 1];
  __shared__ real k_tile[QUERY_KEYS][D], v_tile[QUERY_KEYS][D];
  const long long bh = blockIdx.y, head = bh % H;
  const long long first_row = (long long)blockIdx.x * QUERY_ROWS, i = first_row + threadIdx.x;
  const bool is_row = i < T;
  const long long row = is_row ? i : T - 1;
  q += bh * T * D, k += bh * T * D, v += bh * T * D, dout += bh * T * D, dq += bh * T * D;
  stats += bh * 2 * T, delta += bh * T;
  if (POSITION_BIAS) g += head * g_step;
  for (int d = 0; d < D; ++d)
    q_own[threadIdx.x][d] = load(q, row * D + d), do_own[threadIdx.x][d] = load(dout, row * D + d);
  const real Dd = delta[row], st0 = stats[row], inv_st0 = r_div(1, st0), st1 = stats[T + row], fi = (real)(row + 1);
  real dq_acc[D];
#pragma unroll
  for (int d = 0; d < D; ++d) dq_acc[d] = KEY_BIAS ? kstar[head * star_step + d] * sdxstar[bh * T + row] : (real)0;
  long long lo, hi, block_lo, block_hi, unused;
  key_range(row, T, lo, hi);
  key_range(first_row, T, block_lo, unused);
  key_range(imin(first_row + QUERY_ROWS - 1, T - 1), T, unused, block_hi);
  for (long long kb = block_lo; kb <= block_hi; kb += QUERY_KEYS) {
    __syncthreads();
    load_tiles<QUERY_KEYS, QUERY_ROWS>(k_tile, v_tile, k, v, kb, block_hi);
    __syncthreads();
    const int n = (int)imin(QUERY_KEYS, block_hi - kb + 1);
    for (int c = 0; c < n; ++c) {
      const long long j = kb + c;
      if (!is_row || j < lo || j > hi) continue;
      real x = 0, dA = 0;
#pragma unroll
      for (int d = 0; d < D; ++d)
        x += q_own[threadIdx.x][d] * k_tile[c][d], dA += do_own[threadIdx.x][d] * v_tile[c][d];
      x *= SCALE_QK;
      if (POSITION_BIAS) x += g[distance(row, j)];
      real A, dx;
      column_grad(x, fi, (real)(j + 1), (real)T, dA, Dd, st0, inv_st0, st1, A, dx);
      const real sdx = dx * SCALE_QK;
#pragma unroll
      for (int d = 0; d < D; ++d) dq_acc[d] += sdx * k_tile[c][d];
    }
  }
  if (!is_row) return;  // after the last barrier
#pragma unroll
  for (int d = 0; d < D; ++d) store(dq, row * D + d, dq_acc[d]);
}

)";
}

std::string cuda_probe_body() {
  return R"( {
  // One element of row i of [T, S]: the weight w (A = alpha w / Z), the k* column first.
  const long long bh = blockIdx.y, head = bh % H, S = T + (KEY_BIAS ? 1 : 0);
  const long long e = (long long)blockIdx.x * ROW_THREADS + threadIdx.x;
  if (e >= T * S) return;
  const long long i = e / S, c = e % S;
  q += bh * T * D, k += bh * T * D, stats += bh * 2 * T, out += bh * T * S;
  const real fi = (real)(i + 1);
  real x = 0, fj = 0;
  if (KEY_BIAS && c == 0) {
    for (int d = 0; d < D; ++d) x += load(q, i * D + d) * kstar[head * star_step + d];
    x *= SCALE_QK;
  } else {
    const long long j = c - (KEY_BIAS ? 1 : 0);
    long long lo, hi;
    key_range(i, T, lo, hi);
    if (j < lo || j > hi) {
      out[e] = 0;
      return;
    }
    for (int d = 0; d < D; ++d) x += load(q, i * D + d) * load(k, j * D + d);
    x *= SCALE_QK;
    if (POSITION_BIAS) x += g[head * g_step + distance(i, j)];
    fj = (real)(j + 1);
  }
  out[e] = column_weight(x, fi, fj, (real)T, stats[T + i]);
}

)";
}

}  // namespace sink::kernels
