// The tiles each tensor-core kernel of a variant runs with on a GPU, measured there once: on a variant's
// first forward the launcher times every candidate (kernels::cuda_tile_candidates, at most 8) of the
// forward and both backward kernels on the call's own shapes (on compute capability 9.0 the Hopper kernels
// too, kernels::cuda_hopper_candidates, at most 4), keeps the fastest of each (and the fastest
// backward_keys that sums dQ too, kernels::cuda_fused_candidates, where it beats the two backward kernels
// together), and writes the
// choice to kernel_cache_dir()/tiles.json, keyed by the GPU's name, the variant, the storage and d_head, so
// later processes on that GPU read it instead of measuring. Where it holds nothing for a variant, the table
// sinklab ships (data/tuning/tiles.json: tiles measured on an H100) answers for the GPUs it names. Every entry
// carries the kernel text it was measured on (kernel_text_hash(), runtime/gpu_features.h): an entry measured on
// other kernels is never reused; the variant is measured again, or, untuned, runs its default tiles.
// SINKLAB_TUNE=0 keeps the defaults (kernels::cuda_tiles); SINKLAB_TUNE=1 measures what the shipped table
// holds.
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/emit_cuda.h"

namespace sink::rt {

// Per kernel, the tiles whose source it is launched from.
// `fused`: a backward_keys that sums dQ as well (fused_dq), where it measured faster than `keys` and
// `queries` together; it then runs instead of them (backward_dq_tiles). `seconds`: what the measurement found
// per kernel (the fastest candidate's seconds a call), for the table's reader; empty where unmeasured.
struct KernelTiles {
  kernels::CudaTiles forward, keys, queries;
  std::optional<kernels::CudaTiles> fused = {};
  std::map<std::string, double> seconds = {};
};

// Where this machine's tuning table is: kernel_cache_dir()/tiles.json.
std::filesystem::path tuning_table_path();

// The tuning table's key of a variant on a GPU.
std::string tuning_key(const std::string& gpu, const kernels::KernelSpec& spec, kernels::CudaStorage storage);

// What the table holds for `key`, if anything: the kernel cache's table, else the one sinklab ships
// (shipped_tuning_table(), support/installation.h: tiles measured on the GPUs it names), which SINKLAB_TUNE=1
// passes over so that this machine measures them. An unreadable table reads as empty, and says so on stderr
// once.
std::optional<KernelTiles> remembered_tiles(const std::string& key);
// Adds `key` to the table, keeping what other processes wrote (read again, written to a temporary, renamed).
void remember_tiles(const std::string& key, const KernelTiles& tiles);

// A measurement of tiles that a process did not live through (a kernel that faulted, or hung until the process was
// stopped) or that lost the device's context, kept in the table under "failed": the GPU, the variant's key, the
// kernel, the tiles, why, when, and the hash of the kernel text that failed. On that GPU and with that kernel text,
// the tuning does not measure those tiles again, nor, where they were Hopper tiles, any Hopper tiles: one crash of
// the wgmma path is not worth a crash per candidate. A sinklab whose kernels differ measures them again; so does
// one whose table has lost the record (delete it to retry). Returns why `tiles` are not measured; empty where
// they are.
std::string failed_before(const std::string& gpu, const std::string& key, const kernels::CudaTiles& tiles);
void record_failed_measurement(const std::string& gpu, const std::string& key, const std::string& kernel,
                               const kernels::CudaTiles& tiles, const std::string& why);

// The measurement a tuning has in flight, in a file of kernel_cache_dir()/measuring/ that the tuning holds locked
// (flock) while it lives: a process that dies, however it dies, leaves the file unlocked, and the next tuning on
// the machine (any process) records what it names as a failed measurement. A measurement still running after
// `patience` is said on stderr once (a kernel that hangs: the process must be stopped; the next one skips it).
class MeasurementJournal {
 public:
  MeasurementJournal(std::string gpu, std::string key, std::chrono::seconds patience = std::chrono::seconds(60));
  ~MeasurementJournal();  // the tuning ended, well or not: nothing in flight
  MeasurementJournal(const MeasurementJournal&) = delete;
  MeasurementJournal& operator=(const MeasurementJournal&) = delete;
  void measuring(const std::string& kernel, const kernels::CudaTiles& tiles);
  void done();  // between measurements
  // The measurement in flight took the device's context with it: recorded now, `why` being the error.
  void lost_device(const std::string& why);

  // Records the measurements of every journal whose process is gone (returns how many).
  static int collect_abandoned();

 private:
  struct Watch;
  std::string gpu_, key_, kernel_;
  kernels::CudaTiles tiles_;
  std::filesystem::path path_;
  int fd_ = -1;
  std::unique_ptr<Watch> watch_;
};

// Whether a measurement in this process lost its CUDA device's context (MeasurementJournal::lost_device): every
// later launch in the process fails, so the runs after the one it ended would only fail too (sinkc run stops).
bool device_context_lost();

// Whether the Hopper kernels may run on a GPU of `capability` (runtime/gpu_features.h's row `hopper`: opt-in,
// SINKLAB_GPU_FEATURES=hopper, until a GPU check has run them). Where they may not, the tuning does not measure them,
// and tiles a table recorded for them run as the default tiles (gpu-check sets hopper=off when the warpgroup tile
// products crashed or hung).
bool hopper_kernels_allowed(int capability);

// Whether a variant's first use measures its tiles (SINKLAB_TUNE is not 0).
bool tuning_enabled();

// Whether a fused backward_keys may run on a GPU of `capability`: the row `fused_backward`, and from compute
// capability 9.0 on, where that kernel sums dQ by the copy engine's bulk reduction, the row `bulk_reduction` too.
// Where it may not, the tuning does not measure the fused candidates and a remembered fused choice is not run.
bool fused_backward_allowed(int capability);

// The fused backward_keys a launcher with these tiles runs, if any: none where fused_backward_allowed is false, else
// the measured one (tiles.fused); with fused_backward=force, where none was measured, the first of
// kernels::cuda_fused_candidates (where `tiles` run the Hopper backward_keys, kernels::cuda_hopper_fused_candidates's).
std::optional<kernels::CudaTiles> fused_backward(const KernelTiles& tiles, const kernels::KernelSpec& spec,
                                                 kernels::CudaStorage storage, int capability);

// The tiles a launcher with these runs: the measured ones, as the row `hopper` allows: off, no Hopper kernel (the
// default tiles where the table has one; no Hopper fused backward); on or tune, the table's as they are; force, the
// Hopper kernels on a GPU of compute capability 9.0, each waiting for its products (the measured one of each kernel
// if it is such a Hopper one, else the first of kernels::cuda_hopper_candidates; no fused backward); overlap, the
// same with the first overlapped forward, as a profile compares them on the same shapes.
KernelTiles tiles_to_run(const KernelTiles& tiles, const kernels::KernelSpec& spec, kernels::CudaStorage storage,
                         int capability);

// Each kernel's own tiles in `tiles` (fused: the backward_keys that runs instead of the two backward kernels):
// "forward 128x64 wgmma overlapped, backward_keys 64x64 wgmma, backward_queries 64x64 wgmma".
std::string describe_kernels(const KernelTiles& tiles, const std::optional<kernels::CudaTiles>& fused);

}  // namespace sink::rt
