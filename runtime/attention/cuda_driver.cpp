#include "runtime/attention/cuda_driver.h"

#if SINKLAB_HAVE_CUDA_TOOLKIT
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cuda.h>
#include <dlfcn.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <link.h>
#include <map>
#include <mutex>
#include <nvrtc.h>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

#include "kernels/cuda/emit_cuda.h"
#include "support/fnv1a.h"
#include "support/installation.h"

namespace sink::rt::cuda {
namespace {

namespace fs = std::filesystem;

void* open_first(const std::vector<std::string>& names, std::string& tried) {
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
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

// The file the loader opened for `lib` (a soname may resolve anywhere on its path).
std::string opened_file(void* lib) {
  link_map* map = nullptr;
  return dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? map->l_name : "?";
}

// Where a pip PyTorch keeps its CUDA libraries: beside torch/ in site-packages,
// found from the torch libraries this process has loaded.
std::vector<fs::path> site_packages_of_loaded_torch() {
  std::vector<fs::path> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        if (const size_t at = path.find("/torch/lib/"); at != std::string_view::npos) {
          auto& sites = *static_cast<std::vector<fs::path>*>(out);
          const fs::path site(path.substr(0, at));
          if (std::find(sites.begin(), sites.end(), site) == sites.end()) sites.push_back(site);
        }
        return 0;
      },
      &found);
  return found;
}

// Each entry point of NVRTC and of the driver this file calls, once: the member that holds it and the function
// (by its exported name: cuda.h maps cuDeviceTotalMem to cuDeviceTotalMem_v2). A required one missing from the
// library is an error; an optional one is null in a library too old for it.
#define SINK_NVRTC_ENTRY_POINTS(REQUIRED, OPTIONAL)                   \
  REQUIRED(create, nvrtcCreateProgram)                                \
  REQUIRED(compile, nvrtcCompileProgram)                              \
  REQUIRED(log_size, nvrtcGetProgramLogSize)                          \
  REQUIRED(log, nvrtcGetProgramLog)                                   \
  REQUIRED(ptx_size, nvrtcGetPTXSize)                                 \
  REQUIRED(ptx, nvrtcGetPTX)                                          \
  REQUIRED(destroy, nvrtcDestroyProgram)                              \
  REQUIRED(error, nvrtcGetErrorString)                                \
  OPTIONAL(version, nvrtcVersion)                                     \
  OPTIONAL(cubin_size, nvrtcGetCUBINSize) /* NVRTC 11.1 on */         \
  OPTIONAL(cubin, nvrtcGetCUBIN)                                      \
  OPTIONAL(arch_count, nvrtcGetNumSupportedArchs) /* NVRTC 11.2 on */ \
  OPTIONAL(archs, nvrtcGetSupportedArchs)
#define SINK_DRIVER_ENTRY_POINTS(REQUIRED, OPTIONAL)   \
  REQUIRED(init, cuInit)                               \
  REQUIRED(device_get, cuDeviceGet)                    \
  REQUIRED(attribute, cuDeviceGetAttribute)            \
  REQUIRED(retain, cuDevicePrimaryCtxRetain)           \
  REQUIRED(get_current, cuCtxGetCurrent)               \
  REQUIRED(set_current, cuCtxSetCurrent)               \
  REQUIRED(load, cuModuleLoadData)                     \
  REQUIRED(function, cuModuleGetFunction)              \
  REQUIRED(launch, cuLaunchKernel)                     \
  REQUIRED(set_function_attribute, cuFuncSetAttribute) \
  REQUIRED(synchronize, cuCtxSynchronize)              \
  REQUIRED(name, cuDeviceGetName)                      \
  REQUIRED(total_memory, cuDeviceTotalMem_v2)          \
  REQUIRED(error, cuGetErrorString)                    \
  REQUIRED(version, cuDriverGetVersion)
#define SINK_ENTRY_POINT_MEMBER(member, function) decltype(&function) member = nullptr;
#define SINK_REQUIRED_ENTRY_POINT(member, function) a.member = symbol<decltype(a.member)>(lib, #function);
#define SINK_OPTIONAL_ENTRY_POINT(member, function) \
  a.member = reinterpret_cast<decltype(a.member)>(dlsym(lib, #function));

struct Nvrtc {
  SINK_NVRTC_ENTRY_POINTS(SINK_ENTRY_POINT_MEMBER, SINK_ENTRY_POINT_MEMBER)
  std::string file;     // the library opened
  std::string missing;  // why it could not be opened, or ""
};

const Nvrtc& nvrtc() {
  static const Nvrtc api = [] {
    Nvrtc a{};
    std::string tried;
    void* lib = open_first(nvrtc_candidates(), tried);
    if (!lib) {
      a.missing = "NVRTC could not be opened (SINKLAB_NVRTC may name libnvrtc.so): " + tried;
      return a;
    }
    a.file = opened_file(lib);
    SINK_NVRTC_ENTRY_POINTS(SINK_REQUIRED_ENTRY_POINT, SINK_OPTIONAL_ENTRY_POINT)
    return a;
  }();
  return api;
}

struct Driver {
  SINK_DRIVER_ENTRY_POINTS(SINK_ENTRY_POINT_MEMBER, SINK_ENTRY_POINT_MEMBER)
  std::string file;  // the library opened
};

const Driver& driver() {
  static const Driver api = [] {
    std::string tried;
    void* lib = open_first({"libcuda.so.1", "libcuda.so"}, tried);
    if (!lib) throw std::runtime_error("CUDA: the driver library could not be opened: " + tried);
    Driver a{};
    SINK_DRIVER_ENTRY_POINTS(SINK_REQUIRED_ENTRY_POINT, SINK_OPTIONAL_ENTRY_POINT)
    a.file = opened_file(lib);
    return a;
  }();
  return api;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  driver().error(r, &text);
  throw std::runtime_error(
      fmt::format("CUDA: {} failed: {} ({})", what, text ? text : "unknown error", static_cast<int>(r)));
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
    const std::string image = loadable_image(source, major * 10 + minor);
    check(d.load(&module_, image.data()), "cuModuleLoadData");
  }

  void launch(std::string_view symbol_name, LaunchShape shape, std::span<const KernelBuffer> buffers,
              std::span<const int64_t> sizes) override {
    const Driver& d = driver();
    make_current();  // autograd runs backward on its own thread
    CUfunction f = function(std::string(symbol_name), shape.shared_bytes);
    std::vector<void*> args;
    for (const KernelBuffer& b : buffers) args.push_back(const_cast<void**>(&b.data));
    for (const int64_t& s : sizes) args.push_back(const_cast<int64_t*>(&s));
    if (shape.grid_x == 0 || shape.grid_y == 0) return;
    check(d.launch(f, shape.grid_x, shape.grid_y, 1, shape.threads, 1, 1, shape.shared_bytes,
                   static_cast<CUstream>(shape.stream), args.data(), nullptr),
          "cuLaunchKernel");
  }

  void synchronize() override {
    make_current();
    check(driver().synchronize(), "cuCtxSynchronize");
  }

  std::string device_name() const override {
    char name[256] = {};
    check(driver().name(name, sizeof name - 1, device_), "cuDeviceGetName");
    return name;
  }

 private:
  CUdevice device_{};
  CUcontext context_{};
  CUmodule module_{};
  std::mutex mutex_;
  struct Function {
    CUfunction handle{};
    unsigned shared_bytes = 48 * 1024;  // the dynamic shared memory a launch may ask for without opting in
  };
  std::map<std::string, Function> functions_;

  void make_current() {
    CUcontext now = nullptr;
    check(driver().get_current(&now), "cuCtxGetCurrent");
    if (now != context_) check(driver().set_current(context_), "cuCtxSetCurrent");
  }
  // The kernel, allowed `shared_bytes` of dynamic shared memory (past 48 KiB a function opts in, once).
  CUfunction function(const std::string& name, unsigned shared_bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, fresh] = functions_.try_emplace(name);
    Function& f = it->second;
    if (fresh) check(driver().function(&f.handle, module_, name.c_str()), "cuModuleGetFunction");
    if (shared_bytes > f.shared_bytes) {
      int most = 0;
      check(driver().attribute(&most, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device_),
            "cuDeviceGetAttribute");
      if (shared_bytes > static_cast<unsigned>(most))
        throw std::runtime_error(fmt::format("CUDA: {} asks for {} bytes of shared memory a block; this GPU gives {}",
                                             name, shared_bytes, most));
      check(driver().set_function_attribute(f.handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(shared_bytes)),
            "cuFuncSetAttribute");
      f.shared_bytes = shared_bytes;
    }
    return f.handle;
  }
};

std::atomic<int> compilations{0};

// SINKLAB_NVRTC_LINEINFO=1: the machine code keeps the source's line numbers (NVRTC's -lineinfo), so a profiler
// (Nsight Compute's source counters) can name the line of sinklab_attention.cu an access or a stall comes from.
bool with_line_info() {
  const char* v = std::getenv("SINKLAB_NVRTC_LINEINFO");
  return v && std::string(v) == "1";
}

// What NVRTC makes of `source` for compute capability `arch`: machine code
// (sm_XX; the driver loads it as is) or PTX (compute_XX; the driver
// translates it, and refuses PTX newer than itself).
std::string compile(const std::string& source, int arch, bool machine_code, std::string* report = nullptr) {
  const Nvrtc& n = nvrtc();
  if (!n.missing.empty()) throw std::runtime_error(n.missing);
  ++compilations;
  nvrtcProgram program = nullptr;
  // Hopper's wgmma is in sm_90a's arch-specific code, which runs on compute capability 9.0 and no other.
  const bool arch_specific = kernels::needs_sm90a(source);
  if (arch_specific && arch != kernels::kHopperCapability)
    throw std::runtime_error(fmt::format("the Hopper kernels (wgmma) run on sm_90 alone, not sm_{}", arch));
  check(n.create(&program, source.c_str(), "sinklab_attention.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  const std::string arch_option =
      fmt::format("--gpu-architecture={}_{}{}", machine_code ? "sm" : "compute", arch, arch_specific ? "a" : "");
  // No fast math: the kernels are checked against the reference at 1e-5.
  std::vector<const char*> options = {arch_option.c_str(), "--std=c++17"};
  if (report) options.push_back("--ptxas-options=-v");
  if (with_line_info()) options.push_back("--generate-line-info");
  nvrtcResult compiled = n.compile(program, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  n.log_size(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 1) n.log(program, log.data());
  if (report) *report = log;
  if (compiled != NVRTC_SUCCESS) {
    n.destroy(&program);
    throw std::runtime_error(fmt::format("NVRTC could not compile the attention kernel for sm_{}:\n{}", arch, log));
  }
  size_t size = 0;
  std::string out;
  if (machine_code) {
    check(n.cubin_size(program, &size), "nvrtcGetCUBINSize");
    out.resize(size);
    check(n.cubin(program, out.data()), "nvrtcGetCUBIN");
  } else {
    check(n.ptx_size(program, &size), "nvrtcGetPTXSize");
    out.resize(size);
    check(n.ptx(program, out.data()), "nvrtcGetPTX");
    if (!out.empty() && out.back() == '\0') out.pop_back();
  }
  n.destroy(&program);
  return out;
}

// The newest architecture this NVRTC compiles for, up to `arch`, or 0 when it cannot say.
int newest_known_arch(int arch) {
  const Nvrtc& n = nvrtc();
  int count = 0;
  if (!n.arch_count || !n.archs || n.arch_count(&count) != NVRTC_SUCCESS || count <= 0) return 0;
  std::vector<int> archs(count);
  if (n.archs(archs.data()) != NVRTC_SUCCESS) return 0;
  int best = 0;
  for (int a : archs)
    if (a <= arch) best = std::max(best, a);
  return best;
}

}  // namespace

std::vector<std::string> nvrtc_candidates() {
  std::vector<std::string> names;
  if (const char* named = std::getenv("SINKLAB_NVRTC"); named && *named) names.push_back(named);
  for (const char* soname : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}) names.push_back(soname);
  std::vector<fs::path> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(var); home && *home) dirs.push_back(fs::path(home) / "lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const auto& site : site_packages_of_loaded_torch())
    for (const char* sub : {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"}) dirs.push_back(site / sub);
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> here;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("libnvrtc.so", 0) == 0) here.push_back(entry.path().string());
    }
    std::sort(here.begin(), here.end());
    names.insert(names.end(), here.begin(), here.end());
  }
  return names;
}

bool backend_compiled() { return true; }

bool nvrtc_available(std::string* why) {
  const std::string& missing = nvrtc().missing;
  if (why) *why = missing;
  return missing.empty();
}

std::string compile_ptx(const std::string& source, int arch) { return compile(source, arch, false); }

std::string compile_cubin(const std::string& source, int arch, std::string* assembler_report) {
  if (!nvrtc().missing.empty()) throw std::runtime_error(nvrtc().missing);
  if (!nvrtc().cubin) throw std::runtime_error("NVRTC: this NVRTC is older than 11.1 and writes no machine code");
  return compile(source, arch, true, assembler_report);
}

std::string loadable_image(const std::string& source, int arch) {
  const int known = newest_known_arch(arch);
  const bool machine_code = nvrtc().cubin && (known == arch || known == 0);
  // A GPU newer than this NVRTC (or an NVRTC too old to say): PTX for the
  // newest architecture it knows, which the driver translates for the GPU.
  const int target = machine_code || known == 0 ? arch : known;
  int major = 0, minor = 0;
  if (nvrtc().version) nvrtc().version(&major, &minor);
  // Named by what decides the bytes: the source, the target and NVRTC's version.
  const uint64_t h = fnv1a(fmt::format("{}\nsm_{} {} nvrtc {}.{}{}", source, target, machine_code ? "cubin" : "ptx",
                                       major, minor, with_line_info() ? " lineinfo" : ""));
  const fs::path file = kernel_cache_dir() / fmt::format("cuda-{:016x}.{}", h, machine_code ? "cubin" : "ptx");
  if (std::ifstream in{file, std::ios::binary}) {
    std::string image{std::istreambuf_iterator<char>(in), {}};
    if (!image.empty()) return image;
  }
  std::string image = machine_code ? compile_cubin(source, target) : compile_ptx(source, target);
  // Another process may write the same file at once: each renames a whole one.
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp =
      fmt::format("{}.{}.{}.tmp", file.string(), getpid(), std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    if (!out) ec = std::make_error_code(std::errc::io_error);
  }
  if (ec)
    fs::remove(tmp, ec);  // no cached file: the next process compiles again
  else
    fs::rename(tmp, file, ec);
  return image;
}

int nvrtc_compilations() { return compilations.load(); }

std::string describe_libraries() {
  std::string nvrtc_text = nvrtc().missing;
  if (nvrtc_text.empty()) {
    int major = 0, minor = 0;
    if (nvrtc().version) nvrtc().version(&major, &minor);
    nvrtc_text = fmt::format("NVRTC {}.{} from {}", major, minor, nvrtc().file);
  }
  std::string driver_text;
  try {
    int version = 0;
    driver().version(&version);
    driver_text = fmt::format("CUDA driver {}.{} from {}", version / 1000, version % 1000 / 10, driver().file);
  } catch (const std::exception& e) {
    driver_text = e.what();
  }
  return nvrtc_text + "; " + driver_text;
}

std::string device_name(int device) {
  const Driver& d = driver();
  check(d.init(0), "cuInit");
  CUdevice handle{};
  check(d.device_get(&handle, device), "cuDeviceGet");
  char name[256] = {};
  check(d.name(name, sizeof name - 1, handle), "cuDeviceGetName");
  return name;
}

DeviceProperties device_properties(int device) {
  const Driver& d = driver();
  check(d.init(0), "cuInit");
  CUdevice handle{};
  check(d.device_get(&handle, device), "cuDeviceGet");
  size_t bytes = 0;
  check(d.total_memory(&bytes, handle), "cuDeviceTotalMem");
  int major = 0, minor = 0;
  check(d.attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle), "cuDeviceGetAttribute");
  check(d.attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle), "cuDeviceGetAttribute");
  return {static_cast<int64_t>(bytes), major * 10 + minor};
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
const char* kMissing =
    "this sinkc-runtime was built without the CUDA toolkit (cuda.h, nvrtc.h were not found when it "
    "was configured): rebuild where the toolkit is (scripts/setup-gpu.sh)";
}
bool backend_compiled() { return false; }
bool nvrtc_available(std::string* why) {
  if (why) *why = kMissing;
  return false;
}
std::vector<std::string> nvrtc_candidates() { return {}; }
std::string compile_ptx(const std::string&, int) { throw std::runtime_error(kMissing); }
std::string compile_cubin(const std::string&, int, std::string*) { throw std::runtime_error(kMissing); }
std::string loadable_image(const std::string&, int) { throw std::runtime_error(kMissing); }
int nvrtc_compilations() { return 0; }
std::string describe_libraries() { return kMissing; }
std::string device_name(int) { throw std::runtime_error(kMissing); }
DeviceProperties device_properties(int) { throw std::runtime_error(kMissing); }
std::shared_ptr<KernelModule> module_for(const std::string&, int) { throw std::runtime_error(kMissing); }
}  // namespace sink::rt::cuda
#endif
