#include "runtime/processes/process.h"

#include <dlfcn.h>

#include <cstdio>
#include <unistd.h>

namespace sink::rt {

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

bool single_threaded_blas() {
  // Looked up rather than linked: LibTorch reaches BLAS through libblas.so.3, whichever provides it.
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set_threads) set_threads(1);
  return set_threads != nullptr;
}

}  // namespace sink::rt
