// Which keys each query sees, written once: causal attention, a prefix seen both ways (loss.prefix) and a sliding
// window (loss.window). Query i sees the keys j with first_key(i) <= j <= last_key(i); key j is seen by queries
// first_query(j) .. last_query(j) at most (a bound for the kernels that walk keys first: each pair still checks the
// query's key range). Positions are 0-based here, as the kernels index rows.
//
// Each bound is an expression over the integers i (a query), j (a key) and T (the sequence's length) in +, -,
// numbers and the primitives __min, __max and __if_pos (plan/score_functions.h), with the rule's numbers written
// in. Every kernel emitter prints them (kernels/cuda/emit_cuda.cpp as C, kernels/llvm/ as IR, scalar or per lane),
// and the score's n is the number of keys between them. The reference path keeps its own mask
// (runtime/attention/attention.cpp), the oracle the kernels are tested against. A new rule is a new case here,
// and its field in the schema.
#pragma once
#include <cstdint>

#include "plan/value.h"

namespace sink {

struct Visibility {
  ExprNode first_key, last_key;      // over i and T
  ExprNode first_query, last_query;  // over j and T
};

Visibility visibility(int64_t prefix, int64_t window);

// The score's n (the language's `n`): the number of keys the 1-based query i sees, over i and T. The same rule as
// last_key - first_key + 1 (tests/plan/visibility_test.cpp), written in the shortest form, which names the kernels.
ExprNode visible_key_count(int64_t prefix, int64_t window);

}  // namespace sink
