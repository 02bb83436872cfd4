// What cuda_check prints so that a crash still tells how far it got: each line flushed as it is printed, and on a
// fatal signal a CRASH line naming the case that was running, the faulting address and the code addresses on the
// stack, named where the loader knows them. (On an H100 a crash at address 0 after the last case was found this
// way: a function of pip's LibTorch that the node's libstdc++ does not export.)
#pragma once
#include <fmt/format.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

namespace sink::gpu_check {

// A line that must reach the log even if the process dies right after it.
template <typename... Args>
void say(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(format, std::forward<Args>(args)...);
  std::fflush(stdout);
}

// The case running now, for the crash report (a fixed buffer: the signal handler reads it).
inline char running[256] = "startup";
inline void now_running(const std::string& name) { std::snprintf(running, sizeof running, "%s", name.c_str()); }

inline void write_out(const char* text) { (void)!write(STDOUT_FILENO, text, std::strlen(text)); }

// An address, and the library and symbol it falls in where the loader knows them.
inline void describe_address(const char* what, void* address) {
  Dl_info info{};
  char line[768];
  if (address && dladdr(address, &info) && info.dli_fname) {
    void* base = info.dli_saddr ? info.dli_saddr : info.dli_fbase;
    std::snprintf(line, sizeof line, "  %s %p: %s (%s+0x%lx)\n", what, address, info.dli_fname,
                  info.dli_sname ? info.dli_sname : "?",
                  static_cast<unsigned long>(static_cast<char*>(address) - static_cast<char*>(base)));
  } else {
    std::snprintf(line, sizeof line, "  %s %p\n", what, address);
  }
  write_out(line);
}

// Where a crash happened, as far as the process can tell: a jump to address 0 leaves no frame to unwind, so
// the return address at the stack pointer and the other code addresses on the stack name the callers.
extern "C" inline void on_crash(int signal_number, siginfo_t* info, void* context) {
  char line[512];
  std::snprintf(line, sizeof line, "CRASH signal %d (address %p) during: %s\n", signal_number,
                info ? info->si_addr : nullptr, running);
  write_out(line);
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  void* pc = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
  void** sp = reinterpret_cast<void**>(uc->uc_mcontext.gregs[REG_RSP]);
  describe_address("pc", pc);
  for (int k = 0; k < 64; ++k) {
    Dl_info d{};
    if (dladdr(sp[k], &d) && d.dli_sname) describe_address(k == 0 ? "[sp]" : "stack", sp[k]);
  }
#else
  (void)context;
#endif
  void* frames[48];
  const int depth = backtrace(frames, 48);
  for (int k = 0; k < depth; ++k) describe_address("frame", frames[k]);
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

inline void report_crashes() {
  struct sigaction crash{};
  crash.sa_sigaction = on_crash;
  crash.sa_flags = SA_SIGINFO;
  for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(s, &crash, nullptr);
}

}  // namespace sink::gpu_check
