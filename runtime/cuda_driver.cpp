#include "runtime/cuda_driver.h"

#if SINKLAB_HAVE_CUDA_TOOLKIT
#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <nvrtc.h>
#include <stdexcept>
#include <vector>

namespace sink::rt::cuda {
namespace {

void* open_first(std::initializer_list<const char*> names, std::string& tried) {
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", n, dlerror());
  }
  return nullptr;
}

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) throw std::runtime_error(fmt::format("CUDA: {} not found in its library", name));
  return reinterpret_cast<Fn>(f);
}

struct Nvrtc {
  decltype(&nvrtcCreateProgram) create;
  decltype(&nvrtcCompileProgram) compile;
  decltype(&nvrtcGetProgramLogSize) log_size;
  decltype(&nvrtcGetProgramLog) log;
  decltype(&nvrtcGetPTXSize) ptx_size;
  decltype(&nvrtcGetPTX) ptx;
  decltype(&nvrtcDestroyProgram) destroy;
  decltype(&nvrtcGetErrorString) error;
  std::string missing;  // why it could not be opened, or ""
};

const Nvrtc& nvrtc() {
  static const Nvrtc api = [] {
    Nvrtc a{};
    std::string tried;
    // The toolkit's, or the one a pip PyTorch brings (nvidia-cuda-nvrtc), on the loader's path.
    void* lib = open_first({"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}, tried);
    if (!lib) {
      a.missing = "NVRTC could not be opened: " + tried;
      return a;
    }
    a.create = symbol<decltype(a.create)>(lib, "nvrtcCreateProgram");
    a.compile = symbol<decltype(a.compile)>(lib, "nvrtcCompileProgram");
    a.log_size = symbol<decltype(a.log_size)>(lib, "nvrtcGetProgramLogSize");
    a.log = symbol<decltype(a.log)>(lib, "nvrtcGetProgramLog");
    a.ptx_size = symbol<decltype(a.ptx_size)>(lib, "nvrtcGetPTXSize");
    a.ptx = symbol<decltype(a.ptx)>(lib, "nvrtcGetPTX");
    a.destroy = symbol<decltype(a.destroy)>(lib, "nvrtcDestroyProgram");
    a.error = symbol<decltype(a.error)>(lib, "nvrtcGetErrorString");
    return a;
  }();
  return api;
}

struct Driver {
  decltype(&cuInit) init;
  decltype(&cuDeviceGet) device_get;
  decltype(&cuDeviceGetAttribute) attribute;
  decltype(&cuDevicePrimaryCtxRetain) retain;
  decltype(&cuCtxGetCurrent) get_current;
  decltype(&cuCtxSetCurrent) set_current;
  decltype(&cuModuleLoadData) load;
  decltype(&cuModuleGetFunction) function;
  decltype(&cuLaunchKernel) launch;
  decltype(&cuGetErrorString) error;
};

const Driver& driver() {
  static const Driver api = [] {
    std::string tried;
    void* lib = open_first({"libcuda.so.1", "libcuda.so"}, tried);
    if (!lib) throw std::runtime_error("CUDA: the driver library could not be opened: " + tried);
    Driver a{};
    a.init = symbol<decltype(a.init)>(lib, "cuInit");
    a.device_get = symbol<decltype(a.device_get)>(lib, "cuDeviceGet");
    a.attribute = symbol<decltype(a.attribute)>(lib, "cuDeviceGetAttribute");
    a.retain = symbol<decltype(a.retain)>(lib, "cuDevicePrimaryCtxRetain");
    a.get_current = symbol<decltype(a.get_current)>(lib, "cuCtxGetCurrent");
    a.set_current = symbol<decltype(a.set_current)>(lib, "cuCtxSetCurrent");
    a.load = symbol<decltype(a.load)>(lib, "cuModuleLoadData");
    a.function = symbol<decltype(a.function)>(lib, "cuModuleGetFunction");
    a.launch = symbol<decltype(a.launch)>(lib, "cuLaunchKernel");
    a.error = symbol<decltype(a.error)>(lib, "cuGetErrorString");
    return a;
  }();
  return api;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  driver().error(r, &text);
  throw std::runtime_error(fmt::format("CUDA: {} failed: {} ({})", what, text ? text : "unknown error", static_cast<int>(r)));
}

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw std::runtime_error(fmt::format("NVRTC: {} failed: {}", what, nvrtc().error(r)));
}

class DriverModule : public KernelModule {
 public:
  DriverModule(const std::string& source, int device) {
    const Driver& d = driver();
    check(d.init(0), "cuInit");
    check(d.device_get(&device_, device), "cuDeviceGet");
    check(d.retain(&context_, device_), "cuDevicePrimaryCtxRetain");
    make_current();
    int major = 0, minor = 0;
    check(d.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_), "cuDeviceGetAttribute");
    check(d.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_), "cuDeviceGetAttribute");
    const std::string ptx = compile_ptx(source, major * 10 + minor);
    check(d.load(&module_, ptx.c_str()), "cuModuleLoadData");
  }

  void launch(std::string_view symbol_name, LaunchShape shape, std::span<const KernelBuffer> buffers,
              std::span<const int64_t> sizes) override {
    const Driver& d = driver();
    make_current();  // autograd runs backward on its own thread
    CUfunction f = function(std::string(symbol_name));
    std::vector<void*> args;
    for (const KernelBuffer& b : buffers) args.push_back(const_cast<void**>(&b.data));
    for (const int64_t& s : sizes) args.push_back(const_cast<int64_t*>(&s));
    if (shape.grid_x == 0 || shape.grid_y == 0) return;
    check(d.launch(f, shape.grid_x, shape.grid_y, 1, shape.threads, 1, 1, 0, nullptr, args.data(), nullptr),
          "cuLaunchKernel");
  }

 private:
  CUdevice device_{};
  CUcontext context_{};
  CUmodule module_{};
  std::mutex mutex_;
  std::map<std::string, CUfunction> functions_;

  void make_current() {
    CUcontext now = nullptr;
    check(driver().get_current(&now), "cuCtxGetCurrent");
    if (now != context_) check(driver().set_current(context_), "cuCtxSetCurrent");
  }
  CUfunction function(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, fresh] = functions_.try_emplace(name);
    if (fresh) check(driver().function(&it->second, module_, name.c_str()), "cuModuleGetFunction");
    return it->second;
  }
};

}  // namespace

bool nvrtc_available(std::string* why) {
  const std::string& missing = nvrtc().missing;
  if (why) *why = missing;
  return missing.empty();
}

std::string compile_ptx(const std::string& source, int arch) {
  const Nvrtc& n = nvrtc();
  if (!n.missing.empty()) throw std::runtime_error(n.missing);
  nvrtcProgram program = nullptr;
  check(n.create(&program, source.c_str(), "sinklab_attention.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  const std::string arch_option = fmt::format("--gpu-architecture=compute_{}", arch);
  // No fast math: the kernels are checked against the reference at 1e-5.
  const char* options[] = {arch_option.c_str(), "--std=c++17"};
  nvrtcResult compiled = n.compile(program, 2, options);
  size_t log_size = 0;
  n.log_size(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) n.log(program, log.data());
  if (compiled != NVRTC_SUCCESS) {
    n.destroy(&program);
    throw std::runtime_error(fmt::format("NVRTC could not compile the attention kernel for sm_{}:\n{}", arch, log));
  }
  size_t size = 0;
  check(n.ptx_size(program, &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  check(n.ptx(program, ptx.data()), "nvrtcGetPTX");
  n.destroy(&program);
  if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

std::shared_ptr<KernelModule> module_for(const std::string& source, int device) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::shared_ptr<KernelModule>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = loaded.try_emplace({source, device});
  if (fresh) {
    try {
      it->second = std::make_shared<DriverModule>(source, device);
    } catch (...) {
      loaded.erase(it);
      throw;
    }
  }
  return it->second;
}

}  // namespace sink::rt::cuda
#else  // built without the CUDA toolkit's headers
#include <stdexcept>

namespace sink::rt::cuda {
namespace {
const char* kMissing = "this sinkc-runtime was built without the CUDA toolkit (cuda.h, nvrtc.h were not found when it "
                       "was configured): rebuild where the toolkit is (scripts/setup-gpu.sh)";
}
bool nvrtc_available(std::string* why) {
  if (why) *why = kMissing;
  return false;
}
std::string compile_ptx(const std::string&, int) { throw std::runtime_error(kMissing); }
std::shared_ptr<KernelModule> module_for(const std::string&, int) { throw std::runtime_error(kMissing); }
}  // namespace sink::rt::cuda
#endif
