// Pass 5: cross-field rules on each expanded run (a sweep point can
// contradict where its base did not). Reported at the setting that made
// the contradiction.
#pragma once
#include <string>
#include <vector>

#include "compiler/program.h"
#include "plan/plan.h"

namespace sink {

void check_contradictions(const Program& program, Diagnostics& diags);

// The same rules on a resolved plan that no spec wrote (sinkc bisect mixes two
// plans' fields): the errors' messages, none when the plan is sound.
std::vector<std::string> plan_contradictions(const Plan& plan);

}  // namespace sink
