// Where sinklab's data lives: stdlib/ (defaults.sink, presets.sink) and
// data/builtin/ (the builtin corpus). One rule for the build tree, an
// installed tree and a moved one, so no source-tree path is compiled into a
// binary:
//   1. $SINKLAB_HOME, when set;
//   2. <folder of the executable>/share/sinklab  (the build tree: CMake links it to the sources);
//   3. <folder of the executable>/../share/sinklab  (`cmake --install`: PREFIX/bin + PREFIX/share/sinklab).
#pragma once

#include <filesystem>
#include <string>

namespace sink {

// The first of the folders above that exists; empty when none does.
std::filesystem::path data_home();

// $SINKLAB_STDLIB when set, else data_home()/stdlib.
std::filesystem::path stdlib_dir();

// data_home()/data/builtin/<name>.jsonl; throws naming where it looked when
// the file is missing.
std::filesystem::path builtin_corpus(const std::string& name);

// data_home()/data/tuning/tiles.json: the tensor-core kernels' tiles as measured on the GPUs named in it
// (runtime/attention/cuda_tuning.h), shipped so those GPUs run measured tiles from the first call; empty
// when there is no data folder.
std::filesystem::path shipped_tuning_table();

// Where compiled attention kernels are kept between processes (the CPU JIT's
// object files, the GPU's cubins): $SINKLAB_KERNEL_CACHE, else
// $HOME/.cache/sinklab/kernels (/tmp/.cache/... without a HOME).
std::filesystem::path kernel_cache_dir();

// Version of sinklab (CMake's project version) and of the plan format.
const char* version();

}  // namespace sink
