#include "runtime/training/device.h"

#include <cstdlib>
#include <fmt/format.h>

#include "runtime/attention/cuda_driver.h"

namespace sink::rt {

int visible_gpus() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

torch::Device training_device(DeviceKind kind, int gpu) {
  if (kind != DeviceKind::cuda) return torch::kCPU;
  const int gpus = visible_gpus();
  const char* cpu_only =
      "Debian's LibTorch is CPU-only: build on the GPU node against its PyTorch, scripts/setup-gpu.sh";
  if (gpu >= 0 && gpus == 0)
    throw std::runtime_error(fmt::format("--gpu {}: this LibTorch sees no CUDA device ({})", gpu, cpu_only));
  if (gpus == 0)
    throw std::runtime_error(fmt::format("train.device = cuda, but this LibTorch sees no CUDA device ({})", cpu_only));
  if (gpu >= gpus)
    throw std::runtime_error(
        fmt::format("--gpu {}: this process sees {} GPU{} (0 to {}; CUDA_VISIBLE_DEVICES "
                    "renumbers them from 0)",
                    gpu, gpus, gpus == 1 ? "" : "s", gpus - 1));
  if (gpu < 0) {
    // torchrun's LOCAL_RANK; the data-parallel setup has already checked WORLD_SIZE and RANK.
    const char* local_rank = std::getenv("LOCAL_RANK");
    gpu = local_rank && *local_rank ? std::atoi(local_rank) % gpus : 0;
    if (gpu < 0) gpu = 0;
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
}

DeviceFacts device_facts(const torch::Device& device) {
  DeviceFacts facts;
  if (!device.is_cuda()) return facts;
  facts.gpu = true;
  try {
    const cuda::DeviceProperties p = cuda::device_properties(device.has_index() ? device.index() : 0);
    facts.memory_bytes = p.memory_bytes;
    facts.capability = p.capability;
  } catch (const std::exception&) {
    // Unknown: auto precision then stays fp32, and auto micro-batching says why it cannot choose.
  }
  return facts;
}

torch::Tensor to_device(const torch::Tensor& host, const torch::Device& device, torch::Tensor buffer) {
  const bool to_gpu = device.is_cuda() && !host.is_cuda();
  const torch::Tensor from = to_gpu ? host.pin_memory() : host;
  if (buffer.defined()) return buffer.copy_(from, to_gpu);
  return host.device() == device ? host : from.to(device, to_gpu);
}

}  // namespace sink::rt
