#include "compiler/lower.h"

#include <algorithm>
#include <fmt/format.h>

#include "plan/choices.h"
#include "plan/schema.h"

namespace sink {

std::vector<Plan> lower(const Program& program, Diagnostics& diags) {
  std::vector<Plan> plans;
  for (const Run& run : program.runs) {
    Plan plan;
    plan.name = run.name;
    plan.source = run.name_span.file >= 0 ? program.sources.file(run.name_span.file).path : "";
    plan.sweep_point = run.axis_values;
    bool complete = true;
    for (const Field& f : schema()) {
      auto it = run.fields.find(f.path);
      if (it == run.fields.end()) {
        diags.error(run.name_span, fmt::format("no value for '{}' in run '{}'", f.path, run.name),
                    "stdlib/defaults.sink must give every field a default");
        complete = false;
        continue;
      }
      plan.fields[f.path] = it->second.value;
    }
    if (!complete) continue;
    auto& fields = plan.fields;

    // Random positions: one sorted list, x1 included when first_token = random.
    std::vector<int64_t> random;
    for (const auto& v : fields["data.random"].items) random.push_back(v.i);
    if (find_choice<FirstToken>(fields["data.first_token"].s) == FirstToken::random) random.push_back(1);
    std::sort(random.begin(), random.end());
    random.erase(std::unique(random.begin(), random.end()), random.end());
    fields["data.random"].items.clear();
    for (int64_t p : random) fields["data.random"].items.push_back(Value::of_int(p));
    fields["data.first_token"] = Value::of_enum(name_of(FirstToken::natural));

    // Fixed tokens sorted by position; a repeated identical statement is one.
    auto& fix = fields["data.fix"].items;
    std::sort(fix.begin(), fix.end(), [](const Value& a, const Value& b) {
      return std::pair(a.items[1].i, a.items[0].i) < std::pair(b.items[1].i, b.items[0].i);
    });
    fix.erase(std::unique(fix.begin(), fix.end()), fix.end());

    std::vector<int64_t> positions;
    for (const auto& v : fields["measure.positions"].items) positions.push_back(v.i);
    std::sort(positions.begin(), positions.end());
    positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
    fields["measure.positions"].items.clear();
    for (int64_t p : positions) fields["measure.positions"].items.push_back(Value::of_int(p));

    if (fields["model.kv_heads"].i == 0) fields["model.kv_heads"] = fields["model.heads"];
    const bool no_biases = find_choice<Biases>(fields["model.biases"].s) == Biases::none;
    Value& vstar = fields["model.v_star"];
    if (no_biases) {
      vstar = Value::of_enum(name_of(VStar::zero));
    } else if (vstar.kind == Value::Kind::Enum && find_choice<VStar>(vstar.s) == VStar::auto_) {
      const bool key_only = find_choice<Biases>(fields["model.biases"].s) == Biases::k;
      vstar = Value::of_enum(name_of(key_only ? VStar::zero : VStar::learned));
    }
    const int64_t d_head = fields["model.d"].i / std::max<int64_t>(1, fields["model.heads"].i);
    if (no_biases || fields["model.k_dims"].i == 0) fields["model.k_dims"] = Value::of_int(no_biases ? 0 : d_head);
    if (no_biases) fields["model.bias_shared"] = Value::of_bool(false);
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace sink
