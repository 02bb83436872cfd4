// torchrun, the launcher of a run's data-parallel workers on one machine:
// `sinkc run --workers W` execs it, and the batch script of `sinkc submit
// --slurm --gpus-per-run G` runs it in each array task.
#pragma once

#include <string>
#include <vector>

namespace sink::cli {

// The command line that starts `workers` workers of `runtime run` on this
// machine, its store on loopback at `port`; the runtime's arguments follow it.
std::vector<std::string> torchrun_argv(int workers, const std::string& port, const std::string& runtime);

// A port no one listens on now.
int free_port();

}  // namespace sink::cli
