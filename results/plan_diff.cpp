#include "results/plan_diff.h"

#include <set>

namespace sink::results {

std::vector<FieldChange> diff_plans(const Plan& a, const Plan& b) {
  // Plans read from different versions of the schema may not share every field.
  std::set<std::string> paths;
  for (const auto& [p, v] : a.fields) paths.insert(p);
  for (const auto& [p, v] : b.fields) paths.insert(p);
  std::vector<FieldChange> out;
  for (const auto& p : paths) {
    auto ia = a.fields.find(p);
    auto ib = b.fields.find(p);
    if (ia != a.fields.end() && ib != b.fields.end() && ia->second == ib->second) continue;
    out.push_back({p, ia == a.fields.end() ? "(absent)" : ia->second.str(),
                   ib == b.fields.end() ? "(absent)" : ib->second.str()});
  }
  return out;
}

std::string render_changes(const std::vector<FieldChange>& changes, const std::string& indent) {
  std::string out;
  for (const auto& c : changes) out += indent + c.path + ": " + c.a + " -> " + c.b + "\n";
  return out;
}

}  // namespace sink::results
