// `sinkc bisect`'s search: which of the changes that turn run A into run B
// move a metric from A's side to B's. Delta debugging (ddmin; Zeller and
// Hildebrandt, "Simplifying and Isolating Failure-Inducing Input", TSE 2002)
// over the changes, in both directions: a smallest set that, applied to A,
// lands on B's side, and a smallest set that, taken from B, lands back on
// A's. Each round's configurations are asked for together, so a round trains
// in parallel; a configuration is never asked for twice.
//
// The search knows nothing of training: a configuration is a set of change
// indices, and `evaluate` says on which side each falls (or that the checker
// rejects it, or that its runs failed: neither counts as either side).
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "results/metrics.h"

namespace sink::results {

enum class Side { A, B, Between, Rejected, Failed };
const char* side_name(Side side);

using ChangeSet = std::vector<size_t>;  // indices of changes, ascending

struct Trial {
  ChangeSet applied;  // A with these of B's changes
  Side side = Side::Failed;
  Aggregate value;     // the metric over the seeds, when measured
  std::string note;    // why rejected or failed
  bool given = false;  // A or B themselves: measured before the search
};

// Evaluates a batch of configurations (distinct, none asked for before); one Trial each, in order.
using Evaluate = std::function<std::vector<Trial>(const std::vector<ChangeSet>& batch)>;

struct MinimalSet {
  ChangeSet changes;         // empty: not found
  bool found = false;        // the set lands on the wanted side (tried)
  bool one_minimal = false;  // and every set with one change fewer was tried and does not
};

struct BisectResult {
  size_t changes = 0;
  MinimalSet from_a;  // applied to A, lands on B's side
  MinimalSet from_b;  // taken from B, lands on A's side (the set of changes taken away)
  // Every single change was tried alone, and none lands on B's side: an interaction.
  bool no_single_change = false;
  std::vector<Trial> trials;  // every configuration, in the order asked for (A and B first, given)
  bool budget_exhausted = false;
};

// sinkc diff's noise rule: x and y differ beyond seed noise (|delta| > 2 x the pooled standard deviation of
// their seeds; never without a second seed on one side).
bool beyond_noise(const Aggregate& x, const Aggregate& y);
// A configuration's side: B's when nearer B's mean and beyond noise of A's, A's when nearer A's and beyond noise
// of B's, between otherwise; failed without a value.
Side side_of(const Aggregate& config, const Aggregate& a, const Aggregate& b);

// `a` and `b`: the measured ends (applied = {} and every change), taken as
// on sides A and B. `max_trials`: how many configurations besides A and B
// may be evaluated.
BisectResult bisect(size_t changes, const Trial& a, const Trial& b, const Evaluate& evaluate, size_t max_trials);

}  // namespace sink::results
