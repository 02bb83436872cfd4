// Which knobs differ between two resolved plans: field by field, in the
// language's dotted paths and syntax (`attention.score: exp(qk) -> sigmoid(qk)`).
#pragma once
#include <string>
#include <vector>

#include "plan/plan.h"

namespace sink::results {

struct FieldChange {
  std::string path;
  std::string a, b;  // Value::str(), as a spec would write it; "(absent)" when a plan lacks the field
};

// Every field whose value differs, in path order. The run name is not a
// field: two plans that differ only by name give no change.
std::vector<FieldChange> diff_plans(const Plan& a, const Plan& b);

// `path: a -> b`, one per line, indented by `indent`.
std::string render_changes(const std::vector<FieldChange>& changes, const std::string& indent = "  ");

}  // namespace sink::results
