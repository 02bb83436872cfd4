// Storage in the computing type (float or double: the checks), read and written as is.
typedef real store_t;
__device__ __forceinline__ real to_real(store_t v) { return v; }
__device__ __forceinline__ real load(const store_t* p, long long n) { return p[n]; }
__device__ __forceinline__ void store(store_t* p, long long n, real v) { p[n] = v; }
