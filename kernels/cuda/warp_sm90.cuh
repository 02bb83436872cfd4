// Hopper's warpgroup matrix multiply (wgmma, sm_90a: the H100 and H200), the instructions of the Hopper kernels
// (kernels/cuda/tile_sm90.cuh). Four warps issue one wgmma.mma_async together: a 64 x N product of 64 rows of A
// (16 per warp, from registers, in mma.sync's A layout) and a 16 x N B read by the tensor cores from shared memory
// through a descriptor, summed into float accumulators in mma.sync's accumulator layout (warp w's rows 16 w..).
// The product runs asynchronously: wgmma_fence orders the accumulators' earlier writes before it, wgmma_commit
// closes a group, wgmma_wait<N> waits for all but the newest N groups; until then neither the accumulators nor A's
// registers may be touched, nor the shared memory B is read from rewritten. The CPU emulation
// (tests/kernels/cuda_on_cpu.h) defines the same functions from the PTX ISA's text.
#ifndef SINK_CPU_EMULATION
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the Hopper kernels (wgmma) compile for sm_90a only"
#endif

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// An accumulator register as written here, for the compiler: no read of it moves above a wait, and no write of it
// below the wgmma that sums into it.
__device__ __forceinline__ void fence_register(float& r) { asm volatile("" : "+f"(r)::"memory"); }

#define SINK_ACCUMULATORS_16 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define SINK_ACCUMULATORS_32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define SINK_ACCUMULATORS_64                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define SINK_ACCUMULATORS_96                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "  \
  "%40, %41, %42, %43, %44, %45, %46, %47}"
#define SINK_ACCUMULATORS_128                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "  \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "  \
  "%59, %60, %61, %62, %63}"
// Operands of the accumulator blocks nb..nb + 3 (16 floats).
#define SINK_ACC4(nb) "+f"(c[nb][0]), "+f"(c[nb][1]), "+f"(c[nb][2]), "+f"(c[nb][3])
#define SINK_ACC16(nb) SINK_ACC4(nb), SINK_ACC4(nb + 1), SINK_ACC4(nb + 2), SINK_ACC4(nb + 3)
// One wgmma of shape m64nNk16 in TYPE: the accumulators are operands 0..N/2-1, A's four registers the next four,
// then the descriptor, the transpose flag and scale-d (1: D = A B + D; 0: D = A B). A and B not negated.
#define SINK_WGMMA_ASM(N, TYPE, A0, A1, A2, A3, DESC, TRANS, SCALE, ...)                                   \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " SINK_ACCUMULATORS_##N   \
               ", {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DESC ", %" #SCALE ", 1, 1, %" #TRANS ";\n" \
               : __VA_ARGS__                                                                               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descriptor), "n"(TRANSPOSED_B), "n"(ACCUMULATE))
// The wgmma ASM (SINK_WGMMA_ASM or SINK_WGMMA_SS_ASM below) in the kernel's 16-bit type.
#define SINK_WGMMA_IN_TYPE(ASM, N, ...) \
  do {                                  \
    if (HALF)                           \
      ASM(N, "f16", __VA_ARGS__);       \
    else                                \
      ASM(N, "bf16", __VA_ARGS__);      \
  } while (0)
#define SINK_WGMMA_TYPED(N, ...) SINK_WGMMA_IN_TYPE(SINK_WGMMA_ASM, N, __VA_ARGS__)

// c (the warp's 16 x N share of the 64 x N accumulator) += A B, or = A B where not ACCUMULATE (c's registers then
// need no value before: no instruction of the warps' defines them inside the products' pipeline): A the warp's
// 16 x 16 operand (mma.sync's A layout), B the 16 x N matrix the shared-memory descriptor describes, K-major
// (TRANSPOSED_B 0: each of its N columns 16 contiguous elements of a row) or MN-major (1: each of its 16 rows N
// elements along a row).
template <bool HALF, int N, int TRANSPOSED_B, int ACCUMULATE = 1>
__device__ __forceinline__ void wgmma_rs(float (&c)[N / 8][4], const unsigned (&a)[4], unsigned long long descriptor) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 96 || N == 128, "a product width with no wgmma here");
  if constexpr (N == 16)
    SINK_WGMMA_TYPED(16, 8, 9, 10, 11, 12, 13, 14, SINK_ACC4(0), SINK_ACC4(1));
  else if constexpr (N == 32)
    SINK_WGMMA_TYPED(32, 16, 17, 18, 19, 20, 21, 22, SINK_ACC16(0));
  else if constexpr (N == 64)
    SINK_WGMMA_TYPED(64, 32, 33, 34, 35, 36, 37, 38, SINK_ACC16(0), SINK_ACC16(4));
  else if constexpr (N == 96)
    SINK_WGMMA_TYPED(96, 48, 49, 50, 51, 52, 53, 54, SINK_ACC16(0), SINK_ACC16(4), SINK_ACC16(8));
  else
    SINK_WGMMA_TYPED(128, 64, 65, 66, 67, 68, 69, 70, SINK_ACC16(0), SINK_ACC16(4), SINK_ACC16(8), SINK_ACC16(12));
}
#undef SINK_WGMMA_TYPED
#undef SINK_WGMMA_ASM

// The same with A read from shared memory too, through its own descriptor: K-major (TRANSPOSED_A 0: each of A's
// 64 rows 16 contiguous elements) or MN-major (1: each of its 16 columns 64 elements along a row): backward_keys's
// S^T = K Q^T and dA^T = V dO^T, and the fused backward's dQ share (kernels/cuda/tile_sm90.cuh).
#define SINK_WGMMA_SS_ASM(N, TYPE, A_DESC, B_DESC, TRANS_A, TRANS_B, SCALE, ...)                         \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " " SINK_ACCUMULATORS_##N \
               ", %" #A_DESC ", %" #B_DESC ", %" #SCALE ", 1, 1, %" #TRANS_A ", %" #TRANS_B ";\n"        \
               : __VA_ARGS__                                                                             \
               : "l"(a_descriptor), "l"(b_descriptor), "n"(TRANSPOSED_A), "n"(TRANSPOSED_B), "n"(ACCUMULATE))
#define SINK_WGMMA_SS_TYPED(N, ...) SINK_WGMMA_IN_TYPE(SINK_WGMMA_SS_ASM, N, __VA_ARGS__)
template <bool HALF, int N, int TRANSPOSED_A, int TRANSPOSED_B, int ACCUMULATE = 1>
__device__ __forceinline__ void wgmma_ss(float (&c)[N / 8][4], unsigned long long a_descriptor,
                                         unsigned long long b_descriptor) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 96 || N == 128, "a product width with no shared-A wgmma here");
  if constexpr (N == 16)
    SINK_WGMMA_SS_TYPED(16, 8, 9, 10, 11, 12, SINK_ACC4(0), SINK_ACC4(1));
  else if constexpr (N == 32)
    SINK_WGMMA_SS_TYPED(32, 16, 17, 18, 19, 20, SINK_ACC16(0));
  else if constexpr (N == 64)
    SINK_WGMMA_SS_TYPED(64, 32, 33, 34, 35, 36, SINK_ACC16(0), SINK_ACC16(4));
  else if constexpr (N == 96)
    SINK_WGMMA_SS_TYPED(96, 48, 49, 50, 51, 52, SINK_ACC16(0), SINK_ACC16(4), SINK_ACC16(8));
  else
    SINK_WGMMA_SS_TYPED(128, 64, 65, 66, 67, 68, SINK_ACC16(0), SINK_ACC16(4), SINK_ACC16(8), SINK_ACC16(12));
}
#undef SINK_WGMMA_SS_TYPED
#undef SINK_WGMMA_SS_ASM
#undef SINK_WGMMA_IN_TYPE
#undef SINK_ACC16
#undef SINK_ACC4

#endif  // SINK_CPU_EMULATION
