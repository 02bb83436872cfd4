// `sinkc bisect A B --metric ID`: which of the fields that differ between
// two runs move the metric. The configurations are A's plan with some of B's
// values, checked by the checker's cross-field rules, written as ordinary
// plans and trained by the runtime like any other (cached by plan hash,
// --jobs, --resume); results/bisect_search.h decides what to try next.
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "cli/targets.h"
#include "compiler/contradictions.h"
#include "results/bisect_search.h"
#include "results/bisection_record.h"
#include "results/metric_diff.h"
#include "results/plan_diff.h"

namespace sink::cli {
namespace fs = std::filesystem;
using namespace sink::results;

namespace {

struct Interrupted {};

// Fields that say which seed, not what is trained: the seeds are --seeds.
bool is_seed_field(const std::string& path) { return path == "train.seed" || path == "train.seeds"; }

// A difference that moves as one: fields the checker ties together (a
// normaliser and the score it needs) share a group.
using ChangeGroup = BisectionChange;

Plan with_changes(const Plan& a, const Plan& b, const std::vector<ChangeGroup>& groups, const ChangeSet& applied) {
  Plan p = a;
  for (size_t g : applied)
    for (const auto& f : groups[g].fields) {
      auto it = b.fields.find(f.path);
      if (it == b.fields.end())
        p.fields.erase(f.path);
      else
        p.fields[f.path] = it->second;
    }
  return p;
}

// Singletons, merged where one alone is rejected at either end and a partner makes it sound.
std::vector<ChangeGroup> group_changes(const Plan& a, const Plan& b, const std::vector<FieldChange>& changes) {
  std::vector<ChangeGroup> singles;
  for (const auto& c : changes) singles.push_back({"", {c}});
  const size_t n = singles.size();
  ChangeSet all(n);
  std::iota(all.begin(), all.end(), size_t{0});
  auto sound = [&](const ChangeSet& with) {
    ChangeSet without;
    std::set_difference(all.begin(), all.end(), with.begin(), with.end(), std::back_inserter(without));
    return plan_contradictions(with_changes(a, b, singles, with)).empty() &&
           plan_contradictions(with_changes(a, b, singles, without)).empty();
  };
  std::vector<size_t> leader(n);
  std::iota(leader.begin(), leader.end(), size_t{0});
  auto find = [&](size_t i) {
    while (leader[i] != i) i = leader[i];
    return i;
  };
  for (size_t i = 0; i < n; ++i) {
    if (sound({i})) continue;
    for (size_t j = 0; j < n; ++j)
      if (j != i && sound(i < j ? ChangeSet{i, j} : ChangeSet{j, i})) {
        leader[find(i)] = find(j);
        break;
      }
  }
  std::map<size_t, ChangeGroup> by_leader;
  for (size_t i = 0; i < n; ++i) {
    auto& g = by_leader[find(i)];
    g.fields.push_back(changes[i]);
  }
  std::vector<ChangeGroup> groups;
  for (auto& [leader_index, g] : by_leader) groups.push_back(std::move(g));
  std::sort(groups.begin(), groups.end(),
            [](const ChangeGroup& x, const ChangeGroup& y) { return x.fields.front().path < y.fields.front().path; });
  for (size_t g = 0; g < groups.size(); ++g) groups[g].id = fmt::format("c{}", g + 1);
  return groups;
}

// The plans of one configuration: `base` at seeds seed0, seed0 + 1, ...
std::vector<Plan> seed_plans(Plan base, const std::string& name, int seeds) {
  const int64_t seed0 = base.fields.count("train.seed") ? base.integer("train.seed") : 0;
  std::vector<Plan> plans;
  for (int k = 0; k < seeds; ++k) {
    Plan p = base;
    p.fields["train.seed"] = Value::of_int(seed0 + k);
    p.name = fmt::format("{}.seed={}", name, seed0 + k);
    p.sweep_point.clear();
    plans.push_back(std::move(p));
  }
  return plans;
}

struct Bisection {
  const BisectOptions& options;
  const Trainer& train;
  Plan a, b;
  std::vector<ChangeGroup> groups;
  MetricDef metric;
  Aggregate end_a, end_b;
  size_t runs_trained = 0, runs_cached = 0;

  // Completed under its own name, or under another (the runtime's cache is by content: it links the twin).
  std::optional<fs::path> completed(const Plan& p) const {
    auto done = [&](const fs::path& dir) {
      try {
        if (!is_run_dir(dir.string())) return false;
        RunData r = load_run(dir.string());
        // A stale run (older numerics) is trained again: the trainer passes --retrain-stale.
        return r.status == Status::Completed && !r.stale() && r.plan.hash() == p.hash();
      } catch (const ResultsError&) {
        return false;  // the runtime says what is wrong with it
      }
    };
    if (done(fs::path(options.out) / p.dir_name())) return fs::path(options.out) / p.dir_name();
    std::error_code ec;
    const std::string suffix = "-" + p.hash8();
    for (const auto& e : fs::directory_iterator(options.out, ec)) {
      const std::string leaf = e.path().filename().string();
      if (leaf.size() > suffix.size() && leaf.compare(leaf.size() - suffix.size(), suffix.size(), suffix) == 0 &&
          done(e.path()))
        return e.path();
    }
    return std::nullopt;
  }

  // Trains the plans (those not yet completed: the runtime's cache) and reads them back as one group each.
  std::vector<RunGroup> run(const std::vector<std::vector<Plan>>& configs) {
    const fs::path plan_dir = fs::path(options.out) / ".plans" / "bisect";
    std::error_code ec;
    fs::create_directories(plan_dir, ec);
    std::vector<std::string> files;
    std::map<std::string, fs::path> done;  // plan hash -> its completed run
    for (const auto& plans : configs)
      for (const auto& p : plans) {
        if (auto dir = completed(p)) {
          done[p.hash()] = *dir;
          ++runs_cached;
          continue;
        }
        const fs::path file = plan_dir / (p.dir_name() + ".toml");
        std::ofstream(file) << to_toml(p);
        if (!fs::exists(file)) throw ResultsError(fmt::format("cannot write {}", file.string()));
        files.push_back(file.string());
      }
    if (!files.empty()) {
      runs_trained += files.size();
      if (train(files) == 130) throw Interrupted();
    }
    std::vector<RunGroup> out;
    for (const auto& plans : configs) {
      RunGroup g{seed_base(plans.front().name), {}};
      for (const auto& p : plans) {
        auto it = done.find(p.hash());
        const std::string dir = (it != done.end() ? it->second : fs::path(options.out) / p.dir_name()).string();
        if (is_run_dir(dir)) g.runs.push_back(load_run(dir));
      }
      out.push_back(std::move(g));
    }
    return out;
  }

  std::vector<Trial> evaluate(const std::vector<ChangeSet>& batch) {
    std::vector<Trial> trials(batch.size());
    std::vector<std::vector<Plan>> configs;
    std::vector<size_t> trained;
    for (size_t i = 0; i < batch.size(); ++i) {
      Plan p = with_changes(a, b, groups, batch[i]);
      if (auto errors = plan_contradictions(p); !errors.empty()) {
        trials[i].side = Side::Rejected;
        trials[i].note = errors.front();
        continue;
      }
      std::string tag;
      for (size_t g : batch[i]) tag += groups[g].id;
      // A+c1c3-of-B: which of B's changes, and whose (two bisections from one A number their changes apart).
      configs.push_back(seed_plans(p, seed_base(a.name) + "+" + tag + "-of-" + seed_base(b.name), options.seeds));
      trained.push_back(i);
    }
    auto measured = run(configs);
    for (size_t k = 0; k < trained.size(); ++k) {
      Trial& t = trials[trained[k]];
      t.value = aggregate(measured[k], metric.id);
      t.side = side_of(t.value, end_a, end_b);
      if (t.side == Side::Failed) t.note = t.value.missing.empty() ? "no value" : t.value.missing;
    }
    return trials;
  }
};

std::string attribution(const BisectResult& r, const Bisection& s) {
  auto changes = [&](const ChangeSet& c) {
    std::string out;
    for (size_t g : c) out += (out.empty() ? "" : " and ") + s.groups[g].text();
    return out;
  };
  const std::string moves =
      fmt::format("{} from A's side ({}) to B's ({})", s.metric.label, format_aggregate(s.end_a, s.metric.decimals),
                  format_aggregate(s.end_b, s.metric.decimals));
  std::string out;
  if (r.from_a.changes.size() == 1 && r.from_a.one_minimal) {
    out = fmt::format("{} alone moves {}", changes(r.from_a.changes), moves);
  } else if (r.from_a.one_minimal) {
    out = fmt::format(
        "{} together move {}; {}", changes(r.from_a.changes), moves,
        r.no_single_change ? "no single change does (an interaction)" : "without any one of them they do not");
  } else {
    out = fmt::format(
        "within --max-runs {}, the smallest set found that moves {} is {}; whether fewer changes do "
        "was not decided: raise --max-runs",
        s.options.max_runs, moves, changes(r.from_a.changes));
  }
  if (r.from_b.found && r.from_b.one_minimal) {
    out += r.from_b.changes == r.from_a.changes
               ? "; taking the same from B moves it back."
               : fmt::format("; taking {} from B moves it back.", changes(r.from_b.changes));
  } else {
    out += ".";
  }
  return out;
}

BisectionRecord record_of(const BisectResult& r, const Bisection& s, const std::string& a, const std::string& b) {
  BisectionRecord rec;
  rec.a = a, rec.b = b;
  rec.metric_id = s.metric.id, rec.metric_label = s.metric.label;
  rec.noise_rule = kNoiseRule;
  for (const auto& g : s.groups) rec.changes.push_back({g.id, g.fields});
  auto ids = [&](const ChangeSet& c) {
    std::vector<std::string> out;
    for (size_t g : c) out.push_back(s.groups[g].id);
    return out;
  };
  for (const auto& t : r.trials) {
    BisectionTrial row;
    row.applied = ids(t.applied);
    row.side = side_name(t.side);
    row.given = t.given;
    row.mean = t.value.mean, row.std = t.value.std, row.seeds = t.value.n();
    row.value = t.value.n() > 0            ? format_aggregate(t.value, s.metric.decimals)
                : t.side == Side::Rejected ? "not trained"
                                           : t.value.missing;
    row.note = t.note;
    rec.trials.push_back(std::move(row));
  }
  rec.from_a = {ids(r.from_a.changes), r.from_a.found, r.from_a.one_minimal};
  rec.from_b = {ids(r.from_b.changes), r.from_b.found, r.from_b.one_minimal};
  rec.no_single_change = r.no_single_change;
  rec.budget_exhausted = r.budget_exhausted;
  rec.runs_trained = s.runs_trained, rec.runs_cached = s.runs_cached;
  return rec;
}

}  // namespace

int bisect(const std::string& target_a, const std::string& target_b, const BisectOptions& options,
           const CommonOptions& common, const Trainer& train) {
  try {
    if (options.runs.size() > 2) throw ResultsError("--run: give it once (for every spec) or twice (for A, then B)");
    if (options.seeds < 2) throw ResultsError("--seeds: at least 2, for the noise rule to say anything");
    Bisection s{options, train, {}, {}, {}, metric_by_id(options.metric), {}, {}, 0, 0};
    const TargetOptions to{options.out, common.options(), common.color == 1};
    RunGroup ga = resolve_group(target_a, options.runs.empty() ? "" : options.runs.front(), to);
    RunGroup gb = resolve_group(target_b, options.runs.empty() ? "" : options.runs.back(), to);
    s.a = ga.first().plan;
    s.b = gb.first().plan;
    std::vector<FieldChange> changes;
    for (auto& c : diff_plans(s.a, s.b))
      if (!is_seed_field(c.path)) changes.push_back(std::move(c));
    if (changes.empty()) throw ResultsError("A and B differ in no field but the seed: nothing to bisect");
    s.groups = group_changes(s.a, s.b, changes);

    // The ends, at --seeds seeds each, as ordinary runs.
    auto ends = s.run(
        {seed_plans(s.a, seed_base(s.a.name), options.seeds), seed_plans(s.b, seed_base(s.b.name), options.seeds)});
    s.end_a = aggregate(ends[0], s.metric.id);
    s.end_b = aggregate(ends[1], s.metric.id);
    if (s.end_a.n() < 2 || s.end_b.n() < 2)
      throw ResultsError(fmt::format("A or B has fewer than 2 seeds with {} (A: {}, B: {})", s.metric.id,
                                     s.end_a.missing.empty() ? std::to_string(s.end_a.n()) : s.end_a.missing,
                                     s.end_b.missing.empty() ? std::to_string(s.end_b.n()) : s.end_b.missing));
    Trial end_a{{}, Side::A, s.end_a, "", true};
    Trial end_b{{}, Side::B, s.end_b, "", true};

    BisectResult r;
    std::string sentence;
    if (!beyond_noise(s.end_a, s.end_b)) {
      r = bisect(0, end_a, end_b, {}, 0);
      sentence = fmt::format("A ({}) and B ({}) do not differ in {} beyond seed noise: nothing to attribute.",
                             format_aggregate(s.end_a, s.metric.decimals), format_aggregate(s.end_b, s.metric.decimals),
                             s.metric.label);
    } else {
      const size_t max_trials = static_cast<size_t>(std::max(0, options.max_runs)) / static_cast<size_t>(options.seeds);
      r = bisect(
          s.groups.size(), end_a, end_b, [&](const std::vector<ChangeSet>& batch) { return s.evaluate(batch); },
          max_trials);
      sentence = attribution(r, s);
    }
    auto label = [](const std::string& target, const Plan& p) {
      return is_spec_file(target) ? fmt::format("{} --run {}", target, seed_base(p.name)) : target;
    };
    BisectionRecord record = record_of(r, s, label(target_a, s.a), label(target_b, s.b));
    record.attribution = sentence;
    const std::string kept = save_bisection(record, options.out, seed_base(s.a.name) + "-vs-" + seed_base(s.b.name));
    if (options.format == "json")
      fmt::print("{}\n", to_json(record).dump(2));
    else
      fmt::print("{}", render_text(record, options.format == "markdown"));
    fmt::print(stderr, "sinkc bisect: kept in {} (`sinkc report {}` shows it)\n", kept, options.out);
    return 0;
  } catch (const Interrupted&) {
    fmt::print(stderr, "sinkc bisect: interrupted; the same command with --resume goes on from where it stopped\n");
    return 130;
  } catch (const SpecErrors&) {
    return 1;
  } catch (const ResultsError& e) {
    fmt::print(stderr, "sinkc bisect: {}\n", e.what());
    return 2;
  }
}

}  // namespace sink::cli
