// Host C++ stand-ins for the CUDA built-ins the generated kernels use, so a
// test can compile kernels/emit_cuda.h's source with the host compiler and
// run it without a GPU (tests/runtime/cuda_emulator.h). Each thread of a
// block is a std::thread; __syncthreads is the emulator's barrier (threads
// together, or taking turns in a chosen order); blocks run one at a time, so
// __shared__ arrays can be function statics.
#pragma once
#include <atomic>
#include <cmath>
#include <cstring>
#include <math.h>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static

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

// Called by the emulator on each thread before it runs the kernel.
extern "C" void sink_emulator_enter(unsigned thread, unsigned block_x, unsigned block_y, void* block,
                                    void (*sync)(void* block, unsigned thread, int line)) {
  threadIdx.x = thread;
  blockIdx.x = block_x;
  blockIdx.y = block_y;
  sink_block = block;
  sink_block_sync = sync;
}
