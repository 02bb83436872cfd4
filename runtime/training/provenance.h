// What a run's numbers came from, recorded in its summary.json beside the
// plan's hash: the sinklab that trained it (version, commit, numerics
// version: plan/numerics_version.h), the LibTorch it ran on, the device and
// its name, and the attention kernels that ran. The hash says what was asked
// for; this says what computed it, so two runs of one plan whose numbers
// differ can be told apart, and a bug report carries what it needs.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <torch/torch.h>

namespace sink::rt {

// The git commit of the sources, "+modified" when tracked files had edits, or "unknown" outside a git
// checkout; defined in a file cmake/source_commit.cmake writes at build time.
const char* source_commit();

// The CPU's model name (/proc/cpuinfo) or the GPU's name (the CUDA driver); "unknown" where neither says.
std::string device_name(const torch::Device& device);

// summary.json's "provenance", but for the attention kernels, which are known once they ran
// (AttentionBackend::kernels_run).
nlohmann::json provenance(const torch::Device& device);

}  // namespace sink::rt
