// Pass 2: load imports (relative to the importing file, then the stdlib
// folder), link `extends` chains, apply --base. Cycles are errors.
#pragma once
#include "compiler/program.h"

namespace sink {

// Loads FILE and everything it imports; returns false on an I/O failure of FILE itself.
bool load_root(Program& program, const std::string& path, Diagnostics& diags);
// Loads text given directly (tests, benchmarks, stdin).
void load_root_text(Program& program, const std::string& name, std::string text, Diagnostics& diags);
// Links experiments and their `extends` chains across every loaded module.
void resolve(Program& program, Diagnostics& diags);

}  // namespace sink
