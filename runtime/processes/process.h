// This process and the programs it runs: its host name, and a helper
// program's output (spm_decode, the PyTorch comparison in bench/).
#pragma once
#include <string>

#include "support/shell.h"

namespace sink::rt {

using sink::command_output;  // support/shell.h

// This machine's host name ("" if unknown): runs record who trains them.
std::string host_name();

// OpenBLAS's own thread pool (Debian's libopenblas0-pthread) competes with
// LibTorch's OpenMP threads for the same cores: on 2 cores, 2 threads trained
// tiny at 55k tokens/s against 86k on one thread; with BLAS single-threaded,
// 98k (bench/train_throughput). Parallelism then comes from LibTorch's pool
// alone. A no-op under another BLAS. Returns whether OpenBLAS was found.
bool single_threaded_blas();

}  // namespace sink::rt
