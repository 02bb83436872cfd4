// Pass 6: runs -> Plans. Folds the sugar (`first_token = random` into the
// random positions, `v_star = auto`, kv_heads = 0) so that one computation has
// one canonical plan and one hash.
#pragma once
#include "compiler/program.h"
#include "plan/plan.h"

namespace sink {

std::vector<Plan> lower(const Program& program, Diagnostics& diags);

}  // namespace sink
