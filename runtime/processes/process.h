// This process and the programs it runs: its host name, and a helper
// program's output (spm_decode, the PyTorch comparison in bench/).
#pragma once
#include <string>

#include "support/shell.h"

namespace sink::rt {

using sink::command_output;  // support/shell.h

// This machine's host name ("" if unknown): runs record who trains them.
std::string host_name();

// How the matrix products find their threads. OpenBLAS built on OpenMP
// (Debian's libopenblas0-openmp, which the runtime's programs load first:
// runtime/CMakeLists.txt) shares LibTorch's OpenMP pool and follows
// at::set_num_threads; inside a parallel region it runs on its caller's thread.
// tiny_text at context 256 on 2 cores: 1.4x from the second thread.
// OpenBLAS's own pthread pool (libopenblas0-pthread) competes with LibTorch's
// threads for the same cores (tiny at 2 threads: 55k tokens/s against 98k with
// it single-threaded), so that one is made single-threaded, and the products
// then run on one core at any thread count. Returns what was found, in words.
std::string blas_threads_follow_libtorch();

}  // namespace sink::rt
