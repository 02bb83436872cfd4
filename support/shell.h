// The shell, for the programs sinklab runs (spm_*, torchrun's Python, the runtime beside the front end): one
// quoting rule and one way to read a command's output, for the front end, the runtime and the token cache alike.
#pragma once
#include <string>

namespace sink {

// `s` as one word of a POSIX shell command line, whatever it holds.
std::string shell_quote(const std::string& s);

// stdout of `command` run through the shell; "" if it cannot start.
std::string command_output(const std::string& command);

}  // namespace sink
