#include "plan/visibility.h"

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

}  // namespace

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
  return v;
}

ExprNode visible_key_count(int64_t prefix, int64_t window) {
  // Keys lo..hi of the 1-based query i: hi = max(i, min(prefix, T)) (a prefix is seen both ways) or i, and
  // lo = max(1, i - window + 1) or 1.
  const ExprNode i = var("i");
  const ExprNode hi = prefix > 0 ? call("__max", i, call("__min", num(prefix), var("T"))) : i;
  if (window <= 0) return hi;
  if (prefix <= 0) return call("__min", i, num(window));
  const ExprNode lo = call("__max", num(1), sub(i, num(window - 1)));
  return add(sub(hi, lo), num(1));
}

}  // namespace sink
