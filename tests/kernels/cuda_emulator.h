// The generated CUDA kernels run on the CPU: the source compiled by the host
// C++ compiler with tests/kernels/cuda_on_cpu.h, each block's threads as
// fibers taking turns or as std::threads together. An oracle for everything above the hardware: the emitted
// arithmetic, the tiling and barriers, the argument lists and the autograd
// wrapper (runtime/attention/cuda_attention.cpp). Not for speed, and not a GPU: NVRTC's
// own compile is tested separately (PTX + ptxas).
//
// A block's threads run together (as a GPU's would, in an order nobody
// chooses) or take turns in a fixed order, one at a time from barrier to
// barrier. Taking turns makes a missing barrier deterministic: a tile read
// before every thread wrote its part, or overwritten before every thread
// read it, gives a different result in ascending than in descending order.
//
// Every buffer a kernel gets is a copy ending where an inaccessible page
// begins (another precedes its first page): a read or write past its end
// stops the process naming the kernel, the argument and the offset, where a
// GPU would touch a neighbour's memory silently.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sys/mman.h>
#include <thread>
#include <ucontext.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "kernels/kernel_abi.h"
#include "runtime/attention/cuda_attention.h"
#include "support/fnv1a.h"
#include "support/installation.h"
#include "support/remove_tree.h"
#include "tests/gpu_features_asked.h"
#include "tests/source_paths.h"

namespace sink::testing_variants {

enum class ThreadOrder { Together, Ascending, Descending };

inline std::string name_of(ThreadOrder order) {
  return order == ThreadOrder::Together ? "together" : order == ThreadOrder::Ascending ? "ascending" : "descending";
}

// One block being run: start(t) before thread t enters the kernel, sync(t)
// at its __syncthreads (on line `line` of the source), warp_sync(t) at a
// warp's collective (mma, ldmatrix, a shuffle), leave(t) when it returns;
// after it, problem() says what the block did that a GPU forbids.
class EmulatedBlock {
 public:
  virtual ~EmulatedBlock() = default;
  virtual void start(unsigned thread) = 0;
  virtual void sync(unsigned thread, int line) = 0;
  virtual void warp_sync(unsigned thread, int line) = 0;
  virtual void leave(unsigned thread) = 0;
  virtual std::string problem() const { return {}; }
  static void sync_of(void* block, unsigned thread, int line) {
    static_cast<EmulatedBlock*>(block)->sync(thread, line);
  }
  static void warp_sync_of(void* block, unsigned thread, int line) {
    static_cast<EmulatedBlock*>(block)->warp_sync(thread, line);
  }
};

class ThreadsTogether : public EmulatedBlock {
 public:
  explicit ThreadsTogether(unsigned threads) : barrier_(threads) {
    for (unsigned first = 0; first < threads; first += 32)
      warps_.push_back(std::make_unique<std::barrier<>>(std::min(32u, threads - first)));
  }
  void start(unsigned) override {}
  void sync(unsigned, int) override { barrier_.arrive_and_wait(); }
  void warp_sync(unsigned thread, int) override { warps_[thread / 32]->arrive_and_wait(); }
  void leave(unsigned thread) override {  // a returned thread no longer holds up the others
    barrier_.arrive_and_drop();
    warps_[thread / 32]->arrive_and_drop();
  }

 private:
  std::barrier<> barrier_;
  std::vector<std::unique_ptr<std::barrier<>>> warps_;
};

// One thread at a time, each until its next barrier or its return, in
// `order` (a warp's lanes in turn, and a warp on to its next block barrier
// before the next warp), as fibers on the launching thread (a switch costs about a
// microsecond, where handing a turn between threads costs a wake-up). A
// barrier releases its threads when every thread it waits for is there: a
// __syncthreads every thread of the block that has not returned, a warp's
// collective the warp's lanes. The threads one barrier releases must wait
// at the same line: a __syncthreads inside code only some threads run is
// undefined on a GPU (it may hang), and so is a collective only some lanes
// of a warp reach. A block whose threads all wait and none can go on is
// stopped and named.
class FiberTurns : public EmulatedBlock {
 public:
  FiberTurns(unsigned threads, ThreadOrder order) : fibers_(threads), entries_(threads) {
    for (unsigned t = 0; t < threads; ++t) order_.push_back(order == ThreadOrder::Descending ? threads - 1 - t : t);
  }
  // Runs body(t) for every thread t; resume(t) before each time fiber t runs (to set its thread-locals).
  void run(const std::function<void(unsigned)>& body, const std::function<void(unsigned)>& resume,
           std::vector<char>& stacks) {
    constexpr size_t kStack = 256 * 1024;
    stacks.resize(kStack * fibers_.size());
    body_ = &body;
    for (unsigned t = 0; t < fibers_.size(); ++t) {
      Fiber& f = fibers_[t];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = stacks.data() + kStack * t;
      f.context.uc_stack.ss_size = kStack;
      f.context.uc_link = &scheduler_;
      entries_[t] = {this, t};
      const auto address = reinterpret_cast<uintptr_t>(&entries_[t]);
      makecontext(&f.context, reinterpret_cast<void (*)()>(&FiberTurns::entry), 2, static_cast<unsigned>(address >> 32),
                  static_cast<unsigned>(address & 0xffffffffu));
    }
    for (size_t position = 0;;) {
      const unsigned t = order_[position];
      resume(t);
      swapcontext(&scheduler_, &fibers_[t].context);
      release_after(t);
      if (!problem_.empty()) return;
      // A warp goes on as a unit: the search starts at its first lane in the order, so a warp whose
      // collective completed runs on (to its next block barrier) before the next warp starts. Warps drift
      // apart as far as the barriers let them, where a missing one shows.
      const size_t warp_first = warp_first_position(t);
      size_t next = position;
      for (size_t n = 0; n < order_.size(); ++n)
        if (fibers_[order_[(warp_first + n) % order_.size()]].state == State::Ready) {
          next = (warp_first + n) % order_.size();
          break;
        }
      if (fibers_[order_[next]].state != State::Ready) {
        if (!std::all_of(fibers_.begin(), fibers_.end(), [](const Fiber& f) { return f.state == State::Done; }))
          problem_ = "every thread waits and none can go on: a barrier or a warp's collective some threads never reach";
        return;
      }
      position = next;
    }
  }
  void start(unsigned) override {}
  void sync(unsigned thread, int line) override { wait(thread, State::AtBlock, line); }
  void warp_sync(unsigned thread, int line) override { wait(thread, State::AtWarp, line); }
  void leave(unsigned thread) override { fibers_[thread].state = State::Done; }
  std::string problem() const override { return problem_; }

 private:
  enum class State { Ready, AtBlock, AtWarp, Done };
  struct Fiber {
    ucontext_t context{};
    State state = State::Ready;
    int line = 0;
  };
  struct Entry {
    FiberTurns* block;
    unsigned thread;
  };
  std::vector<Fiber> fibers_;
  std::vector<Entry> entries_;
  std::vector<unsigned> order_;
  ucontext_t scheduler_{};
  const std::function<void(unsigned)>* body_ = nullptr;
  std::string problem_;

  size_t warp_first_position(unsigned t) const {
    size_t first = order_.size();
    for (size_t p = 0; p < order_.size(); ++p)
      if (order_[p] / 32 == t / 32) first = std::min(first, p);
    return first;
  }
  static void entry(unsigned high, unsigned low) {
    const auto* e = reinterpret_cast<const Entry*>((static_cast<uintptr_t>(high) << 32) | low);
    (*e->block->body_)(e->thread);
    e->block->leave(e->thread);
  }
  void wait(unsigned thread, State at, int line) {
    fibers_[thread].state = at, fibers_[thread].line = line;
    swapcontext(&fibers_[thread].context, &scheduler_);
  }
  // Releases the barriers thread t's stop completed: its warp's collective, the block's __syncthreads.
  void release_after(unsigned t) {
    release_if_complete(t / 32 * 32, std::min<size_t>(t / 32 * 32 + 32, fibers_.size()), State::AtWarp,
                        "lanes of one warp met at different collectives (lines {} and {}): a collective only "
                        "some lanes run");
    release_if_complete(0, fibers_.size(), State::AtBlock,
                        "threads of one block waited at different barriers (lines {} and {} of the source): "
                        "__syncthreads in code only some threads run");
  }
  void release_if_complete(size_t first, size_t end, State at, const char* different_lines) {
    int line = 0;
    for (size_t k = first; k < end; ++k) {
      const Fiber& f = fibers_[k];
      if (f.state == State::Done) continue;
      if (f.state != at) return;
      if (line != 0 && f.line != line && problem_.empty())
        problem_ = fmt::format(fmt::runtime(different_lines), line, f.line);
      line = f.line;
    }
    if (at == State::AtWarp && line != 0)
      for (size_t k = first; k < end; ++k)
        if (fibers_[k].state == State::Done && problem_.empty())
          problem_ = "a warp's collective waited for lanes that had returned";
    for (size_t k = first; k < end; ++k)
      if (fibers_[k].state == at) fibers_[k].state = State::Ready;
  }
};

// The guard pages of the buffers of launches under way, for the SIGSEGV
// handler (which can take no lock: slots are atomics, claimed under one).
struct GuardedRange {
  std::atomic<uintptr_t> before{0}, start{0}, end{0};  // guards: the page at `before` and the page at `end`
  std::atomic<const char*> what{nullptr};              // "kernel, argument"
};
inline std::array<GuardedRange, 256> guarded_ranges;
inline std::mutex guarded_ranges_mutex;
inline struct sigaction sigsegv_before_emulator{};

inline void out_of_bounds_handler(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const GuardedRange& r : guarded_ranges) {
    const uintptr_t before = r.before.load(), start = r.start.load(), end = r.end.load();
    const char* what = r.what.load();
    if (!what || !((address >= before && address < before + page) || (address >= end && address < end + page)))
      continue;
    char message[512];
    const long long offset = static_cast<long long>(address) - static_cast<long long>(start);
    const int n = std::snprintf(message, sizeof message,
                                "CUDA emulation: out-of-bounds access by %s: byte %lld of a %llu-byte buffer\n", what,
                                offset, static_cast<unsigned long long>(end - start));
    if (n > 0) [[maybe_unused]]
      auto written = write(2, message, static_cast<size_t>(n));
    _exit(3);
  }
  sigaction(SIGSEGV, &sigsegv_before_emulator, nullptr);  // not a guard: the fault happens again, unhandled
  (void)signal, (void)context;
}

// A launch's buffers, each copied into pages of its own between two guard
// pages, ending at the second, and copied back when the launch is over.
class GuardedBuffers {
 public:
  GuardedBuffers(std::string_view symbol, std::span<const std::string_view> names,
                 std::span<const rt::KernelBuffer> buffers)
      : originals_(buffers.begin(), buffers.end()) {
    static std::once_flag installed;
    std::call_once(installed, [] {
      struct sigaction action{};
      action.sa_sigaction = out_of_bounds_handler;
      action.sa_flags = SA_SIGINFO;
      sigaction(SIGSEGV, &action, &sigsegv_before_emulator);
    });
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    copies_.reserve(buffers.size());
    for (size_t a = 0; a < buffers.size(); ++a) {
      Copy& c = copies_.emplace_back();
      c.what = fmt::format("{}, argument {}", symbol, a < names.size() ? std::string(names[a]) : std::to_string(a));
      if (buffers[a].data) {
        const size_t data_pages = (buffers[a].bytes + page - 1) / page;
        c.mapped_bytes = (data_pages + 2) * page;
        void* region = mmap(nullptr, c.mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED) throw std::runtime_error("CUDA emulation: mmap failed");
        c.region = static_cast<char*>(region);
        char* end = c.region + (1 + data_pages) * page;
        mprotect(c.region, page, PROT_NONE);
        mprotect(end, page, PROT_NONE);
        c.start = end - buffers[a].bytes;
        std::memcpy(c.start, buffers[a].data, buffers[a].bytes);
        c.slot = claim(reinterpret_cast<uintptr_t>(c.region), reinterpret_cast<uintptr_t>(c.start),
                       reinterpret_cast<uintptr_t>(end), c.what);
      }
    }
    for (size_t a = 0; a < buffers.size(); ++a) pointers_.push_back(buffers[a].data ? copies_[a].start : nullptr);
  }
  ~GuardedBuffers() {
    for (size_t a = 0; a < copies_.size(); ++a) {
      const Copy& c = copies_[a];
      if (!c.region) continue;
      std::memcpy(originals_[a].data, c.start, originals_[a].bytes);
      std::lock_guard<std::mutex> lock(guarded_ranges_mutex);
      guarded_ranges[c.slot].what = nullptr;
      munmap(c.region, c.mapped_bytes);
    }
  }
  std::span<void* const> pointers() const { return pointers_; }

 private:
  struct Copy {
    std::string what;
    char* region = nullptr;
    char* start = nullptr;
    size_t mapped_bytes = 0, slot = 0;
  };
  std::vector<rt::KernelBuffer> originals_;
  std::vector<Copy> copies_;  // reserved: a slot points into each `what`, which must not move
  std::vector<void*> pointers_;

  static size_t claim(uintptr_t before, uintptr_t start, uintptr_t end, const std::string& what) {
    std::lock_guard<std::mutex> lock(guarded_ranges_mutex);
    for (size_t k = 0; k < guarded_ranges.size(); ++k)
      if (!guarded_ranges[k].what.load()) {
        guarded_ranges[k].before = before, guarded_ranges[k].start = start, guarded_ranges[k].end = end;
        guarded_ranges[k].what = what.c_str();
        return k;
      }
    throw std::runtime_error("CUDA emulation: too many buffers in flight");
  }
};

// The parameter names of a generated kernel (kernels/kernel_abi.h), for messages.
inline std::span<const std::string_view> parameters_of(std::string_view symbol) {
  namespace abi = kernels::abi;
  if (symbol == abi::kForwardSymbol) return abi::kCudaForward;
  if (symbol == abi::kCudaBackwardRowsSymbol) return abi::kCudaBackwardRows;
  if (symbol == abi::kCudaBackwardKeysSymbol) return abi::kCudaBackwardKeys;
  if (symbol == abi::kCudaBackwardQueriesSymbol) return abi::kCudaBackwardQueries;
  if (symbol == abi::kProbeSymbol) return abi::kCudaProbe;
  return {};
}

// Whether there is a host C++ compiler to run the CUDA source on the CPU.
inline bool have_host_compiler() { return std::system("command -v c++ > /dev/null 2>&1") == 0; }
#define SKIP_WITHOUT_HOST_COMPILER()                 \
  if (!sink::testing_variants::have_host_compiler()) \
  GTEST_SKIP() << "no host C++ compiler (c++) to run the CUDA source on the CPU"

// The host compiler's options for the emulated kernels, the same for the precompiled header and its users.
inline constexpr const char* kHostCompileOptions = "-std=c++20 -O1 -fno-strict-aliasing -fPIC -w";

// The build's compiler launcher (ccache in CI; tests/CMakeLists.txt passes it) as a command's prefix: the kernels'
// compilations are about half the emulation's time, and a cache serves them again to the next run. (ccache caches
// a compilation that makes or uses a precompiled header only where told that its macros and times are the same
// every time, which holds for cuda_on_cpu.h; made by ccache, the precompiled header is the same file every run,
// so that the compilations that use it hit the cache too.)
inline std::string host_compiler_launcher() {
  const char* launcher = std::getenv("SINKLAB_HOST_COMPILER_LAUNCHER");
  if (!launcher || !*launcher) return "";
  return fmt::format("CCACHE_SLOPPINESS=\"${{CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}}pch_defines,time_macros\" {} ",
                     launcher);
}

// The emulation's header (cuda_on_cpu.h) precompiled, in a folder of the kernel cache named by a hash of the header
// and the options; made once by whichever process needs it first (in a folder of its own, then renamed). Its text
// is about 60 % of the time a kernel source takes to compile, which every source the compiler cache has not seen
// (all of them, after any change to kernels/cuda/) pays. Empty where it cannot be made: the header is then
// compiled with each source, as the result is the same; so it is with SINKLAB_EMULATION_PCH=0 (to compare them).
inline std::filesystem::path precompiled_emulation_header(const std::string& header) {
  if (const char* wanted = std::getenv("SINKLAB_EMULATION_PCH"); wanted && std::string(wanted) == "0") return {};
  const std::filesystem::path dir =
      sink::kernel_cache_dir() / ("emulation-header-" + sink::fnv1a_hex(header + kHostCompileOptions));
  std::error_code ec;
  if (std::filesystem::exists(dir / "cuda_on_cpu.h.gch", ec)) return dir;
  std::filesystem::create_directories(sink::kernel_cache_dir(), ec);
  std::string making = (dir.string() + ".making-XXXXXX");
  if (!mkdtemp(making.data())) return {};
  std::ofstream(std::filesystem::path(making) / "cuda_on_cpu.h") << header;
  const std::string command =
      fmt::format("cd '{}' && {}c++ {} -x c++-header cuda_on_cpu.h -o cuda_on_cpu.h.gch > log 2>&1", making,
                  host_compiler_launcher(), kHostCompileOptions);
  if (std::system(command.c_str()) == 0) std::filesystem::rename(making, dir, ec);  // (fails where another won)
  sink::remove_tree(making, ec);
  return std::filesystem::exists(dir / "cuda_on_cpu.h.gch", ec) ? dir : std::filesystem::path();
}

// A source compiled by the host compiler and loaded. The file compiled holds the source, after the emulation's
// header (precompiled where it can be: a copy of the header beside it, and a link to the precompiled one), and is
// compiled in its own folder by relative names, so the same source is the same compilation to a compiler cache
// wherever the folder and the checkout are; then linked apart (a cache serves compilations, not links).
class HostCompiledKernels {
 public:
  explicit HostCompiledKernels(const std::string& source) {
    std::string dir_template = (std::filesystem::temp_directory_path() / "sinklab-cuda-on-cpu-XXXXXX").string();
    if (!mkdtemp(dir_template.data())) throw std::runtime_error("cannot make a temporary folder");
    dir_ = dir_template;
    std::ifstream header_file(std::filesystem::path(sinktest::source_dir()) / "tests/kernels/cuda_on_cpu.h");
    const std::string header(std::istreambuf_iterator<char>(header_file), {});
    const std::filesystem::path precompiled = precompiled_emulation_header(header);
    std::error_code ec;
    if (!precompiled.empty()) {
      std::ofstream(dir_ / "cuda_on_cpu.h") << header;
      std::filesystem::create_symlink(precompiled / "cuda_on_cpu.h.gch", dir_ / "cuda_on_cpu.h.gch", ec);
    }
    std::ofstream(dir_ / "kernels.cu") << (precompiled.empty() ? header : std::string()) << "\n#line 1 \"kernels.cu\"\n"
                                       << source;
    const std::string command = fmt::format(
        "cd '{}' && {}c++ {} {} -c -x c++ kernels.cu -o kernels.o > log 2>&1 "
        "&& c++ -shared kernels.o -o kernels.so >> log 2>&1",
        dir_.string(), host_compiler_launcher(), kHostCompileOptions,
        precompiled.empty() ? "" : "-include cuda_on_cpu.h");
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(dir_ / "log");
      throw std::runtime_error("the host compiler rejected the CUDA source:\n" +
                               std::string(std::istreambuf_iterator<char>(log), {}));
    }
    handle_ = dlopen((dir_ / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw std::runtime_error(dlerror());
    enter = reinterpret_cast<decltype(enter)>(dlsym(handle_, "sink_emulator_enter"));
    begin_block = reinterpret_cast<decltype(begin_block)>(dlsym(handle_, "sink_emulator_begin_block"));
    shared_shortfall = reinterpret_cast<decltype(shared_shortfall)>(dlsym(handle_, "sink_emulator_shared_shortfall"));
    set_arch = reinterpret_cast<decltype(set_arch)>(dlsym(handle_, "sink_emulator_set_arch"));
  }
  ~HostCompiledKernels() {
    std::error_code ignored;
    sink::remove_tree(dir_, ignored);
  }
  void* kernel(std::string_view symbol) const {
    void* k = dlsym(handle_, std::string(symbol).c_str());
    if (!k) throw std::runtime_error("no kernel " + std::string(symbol));
    return k;
  }
  void (*enter)(unsigned, unsigned, unsigned, void*, void (*)(void*, unsigned, int),
                void (*)(void*, unsigned, int)) = nullptr;
  void (*begin_block)(unsigned threads, bool copies_land_at_issue, size_t shared_bytes) = nullptr;
  size_t (*shared_shortfall)() = nullptr;  // the bytes of dynamic shared memory the block used past its launch's
  void (*set_arch)(int arch) = nullptr;    // the GPU generation the kernels take their paths for (80, 90)

 private:
  std::filesystem::path dir_;
  void* handle_ = nullptr;
};

class CpuEmulatedModule : public rt::KernelModule {
 public:
  CpuEmulatedModule(std::shared_ptr<const HostCompiledKernels> compiled, ThreadOrder order, int arch = 80)
      : compiled_(std::move(compiled)), order_(order), arch_(arch) {}

  std::string device_name() const override { return "CPU emulation"; }

  void launch(std::string_view symbol, rt::LaunchShape shape, std::span<const rt::KernelBuffer> buffers,
              std::span<const int64_t> sizes) override {
    void* kernel = compiled_->kernel(symbol);
    if (sizes.size() != 4) throw std::logic_error("the kernels take four sizes");
    const GuardedBuffers guarded(symbol, parameters_of(symbol), buffers);
    const std::span<void* const> pointers = guarded.pointers();
    std::vector<char> stacks;  // the fibers', reused by every block
    compiled_->set_arch(arch_);
    for (unsigned by = 0; by < shape.grid_y; ++by)
      for (unsigned bx = 0; bx < shape.grid_x; ++bx) {
        // Descending turns land asynchronous copies as they are issued, the other orders at their wait.
        compiled_->begin_block(shape.threads, order_ == ThreadOrder::Descending, shape.shared_bytes);
        std::string problem;
        if (order_ == ThreadOrder::Together) {
          ThreadsTogether block(shape.threads);
          std::vector<std::thread> threads;
          for (unsigned t = 0; t < shape.threads; ++t)
            threads.emplace_back([&, t] {
              compiled_->enter(t, bx, by, &block, &EmulatedBlock::sync_of, &EmulatedBlock::warp_sync_of);
              call(kernel, pointers, sizes);
              block.leave(t);
            });
          for (auto& th : threads) th.join();
        } else {
          FiberTurns block(shape.threads, order_);
          block.run([&](unsigned) { call(kernel, pointers, sizes); },
                    [&](unsigned t) {
                      compiled_->enter(t, bx, by, &block, &EmulatedBlock::sync_of, &EmulatedBlock::warp_sync_of);
                    },
                    stacks);
          problem = block.problem();
        }
        if (const size_t needed = compiled_->shared_shortfall(); needed > shape.shared_bytes)
          problem = fmt::format("it uses {} bytes of dynamic shared memory, its launch asked for {}", needed,
                                shape.shared_bytes);
        if (!problem.empty()) throw std::runtime_error(fmt::format("CUDA emulation of {}: {}", symbol, problem));
      }
  }

 private:
  std::shared_ptr<const HostCompiledKernels> compiled_;
  ThreadOrder order_;
  int arch_;

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
      case 2: return call_n<2>(kernel, p, s);  // (the step kernels: kernels/cuda/step_source.h)
      case 3: return call_n<3>(kernel, p, s);
      case 5: return call_n<5>(kernel, p, s);
      case 6: return call_n<6>(kernel, p, s);
      case 7: return call_n<7>(kernel, p, s);
      case 9: return call_n<9>(kernel, p, s);
      case 10: return call_n<10>(kernel, p, s);
      case 11: return call_n<11>(kernel, p, s);
      default: throw std::logic_error(fmt::format("no kernel takes {} pointers", p.size()));
    }
  }
};

// A source compiled once per process, whichever order runs it.
inline std::shared_ptr<const HostCompiledKernels> host_compiled(const std::string& source) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const HostCompiledKernels>> compiled;
  std::lock_guard<std::mutex> lock(mutex);
  auto& kernels = compiled[source];
  if (!kernels) kernels = std::make_shared<const HostCompiledKernels>(source);
  return kernels;
}

// KernelModules for CPU tensors, the block's threads run in `order`.
// `arch`: the GPU generation whose paths the kernels take (90: Hopper's bulk reductions), and the capability the
// launcher sees (90: its tuning measures the Hopper kernels too).
inline rt::KernelModules cpu_emulated_modules(ThreadOrder order = ThreadOrder::Together, int arch = 80) {
  return {fmt::format("cpu-emulated, threads {}, sm_{}", name_of(order), arch),
          [order, arch](const std::string& source, const torch::Device&) -> std::shared_ptr<rt::KernelModule> {
            return std::make_shared<CpuEmulatedModule>(host_compiled(source), order, arch);
          },
          false, nullptr, [arch](const torch::Device&) { return arch; }};
}

// The CUDA attention on the emulation, the block's threads run in `order`: an attention an oracle compares
// (tests/runtime/attention_oracle.h's Attend).
inline std::function<torch::Tensor(const kernels::KernelSpec&, const rt::AttentionCall&)> emulated_in_order(
    ThreadOrder order) {
  return [order](const kernels::KernelSpec& spec, const rt::AttentionCall& call) {
    return rt::cuda_attention(spec, call, cpu_emulated_modules(order));
  };
}

// hopper=tune (SINKLAB_GPU_FEATURES) for one test's scope, and back: the Hopper kernels are opt-in until a GPU check
// has run them (runtime/gpu_features.h's row hopper, runtime/attention/cuda_tuning.h's hopper_kernels_allowed), and
// the tests that check them opt in. `also`: more of the table besides (sinktest::kFusedBackwardOn90, where a fused
// Hopper backward_keys is to run).
class HopperKernelsOptedIn : public sinktest::GpuFeaturesAsked {
 public:
  explicit HopperKernelsOptedIn(const std::string& also = "")
      : GpuFeaturesAsked(also.empty() ? "hopper=tune" : "hopper=tune," + also) {}
};

// SINKLAB_KERNEL_CACHE pointed at a fresh folder for one test, and back.
class KernelCacheHere {
 public:
  explicit KernelCacheHere(const std::string& name)
      : dir_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    sink::remove_tree(dir_);
    if (const char* before = std::getenv("SINKLAB_KERNEL_CACHE")) before_ = before;
    setenv("SINKLAB_KERNEL_CACHE", dir_.c_str(), 1);
  }
  ~KernelCacheHere() {
    if (before_.empty())
      unsetenv("SINKLAB_KERNEL_CACHE");
    else
      setenv("SINKLAB_KERNEL_CACHE", before_.c_str(), 1);
    sink::remove_tree(dir_);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::string before_;
};

}  // namespace sink::testing_variants
