#include "runtime/processes/process.h"

#include <dlfcn.h>

#include <cstdio>
#include <unistd.h>

namespace sink::rt {

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

std::string blas_threads_follow_libtorch() {
  // Looked up rather than linked: LibTorch reaches BLAS through libblas.so.3, whichever provides it.
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (!set_threads || !parallel) return "not OpenBLAS: its own threading";
  // openblas_get_parallel: 0 sequential, 1 its own pthreads, 2 OpenMP.
  if (parallel() == 2) return "OpenBLAS on OpenMP: LibTorch's threads";
  if (parallel() == 0) return "OpenBLAS, sequential";
  set_threads(1);
  return "OpenBLAS on its own threads: made single-threaded";
}

}  // namespace sink::rt
