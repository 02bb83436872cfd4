// Pass 5: cross-field rules on each expanded run (a sweep point can
// contradict where its base did not). Reported at the setting that made
// the contradiction.
#pragma once
#include "compiler/program.h"

namespace sink {

void check_contradictions(const Program& program, Diagnostics& diags);

}  // namespace sink
