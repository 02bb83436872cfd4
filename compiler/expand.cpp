#include "compiler/expand.h"

#include <algorithm>
#include <fmt/format.h>

namespace sink {
namespace {

void apply(const Program& p, const ast::Statement& s, std::map<std::string, Setting>& fields) {
  auto it = p.typed_statements.find(&s);
  if (it == p.typed_statements.end()) return;  // an error was reported
  if (s.kind == ast::Statement::Kind::Random && fields.count("data.random")) {
    // `random at` statements accumulate, like `fix token`; `data.random = [...]` replaces.
    Setting& random = fields["data.random"];
    for (const auto& v : it->second.items)
      if (std::find(random.value.items.begin(), random.value.items.end(), v) == random.value.items.end())
        random.value.items.push_back(v);
    random.origin = s.span;
    return;
  }
  if (s.kind == ast::Statement::Kind::Fix) {
    Setting& fix = fields["data.fix"];
    fix.value.kind = Value::Kind::List;
    fix.value.items.push_back(it->second);
    fix.origin = s.span;
    return;
  }
  fields[s.path] = {it->second, s.span};
}

std::map<std::string, Setting> settle(const Program& p, const std::vector<ExperimentRef>& chain) {
  std::map<std::string, Setting> fields;
  for (auto ref : chain)
    for (const auto& s : p.experiment(ref).statements) apply(p, s, fields);
  return fields;
}

std::string safe(const std::string& text) {
  std::string out;
  for (char c : text) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '+' || c == '=';
    out += ok ? c : '_';
  }
  return out;
}

// A spec lists runs someone will train, and thousands is already weeks of a
// cluster. The cap keeps a grid of millions of points (a few axes too many,
// or a fuzzer's input), each a full copy of the plan, from exhausting memory
// before anything is reported.
constexpr size_t kMaxRuns = 10000;

}  // namespace

std::string point_name(const std::string& sweep, const std::vector<std::pair<std::string, Value>>& point) {
  std::string name = sweep;
  for (size_t k = 0; k < point.size(); ++k) {
    std::string leaf = point[k].first.substr(point[k].first.rfind('.') + 1);
    name += (k ? "," : ".") + leaf + "=" + safe(point[k].second.str());
  }
  return name;
}

void expand(Program& program, Diagnostics& diags) {
  std::vector<Run> runs;
  for (int m : program.root_modules) {
    const auto& xs = program.modules[m].experiments;
    for (int i = 0; i < static_cast<int>(xs.size()); ++i) {
      const ast::Experiment& x = xs[i];
      auto chain_it = program.chains.find(x.name);
      if (chain_it == program.chains.end()) continue;  // unresolved: reported
      ExperimentRef owner = program.experiments.at(x.name);
      if (owner.module != m || owner.index != i) continue;  // a duplicate name: reported by resolve
      auto base = settle(program, chain_it->second);
      if (!x.is_sweep) {
        runs.push_back({x.name, {m, i}, x.name_span, base, {}});
        continue;
      }
      // Grid product: the last axis varies fastest, like nested loops.
      struct AxisValues {
        std::string path;
        std::vector<std::pair<Value, Span>> values;
      };
      std::vector<AxisValues> axes;
      bool ok = true;
      for (const auto& a : x.axes) {
        AxisValues av{a.path, {}};
        for (const auto& v : a.values.children) {
          auto t = program.typed_axis_values.find(&v);
          if (t == program.typed_axis_values.end())
            ok = false;
          else
            av.values.emplace_back(t->second, v.span);
        }
        if (av.values.empty()) ok = false;
        axes.push_back(std::move(av));
      }
      if (!ok || axes.empty()) {
        if (axes.empty() && !x.syntax_error)
          diags.error(x.name_span, fmt::format("sweep '{}' has no axis (`path in [ ... ]`)", x.name));
        continue;
      }
      size_t points = 1;
      std::string sizes;
      for (const auto& a : axes) {
        points = std::min(points * a.values.size(), kMaxRuns + 1);
        sizes += (sizes.empty() ? "" : " x ") + std::to_string(a.values.size());
      }
      if (runs.size() + points > kMaxRuns) {
        diags.error(
            x.name_span,
            fmt::format("sweep '{}' makes the spec more than {} runs (its axes: {} values)", x.name, kMaxRuns, sizes),
            "split it into smaller sweeps, or sweep fewer values at once");
        continue;
      }
      std::vector<size_t> index(axes.size(), 0);
      while (true) {
        Run run{"", {m, i}, x.name_span, base, {}};
        for (size_t k = 0; k < axes.size(); ++k) {
          const auto& [value, span] = axes[k].values[index[k]];
          run.fields[axes[k].path] = {value, span};
          run.axis_values.emplace_back(axes[k].path, value);
        }
        run.name = point_name(x.name, run.axis_values);
        runs.push_back(std::move(run));
        size_t k = axes.size();
        while (k > 0 && ++index[k - 1] == axes[k - 1].values.size()) index[--k] = 0;
        if (k == 0) break;
      }
    }
  }
  // Command-line overrides apply last, to every run. One that sets a swept
  // field makes the sweep's points identical: say so.
  for (const auto& s : program.overrides)
    for (const auto& m : program.root_modules)
      for (const auto& x : program.modules[m].experiments)
        for (const auto& axis : x.axes)
          if (axis.path == s.path)
            diags.warning(
                s.path_span,
                fmt::format("--set {} overrides an axis of sweep '{}': its runs become identical", s.path, x.name));
  for (auto& run : runs)
    for (const auto& s : program.overrides) apply(program, s, run.fields);

  // Seeds: one run per seed, each its own plan and hash. Counted before any
  // copy is made: ten thousand copies of a run cost seconds (the fuzzer's
  // slowest inputs), and past the limit none of them is used.
  auto seeds_of = [](const Run& run) {
    auto it = run.fields.find("train.seeds");
    return it == run.fields.end() ? int64_t{1} : it->second.value.i;
  };
  size_t total = program.runs.size();
  for (const auto& run : runs) {
    const int64_t n = seeds_of(run);
    total += static_cast<size_t>(std::max<int64_t>(1, n));
    if (n > 1 && total > kMaxRuns) {
      diags.error(run.name_span,
                  fmt::format("with train.seeds = {}, '{}' makes the spec more than {} runs", n, run.name, kMaxRuns),
                  "fewer seeds, or fewer runs in this spec");
      return;
    }
  }
  for (auto& run : runs) {
    const int64_t n = seeds_of(run);
    if (n <= 1) {
      program.runs.push_back(std::move(run));
      continue;
    }
    int64_t seed0 = run.fields["train.seed"].value.i;
    for (int64_t k = 0; k < n; ++k) {
      Run copy = run;
      copy.fields["train.seed"].value = Value::of_int(seed0 + k);
      copy.name = fmt::format("{}.seed={}", run.name, seed0 + k);
      program.runs.push_back(std::move(copy));
    }
  }
  std::map<std::string, Span> names;
  for (const auto& r : program.runs) {
    auto [it, fresh] = names.emplace(r.name, r.name_span);
    if (!fresh) diags.error(r.name_span, fmt::format("two runs are named '{}'", r.name), "sweep values must differ");
  }
}

}  // namespace sink
