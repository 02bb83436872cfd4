#include "runtime/training/peak_memory.h"

#include <fstream>
#include <string>

#if SINKLAB_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace sink::rt {

int64_t process_peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  return -1;
}

#if SINKLAB_TORCH_CUDA
namespace {

c10::DeviceIndex index_of(const torch::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}

}  // namespace
#endif

PeakMemory::PeakMemory(const torch::Device& device) : device_(device) {
  if (device_.is_cuda()) {
#if SINKLAB_TORCH_CUDA
    try {  // (the model is on the device by now: the allocator has been set up)
      c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(device_));
      reset_ = true;
    } catch (const c10::Error&) {  // a statistic is no reason to stop a run: summary.json then has none
    }
#endif
    return;
  }
  // "5" resets the peak resident set to the current one (proc(5), Linux 4.0 and later).
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5" << std::flush;
  reset_ = clear.good();
}

nlohmann::json PeakMemory::read() const {
  if (device_.is_cuda()) {
#if SINKLAB_TORCH_CUDA
    // The caching allocator's peak of bytes allocated to tensors (index 0 of its statistics: every pool), what
    // torch.cuda.max_memory_allocated reads; what it reserved from the driver beyond that is not counted.
    if (!reset_) return nullptr;
    try {
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(device_));
      return {{"bytes", stats.allocated_bytes[0].peak},
              {"of", "the most memory LibTorch's CUDA allocator had allocated to tensors during the run"}};
    } catch (const c10::Error&) {
      return nullptr;
    }
#else
    return nullptr;  // a LibTorch without CUDA compiled in: no allocator statistics to read
#endif
  }
  const int64_t bytes = process_peak_resident_bytes();
  if (bytes < 0) return nullptr;
  return {{"bytes", bytes},
          {"of", reset_ ? "the process's peak resident memory during the run"
                        : "the process's peak resident memory since it started"}};
}

}  // namespace sink::rt
