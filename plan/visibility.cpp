#include "plan/visibility.h"

#include "plan/plan.h"

namespace sink {
namespace {

using Op = ExprNode::Op;
ExprNode var(const char* name) { return {Op::Var, 0, name, {}}; }
ExprNode num(int64_t v) { return {Op::Number, static_cast<double>(v), "", {}}; }
ExprNode call(const char* f, ExprNode a, ExprNode b) { return {Op::Call, 0, f, {std::move(a), std::move(b)}}; }
ExprNode call(const char* f, ExprNode a, ExprNode b, ExprNode c) {
  return {Op::Call, 0, f, {std::move(a), std::move(b), std::move(c)}};
}
ExprNode add(ExprNode a, ExprNode b) { return {Op::Add, 0, "", {std::move(a), std::move(b)}}; }
ExprNode sub(ExprNode a, ExprNode b) { return {Op::Sub, 0, "", {std::move(a), std::move(b)}}; }
ExprNode div(ExprNode a, ExprNode b) { return {Op::Div, 0, "", {std::move(a), std::move(b)}}; }

// The number of keys the 1-based query i sees under prefix and window: hi = max(i, min(prefix, T)) (a prefix is
// seen both ways) or i, lo = max(1, i - window + 1) or 1.
ExprNode range_key_count(int64_t prefix, int64_t window) {
  const ExprNode i = var("i");
  const ExprNode hi = prefix > 0 ? call("__max", i, call("__min", num(prefix), var("T"))) : i;
  if (window <= 0) return hi;
  if (prefix <= 0) return call("__min", i, num(window));
  const ExprNode lo = call("__max", num(1), sub(i, num(window - 1)));
  return add(sub(hi, lo), num(1));
}

// A window that keeps the first `kept` keys in every query's sight (StreamingLLM's attention sinks): the range
// starts at key 0, and a pair is seen where the key is one of the kept or inside the window. Each kept key below
// a query's window adds one to n.
Visibility keeping_first_keys(Visibility v, int64_t window, int64_t kept) {
  const ExprNode j = var("j"), T = var("T");
  v.pair =
      call("__if_pos", sub(num(kept), j), num(1), call("__if_pos", add(sub(j, v.first_key), num(1)), num(1), num(0)));
  // (first_key is over i, and the pair reads it at the query's i.)
  v.first_key = num(0);
  // (A kept key is seen to the end: so is every key, as a bound, which must not fall as j grows.)
  v.last_query = sub(T, num(1));
  // Below the 1-based query i's window: keys 1 .. i - window, of which min(kept, that) are kept.
  v.key_count = add(v.key_count, call("__min", num(kept), call("__max", num(0), sub(var("i"), num(window)))));
  return v;
}

// A dilated window (Longformer's): the window's w keys are every d-th key back from the query, i, i - d, ...,
// i - (w - 1) d. The range is the window spanning (w - 1) d + 1 keys, and a pair in it is seen where d divides
// i - j. The 1-based query i sees the keys i - 1 - m d >= 0 for m < w: min(w, floor((i - 1) / d) + 1).
Visibility dilated_window(int64_t window, int64_t dilation) {
  const ExprNode i = var("i"), j = var("j"), d = num(dilation), before = sub(var("i"), num(1));
  Visibility v = visibility(0, (window - 1) * dilation + 1);
  v.pair = call("__if_pos", sub(num(1), call("__mod", sub(i, j), d)), num(1), num(0));
  v.key_count = call("__min", num(window), add(div(sub(before, call("__mod", before, d)), d), num(1)));
  v.window = window;  // (the window's keys, not the span its range covers)
  return v;
}

}  // namespace

bool Visibility::checks_pairs() const { return !(pair.op == Op::Number && pair.number == 1); }

bool Visibility::of_range_alone() const { return *this == visibility(prefix, window); }

std::string Visibility::describe() const {
  return "keys [" + to_string(first_key) + ", " + to_string(last_key) + "] of query i, queries [" +
         to_string(first_query) + ", " + to_string(last_query) + "] of key j" +
         (checks_pairs() ? ", pairs where " + to_string(pair) + " > 0" : "") + ", n = " + to_string(key_count);
}

Visibility visibility(int64_t prefix, int64_t window) {
  const ExprNode i = var("i"), j = var("j"), last = sub(var("T"), num(1));
  Visibility v;
  // Causal: keys 0..i. A window of w keeps the last w of them.
  v.first_key = window > 0 ? call("__max", num(0), sub(i, num(window - 1))) : num(0);
  // A prefix of p: its queries see all p prefix keys (no key past the sequence when it is shorter than p).
  v.last_key = prefix > 0 ? call("__min", call("__max", i, num(prefix - 1)), last) : i;
  // Key j: seen by queries j.. (and by every query from 0 when it is a prefix key), up to w - 1 after it.
  v.first_query = prefix > 0 ? call("__if_pos", sub(num(prefix), j), num(0), j) : j;
  v.last_query = window > 0 ? call("__min", last, add(j, num(window - 1))) : last;
  v.pair = num(1);
  v.key_count = range_key_count(prefix, window);
  v.prefix = prefix, v.window = window;
  return v;
}

Visibility visibility(const Plan& plan) {
  const Value& window_field = plan.at("loss.window");
  const int64_t prefix = plan.integer("loss.prefix"),
                window = window_field.kind == Value::Kind::Int ? window_field.i : 0;
  const Visibility v = visibility(prefix, window);
  const int64_t kept = plan.integer("loss.window_keeps"), dilation = plan.integer("loss.window_dilation");
  // (The checker refuses a dilation beside a prefix or kept tokens: plan_contradictions.)
  if (window > 0 && dilation > 1) return dilated_window(window, dilation);
  return window > 0 && kept > 0 ? keeping_first_keys(v, window, kept) : v;
}

Visibility streaming_window(int64_t window, int64_t kept) {
  const Visibility v = visibility(0, window);
  return kept > 0 ? keeping_first_keys(v, window, kept) : v;
}

}  // namespace sink
