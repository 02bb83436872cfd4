// Pass 4: every experiment of the root files becomes a run; every sweep
// becomes the grid product of its axes; train.seeds = n becomes n runs.
// Each run carries every field's value and where it was set.
#pragma once
#include "compiler/program.h"

namespace sink {

void expand(Program& program, Diagnostics& diags);

// The name of one sweep point, safe as a directory name:
// `wd.weight_decay=0.5,lr=0.001`.
std::string point_name(const std::string& sweep, const std::vector<std::pair<std::string, Value>>& point);

}  // namespace sink
