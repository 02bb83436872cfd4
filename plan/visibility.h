// Which keys each query sees, written once: causal attention, a prefix seen both ways (loss.prefix), a sliding
// window (loss.window), a window that keeps the sequence's first tokens in sight (loss.window_keeps,
// StreamingLLM's attention sinks), and a dilated window (loss.window_dilation, Longformer's: every d-th key). Query i
// sees the keys j with first_key(i) <= j <= last_key(i) for which pair(i, j) > 0; key j is seen by queries
// first_query(j) .. last_query(j) at most (a bound for the kernels that walk keys first: each pair still checks the
// query's key range). Every bound is nondecreasing in its variable: the kernels take a block of rows' range from its
// first and last row. Positions are 0-based here, as the kernels index rows.
//
// Each bound is an expression over the integers i (a query), j (a key) and T (the sequence's length) in +, -,
// numbers and the primitives __min, __max, __if_pos and __mod (plan/score_functions.h; key_count may also divide,
// as it is only ever computed in the kernels' float arithmetic), with the rule's numbers written in. Every kernel
// emitter prints them (kernels/cuda/emit_cuda.cpp as C, kernels/llvm/ as IR, scalar or per lane), and the score's n is
// key_count. A rule that is a range alone has pair = 1, which the kernels fold away; one that is not (the kept first
// tokens, the dilated window) is checked per pair, and its kernels mask every tile.
//
// A new rule is its field in the schema (plan/schema.cpp, with its default in stdlib/defaults.sink) and its case in
// visibility.cpp, which reads the field from the plan: the runtime carries the rule (AttentionConfig::rule, the one
// place a run's visibility is held) to the kernels and to the reference path's mask. The reference keeps its own
// mask for the rules of prefix and window alone (runtime/attention/attention.cpp), the oracle the kernels are tested
// against; tests/plan/visibility_test.cpp checks every rule against the mask written out by hand.
#pragma once
#include <cstdint>
#include <string>

#include "plan/value.h"

namespace sink {

struct Plan;

struct Visibility {
  ExprNode first_key, last_key;      // over i and T
  ExprNode first_query, last_query;  // over j and T
  ExprNode pair;                     // over i, j and T: > 0 where i sees j inside its range; 1 for every pair
  // The score's n (the language's `n`): the number of keys the 1-based query i sees, over i and T, written in the
  // shortest form, which names the kernels.
  ExprNode key_count;
  // The prefix and the window the rule was written from, for what is not a mask: the loss's prefix (its tokens are
  // not predicted), an export's sliding window, a kernel's name. Causal attention is 0 and 0.
  int64_t prefix = 0, window = 0;

  // Whether some pair inside a query's range is hidden (pair is not the number 1).
  bool checks_pairs() const;
  // Whether it is the rule of its prefix and window alone (not keeping first keys, not dilated).
  bool of_range_alone() const;
  std::string describe() const;
  bool operator==(const Visibility& o) const = default;
};

// The rule of prefix and window alone.
Visibility visibility(int64_t prefix, int64_t window);
// Causal attention to the last `window` keys and the first `kept` (StreamingLLM's streaming evaluation; kept = 0
// is the plain window): what loss.window and loss.window_keeps ask for together.
Visibility streaming_window(int64_t window, int64_t kept);
// The rule a plan's fields ask for (loss.prefix, loss.window, loss.window_keeps, loss.window_dilation).
Visibility visibility(const Plan& plan);

}  // namespace sink
