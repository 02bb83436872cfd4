// The CUDA side of the generated kernels, without LibTorch: NVRTC compiles a
// kernel's source to machine code, the driver loads it into the device's primary
// context (the one LibTorch uses) and launches it. Both libraries are opened
// on first use (dlopen), so a runtime built with CUDA support still starts,
// and trains on the CPU, on a machine that has neither.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sink::rt {

struct LaunchShape {
  unsigned grid_x, grid_y, threads;
  unsigned shared_bytes = 0;  // dynamic shared memory per block
  // The CUDA stream the launch is queued on: LibTorch's current one for the calling thread, so the kernels run in
  // order with LibTorch's work and a CUDA graph captures them; null, the legacy default stream, where there is none.
  void* stream = nullptr;
};

// A kernel's pointer argument and the bytes it spans: the driver passes only
// the address; the CPU emulation (tests/kernels/cuda_emulator.h) checks that
// no kernel reads or writes outside them. Null for an argument a variant lacks.
struct KernelBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};

// A loaded set of kernels. Every generated kernel takes pointers, then int64 sizes (kernels/kernel_abi.h).
class KernelModule {
 public:
  virtual ~KernelModule() = default;
  virtual void launch(std::string_view symbol, LaunchShape shape, std::span<const KernelBuffer> buffers,
                      std::span<const int64_t> sizes) = 0;
  // Waits until every launch so far has finished (what a timing must include).
  virtual void synchronize() {}
  // The device's name, which keys what was measured on it.
  virtual std::string device_name() const { return "unnamed device"; }
};

namespace cuda {

// Whether this runtime was built with the CUDA backend (the toolkit's headers were found), whatever the machine.
bool backend_compiled();
// Whether NVRTC (and the driver, for a device) can be opened; `why` says what is missing.
bool nvrtc_available(std::string* why = nullptr);

// Where NVRTC is looked for, in order: $SINKLAB_NVRTC, the loader's path,
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, and the
// nvidia/ wheels beside a loaded pip PyTorch.
std::vector<std::string> nvrtc_candidates();

// PTX for compute capability `arch` (80, 90, ...); a compile error throws with NVRTC's log.
std::string compile_ptx(const std::string& source, int arch);
// Machine code (a cubin) for `arch`: nothing left for the driver to translate. With `assembler_report`,
// ptxas's verbose report lands there: registers, spills and shared memory per kernel.
std::string compile_cubin(const std::string& source, int arch, std::string* assembler_report = nullptr);
// What a GPU of compute capability `arch` loads: a cubin where this NVRTC
// knows the architecture, else PTX for the newest one it knows (the driver
// translates it), so neither an older driver nor a newer GPU stops a run.
// Kept in kernel_cache_dir() (support/installation.h), named by a hash of the
// source, the target and NVRTC's version: the runs of a sweep after the
// first load their kernels instead of compiling them.
std::string loadable_image(const std::string& source, int arch);
// How many times this process ran NVRTC.
int nvrtc_compilations();
// Which NVRTC and driver this process opened (files and versions), or why not: for logs.
std::string describe_libraries();
// The name of CUDA device `device` ("NVIDIA H100 80GB HBM3"), from the driver; throws where there is none.
std::string device_name(int device);
// CUDA device `device`'s total memory in bytes and compute capability (major * 10 + minor), from the driver;
// throws where there is none. What train.precision = auto and train.micro_batch = auto are resolved from.
struct DeviceProperties {
  int64_t memory_bytes = 0;
  int capability = 0;
};
DeviceProperties device_properties(int device);

// The module of `source` on CUDA device `device`, compiled for its compute
// capability on first use and cached by content for the process. Kernels run
// on the legacy default stream, which orders them with LibTorch's work on
// its default stream.
std::shared_ptr<KernelModule> module_for(const std::string& source, int device);

}  // namespace cuda
}  // namespace sink::rt
