// bfloat16 as its bits: the upper half of a float. No header needed.
typedef unsigned short store_t;
__device__ __forceinline__ real to_real(store_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ real load(const store_t* p, long long n) { return to_real(p[n]); }
__device__ __forceinline__ void store(store_t* p, long long n, real v) {
  if (v != v) {
    p[n] = (unsigned short)0x7fc0;
    return;
  }
  const unsigned u = __float_as_uint(v);
  p[n] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // round to nearest even
}
