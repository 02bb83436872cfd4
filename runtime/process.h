// Running a helper program and reading what it prints (spm_decode, the
// PyTorch comparison in bench/).
#pragma once
#include <string>

namespace sink::rt {

// stdout of `command` run through the shell; "" if it cannot start.
std::string command_output(const std::string& command);

}  // namespace sink::rt
