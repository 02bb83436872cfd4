// Host C++ stand-ins for the CUDA built-ins the generated kernels use, so a
// test can compile kernels/cuda/emit_cuda.h's source with the host compiler and
// run it without a GPU (tests/kernels/cuda_emulator.h). Each thread of a
// block is a fiber taking turns (or a std::thread); __syncthreads is the
// emulator's block barrier and each warp collective waits at its warp's;
// blocks run one at a time, so __shared__ arrays can be function statics.
// The warp instructions of kernels/cuda/warp_sm80.cuh are defined here from
// the PTX ISA's text, not from that file: the tile operations' tests
// (tests/kernels/tensor_tiles_test.cpp) check one against the other.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define SINK_CPU_EMULATION 1

struct SinkEmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local SinkEmulatedDim3 threadIdx, blockIdx;
inline thread_local void* sink_block = nullptr;
inline thread_local void (*sink_block_sync)(void* block, unsigned thread, int line) = nullptr;

// A macro, so the emulator learns which barrier of the source each thread is at.
#define __syncthreads() sink_block_sync(sink_block, threadIdx.x, __LINE__)
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
// The SFU's 2^a, 1 / b, log2 a and sqrt a (ex2, rcp, lg2, sqrt .approx.ftz.f32): each within a few units in the
// last place of the exact result (lg2 near 1: 2^-22 absolute), which stands in.
inline float sink_ex2(float a) { return std::exp2(a); }
inline float sink_rcp(float b) { return 1 / b; }
inline float sink_lg2(float a) { return std::log2(a); }
inline float sink_sqrt(float a) { return std::sqrt(a); }
inline float __uint_as_float(unsigned i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}
template <typename T>
inline T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}

// Called by the emulator each time a thread (re)enters the kernel: which thread it is, and the block's two
// kinds of barrier.
inline thread_local void (*sink_warp_sync)(void* block, unsigned thread, int line) = nullptr;
extern "C" void sink_emulator_enter(unsigned thread, unsigned block_x, unsigned block_y, void* block,
                                    void (*sync)(void* block, unsigned thread, int line),
                                    void (*warp_sync)(void* block, unsigned thread, int line)) {
  threadIdx.x = thread;
  blockIdx.x = block_x;
  blockIdx.y = block_y;
  sink_block = block;
  sink_block_sync = sync;
  sink_warp_sync = warp_sync;
}

// ---- The warp-level primitives of kernels/cuda/warp_sm80.cuh, by their PTX ISA definitions ----
// A warp's collective: each lane leaves its operand in the warp's exchange, waits for the other lanes, then
// reads theirs. Two slots used in turn: a lane can be at most one collective ahead of its slowest lane-mate
// (the next wait holds it), so it never overwrites a slot another lane still reads.
constexpr unsigned kSinkMaxThreads = 1024;
struct alignas(16) SinkLaneSlot {
  unsigned char bytes[64];
};
inline SinkLaneSlot sink_exchange[2][kSinkMaxThreads];
inline unsigned sink_exchange_phase[kSinkMaxThreads];

#define sink_warp_wait() sink_warp_sync(sink_block, threadIdx.x, __LINE__)

template <typename T>
inline const SinkLaneSlot* sink_exchange_all(const T& mine) {
  static_assert(sizeof(T) <= sizeof(SinkLaneSlot));
  const unsigned phase = sink_exchange_phase[threadIdx.x]++ & 1u;
  std::memcpy(sink_exchange[phase][threadIdx.x].bytes, &mine, sizeof(T));
  sink_warp_wait();
  return &sink_exchange[phase][threadIdx.x & ~31u];  // lane 0 of this warp
}
template <typename T>
inline T sink_from_lane(const SinkLaneSlot* warp, unsigned lane) {
  T v;
  std::memcpy(&v, warp[lane].bytes, sizeof(T));
  return v;
}

inline float sink_b16_to_float(unsigned short bits, bool half) {
  if (!half) return __uint_as_float(unsigned(bits) << 16);
  _Float16 h;
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<float>(h);
}
inline unsigned short sink_float_to_b16(float v, bool half) {  // round to nearest even, as cvt.rn
  if (half) {
    const _Float16 h = static_cast<_Float16>(v);
    unsigned short bits;
    std::memcpy(&bits, &h, sizeof bits);
    return bits;
  }
  if (v != v) return 0x7fc0;
  const unsigned u = __float_as_uint(v);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
template <bool HALF>
inline unsigned pack_rn(float lo, float hi) {
  return unsigned(sink_float_to_b16(lo, HALF)) | (unsigned(sink_float_to_b16(hi, HALF)) << 16);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: D = A B + C. The fragment maps of the PTX ISA
// (groupID g = lane >> 2, t = lane % 4): A's registers hold (row g, cols 2t, 2t+1), (g + 8, 2t..),
// (g, 2t + 8..), (g + 8, 2t + 8..); B's (rows 2t, 2t+1, col g), (rows 2t + 8, 2t + 9, col g); C's
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1). Low half of a register: the lower column (row).
template <bool HALF>
inline void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  struct Operands {
    unsigned a[4], b[2];
  };
  const SinkLaneSlot* warp = sink_exchange_all(Operands{{a[0], a[1], a[2], a[3]}, {b0, b1}});
  float A[16][16], B[16][8];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const Operands op = sink_from_lane<Operands>(warp, lane);
    const unsigned g = lane >> 2, t = lane & 3;
    for (unsigned half = 0; half < 2; ++half) {
      auto element = [&](unsigned reg) { return sink_b16_to_float((reg >> (16 * half)) & 0xffffu, HALF); };
      A[g][2 * t + half] = element(op.a[0]);
      A[g + 8][2 * t + half] = element(op.a[1]);
      A[g][2 * t + 8 + half] = element(op.a[2]);
      A[g + 8][2 * t + 8 + half] = element(op.a[3]);
      B[2 * t + half][g] = element(op.b[0]);
      B[2 * t + 8 + half][g] = element(op.b[1]);
    }
  }
  const unsigned lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3;
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float sum = c[e];  // products of 16-bit numbers are exact in float; summed in float
    for (unsigned k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    c[e] = sum;
  }
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8m..8m+7 give the rows of matrix m (16 bytes
// each); lane l receives in register m the elements (row l / 4, cols 2 (l % 4), +1) of matrix m, or with
// .trans those of its transpose. Shared memory is read when the whole warp has arrived, by the last lane
// to arrive, as the instruction reads it: not later, when each lane goes on (by then other warps may have
// written what a missing barrier should have waited for).
inline std::atomic<unsigned> sink_ldmatrix_arrivals[2][kSinkMaxThreads / 32];
inline unsigned sink_ldmatrix_read[2][kSinkMaxThreads][4];
inline void sink_ldmatrix(unsigned (&r)[4], const void* row, bool transposed) {
  const unsigned phase = sink_exchange_phase[threadIdx.x] & 1u, warp = threadIdx.x / 32;
  sink_exchange_phase[threadIdx.x]++;
  std::memcpy(sink_exchange[phase][threadIdx.x].bytes, &row, sizeof row);
  if (sink_ldmatrix_arrivals[phase][warp].fetch_add(1) + 1 == 32) {
    sink_ldmatrix_arrivals[phase][warp] = 0;
    const SinkLaneSlot* lanes = &sink_exchange[phase][warp * 32];
    for (unsigned lane = 0; lane < 32; ++lane)
      for (unsigned m = 0; m < 4; ++m) {
        unsigned short pair[2];
        for (unsigned half = 0; half < 2; ++half) {
          const unsigned rr = transposed ? 2 * (lane & 3) + half : lane >> 2;
          const unsigned cc = transposed ? lane >> 2 : 2 * (lane & 3) + half;
          const auto* source = static_cast<const unsigned short*>(sink_from_lane<const void*>(lanes, 8 * m + rr));
          pair[half] = source[cc];
        }
        sink_ldmatrix_read[phase][warp * 32 + lane][m] = unsigned(pair[0]) | (unsigned(pair[1]) << 16);
      }
  }
  sink_warp_wait();
  for (unsigned m = 0; m < 4; ++m) r[m] = sink_ldmatrix_read[phase][threadIdx.x][m];
}
inline void ldmatrix_x4(unsigned (&r)[4], const void* row) { sink_ldmatrix(r, row, false); }
inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) { sink_ldmatrix(r, row, true); }

// red.global.add of two neighbouring floats: two atomic additions (sm_90's one vector instruction).
inline void red_add_pair(float* p, float a, float b) {
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
}

inline void store_pair(float* p, float a, float b) { p[0] = a, p[1] = b; }

// Hopper's bulk reduction (cp.reduce.async.bulk .add.f32, sm_90): the kernel takes it where the emulated GPU is
// one (sink_emulator_set_arch), red_add_pair's per-element additions otherwise. The copy engine reads shared memory
// when the issuing thread's wait_group.read releases it, not at the issue: shared memory written again before that
// wait, or a wait missing, gives the wrong sums.
inline int sink_emulated_arch = 80;
#define SINK_BULK_REDUCE (sink_emulated_arch >= 90)
extern "C" void sink_emulator_set_arch(int arch) { sink_emulated_arch = arch; }
struct SinkBulkReduction {
  float* global;
  const float* shared;
  unsigned bytes;
};
inline std::vector<SinkBulkReduction> sink_bulk_reductions[kSinkMaxThreads];  // [thread], in issue order
inline void async_proxy_fence() {}
inline void bulk_reduce_add(float* global, const float* shared, unsigned bytes) {
  sink_bulk_reductions[threadIdx.x].push_back({global, shared, bytes});
}
inline void bulk_wait_read() {
  for (const SinkBulkReduction& r : sink_bulk_reductions[threadIdx.x])
    for (unsigned e = 0; e < r.bytes / sizeof(float); ++e) atomicAdd(r.global + e, r.shared[e]);
  sink_bulk_reductions[threadIdx.x].clear();
}

// __shfl_xor_sync over the whole warp.
inline float shfl_xor(float v, int mask) {
  const SinkLaneSlot* warp = sink_exchange_all(v);
  return sink_from_lane<float>(warp, (threadIdx.x & 31u) ^ static_cast<unsigned>(mask));
}

// __shfl_down_sync over the whole warp: a lane past 31 gives the lane its own value.
inline float shfl_down(float v, unsigned delta) {
  const SinkLaneSlot* warp = sink_exchange_all(v);
  const unsigned from = (threadIdx.x & 31u) + delta;
  return from < 32 ? sink_from_lane<float>(warp, from) : v;
}

// cp.async.cg.shared.global (16 bytes, zero-filled when not `fill`): the copy happens when a wait_group
// releases its group, not when it is issued, so a tile read before its wait reads what was there before.
struct SinkAsyncCopy {
  void* shared;
  const void* global;
  bool fill;
};
inline std::vector<std::vector<SinkAsyncCopy>> sink_async_groups[kSinkMaxThreads];  // [thread][group], last open
inline bool sink_copies_land_at_issue = false;  // else at their wait (the emulator picks, per launch)
inline void cp_async_16(void* shared, const void* global, bool fill) {
  if (sink_copies_land_at_issue) {
    if (fill)
      std::memcpy(shared, global, 16);
    else
      std::memset(shared, 0, 16);
    return;
  }
  auto& groups = sink_async_groups[threadIdx.x];
  if (groups.empty()) groups.emplace_back();
  groups.back().push_back({shared, global, fill});
}
inline void cp_async_commit() { sink_async_groups[threadIdx.x].emplace_back(); }
template <int N>
inline void cp_async_wait() {  // all but the newest N committed groups have landed (the open one is not waited for)
  auto& groups = sink_async_groups[threadIdx.x];
  while (groups.size() > 1 + static_cast<size_t>(N)) {
    for (const SinkAsyncCopy& c : groups.front()) {
      if (c.fill)
        std::memcpy(c.shared, c.global, 16);
      else
        std::memset(c.shared, 0, 16);
    }
    groups.erase(groups.begin());
  }
}

// The block's dynamic shared memory (blocks run one at a time: a static per kernel). A kernel that uses more
// than its launch asked for would fault on a GPU: the emulator reads the shortfall after the block and says so.
// A struct aligned past 16 bytes costs the GPU's kernel up to alignof - 16 bytes more (warp_sm80.cuh). Its address
// is where shared-memory addresses count from (shared_address: what wgmma's descriptors hold).
inline size_t sink_dynamic_shared_bytes = 0, sink_dynamic_shared_needed = 0;
inline unsigned char* sink_shared_window = nullptr;
template <typename Shared, int BYTES>
Shared& shared_block() {
  constexpr size_t needed = sizeof(Shared) + alignof(Shared) - 16;
  static_assert(needed <= BYTES, "the launch asks for less shared memory than the kernel uses");
  if (needed > sink_dynamic_shared_bytes) sink_dynamic_shared_needed = needed;
  alignas(alignof(Shared) > 16 ? alignof(Shared) : 16) static Shared block;
  sink_shared_window = reinterpret_cast<unsigned char*>(&block);
  return block;
}
inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(static_cast<const unsigned char*>(p) - sink_shared_window);
}

// ---- Hopper's warpgroup multiply (kernels/cuda/warp_sm90.cuh), by the PTX ISA's definitions ----
// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16} with A in registers: warp w of the four computes rows
// 16 w..16 w + 15 of the 64 x N product from its own A (mma.sync's A fragment) and the 16 x N B the descriptor
// places in shared memory, into mma.sync's accumulator layout. Asynchronous: the sums are written, and shared
// memory and A's registers read, when a wgmma.wait_group releases the product's group, not at the issue, so a read
// of the accumulators before the wait, or a tile or an A register rewritten before it, gives wrong results (the
// PTX ISA leaves both undefined). (A's registers are read where the lanes held them at the issue: a kernel keeps
// them alive until the wait.)
// With A in shared memory too (wgmma_ss), the warp's 16 rows of the 64 x 16 A its descriptor describes.
struct SinkWarpgroupProduct {
  float* c;  // the lane's N / 2 accumulators
  unsigned n;
  bool transposed_b, half, accumulate;  // (scale-d: D = A B + D, or D = A B)
  unsigned long long descriptor;
  const unsigned* lane_a[32];  // each lane's four A registers (A in registers)
  bool shared_a, transposed_a;
  unsigned long long a_descriptor;
  unsigned warp_rows;  // the warp's first row of the 64 (16 times its place in the warpgroup)
};
inline std::vector<std::vector<SinkWarpgroupProduct>> sink_wgmma_groups[kSinkMaxThreads];  // [thread][group]

// Element (k, n) of the B a descriptor describes (or element (n, k) of an A, n its row): bits 0-13 the start address,
// 16-29 the leading and 32-45 the stride dimension's byte offset (all in 16-byte units), 62-63 the swizzle (1: 128
// bytes, 2: 64, 3: 32). The ISA's canonical layouts of 16-bit elements, x = swizzle / 16 chunks of 16 bytes a row:
// K-major, n = (8, m) at (swizzle bytes, stride), k = (8, 2) at (2 bytes, 16 bytes); MN-major, n = (8, x, m) at (2
// bytes, 16 bytes, leading), k = (8, k) at (swizzle bytes, stride). The swizzle then exchanges the address's 16-byte
// chunk bits (4..) with those from bit 7 on, x - 1 of them.
inline float sink_descriptor_element(unsigned long long descriptor, bool mn_major, unsigned k, unsigned n, bool half) {
  const unsigned start = unsigned(descriptor & 0x3fffu) << 4, leading = unsigned((descriptor >> 16) & 0x3fffu) << 4,
                 stride = unsigned((descriptor >> 32) & 0x3fffu) << 4, mode = unsigned(descriptor >> 62);
  const unsigned row = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0, x = row / 16;
  if (row == 0) {
    std::fprintf(stderr, "emulated wgmma: a descriptor without swizzle, which no kernel here writes\n");
    std::abort();
  }
  const unsigned offset = mn_major ? n % 8 * 2 + n / 8 % x * 16 + n / (8 * x) * leading + k % 8 * row + k / 8 * stride
                                   : n % 8 * row + n / 8 * stride + k % 8 * 2 + k / 8 * 16;
  unsigned address = start + offset;
  address ^= ((address >> 7) & (x - 1)) << 4;
  unsigned short bits;
  std::memcpy(&bits, sink_shared_window + address, sizeof bits);
  return sink_b16_to_float(bits, half);
}

inline void wgmma_fence() {}
inline void fence_register(float&) {}
template <bool HALF, int N, int TRANSPOSED_B, int ACCUMULATE = 1>
inline void wgmma_rs(float (&c)[N / 8][4], const unsigned (&a)[4], unsigned long long descriptor) {
  const SinkLaneSlot* warp = sink_exchange_all(&a[0]);
  SinkWarpgroupProduct p{&c[0][0], N, TRANSPOSED_B != 0, HALF, ACCUMULATE != 0, descriptor, {}, false, false, 0, 0};
  for (unsigned lane = 0; lane < 32; ++lane) p.lane_a[lane] = sink_from_lane<const unsigned*>(warp, lane);
  auto& groups = sink_wgmma_groups[threadIdx.x];
  if (groups.empty()) groups.emplace_back();
  groups.back().push_back(p);
}
template <bool HALF, int N, int TRANSPOSED_A, int TRANSPOSED_B, int ACCUMULATE = 1>
inline void wgmma_ss(float (&c)[N / 8][4], unsigned long long a_descriptor, unsigned long long b_descriptor) {
  SinkWarpgroupProduct p{&c[0][0],
                         N,
                         TRANSPOSED_B != 0,
                         HALF,
                         ACCUMULATE != 0,
                         b_descriptor,
                         {},
                         true,
                         TRANSPOSED_A != 0,
                         a_descriptor,
                         16 * (threadIdx.x / 32 % 4)};
  auto& groups = sink_wgmma_groups[threadIdx.x];
  if (groups.empty()) groups.emplace_back();
  groups.back().push_back(p);
}
inline void wgmma_commit() { sink_wgmma_groups[threadIdx.x].emplace_back(); }
template <int N>
inline void wgmma_wait() {  // all but the newest N committed groups land (the open one is not waited for)
  // (.sync.aligned: the warp's lanes wait together, each product reading the lanes' A registers as they are now,
  // and none goes on to rewrite them before every lane's products have landed.)
  sink_warp_wait();
  auto& groups = sink_wgmma_groups[threadIdx.x];
  const unsigned lane = threadIdx.x & 31u, g = lane >> 2, t = lane & 3;
  while (groups.size() > 1 + static_cast<size_t>(N)) {
    for (const SinkWarpgroupProduct& p : groups.front()) {
      float a[16][16];  // the warp's A, from its lanes' registers (or shared memory) as they are now
      for (unsigned row = 0; p.shared_a && row < 16; ++row)
        for (unsigned k = 0; k < 16; ++k)
          a[row][k] = sink_descriptor_element(p.a_descriptor, p.transposed_a, k, p.warp_rows + row, p.half);
      for (unsigned from = 0; !p.shared_a && from < 32; ++from) {
        const unsigned* r = p.lane_a[from];
        const unsigned fg = from >> 2, ft = from & 3;
        for (unsigned half = 0; half < 2; ++half) {
          auto element = [&](unsigned reg) { return sink_b16_to_float((reg >> (16 * half)) & 0xffffu, p.half); };
          a[fg][2 * ft + half] = element(r[0]);
          a[fg + 8][2 * ft + half] = element(r[1]);
          a[fg][2 * ft + 8 + half] = element(r[2]);
          a[fg + 8][2 * ft + 8 + half] = element(r[3]);
        }
      }
      for (unsigned nb = 0; nb < p.n / 8; ++nb)
        for (unsigned e = 0; e < 4; ++e) {
          const unsigned row = g + 8 * (e >> 1), col = 8 * nb + 2 * t + (e & 1);
          float sum = p.accumulate ? p.c[4 * nb + e] : 0.f;
          for (unsigned k = 0; k < 16; ++k)
            sum += a[row][k] * sink_descriptor_element(p.descriptor, p.transposed_b, k, col, p.half);
          p.c[4 * nb + e] = sum;
        }
    }
    groups.erase(groups.begin());
  }
  sink_warp_wait();
}
extern "C" size_t sink_emulator_shared_shortfall() { return sink_dynamic_shared_needed; }

// Called by the emulator before a block starts: no collective or copy carries over. Copies land as they
// are issued (where a stage overwritten too early shows) or at their wait (where one read too early shows).
extern "C" void sink_emulator_begin_block(unsigned threads, bool copies_land_at_issue, size_t shared_bytes) {
  sink_dynamic_shared_bytes = shared_bytes, sink_dynamic_shared_needed = 0;
  sink_copies_land_at_issue = copies_land_at_issue;
  for (auto& phase : sink_ldmatrix_arrivals)
    for (auto& warp : phase) warp = 0;
  for (unsigned t = 0; t < threads && t < kSinkMaxThreads; ++t)
    sink_exchange_phase[t] = 0, sink_async_groups[t].clear(), sink_bulk_reductions[t].clear(),
    sink_wgmma_groups[t].clear();
}
