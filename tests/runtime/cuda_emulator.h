// The generated CUDA kernels run on the CPU: the source compiled by the host
// C++ compiler with tests/runtime/cuda_on_cpu.h, each block's threads as
// std::threads. An oracle for everything above the hardware: the emitted
// arithmetic, the tiling and barriers, the argument lists and the autograd
// wrapper (runtime/cuda_attention.cpp). Not for speed, and not a GPU: NVRTC's
// own compile is tested separately (PTX + ptxas).
#pragma once
#include <barrier>
#include <dlfcn.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cuda_attention.h"

namespace sink::testing_variants {

class CpuEmulatedModule : public rt::KernelModule {
 public:
  explicit CpuEmulatedModule(const std::string& source) {
    std::string dir_template = (std::filesystem::temp_directory_path() / "sinklab-cuda-on-cpu-XXXXXX").string();
    if (!mkdtemp(dir_template.data())) throw std::runtime_error("cannot make a temporary folder");
    dir_ = dir_template;
    std::ofstream(dir_ / "kernels.cu") << source;
    const std::string command = fmt::format(
        "c++ -std=c++20 -O1 -fPIC -shared -w -include {}/tests/runtime/cuda_on_cpu.h -x c++ {} -o {} > {} 2>&1",
        SINKLAB_SOURCE_DIR, (dir_ / "kernels.cu").string(), (dir_ / "kernels.so").string(), (dir_ / "log").string());
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(dir_ / "log");
      throw std::runtime_error("the host compiler rejected the CUDA source:\n" +
                               std::string(std::istreambuf_iterator<char>(log), {}));
    }
    handle_ = dlopen((dir_ / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(dlerror());
    enter_ = reinterpret_cast<void (*)(unsigned, unsigned, unsigned, void*)>(dlsym(handle_, "sink_emulator_enter"));
  }
  ~CpuEmulatedModule() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void launch(std::string_view symbol, rt::LaunchShape shape, std::span<void* const> pointers,
              std::span<const int64_t> sizes) override {
    void* kernel = dlsym(handle_, std::string(symbol).c_str());
    if (!kernel) throw std::runtime_error("no kernel " + std::string(symbol));
    if (sizes.size() != 4) throw std::logic_error("the kernels take four sizes");
    for (unsigned by = 0; by < shape.grid_y; ++by)
      for (unsigned bx = 0; bx < shape.grid_x; ++bx) {
        std::barrier<> barrier(shape.threads);
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < shape.threads; ++t)
          threads.emplace_back([&, t] {
            enter_(t, bx, by, &barrier);
            call(kernel, pointers, sizes);
            barrier.arrive_and_drop();
          });
        for (auto& th : threads) th.join();
      }
  }

 private:
  std::filesystem::path dir_;
  void* handle_ = nullptr;
  void (*enter_)(unsigned, unsigned, unsigned, void*) = nullptr;

  // Pointers as void*, sizes as int64: the same registers as the kernel's typed parameters.
  template <size_t N>
  static void call_n(void* kernel, std::span<void* const> p, std::span<const int64_t> s) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      using Fn = void (*)(decltype((void)I, static_cast<void*>(nullptr))..., int64_t, int64_t, int64_t, int64_t);
      reinterpret_cast<Fn>(kernel)(p[I]..., s[0], s[1], s[2], s[3]);
    }(std::make_index_sequence<N>{});
  }
  static void call(void* kernel, std::span<void* const> p, std::span<const int64_t> s) {
    switch (p.size()) {
      case 6: return call_n<6>(kernel, p, s);
      case 9: return call_n<9>(kernel, p, s);
      case 10: return call_n<10>(kernel, p, s);
      case 11: return call_n<11>(kernel, p, s);
      default: throw std::logic_error(fmt::format("no kernel takes {} pointers", p.size()));
    }
  }
};

// KernelModules for CPU tensors, one compiled module per source.
inline rt::KernelModules cpu_emulated_modules() {
  return [](const std::string& source, const torch::Device&) -> std::shared_ptr<rt::KernelModule> {
    static std::mutex mutex;
    static std::map<std::string, std::shared_ptr<rt::KernelModule>> compiled;
    std::lock_guard<std::mutex> lock(mutex);
    auto& module = compiled[source];
    if (!module) module = std::make_shared<CpuEmulatedModule>(source);
    return module;
  };
}

}  // namespace sink::testing_variants
