#include "results/bisect_search.h"

#include <algorithm>
#include <map>

#include "results/metric_diff.h"

namespace sink::results {

const char* side_name(Side side) {
  switch (side) {
    case Side::A: return "A";
    case Side::B: return "B";
    case Side::Between: return "between";
    case Side::Rejected: return "rejected";
    case Side::Failed: return "failed";
  }
  return "?";
}

bool beyond_noise(const Aggregate& x, const Aggregate& y) {
  const double noise = pooled_std(x, y);
  return x.n() > 0 && y.n() > 0 && std::isfinite(noise) && std::abs(y.mean - x.mean) > kNoiseFactor * noise;
}

Side side_of(const Aggregate& config, const Aggregate& a, const Aggregate& b) {
  if (config.n() == 0 || !std::isfinite(config.mean)) return Side::Failed;
  const double to_a = std::abs(config.mean - a.mean), to_b = std::abs(config.mean - b.mean);
  if (to_b < to_a && beyond_noise(config, a)) return Side::B;
  if (to_a <= to_b && beyond_noise(config, b)) return Side::A;
  return Side::Between;
}

namespace {

ChangeSet all_of(size_t n) {
  ChangeSet all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  return all;
}

ChangeSet minus(const ChangeSet& from, const ChangeSet& taken) {
  ChangeSet out;
  std::set_difference(from.begin(), from.end(), taken.begin(), taken.end(), std::back_inserter(out));
  return out;
}

// `c` in n parts of near-equal size, in order.
std::vector<ChangeSet> split(const ChangeSet& c, size_t n) {
  std::vector<ChangeSet> parts;
  size_t start = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t end = start + (c.size() - start) / (n - k);
    parts.emplace_back(c.begin() + static_cast<std::ptrdiff_t>(start), c.begin() + static_cast<std::ptrdiff_t>(end));
    start = end;
  }
  return parts;
}

class Search {
 public:
  // `a` and `b` are the two ends, measured before: applied = {} and every change.
  Search(size_t changes, Trial a, Trial b, const Evaluate& evaluate, size_t max_trials)
      : all_(all_of(changes)), evaluate_(evaluate), budget_(max_trials) {
    result_.changes = changes;
    for (Trial* end : {&a, &b}) {
      end->given = true;
      known_[end->applied] = result_.trials.size();
      result_.trials.push_back(*end);
    }
  }

  // ddmin for a set of changes `c` (in the space of changes applied to A)
  // whose configuration `config(c)` falls on `wanted`; c starts as every change.
  MinimalSet ddmin(const std::function<ChangeSet(const ChangeSet&)>& config, Side wanted) {
    ChangeSet c = all_;
    size_t n = 2;
    while (true) {
      if (c.size() <= 1) return {c, true, true};  // with no change, the configuration is the other end
      const auto parts = split(c, std::min(n, c.size()));
      std::vector<ChangeSet> subsets, complements;
      for (const auto& p : parts) subsets.push_back(p);
      for (const auto& p : parts) complements.push_back(minus(c, p));
      if (auto hit = first_on(subsets, config, wanted); hit.first) {
        c = *hit.second;
        n = 2;
        continue;
      }
      if (result_.budget_exhausted) return {c, true, false};
      if (parts.size() > 2) {  // with two parts, the complements are the parts
        if (auto hit = first_on(complements, config, wanted); hit.first) {
          c = *hit.second;
          n = std::max<size_t>(n - 1, 2);
          continue;
        }
        if (result_.budget_exhausted) return {c, true, false};
      }
      if (parts.size() >= c.size()) return {c, true, true};
      n = std::min(parts.size() * 2, c.size());
    }
  }

  // Every single change alone, applied to A.
  bool no_single_change() {
    std::vector<ChangeSet> singles;
    for (size_t i : all_) singles.push_back({i});
    auto hit = first_on(singles, [](const ChangeSet& c) { return c; }, Side::B);
    return !hit.first && !result_.budget_exhausted;
  }

  BisectResult& result() { return result_; }
  const ChangeSet& all() const { return all_; }

 private:
  // Evaluates what is not known yet of `sets` (as configurations) in one batch and returns the first set whose
  // configuration falls on `wanted`. Stops asking when the budget is spent.
  std::pair<bool, const ChangeSet*> first_on(const std::vector<ChangeSet>& sets,
                                             const std::function<ChangeSet(const ChangeSet&)>& config, Side wanted) {
    std::vector<ChangeSet> ask;
    for (const auto& s : sets) {
      ChangeSet cfg = config(s);
      if (!known_.count(cfg) && std::find(ask.begin(), ask.end(), cfg) == ask.end()) ask.push_back(cfg);
    }
    if (ask.size() > budget_) {
      ask.resize(budget_);
      result_.budget_exhausted = true;
    }
    if (!ask.empty()) {
      budget_ -= ask.size();
      std::vector<Trial> got = evaluate_(ask);
      for (size_t i = 0; i < ask.size(); ++i) {
        Trial t = i < got.size() ? got[i] : Trial{};
        if (i >= got.size()) t.note = "not evaluated";
        t.applied = ask[i];
        known_[ask[i]] = result_.trials.size();
        result_.trials.push_back(std::move(t));
      }
    }
    for (const auto& s : sets) {
      auto it = known_.find(config(s));
      if (it != known_.end() && result_.trials[it->second].side == wanted) return {true, &s};
    }
    return {false, nullptr};
  }

  ChangeSet all_;
  const Evaluate& evaluate_;
  size_t budget_;
  std::map<ChangeSet, size_t> known_;  // configuration -> its trial
  BisectResult result_;
};

}  // namespace

BisectResult bisect(size_t changes, const Trial& a, const Trial& b, const Evaluate& evaluate, size_t max_trials) {
  Trial end_a = a, end_b = b;
  end_a.applied = {};
  end_b.applied = all_of(changes);
  end_a.side = Side::A;
  end_b.side = Side::B;
  Search search(changes, end_a, end_b, evaluate, max_trials);
  BisectResult& r = search.result();
  if (changes == 0) return r;
  const ChangeSet all = search.all();
  r.from_a = search.ddmin([](const ChangeSet& c) { return c; }, Side::B);
  if (!r.budget_exhausted) r.from_b = search.ddmin([&](const ChangeSet& c) { return minus(all, c); }, Side::A);
  // A set of two or more: is there truly no single change that does it (ddmin's minimum is local)?
  if (!r.budget_exhausted && r.from_a.found && r.from_a.changes.size() > 1) {
    r.no_single_change = search.no_single_change();
  }
  return r;
}

}  // namespace sink::results
