#include "runtime/training/provenance.h"

#include <fstream>
#include <torch/version.h>

#include "plan/run_record.h"
#include "runtime/attention/cuda_driver.h"
#include "support/installation.h"

namespace sink::rt {
namespace key = run_record::provenance;

namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    // "model name\t: AMD EPYC 7B13" on x86; other architectures name other fields.
    if (line.rfind("model name", 0) != 0 && line.rfind("Model", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "unknown";
}

}  // namespace

std::string device_name(const torch::Device& device) {
  if (device.is_cpu()) return cpu_model_name();
  if (device.is_cuda()) {
    try {
      return cuda::device_name(device.has_index() ? device.index() : 0);
    } catch (const std::exception&) {
      return "unknown";  // a runtime without the CUDA toolkit's headers still trains on the GPU
    }
  }
  return "unknown";
}

nlohmann::json provenance(const torch::Device& device) {
  return {{key::kSinklab, version()},
          {key::kCommit, source_commit()},
          {key::kLibtorch, TORCH_VERSION},
          {key::kDeviceName, device_name(device)}};
}

}  // namespace sink::rt
