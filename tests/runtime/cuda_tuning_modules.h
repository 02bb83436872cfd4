// The CUDA emulation as the tuning's tests load it (tests/runtime/cuda_tuning_test.cpp,
// cuda_tuning_table_test.cpp): under a loader name of their own, measuring or not, each launch shown to a watcher.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/attention/cuda_attention.h"
#include "tests/kernels/cuda_emulator.h"

namespace sink::testing_variants {

// Emulated modules under a name of their own (launchers are kept per loader name), measuring if `tune`.
inline rt::KernelModules emulated_modules(const std::string& name, bool tune, int arch = 80) {
  rt::KernelModules m = cpu_emulated_modules(ThreadOrder::Ascending, arch);
  m.name = name;
  m.tune = tune;
  return m;
}

// The emulation, each launch first shown to `watch`, which may count it, change its shape or refuse it.
using Watch = std::function<void(std::string_view symbol, rt::LaunchShape& shape)>;
class WatchedModule : public CpuEmulatedModule {
 public:
  WatchedModule(std::shared_ptr<const HostCompiledKernels> compiled, Watch watch, int arch)
      : CpuEmulatedModule(std::move(compiled), ThreadOrder::Ascending, arch), watch_(std::move(watch)) {}
  void launch(std::string_view symbol, rt::LaunchShape shape, std::span<const rt::KernelBuffer> buffers,
              std::span<const int64_t> sizes) override {
    watch_(symbol, shape);
    CpuEmulatedModule::launch(symbol, shape, buffers, sizes);
  }

 private:
  Watch watch_;
};
// `arch`: the GPU generation the kernels take their paths for and the launcher sees (90: the Hopper kernels too).
inline rt::KernelModules watched_modules(const std::string& name, const Watch& watch, bool tune = false,
                                         int arch = 80) {
  return {name,
          [watch, arch](const std::string& source, const torch::Device&) {
            return std::make_shared<WatchedModule>(host_compiled(source), watch, arch);
          },
          tune, nullptr, [arch](const torch::Device&) { return arch; }};
}

}  // namespace sink::testing_variants
