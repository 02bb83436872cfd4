// This process and the programs it runs: its host name, and a helper
// program's output (spm_decode, the PyTorch comparison in bench/).
#pragma once
#include <string>

namespace sink::rt {

// stdout of `command` run through the shell; "" if it cannot start.
std::string command_output(const std::string& command);

// This machine's host name ("" if unknown): runs record who trains them.
std::string host_name();

}  // namespace sink::rt
