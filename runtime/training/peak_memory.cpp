#include "runtime/training/peak_memory.h"

#include <fstream>
#include <string>

namespace sink::rt {

int64_t process_peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  return -1;
}

PeakMemory::PeakMemory(const torch::Device& device) : device_(device) {
  if (device_.is_cuda()) return;
  // "5" resets the peak resident set to the current one (proc(5), Linux 4.0 and later).
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5" << std::flush;
  reset_ = clear.good();
}

nlohmann::json PeakMemory::read() const {
  if (device_.is_cuda()) return nullptr;  // LibTorch's C++ API has no allocator statistics to read here
  const int64_t bytes = process_peak_resident_bytes();
  if (bytes < 0) return nullptr;
  return {{"bytes", bytes},
          {"of", reset_ ? "the process's peak resident memory during the run"
                        : "the process's peak resident memory since it started"}};
}

}  // namespace sink::rt
