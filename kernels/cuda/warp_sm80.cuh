// The warp-level instructions the tensor-core kernels are built from, for sm_80 and newer (A100, H100):
// mma.sync m16n8k16 with float accumulators, ldmatrix, cp.async, shuffles and the packing conversion. Each
// is one PTX instruction; everything above them (kernels/cuda/tile.cuh) is plain CUDA C++. The CPU
// emulation (tests/kernels/cuda_on_cpu.h) defines the same functions from the PTX ISA's definitions, so
// this file is the only part of a kernel the emulation does not run. A Hopper backend (wgmma, TMA) would
// replace this file and tile.cuh's loops, not the kernels.
#ifndef SINK_CPU_EMULATION

// D = A B + C for a 16 x 16 A (row major) and a 16 x 8 B (column major), 16-bit inputs, float sums.
template <bool HALF>
__device__ __forceinline__ void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (HALF)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The block's dynamic shared memory as the kernel's struct of shared arrays: the launch asks for BYTES (the
// host's count, kernels/cuda/emit_cuda.cpp), and past 48 KiB, which no static array may pass, the function opts in.
// A struct aligned past 16 bytes (the Hopper kernels' swizzled tiles: 1024, what the swizzle's address bits
// assume) starts at the next such boundary, for which the launch asks alignof - 16 bytes more.
template <typename Shared, int BYTES>
__device__ __forceinline__ Shared& shared_block() {
  static_assert(sizeof(Shared) + alignof(Shared) - 16 <= BYTES, "the launch asks for less shared memory than used");
  extern __shared__ __align__(16) unsigned char sink_dynamic_shared[];
  unsigned char* start = sink_dynamic_shared;
  if (alignof(Shared) > 16) start += (alignof(Shared) - shared_address(start) % alignof(Shared)) % alignof(Shared);
  return *reinterpret_cast<Shared*>(start);
}

// Four 8 x 8 matrices of 16-bit elements from shared memory; lanes 8m..8m+7 point at matrix m's rows.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// 16 bytes from global to shared memory without passing through registers; zeros where !fill.
__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)), "l"(global),
               "r"(fill ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
// v of the lane `delta` above this one; past lane 31 the lane's own.
__device__ __forceinline__ float shfl_down(float v, unsigned delta) { return __shfl_down_sync(0xffffffffu, v, delta); }

// p[0] += a, p[1] += b in global memory, atomically, nothing returned (p 8-byte aligned): one vector reduction
// on sm_90 (red.global.add.v2.f32), two before it.
__device__ __forceinline__ void red_add_pair(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

// Hopper's bulk reduction (sm_90): `bytes` (a multiple of 16, both addresses 16-byte aligned) of floats in shared
// memory added into global memory by the copy engine, one instruction for what per-element red.global.add
// does in bytes / 8 (FlashAttention-3's dQ). The shared memory's writers make their writes visible to the copy
// engine (async_proxy_fence, then a barrier) before one thread issues; that thread waits for the engine to have read
// them (bulk_wait_read) before any thread writes there again, and before it returns.
#if __CUDA_ARCH__ >= 900
#define SINK_BULK_REDUCE true
#else
#define SINK_BULK_REDUCE false
#endif
// This thread's shared-memory writes (stores, landed cp.async copies) made visible to the async proxy: the copy
// engine's bulk reductions, and the tensor cores' reads of a wgmma's B.
__device__ __forceinline__ void async_proxy_fence() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_reduce_add(float* global, const float* shared, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
      "cp.async.bulk.commit_group;\n" ::"l"(global),
      "r"(shared_address(shared)), "r"(bytes)
      : "memory");
#endif
}
__device__ __forceinline__ void bulk_wait_read() {
#if __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}

// p[0] = a, p[1] = b in one 8-byte store (p 8-byte aligned).
__device__ __forceinline__ void store_pair(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}

// Two floats rounded to nearest even into one register of two 16-bit numbers, `lo` in the low half.
template <bool HALF>
__device__ __forceinline__ unsigned pack_rn(float lo, float hi) {
  unsigned r;
  if (HALF)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

#endif  // SINK_CPU_EMULATION
