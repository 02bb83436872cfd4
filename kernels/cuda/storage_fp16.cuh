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
  if (a > 0x7f800000u) {
    p[n] = (unsigned short)(sign | 0x7e00u);
    return;
  }
  if (a >= 0x477ff000u) {
    p[n] = (unsigned short)(sign | 0x7c00u);
    return;
  }  // from 65520 up: infinity
  if (a >= 0x38800000u) {  // a normal half: rebias the exponent, round 23 mantissa bits to 10
    const unsigned r = a - 0x38000000u;
    p[n] = (unsigned short)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    return;
  }
  // A subnormal half (or zero): the float's significand shifted to units of 2^-24.
  const int shift = 126 - (int)(a >> 23);
  if (shift > 24) {
    p[n] = (unsigned short)sign;
    return;
  }
  const unsigned significand = (a & 0x7fffffu) | 0x800000u, halfway = 1u << (shift - 1);
  unsigned m = significand >> shift;
  const unsigned rest = significand & ((1u << shift) - 1u);
  if (rest > halfway || (rest == halfway && (m & 1u))) ++m;
  p[n] = (unsigned short)(sign | m);
}
